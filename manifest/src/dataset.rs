//! The dataset layouts `trace-host dataset` writes from many bundles.
//!
//! TRACE's own (`--format trace`):
//!
//! ```text
//! tasks.jsonl            one TaskLine per task
//! bundles/<task_id>.zip  each task's bundle, redacted unless asked otherwise
//! ```
//!
//! WebArena-Infinity's trajectory layout (`--format webarena-infinity`, and every `trace-replay eval` run),
//! as its dataset card and harness write it, with the person (or the agent evaluated) as the model:
//!
//! ```text
//! data/manifest.json                                   a JSON array of WebArenaEntry, one per task
//! data/<model>/<environment>/<task_id>/history.json    a browser-use agent history (BrowserUseHistory)
//! data/<model>/<environment>/<task_id>/result.json     WebArenaResult
//! data/<model>/<environment>/<task_id>/screenshots/step_N.webp
//!                                                      the page at the start of history step N (none for
//!                                                      step 0, the initial navigation)
//! bundles/<task_id>.zip                                the environment to replay, as in TRACE's layout
//! ```
//!
//! The history is browser-use's (0.11): step 0 is the initial navigation (`navigate` to the start URL,
//! with the goal "Initial navigation" and the title "Initial Actions"), then one step per action, named
//! as browser-use names them. `<environment>` is the website's host and port in kebab case
//! ([`environment_name`]).

use std::collections::BTreeMap;

use schemars::JsonSchema;
use serde::{Deserialize, Serialize};

use crate::audit::ServingPath;
use crate::postprocess::{Checkpoint, CredentialEntry};
use crate::task::{TaskId, TaskType};
use crate::trajectory::ToolCall;

pub const TASKS_FILE: &str = "tasks.jsonl";
pub const BUNDLES_DIR: &str = "bundles";
/// The folder of WebArena-Infinity's layout, and its index within it.
pub const WEBARENA_DATA_DIR: &str = "data";
pub const WEBARENA_MANIFEST_FILE: &str = "data/manifest.json";
pub const HISTORY_FILE: &str = "history.json";
pub const RESULT_FILE: &str = "result.json";
/// `model` in a WebArena-Infinity entry for a person's demonstration.
pub const HUMAN_MODEL: &str = "human";

/// `data/<model>/<environment>/<task_id>`: a task's folder in WebArena-Infinity's layout.
pub fn webarena_task_dir(model: &str, environment: &str, task_id: &str) -> String {
    format!("{WEBARENA_DATA_DIR}/{model}/{environment}/{task_id}")
}

/// A website as WebArena-Infinity names an environment: kebab case, here its host and port
/// (`http://shop.example.com:8080/` → `shop-example-com-8080`).
pub fn environment_name(website: &str) -> String {
    let without_scheme = website.split_once("://").map_or(website, |(_, rest)| rest);
    let authority = without_scheme.split(['/', '?', '#']).next().unwrap_or_default();
    let authority = authority.rsplit('@').next().unwrap_or_default();
    let mut name = String::new();
    for c in authority.chars() {
        if c.is_ascii_alphanumeric() {
            name.push(c.to_ascii_lowercase());
        } else if !name.ends_with('-') {
            name.push('-');
        }
    }
    let name = name.trim_matches('-');
    if name.is_empty() { "site".to_owned() } else { name.to_owned() }
}

/// A model's name as a folder: the agent's name, with anything but letters, digits, `-`, `_` and `.`
/// replaced.
pub fn model_name(agent: &str) -> String {
    let name: String = agent
        .chars()
        .map(|c| if c.is_ascii_alphanumeric() || matches!(c, '-' | '_' | '.') { c } else { '-' })
        .collect();
    let name = name.trim_matches(['-', '.']);
    if name.is_empty() { "agent".to_owned() } else { name.to_owned() }
}

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
    /// The paths an agent can be scored on that the task's audit proved it on (`devtools` for
    /// `trace-replay eval`, `proxy` for BrowserGym's package); empty when it was never audited or failed.
    #[serde(default)]
    pub paths: Vec<ServingPath>,
}

/// One entry of WebArena-Infinity's `data/manifest.json`.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize, JsonSchema)]
pub struct WebArenaEntry {
    /// [`HUMAN_MODEL`] for a demonstration; the agent's name for an evaluation.
    pub model: String,
    /// The website, as [`environment_name`] names it; its replayable environment is `bundles/<task_id>.zip`.
    pub environment: String,
    pub task_id: String,
    pub difficulty: String,
    pub instruction: String,
    /// Seconds, one decimal.
    pub elapsed: f64,
    /// The history's steps, the initial navigation included.
    pub steps: usize,
    pub verifier_message: String,
}

