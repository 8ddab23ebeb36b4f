//! End to end on real applications that nobody on this team wrote (see [`trace_e2e::apps`]), through the
//! command line a user runs: a demonstration is recorded in Chromium with the extension and the host, the
//! application is stopped and a sentinel listens on its port, the task is exported redacted, and
//! `trace-replay run --human` must re-run every step of it offline, reaching each step's recorded URL,
//! with no request missed and nothing reaching the network. Then its checkpoints, as the rules chose them,
//! are audited offline (`trace-replay audit`): the demonstration earns full marks in order, an agent that
//! does nothing zero, every perturbed demonstration zero. Needs `cargo xtask dist` and the applications
//! (`bash .ci/install`, in a Python virtual environment).

use std::path::{Path, PathBuf};
use std::process::{Command, Output};

use std::time::Duration;

use trace_e2e::apps::dash_app::{self, DashApp};
use trace_e2e::apps::datasette::{self, Datasette};
use trace_e2e::apps::jupyter_lab::{self, JupyterLab};
use trace_e2e::apps::lighthouse_stores::{self, LighthouseStores, Transport};
use trace_e2e::apps::pywebio_app::PyWebIoApp;
use trace_e2e::apps::sphinx_docs::{self, SphinxDocs};
use trace_e2e::apps::trac_tickets::{self, TracTickets};
use trace_e2e::apps::{self, Server, django_admin, django_admin::DjangoAdmin};
use trace_e2e::audit::{assert_proves, audit};
use trace_e2e::browser::{Build, click, type_into, wait_for_text};
use trace_e2e::sentinel::Sentinel;
use trace_manifest::postprocess::{Checkpoint, CredentialEntry, Predicate};
use trace_manifest::report::FidelityReport;
use trace_manifest::trajectory::{ToolAction, Trajectory};
use trace_replay::archive::ReplayArchive;
use trace_replay::serve::{Options, Replay};

const WAIT: Duration = Duration::from_secs(20);

fn run(program: &Path, args: &[&str]) -> Output {
    let output = Command::new(program).args(args).output().unwrap();
    eprintln!("{}", String::from_utf8_lossy(&output.stderr));
    output
}

/// Exports the data directory's one task redacted, as a person sharing it would, and returns the zip.
fn export_redacted(build: &Build, data: &Path, bundle: &Path, out: &Path) -> std::path::PathBuf {
    let manifest: serde_json::Value =
        serde_json::from_slice(&std::fs::read(bundle.join("manifest.json")).unwrap()).unwrap();
    let task = manifest["task"]["id"].as_str().unwrap();
    let zip = out.join("task.zip");
    let output = run(
        &build.trace_host,
        &["--data", data.to_str().unwrap(), "export", task, "--out", zip.to_str().unwrap(), "--redact"],
    );
    assert!(output.status.success(), "export failed: {}", String::from_utf8_lossy(&output.stderr));
    zip
}

/// The trajectory's steps, for the test's output when it fails.
fn print_steps(trajectory: &Trajectory) {
    for (index, call) in trajectory.tool_calls.iter().enumerate() {
        let target = call.target.as_ref().map_or("-", |target| target.selector.as_str());
        eprintln!("{:>3} {:?} on {target}", index + 1, call.action);
    }
}

fn trajectory_of(zip: &Path) -> Trajectory {
    let mut bundle = trace_manifest::archive::Bundle::open(zip).unwrap();
    serde_json::from_slice(&bundle.read("trajectory.json").unwrap()).unwrap()
}

fn checkpoints_of(zip: &Path) -> Vec<Checkpoint> {
    let mut bundle = trace_manifest::archive::Bundle::open(zip).unwrap();
    serde_json::from_slice(&bundle.read("checkpoints.json").unwrap()).unwrap()
}

/// A recording re-run offline by [`replayed_offline`].
struct Offline {
    zip: PathBuf,
    trajectory: Trajectory,
    report: FidelityReport,
    /// The report for people, for assertion messages.
    text: String,
    /// On the stopped application's port, for further replays to be checked too.
    sentinel: Sentinel,
    _out: tempfile::TempDir,
}

