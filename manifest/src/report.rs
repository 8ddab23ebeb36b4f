//! What the command-line tools print with `--json`: one type per report, so that scripts and tests read
//! a contract with a schema (`docs/schema/`) rather than whatever keys a command happened to write.
//!
//! `trace-host`: [`TaskSummary`] (`tasks`), [`Installed`] (`install`, `uninstall`), [`ExportReport`]
//! (`export`, with [`RedactionSummary`]), [`ValidateReport`] (`validate`), [`ImportReport`] (`import`),
//! [`DatasetReport`] (`dataset`), [`ProcessReport`] (`process`). `trace-replay`: [`BundleSummary`]
//! (`inspect`) and [`FidelityReport`] (`run --human`).

use std::collections::BTreeMap;
use std::path::PathBuf;

use schemars::JsonSchema;
use serde::{Deserialize, Serialize};

use crate::bundle::BundleManifest;
use crate::task::{TaskId, TaskStatus, TaskType};

/// `trace-host tasks --json`: one line of the task list.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize, JsonSchema)]
pub struct TaskSummary {
    pub id: TaskId,
    pub status: TaskStatus,
    pub task_type: TaskType,
    /// Who asked for the task (`popup`, a campaign's id, ...).
    pub source: String,
    pub description: String,
    pub website: String,
    /// RFC 3339.
    pub started_at: String,
    /// RFC 3339; absent while recording.
    pub ended_at: Option<String>,
    pub duration_seconds: Option<f64>,
    pub events: u64,
    pub bytes: u64,
    /// Recorded elsewhere and brought in with `trace-host import`.
    pub imported: bool,
}

/// `trace-replay list --json`: one task of a bundle or dataset, as `eval` runs it (and BrowserGym's tasks
/// are registered from it).
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize, JsonSchema)]
pub struct TaskToRun {
    pub task_id: TaskId,
    /// The task's bundle, an absolute path.
    pub bundle: PathBuf,
    pub description: String,
    pub task_type: TaskType,
    pub website: String,
    /// The page the episode opens first: the demonstration's first navigation, else the website; always
    /// `http` or `https`.
    pub start_url: String,
    /// The paths an agent can be scored on that the bundle's audit proved it on (`devtools`, `proxy`);
    /// empty when it was never audited or its audit failed.
    #[serde(default)]
    pub paths: Vec<crate::audit::ServingPath>,
}

/// `trace-host install --json` and `uninstall --json`: one native messaging host manifest written or removed.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize, JsonSchema)]
pub struct Installed {
    /// Which browser (or "custom profile") the manifest is for.
    pub browser: String,
    pub manifest: PathBuf,
}

/// `trace-host process --json`.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize, JsonSchema)]
pub struct ProcessReport {
    pub task_id: TaskId,
    pub bundle: PathBuf,
    pub tool_calls: usize,
    pub credentials: usize,
    pub checkpoints: usize,
    pub ignored: usize,
    /// The files written, relative to the bundle.
    pub files: Vec<String>,
    /// Whether the task is one of the data directory's, recorded as processed in `tasks.db`.
    pub recorded: bool,
    /// What became of the checkpoints' audit.
    pub audit: ProcessAudit,
}

/// Whether `trace-host process` audited the checkpoints it chose (`trace-replay audit --prune`).
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize, JsonSchema)]
#[serde(tag = "status", rename_all = "snake_case")]
pub enum ProcessAudit {
    /// `--no-audit`, or processing on the way to something else (an export, the review page).
    NotAsked,
    /// It could not run here, and why (no Chromium, no `trace-replay`).
    Skipped { reason: String },
    /// Audited: `audit.json` is in the bundle.
    Audited {
        valid: bool,
        /// Checkpoints proposed (by the rules or a model) and dropped because they did not discriminate.
        dropped: usize,
        /// Why the bundle is not valid, a line each.
        #[serde(default, skip_serializing_if = "Vec::is_empty")]
        problems: Vec<String>,
    },
}

/// `trace-host export --json`.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize, JsonSchema)]
pub struct ExportReport {
    pub task_id: TaskId,
    pub status: TaskStatus,
    /// The file written (a bundle zip or a WACZ, as `format` says).
    pub zip: PathBuf,
    /// What was written; absent in reports older than `--format`, which wrote only zips.
    #[serde(default)]
    pub format: ExportFormat,
    pub files: usize,
    pub bytes: u64,
    /// For `wacz`: the HTTP exchanges archived, each a response and a request record of its WARC.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub exchanges: Option<usize>,
    /// For `wacz`: the recorded exchanges left out of it because their URL is no URL (a line break or
    /// another control character in it, which no browser sends: the bundle was made or altered by hand).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub exchanges_left_out: Option<usize>,
    /// Whether the task was post-processed on the way (it had not been).
    pub processed: bool,
    /// Present for `--redact`.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub redaction: Option<RedactionSummary>,
}

