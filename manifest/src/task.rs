//! Task identity and metadata: what a person set out to do, who recorded it, and where the recording stands.
//! Shared by the wire protocol (`start_task`), the host's database and the bundle's `manifest.json`.

use std::fmt;

use schemars::JsonSchema;
use serde::{Deserialize, Serialize};

/// A task's id, chosen by the extension when the task starts, so that a resent `start_task` is recognised
/// rather than creating a second task. It names a directory, so it is restricted to a safe alphabet.
#[derive(Debug, Clone, PartialEq, Eq, Hash, PartialOrd, Ord, Serialize, Deserialize, JsonSchema)]
#[serde(try_from = "String", into = "String")]
pub struct TaskId(String);

impl TaskId {
    pub const MAX_LEN: usize = 64;

    pub fn as_str(&self) -> &str {
        &self.0
    }
}

impl TryFrom<String> for TaskId {
    type Error = String;

    fn try_from(id: String) -> Result<TaskId, String> {
        let allowed = |c: char| c.is_ascii_alphanumeric() || matches!(c, '-' | '_' | '.');
        if id.is_empty() || id.len() > TaskId::MAX_LEN {
            return Err(format!("task id must be 1 to {} characters long", TaskId::MAX_LEN));
        }
        if id.starts_with('.') || !id.chars().all(allowed) {
            return Err(format!(
                "task id {id:?} may contain only ASCII letters, digits, '-', '_' and '.', and may not start with '.'"
            ));
        }
        Ok(TaskId(id))
    }
}

impl std::str::FromStr for TaskId {
    type Err = String;
    fn from_str(s: &str) -> Result<TaskId, String> {
        TaskId::try_from(s.to_owned())
    }
}

impl From<TaskId> for String {
    fn from(id: TaskId) -> String {
        id.0
    }
}

impl fmt::Display for TaskId {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.write_str(&self.0)
    }
}

/// What kind of task was demonstrated: one that changes the site, or one that finds an answer.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize, Deserialize, JsonSchema)]
#[serde(rename_all = "snake_case")]
pub enum TaskType {
    Action,
    InformationRetrieval,
}

impl TaskType {
    pub fn as_str(self) -> &'static str {
        match self {
            TaskType::Action => "action",
            TaskType::InformationRetrieval => "information_retrieval",
        }
    }

    pub fn parse(s: &str) -> Option<TaskType> {
        match s {
            "action" => Some(TaskType::Action),
            "information_retrieval" => Some(TaskType::InformationRetrieval),
            _ => None,
        }
    }
}

/// Where a recording stands.
///
/// `interrupted` means the recording ended without a `stop_task`: the browser closed, the extension
/// disconnected, or the host was killed. Everything acknowledged before that is kept and exportable, and
/// the recording resumes if the extension reconnects and continues the task's sequence.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize, Deserialize, JsonSchema)]
#[serde(rename_all = "snake_case")]
pub enum TaskStatus {
    Recording,
    Stopped,
    Interrupted,
    Discarded,
}

impl TaskStatus {
    pub fn as_str(self) -> &'static str {
        match self {
            TaskStatus::Recording => "recording",
            TaskStatus::Stopped => "stopped",
            TaskStatus::Interrupted => "interrupted",
            TaskStatus::Discarded => "discarded",
        }
    }

    pub fn parse(s: &str) -> Option<TaskStatus> {
        match s {
            "recording" => Some(TaskStatus::Recording),
            "stopped" => Some(TaskStatus::Stopped),
            "interrupted" => Some(TaskStatus::Interrupted),
            "discarded" => Some(TaskStatus::Discarded),
            _ => None,
        }
    }
}

/// The program that made the recording (the extension, or a test recorder) and the browser it ran in.
#[derive(Debug, Clone, Default, PartialEq, Serialize, Deserialize, JsonSchema)]
pub struct RecorderInfo {
    pub name: String,
    pub version: String,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub browser: Option<String>,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub user_agent: Option<String>,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub platform: Option<String>,
}

/// What the person set out to do, as entered when the task started.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize, JsonSchema)]
pub struct TaskStart {
    pub task_id: TaskId,
    /// Free text naming where the task came from, e.g. "self" or a seed id.
    pub source: String,
    pub task_type: TaskType,
    pub description: String,
    /// The URL the demonstration starts at.
    pub website: String,
    pub recorder: RecorderInfo,
    /// Wall-clock start, milliseconds since the Unix epoch.
    pub started_at: f64,
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn task_ids_are_safe_directory_names() {
        for good in ["a", "2026-11-22_shop.1", &"x".repeat(64)] {
            assert!(TaskId::try_from(good.to_owned()).is_ok(), "{good}");
        }
        for bad in ["", ".", "..", "../x", "a/b", "a\\b", "a b", "é", &"x".repeat(65)] {
            assert!(TaskId::try_from(bad.to_owned()).is_err(), "{bad:?}");
        }
    }

    #[test]
    fn task_id_deserialization_rejects_traversal() {
        let err = serde_json::from_str::<TaskId>("\"../../etc\"").unwrap_err();
        assert!(err.to_string().contains("may contain only"), "{err}");
    }
}
