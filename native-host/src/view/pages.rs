//! The viewer's pages, rendered on the server with `maud`, which escapes everything it is given: a bundle
//! may come from a stranger, and nothing of it may become markup of the app. No page has a script; filters
//! are forms, a step and a request are links.
//!
//! Every link is under the app's root, `/<token>` (see the module `view`), or relative to the page it is
//! on (`?step=3`, a form without `action`), so that each keeps the token without a cookie.

use std::collections::BTreeSet;
use std::path::Path;

use maud::{DOCTYPE, Markup, PreEscaped, html};
use serde::Deserialize;
use trace_analysis::accessibility::{AxNode, Outline};
use trace_analysis::judge::{predicate_in_words, step_in_words};
use trace_manifest::eval::EvalResult;
use trace_manifest::event::Header;
use trace_manifest::har::Entry;
use trace_manifest::trajectory::ToolCall;

use super::pretty;
use super::recording::{Excerpt, Recording};
use crate::tasks::TaskRow;

/// Rows of the network table per page: a bundle may have thousands of requests.
const ENTRIES_PER_PAGE: usize = 500;
/// Twins of a request linked by number on its page; a static file fetched on every page has hundreds.
const MAX_TWIN_LINKS: usize = 40;
/// Bodies longer than this are cut when shown (the file link has all of it).
const MAX_SHOWN_BODY: usize = 200_000;

