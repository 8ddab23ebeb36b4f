//! Environment maps: what many recordings of one site say about it, as a map an agent can consult. A map is
//! M = (contexts, parameterized actions, workflows, tacit knowledge), written by `trace-host map` into a
//! folder:
//!
//! ```text
//! MAP/map.json                     the map (EnvironmentMap): contexts, workflows, knowledge, relations, figures
//! MAP/contexts/<context_id>.json   one context (PageContext) with its available actions
//! MAP/workflows/<workflow_id>.json one recording's steps (Workflow)
//! MAP/recordings/<task>.json       what each recording contributed (MapSource), so that a merge rebuilds
//! MAP/map.html                     the map drawn as a graph, for a person
//! ```
//!
//! Every id is derived from content (a hash of what the entry is), never from the order of the inputs, so
//! that the same recordings give a byte-identical map and merging a recording into a map equals building
//! from all of them. The rules that derive a map are `trace-analysis`'s (`trace_analysis::map`).

use schemars::JsonSchema;
use serde::{Deserialize, Serialize};

use crate::trajectory::ToolCall;

pub const MAP_FILE: &str = "map.json";
pub const CONTEXTS_DIR: &str = "contexts";
pub const WORKFLOWS_DIR: &str = "workflows";
pub const RECORDINGS_DIR: &str = "recordings";
pub const GRAPH_FILE: &str = "map.html";
/// The placeholder that stands for the site's origin in context patterns (`{site}/item/{item}`).
pub const SITE_PLACEHOLDER: &str = "{site}";

/// `map.json`.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize, JsonSchema)]
pub struct EnvironmentMap {
    /// `map-` and a hash of the map's sources.
    pub id: String,
    /// The site's host (the origin most steps were taken at).
    pub name: String,
    pub description: String,
    /// The origin `{site}` stands for.
    pub base_url: String,
    pub page_contexts: Vec<PageContextEntry>,
    pub workflows: Vec<WorkflowEntry>,
    pub tacit_knowledge: TacitKnowledge,
    /// Edges between actions: done one after the other, or mutually exclusive ways on from one context.
    pub relations: Vec<ActionRelation>,
    pub statistics: MapStatistics,
}

/// A context as `map.json` lists it; its actions are in its own file.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize, JsonSchema)]
pub struct PageContextEntry {
    pub context_id: String,
    pub name: String,
    pub description: String,
    pub pattern: String,
    /// `contexts/<context_id>.json`, relative to the map's folder.
    pub context_mesh_path: String,
    pub action_count: usize,
    /// Task ids of the recordings that visited it, in order.
    pub contributing_recordings: Vec<String>,
}

#[derive(Debug, Clone, PartialEq, Serialize, Deserialize, JsonSchema)]
pub struct WorkflowEntry {
    pub workflow_id: String,
    /// The task's description.
    pub name: String,
    /// `workflows/<workflow_id>.json`, relative to the map's folder.
    pub workflow_mesh_path: String,
    pub recording: String,
    pub step_count: usize,
}

#[derive(Debug, Clone, Default, PartialEq, Serialize, Deserialize, JsonSchema)]
pub struct TacitKnowledge {
    /// Terms of the site and what they mean; only asked of a language model (`--llm`), never guessed.
    pub definitions: Vec<Definition>,
    /// Action sequences that recur within one context across recordings.
    pub procedures: Vec<Procedure>,
}

#[derive(Debug, Clone, PartialEq, Serialize, Deserialize, JsonSchema)]
pub struct Definition {
    pub term: String,
    pub definition: String,
    /// Where it came from: `recordings`, or `model:<name>` for an entry a language model wrote.
    pub source: String,
}

#[derive(Debug, Clone, PartialEq, Serialize, Deserialize, JsonSchema)]
pub struct Procedure {
    /// `proc-` and a hash of its context and actions.
    pub procedure_id: String,
    pub context_id: String,
    /// The steps in words, joined by ", then ".
    pub name: String,
    /// The action ids, in order.
    pub action_ids: Vec<String>,
    /// The recordings it was seen in, by task id.
    pub recordings: Vec<String>,
    /// Always `recordings`: procedures are mined, not written by a model.
    pub source: String,
}

