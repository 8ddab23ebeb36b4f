//! Environment maps (`trace_manifest::map`), derived from recordings by fixed rules: the same recordings
//! always give the same map, byte for byte, and a map built from some recordings and then merged with more
//! equals one built from all of them, because a map is a function of its sources ([`MapSource`]) alone and
//! every id is a hash of content.
//!
//! - **Contexts** are URL patterns ([`patterns`]), named by their pages' titles.
//! - **Actions** of a context are keyed by verb, the target's role and structure (its ancestors' roles in
//!   the accessibility tree, or its selector's skeleton), and, except for roles that come in lists of like
//!   things (links, options, tabs, ...), the target's name. Instances are the steps that took an action
//!   (taken) and the controls of the context's pages nobody used (potential). An action is parameterized
//!   by what differs between its instances: the text typed, the option chosen, the link's name, or a field
//!   of the request it sent.
//! - **Workflows** are the recordings' steps; **procedures** are runs of actions within one visit to a
//!   context that recur in two or more recordings; **relations** are actions taken one after another
//!   (sequential) and ways out of one context that no visit took together (alternative).
//! - **Definitions** are never derived here: only a language model writes them, asked [`definitions`]'s
//!   question about the built map.

pub mod definitions;
mod patterns;
#[cfg(feature = "native")]
pub mod source;

use std::collections::{BTreeMap, BTreeSet};

use sha2::{Digest, Sha256};
use trace_manifest::map::{
    ActionInstance, ActionRelation, CONTEXTS_DIR, CoverageCounts, EnvironmentMap, MapAction, MapCoverage, MapSource,
    MapStatistics, PageContext, PageContextEntry, Procedure, Provenance, RecordingCoverage, RelationKind, SourcePage,
    StepOutcome, TacitKnowledge, WORKFLOWS_DIR, Workflow, WorkflowEntry, WorkflowStep,
};
use trace_manifest::trajectory::ToolAction;

pub use patterns::Rules;

use crate::evidence::collapse_whitespace;

/// Verbs of actions on a page; the other steps (navigations, scrolls, tabs, `done`) are workflow steps only.
const PAGE_VERBS: &[&str] = &["click", "input", "select_dropdown", "send_keys", "submit", "upload_file"];
/// Roles whose elements come in lists of like things: their actions are generalized over the name.
const LISTED_ROLES: &[&str] =
    &["link", "option", "menuitem", "menuitemradio", "menuitemcheckbox", "tab", "treeitem", "radio"];
/// Names are clipped to this many characters.
const MAX_NAME: usize = 120;
/// The longest run of actions a procedure is: runs are counted for every start and length, so a long visit
/// (a single-page app whose URL never changes) would cost the cube of its length without a bound.
const MAX_PROCEDURE_LEN: usize = 8;
/// A context lists at most this many of the URLs seen for it.
const MAX_EXAMPLE_URLS: usize = 20;

/// A map and the files beside it.
#[derive(Debug, Clone, PartialEq)]
pub struct BuiltMap {
    pub map: EnvironmentMap,
    pub contexts: Vec<PageContext>,
    pub workflows: Vec<Workflow>,
}

/// What identifies an action of a context.
#[derive(Debug, Clone, PartialEq, Eq, PartialOrd, Ord)]
struct ActionKey {
    pattern: String,
    verb: String,
    role: Option<String>,
    target: String,
    /// The target's name (and a key's keys), except for [`LISTED_ROLES`].
    label: Option<String>,
}

/// Where an action's parameter comes from.
#[derive(Debug, Clone, PartialEq)]
enum Parameter {
    None,
    Text(String),
    Option(String),
    Files(String),
    Name(String),
    Field(String),
}

/// What a step acted on: its context, verb, role and name, its structure in the accessibility tree of the
/// page it was taken on (when a snapshot of that page has it), and its selector's skeleton.
#[derive(Debug, Clone)]
struct StepTarget {
    pattern: String,
    verb: &'static str,
    role: Option<String>,
    name: Option<String>,
    control: Option<String>,
    selector: Option<String>,
}

/// A target as a step's recording tells it without its page: context, verb, role, selector skeleton.
type SelectorSeen = (String, &'static str, Option<String>, String);

/// What the recordings show of one context: its URLs, the recordings that were there, its pages.
#[derive(Debug, Clone, Default)]
struct Visited<'a> {
    urls: BTreeSet<&'a str>,
    recordings: BTreeSet<&'a str>,
    pages: Vec<&'a SourcePage>,
}