/// Stops the application, listens on its port, exports the recording redacted, and re-runs it with
/// `run --human`, which must pass every step with nothing missed, no live attempt and nothing reaching
/// the port; then audits its checkpoints, which must discriminate, still with nothing reaching the port.
fn replayed_offline(build: &Build, server: &mut Server, data: &Path, bundle: &Path) -> Offline {
    let port = server.port();
    server.stop();
    let sentinel = Sentinel::start(port);
    let out = tempfile::tempdir().unwrap();
    let zip = export_redacted(build, data, bundle, out.path());
    let trajectory = trajectory_of(&zip);
    print_steps(&trajectory);
    let (report, faithful) = build.replay_human(&zip).unwrap();
    let text = trace_replay::run::text(&report);
    assert!(faithful && report.steps_failed == 0, "{text}");
    assert!(report.misses.is_empty() && report.live_attempts == 0, "{text}");
    assert_eq!(sentinel.connections(), 0, "replay reached the stopped application");
    assert_proves(&audit(build, &zip));
    assert_eq!(sentinel.connections(), 0, "the audit reached the stopped application");
    Offline { zip, trajectory, report, text, sentinel, _out: out }
}

/// Whether a step that reached a URL containing `part` showed the recorded page's text.
fn shown_after(report: &FidelityReport, part: &str) -> bool {
    let step = report.steps.iter().find(|step| step.url_reached.as_deref().is_some_and(|url| url.contains(part)));
    step.is_some_and(|step| step.text_shown.is_some_and(|shown| shown >= 0.9))
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn django_admin_replays_every_step_offline() {
    let test = "django_admin_replays_every_step_offline";
    let Some(build) = Build::for_tests(test) else { return };
    let Some(python) = apps::python_for_tests(test) else { return };
    let mut app = DjangoAdmin::start(&python).unwrap();
    let data = tempfile::tempdir().unwrap();
    let bundle = app.record(&build, data.path()).await.unwrap();
    let (dashboard, login) = (app.server.url("/admin/"), app.server.url("/admin/login/?next=/admin/"));
    // Kept whole: the zip lives in its temporary directory, which dropping the rest would remove.
    let offline = replayed_offline(&build, &mut app.server, data.path(), &bundle);
    let Offline { zip, trajectory, report, text, sentinel, .. } = &offline;
    // The person asked for the dashboard, and the site sent them to log in: the re-run starts where they did.
    assert!(
        matches!(&trajectory.tool_calls[0].action, ToolAction::Navigate { url } if *url == dashboard),
        "{:?}",
        trajectory.tool_calls[0]
    );
    assert!(report.steps_total >= 9, "{text}");
    let saved = report
        .steps
        .iter()
        .any(|step| step.url_reached.as_deref().is_some_and(|url| url.ends_with("/admin/auth/group/")));
    assert!(saved, "no step reached the group list: {text}");

    // Started on the login page instead, the dashboard is asked for only after the login, with the session
    // cookie: it must be the logged-in dashboard, not the redirect to the login page that the same URL
    // answered before the login in the recording.
    let credentials: Vec<CredentialEntry> = {
        let mut bundle = trace_manifest::archive::Bundle::open(zip).unwrap();
        serde_json::from_slice(&bundle.read("credentials.json").unwrap()).unwrap()
    };
    let options = Options { chromium: Some(build.chromium.clone()), ..Options::default() };
    let replay = Replay::launch(ReplayArchive::open(zip).unwrap(), &options).await.unwrap();
    let page = replay.open(&login).await.unwrap();
    type_into(&page, "#id_username", django_admin::USER).await.unwrap();
    type_into(&page, "#id_password", &credentials[0].value).await.unwrap();
    click(&page, "input[type=submit]").await.unwrap();
    let heading = wait_for_text(&page, "#content h1", WAIT, |t| t.contains("Site administration")).await;
    let stats = replay.close().await.unwrap();
    heading.unwrap_or_else(|error| panic!("{error:#}\n{stats}"));
    assert!(stats.misses.is_empty() && stats.live_attempts == 0, "{stats}");
    assert_eq!(sentinel.connections(), 0, "replay reached the stopped application");
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn datasette_replays_a_query_typed_into_its_code_editor() {
    let test = "datasette_replays_a_query_typed_into_its_code_editor";
    let Some(build) = Build::for_tests(test) else { return };
    let Some(python) = apps::python_for_tests(test) else { return };
    let mut app = Datasette::start(&python).unwrap();
    let data = tempfile::tempdir().unwrap();
    let bundle = app.record(&build, data.path()).await.unwrap();
    let Offline { trajectory, report, text, .. } = replayed_offline(&build, &mut app.server, data.path(), &bundle);
    // The query is one input of the editor, its whole text, not a key at a time.
    let inputs: Vec<&str> = trajectory
        .tool_calls
        .iter()
        .filter_map(|call| match &call.action {
            ToolAction::Input { text } => Some(text.as_str()),
            _ => None,
        })
        .collect();
    assert_eq!(inputs, [datasette::QUERY], "{:#?}", trajectory.tool_calls);
    // The results page was reached by the query the re-run typed, and shows the recorded rows.
    assert!(shown_after(&report, "sql="), "{text}");
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_documentation_site_replays_its_client_side_search() {
    let test = "a_documentation_site_replays_its_client_side_search";
    let Some(build) = Build::for_tests(test) else { return };
    let Some(python) = apps::python_for_tests(test) else { return };
    let mut app = SphinxDocs::start(&python).unwrap();
    let data = tempfile::tempdir().unwrap();
    let bundle = app.record(&build, data.path()).await.unwrap();
    let Offline { report, text, .. } = replayed_offline(&build, &mut app.server, data.path(), &bundle);
    // The search page was reached, and the result the person clicked, which appeared only after the
    // search ran in the page, was waited for and followed: the page it leads to shows the answer.
    let query = format!("q={}", sphinx_docs::QUERY);
    let searched = report.steps.iter().any(|step| step.url_reached.as_deref().is_some_and(|url| url.contains(&query)));
    assert!(searched, "{text}");
    assert!(shown_after(&report, "usage.html"), "{text}");
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_websocket_application_replays_its_conversation_offline() {
    let test = "a_websocket_application_replays_its_conversation_offline";
    let Some(build) = Build::for_tests(test) else { return };
    let Some(python) = apps::python_for_tests(test) else { return };
    let mut app = PyWebIoApp::start(&python).unwrap();
    let data = tempfile::tempdir().unwrap();
    let bundle = app.record(&build, data.path()).await.unwrap();
    let Offline { report, text, .. } = replayed_offline(&build, &mut app.server, data.path(), &bundle);
    // The form and the answer came down the socket; the re-run's last step shows the answer.
    let last = report.steps.iter().rev().find(|step| step.text_shown.is_some()).expect("no step was judged by text");
    assert!(last.text_shown.is_some_and(|shown| shown >= 0.9), "{text}");
    let frames = &report.websocket_frames;
    assert!(frames.played > 0 && frames.matched > 0 && frames.unmatched == 0, "{text}");
}

/// A single-page application over a JSON API: the order is a JSON `POST` the page also sends, with the
/// name still empty, as it starts; the checkpoint must be the person's (the name they typed), not the
/// start's, and the receipt the server wrote back the final state.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_single_page_application_over_a_json_api_replays_and_its_checkpoints_discriminate() {
    let test = "a_single_page_application_over_a_json_api_replays_and_its_checkpoints_discriminate";
    let Some(build) = Build::for_tests(test) else { return };
    let Some(python) = apps::python_for_tests(test) else { return };
    let mut app = DashApp::start(&python).unwrap();
    let data = tempfile::tempdir().unwrap();
    let bundle = app.record(&build, data.path()).await.unwrap();
    // Kept whole: the zip lives in its temporary directory, which dropping the rest would remove.
    let offline = replayed_offline(&build, &mut app.server, data.path(), &bundle);
    let Offline { zip, report, text, .. } = &offline;
    let last = report.steps.iter().rev().find(|step| step.text_shown.is_some()).expect("no step was judged by text");
    assert!(last.text_shown.is_some_and(|shown| shown >= 0.9), "{text}");
    let checkpoints = checkpoints_of(zip);
    let ordered = checkpoints.iter().any(|checkpoint| {
        matches!(&checkpoint.predicate, Predicate::Request { method, url_pattern, body_fields }
            if method == "POST" && url_pattern.ends_with("/_dash-update-component")
                && body_fields.values().any(|value| value == dash_app::NAME))
    });
    assert!(ordered, "no checkpoint for the order with the name typed: {checkpoints:#?}");
    let receipt = Predicate::Text { text: dash_app::RECEIPT.to_owned() };
    assert!(checkpoints.iter().any(|checkpoint| checkpoint.predicate == receipt), "{checkpoints:#?}");
}

/// A ticket tracker: the new ticket is a form POST with a token tied to a cookie, answered with a redirect
/// to the ticket; its page repeats the site's frame (banner, navigation, footer), which no checkpoint may
/// take for the final state.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_ticket_tracker_replays_a_new_ticket_and_its_checkpoints_discriminate() {
    let test = "a_ticket_tracker_replays_a_new_ticket_and_its_checkpoints_discriminate";
    let Some(build) = Build::for_tests(test) else { return };
    let Some(python) = apps::python_of_for_tests(test, apps::Environment::Trac) else { return };
    let mut app = TracTickets::start(&python).unwrap();
    let data = tempfile::tempdir().unwrap();
    let bundle = app.record(&build, data.path()).await.unwrap();
    // Kept whole: the zip lives in its temporary directory, which dropping the rest would remove.
    let offline = replayed_offline(&build, &mut app.server, data.path(), &bundle);
    let Offline { zip, report, text, .. } = &offline;
    assert!(shown_after(report, "/ticket/1"), "{text}");
    let checkpoints = checkpoints_of(zip);
    let created = checkpoints.iter().any(|checkpoint| {
        matches!(&checkpoint.predicate, Predicate::Request { method, body_fields, .. }
            if method == "POST" && body_fields.get("field_summary").map(String::as_str) == Some(trac_tickets::SUMMARY))
    });
    assert!(created, "no checkpoint for the ticket with its summary: {checkpoints:#?}");
}

/// A notebook whose kernel speaks over a WebSocket with ids the page makes: in the socket's URL (the
/// session, which the redacted export replaces), and in every message (whose `msg_id` the kernel's replies
/// echo, beside the time the page's clock wrote). The re-run's page makes other ids at another time; the
/// recorded socket must still be played to it, its replies carrying the page's ids, so that the cell runs
/// offline, shows the kernel's output, is saved as the person saved it (a `PUT` whose body `fetch`
/// sent as a stream), and renamed from the File menu.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_notebook_runs_its_cell_offline_over_the_kernels_socket() {
    let test = "a_notebook_runs_its_cell_offline_over_the_kernels_socket";
    let Some(build) = Build::for_tests(test) else { return };
    let Some(python) = apps::python_of_for_tests(test, apps::Environment::Jupyter) else { return };
    let mut app = JupyterLab::start(&python).unwrap();
    let data = tempfile::tempdir().unwrap();
    let bundle = app.record(&build, data.path()).await.unwrap();
    // As a person shares it: processed (its checkpoints audited and pruned), then exported redacted.
    let output =
        run(&build.trace_host, &["--data", data.path().to_str().unwrap(), "process", bundle.to_str().unwrap()]);
    // Its report (the audit's table) is on stdout; `run` printed stderr.
    assert!(output.status.success(), "process failed:\n{}", String::from_utf8_lossy(&output.stdout));
    let offline = replayed_offline(&build, &mut app.server, data.path(), &bundle);
    let Offline { report, text, trajectory, .. } = &offline;
    let frames = &report.websocket_frames;
    assert!(frames.played > 0 && frames.matched > 0 && frames.unmatched == 0, "{text}");
    // Shift+Enter in the cell's editor is the person's command, not text typed into it.
    let run = trajectory
        .tool_calls
        .iter()
        .position(|call| matches!(&call.action, ToolAction::SendKeys { keys } if keys == "Shift+Enter"));
    let run = run.expect("the cell was never run in the trajectory");
    let shown = report.steps[run + 1..].iter().any(|step| step.text_shown.is_some_and(|shown| shown >= 0.9));
    assert!(shown, "{text}");
    let saved = report.requests.exact + report.requests.canonical;
    assert!(saved > 0 && report.misses.is_empty(), "{text}");
    // Renamed from the File menu, whose item acts on the button's release: the notebook's new address.
    let renamed = format!("/lab/tree/{}.ipynb", jupyter_lab::RENAMED);
    let reached =
        report.steps.iter().any(|step| step.url_reached.as_deref().is_some_and(|url| url.ends_with(&renamed)));
    assert!(reached, "no step reached {renamed}: {text}");
}

/// Socket.IO's default transports: long-polling first, whose handshake gives the page a session id, then
/// the upgrade to a WebSocket whose URL carries it. The re-run must play the socket (not reach for a live
/// one), not answer the polls in a flood, and show the server's confirmation of the order.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_socketio_application_replays_its_polling_and_upgraded_socket_offline() {
    stores_replay_offline(
        "a_socketio_application_replays_its_polling_and_upgraded_socket_offline",
        Transport::SocketIo,
    )
    .await;
}

