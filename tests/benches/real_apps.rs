//! Replay fidelity on real applications, side by side with Playwright. Each flow (Django's admin site,
//! Datasette's SQL editor, a Sphinx site's search, a PyWebIO application over its WebSocket, a JupyterLab
//! notebook run over its kernel's socket, one Node application over Socket.IO and over SockJS, rustdoc's
//! search that loads its code on focus, a NiceGUI slider over a socket, docsify's hash routes, Wagtail's
//! autosaving editor, Node-RED's canvas built by drags, TinyMCE's written iframe in Django's admin, and
//! Trac behind Basic authentication, from [`trace_e2e::apps`]; the demo shop's whole demonstration, its
//! WebSocket chat and its expert answering over server-sent events) is recorded once through the extension
//! and the host, and exported redacted, as a person sharing it would. Its application is then stopped, and its
//! steps are re-run offline twice:
//! - by `trace-replay run --human` on the zip;
//! - by Playwright (npm `playwright-core`, pinned, driving the same Chromium): a context with
//!   `routeFromHAR(zip, {notFound: 'abort'})`, the steps carried out by `real_apps/steps.mjs` the way a
//!   Playwright user writes them (locators that wait, `fill`, `selectOption`, `keyboard.press`).
//!
//! Both are judged by the same rules, `run --human`'s: the step's action done, the URL the recording
//! reached after it reached (exactly or in canonical form), and the recorded page's text shown
//! ([`trace_analysis::fidelity`], at [`TEXT_TOLERANCE`]), each waited for up to the same step timeout.
//! (`run --human` also fails a step whose request the fuzzy level answered though it differs in what the
//! person typed; Playwright has no fuzzy level.)
//!
//! Also printed, per flow: the requests `run --human` let reach for the network (`live`: none is the
//! target; Playwright's `notFound: 'abort'` refuses them all by construction), the exported zip's size
//! against the recording's HAR with every body inline (what Playwright's `recordHar` embeds) and that HAR
//! gzipped (the smallest a person could share it), and what the zip's screenshots take of it (a HAR has
//! none).
//!
//! Last, the yield: every recording is processed as a person sharing it would (`trace-host process`: its
//! checkpoints audited offline and pruned) before it is exported, and the bench prints per flow the steps
//! re-run, the steps whose recorded content showed, the audit's verdict, the checkpoints kept by kind, and
//! the time processing took against the recording's own duration; then how many recordings became valid
//! tasks with a checkpoint beyond a page visited.
//!
//! Run: `cargo xtask dist && bash .ci/install && cargo bench -p trace-e2e --bench real_apps`. Recordings
//! and zips are left in `target/bench-real-apps/`.

use std::path::{Path, PathBuf};
use std::process::Command;
use std::time::{Duration, Instant};

use anyhow::{Context, Result, bail, ensure};
use serde_json::{Value, json};
use trace_analysis::evidence::page_text;
use trace_analysis::fidelity::{TEXT_TOLERANCE, compare_text, reaches};
use trace_bundle::archive::Bundle;
use trace_e2e::apps::{
    self, Environment,
    datasette::Datasette,
    django_admin::DjangoAdmin,
    docsify_handbook::DocsifyHandbook,
    jupyter_lab::JupyterLab,
    lighthouse_stores::{LighthouseStores, Transport},
    nicegui_slider::NiceGuiSlider,
    node_red_flows::NodeRedFlows,
    pywebio_app::PyWebIoApp,
    rustdoc_search::RustdocSearch,
    sphinx_docs::SphinxDocs,
    tinymce_notes::TinyMceNotes,
    trac_tickets::TracTickets,
    wagtail_pages::WagtailPages,
};
use trace_e2e::bench::{embedded_har_sizes, recorded_seconds};
use trace_e2e::browser::Build;
use trace_e2e::demo;
use trace_e2e::playwright::{self, Script};
use trace_e2e::site::DemoSite;
use trace_manifest::trajectory::{Credential, ToolAction, ToolCall};
use trace_replay::archive::ReplayArchive;
use trace_replay::chromium;
use trace_replay::run::{RunOptions, expected_text, fill_placeholders, human_trajectory, settled_snapshot};