/// One recording's stay in one context: consecutive steps taken at its pages, with the actions taken there
/// and whether each left the context.
#[derive(Debug, Clone)]
struct Visit {
    context: String,
    task: String,
    taken: Vec<(String, bool)>,
}

/// One instance of an action, before it is written.
#[derive(Debug, Clone)]
struct Seen<'a> {
    taken: bool,
    /// The target's name.
    name: Option<String>,
    step: Option<&'a trace_manifest::map::SourceStep>,
    provenance: Provenance,
    description: String,
}

/// Builds the map of `sources` (any order: they are sorted by task).
pub fn build(sources: &[MapSource]) -> BuiltMap {
    Derivation::new(sources).built()
}

/// Leave-one-out coverage: for each recording, the map of all the others, walked along its steps.
pub fn coverage(sources: &[MapSource]) -> MapCoverage {
    let mut sorted: Vec<&MapSource> = sources.iter().collect();
    sorted.sort_by(|a, b| a.task.cmp(&b.task));
    let mut report = MapCoverage { site: host_of(&site_origin(&sorted)), ..MapCoverage::default() };
    for (held_out, source) in sorted.iter().enumerate() {
        let others: Vec<MapSource> =
            sorted.iter().enumerate().filter(|(i, _)| *i != held_out).map(|(_, s)| (*s).clone()).collect();
        let derivation = Derivation::new(&others);
        let mut counts = CoverageCounts::default();
        for index in 0..source.steps.len() {
            let Some((key, name)) = derivation.key_of_step(source, index) else { continue };
            counts.steps += 1;
            if !derivation.visited.contains_key(&key.pattern) {
                continue;
            }
            counts.in_context += 1;
            let Some((parameter, values)) = derivation.parameters.get(&key) else { continue };
            counts.action_known += 1;
            let value = value_of(parameter, &source.steps[index], name.as_deref());
            // An action of a listed role that kept one name is that one link: another name is not seen.
            let seen = match parameter {
                Parameter::None if key.label.is_none() => {
                    name.as_deref().is_some_and(|name| derivation.names_of(&key).contains(name))
                }
                Parameter::None => true,
                _ => value.is_some_and(|value| values.contains(&value)),
            };
            if seen {
                counts.value_seen += 1;
            }
        }
        report.total.steps += counts.steps;
        report.total.in_context += counts.in_context;
        report.total.action_known += counts.action_known;
        report.total.value_seen += counts.value_seen;
        report.recordings.push(RecordingCoverage { task: source.task.clone(), counts });
    }
    report
}

/// The value a step gives an action's parameter.
fn value_of(parameter: &Parameter, step: &trace_manifest::map::SourceStep, name: Option<&str>) -> Option<String> {
    match (parameter, &step.call.action) {
        (Parameter::Text(_), ToolAction::Input { text }) => Some(text.clone()),
        (Parameter::Option(_), ToolAction::SelectDropdown { option }) => Some(option.clone()),
        (Parameter::Files(_), ToolAction::UploadFile { files }) => Some(files.join(", ")),
        (Parameter::Name(_), _) => name.map(str::to_owned),
        (Parameter::Field(field), _) => {
            step.request.as_ref()?.fields.iter().find(|(name, _)| name == field).map(|(_, value)| value.clone())
        }
        _ => None,
    }
}

/// The sources, the rules learned from them, and every action's key with its parameter.
struct Derivation<'a> {
    sources: Vec<&'a MapSource>,
    site: String,
    rules: Rules,
    /// Every context, by pattern: what was seen of it.
    visited: BTreeMap<String, Visited<'a>>,
    /// A target's structure in the accessibility tree, by its context, verb, role and selector skeleton,
    /// learned from the steps whose page was captured: a step taken before its page was (the recorder
    /// throttles captures) gets its structure from a like step of any recording.
    structures: BTreeMap<SelectorSeen, String>,
    groups: BTreeMap<ActionKey, Vec<Seen<'a>>>,
    /// Each action's parameter and the values seen for it.
    parameters: BTreeMap<ActionKey, (Parameter, BTreeSet<String>)>,
}