/// What `trace-host export` writes.
#[derive(Debug, Clone, Copy, Default, PartialEq, Eq, Serialize, Deserialize, JsonSchema)]
#[serde(rename_all = "snake_case")]
pub enum ExportFormat {
    /// The bundle as a zip, in the layout of a bundle directory.
    #[default]
    Zip,
    /// A WACZ 1.1.1 web archive (WARC records, a CDXJ index, the pages), for the webrecorder tools.
    Wacz,
}

impl ExportFormat {
    pub fn as_str(self) -> &'static str {
        match self {
            ExportFormat::Zip => "zip",
            ExportFormat::Wacz => "wacz",
        }
    }
}

/// What redaction did to a bundle.
#[derive(Debug, Clone, Default, PartialEq, Serialize, Deserialize, JsonSchema)]
pub struct RedactionSummary {
    /// Distinct secrets, by kind.
    pub secrets: BTreeMap<SecretKind, usize>,
    /// Occurrences replaced, over all files.
    pub replacements: usize,
    /// Files in which something was replaced.
    pub files_changed: usize,
    /// Values that looked like secrets, no rule chose, and the person chose to redact (counted among the
    /// `shape` secrets too).
    #[serde(default)]
    pub suspects_redacted: usize,
    /// Values that looked like secrets and the person chose to keep.
    #[serde(default)]
    pub suspects_allowed: usize,
}

/// Where a secret was found, which names its placeholder (`trace-redacted-<kind>-<name>-<n>`).
#[derive(Debug, Clone, Copy, PartialEq, Eq, PartialOrd, Ord, Serialize, Deserialize, JsonSchema)]
#[serde(rename_all = "snake_case")]
pub enum SecretKind {
    /// Typed by the person into a credential field.
    Credential,
    Cookie,
    Header,
    UrlParameter,
    /// A form field, JSON field or hidden input.
    BodyField,
    Storage,
    /// Told by its shape: a JSON Web Token, or a key of a common service.
    Shape,
}

impl SecretKind {
    /// The kind as placeholders and messages write it.
    pub fn as_str(self) -> &'static str {
        match self {
            SecretKind::Credential => "credential",
            SecretKind::Cookie => "cookie",
            SecretKind::Header => "header",
            SecretKind::UrlParameter => "url-parameter",
            SecretKind::BodyField => "body-field",
            SecretKind::Storage => "storage",
            SecretKind::Shape => "shape",
        }
    }
}

/// `trace-host validate --json`.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize, JsonSchema)]
pub struct ValidateReport {
    pub bundle: PathBuf,
    pub valid: bool,
    pub files_checked: usize,
    pub bytes_checked: u64,
    pub problems: Vec<Problem>,
}

/// One thing wrong with a bundle.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize, JsonSchema)]
pub struct Problem {
    /// The file concerned, or "" for the bundle as a whole.
    pub file: String,
    pub message: String,
}

/// `trace-host import --json`.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize, JsonSchema)]
pub struct ImportReport {
    pub task_id: TaskId,
    pub files: usize,
    pub bytes: u64,
    pub events: usize,
}

/// `trace-host dataset --json`.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize, JsonSchema)]
pub struct DatasetReport {
    pub out: PathBuf,
    pub format: DatasetFormat,
    pub redacted: bool,
    pub tasks: Vec<TaskId>,
    pub skipped: Vec<Skipped>,
    /// Tasks added though their checkpoints failed their audit (`--allow-invalid`).
    #[serde(default, skip_serializing_if = "Vec::is_empty")]
    pub invalid: Vec<TaskId>,
    /// Tasks added that were never audited (only what the recording alone shows was checked).
    #[serde(default, skip_serializing_if = "Vec::is_empty")]
    pub unaudited: Vec<TaskId>,
    /// Valid tasks whose audit did not prove them on the proxy path (BrowserGym's package): an agent can be
    /// scored on them with `trace-replay eval` only.
    #[serde(default, skip_serializing_if = "Vec::is_empty")]
    pub devtools_only: Vec<TaskId>,
}

/// The layout a dataset is written in.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize, Deserialize, JsonSchema)]
#[serde(rename_all = "kebab-case")]
pub enum DatasetFormat {
    /// `tasks.jsonl` and the bundles.
    Trace,
    /// WebArena-Infinity's results layout: `manifest.json`, and per task a browser-use `history.json`,
    /// `result.json` and `screenshots/step_N.webp` (or the screenshot's own `.png`/`.jpg`).
    WebarenaInfinity,
}

/// A source left out of a dataset, and why.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize, JsonSchema)]
pub struct Skipped {
    pub source: String,
    pub reason: String,
}

