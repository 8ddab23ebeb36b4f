//! `trace-host map`: environment maps of a site, written to a folder (`trace_manifest::map` lays it out),
//! merged with more recordings, and measured by leave-one-out coverage. What a map holds is derived by
//! `trace_analysis::map`; this module reads the bundles, asks a model for definitions when one is given
//! (through `trace_chat`, the judge's client and cache), writes the files and draws `map.html`.

use std::collections::{BTreeMap, BTreeSet};
use std::path::{Path, PathBuf};

use anyhow::{Context as _, Result, bail};
use maud::{DOCTYPE, PreEscaped, html};
use trace_analysis::map::BuiltMap;
use trace_bundle::archive::Bundle;
use trace_chat::ChatModel;
use trace_manifest::map::{CONTEXTS_DIR, GRAPH_FILE, MAP_FILE, MapSource, RECORDINGS_DIR, RelationKind, WORKFLOWS_DIR};

use trace_store::atomic;

/// Reads what each bundle gives a map. A dataset folder (`tasks.jsonl` beside `bundles/`) stands for its
/// bundles.
pub fn sources_of(paths: &[PathBuf]) -> Result<Vec<MapSource>> {
    let mut sources = Vec::new();
    for path in paths {
        let mut bundle = Bundle::open(path).with_context(|| format!("cannot open the bundle {}", path.display()))?;
        let source = trace_analysis::map::source::of_bundle(&mut bundle)
            .with_context(|| format!("cannot read {} for a map", path.display()))?;
        sources.push(source);
    }
    Ok(sources)
}

/// A dataset folder's bundle folder, or the argument itself.
pub fn bundles_of_dataset(arg: &str) -> String {
    let path = Path::new(arg);
    let bundles = path.join(trace_manifest::dataset::BUNDLES_DIR);
    if path.join(trace_manifest::dataset::TASKS_FILE).is_file() && bundles.is_dir() {
        bundles.to_string_lossy().into_owned()
    } else {
        arg.to_owned()
    }
}

/// The sources a map folder was built from.
pub fn read_sources(map: &Path) -> Result<Vec<MapSource>> {
    if !map.join(MAP_FILE).is_file() {
        bail!("{} is not a map folder (it has no {MAP_FILE})", map.display());
    }
    let dir = map.join(RECORDINGS_DIR);
    let mut files: Vec<PathBuf> = std::fs::read_dir(&dir)
        .with_context(|| format!("cannot list {}", dir.display()))?
        .filter_map(|entry| entry.ok().map(|entry| entry.path()))
        .filter(|path| path.extension().is_some_and(|extension| extension == "json"))
        .collect();
    files.sort();
    files
        .iter()
        .map(|file| {
            let bytes = std::fs::read(file).with_context(|| format!("cannot read {}", file.display()))?;
            serde_json::from_slice(&bytes).with_context(|| format!("{} is not a map recording", file.display()))
        })
        .collect()
}

/// The sources of a map with `added` in, a recording of a task the map has replaced by the added one.
pub fn merged(mut existing: Vec<MapSource>, added: Vec<MapSource>) -> Result<Vec<MapSource>> {
    let tasks: BTreeSet<&str> = added.iter().map(|source| source.task.as_str()).collect();
    if tasks.len() < added.len() {
        bail!("two recordings have the same task id; a map takes each task once");
    }
    existing.retain(|old| !tasks.contains(old.task.as_str()));
    existing.extend(added);
    Ok(existing)
}

