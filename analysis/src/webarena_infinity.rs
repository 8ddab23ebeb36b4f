//! A trajectory as a task of WebArena-Infinity's trajectory layout (see `trace_manifest::dataset`): a
//! browser-use agent history, the task's result, and which screenshot each step shows. A person's
//! demonstration (`trace-host dataset`) and an agent's session (`trace-replay eval`) are written alike.
//!
//! browser-use records, for each step, the browser's state the model saw *before* acting, the action it
//! chose, and what came of it. Step 0 is the initial navigation to the start URL (the trajectory's first
//! call when it is a `navigate`), with no screenshot; step N's state and `screenshots/step_N.<ext>` are the
//! page as the previous call left it.

use std::collections::BTreeMap;

use trace_manifest::dataset::{
    BrowserUseActionResult, BrowserUseBounds, BrowserUseElement, BrowserUseHistory, BrowserUseModelOutput,
    BrowserUseState, BrowserUseStep, BrowserUseStepMetadata, BrowserUseTab, WebArenaEntry, WebArenaResult, difficulty,
};
use trace_manifest::event::{ElementDescriptor, EventKind};
use trace_manifest::trajectory::{ToolAction, ToolCall};

use crate::evidence::Evidence;

/// How the task ended, as the result says it.
#[derive(Debug, Clone)]
pub struct Outcome {
    pub task_id: String,
    pub instruction: String,
    /// Steps of the person's demonstration, which set the task's difficulty.
    pub demonstration_steps: usize,
    pub passed: bool,
    pub verifier_message: String,
    pub elapsed_seconds: f64,
    /// What went wrong, said on the last step.
    pub error: Option<String>,
}

/// One task of the layout, ready to be written.
#[derive(Debug, Clone)]
pub struct WebArenaTask {
    pub history: BrowserUseHistory,
    pub result: WebArenaResult,
    /// `(screenshots/step_N.<ext>, the bundle's screenshot file)` for each step that has one.
    pub screenshots: Vec<(String, String)>,
}

impl WebArenaTask {
    /// Its line of `data/manifest.json`.
    pub fn entry(&self, model: &str, environment: &str) -> WebArenaEntry {
        WebArenaEntry {
            model: model.to_owned(),
            environment: environment.to_owned(),
            task_id: self.result.task_id.clone(),
            difficulty: self.result.difficulty.clone(),
            instruction: self.result.instruction.clone(),
            elapsed: self.result.elapsed,
            steps: self.result.steps,
            verifier_message: self.result.verifier_message.clone(),
        }
    }
}

/// The task of `calls`, a trajectory whose pages `evidence` holds (for their titles), which began at
/// `start_url` and ended at `ended_at_ms`.
pub fn task(
    calls: &[ToolCall],
    evidence: &Evidence,
    start_url: &str,
    ended_at_ms: f64,
    outcome: Outcome,
) -> WebArenaTask {
    let titles = PageTitles::of(evidence);
    let (initial_url, calls) = match calls.split_first() {
        Some((ToolCall { action: ToolAction::Navigate { url }, .. }, rest)) => (url.clone(), rest),
        _ => (start_url.to_owned(), calls),
    };
    let started_at = calls.first().map_or(ended_at_ms, |call| call.ts) / 1000.0;
    let mut history = vec![initial_navigation(&initial_url, started_at)];
    let mut screenshots = Vec::new();
    let mut tabs: BTreeMap<u32, String> = BTreeMap::from([(0, initial_url.clone())]);
    let mut url = initial_url;
    let mut screenshot_before: Option<&str> = None;
    for (index, call) in calls.iter().enumerate() {
        let step_number = index + 1;
        let tab = call.tab.unwrap_or(0);
        if let Some(before) = &call.url_before {
            url.clone_from(before);
        }
        tabs.entry(tab).or_insert_with(|| url.clone());
        let screenshot_path = screenshot_before.map(|file| {
            let extension = file.rsplit_once('.').map_or("png", |(_, extension)| extension);
            let name = format!("screenshots/step_{step_number}.{extension}");
            screenshots.push((name.clone(), file.to_owned()));
            name
        });
        let state = BrowserUseState {
            tabs: tabs
                .iter()
                .map(|(&number, url)| BrowserUseTab {
                    url: url.clone(),
                    title: titles.at(url, call.ts),
                    target_id: format!("{number:04}"),
                    parent_target_id: None,
                })
                .collect(),
            screenshot_path,
            interacted_element: vec![call.target.as_ref().map(element)],
            url: url.clone(),
            title: titles.at(&url, call.ts),
        };
        let step_end_time = calls.get(index + 1).map_or(ended_at_ms, |next| next.ts) / 1000.0;
        history.push(BrowserUseStep {
            model_output: Some(BrowserUseModelOutput {
                evaluation_previous_goal: None,
                memory: None,
                next_goal: Some(describe(call)),
                action: vec![action(call)],
            }),
            result: vec![result(call)],
            state,
            metadata: Some(BrowserUseStepMetadata {
                step_start_time: call.ts / 1000.0,
                step_end_time,
                step_number,
                step_interval: Some(step_end_time - call.ts / 1000.0),
            }),
            state_message: None,
        });
        if let Some(after) = &call.url_after {
            url.clone_from(after);
            tabs.insert(tab, url.clone());
        }
        if call.screenshot.is_some() {
            screenshot_before = call.screenshot.as_deref();
        }
    }
    let final_result = calls.iter().rev().find_map(|call| match &call.action {
        ToolAction::Done { text, .. } => Some(text.clone()),
        _ => None,
    });
    let is_done = calls.last().is_some_and(|call| matches!(call.action, ToolAction::Done { .. }));
    let mut errors: Vec<Option<String>> = vec![None; history.len()];
    if let Some(last) = errors.last_mut() {
        last.clone_from(&outcome.error);
    }
    let result = WebArenaResult {
        task_id: outcome.task_id,
        difficulty: difficulty(outcome.demonstration_steps).to_owned(),
        instruction: outcome.instruction,
        passed: outcome.passed,
        verifier_message: outcome.verifier_message,
        elapsed: (outcome.elapsed_seconds * 10.0).round() / 10.0,
        steps: history.len(),
        is_done,
        final_result,
        errors,
    };
    WebArenaTask { history: BrowserUseHistory { history }, result, screenshots }
}