/// `trace-replay inspect --json`: what a bundle holds.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize, JsonSchema)]
pub struct BundleSummary {
    pub manifest: BundleManifest,
    /// The title of each page of the recording, in order.
    pub pages: Vec<String>,
    /// Each host (with its port, if any) and its requests, the busiest first.
    pub hosts: Vec<HostSummary>,
    /// Each entry of the ignore list, in its order, with the recorded requests replay fails because of it.
    pub ignored: Vec<IgnoredSummary>,
}

#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize, JsonSchema)]
pub struct HostSummary {
    pub host: String,
    pub requests: u64,
    pub body_bytes: u64,
}

/// One ignore-list entry and the recorded requests it removes.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize, JsonSchema)]
pub struct IgnoredSummary {
    pub pattern: String,
    pub requests: u64,
    pub body_bytes: u64,
}

/// `trace-replay run --human --json`: how faithfully the demonstration re-ran in the replayed site.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize, JsonSchema)]
pub struct FidelityReport {
    pub steps_total: usize,
    pub steps_passed: usize,
    pub steps_failed: usize,
    pub failures: Vec<StepFailure>,
    pub requests: RequestCounts,
    /// Requests nothing recorded answered while the steps ran: each fails the run.
    pub misses: Vec<String>,
    /// Requests nothing recorded answered once the last step's page had settled (a beacon sent as the
    /// page unloads when the browser closes): listed, but they do not fail the run.
    #[serde(default)]
    pub misses_after_last_step: Vec<String>,
    /// Attempts to reach past the recording, each refused offline (let through only with
    /// `--allow-network-fallback`): a request to an origin (scheme, host and port) the recording never sent
    /// one to, which is also a miss; with the fallback, every miss; a WebSocket the recording does not
    /// hold; a WebRTC connection given ICE servers or a remote candidate. A miss on an origin the recording
    /// did reach is a gap in the recording, counted in `misses` only. Connections the browser opens ahead
    /// of a request (preconnects) carry none and are not counted. Any fails the run.
    pub live_attempts: u64,
    /// The recorded WebSocket frames played back to the replayed pages, and how the pages' own frames
    /// matched the recording's.
    #[serde(default)]
    pub websocket_frames: WebSocketFrames,
    pub steps: Vec<StepOutcome>,
}

/// WebSocket frames of a re-run, counted by the page script that plays sockets back.
#[derive(Debug, Clone, Default, PartialEq, Serialize, Deserialize, JsonSchema)]
pub struct WebSocketFrames {
    /// The server's recorded frames played to the pages.
    pub played: u64,
    /// Frames the pages sent that equal one the person's page sent.
    pub matched: u64,
    /// Frames the pages sent that equal none (answered as the earliest recorded frame of their kind not
    /// matched yet, or with nothing).
    pub unmatched: u64,
    /// Frames the pages sent on their own clock that equal none: acknowledgements and liveness signals,
    /// answered with nothing. Not a departure from the recording: a page counts and times them itself.
    #[serde(default)]
    pub chatter: u64,
}

impl FidelityReport {
    /// True when every step passed and nothing tried to reach the network.
    pub fn is_faithful(&self) -> bool {
        self.steps_failed == 0 && self.live_attempts == 0 && self.misses.is_empty()
    }
}

#[derive(Debug, Clone, PartialEq, Serialize, Deserialize, JsonSchema)]
pub struct StepFailure {
    pub step: usize,
    pub name: String,
    pub reason: String,
}

/// How replay answered the requests of a run, by level.
#[derive(Debug, Clone, Default, PartialEq, Serialize, Deserialize, JsonSchema)]
pub struct RequestCounts {
    pub exact: u64,
    pub canonical: u64,
    pub fuzzy: u64,
    pub ignored: u64,
    pub missed: u64,
}

#[derive(Debug, Clone, PartialEq, Serialize, Deserialize, JsonSchema)]
pub struct StepOutcome {
    pub step: usize,
    pub name: String,
    pub passed: bool,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub reason: Option<String>,
    /// How the element was found.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub located_by: Option<LocatedBy>,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub url_expected: Option<String>,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub url_reached: Option<String>,
    /// The share of pixels that differ from the recorded screenshot (0 to 1), when there is one of the
    /// replayed screen's size.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub screenshot_difference: Option<f64>,
    /// The share of the recorded page's text (by characters) that the replayed page showed after the step
    /// (0 to 1), when the recording has a DOM snapshot for it; under `trace_analysis::fidelity`'s tolerance
    /// the step fails.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub text_shown: Option<f64>,
}

/// How a re-run found a step's element: by the recorded selector, by its XPath, or at its recorded position
/// (inside cross-origin iframes).
#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize, Deserialize, JsonSchema)]
#[serde(rename_all = "snake_case")]
pub enum LocatedBy {
    Selector,
    Xpath,
    Position,
}

impl LocatedBy {
    pub fn as_str(self) -> &'static str {
        match self {
            LocatedBy::Selector => "selector",
            LocatedBy::Xpath => "xpath",
            LocatedBy::Position => "position",
        }
    }
}