/// Builds the map of `sources` and writes it into `out` (created if needed), with the definitions `llm`
/// writes when one is given. Files of an earlier map there that this one does not have are removed, so that
/// the folder holds exactly this map. A model that fails leaves nothing written.
pub fn write(out: &Path, sources: &[MapSource], llm: Option<&ChatModel>) -> Result<BuiltMap> {
    if sources.is_empty() {
        bail!("a map needs at least one recording");
    }
    let tasks: BTreeSet<&str> = sources.iter().map(|source| source.task.as_str()).collect();
    if tasks.len() < sources.len() {
        bail!("two recordings have the same task id; a map takes each task once");
    }
    let mut built = trace_analysis::map::build(sources);
    if let Some(llm) = llm {
        let definitions = define(llm, &built)?;
        built.map.statistics.definitions = definitions.len();
        built.map.tacit_knowledge.definitions = definitions;
    }
    let mut files: BTreeMap<PathBuf, Vec<u8>> = BTreeMap::new();
    files.insert(PathBuf::from(MAP_FILE), pretty(&built.map)?);
    for context in &built.contexts {
        files.insert(Path::new(CONTEXTS_DIR).join(format!("{}.json", context.context_id)), pretty(context)?);
    }
    for workflow in &built.workflows {
        files.insert(Path::new(WORKFLOWS_DIR).join(format!("{}.json", workflow.workflow_id)), pretty(workflow)?);
    }
    for source in sources {
        files.insert(Path::new(RECORDINGS_DIR).join(format!("{}.json", file_safe(&source.task))), pretty(source)?);
    }
    files.insert(PathBuf::from(GRAPH_FILE), graph_html(&built).into_bytes());

    for dir in [CONTEXTS_DIR, WORKFLOWS_DIR, RECORDINGS_DIR] {
        let dir = out.join(dir);
        std::fs::create_dir_all(&dir).with_context(|| format!("cannot create {}", dir.display()))?;
    }
    for (path, bytes) in &files {
        atomic::write(&out.join(path), |file| Ok(file.write_all(bytes)?))?;
    }
    for dir in [CONTEXTS_DIR, WORKFLOWS_DIR, RECORDINGS_DIR] {
        for entry in std::fs::read_dir(out.join(dir))? {
            let path = entry?.path();
            let relative = Path::new(dir).join(path.file_name().unwrap_or_default());
            if !files.contains_key(&relative) && path.extension().is_some_and(|extension| extension == "json") {
                std::fs::remove_file(&path).with_context(|| format!("cannot remove {}", path.display()))?;
            }
        }
    }
    Ok(built)
}

/// The definitions `llm` gives for the map's terms (from its cache when it was asked the same before).
fn define(llm: &ChatModel, built: &BuiltMap) -> Result<Vec<trace_manifest::map::Definition>> {
    let question = trace_analysis::map::definitions::question(&built.map.name, &built.contexts);
    let runtime = tokio::runtime::Builder::new_current_thread().enable_all().build()?;
    let model = llm.model().to_owned();
    let completion = runtime
        .block_on(llm.complete(&question, |reply| trace_analysis::map::definitions::read(reply, &model)))
        .context("no definitions for the map")?;
    Ok(completion.value)
}

/// Pretty JSON with a final newline, as every map file is written.
fn pretty(value: &impl serde::Serialize) -> Result<Vec<u8>> {
    let mut bytes = serde_json::to_vec_pretty(value)?;
    bytes.push(b'\n');
    Ok(bytes)
}

/// A task id as a file name: anything but letters, digits, `-`, `_` and `.` becomes `_`.
fn file_safe(task: &str) -> String {
    task.chars().map(|c| if c.is_ascii_alphanumeric() || matches!(c, '-' | '_' | '.') { c } else { '_' }).collect()
}

/// Actions drawn per context; the rest are counted.
const DRAWN_ACTIONS: usize = 14;
const BOX_WIDTH: usize = 340;
const ROW: usize = 18;
const COLUMNS: usize = 3;