/// A task's `result.json`, field for field as WebArena-Infinity's harness writes it.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize, JsonSchema)]
pub struct WebArenaResult {
    pub task_id: String,
    /// `easy` (up to 5 steps of the person's demonstration), `medium` (up to 15) or `hard`.
    pub difficulty: String,
    pub instruction: String,
    pub passed: bool,
    pub verifier_message: String,
    /// Seconds, one decimal.
    pub elapsed: f64,
    /// The history's steps, the initial navigation included.
    pub steps: usize,
    /// Whether the last step is a `done`.
    pub is_done: bool,
    /// The `done`'s text.
    pub final_result: Option<String>,
    /// One per history step: what went wrong in it, or null.
    pub errors: Vec<Option<String>>,
}

/// `history.json`: a browser-use `AgentHistoryList`.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize, JsonSchema)]
pub struct BrowserUseHistory {
    pub history: Vec<BrowserUseStep>,
}

/// One step of a browser-use history: what the model chose, what came of it, and the browser's state when
/// it chose.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize, JsonSchema)]
pub struct BrowserUseStep {
    pub model_output: Option<BrowserUseModelOutput>,
    pub result: Vec<BrowserUseActionResult>,
    pub state: BrowserUseState,
    pub metadata: Option<BrowserUseStepMetadata>,
    /// What the model was shown; null for the initial navigation and for a person.
    pub state_message: Option<String>,
}

#[derive(Debug, Clone, PartialEq, Serialize, Deserialize, JsonSchema)]
pub struct BrowserUseModelOutput {
    pub evaluation_previous_goal: Option<String>,
    pub memory: Option<String>,
    pub next_goal: Option<String>,
    /// One action, as `{"<name>": {params}}`; element actions carry `index: null` (a recorded action has no
    /// element index) and the state's `interacted_element` says which element it was.
    pub action: Vec<serde_json::Value>,
}

/// browser-use's `ActionResult`, its unset fields left out.
#[derive(Debug, Clone, Default, PartialEq, Serialize, Deserialize, JsonSchema)]
pub struct BrowserUseActionResult {
    pub is_done: bool,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub success: Option<bool>,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub error: Option<String>,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub extracted_content: Option<String>,
    pub include_extracted_content_only_once: bool,
    pub include_in_memory: bool,
}

#[derive(Debug, Clone, PartialEq, Serialize, Deserialize, JsonSchema)]
pub struct BrowserUseState {
    pub tabs: Vec<BrowserUseTab>,
    /// Relative to the task's folder: `screenshots/step_N.webp` (or the screenshot's own `.png`/`.jpg`).
    pub screenshot_path: Option<String>,
    /// Per action, the element it acted on (or null).
    pub interacted_element: Vec<Option<BrowserUseElement>>,
    pub url: String,
    pub title: String,
}

#[derive(Debug, Clone, PartialEq, Serialize, Deserialize, JsonSchema)]
pub struct BrowserUseTab {
    pub url: String,
    pub title: String,
    /// browser-use keeps the last four characters of the DevTools target id; here the tab's number.
    pub target_id: String,
    pub parent_target_id: Option<String>,
}

/// The element an action touched, in browser-use's `DOMInteractedElement` terms (what DevTools ids it had
/// is not recorded).
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize, JsonSchema)]
pub struct BrowserUseElement {
    pub node_id: Option<i64>,
    pub backend_node_id: Option<i64>,
    pub frame_id: Option<String>,
    /// 1, an element.
    pub node_type: u32,
    pub node_value: String,
    /// The tag, upper case.
    pub node_name: String,
    pub attributes: BTreeMap<String, String>,
    pub x_path: String,
    pub element_hash: Option<i64>,
    pub stable_hash: Option<i64>,
    pub bounds: Option<BrowserUseBounds>,
    pub ax_name: Option<String>,
}

#[derive(Debug, Clone, Copy, PartialEq, Serialize, Deserialize, JsonSchema)]
pub struct BrowserUseBounds {
    pub x: f64,
    pub y: f64,
    pub width: f64,
    pub height: f64,
}

#[derive(Debug, Clone, PartialEq, Serialize, Deserialize, JsonSchema)]
pub struct BrowserUseStepMetadata {
    /// Seconds since the Unix epoch.
    pub step_start_time: f64,
    pub step_end_time: f64,
    /// 0 for the initial navigation.
    pub step_number: usize,
    pub step_interval: Option<f64>,
}

/// `easy`, `medium` or `hard` by the number of steps a person needed.
pub fn difficulty(steps: usize) -> &'static str {
    match steps {
        0..=5 => "easy",
        6..=15 => "medium",
        _ => "hard",
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn environments_and_models_are_named_as_folders() {
        assert_eq!(environment_name("http://127.0.0.1:32785/"), "127-0-0-1-32785");
        assert_eq!(environment_name("https://user@Shop.Example.com/cart?x=1"), "shop-example-com");
        assert_eq!(environment_name(""), "site");
        assert_eq!(model_name("gpt-4.1 mini/v2"), "gpt-4.1-mini-v2");
        assert_eq!(model_name("../.."), "agent");
        assert_eq!(webarena_task_dir("human", "shop", "t1"), "data/human/shop/t1");
    }
}
