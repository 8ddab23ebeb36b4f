//! The dataset layouts `trace-host dataset` writes from many bundles.
//!
//! TRACE's own (`--format trace`):
//!
//! ```text
//! tasks.jsonl            one TaskLine per task
//! bundles/<task_id>.zip  each task's bundle, redacted unless asked otherwise
//! ```
//!
//! WebArena-Infinity's results layout (`--format webarena-infinity`), with the person as the model:
//!
//! ```text
//! manifest.json                      a JSON array of WebArenaEntry, one per task
//! <task_id>/history.json             the demonstration as a browser-use agent history (BrowserUseHistory)
//! <task_id>/result.json              WebArenaResult
//! <task_id>/screenshots/step_N.png   the screenshot after step N (1-based), where one was captured
//! bundles/<task_id>.zip              the environment to replay, as in TRACE's layout
//! ```

use std::collections::BTreeMap;

use schemars::JsonSchema;
use serde::{Deserialize, Serialize};

use crate::event::ElementDescriptor;
use crate::postprocess::{Checkpoint, CredentialEntry};
use crate::task::{TaskId, TaskType};
use crate::trajectory::ToolCall;

pub const TASKS_FILE: &str = "tasks.jsonl";
pub const BUNDLES_DIR: &str = "bundles";
pub const WEBARENA_MANIFEST_FILE: &str = "manifest.json";
pub const HISTORY_FILE: &str = "history.json";
pub const RESULT_FILE: &str = "result.json";
/// `model` in a WebArena-Infinity entry for a person's demonstration.
pub const HUMAN_MODEL: &str = "human";

pub fn bundle_path(task_id: &TaskId) -> String {
    format!("{BUNDLES_DIR}/{task_id}.zip")
}

/// One line of `tasks.jsonl`.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize, JsonSchema)]
pub struct TaskLine {
    pub task_id: TaskId,
    pub task_description: String,
    pub task_type: TaskType,
    pub website_url: String,
    /// Tool calls, the final `done` included.
    pub num_steps: usize,
    pub duration_seconds: f64,
    #[serde(default)]
    pub answer: Option<String>,
    pub tool_calls: Vec<ToolCall>,
    /// The credentials the trajectory names by placeholder. In a redacted dataset each value is the stand-in
    /// the redacted environment accepts, never what the person typed.
    pub credentials: Vec<CredentialEntry>,
    pub checkpoints: Vec<Checkpoint>,
    /// Why each checkpoint marks progress, one line per checkpoint (`cp1: …`).
    pub checkpoints_reasoning: String,
    /// URL substrings replay may fail at once (`ignored.json`).
    pub ignored: Vec<String>,
    /// The task's bundle, relative to the dataset.
    pub bundle: String,
    /// Whether the bundle and this line were redacted.
    pub redacted: bool,
}

/// One entry of a WebArena-Infinity `manifest.json`.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize, JsonSchema)]
pub struct WebArenaEntry {
    /// Always [`HUMAN_MODEL`].
    pub model: String,
    /// The site the task runs on (its origin), whose replayable environment is `bundles/<task_id>.zip`.
    pub environment: String,
    pub task_id: String,
    /// `easy` (up to 5 steps), `medium` (up to 15) or `hard`, by the demonstration's length.
    pub difficulty: String,
    pub instruction: String,
    /// Seconds the demonstration took.
    pub elapsed: f64,
    pub steps: usize,
    pub verifier_message: String,
}

/// `<task_id>/result.json`.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize, JsonSchema)]
pub struct WebArenaResult {
    pub task_id: String,
    pub model: String,
    /// A demonstration reaches its own goal: always true.
    pub success: bool,
    pub elapsed: f64,
    pub steps: usize,
    #[serde(default)]
    pub answer: Option<String>,
    pub verifier_message: String,
    /// Each checkpoint's id and whether the demonstration reached it.
    pub checkpoints: BTreeMap<String, bool>,
}

/// `<task_id>/history.json`: a browser-use `AgentHistoryList`.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize, JsonSchema)]
pub struct BrowserUseHistory {
    pub history: Vec<BrowserUseStep>,
}

/// One step of a browser-use history: what the "model" chose, what came of it, and the browser's state.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize, JsonSchema)]
pub struct BrowserUseStep {
    pub model_output: BrowserUseModelOutput,
    pub result: Vec<BrowserUseActionResult>,
    pub state: BrowserUseState,
    pub metadata: BrowserUseStepMetadata,
}

#[derive(Debug, Clone, PartialEq, Serialize, Deserialize, JsonSchema)]
pub struct BrowserUseModelOutput {
    pub evaluation_previous_goal: String,
    pub memory: String,
    pub next_goal: String,
    /// One action, as `{"<name>": {params}}`; element actions carry `index: null` (a person's demonstration
    /// has no element index) and the state's `interacted_element` says which element it was.
    pub action: Vec<serde_json::Value>,
}

#[derive(Debug, Clone, Default, PartialEq, Serialize, Deserialize, JsonSchema)]
pub struct BrowserUseActionResult {
    pub is_done: bool,
    #[serde(default)]
    pub success: Option<bool>,
    #[serde(default)]
    pub extracted_content: Option<String>,
    #[serde(default)]
    pub error: Option<String>,
    pub include_in_memory: bool,
}

#[derive(Debug, Clone, PartialEq, Serialize, Deserialize, JsonSchema)]
pub struct BrowserUseState {
    pub url: String,
    pub title: String,
    pub tabs: Vec<BrowserUseTab>,
    /// Per action, the element it acted on (or null).
    pub interacted_element: Vec<Option<BrowserUseElement>>,
    /// Relative to the task's folder: `screenshots/step_N.png`.
    #[serde(default)]
    pub screenshot_path: Option<String>,
}

#[derive(Debug, Clone, PartialEq, Serialize, Deserialize, JsonSchema)]
pub struct BrowserUseTab {
    pub page_id: u32,
    pub url: String,
    pub title: String,
}

/// The element an action touched, in browser-use's `DOMHistoryElement` terms.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize, JsonSchema)]
pub struct BrowserUseElement {
    pub tag_name: String,
    pub xpath: String,
    pub css_selector: String,
    pub attributes: BTreeMap<String, String>,
    #[serde(default)]
    pub highlight_index: Option<u32>,
    /// The recorder's full description, for what browser-use's fields cannot say.
    pub descriptor: ElementDescriptor,
}

#[derive(Debug, Clone, PartialEq, Serialize, Deserialize, JsonSchema)]
pub struct BrowserUseStepMetadata {
    /// Seconds since the Unix epoch.
    pub step_start_time: f64,
    pub step_end_time: f64,
    /// 1-based.
    pub step_number: usize,
}

/// `easy`, `medium` or `hard` by the number of steps a person needed.
pub fn difficulty(steps: usize) -> &'static str {
    match steps {
        0..=5 => "easy",
        6..=15 => "medium",
        _ => "hard",
    }
}