/// `map.html`: contexts as boxes listing their actions (taken ones solid, potential ones grey), sequential
/// edges as arrows between actions, alternative edges dashed. A static page: no script. Drawn with `maud`,
/// as the viewer's pages are, which escapes every name and value a site or a model gave.
pub fn graph_html(built: &BuiltMap) -> String {
    let mut positions: BTreeMap<&str, (usize, usize)> = BTreeMap::new();
    let mut boxes = Vec::new();
    let mut column_heights = [20usize; COLUMNS];
    for context in &built.contexts {
        let column = (0..COLUMNS).min_by_key(|column| column_heights[*column]).unwrap_or(0);
        let (x, y) = (20 + column * (BOX_WIDTH + 60), column_heights[column]);
        let drawn = context.available_actions.len().min(DRAWN_ACTIONS);
        let more = context.available_actions.len() - drawn;
        let height = 46 + drawn * ROW + if more > 0 { ROW } else { 0 };
        for (row, action) in context.available_actions.iter().take(DRAWN_ACTIONS).enumerate() {
            positions.insert(&action.action_id, (x, y + 48 + row * ROW));
        }
        boxes.push(html! {
            g.context {
                rect x=(x) y=(y) width=(BOX_WIDTH) height=(height) rx="6" {}
                text.name x=(x + 8) y=(y + 18) { (clip(&context.name, 44)) }
                text.pattern x=(x + 8) y=(y + 34) { (clip(&context.pattern, 52)) }
                @for (row, action) in context.available_actions.iter().take(DRAWN_ACTIONS).enumerate() {
                    text class=(if action.is_taken { "taken" } else { "potential" }) x=(x + 12) y=(y + 52 + row * ROW) {
                        title { (action.possible_values.join(", ")) }
                        (clip(&action.action, 40))
                        @if action.is_parameterized { " (" (action.possible_values.len()) " values)" }
                    }
                }
                @if more > 0 {
                    text.more x=(x + 12) y=(y + 52 + drawn * ROW) { "and " (more) " more" }
                }
            }
        });
        column_heights[column] += height + 30;
    }
    let mut edges = Vec::new();
    for relation in &built.map.relations {
        let (Some(&(x1, y1)), Some(&(x2, y2))) =
            (positions.get(relation.from.as_str()), positions.get(relation.to.as_str()))
        else {
            continue;
        };
        let (class, marker) = match relation.kind {
            RelationKind::Sequential => ("sequential", Some("url(#arrow)")),
            RelationKind::Alternative => ("alternative", None),
        };
        // From the right edge of one action to the left edge of the other (or around, in one column).
        let (start, end) = if x1 == x2 {
            (x1, x2)
        } else if x1 < x2 {
            (x1 + BOX_WIDTH, x2)
        } else {
            (x1, x2 + BOX_WIDTH)
        };
        let bend = if x1 == x2 { x1.saturating_sub(30) } else { (start + end) / 2 };
        edges.push(html! {
            path class=(class) marker-end=[marker] d={ "M" (start) "," (y1) " C" (bend) "," (y1) " " (bend) "," (y2) " " (end) "," (y2) } {
                title { (format!("{:?} ×{}", relation.kind, relation.count)) }
            }
        });
    }
    let height = column_heights.iter().max().copied().unwrap_or(0) + 20;
    let width = 40 + COLUMNS * (BOX_WIDTH + 60);
    let statistics = &built.map.statistics;
    let page = html! {
        (DOCTYPE)
        html lang="en" {
            head {
                meta charset="utf-8";
                title { "Map of " (built.map.name) }
                style { (PreEscaped(GRAPH_STYLE)) }
            }
            body {
                h1 { "Map of " (built.map.name) }
                p { (built.map.description) }
                p {
                    (statistics.recordings) " recording(s), " (statistics.contexts) " context(s), "
                    (statistics.actions) " action(s): " (statistics.taken_actions) " taken (black), "
                    (statistics.potential_actions) " only seen on a page (grey). Blue arrows: actions taken one "
                    "after the other; red dashes: alternative ways out of one context."
                }
                svg xmlns="http://www.w3.org/2000/svg" width=(width) height=(height) {
                    defs {
                        marker #arrow viewBox="0 0 10 10" refX="10" refY="5" markerWidth="6" markerHeight="6" orient="auto" {
                            path d="M0,0 L10,5 L0,10 z" fill="#36c" {}
                        }
                    }
                    @for drawn in &boxes { (drawn) }
                    @for edge in &edges { (edge) }
                }
            }
        }
    };
    page.into_string()
}