#[derive(Debug, Clone, Copy, PartialEq, Eq, PartialOrd, Ord, Serialize, Deserialize, JsonSchema)]
#[serde(rename_all = "snake_case")]
pub enum RelationKind {
    /// `to` was taken right after `from` (in the same or the next context).
    Sequential,
    /// `from` and `to` are ways on from one context that no visit to it took both of.
    Alternative,
}

#[derive(Debug, Clone, PartialEq, Serialize, Deserialize, JsonSchema)]
pub struct ActionRelation {
    pub kind: RelationKind,
    pub from: String,
    pub to: String,
    /// How many times it was seen (sequential), or how many visits took one of the two (alternative).
    pub count: usize,
}

#[derive(Debug, Clone, Default, PartialEq, Serialize, Deserialize, JsonSchema)]
pub struct MapStatistics {
    pub recordings: usize,
    pub steps: usize,
    pub contexts: usize,
    pub actions: usize,
    pub taken_actions: usize,
    pub potential_actions: usize,
    pub parameterized_actions: usize,
    pub procedures: usize,
    /// Written by a language model (`--llm`); 0 without one.
    #[serde(default)]
    pub definitions: usize,
}

/// `contexts/<context_id>.json`: an abstract location of the site and what can be done there.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize, JsonSchema)]
pub struct PageContext {
    pub context_id: String,
    pub name: String,
    pub description: String,
    /// The normalized URL: `{site}`, then the path with typed (`{int}`, `{uuid}`, `{hex}`, `{id}`,
    /// `{date}`) and named (`{item}`) placeholders, then the query's keys (`?q={q}`), with the values kept
    /// only for keys that select a different kind of page.
    pub pattern: String,
    /// The URLs seen for it, as recorded, sorted (at most 20).
    pub example_urls: Vec<String>,
    pub available_actions: Vec<MapAction>,
}

/// An action of a context: taken by someone, or only seen on the page (potential).
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize, JsonSchema)]
pub struct MapAction {
    /// The template: `Click {link_text}`, `Type {q} into "Search products"`, `Click "Add to cart"`.
    pub action: String,
    /// `act-` and a hash of its context, verb, role and target structure.
    pub action_id: String,
    /// The verb, as the trajectory names it (`click`, `input`, `select_dropdown`, `send_keys`, ...).
    #[serde(rename = "type")]
    pub kind: String,
    /// The target's role (`link`, `button`, `textbox`, ...), when it has one.
    pub role: Option<String>,
    /// The target's structure: its ancestors' roles in the accessibility tree, or the selector's skeleton.
    pub target: String,
    pub is_parameterized: bool,
    pub parameter_name: Option<String>,
    /// Every value seen for the parameter (taken or only offered), sorted.
    pub possible_values: Vec<String>,
    /// Whether any recording took it.
    pub is_taken: bool,
    pub instances: Vec<ActionInstance>,
}

#[derive(Debug, Clone, PartialEq, Serialize, Deserialize, JsonSchema)]
pub struct ActionInstance {
    pub is_taken: bool,
    /// The parameter's value in this instance.
    pub value: Option<String>,
    pub action_description: String,
    pub provenance: Provenance,
}

/// Where an entry of the map comes from.
#[derive(Debug, Clone, PartialEq, Eq, PartialOrd, Ord, Serialize, Deserialize, JsonSchema)]
pub struct Provenance {
    pub task: String,
    /// The step's index in the recording's trajectory (from 0); absent for an action only seen on a page.
    pub step: Option<usize>,
    /// The DOM snapshot the action was seen in (`dom/<id>.html`), when one was.
    pub snapshot: Option<String>,
}

/// `workflows/<workflow_id>.json`: one recording as steps through the map.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize, JsonSchema)]
pub struct Workflow {
    pub workflow_id: String,
    pub task: String,
    pub description: String,
    pub steps: Vec<WorkflowStep>,
}

