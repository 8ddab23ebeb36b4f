//! One task in WebArena-Infinity's results layout: the demonstration as a browser-use agent history (the
//! person as the model), its result, and a screenshot per step.
//!
//! browser-use records, for each step, the browser's state the model saw *before* acting, the action it
//! chose, and what came of it. So step N's state (and `screenshots/step_N.png`) is the page as the
//! previous call left it: step 1 has no screenshot when the recording began on a blank tab.

use std::collections::BTreeMap;
use std::path::Path;

use anyhow::{Context, Result};
use trace_manifest::archive::Bundle;
use trace_manifest::dataset::{
    self as format, BrowserUseActionResult, BrowserUseElement, BrowserUseHistory, BrowserUseModelOutput,
    BrowserUseState, BrowserUseStep, BrowserUseStepMetadata, BrowserUseTab, WebArenaEntry, WebArenaResult,
};
use trace_manifest::event::{ElementDescriptor, EventKind};
use trace_manifest::trajectory::{ToolAction, ToolCall};

use super::Added;
use crate::atomic;

pub(super) fn write_task(added: &Added, out: &Path) -> Result<WebArenaEntry> {
    let dir = out.join(added.task_id.as_str());
    std::fs::create_dir_all(dir.join("screenshots")).with_context(|| format!("cannot create {}", dir.display()))?;
    let mut bundle = Bundle::open(&added.zip)?;
    let manifest = bundle.manifest()?;
    let calls = &added.derived.trajectory.tool_calls;
    let titles = PageTitles::of(added);

    let mut history = Vec::with_capacity(calls.len());
    let mut tabs: BTreeMap<u32, String> = BTreeMap::new();
    let mut url = "about:blank".to_owned();
    let mut screenshot_before: Option<&str> = None;
    let ended_at = manifest.duration_seconds + calls.first().map_or(0.0, |call| call.ts / 1000.0);
    for (index, call) in calls.iter().enumerate() {
        let step_number = index + 1;
        let tab = call.tab.unwrap_or(0);
        if let Some(before) = &call.url_before {
            url.clone_from(before);
        }
        tabs.entry(tab).or_insert_with(|| url.clone());
        let screenshot_path = match screenshot_before {
            Some(file) => {
                let extension = Path::new(file).extension().and_then(|e| e.to_str()).unwrap_or("png");
                let name = format!("screenshots/step_{step_number}.{extension}");
                let mut target = std::fs::File::create(dir.join(&name))?;
                bundle.copy_to(file, &mut target)?;
                Some(name)
            }
            None => None,
        };
        let state = BrowserUseState {
            url: url.clone(),
            title: titles.at(&url, call.ts),
            tabs: tabs
                .iter()
                .map(|(&page_id, url)| BrowserUseTab { page_id, url: url.clone(), title: titles.at(url, call.ts) })
                .collect(),
            interacted_element: vec![call.target.as_ref().map(element)],
            screenshot_path,
        };
        history.push(BrowserUseStep {
            model_output: BrowserUseModelOutput {
                evaluation_previous_goal: String::new(),
                memory: String::new(),
                next_goal: describe(call),
                action: vec![action(call)?],
            },
            result: vec![result(call)],
            state,
            metadata: BrowserUseStepMetadata {
                step_start_time: call.ts / 1000.0,
                step_end_time: calls.get(index + 1).map_or(ended_at, |next| next.ts / 1000.0),
                step_number,
            },
        });
        if let Some(after) = &call.url_after {
            url.clone_from(after);
            tabs.insert(tab, url.clone());
        }
        if call.screenshot.is_some() {
            screenshot_before = call.screenshot.as_deref();
        }
    }

    let checkpoints: BTreeMap<String, bool> = added
        .derived
        .checkpoints
        .iter()
        .map(|checkpoint| {
            (checkpoint.id.clone(), !trace_analysis::evidence::holds(&checkpoint.predicate, &added.evidence).is_empty())
        })
        .collect();
    let reached = checkpoints.values().filter(|&&reached| reached).count();
    let verifier_message =
        format!("human demonstration: {reached} of {} checkpoints hold on the recording", checkpoints.len());
    let steps = calls.len();
    let result = WebArenaResult {
        task_id: added.task_id.to_string(),
        model: format::HUMAN_MODEL.to_owned(),
        success: true,
        elapsed: manifest.duration_seconds,
        steps,
        answer: manifest.task.answer.clone(),
        verifier_message: verifier_message.clone(),
        checkpoints,
    };
    atomic::write_json(&dir.join(format::HISTORY_FILE), &BrowserUseHistory { history })?;
    atomic::write_json(&dir.join(format::RESULT_FILE), &result)?;
    Ok(WebArenaEntry {
        model: format::HUMAN_MODEL.to_owned(),
        environment: manifest.task.website.clone(),
        task_id: added.task_id.to_string(),
        difficulty: format::difficulty(steps).to_owned(),
        instruction: manifest.task.description.clone(),
        elapsed: manifest.duration_seconds,
        steps,
        verifier_message,
    })
}

/// `{"<name>": {params}}`, browser-use's shape; element actions get `index: null`, since a person's
/// demonstration has no element index (the state's `interacted_element` says which element it was).
fn action(call: &ToolCall) -> Result<serde_json::Value> {
    let tagged = serde_json::to_value(&call.action)?;
    let name = tagged["name"].as_str().context("a tool call without a name")?.to_owned();
    let mut params = match tagged.get("params") {
        Some(serde_json::Value::Object(params)) => params.clone(),
        _ => serde_json::Map::new(),
    };
    if call.target.is_some() {
        params.insert("index".to_owned(), serde_json::Value::Null);
    }
    Ok(serde_json::json!({ name: params }))
}

fn result(call: &ToolCall) -> BrowserUseActionResult {
    match &call.action {
        ToolAction::Done { text, success } => BrowserUseActionResult {
            is_done: true,
            success: Some(*success),
            extracted_content: Some(text.clone()),
            error: None,
            include_in_memory: true,
        },
        _ => BrowserUseActionResult {
            is_done: false,
            success: None,
            extracted_content: Some(describe(call)),
            error: None,
            include_in_memory: true,
        },
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
        tag_name: target.tag.clone(),
        xpath: target.xpath.clone(),
        css_selector: target.selector.clone(),
        attributes,
        highlight_index: None,
        descriptor: target.clone(),
    }
}

/// Page titles by URL, as the recording saw them load.
struct PageTitles(Vec<(f64, String, String)>);

impl PageTitles {
    fn of(added: &Added) -> PageTitles {
        let loads = added.evidence.events.iter().filter_map(|record| match &record.event.kind {
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