const GRAPH_STYLE: &str = "
body { font: 14px system-ui, sans-serif; margin: 16px; }
rect { fill: #f7f7fb; stroke: #557; }
.name { font-weight: 600; } .pattern { fill: #555; font-family: monospace; font-size: 12px; }
.taken { fill: #000; } .potential { fill: #999; } .more { fill: #777; font-style: italic; }
path { fill: none; } .sequential { stroke: #36c; } .alternative { stroke: #c33; stroke-dasharray: 5 4; }
";

fn clip(text: &str, max: usize) -> String {
    if text.chars().count() <= max {
        return text.to_owned();
    }
    text.chars().take(max - 1).chain(['…']).collect()
}

#[cfg(test)]
mod tests {
    use serde_json::json;
    use trace_manifest::map::{EnvironmentMap, PageContext};

    use super::*;

    fn action(id: &str, label: &str, values: &[&str]) -> serde_json::Value {
        json!({ "action": label, "action_id": id, "type": "click", "role": null, "target": label,
                "is_parameterized": !values.is_empty(), "parameter_name": null, "possible_values": values,
                "is_taken": true, "instances": [] })
    }

    /// A map whose one context holds two actions taken one after the other, named by `name`.
    fn built_map(name: &str) -> BuiltMap {
        let context: PageContext = serde_json::from_value(json!({
            "context_id": "c1", "name": name, "description": "", "pattern": "/item/{item}",
            "example_urls": [], "available_actions": [action("a1", name, &["<b>", "Tom & Jerry"]), action("a2", "Buy", &[])],
        }))
        .unwrap();
        let map: EnvironmentMap = serde_json::from_value(json!({
            "id": "m", "name": name, "description": "Shop \"A\" & co", "base_url": "http://shop.test",
            "page_contexts": [], "workflows": [], "tacit_knowledge": { "definitions": [], "procedures": [] },
            "relations": [{ "kind": "sequential", "from": "a1", "to": "a2", "count": 2 }],
            "statistics": { "recordings": 1, "steps": 2, "contexts": 1, "actions": 2, "taken_actions": 2,
                            "potential_actions": 0, "parameterized_actions": 1, "procedures": 0 },
        }))
        .unwrap();
        BuiltMap { map, contexts: vec![context], workflows: Vec::new() }
    }

    #[test]
    fn the_graph_escapes_what_a_site_named() {
        let graph = graph_html(&built_map("<script>alert(1)</script>"));
        assert!(!graph.contains("<script>"), "{graph}");
        assert!(graph.contains("&lt;script&gt;alert(1)&lt;/script&gt;"), "{graph}");
        assert!(graph.contains("Shop &quot;A&quot; &amp; co"), "{graph}");
        assert!(graph.contains("&lt;b&gt;, Tom &amp; Jerry"), "{graph}");
    }

    #[test]
    fn the_graph_draws_each_context_its_actions_and_the_arrows_between_them() {
        let graph = graph_html(&built_map("Item page"));
        assert!(graph.starts_with("<!DOCTYPE html>"), "{graph}");
        assert_eq!(graph.matches("<g class=\"context\">").count(), 1, "{graph}");
        assert!(graph.contains(">Item page (2 values)</text>") && graph.contains(">Buy</text>"), "{graph}");
        assert!(graph.contains("/item/{item}"), "{graph}");
        assert!(
            graph.contains(r#"<path class="sequential" marker-end="url(#arrow)" d="M20,68 C0,68 0,86 20,86">"#),
            "{graph}"
        );
        assert!(graph.contains("<title>Sequential ×2</title>"), "{graph}");
    }
}