/// SockJS: an `info` request with a random `entropy`, then a WebSocket whose URL holds a server number and
/// a session id the page made with `Math.random()`, which the re-run's page makes otherwise.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_sockjs_application_replays_its_socket_with_ids_the_page_made_offline() {
    stores_replay_offline("a_sockjs_application_replays_its_socket_with_ids_the_page_made_offline", Transport::SockJs)
        .await;
}

/// Records the lighthouse stores over `transport`, and replays the order offline: the confirmation shown,
/// the socket played and matched, no request answered in a flood.
async fn stores_replay_offline(test: &str, transport: Transport) {
    let Some(build) = Build::for_tests(test) else { return };
    let mut app = match LighthouseStores::start(transport) {
        Ok(app) => app,
        Err(error) if std::env::var_os(trace_e2e::browser::REQUIRED_ENV).is_none() => {
            eprintln!("skipped {test}: {error:#}");
            return;
        }
        Err(error) => panic!("{test}: {error:#}"),
    };
    let data = tempfile::tempdir().unwrap();
    let bundle = app.record(&build, data.path()).await.unwrap();
    let offline = replayed_offline(&build, &mut app.server, data.path(), &bundle);
    let Offline { report, text, .. } = &offline;
    let last = report.steps.iter().rev().find(|step| step.text_shown.is_some()).expect("no step was judged by text");
    assert!(last.text_shown.is_some_and(|shown| shown >= 0.9), "{text}");
    let frames = &report.websocket_frames;
    assert!(frames.played > 0 && frames.matched > 0 && frames.unmatched == 0, "{text}");
    // A poll answered at once is asked again at once: a flood shows as hundreds of requests.
    let requests = report.requests.exact + report.requests.canonical + report.requests.fuzzy;
    assert!(requests < 100, "{requests} requests answered: {text}");
    let confirmation = Predicate::Text { text: lighthouse_stores::CONFIRMATION.to_owned() };
    let checkpoints = checkpoints_of(&offline.zip);
    assert!(checkpoints.iter().any(|checkpoint| checkpoint.predicate == confirmation), "{checkpoints:#?}");
}