/// Step 0, as browser-use records the navigation it makes before the model's first step.
fn initial_navigation(url: &str, at_seconds: f64) -> BrowserUseStep {
    BrowserUseStep {
        model_output: Some(BrowserUseModelOutput {
            evaluation_previous_goal: Some("Start".to_owned()),
            memory: None,
            next_goal: Some("Initial navigation".to_owned()),
            action: vec![serde_json::json!({"navigate": {"url": url, "new_tab": false}})],
        }),
        result: vec![BrowserUseActionResult::default()],
        state: BrowserUseState {
            tabs: Vec::new(),
            screenshot_path: None,
            interacted_element: vec![None],
            url: url.to_owned(),
            title: "Initial Actions".to_owned(),
        },
        metadata: Some(BrowserUseStepMetadata {
            step_start_time: at_seconds,
            step_end_time: at_seconds,
            step_number: 0,
            step_interval: None,
        }),
        state_message: None,
    }
}

/// `{"<name>": {params}}`, browser-use's shape; element actions get `index: null` (a recorded action has
/// no element index; the state's `interacted_element` says which element it was), and `navigate` its
/// `new_tab`.
fn action(call: &ToolCall) -> serde_json::Value {
    let tagged = serde_json::to_value(&call.action).unwrap_or_default();
    let name = tagged["name"].as_str().unwrap_or(call.action.name()).to_owned();
    let mut params = match tagged.get("params") {
        Some(serde_json::Value::Object(params)) => params.clone(),
        _ => serde_json::Map::new(),
    };
    if call.target.is_some() {
        params.insert("index".to_owned(), serde_json::Value::Null);
    }
    if matches!(call.action, ToolAction::Navigate { .. }) {
        params.insert("new_tab".to_owned(), false.into());
    }
    serde_json::json!({ name: params })
}

fn result(call: &ToolCall) -> BrowserUseActionResult {
    match &call.action {
        ToolAction::Done { text, success } => BrowserUseActionResult {
            is_done: true,
            success: Some(*success),
            extracted_content: Some(text.clone()),
            ..BrowserUseActionResult::default()
        },
        _ => BrowserUseActionResult { extracted_content: Some(describe(call)), ..BrowserUseActionResult::default() },
    }
}

/// A sentence for the step: the action's name and what it acted on.
fn describe(call: &ToolCall) -> String {
    let name = call.action.name();
    match (&call.action, &call.target) {
        (ToolAction::Navigate { url }, _) => format!("{name} to {url}"),
        (_, Some(target)) => {
            let label = target.accessible_name.as_deref().or(target.text.as_deref()).filter(|label| !label.is_empty());
            match label {
                Some(label) => format!("{name} {:?} ({})", label, target.selector),
                None => format!("{name} {}", target.selector),
            }
        }
        _ => name.to_owned(),
    }
}

fn element(target: &ElementDescriptor) -> BrowserUseElement {
    let mut attributes = BTreeMap::new();
    let named = [
        ("id", &target.id),
        ("name", &target.name),
        ("type", &target.input_type),
        ("role", &target.role),
        ("aria-label", &target.accessible_name),
    ];
    for (attribute, value) in named {
        if let Some(value) = value {
            attributes.insert(attribute.to_owned(), value.clone());
        }
    }
    BrowserUseElement {
        node_id: None,
        backend_node_id: None,
        frame_id: target.frame_path.last().cloned(),
        node_type: 1,
        node_value: String::new(),
        node_name: target.tag.to_ascii_uppercase(),
        attributes,
        x_path: target.xpath.clone(),
        element_hash: None,
        stable_hash: None,
        bounds: target.bbox.as_ref().map(|b| BrowserUseBounds { x: b.x, y: b.y, width: b.width, height: b.height }),
        ax_name: target.accessible_name.clone(),
    }
}

/// Page titles by URL, as the recording saw them load.
struct PageTitles(Vec<(f64, String, String)>);

impl PageTitles {
    fn of(evidence: &Evidence) -> PageTitles {
        let loads = evidence.events.iter().filter_map(|record| match &record.event.kind {
            EventKind::PageLoad(load) if record.event.frame_id.is_none() => {
                Some((record.event.ts, load.url.clone(), load.title.clone()))
            }
            _ => None,
        });
        PageTitles(loads.collect())
    }

    /// The title `url` had when it last loaded before `ts` (or first loaded, if only later).
    fn at(&self, url: &str, ts: f64) -> String {
        let loads = || self.0.iter().filter(|(_, loaded, _)| loaded == url);
        loads().rfind(|(at, _, _)| *at <= ts).or_else(|| loads().next()).map_or_else(String::new, |l| l.2.clone())
    }
}