/// How long either side may take to start a browser or carry out a step.
const WAIT: Duration = Duration::from_secs(60);
/// Between checks of the page.
const POLL: Duration = Duration::from_millis(100);
/// After a step's URL is reached, before its text is read: as long as `run --human` waits for quiet.
const SETTLE: Duration = Duration::from_millis(400);

/// One recorded flow, processed (its checkpoints audited and pruned) and exported.
struct Flow {
    name: &'static str,
    /// The redacted zip.
    zip: PathBuf,
    /// The same, its HAR with every body inline.
    embedded: PathBuf,
    /// What processing made of it.
    processed: Processed,
}

/// What `trace-host process` made of a recording: whether its audit proved it a valid task, its checkpoints
/// by kind, and how long processing (most of it the audit) took against the recording's own duration.
struct Processed {
    valid: bool,
    /// The audit's first problem, when it is not valid.
    problem: Option<String>,
    /// Checkpoints kept, by predicate kind (`request`, `frame`, `url`, `text`).
    kinds: std::collections::BTreeMap<String, usize>,
    seconds: f64,
    recorded_seconds: f64,
}

impl Processed {
    /// A valid task with a checkpoint that is more than a page visited: what a recording must become.
    fn yields_a_task(&self) -> bool {
        self.valid && self.kinds.iter().any(|(kind, count)| kind != "url" && *count > 0)
    }
}

/// One side's verdict on one flow.
#[derive(Default)]
struct Outcome {
    passed: usize,
    total: usize,
    /// Requests let reach for the network.
    live: u64,
    /// The first failed step and why.
    first_failure: Option<String>,
}

#[tokio::main(flavor = "multi_thread", worker_threads = 2)]
async fn main() -> Result<()> {
    let build = Build::from_workspace()?;
    let target = Path::new(env!("CARGO_MANIFEST_DIR")).join("../target");
    let out = target.join("bench-real-apps");
    let node_modules = playwright::install(&target.join("bench-node"))?;
    let python = apps::python()?;
    let flows = record_flows(&build, &python, &out).await?;

    let step_timeout = RunOptions::default().step_timeout;
    let mut rows = Vec::new();
    let mut shown = Vec::new();
    for flow in &flows {
        eprintln!("{}: trace-replay run --human", flow.name);
        let (report, _) = build.replay_human(&flow.zip)?;
        let judged: Vec<f64> = report.steps.iter().filter_map(|step| step.text_shown).collect();
        shown.push((judged.iter().filter(|share| **share >= TEXT_TOLERANCE).count(), judged.len()));
        let trace = Outcome {
            passed: report.steps_passed,
            total: report.steps_total,
            live: report.live_attempts,
            first_failure: report.failures.first().map(|f| format!("step {} {}: {}", f.step, f.name, f.reason)),
        };
        eprintln!("{}: Playwright routeFromHAR", flow.name);
        let routed = run_with_playwright(&node_modules, &build.chromium, &flow.zip, step_timeout).await?;
        let sizes = Sizes::of(flow)?;
        rows.push((flow.name, trace, routed, sizes));
    }

    println!();
    println!(
        "steps passed offline, judged alike (action done, recorded URL reached, recorded text shown ≥ {TEXT_TOLERANCE})"
    );
    println!(
        "{:<24} {:>13} {:>5} {:>13} {:>10} {:>12} {:>11} {:>9} {:>12} {:>14}",
        "flow",
        "trace-replay",
        "live",
        "routeFromHAR",
        "zip (KB)",
        "HAR+bodies",
        "HAR.gz",
        "zip/gz",
        "shots (KB)",
        "(zip-shots)/gz"
    );
    for (name, trace, routed, sizes) in &rows {
        println!(
            "{name:<24} {:>13} {:>5} {:>13} {:>10.0} {:>12.0} {:>11.0} {:>8.2}× {:>12.0} {:>13.2}×",
            format!("{}/{}", trace.passed, trace.total),
            trace.live,
            format!("{}/{}", routed.passed, routed.total),
            sizes.zip as f64 / 1024.0,
            sizes.har as f64 / 1024.0,
            sizes.har_gzip as f64 / 1024.0,
            sizes.zip as f64 / sizes.har_gzip as f64,
            sizes.screenshots as f64 / 1024.0,
            (sizes.zip - sizes.screenshots) as f64 / sizes.har_gzip as f64,
        );
    }
    let whole = |outcomes: &mut dyn Iterator<Item = &Outcome>| outcomes.filter(|o| o.passed == o.total).count();
    println!(
        "whole demonstrations replayed: trace-replay {} of {} ({} with no live attempt), routeFromHAR {} of {}",
        whole(&mut rows.iter().map(|row| &row.1)),
        rows.len(),
        rows.iter().filter(|row| row.1.passed == row.1.total && row.1.live == 0).count(),
        whole(&mut rows.iter().map(|row| &row.2)),
        rows.len()
    );
    println!();
    for (name, trace, routed, _) in &rows {
        for (side, outcome) in [("trace-replay", trace), ("routeFromHAR", routed)] {
            if let Some(failure) = &outcome.first_failure {
                println!("{name}, {side}, first failure: {failure}");
            }
        }
    }
    print_yield(&flows, &rows, &shown);
    Ok(())
}

