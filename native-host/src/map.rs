//! `trace-host map`: environment maps of a site, written to a folder (`trace_manifest::map` lays it out),
//! merged with more recordings, and measured by leave-one-out coverage. What a map holds is derived by
//! `trace_analysis::map`; this module reads the bundles, asks a model for definitions when one is given
//! (through `trace_chat`, the judge's client and cache), writes the files and draws `map.html`.

use std::collections::{BTreeMap, BTreeSet};
use std::fmt::Write as _;
use std::path::{Path, PathBuf};

use anyhow::{Context as _, Result, bail};
use trace_analysis::map::BuiltMap;
use trace_chat::ChatModel;
use trace_manifest::archive::Bundle;
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
/// edges as arrows between actions, alternative edges dashed. A static page: no script.
pub fn graph_html(built: &BuiltMap) -> String {
    let mut positions: BTreeMap<&str, (usize, usize)> = BTreeMap::new();
    let mut boxes = String::new();
    let mut column_heights = [20usize; COLUMNS];
    for context in &built.contexts {
        let column = (0..COLUMNS).min_by_key(|column| column_heights[*column]).unwrap_or(0);
        let (x, y) = (20 + column * (BOX_WIDTH + 60), column_heights[column]);
        let drawn = context.available_actions.len().min(DRAWN_ACTIONS);
        let more = context.available_actions.len() - drawn;
        let height = 46 + drawn * ROW + if more > 0 { ROW } else { 0 };
        let _ = write!(
            boxes,
            r#"<g class="context"><rect x="{x}" y="{y}" width="{BOX_WIDTH}" height="{height}" rx="6"/><text class="name" x="{}" y="{}">{}</text><text class="pattern" x="{}" y="{}">{}</text>"#,
            x + 8,
            y + 18,
            escape(&clip(&context.name, 44)),
            x + 8,
            y + 34,
            escape(&clip(&context.pattern, 52)),
        );
        for (row, action) in context.available_actions.iter().take(DRAWN_ACTIONS).enumerate() {
            let row_y = y + 52 + row * ROW;
            positions.insert(&action.action_id, (x, row_y - 4));
            let class = if action.is_taken { "taken" } else { "potential" };
            let values = if action.is_parameterized {
                format!(" ({} values)", action.possible_values.len())
            } else {
                String::new()
            };
            let _ = write!(
                boxes,
                r#"<text class="{class}" x="{}" y="{row_y}"><title>{}</title>{}{}</text>"#,
                x + 12,
                escape(&action.possible_values.join(", ")),
                escape(&clip(&action.action, 40)),
                escape(&values)
            );
        }
        if more > 0 {
            let _ = write!(
                boxes,
                r#"<text class="more" x="{}" y="{}">and {more} more</text>"#,
                x + 12,
                y + 52 + drawn * ROW
            );
        }
        boxes.push_str("</g>\n");
        column_heights[column] += height + 30;
    }
    let mut edges = String::new();
    for relation in &built.map.relations {
        let (Some(&(x1, y1)), Some(&(x2, y2))) =
            (positions.get(relation.from.as_str()), positions.get(relation.to.as_str()))
        else {
            continue;
        };
        let (class, marker) = match relation.kind {
            RelationKind::Sequential => ("sequential", r#" marker-end="url(#arrow)""#),
            RelationKind::Alternative => ("alternative", ""),
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
        let _ = writeln!(
            edges,
            r#"<path class="{class}"{marker} d="M{start},{y1} C{bend},{y1} {bend},{y2} {end},{y2}"><title>{:?} ×{}</title></path>"#,
            relation.kind, relation.count
        );
    }
    let height = column_heights.iter().max().copied().unwrap_or(0) + 20;
    let width = 40 + COLUMNS * (BOX_WIDTH + 60);
    let statistics = &built.map.statistics;
    format!(
        r##"<!doctype html>
<html lang="en"><head><meta charset="utf-8"><title>Map of {name}</title>
<style>
body {{ font: 14px system-ui, sans-serif; margin: 16px; }}
rect {{ fill: #f7f7fb; stroke: #557; }}
.name {{ font-weight: 600; }} .pattern {{ fill: #555; font-family: monospace; font-size: 12px; }}
.taken {{ fill: #000; }} .potential {{ fill: #999; }} .more {{ fill: #777; font-style: italic; }}
path {{ fill: none; }} .sequential {{ stroke: #36c; }} .alternative {{ stroke: #c33; stroke-dasharray: 5 4; }}
</style></head>
<body>
<h1>Map of {name}</h1>
<p>{description}</p>
<p>{recordings} recording(s), {contexts} context(s), {actions} action(s): {taken} taken (black), {potential} only seen
on a page (grey). Blue arrows: actions taken one after the other; red dashes: alternative ways out of one context.</p>
<svg xmlns="http://www.w3.org/2000/svg" width="{width}" height="{height}">
<defs><marker id="arrow" viewBox="0 0 10 10" refX="10" refY="5" markerWidth="6" markerHeight="6" orient="auto"><path d="M0,0 L10,5 L0,10 z" fill="#36c"/></marker></defs>
{boxes}{edges}</svg>
</body></html>
"##,
        name = escape(&built.map.name),
        description = escape(&built.map.description),
        recordings = statistics.recordings,
        contexts = statistics.contexts,
        actions = statistics.actions,
        taken = statistics.taken_actions,
        potential = statistics.potential_actions,
    )
}

fn clip(text: &str, max: usize) -> String {
    if text.chars().count() <= max {
        return text.to_owned();
    }
    text.chars().take(max - 1).chain(['…']).collect()
}

fn escape(text: &str) -> String {
    text.replace('&', "&amp;").replace('<', "&lt;").replace('>', "&gt;").replace('"', "&quot;")
}