#[derive(Debug, Clone, PartialEq, Serialize, Deserialize, JsonSchema)]
pub struct WorkflowStep {
    pub step: usize,
    /// The verb, as the trajectory names it.
    pub action: String,
    pub description: String,
    /// The URL the step was taken at.
    pub url: Option<String>,
    pub context_id: Option<String>,
    /// The map's action the step is an instance of (actions on a page only, not navigations).
    pub action_id: Option<String>,
    pub outcome: StepOutcome,
    pub provenance: Provenance,
}

#[derive(Debug, Clone, PartialEq, Serialize, Deserialize, JsonSchema)]
pub struct StepOutcome {
    /// The URL the step left the person on.
    pub url: Option<String>,
    /// The first state-changing request the step caused, as `METHOD URL`.
    pub request: Option<String>,
}

/// `recordings/<task>.json`: what one recording gives a map, read from its bundle once: its steps, the
/// requests they caused, and the pages it saw. A map is a function of its sources alone.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize, JsonSchema)]
pub struct MapSource {
    pub task: String,
    pub description: String,
    pub steps: Vec<SourceStep>,
    pub pages: Vec<SourcePage>,
}

#[derive(Debug, Clone, PartialEq, Serialize, Deserialize, JsonSchema)]
pub struct SourceStep {
    pub call: ToolCall,
    /// The first state-changing request (not `GET`, `HEAD` or `OPTIONS`) between this step and the next.
    pub request: Option<SourceRequest>,
}

#[derive(Debug, Clone, PartialEq, Serialize, Deserialize, JsonSchema)]
pub struct SourceRequest {
    pub method: String,
    pub url: String,
    /// The body's form or JSON fields, secret-named fields and credential values left out.
    pub fields: Vec<(String, String)>,
}

/// A main-frame page as a DOM snapshot showed it.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize, JsonSchema)]
pub struct SourcePage {
    pub url: String,
    /// The snapshot's file, `dom/<id>.html`.
    pub snapshot: String,
    /// When it was taken, milliseconds since the Unix epoch.
    pub ts: f64,
    pub title: Option<String>,
    pub heading: Option<String>,
    /// A hash of the page's element structure (tag paths with ids, no text or other attributes): pages of
    /// one template share it.
    pub skeleton: String,
    /// What a person can act on, from the accessibility tree.
    pub controls: Vec<Control>,
}

/// A link, button, field or option of a page, from its accessibility tree.
#[derive(Debug, Clone, PartialEq, Eq, PartialOrd, Ord, Serialize, Deserialize, JsonSchema)]
pub struct Control {
    pub role: String,
    pub name: String,
    /// The roles (and names of named containers) of its ancestors, outermost first, joined by ` > `.
    pub path: String,
}

/// What `trace-host map --coverage` prints with `--json`: leave-one-out coverage of a site's map.
#[derive(Debug, Clone, Default, PartialEq, Serialize, Deserialize, JsonSchema)]
pub struct MapCoverage {
    pub site: String,
    pub recordings: Vec<RecordingCoverage>,
    /// Sums over the recordings.
    pub total: CoverageCounts,
}

#[derive(Debug, Clone, PartialEq, Serialize, Deserialize, JsonSchema)]
pub struct RecordingCoverage {
    pub task: String,
    #[serde(flatten)]
    pub counts: CoverageCounts,
}

/// Of the held-out recording's actions on pages: how many fall in a context of the map built without it,
/// how many of those match an action of that context, and how many of those have a parameter value the map
/// has seen (an action without a parameter counts as seen, but a link or other listed control only when its
/// one name is the step's).
#[derive(Debug, Clone, Copy, Default, PartialEq, Eq, Serialize, Deserialize, JsonSchema)]
pub struct CoverageCounts {
    pub steps: usize,
    pub in_context: usize,
    pub action_known: usize,
    pub value_seen: usize,
}