/// The yield: per flow, its steps re-run by `run --human`, the steps whose recorded content showed, the
/// audit's verdict, the checkpoints it kept by kind, and the time processing took (the audit, most of it)
/// against the recording's own duration; then how many recordings became valid tasks.
fn print_yield(flows: &[Flow], rows: &[(&str, Outcome, Outcome, Sizes)], shown: &[(usize, usize)]) {
    println!();
    println!("yield: each recording processed (its checkpoints audited and pruned), then re-run as the person");
    println!(
        "{:<24} {:>9} {:>9} {:>7} {:>26} {:>9} {:>9}",
        "flow", "re-run", "shown", "valid", "checkpoints kept", "audit s", "÷ demo"
    );
    for ((flow, (_, trace, _, _)), (shown, judged)) in flows.iter().zip(rows).zip(shown) {
        let processed = &flow.processed;
        let kinds: Vec<String> = processed.kinds.iter().map(|(kind, count)| format!("{count} {kind}")).collect();
        println!(
            "{:<24} {:>9} {:>9} {:>7} {:>26} {:>9.0} {:>8.1}×",
            flow.name,
            format!("{}/{}", trace.passed, trace.total),
            format!("{shown}/{judged}"),
            if processed.valid { "yes" } else { "NO" },
            kinds.join(", "),
            processed.seconds,
            processed.seconds / processed.recorded_seconds.max(1.0),
        );
    }
    let tasks = flows.iter().filter(|flow| flow.processed.yields_a_task()).count();
    let whole =
        flows.iter().zip(rows).filter(|(flow, row)| flow.processed.yields_a_task() && row.1.passed == row.1.total);
    println!(
        "yield: {tasks} of {} recordings became valid tasks with a checkpoint beyond a page visited; \
         {} of them re-run whole",
        flows.len(),
        whole.count()
    );
    for flow in flows.iter().filter(|flow| !flow.processed.valid) {
        println!("{}: not valid: {}", flow.name, flow.processed.problem.as_deref().unwrap_or("(no problem given)"));
    }
}

