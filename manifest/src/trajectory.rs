//! `trajectory.json`: the demonstration as the calls an agent would make, named as browser-use names its
//! actions, and the credentials typed along the way (which never enter the trajectory; the trajectory
//! refers to each by its placeholder). The rules that derive them from a recording's events are
//! `trace-analysis`'s (`trace_analysis::trajectory`).

use schemars::JsonSchema;
use serde::{Deserialize, Serialize};

use crate::event::ElementDescriptor;
use crate::task::TaskId;

/// `trajectory.json`: the demonstration as the calls an agent would make.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize, JsonSchema)]
pub struct Trajectory {
    pub task_id: TaskId,
    pub tool_calls: Vec<ToolCall>,
}

/// One step of the demonstration, with the evidence it was derived from.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize, JsonSchema)]
pub struct ToolCall {
    /// The action, as `name` and `params`.
    #[serde(flatten)]
    pub action: ToolAction,
    /// The element acted on, as the recorder described it.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub target: Option<ElementDescriptor>,
    /// The tab the call happened in: 0 for the first tab of the recording, then in order of appearance.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub tab: Option<u32>,
    /// The tab's main-frame URL before the call.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub url_before: Option<String>,
    /// The main-frame URL of the tab the call left the person on, once its effects were over.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub url_after: Option<String>,
    /// The DOM snapshot showing the call's result (`dom/<id>.html`), when one was captured.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub dom_snapshot: Option<String>,
    /// The screenshot showing the call's result (`screenshots/<id>.webp`, or `.png`/`.jpg`), when one was captured.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub screenshot: Option<String>,
    /// The `events.jsonl` ids the call was derived from; empty for calls the derivation had to add.
    #[serde(default)]
    pub event_ids: Vec<u64>,
    /// When the call started, milliseconds since the Unix epoch.
    pub ts: f64,
    /// When the call's last act happened (the last key of its typing), milliseconds since the Unix epoch:
    /// the person's pause before the next call counts from it. Absent where `ts` is the whole call, and in
    /// trajectories derived before it was recorded.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub end_ts: Option<f64>,
    /// For typing that a click into the field began (`ts` is the click's): when the first key came. What
    /// the click caused (a search index loaded on focus) had that long to arrive before the typing.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub typing_ts: Option<f64>,
}

/// What a call does, named as browser-use names its actions.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize, JsonSchema)]
#[serde(tag = "name", content = "params", rename_all = "snake_case")]
pub enum ToolAction {
    Navigate {
        url: String,
    },
    Click {
        /// 2 for a double click.
        #[serde(default = "one", skip_serializing_if = "is_one")]
        count: u32,
        /// Keys held during the click ("Control", "Shift", "Alt", "Meta"): a Control-click adds an option
        /// to a multiple selection or opens a link in the background.
        #[serde(default, skip_serializing_if = "Vec::is_empty")]
        modifiers: Vec<String>,
        /// Where the click came, CSS pixels in the viewport of the frame it happened in, when recorded:
        /// where in its element a click acts can matter (a slider's thumb, not its middle; a spot on a
        /// canvas), so a re-run clicks at the same place within the element, wherever the element is.
        #[serde(default, skip_serializing_if = "Option::is_none")]
        coord: Option<[f64; 2]>,
    },
    Input {
        /// The field's whole value, or a `{{credentials.<site>.<field>}}` placeholder for a secret.
        text: String,
    },
    SendKeys {
        /// Modifiers and key joined by `+`: "Enter", "Control+a", "Shift+Tab".
        keys: String,
    },
    Scroll {
        down: bool,
        /// Pages scrolled; absent since the recording has no viewport height (the deltas are exact).
        #[serde(default, skip_serializing_if = "Option::is_none")]
        pages: Option<f64>,
        /// CSS pixels moved, right positive.
        delta_x: f64,
        /// CSS pixels moved, down positive.
        delta_y: f64,
    },
    SelectDropdown {
        /// The chosen options' labels, joined by ", ".
        option: String,
    },
    /// A press on the call's `target`, moved with the button held, and released elsewhere: a node dragged
    /// from a palette onto a canvas, a wire drawn between two ports (browser-use's `drag_drop`).
    DragDrop {
        /// Where the press came, CSS pixels in the viewport of the frame it happened in.
        coord_source_x: f64,
        coord_source_y: f64,
        /// Where the release came, likewise.
        coord_target_x: f64,
        coord_target_y: f64,
        /// The element the release came over (the dragged one is the call's `target`), when one was
        /// there before the drag began.
        #[serde(default, skip_serializing_if = "Option::is_none")]
        element_target: Option<Box<ElementDescriptor>>,
        /// How many moves the pointer made on the way.
        steps: u32,
    },
    UploadFile {
        /// File names only; the recording never has their content.
        files: Vec<String>,
    },
    /// A form submitted by no recorded click or key (not a browser-use action: replay submits the form).
    Submit {},
    GoBack {},
    GoForward {},
    Switch {
        tab: u32,
    },
    Close {
        tab: u32,
    },
    Done {
        text: String,
        success: bool,
    },
}

impl ToolAction {
    /// The `name` this action serializes with.
    pub fn name(&self) -> &'static str {
        match self {
            ToolAction::Navigate { .. } => "navigate",
            ToolAction::Click { .. } => "click",
            ToolAction::Input { .. } => "input",
            ToolAction::SendKeys { .. } => "send_keys",
            ToolAction::Scroll { .. } => "scroll",
            ToolAction::SelectDropdown { .. } => "select_dropdown",
            ToolAction::DragDrop { .. } => "drag_drop",
            ToolAction::UploadFile { .. } => "upload_file",
            ToolAction::Submit {} => "submit",
            ToolAction::GoBack {} => "go_back",
            ToolAction::GoForward {} => "go_forward",
            ToolAction::Switch { .. } => "switch",
            ToolAction::Close { .. } => "close",
            ToolAction::Done { .. } => "done",
        }
    }
}

fn one() -> u32 {
    1
}

fn is_one(count: &u32) -> bool {
    *count == 1
}

/// A secret the person typed, for `credentials.json`: the trajectory refers to it by [`Credential::placeholder`].
#[derive(Clone, PartialEq, Serialize, Deserialize, JsonSchema)]
pub struct Credential {
    /// The host of the page the field is in.
    pub site: String,
    /// The field's name or id, sanitized to letters, digits, `_` and `-` (with `_2`, `_3`, … when the same
    /// field received different secrets).
    pub field: String,
    pub target: ElementDescriptor,
    pub value: String,
}

impl Credential {
    /// What the trajectory says instead of the value.
    pub fn placeholder(&self) -> String {
        credential_placeholder(&self.site, &self.field)
    }
}

// By hand, so that logging a credential never prints it.
impl std::fmt::Debug for Credential {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("Credential")
            .field("site", &self.site)
            .field("field", &self.field)
            .field("target", &self.target.selector)
            .field("value", &"<redacted>")
            .finish()
    }
}

/// `{{credentials.<site>.<field>}}`. The field never contains a dot, so the last dot ends the site.
pub fn credential_placeholder(site: &str, field: &str) -> String {
    format!("{{{{credentials.{site}.{field}}}}}")
}