impl<'a> Derivation<'a> {
    fn new(sources: &'a [MapSource]) -> Derivation<'a> {
        let mut sources: Vec<&MapSource> = sources.iter().collect();
        sources.sort_by(|a, b| a.task.cmp(&b.task));
        let site = site_origin(&sources);
        let pages = sources.iter().flat_map(|s| &s.pages).map(|page| (page.url.as_str(), page.skeleton.as_str()));
        let rules = Rules::learn(&site, pages);
        let mut derivation = Derivation {
            sources,
            site,
            rules,
            visited: BTreeMap::new(),
            structures: BTreeMap::new(),
            groups: BTreeMap::new(),
            parameters: BTreeMap::new(),
        };
        derivation.structures = derivation.learn_structures();
        derivation.collect();
        derivation
    }

    /// For each (context, verb, role, selector skeleton), the structure most of its steps found (ties to
    /// the smallest).
    fn learn_structures(&self) -> BTreeMap<SelectorSeen, String> {
        let mut counts: BTreeMap<SelectorSeen, BTreeMap<String, usize>> = BTreeMap::new();
        for source in &self.sources {
            for index in 0..source.steps.len() {
                let Some(target) = self.target_of_step(source, index) else { continue };
                if let (Some(control), Some(selector)) = (target.control, target.selector) {
                    let seen = (target.pattern, target.verb, target.role, selector);
                    *counts.entry(seen).or_default().entry(control).or_default() += 1;
                }
            }
        }
        counts
            .into_iter()
            .filter_map(|(seen, structures)| {
                let most = structures.values().copied().max()?;
                structures.into_iter().find(|(_, count)| *count == most).map(|(structure, _)| (seen, structure))
            })
            .collect()
    }

    /// The target names an action's instances had.
    fn names_of(&self, key: &ActionKey) -> BTreeSet<&str> {
        self.groups.get(key).into_iter().flatten().filter_map(|seen| seen.name.as_deref()).collect()
    }

    fn collect(&mut self) {
        let sources = self.sources.clone();
        for source in &sources {
            for page in &source.pages {
                if let Some(pattern) = self.rules.pattern(&page.url) {
                    let visited = self.visited.entry(pattern).or_default();
                    visited.urls.insert(&page.url);
                    visited.recordings.insert(&source.task);
                    visited.pages.push(page);
                }
            }
            let step_urls = source.steps.iter().flat_map(|step| [&step.call.url_before, &step.call.url_after]);
            for url in step_urls.flatten() {
                if let Some(pattern) = self.rules.pattern(url) {
                    let visited = self.visited.entry(pattern).or_default();
                    visited.urls.insert(url);
                    visited.recordings.insert(&source.task);
                }
            }
            let mut taken_names = BTreeSet::new();
            for (index, step) in source.steps.iter().enumerate() {
                let Some((key, name)) = self.key_of_step(source, index) else { continue };
                taken_names.insert((key.clone(), name.clone()));
                let provenance = Provenance {
                    task: source.task.clone(),
                    step: Some(index),
                    snapshot: step.call.dom_snapshot.clone(),
                };
                let description = crate::judge::step_in_words(&step.call);
                self.groups.entry(key).or_default().push(Seen {
                    taken: true,
                    name,
                    step: Some(step),
                    provenance,
                    description,
                });
            }
            let mut offered = BTreeSet::new();
            for page in &source.pages {
                let Some(pattern) = self.rules.pattern(&page.url) else { continue };
                for control in &page.controls {
                    let key = potential_key(&pattern, control);
                    let name = Some(control.name.clone());
                    if taken_names.contains(&(key.clone(), name.clone()))
                        || !offered.insert((key.clone(), name.clone()))
                    {
                        continue;
                    }
                    let provenance =
                        Provenance { task: source.task.clone(), step: None, snapshot: Some(page.snapshot.clone()) };
                    let description = format!("{} {:?} ({}) at {}", key.verb, control.name, control.role, page.url);
                    self.groups.entry(key).or_default().push(Seen {
                        taken: false,
                        name,
                        step: None,
                        provenance,
                        description,
                    });
                }
            }
        }
        let groups = std::mem::take(&mut self.groups);
        for (key, seen) in &groups {
            let parameter = parameter_of(key, seen, &self.sources);
            let values = seen
                .iter()
                .filter_map(|seen| match seen.step {
                    Some(step) => value_of(&parameter, step, seen.name.as_deref()),
                    None if matches!(parameter, Parameter::Name(_)) => seen.name.clone(),
                    None => None,
                })
                .collect();
            self.parameters.insert(key.clone(), (parameter, values));
        }
        self.groups = groups;
    }

    /// The action a step takes, and its target's name; `None` for steps that are not actions on a page.
    fn key_of_step(&self, source: &MapSource, index: usize) -> Option<(ActionKey, Option<String>)> {
        let target = self.target_of_step(source, index)?;
        let structure = match (&target.control, &target.selector) {
            (Some(structure), _) => structure.clone(),
            (None, Some(selector)) => {
                let seen = (target.pattern.clone(), target.verb, target.role.clone(), selector.clone());
                match self.structures.get(&seen) {
                    Some(structure) => structure.clone(),
                    None => format!("selector {selector}"),
                }
            }
            (None, None) => "page".to_owned(),
        };
        let call = &source.steps[index].call;
        let listed = target.role.as_deref().is_some_and(|role| LISTED_ROLES.contains(&role));
        let label = match &call.action {
            ToolAction::SendKeys { keys } => Some(format!("{} | {keys}", target.name.clone().unwrap_or_default())),
            _ if listed => None,
            _ => target.name.clone(),
        };
        let key = ActionKey {
            pattern: target.pattern,
            verb: target.verb.to_owned(),
            role: target.role,
            target: structure,
            label,
        };
        Some((key, target.name))
    }

    /// What a step acted on, as far as its own recording tells; `None` for steps that are not actions on a
    /// page.
    fn target_of_step(&self, source: &MapSource, index: usize) -> Option<StepTarget> {
        let call = &source.steps[index].call;
        let verb = call.action.name();
        if !PAGE_VERBS.contains(&verb) {
            return None;
        }
        let url = call.url_before.as_deref()?;
        let pattern = self.rules.pattern(url)?;
        let target = call.target.as_ref();
        let role = target.and_then(|target| target.role.clone()).filter(|role| !role.is_empty());
        let name = target
            .and_then(|target| target.accessible_name.as_deref().or(target.text.as_deref()))
            .map(clip_name)
            .filter(|name| !name.is_empty());
        let page = page_before(source, url, call.ts);
        let control = page.zip(role.as_deref()).zip(name.as_deref()).and_then(|((page, role), name)| {
            page.controls.iter().find(|control| control.role == role && control.name == name)
        });
        Some(StepTarget {
            pattern,
            verb,
            control: control.map(|control| format!("{} > {}", control.path, control.role)),
            selector: target.map(|target| selector_skeleton(&target.selector)),
            role,
            name,
        })
    }

    fn built(&self) -> BuiltMap {
        let context_id = |pattern: &str| short_hash("ctx", &[pattern]);
        let action_id = |key: &ActionKey| {
            short_hash(
                "act",
                &[
                    &context_id(&key.pattern),
                    &key.verb,
                    key.role.as_deref().unwrap_or(""),
                    &key.target,
                    key.label.as_deref().unwrap_or(""),
                ],
            )
        };

        // Actions, by context.
        let mut actions_of: BTreeMap<&str, Vec<MapAction>> = BTreeMap::new();
        for (key, seen) in &self.groups {
            let (parameter, values) = &self.parameters[key];
            let mut instances: Vec<ActionInstance> = seen
                .iter()
                .map(|seen| ActionInstance {
                    is_taken: seen.taken,
                    value: match seen.step {
                        Some(step) => value_of(parameter, step, seen.name.as_deref()),
                        None => seen.name.clone().filter(|_| matches!(parameter, Parameter::Name(_))),
                    },
                    action_description: seen.description.clone(),
                    provenance: seen.provenance.clone(),
                })
                .collect();
            instances
                .sort_by(|a, b| (!a.is_taken, &a.provenance, &a.value).cmp(&(!b.is_taken, &b.provenance, &b.value)));
            let parameter_name = match parameter {
                Parameter::None => None,
                Parameter::Text(name)
                | Parameter::Option(name)
                | Parameter::Files(name)
                | Parameter::Name(name)
                | Parameter::Field(name) => Some(name.clone()),
            };
            let names: BTreeSet<&str> = seen.iter().filter_map(|seen| seen.name.as_deref()).collect();
            let only_name = if names.len() == 1 { names.first().copied() } else { None };
            actions_of.entry(&key.pattern).or_default().push(MapAction {
                action: template(key, parameter, only_name),
                action_id: action_id(key),
                kind: key.verb.clone(),
                role: key.role.clone(),
                target: key.target.clone(),
                is_parameterized: parameter_name.is_some(),
                parameter_name,
                possible_values: values.iter().cloned().collect(),
                is_taken: seen.iter().any(|seen| seen.taken),
                instances,
            });
        }

        // Contexts.
        let mut contexts = Vec::new();
        for (pattern, visited) in &self.visited {
            let titles = distinct(visited.pages.iter().filter_map(|page| page.title.as_deref()));
            let headings = distinct(visited.pages.iter().filter_map(|page| page.heading.as_deref()));
            let path = pattern.strip_prefix(trace_manifest::map::SITE_PLACEHOLDER).unwrap_or(pattern);
            let name = match titles.as_slice() {
                [title] => title.clone(),
                _ => common_affixes(&titles).unwrap_or_else(|| path.to_owned()),
            };
            let mut description = format!("Pages like {path}");
            match headings.as_slice() {
                [] => {}
                [heading] => description.push_str(&format!(", headed “{heading}”")),
                many => description.push_str(&format!(", headed “{}” and {} more", many[0], many.len() - 1)),
            }
            description.push_str(&format!("; visited in {} recording(s).", visited.recordings.len()));
            let mut actions = actions_of.remove(pattern.as_str()).unwrap_or_default();
            // Taken actions first, then by template.
            actions.sort_by(|a, b| (!a.is_taken, &a.action, &a.action_id).cmp(&(!b.is_taken, &b.action, &b.action_id)));
            contexts.push(PageContext {
                context_id: context_id(pattern),
                name,
                description,
                pattern: pattern.clone(),
                example_urls: visited.urls.iter().take(MAX_EXAMPLE_URLS).map(|url| (*url).to_owned()).collect(),
                available_actions: actions,
            });
        }

        // Workflows, and the visits they make to contexts.
        let mut workflows = Vec::new();
        let mut visits: Vec<Visit> = Vec::new();
        let mut sequential: BTreeMap<(String, String), usize> = BTreeMap::new();
        for source in &self.sources {
            let mut steps = Vec::new();
            let mut previous_action: Option<String> = None;
            for (index, step) in source.steps.iter().enumerate() {
                let call = &step.call;
                let pattern = call.url_before.as_deref().and_then(|url| self.rules.pattern(url));
                let action = self.key_of_step(source, index).map(|(key, _)| action_id(&key));
                if let Some(pattern) = &pattern {
                    let leaves =
                        call.url_after.as_deref().and_then(|url| self.rules.pattern(url)).as_ref() != Some(pattern);
                    match visits.last_mut() {
                        Some(visit) if visit.context == *pattern && visit.task == source.task => {}
                        _ => visits.push(Visit {
                            context: pattern.clone(),
                            task: source.task.clone(),
                            taken: Vec::new(),
                        }),
                    }
                    if let (Some(action), Some(visit)) = (&action, visits.last_mut()) {
                        visit.taken.push((action.clone(), leaves));
                    }
                }
                if let Some(action) = &action
                    && let Some(previous) = previous_action.replace(action.clone())
                    && previous != *action
                {
                    *sequential.entry((previous, action.clone())).or_default() += 1;
                }
                steps.push(WorkflowStep {
                    step: index,
                    action: call.action.name().to_owned(),
                    description: crate::judge::step_in_words(call),
                    url: call.url_before.clone(),
                    context_id: pattern.as_deref().map(context_id),
                    action_id: action,
                    outcome: StepOutcome {
                        url: call.url_after.clone(),
                        request: step.request.as_ref().map(|request| format!("{} {}", request.method, request.url)),
                    },
                    provenance: Provenance {
                        task: source.task.clone(),
                        step: Some(index),
                        snapshot: call.dom_snapshot.clone(),
                    },
                });
            }
            workflows.push(Workflow {
                workflow_id: short_hash("wf", &[&source.task]),
                task: source.task.clone(),
                description: source.description.clone(),
                steps,
            });
        }

        let templates: BTreeMap<&str, &str> = contexts
            .iter()
            .flat_map(|context| &context.available_actions)
            .map(|action| (action.action_id.as_str(), action.action.as_str()))
            .collect();
        let procedures = procedures(&visits, &templates, context_id);
        let relations = relations(&visits, sequential);

        let statistics = MapStatistics {
            recordings: self.sources.len(),
            steps: workflows.iter().map(|workflow| workflow.steps.len()).sum(),
            contexts: contexts.len(),
            actions: contexts.iter().map(|c| c.available_actions.len()).sum(),
            taken_actions: contexts.iter().flat_map(|c| &c.available_actions).filter(|a| a.is_taken).count(),
            potential_actions: contexts.iter().flat_map(|c| &c.available_actions).filter(|a| !a.is_taken).count(),
            parameterized_actions: contexts
                .iter()
                .flat_map(|c| &c.available_actions)
                .filter(|a| a.is_parameterized)
                .count(),
            procedures: procedures.len(),
            definitions: 0,
        };
        let tasks: Vec<&str> = self.sources.iter().map(|source| source.task.as_str()).collect();
        let host = host_of(&self.site);
        let map = EnvironmentMap {
            id: short_hash("map", &[&self.site, &tasks.join("\n")]),
            name: host.clone(),
            description: format!(
                "{host} as {} recording(s) show it: {} context(s), {} action(s) ({} taken), {} procedure(s).",
                statistics.recordings,
                statistics.contexts,
                statistics.actions,
                statistics.taken_actions,
                statistics.procedures
            ),
            base_url: self.site.clone(),
            page_contexts: contexts
                .iter()
                .map(|context| PageContextEntry {
                    context_id: context.context_id.clone(),
                    name: context.name.clone(),
                    description: context.description.clone(),
                    pattern: context.pattern.clone(),
                    context_mesh_path: format!("{CONTEXTS_DIR}/{}.json", context.context_id),
                    action_count: context.available_actions.len(),
                    contributing_recordings: self.visited[&context.pattern]
                        .recordings
                        .iter()
                        .map(|task| (*task).to_owned())
                        .collect(),
                })
                .collect(),
            workflows: workflows
                .iter()
                .map(|workflow| WorkflowEntry {
                    workflow_id: workflow.workflow_id.clone(),
                    name: workflow.description.clone(),
                    workflow_mesh_path: format!("{WORKFLOWS_DIR}/{}.json", workflow.workflow_id),
                    recording: workflow.task.clone(),
                    step_count: workflow.steps.len(),
                })
                .collect(),
            tacit_knowledge: TacitKnowledge { definitions: Vec::new(), procedures },
            relations,
            statistics,
        };
        BuiltMap { map, contexts, workflows }
    }
}

/// The key of a control nobody used.
fn potential_key(pattern: &str, control: &trace_manifest::map::Control) -> ActionKey {
    let verb = match control.role.as_str() {
        "textbox" | "searchbox" | "spinbutton" | "slider" => "input",
        "combobox" | "listbox" => "select_dropdown",
        _ => "click",
    };
    let listed = LISTED_ROLES.contains(&control.role.as_str());
    ActionKey {
        pattern: pattern.to_owned(),
        verb: verb.to_owned(),
        role: Some(control.role.clone()),
        target: format!("{} > {}", control.path, control.role),
        label: (!listed).then(|| control.name.clone()),
    }
}

/// What an action's instances differ by.
fn parameter_of(key: &ActionKey, seen: &[Seen], sources: &[&MapSource]) -> Parameter {
    let field_name = || {
        let named = seen.iter().filter_map(|seen| seen.step?.call.target.as_ref()?.name.clone()).next();
        named.or(key.label.clone()).map_or_else(|| "value".to_owned(), |name| slug(&name))
    };
    match key.verb.as_str() {
        "input" => return Parameter::Text(field_name()),
        "select_dropdown" => return Parameter::Option(field_name()),
        "upload_file" => return Parameter::Files(field_name()),
        _ => {}
    }
    if key.label.is_none() {
        let names: BTreeSet<&str> = seen.iter().filter_map(|seen| seen.name.as_deref()).collect();
        if names.len() >= 2 {
            return Parameter::Name(format!("{}_text", key.role.as_deref().unwrap_or("target")));
        }
        return Parameter::None;
    }
    // A field of the request it sent that differs between the times it was taken, and that no step typed
    // (what was typed is the typing action's parameter).
    let typed: BTreeSet<&str> = sources
        .iter()
        .flat_map(|source| &source.steps)
        .filter_map(|step| match &step.call.action {
            ToolAction::Input { text } => Some(text.as_str()),
            ToolAction::SelectDropdown { option } => Some(option.as_str()),
            _ => None,
        })
        .collect();
    let requests: Vec<&trace_manifest::map::SourceRequest> =
        seen.iter().filter(|seen| seen.taken).filter_map(|seen| seen.step?.request.as_ref()).collect();
    if requests.len() < 2 || requests.len() < seen.iter().filter(|seen| seen.taken).count() {
        return Parameter::None;
    }
    let fields: BTreeSet<&str> = requests[0].fields.iter().map(|(name, _)| name.as_str()).collect();
    for field in fields {
        let values: Option<BTreeSet<&str>> = requests
            .iter()
            .map(|request| request.fields.iter().find(|(name, _)| name == field).map(|(_, value)| value.as_str()))
            .collect();
        if let Some(values) = values
            && values.len() >= 2
            && values.iter().all(|value| !typed.contains(value))
        {
            return Parameter::Field(field.to_owned());
        }
    }
    Parameter::None
}

/// An action's template: `Click {link_text}`, `Type {q} into "Search products"`, `Click "Add to cart" with
/// {product}`.
fn template(key: &ActionKey, parameter: &Parameter, only_name: Option<&str>) -> String {
    let label = match key.label.as_deref().or(only_name) {
        Some(label) => format!("{label:?}"),
        None => key.target.clone(),
    };
    match (key.verb.as_str(), parameter) {
        ("input", Parameter::Text(name)) => format!("Type {{{name}}} into {label}"),
        ("select_dropdown", Parameter::Option(name)) => format!("Select {{{name}}} in {label}"),
        ("upload_file", Parameter::Files(name)) => format!("Upload {{{name}}} to {label}"),
        ("send_keys", _) => {
            let (name, keys) = key.label.as_deref().and_then(|label| label.rsplit_once(" | ")).unwrap_or(("", ""));
            format!("Press {keys} in {name:?}")
        }
        ("submit", _) => format!("Submit the form ({})", key.target),
        (verb, Parameter::Name(name)) => format!("{} {{{name}}}", capitalized(verb)),
        (verb, Parameter::Field(name)) => format!("{} {label} with {{{name}}}", capitalized(verb)),
        (verb, _) => format!("{} {label}", capitalized(verb)),
    }
}

/// Procedures: runs of two to [`MAX_PROCEDURE_LEN`] actions within one visit to a context, seen in two or
/// more recordings; a run inside a longer one seen in the same recordings is left out.
fn procedures(
    visits: &[Visit],
    templates: &BTreeMap<&str, &str>,
    context_id: impl Fn(&str) -> String,
) -> Vec<Procedure> {
    let mut runs: BTreeMap<(&str, Vec<&str>), BTreeSet<&str>> = BTreeMap::new();
    for visit in visits {
        let ids: Vec<&str> = visit.taken.iter().map(|(id, _)| id.as_str()).collect();
        for start in 0..ids.len() {
            for end in start + 2..=ids.len().min(start + MAX_PROCEDURE_LEN) {
                runs.entry((visit.context.as_str(), ids[start..end].to_vec())).or_default().insert(visit.task.as_str());
            }
        }
    }
    runs.retain(|_, tasks| tasks.len() >= 2);
    let inside = |(context, run): &(&str, Vec<&str>), tasks: &BTreeSet<&str>| {
        runs.iter().any(|((other_context, other), other_tasks)| {
            other_context == context
                && other.len() > run.len()
                && other_tasks == tasks
                && other.windows(run.len()).any(|window| window == run.as_slice())
        })
    };
    runs.iter()
        .filter(|(key, tasks)| !inside(key, tasks))
        .map(|((context, run), tasks)| {
            let context_id = context_id(context);
            let mut parts: Vec<&str> = vec![&context_id];
            parts.extend(run.iter().copied());
            Procedure {
                procedure_id: short_hash("proc", &parts),
                context_id: context_id.clone(),
                name: run.iter().map(|id| templates.get(id).copied().unwrap_or(id)).collect::<Vec<_>>().join(", then "),
                action_ids: run.iter().map(|id| (*id).to_owned()).collect(),
                recordings: tasks.iter().map(|task| (*task).to_owned()).collect(),
                source: "recordings".to_owned(),
            }
        })
        .collect()
}

/// Sequential edges as counted; alternative edges between the actions that left one context, for each
/// pair that no visit took both of.
fn relations(visits: &[Visit], sequential: BTreeMap<(String, String), usize>) -> Vec<ActionRelation> {
    let mut relations: Vec<ActionRelation> = sequential
        .into_iter()
        .map(|((from, to), count)| ActionRelation { kind: RelationKind::Sequential, from, to, count })
        .collect();
    let mut exits: BTreeMap<&str, BTreeMap<&str, usize>> = BTreeMap::new();
    for visit in visits {
        for (id, _) in visit.taken.iter().filter(|(_, leaves)| *leaves) {
            *exits.entry(&visit.context).or_default().entry(id).or_default() += 1;
        }
    }
    for (context, ways) in &exits {
        let ways: Vec<(&&str, &usize)> = ways.iter().collect();
        for (i, (a, a_count)) in ways.iter().enumerate() {
            for (b, b_count) in &ways[i + 1..] {
                let together = visits.iter().any(|visit| {
                    visit.context == *context
                        && visit.taken.iter().any(|(id, _)| id == **a)
                        && visit.taken.iter().any(|(id, _)| id == **b)
                });
                if !together {
                    relations.push(ActionRelation {
                        kind: RelationKind::Alternative,
                        from: (**a).to_owned(),
                        to: (**b).to_owned(),
                        count: **a_count + **b_count,
                    });
                }
            }
        }
    }
    relations.sort_by(|a, b| (a.kind, &a.from, &a.to).cmp(&(b.kind, &b.from, &b.to)));
    relations
}

/// The page a step was taken on: the last snapshot of its URL before it (or, failing that, after it).
fn page_before<'s>(source: &'s MapSource, url: &str, ts: f64) -> Option<&'s SourcePage> {
    let of_url = || source.pages.iter().filter(move |page| page.url == url);
    of_url().rfind(|page| page.ts <= ts).or_else(|| of_url().next())
}