/// Records every flow into its own data directory under `out`, and exports each redacted, twice.
async fn record_flows(build: &Build, python: &Path, out: &Path) -> Result<Vec<Flow>> {
    if out.exists() {
        std::fs::remove_dir_all(out).with_context(|| format!("cannot clear {}", out.display()))?;
    }
    let mut flows = Vec::new();
    let data_dir = |name: &str| -> Result<PathBuf> {
        let dir = out.join(name).join("data");
        std::fs::create_dir_all(&dir)?;
        Ok(dir.canonicalize()?)
    };

    eprintln!("recording: Django admin");
    let data = data_dir("django-admin")?;
    let mut app = DjangoAdmin::start(python)?;
    let bundle = app.record(build, &data).await;
    app.server.stop();
    flows.push(export(build, "Django admin", &data, &bundle?)?);

    eprintln!("recording: Datasette");
    let data = data_dir("datasette")?;
    let mut app = Datasette::start(python)?;
    let bundle = app.record(build, &data).await;
    app.server.stop();
    flows.push(export(build, "Datasette SQL editor", &data, &bundle?)?);

    eprintln!("recording: Sphinx documentation");
    let data = data_dir("sphinx")?;
    let mut app = SphinxDocs::start(python)?;
    let bundle = app.record(build, &data).await;
    app.server.stop();
    flows.push(export(build, "Sphinx docs search", &data, &bundle?)?);

    eprintln!("recording: PyWebIO");
    let data = data_dir("pywebio")?;
    let mut app = PyWebIoApp::start(python)?;
    let bundle = app.record(build, &data).await;
    app.server.stop();
    flows.push(export(build, "PyWebIO app (ws)", &data, &bundle?)?);

    eprintln!("recording: JupyterLab");
    let data = data_dir("jupyterlab")?;
    let mut app = JupyterLab::start(&apps::python_of(Environment::Jupyter)?)?;
    let bundle = app.record(build, &data).await;
    app.server.stop();
    flows.push(export(build, "JupyterLab notebook (ws)", &data, &bundle?)?);

    for (name, dir, transport) in [
        ("stores over Socket.IO", "socketio", Transport::SocketIo),
        ("stores over SockJS", "sockjs", Transport::SockJs),
    ] {
        eprintln!("recording: {name}");
        let data = data_dir(dir)?;
        let mut app = LighthouseStores::start(transport)?;
        let bundle = app.record(build, &data).await;
        app.server.stop();
        flows.push(export(build, name, &data, &bundle?)?);
    }

    eprintln!("recording: rustdoc");
    let data = data_dir("rustdoc")?;
    let mut app = RustdocSearch::start()?;
    let bundle = app.record(build, &data).await;
    app.server.stop();
    flows.push(export(build, "rustdoc search (focus)", &data, &bundle?)?);

    eprintln!("recording: NiceGUI");
    let data = data_dir("nicegui")?;
    let mut app = NiceGuiSlider::start(python)?;
    let bundle = app.record(build, &data).await;
    app.server.stop();
    flows.push(export(build, "NiceGUI slider (ws)", &data, &bundle?)?);

    eprintln!("recording: docsify");
    let data = data_dir("docsify")?;
    let mut app = DocsifyHandbook::start()?;
    let bundle = app.record(build, &data).await;
    app.server.stop();
    flows.push(export(build, "docsify routes (#/)", &data, &bundle?)?);

    eprintln!("recording: Wagtail");
    let data = data_dir("wagtail")?;
    let mut app = WagtailPages::start(python)?;
    let bundle = app.record(build, &data).await;
    app.server.stop();
    flows.push(export(build, "Wagtail autosave", &data, &bundle?)?);

    eprintln!("recording: Node-RED");
    let data = data_dir("node-red")?;
    let mut app = NodeRedFlows::start()?;
    let bundle = app.record(build, &data).await;
    app.server.stop();
    flows.push(export(build, "Node-RED drags (ws)", &data, &bundle?)?);

    eprintln!("recording: TinyMCE in Django's admin");
    let data = data_dir("tinymce")?;
    let mut app = TinyMceNotes::start(python)?;
    let bundle = app.record(build, &data).await;
    app.server.stop();
    flows.push(export(build, "TinyMCE written iframe", &data, &bundle?)?);

    eprintln!("recording: Trac behind Basic authentication");
    let data = data_dir("trac-basic-auth")?;
    let mut app = TracTickets::start_behind_basic_auth(&apps::python_of(Environment::Trac)?)?;
    let bundle = app.record_behind_basic_auth(build, &data).await;
    app.server.stop();
    flows.push(export(build, "Trac Basic auth", &data, &bundle?)?);

    for (name, dir) in [("demo shop", "demo"), ("demo shop chat (ws)", "chat"), ("demo shop expert (sse)", "ask")] {
        eprintln!("recording: {name}");
        let data = data_dir(dir)?;
        let site = DemoSite::start(0)?;
        let bundle = match dir {
            "demo" => demo::record(build, &site, &data).await.map(|demonstration| demonstration.bundle),
            "chat" => demo::record_chat(build, &site, &data).await,
            _ => demo::record_ask(build, &site, &data).await,
        };
        site.stop();
        flows.push(export(build, name, &data, &bundle?)?);
    }
    Ok(flows)
}