const STYLE: &str = "
body { font: 14px/1.45 system-ui, sans-serif; margin: 0; color: #1d1d1f; background: #fafafa; }
header { background: #1d2a3a; color: #fff; padding: 10px 20px; }
header a { color: #cfe3ff; margin-right: 16px; text-decoration: none; }
main { padding: 16px 20px; }
h1 { font-size: 20px; margin: 0 0 8px; } h2 { font-size: 16px; margin: 20px 0 8px; }
table { border-collapse: collapse; width: 100%; background: #fff; }
th, td { text-align: left; padding: 4px 8px; border-bottom: 1px solid #e5e5e5; vertical-align: top; }
th { background: #f0f0f0; position: sticky; top: 0; }
td.url { word-break: break-all; }
tr.selected { background: #fff4cc; }
.muted { color: #666; } .failed { color: #b00020; } .ok { color: #0a7d32; }
.steps { display: grid; grid-template-columns: minmax(320px, 1fr) 2fr; gap: 16px; }
.steps.even { grid-template-columns: 1fr 1fr; }
.steps ol { margin: 0; padding-left: 28px; max-height: 80vh; overflow: auto; background: #fff; }
.steps li { padding: 4px 0; } .steps li.selected { background: #fff4cc; }
.shots { display: flex; gap: 12px; flex-wrap: wrap; }
.shot { position: relative; display: inline-block; width: 48%; min-width: 280px; overflow: hidden; }
.shot img { width: 100%; border: 1px solid #ccc; display: block; }
.box { position: absolute; border: 3px solid #ff2d55; box-shadow: 0 0 0 9999px rgba(0,0,0,.08); }
.film { display: flex; gap: 6px; overflow-x: auto; padding: 6px 0; }
.film img { height: 72px; border: 1px solid #ccc; }
pre { background: #fff; border: 1px solid #e5e5e5; padding: 8px; overflow: auto; max-height: 60vh; white-space: pre-wrap; word-break: break-all; }
iframe.dom { width: 100%; height: 480px; border: 1px solid #ccc; background: #fff; }
details.ax ul { list-style: none; padding-left: 16px; margin: 0; } details.ax > ul { max-height: 60vh; overflow: auto; background: #fff; border: 1px solid #e5e5e5; padding: 8px; }
details.ax .role { color: #6b3fa0; font-family: monospace; } details.ax .state { color: #0a5d8a; font-size: 12px; } details.ax li.interactive > .role { font-weight: 600; }
.wf { position: relative; width: 200px; height: 10px; background: #f0f0f0; } .wf div { position: absolute; top: 0; height: 10px; background: #4a90d9; }
form.filter { margin: 8px 0; display: flex; gap: 8px; flex-wrap: wrap; align-items: center; }
dl { display: grid; grid-template-columns: max-content 1fr; gap: 2px 12px; } dt { color: #666; }
";

/// Where a recording's pages are: `<root>/r/<key>`, under the app's root (`/<token>`).
pub struct RecordingUrls {
    /// The app's first page, `<root>/`.
    home: String,
    /// `<root>/r/<key>`, which the path of each of the recording's pages continues.
    base: String,
}

impl RecordingUrls {
    pub fn new(root: &str, key: &str) -> RecordingUrls {
        RecordingUrls { home: format!("{root}/"), base: format!("{root}/r/{key}") }
    }
}

/// A page of the app; `home`, its first page, is linked from the header when known.
fn layout(title: &str, home: Option<&str>, nav: Markup, body: Markup) -> Markup {
    html! {
        (DOCTYPE)
        html lang="en" {
            head {
                meta charset="utf-8";
                title { (title) " · TRACE viewer" }
                style { (PreEscaped(STYLE)) }
            }
            body {
                header {
                    @match home { Some(home) => { a href=(home) { "TRACE viewer" } }, None => { "TRACE viewer " } }
                    (nav)
                }
                main { (body) }
            }
        }
    }
}

/// A page saying what went wrong (a corrupt bundle, a missing task), in words.
pub fn failure(message: &str) -> Markup {
    layout(
        "Cannot show this",
        None,
        html! {},
        html! {
            h1 { "Cannot show this" }
            p.failed { (message) }
        },
    )
}

/// The data directory's recordings, filtered by words in their id, site or description.
pub fn tasks(root: &str, tasks: &[TaskRow], filter: &str) -> Markup {
    let wanted = filter.trim().to_lowercase();
    let shown: Vec<&TaskRow> = tasks
        .iter()
        .filter(|task| {
            wanted.is_empty()
                || [task.id.as_str(), &task.website, &task.description, task.status.as_str()]
                    .iter()
                    .any(|text| text.to_lowercase().contains(&wanted))
        })
        .collect();
    layout(
        "Recordings",
        Some(&format!("{root}/")),
        html! {},
        html! {
            h1 { "Recordings" }
            form.filter method="get" {
                input type="search" name="q" value=(filter) placeholder="id, site, description or status";
                button { "Filter" }
                span.muted { (shown.len()) " of " (tasks.len()) }
            }
            table {
                thead { tr { th { "Task" } th { "Status" } th { "Site" } th { "Description" } th { "Duration" } th { "Size" } } }
                tbody {
                    @for task in shown {
                        tr {
                            td { a href={ (root) "/r/" (task.id) "/" } { (task.id) } }
                            td { (task.status.as_str()) }
                            td.url { (task.website) }
                            td { (task.description) }
                            td { (duration(task.started_at, task.ended_at)) }
                            td { (bytes(task.byte_count)) }
                        }
                    }
                }
            }
        },
    )
}

/// From the start and end in milliseconds since the Unix epoch.
fn duration(started: f64, ended: Option<f64>) -> String {
    ended.map_or_else(|| "–".to_owned(), |ended| format!("{:.0} s", (ended - started) / 1000.0))
}

fn bytes(count: u64) -> String {
    match count {
        count if count >= 1 << 20 => format!("{:.1} MB", count as f64 / (1 << 20) as f64),
        count if count >= 1 << 10 => format!("{:.0} kB", count as f64 / (1 << 10) as f64),
        count => format!("{count} B"),
    }
}

/// A run of `trace-replay eval`: its tasks with their scores, each linking to the agent's session.
pub fn run(root: &str, path: &Path, results: &[EvalResult], filter: &str) -> Markup {
    let wanted = filter.trim().to_lowercase();
    let shown: Vec<&EvalResult> = results
        .iter()
        .filter(|r| {
            wanted.is_empty()
                || format!("{} {} {}", r.task_id, r.website, r.description).to_lowercase().contains(&wanted)
        })
        .collect();
    layout(
        "Run",
        Some(&format!("{root}/")),
        html! {},
        html! {
            h1 { "Run " span.muted { (path.display()) } }
            form.filter method="get" {
                input type="search" name="q" value=(filter) placeholder="task, site or description";
                button { "Filter" }
                span.muted { (shown.len()) " of " (results.len()) }
            }
            table {
                thead { tr { th { "Task" } th { "Agent" } th { "Success" } th { "Checkpoints" } th { "Rubric" } th { "Steps" } th { "Error" } } }
                tbody {
                    @for result in shown {
                        tr {
                            td { a href={ (root) "/r/" (result.task_id) "/compare" } { (result.task_id) } div.muted { (result.description) } }
                            td { (result.agent) }
                            td class=(if result.success > 0.0 { "ok" } else { "failed" }) { (result.success) }
                            td { (result.checkpoints.reached_in_order) "/" (result.checkpoints.total) }
                            td { (format!("{:.0}%", result.rubric.averaged * 100.0)) }
                            td { (result.steps) }
                            td.failed { (result.error.as_deref().unwrap_or("")) }
                        }
                    }
                }
            }
        },
    )
}

/// The links of a recording's pages; an agent's session (in a run) also has its comparison.
/// An agent's episode beside the person's demonstration: its scores with what each rests on, the checkpoints
/// it reached, and both sets of steps (the agent's linking to its session's steps).
pub fn comparison(urls: &RecordingUrls, result: &EvalResult, person: &[ToolCall], agent: &Recording) -> Markup {
    let percent = |value: f64| format!("{:.0}%", value * 100.0);
    layout(
        &result.description,
        Some(&urls.home),
        recording_nav(urls, true),
        html! {
            h1 { (result.description) }
            dl {
                dt { "Agent" } dd { (result.agent) }
                dt { "Success" } dd class=(if result.success > 0.0 { "ok" } else { "failed" }) { (result.success) " · " (result.success_basis) }
                dt { "Checkpoints" } dd { (result.checkpoints.reached_in_order) " of " (result.checkpoints.total) " in order (" (percent(result.checkpoints.partial_credit)) "), " (result.checkpoints.reached_any_order) " in any order" }
                dt { "Rubric" } dd { (percent(result.rubric.averaged)) " averaged, " (percent(result.rubric.perfect)) " perfect" @if result.rubric.judged > 0 { " (" (result.rubric.judged) " items by the judge)" } }
                dt { "SPL" } dd { (format!("{:.3}", result.spl.averaged)) }
                dt { "Steps, time" } dd { (result.steps) " steps, " (format!("{:.1} s", result.duration_seconds)) }
                @if let Some(answer) = &result.answer { dt { "Answer" } dd { (answer) } }
                @if let Some(error) = &result.error { dt { "Error" } dd.failed { (error) } }
                @if let Some(judge) = &result.judge {
                    dt { "Judge" } dd {
                        (judge.model) ": "
                        @match &judge.success { Some(verdict) => { (if verdict.satisfied { "success" } else { "no success" }) " (" (verdict.reason) ")" }, None => { "no verdict" } }
                        @if let Some(error) = &judge.error { span.failed { " · " (error) } }
                    }
                }
            }
            h2 { "Checkpoints" }
            table {
                thead { tr { th { "Checkpoint" } th { "Holds when" } th { "Reached" } th { "In order" } th { "Evidence" } } }
                tbody {
                    @for item in &result.checkpoints.items {
                        tr {
                            td { (item.id) }
                            td { (predicate_in_words(&item.predicate)) }
                            td class=(if item.reached { "ok" } else { "failed" }) { (if item.reached { "yes" } else { "no" }) }
                            td { (if item.in_order { "yes" } else { "no" }) }
                            td.url { (item.evidence.as_deref().unwrap_or("")) }
                        }
                    }
                }
            }
            div.steps.even {
                div {
                    h2 { "The person (" (person.len()) " steps)" }
                    ol { @for step in person { li { (step_in_words(step)) } } }
                }
                div {
                    h2 { "The agent (" (agent.steps.len()) " steps)" }
                    ol { @for (index, step) in agent.steps.iter().enumerate() { li { a href={ (urls.base) "/?step=" (index) } { (step_in_words(step)) } } } }
                }
            }
        },
    )
}

fn recording_nav(urls: &RecordingUrls, in_run: bool) -> Markup {
    html! {
        @if in_run { a href={ (urls.base) "/compare" } { "Agent beside person" } }
        a href={ (urls.base) "/" } { "Steps" }
        a href={ (urls.base) "/network" } { "Network" }
        a href={ (urls.base) "/state" } { "Console and storage" }
    }
}

/// The longest value shown in the storage and frame tables (cookies and storage hold long tokens).
const MAX_SHOWN_VALUE: usize = 120;

/// `value` cut to `most` characters, with an ellipsis when it was longer.
fn cut(value: &str, most: usize) -> String {
    match value.char_indices().nth(most) {
        Some((end, _)) => format!("{}…", &value[..end]),
        None => value.to_owned(),
    }
}

/// A recording's console messages, each linked to its step, and its cookies and web storage at the start
/// and the end.
pub fn state(urls: &RecordingUrls, recording: &Recording, in_run: bool) -> Markup {
    let start = recording.steps.first().map_or(0.0, |step| step.ts);
    let cut = |value: &str| cut(value, MAX_SHOWN_VALUE);
    let step_at = |ts: f64| recording.steps.iter().rposition(|step| step.ts <= ts).unwrap_or(0);
    layout(
        "Console and storage",
        Some(&urls.home),
        recording_nav(urls, in_run),
        html! {
            h1 { "Console " span.muted { (recording.console.len()) " messages" } }
            table id="console" {
                thead { tr { th { "Time" } th { "Level" } th { "Message" } th { "Page" } th { "Step" } } }
                tbody {
                    @for (ts, message) in &recording.console {
                        tr {
                            td { (format!("{:.2} s", (ts - start) / 1000.0)) }
                            td class=(if message.level == "error" { "failed" } else { "" }) { (message.level) }
                            td.url { (message.text) }
                            td.url { (message.url.as_deref().unwrap_or("")) }
                            td { @if !recording.steps.is_empty() { a href={ (urls.base) "/?step=" (step_at(*ts)) } { (step_at(*ts) + 1) } } }
                        }
                    }
                }
            }
            @match &recording.storage {
                None => p.muted { "The bundle has no storage snapshot." },
                Some(storage) => {
                    @for timed in &storage.snapshots {
                        @let snapshot = &timed.snapshot;
                        h2 { "Storage at the " (format!("{:?}", snapshot.phase).to_lowercase()) " " span.muted { (timed.time) } }
                        table.cookies {
                            thead { tr { th { "Cookie" } th { "Domain" } th { "Path" } th { "Value" } th { "Flags" } } }
                            tbody {
                                @for cookie in &snapshot.cookies {
                                    tr {
                                        td { (cookie.name) } td { (cookie.domain) } td { (cookie.path) }
                                        td.url { (cut(&cookie.value)) }
                                        td { @if cookie.http_only { "HttpOnly " } @if cookie.secure { "Secure " } (cookie.same_site.as_deref().unwrap_or("")) }
                                    }
                                }
                            }
                        }
                        @for (kind, areas) in [("localStorage", &snapshot.local_storage), ("sessionStorage", &snapshot.session_storage)] {
                            @for (origin, entries) in areas {
                                h2 { (kind) " of " (origin) }
                                table { tbody { @for (name, value) in entries { tr { th { (name) } td.url { (cut(value)) } } } } }
                            }
                        }
                        @for (origin, databases) in &snapshot.indexed_db {
                            h2 { "IndexedDB of " (origin) }
                            table.databases {
                                thead { tr { th { "Database" } th { "Store" } th { "Key" } th { "Records" } th { "First record" } } }
                                tbody {
                                    @for database in databases {
                                        @for store in &database.object_stores {
                                            tr {
                                                td { (database.name) " v" (database.version) }
                                                td { (store.name) }
                                                td { (store.key_path.as_ref().map_or("(apart)".to_owned(), |path| serde_json::to_string(path).unwrap_or_default())) @if store.auto_increment { " auto" } }
                                                td { (store.records.len()) }
                                                td.url { (store.records.first().map(|record| cut(&record.value.to_string())).unwrap_or_default()) }
                                            }
                                        }
                                    }
                                }
                            }
                        }
                    }
                }
            }
        },
    )
}

/// A recording: the task, its steps (the selected one with its screenshots before and after, the target's
/// box drawn on the first, its DOM snapshot and accessibility tree), the filmstrip, checkpoints with their
/// evidence and credentials.
pub fn recording(
    urls: &RecordingUrls,
    recording: &Recording,
    selected: Option<usize>,
    accessibility: Option<&Outline>,
    in_run: bool,
) -> Markup {
    let task = &recording.manifest.task;
    let steps = &recording.steps;
    layout(
        &task.description,
        Some(&urls.home),
        recording_nav(urls, in_run),
        html! {
            h1 { (task.description) }
            dl {
                dt { "Task" } dd { (task.id) " · " (task.task_type.as_str()) " · " (task.status.as_str()) }
                dt { "Site" } dd { (task.website) }
                dt { "Recorded" } dd { (recording.manifest.started_at) " · " (format!("{:.0} s", recording.manifest.duration_seconds)) }
                dt { "Contents" } dd { (steps.len()) " steps · " (recording.entries.len()) " requests · " (recording.manifest.counts.screenshots) " screenshots · " (recording.manifest.counts.dom_snapshots) " DOM snapshots" }
                @if let Some(answer) = &task.answer { dt { "Answer" } dd { (answer) } }
            }
            div.film {
                @for (index, step) in steps.iter().enumerate() {
                    @if let Some(shot) = &step.screenshot {
                        a href={ "?step=" (index) } title={ (index + 1) ". " (step_in_words(step)) } {
                            img loading="lazy" alt={ "step " (index + 1) } src={ (urls.base) "/file/" (shot) };
                        }
                    }
                }
            }
            div.steps {
                div {
                    h2 { "Steps" }
                    ol {
                        @for (index, step) in steps.iter().enumerate() {
                            li class=(if Some(index) == selected { "selected" } else { "" }) {
                                a href={ "?step=" (index) } { (step_in_words(step)) }
                            }
                        }
                    }
                }
                div {
                    @if let Some(index) = selected { (step_detail(urls, recording, index, accessibility)) }
                }
            }
            @if let Some(checkpoints) = &recording.checkpoints {
                h2 { "Checkpoints" }
                table {
                    thead { tr { th { "Checkpoint" } th { "Why" } th { "Holds when" } th { "Step" } th { "Evidence in the recording" } } }
                    tbody {
                        @for (checkpoint, proofs) in checkpoints {
                            tr.checkpoint {
                                td { (checkpoint.id) }
                                td { (checkpoint.reason) }
                                td { (predicate_in_words(&checkpoint.predicate)) }
                                td { @if let Some(step) = checkpoint.step { a href={ "?step=" (step) } { (step + 1) } } }
                                td.evidence {
                                    @if proofs.is_empty() { span.failed { "nothing in the recording satisfies it" } }
                                    @for proof in proofs {
                                        div.url {
                                            @match proof.entry {
                                                Some(entry) => { a href={ (urls.base) "/network/" (entry) } { (proof.what) } },
                                                None => { (proof.what) },
                                            }
                                            @if let Some(step) = proof.step { " · " a href={ "?step=" (step) } { "step " (step + 1) } }
                                        }
                                    }
                                }
                            }
                        }
                    }
                }
            }
            @if !recording.credentials.is_empty() {
                h2 { "Credentials" }
                p.muted { "The trajectory names each by its placeholder; values are never shown here." }
                table {
                    thead { tr { th { "Placeholder" } th { "Site" } th { "Field" } th { "Value" } } }
                    tbody {
                        @for credential in &recording.credentials {
                            tr {
                                td { code { (credential.placeholder()) } }
                                td { (credential.site) }
                                td { (credential.field) }
                                td.muted { (credential.value.chars().count()) " characters" }
                            }
                        }
                    }
                }
            }
        },
    )
}

fn step_detail(urls: &RecordingUrls, recording: &Recording, index: usize, accessibility: Option<&Outline>) -> Markup {
    let step = &recording.steps[index];
    let before = recording.screenshot_before(index);
    let box_style = before.as_ref().and_then(|before| {
        let viewport = recording.viewport_of(&before.shot.file)?;
        let rect = step.target.as_ref()?.bbox.as_ref()?;
        let (width, height) = (f64::from(viewport.width), f64::from(viewport.height));
        Some(format!(
            "left: {:.3}%; top: {:.3}%; width: {:.3}%; height: {:.3}%",
            rect.x / width * 100.0,
            rect.y / height * 100.0,
            rect.width / width * 100.0,
            rect.height / height * 100.0
        ))
    });
    let requests = recording.entries_of_step(index);
    html! {
        h2 { "Step " (index + 1) ": " (step_in_words(step)) }
        dl {
            @if let Some(url) = &step.url_before { dt { "On" } dd.url { (url) } }
            @if let Some(url) = &step.url_after { dt { "Left on" } dd.url { (url) } }
            @if let Some(target) = &step.target { dt { "Target" } dd { code { (target.selector) } } }
            dt { "Requests" } dd { a href={ (urls.base) "/network?step=" (index) } { (requests.len()) " during this step" } }
        }
        div.shots {
            @if let Some(before) = &before {
                div.shot {
                    img alt="before the step" src={ (urls.base) "/file/" (before.shot.file) };
                    @if let Some(style) = &box_style { div.box style=(style) {} }
                    @let age = format!("{:.1} s", before.age_ms / 1000.0);
                    @if before.after_previous_step {
                        div.muted { "Before: the page the step acted on, the target boxed (taken " (age) " before it)" }
                    } @else {
                        div.muted { "Before, the target boxed (taken " (age) " before the step, and before the step ahead of it: the page may have changed since)" }
                    }
                }
            }
            @if let Some(shot) = &step.screenshot {
                div.shot {
                    img alt="after the step" src={ (urls.base) "/file/" (shot) };
                    div.muted { "After" }
                }
            }
        }
        @if let Some(snapshot) = &step.dom_snapshot {
            h2 { "DOM snapshot " span.muted { "(rendered without scripts, with the recording's stylesheets and images; " a href={ (urls.base) "/file/" (snapshot) } { "as recorded" } ")" } }
            iframe.dom sandbox="" src={ (urls.base) "/snapshot/" (snapshot) } {}
        }
        @if let Some(outline) = accessibility {
            @let nodes = outline.walk().len();
            details.ax open[nodes <= 400] {
                summary { "Accessibility tree " span.muted { "(" (nodes) " nodes" @if outline.left_out > 0 { ", " (outline.left_out) " more not shown" } ")" } }
                ul { @for node in &outline.roots { (ax_node(node)) } }
            }
        }
    }
}

/// One node of an accessibility tree with its children: role, name, value and states, as a reader says them.
fn ax_node(node: &AxNode) -> Markup {
    html! {
        li class=(if node.is_interactive() { "interactive" } else { "" }) {
            span.role { (node.role) }
            @if !node.name.is_empty() { " " q { (node.name) } }
            @if let Some(value) = &node.value { " = " code { (value) } }
            @for state in &node.states { @if state != "focusable" { " " span.state { (state) } } }
            @if !node.children.is_empty() { ul { @for child in &node.children { (ax_node(child)) } } }
        }
    }
}

/// Which network entries to list.
#[derive(Debug, Default, Deserialize)]
pub struct NetworkFilter {
    #[serde(default)]
    pub host: String,
    /// A resource type (`document`, `xhr`, ...).
    #[serde(default, rename = "type")]
    pub kind: String,
    /// A status class: `2xx`, `3xx`, `4xx`, `5xx`, or `failed` (no answer).
    #[serde(default)]
    pub status: String,
    #[serde(default)]
    pub step: Option<usize>,
    #[serde(default)]
    pub page: usize,
}

impl NetworkFilter {
    fn keeps(&self, entry: &Entry) -> bool {
        let status = entry.response.status;
        (self.host.is_empty() || host_of(&entry.request.url) == self.host)
            && (self.kind.is_empty() || entry.resource_type.as_deref() == Some(self.kind.as_str()))
            && match self.status.as_str() {
                "" => true,
                "failed" => status == 0,
                class => status != 0 && class.starts_with(char::from(b'0' + (status / 100) as u8)),
            }
    }
}

fn host_of(url: &str) -> String {
    url::Url::parse(url).ok().and_then(|url| url.host_str().map(str::to_owned)).unwrap_or_default()
}

/// The network panel: every entry (a page of them at a time) with its bar in the waterfall of the whole
/// recording, filtered by host, type, status or step.
pub fn network(urls: &RecordingUrls, recording: &Recording, filter: &NetworkFilter, in_run: bool) -> Markup {
    let start = recording.entries.first().map_or(0.0, |(ts, _)| *ts);
    // The waterfall spans the whole recording's traffic, so that bars of different pages compare.
    let end = recording.entries.iter().map(|(ts, entry)| ts + entry.time.max(0.0)).fold(start, f64::max);
    let span = (end - start).max(1.0);
    let bar = |index: usize| {
        let (ts, entry) = &recording.entries[index];
        let left = (ts - start) / span * 100.0;
        let width = (entry.time.max(0.0) / span * 100.0).max(0.2);
        format!("left: {left:.3}%; width: {width:.3}%")
    };
    let range = filter.step.map_or(0..recording.entries.len(), |step| recording.entries_of_step(step));
    let kept: Vec<usize> = range.filter(|index| filter.keeps(&recording.entries[*index].1)).collect();
    let hosts: BTreeSet<String> = recording.entries.iter().map(|(_, entry)| host_of(&entry.request.url)).collect();
    let kinds: BTreeSet<&str> =
        recording.entries.iter().filter_map(|(_, entry)| entry.resource_type.as_deref()).collect();
    let pages = kept.len().div_ceil(ENTRIES_PER_PAGE).max(1);
    let page = filter.page.min(pages - 1);
    let shown = &kept[(page * ENTRIES_PER_PAGE).min(kept.len())..((page + 1) * ENTRIES_PER_PAGE).min(kept.len())];
    html! {
        (layout("Network", Some(&urls.home), recording_nav(urls, in_run), html! {
            h1 { "Network " span.muted { (recording.manifest.task.description) } }
            form.filter method="get" {
                select name="host" {
                    option value="" { "every host" }
                    @for host in &hosts { option value=(host) selected[*host == filter.host] { (host) } }
                }
                select name="type" {
                    option value="" { "every type" }
                    @for kind in &kinds { option value=(kind) selected[*kind == filter.kind] { (kind) } }
                }
                select name="status" {
                    option value="" { "every status" }
                    @for class in ["2xx", "3xx", "4xx", "5xx", "failed"] { option value=(class) selected[class == filter.status] { (class) } }
                }
                @if let Some(step) = filter.step { input type="hidden" name="step" value=(step); span { "during step " (step + 1) } }
                button { "Filter" }
                span.muted { (kept.len()) " of " (recording.entries.len()) " requests" }
                @if pages > 1 { span.muted { " · page " (page + 1) " of " (pages) } }
            }
            table {
                thead { tr { th { "#" } th { "Time" } th { "Method" } th { "Status" } th { "URL" } th { "Type" } th { "Size" } th { "Waterfall" } th { "Step" } th { "In replay" } } }
                tbody {
                    @for index in shown {
                        @let entry = &recording.entries[*index].1;
                        tr {
                            td { a href={ (urls.base) "/network/" (index) } { (index) } }
                            td { (format!("{:.2} s", (recording.entries[*index].0 - start) / 1000.0)) }
                            td { (entry.request.method) }
                            td class=(status_class(entry.response.status)) { (status_text(entry.response.status)) }
                            td.url { a href={ (urls.base) "/network/" (index) } { (entry.request.url) } }
                            td { (entry.resource_type.as_deref().unwrap_or("")) }
                            td { (bytes(entry.response.content.size.max(0) as u64)) }
                            td { div.wf title={ (format!("{:.0} ms", entry.time)) } { div style=(bar(*index)) {} } }
                            td { @if let Some(step) = recording.step_of_entry(*index) { a href={ (urls.base) "/?step=" (step) } { (step + 1) } } }
                            td { (replay_in_brief(recording, *index)) }
                        }
                    }
                }
            }
            @if pages > 1 {
                p {
                    @for number in 0..pages {
                        a href=(page_link(filter, number)) { (number + 1) } " "
                    }
                }
            }
        }))
    }
}

fn page_link(filter: &NetworkFilter, page: usize) -> String {
    let mut query = url::form_urlencoded::Serializer::new(String::new());
    query.append_pair("host", &filter.host).append_pair("type", &filter.kind).append_pair("status", &filter.status);
    if let Some(step) = filter.step {
        query.append_pair("step", &step.to_string());
    }
    query.append_pair("page", &page.to_string());
    format!("?{}", query.finish())
}

fn status_class(status: u16) -> &'static str {
    if status == 0 || status >= 400 { "failed" } else { "ok" }
}

fn status_text(status: u16) -> String {
    if status == 0 { "failed".to_owned() } else { status.to_string() }
}

/// One request: what was sent and what came back, bodies shown as what they are.
pub fn entry(
    urls: &RecordingUrls,
    recording: &Recording,
    index: usize,
    body: Option<&Excerpt>,
    in_run: bool,
) -> Markup {
    let entry = &recording.entries[index].1;
    let content = &entry.response.content;
    layout(
        &entry.request.url,
        Some(&urls.home),
        recording_nav(urls, in_run),
        html! {
            h1.url { (entry.request.method) " " (entry.request.url) }
            dl {
                dt { "Status" } dd class=(status_class(entry.response.status)) { (status_text(entry.response.status)) " " (entry.response.status_text) }
                @if let Some(error) = &entry.error { dt { "Failed" } dd.failed { (error) } }
                @if !entry.response.redirect_url.is_empty() { dt { "Redirect to" } dd { (entry.response.redirect_url) } }
                dt { "Started" } dd { (entry.started_date_time) " · " (format!("{:.0} ms", entry.time)) }
                @if let Some(kind) = &entry.resource_type { dt { "Type" } dd { (kind) } }
                dt { "In replay" } dd.replay { (replay_in_words(urls, recording, index)) }
                @if let Some(step) = recording.step_of_entry(index) { dt { "Step" } dd { a href={ (urls.base) "/?step=" (step) } { (step + 1) ". " (step_in_words(&recording.steps[step])) } } }
            }
            @if !entry.web_socket_messages.is_empty() {
                h2 { "Frames " span.muted { (entry.web_socket_messages.len()) } }
                table.frames {
                    thead { tr { th { "Time" } th { "Direction" } th { "Data" } } }
                    tbody {
                        @for message in &entry.web_socket_messages {
                            tr {
                                td { (format!("{:.3} s", message.time - entry.web_socket_messages[0].time)) }
                                td { (if message.kind == "send" { "↑ sent" } else { "↓ received" }) }
                                td.url { @if message.opcode == 2 { span.muted { "binary, base64: " } } (cut(&message.data, MAX_SHOWN_VALUE)) }
                            }
                        }
                    }
                }
            }
            h2 { "Request headers" } (headers(&entry.request.headers))
            @if let Some(post) = &entry.request.post_data {
                h2 { "Request body " span.muted { (post.mime_type) } }
                // What was typed was sent here: each credential shown as its placeholder.
                @if let Some(text) = &post.text { (body_view(urls, &post.mime_type, &recording.without_credentials(text.as_bytes()), true, None)) }
                @else if let Some(file) = &post.file { p { a href={ (urls.base) "/file/" (file) } { (file) } } }
            }
            h2 { "Response headers" } (headers(&entry.response.headers))
            h2 { "Response body " span.muted { (content.mime_type) " · " (bytes(content.size.max(0) as u64)) } }
            @match body {
                Some(body) => (body_view(urls, &content.mime_type, &body.bytes, body.whole, content.file.as_deref())),
                None => p.muted { "No body was recorded." },
            }
        },
    )
}

/// How replay answers entry `index`, in a word or two for the network table: `ignored` (failed at once),
/// `exact`, `canonical` (volatile parts left out), with `twins` and `by state` when they apply.
fn replay_in_brief(recording: &Recording, index: usize) -> Markup {
    if let Some(pattern) = recording.ignored_by(index) {
        return html! { span.muted title={ "ignore list: " (pattern) } { "ignored" } };
    }
    if recording.entries[index].1.resource_type.as_deref() == Some("websocket") {
        return html! { "played back" };
    }
    let Some(how) = recording.answering.get(index) else { return html! {} };
    let level = if how.left_out.is_empty() { "exact" } else { "canonical" };
    let twins = how.canonical_twins.len();
    html! {
        (level)
        @if twins > 1 { " · " (twins) " twins" }
        @if !how.chosen_by.is_empty() { " · by state" }
    }
}

/// How replay answers entry `index`, told in full: the ignore list, or the levels that find it, its twins
/// and whether the browser's state chooses among them.
fn replay_in_words(urls: &RecordingUrls, recording: &Recording, index: usize) -> Markup {
    if let Some(pattern) = recording.ignored_by(index) {
        return html! { "Failed at once: the ignore list names it (" code { (pattern) } ")." };
    }
    if recording.entries[index].1.resource_type.as_deref() == Some("websocket") {
        return html! { "A WebSocket: replay plays its frames back to a page that opens this URL, each server frame after the page's frames that came before it in the recording." };
    }
    let Some(how) = recording.answering.get(index) else { return html! {} };
    let position = |twins: &[usize]| twins.iter().position(|&twin| twin == index).map_or(0, |p| p + 1);
    let twin_links = |twins: &[usize]| {
        html! {
            @for (n, twin) in twins.iter().take(MAX_TWIN_LINKS).enumerate() { @if n > 0 { ", " } @if *twin == index { "this" } @else { a href={ (urls.base) "/network/" (twin) } { (twin) } } }
            @if twins.len() > MAX_TWIN_LINKS { " and " (twins.len() - MAX_TWIN_LINKS) " more" }
        }
    };
    html! {
        ul {
            li { "Answered from the recording when the browser asks for exactly this method, URL and body"
                @if how.exact_twins.len() > 1 { ": " (how.exact_twins.len()) " identical requests were recorded (" (twin_links(&how.exact_twins)) "); this is number " (position(&how.exact_twins)) ", answered in recorded order" }
                "." }
            @if how.left_out.is_empty() {
                li { "Its URL has nothing volatile: a request that differs in any part is not matched canonically." }
            } @else {
                li { "Also answered when only what changes on every load differs: replay leaves out " @for (n, part) in how.left_out.iter().enumerate() { @if n > 0 { ", " } code { (part) } } " and compares " code.url { (how.canonical_url) } "." }
            }
            @if how.canonical_twins.len() > how.exact_twins.len() {
                li { (how.canonical_twins.len()) " recorded requests have this canonical form (" (twin_links(&how.canonical_twins)) ")." }
            }
            @if !how.chosen_by.is_empty() {
                li { "The browser's state chooses among them: the twin whose " @for (n, state) in how.chosen_by.iter().enumerate() { @if n > 0 { ", " } code { (state) } } " is closest to the browser's answers first." }
            }
            @if how.endpoint_requests > 0 {
                li { "Otherwise the closest of the " (how.endpoint_requests) " recorded requests to the same method, host and path answers, if its parameters are alike enough (fuzzy); else the request fails." }
            }
        }
    }
}

fn headers(headers: &[Header]) -> Markup {
    html! {
        table { tbody { @for header in headers { tr { th { (header.name) } td.url { (header.value) } } } } }
    }
}

/// A body as what it is: an image shown, JSON and HTML pretty-printed, other text as it is. `whole` says
/// whether `body` is all of it or its start.
fn body_view(urls: &RecordingUrls, mime_type: &str, body: &[u8], whole: bool, file: Option<&str>) -> Markup {
    let mime = trace_analysis::body::mime_essence(mime_type);
    let link = file.map(|file| html! { p { a href={ (urls.base) "/file/" (file) } { "the body as stored" } } });
    if mime.starts_with("image/")
        && !mime.contains("svg")
        && let Some(file) = file
    {
        return html! { img alt="the response body" style="max-width: 100%" src={ (urls.base) "/file/" (file) }; (link.unwrap_or_default()) };
    }
    // A body's start may end inside a character: the text is what comes before it.
    let text = match std::str::from_utf8(body) {
        Ok(text) => Some(text),
        Err(error) if !whole && body.len() - error.valid_up_to() < 4 => {
            std::str::from_utf8(&body[..error.valid_up_to()]).ok()
        }
        Err(_) => None,
    };
    let Some(text) = text else {
        let more = if whole { "" } else { "more than " };
        return html! { p.muted { (more) (bytes(body.len() as u64)) " of binary data." } (link.unwrap_or_default()) };
    };
    let pretty = if !whole {
        None
    } else if mime.contains("html") {
        pretty::html(text)
    } else {
        (mime.contains("json") || trace_analysis::body::looks_like_json(body))
            .then(|| serde_json::from_str::<serde_json::Value>(text).ok())
            .flatten()
            .and_then(|value| serde_json::to_string_pretty(&value).ok())
    };
    let shown = pretty.as_deref().unwrap_or(text);
    let cut = shown.char_indices().nth(MAX_SHOWN_BODY).map(|(end, _)| end);
    html! {
        pre { (cut.map_or(shown, |end| &shown[..end])) }
        @if let Some(_) = cut { p.muted { "Cut at " (MAX_SHOWN_BODY) " characters." } }
        @if !whole { p.muted { "The body is larger than the " (bytes(body.len() as u64)) " read for this page." } }
        (link.unwrap_or_default())
    }
}
