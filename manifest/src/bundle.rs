//! A bundle is one recorded task as a self-contained directory (or the same tree in a zip):
//!
//! ```text
//! manifest.json        BundleManifest: format version, task, recorder, counts, index of every other file
//! events.jsonl         every EventRecord in order, one JSON object per line
//! recording.har        HAR 1.2 built from the network events; bodies as content._file = resources/<sha256>
//! storage.json         StorageFile: cookies and local/session storage snapshots
//! resources/<sha256>   request and response bodies, content-addressed, each stored once
//! screenshots/<id>.webp screenshots (.png in older bundles, .jpg), named by their event id
//! dom/<id>.html        DOM snapshots, with dom/<id>.a11y.json for the accessibility tree
//! ```
//!
//! Everything here is pure data; reading and checking a bundle on disk lives in `trace_bundle::archive`.

use schemars::JsonSchema;
use serde::{Deserialize, Serialize};

use crate::event::{BodyStored, EventRecord, StorageSnapshot};
use crate::task::{RecorderInfo, TaskId, TaskStatus, TaskType};

pub const MANIFEST_FILE: &str = "manifest.json";
pub const EVENTS_FILE: &str = "events.jsonl";
pub const HAR_FILE: &str = "recording.har";
pub const STORAGE_FILE: &str = "storage.json";
pub const RESOURCES_DIR: &str = "resources";
pub const SCREENSHOTS_DIR: &str = "screenshots";
pub const DOM_DIR: &str = "dom";

/// The value of `format` in every `manifest.json`.
pub const FORMAT_NAME: &str = "trace-bundle";

pub fn resource_path(sha256: &str) -> String {
    format!("{RESOURCES_DIR}/{sha256}")
}

/// The file that holds a stored body (`resources/<sha256>`), when the bundle has one: a body its recorder
/// left out (`omitted`) has none.
pub fn body_file(body: &BodyStored) -> Option<String> {
    (!body.omitted).then(|| resource_path(&body.sha256))
}

pub fn screenshot_path(event_id: u64, extension: &str) -> String {
    format!("{SCREENSHOTS_DIR}/{event_id:06}.{extension}")
}

pub fn dom_snapshot_path(event_id: u64) -> String {
    format!("{DOM_DIR}/{event_id:06}.html")
}

pub fn accessibility_path(event_id: u64) -> String {
    format!("{DOM_DIR}/{event_id:06}.a11y.json")
}

/// `manifest.json`: what the bundle is and an index of every other file in it.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize, JsonSchema)]
pub struct BundleManifest {
    /// Always [`FORMAT_NAME`].
    pub format: String,
    pub format_version: u32,
    pub task: TaskInfo,
    pub recorder: RecorderInfo,
    /// The program that wrote the bundle.
    pub producer: ProducerInfo,
    /// RFC 3339.
    pub started_at: String,
    /// RFC 3339; absent when the recording was interrupted before any event.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub ended_at: Option<String>,
    pub duration_seconds: f64,
    pub counts: Counts,
    /// Every file of the bundle but `manifest.json` itself, sorted by path.
    pub files: Vec<FileEntry>,
    /// The verdict of the bundle's audit (`audit.json`), when it was audited.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub audit: Option<crate::audit::AuditSummary>,
}

#[derive(Debug, Clone, PartialEq, Serialize, Deserialize, JsonSchema)]
pub struct TaskInfo {
    pub id: TaskId,
    pub source: String,
    pub task_type: TaskType,
    pub description: String,
    pub website: String,
    pub status: TaskStatus,
    /// The answer of an information-retrieval task.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub answer: Option<String>,
}

#[derive(Debug, Clone, PartialEq, Serialize, Deserialize, JsonSchema)]
pub struct ProducerInfo {
    pub name: String,
    pub version: String,
}

#[derive(Debug, Clone, Default, PartialEq, Eq, Serialize, Deserialize, JsonSchema)]
pub struct Counts {
    pub events: u64,
    pub pages: u64,
    pub requests: u64,
    pub actions: u64,
    pub bodies: u64,
    /// Bytes of distinct stored bodies.
    pub body_bytes: u64,
    pub screenshots: u64,
    pub dom_snapshots: u64,
}

impl Counts {
    /// Counts what a sequence of events holds. `body_bytes` counts each distinct body once, as stored.
    pub fn of<'a>(events: impl IntoIterator<Item = &'a EventRecord>) -> Counts {
        use crate::event::EventKind as K;
        let mut counts = Counts::default();
        let mut seen_bodies = std::collections::HashSet::new();
        for record in events {
            counts.events += 1;
            match &record.event.kind {
                K::Navigation(nav) if nav.main_frame => counts.pages += 1,
                K::Request(_) => counts.requests += 1,
                K::Action(_) => counts.actions += 1,
                // One left out is not in the bundle.
                K::Body(body) if body.omitted => {}
                K::Body(body) => {
                    counts.bodies += 1;
                    if seen_bodies.insert(body.sha256.clone()) {
                        counts.body_bytes += body.size;
                    }
                }
                K::Screenshot(_) => counts.screenshots += 1,
                K::DomSnapshot(_) => counts.dom_snapshots += 1,
                _ => {}
            }
        }
        counts
    }
}

#[derive(Debug, Clone, PartialEq, Eq, PartialOrd, Ord, Serialize, Deserialize, JsonSchema)]
pub struct FileEntry {
    /// Relative, `/`-separated.
    pub path: String,
    pub size: u64,
    /// Lowercase hex.
    pub sha256: String,
}

/// `storage.json`: every storage snapshot of the recording, in order (see [`crate::event::StoragePhase`]).
#[derive(Debug, Clone, Default, PartialEq, Serialize, Deserialize, JsonSchema)]
pub struct StorageFile {
    pub snapshots: Vec<TimedStorageSnapshot>,
}

#[derive(Debug, Clone, PartialEq, Serialize, Deserialize, JsonSchema)]
pub struct TimedStorageSnapshot {
    /// RFC 3339.
    pub time: String,
    #[serde(flatten)]
    pub snapshot: StorageSnapshot,
}

/// Is `path` a safe relative path inside a bundle? Used for every path a bundle names (index, `_file`) and
/// every zip entry, so that nothing read from a bundle can point outside it.
pub fn is_safe_relative_path(path: &str) -> bool {
    !path.is_empty()
        && !path.starts_with('/')
        && !path.contains('\\')
        && !path.contains('\0')
        && !path.contains(':')
        && path.split('/').all(|part| !part.is_empty() && part != "." && part != "..")
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn safe_paths_stay_inside_the_bundle() {
        for good in ["manifest.json", "resources/ab12", "dom/000001.a11y.json"] {
            assert!(is_safe_relative_path(good), "{good}");
        }
        for bad in ["", "/etc/passwd", "../x", "a/../../x", "a//b", "./a", "C:\\x", "c:/x", "a\\..\\b", "a/"] {
            assert!(!is_safe_relative_path(bad), "{bad}");
        }
    }

    #[test]
    fn file_names_sort_in_event_order() {
        assert_eq!(screenshot_path(7, "png"), "screenshots/000007.png");
        assert!(dom_snapshot_path(9) < dom_snapshot_path(10));
    }
}