/// Processes the bundle as a person sharing it would (its checkpoints audited and pruned, timed), then
/// exports its task redacted, and again with its HAR's bodies inline.
fn export(build: &Build, name: &'static str, data: &Path, bundle: &Path) -> Result<Flow> {
    eprintln!("{name}: trace-host process");
    let started = Instant::now();
    let processed = Command::new(&build.trace_host).arg("--data").arg(data).arg("process").arg(bundle).output()?;
    let seconds = started.elapsed().as_secs_f64();
    // An invalid bundle is the figure to report, not a failure of the bench: process says so and exits 1.
    ensure!(
        processed.status.success() || processed.status.code() == Some(1),
        "process failed: {}",
        String::from_utf8_lossy(&processed.stderr)
    );
    let processed = processed_figures(bundle, seconds)?;
    let manifest: Value = serde_json::from_slice(&std::fs::read(bundle.join("manifest.json"))?)?;
    let task = manifest["task"]["id"].as_str().context("the manifest has no task id")?;
    let dir = data.parent().context("a data directory has a parent")?;
    let (zip, embedded) = (dir.join("task.zip"), dir.join("task-embedded.zip"));
    for (path, extra) in [(&zip, None), (&embedded, Some("--embed-bodies"))] {
        let output = Command::new(&build.trace_host)
            .arg("--data")
            .arg(data)
            .args(["export", task, "--redact", "--out"])
            .arg(path)
            .args(extra)
            .output()?;
        ensure!(output.status.success(), "export failed: {}", String::from_utf8_lossy(&output.stderr));
    }
    Ok(Flow { name, zip, embedded, processed })
}

/// Reads what processing wrote into `bundle`: its audit and its checkpoints.
fn processed_figures(bundle: &Path, seconds: f64) -> Result<Processed> {
    let read = |file: &str| -> Result<Value> {
        Ok(serde_json::from_slice(&std::fs::read(bundle.join(file)).with_context(|| format!("no {file}"))?)?)
    };
    let audit = read("audit.json")?;
    let checkpoints = read("checkpoints.json")?;
    let mut kinds = std::collections::BTreeMap::new();
    for checkpoint in checkpoints.as_array().into_iter().flatten() {
        let kind = checkpoint["predicate"]["kind"].as_str().unwrap_or("?").to_owned();
        *kinds.entry(kind).or_insert(0) += 1;
    }
    let recorded_seconds = recorded_seconds(bundle)?;
    Ok(Processed {
        valid: audit["valid"] == true,
        problem: audit["problems"][0].as_str().map(str::to_owned),
        kinds,
        seconds,
        recorded_seconds,
    })
}

struct Sizes {
    zip: u64,
    har: u64,
    har_gzip: u64,
    /// What the zip's screenshots take in it (a HAR has none): the distinct images' bytes.
    screenshots: u64,
}

impl Sizes {
    fn of(flow: &Flow) -> Result<Sizes> {
        let (har, har_gzip) = embedded_har_sizes(&flow.embedded)?;
        // Screenshots are packed with the DOM snapshots, where an image's bytes stay as they are and an image
        // seen before costs a few: what they take is the size of the distinct ones.
        let manifest = Bundle::open(&flow.zip)?.manifest()?;
        let distinct: std::collections::BTreeMap<&str, u64> = manifest
            .files
            .iter()
            .filter(|file| file.path.starts_with("screenshots/"))
            .map(|file| (file.sha256.as_str(), file.size))
            .collect();
        let screenshots = distinct.values().sum();
        Ok(Sizes { zip: std::fs::metadata(&flow.zip)?.len(), har, har_gzip, screenshots })
    }
}