/// The origin most steps were taken at; ties go to the smallest.
fn site_origin(sources: &[&MapSource]) -> String {
    let mut counts: BTreeMap<String, usize> = BTreeMap::new();
    for url in sources.iter().flat_map(|s| &s.steps).filter_map(|step| step.call.url_before.as_deref()) {
        if let Ok(parsed) = url::Url::parse(url) {
            *counts.entry(parsed.origin().ascii_serialization()).or_default() += 1;
        }
    }
    let most = counts.values().copied().max().unwrap_or(0);
    counts.into_iter().find(|(_, count)| *count == most).map(|(origin, _)| origin).unwrap_or_default()
}

fn host_of(origin: &str) -> String {
    url::Url::parse(origin).ok().and_then(|url| url.host_str().map(str::to_owned)).unwrap_or_else(|| origin.to_owned())
}

/// `#results > li:nth-of-type(2) > a` → `#results > li > a`: the selector without positions.
fn selector_skeleton(selector: &str) -> String {
    let mut skeleton = String::with_capacity(selector.len());
    let mut rest = selector;
    while let Some(at) = rest.find(":nth-") {
        skeleton.push_str(&rest[..at]);
        rest = rest[at..].find(')').map_or("", |end| &rest[at + end + 1..]);
    }
    skeleton.push_str(rest);
    skeleton
}