/// Runs the zip's demonstration with Playwright and judges each step.
async fn run_with_playwright(node_modules: &Path, chromium: &Path, zip: &Path, timeout: Duration) -> Result<Outcome> {
    let (calls, credentials) = human_trajectory(zip, Default::default())?;
    let archive = ReplayArchive::open(zip)?;
    let viewport = archive.viewport.map(|v| json!({ "width": v.width as i64, "height": v.height as i64 }));
    let clocks = archive.recorded_clocks();
    let script = Path::new(env!("CARGO_MANIFEST_DIR")).join("benches/real_apps/steps.mjs");
    let config = json!({
        "nodeModules": node_modules, "har": zip, "chromium": chromium,
        "args": chromium::command_line_flags(), "viewport": viewport,
    });
    let (mut playwright, _) = Script::start(&script, &config, WAIT).await?;
    let mut bundle = Bundle::open(zip)?;
    let mut outcome = Outcome { total: calls.len(), ..Outcome::default() };
    for (index, call) in calls.iter().enumerate() {
        let settled = settled_snapshot(&calls, index);
        let verdict = judge_step(&mut playwright, &mut bundle, call, settled, &credentials, &clocks, timeout).await;
        match verdict {
            Ok(()) => outcome.passed += 1,
            Err(reason) => {
                let failure = format!("step {} {}: {reason:#}", index + 1, call.action.name());
                eprintln!("  {failure}");
                outcome.first_failure.get_or_insert(failure);
            }
        }
    }
    playwright.close();
    Ok(outcome)
}

async fn judge_step(
    playwright: &mut Script,
    bundle: &mut Bundle,
    call: &ToolCall,
    settled: Option<&str>,
    credentials: &[Credential],
    clocks: &trace_analysis::canonical::Clocks,
    timeout: Duration,
) -> Result<()> {
    let mut call = call.clone();
    if let ToolAction::Input { text } = &mut call.action {
        *text = fill_placeholders(text, credentials)?;
    }
    if let ToolAction::Switch { tab } = call.action {
        playwright.ask(&json!({ "use": tab }), WAIT).await?;
    }
    let done = playwright.ask(&json!({ "step": call, "timeoutMs": timeout.as_millis() as u64 }), WAIT).await?;
    if let Some(error) = done.get("error") {
        bail!("{}", error.as_str().unwrap_or_default());
    }
    if let Some(expected) = &call.url_after {
        wait_for_url(playwright, expected, timeout).await?;
    }
    tokio::time::sleep(SETTLE).await;
    if let Some(snapshot) = &call.dom_snapshot {
        let recorded = expected_text(|file| Ok(bundle.read(file)?), snapshot, settled)?;
        let deadline = Instant::now() + timeout;
        loop {
            let html = playwright.ask(&json!({ "html": true }), WAIT).await?;
            let shown = page_text(0, "", "", html["html"].as_str().unwrap_or_default());
            let comparison = compare_text(&recorded, &shown, clocks);
            if comparison.passes() {
                break;
            }
            if Instant::now() >= deadline {
                bail!(
                    "the page shows {:.0}% of the recorded text; missing {:?}",
                    comparison.shown * 100.0,
                    comparison.missing
                );
            }
            tokio::time::sleep(POLL).await;
        }
    }
    Ok(())
}

/// Waits for a tab to show `expected` (the current one, or one the step opened, which becomes current).
async fn wait_for_url(playwright: &mut Script, expected: &str, timeout: Duration) -> Result<()> {
    let deadline = Instant::now() + timeout;
    loop {
        let pages = playwright.ask(&json!({ "pages": true }), WAIT).await?;
        let urls: Vec<&str> = pages["urls"].as_array().into_iter().flatten().filter_map(Value::as_str).collect();
        let current = pages["current"].as_u64().map(|i| i as usize);
        let matches = |url: &str| reaches(url, expected);
        if current.and_then(|i| urls.get(i)).is_some_and(|url| matches(url)) {
            return Ok(());
        }
        if let Some(other) = urls.iter().position(|url| matches(url)) {
            playwright.ask(&json!({ "use": other }), WAIT).await?;
            return Ok(());
        }
        if Instant::now() >= deadline {
            let reached = current.and_then(|i| urls.get(i)).copied().unwrap_or_default();
            bail!("reached {reached}, the recording reached {expected}");
        }
        tokio::time::sleep(POLL).await;
    }
}