fn clip_name(name: &str) -> String {
    collapse_whitespace(name).chars().take(MAX_NAME).collect()
}

/// `Search products` → `search_products`.
fn slug(name: &str) -> String {
    let slug: String = name.chars().map(|c| if c.is_alphanumeric() { c.to_ascii_lowercase() } else { '_' }).collect();
    let slug = slug.split('_').filter(|part| !part.is_empty()).collect::<Vec<_>>().join("_");
    if slug.is_empty() { "value".to_owned() } else { slug }
}

fn capitalized(verb: &str) -> String {
    let mut chars = verb.chars();
    chars.next().map(|first| first.to_ascii_uppercase().to_string() + chars.as_str()).unwrap_or_default()
}

/// What titles that differ have in common: `Blue Mug · Shop` and `Teapot · Shop` give `… · Shop`; `None`
/// when they share no word.
fn common_affixes(titles: &[String]) -> Option<String> {
    let first: Vec<char> = titles.first()?.chars().collect();
    let others: Vec<Vec<char>> = titles[1..].iter().map(|title| title.chars().collect()).collect();
    let prefix = (0..first.len()).take_while(|&i| others.iter().all(|o| o.get(i) == Some(&first[i]))).count();
    let suffix = (0..first.len() - prefix)
        .take_while(|&i| {
            others.iter().all(|o| o.len() > i + prefix && o[o.len() - 1 - i] == first[first.len() - 1 - i])
        })
        .count();
    let prefix: String = first[..prefix].iter().collect();
    let suffix: String = first[first.len() - suffix..].iter().collect();
    let wordy = |text: &str| text.chars().filter(|c| c.is_alphanumeric()).count() >= 3;
    (wordy(&prefix) || wordy(&suffix)).then(|| format!("{}…{}", prefix.trim_start(), suffix.trim_end()))
}

fn distinct<'s>(texts: impl Iterator<Item = &'s str>) -> Vec<String> {
    texts.map(str::to_owned).collect::<BTreeSet<_>>().into_iter().collect()
}

/// `<prefix>-` and the first 12 hex digits of the SHA-256 of the parts.
fn short_hash(prefix: &str, parts: &[&str]) -> String {
    let mut hasher = Sha256::new();
    for part in parts {
        hasher.update(part.as_bytes());
        hasher.update([0]);
    }
    let digest = hasher.finalize();
    format!("{prefix}-{}", hex::encode(&digest[..6]))
}
