//! End to end on real applications that nobody on this team wrote (see [`trace_e2e::apps`]), through the
//! command line a user runs: a demonstration is recorded in Chromium with the extension and the host, the
//! application is stopped and a sentinel listens on its port, the task is exported redacted, and its
//! checkpoints, as the rules chose them, are audited offline (`trace-replay audit`): the audit's re-run of
//! the person's demonstration (the report `trace-replay run --human` gives, from its `rerun.json`) must
//! pass every step, reaching each step's recorded URL, with no request missed and nothing reaching the
//! network, and earn full marks in order; an agent that does nothing earns zero, every perturbed
//! demonstration zero. Needs `cargo xtask dist` and the applications
//! (`bash .ci/install`, in a Python virtual environment).

use std::path::{Path, PathBuf};
use std::process::{Command, Output};

use std::time::Duration;

use trace_e2e::apps::dash_app::{self, DashApp};
use trace_e2e::apps::datasette::{self, Datasette};
use trace_e2e::apps::docsify_handbook::{self, DocsifyHandbook};
use trace_e2e::apps::jupyter_lab::{self, JupyterLab};
use trace_e2e::apps::lighthouse_stores::{self, LighthouseStores, Transport};
use trace_e2e::apps::nicegui_slider::{self, NiceGuiSlider};
use trace_e2e::apps::node_red_flows::{self, NodeRedFlows};
use trace_e2e::apps::pywebio_app::PyWebIoApp;
use trace_e2e::apps::rustdoc_search::{self, RustdocSearch};
use trace_e2e::apps::sphinx_docs::{self, SphinxDocs};
use trace_e2e::apps::tinymce_notes::{self, TinyMceNotes};
use trace_e2e::apps::trac_tickets::{self, TracTickets};
use trace_e2e::apps::wagtail_pages::{self, WagtailPages};
use trace_e2e::apps::{self, Server, django_admin, django_admin::DjangoAdmin};
use trace_e2e::audit::{assert_proves, audit_with_rerun};
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
    let mut bundle = trace_bundle::archive::Bundle::open(zip).unwrap();
    serde_json::from_slice(&bundle.read("trajectory.json").unwrap()).unwrap()
}

fn checkpoints_of(zip: &Path) -> Vec<Checkpoint> {
    let mut bundle = trace_bundle::archive::Bundle::open(zip).unwrap();
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

/// Stops the application, listens on its port, exports the recording redacted, and audits it: the
/// audit's re-run of the demonstration (its `rerun.json`, what `run --human` reports) must pass every step
/// with nothing missed and no live attempt, the checkpoints must discriminate, and nothing may reach the
/// port.
fn replayed_offline(build: &Build, server: &mut Server, data: &Path, bundle: &Path) -> Offline {
    let port = server.port();
    server.stop();
    let sentinel = Sentinel::start(port);
    let out = tempfile::tempdir().unwrap();
    let zip = export_redacted(build, data, bundle, out.path());
    let trajectory = trajectory_of(&zip);
    print_steps(&trajectory);
    let (audit, report) = audit_with_rerun(build, &zip);
    let text = trace_replay::run::text(&report);
    assert!(report.is_faithful() && report.steps_failed == 0, "{text}");
    assert!(report.misses.is_empty() && report.live_attempts == 0, "{text}");
    assert_proves(&audit);
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
        let mut bundle = trace_bundle::archive::Bundle::open(zip).unwrap();
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
        matches!(&checkpoint.predicate, Predicate::Request { method, url_pattern, body_fields, .. }
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

/// A page that loads code when a field gets the focus (rustdoc's search: its code and the crate's index
/// load only once the Search button opens the box). The person waited after opening it before typing; the
/// re-run must too, or it types before the search code has arrived and no search runs: no results, no
/// `?search=` URL, and the result the person clicked is not there to click.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_search_whose_code_loads_on_focus_replays_offline() {
    let test = "a_search_whose_code_loads_on_focus_replays_offline";
    let Some(build) = Build::for_tests(test) else { return };
    let mut app = RustdocSearch::start().unwrap();
    let data = tempfile::tempdir().unwrap();
    let bundle = app.record(&build, data.path()).await.unwrap();
    let offline = replayed_offline(&build, &mut app.server, data.path(), &bundle);
    let Offline { trajectory, report, text, .. } = &offline;
    // The query is one input, typed after the click that opened the box.
    let typed = trajectory
        .tool_calls
        .iter()
        .position(|call| matches!(&call.action, ToolAction::Input { text } if text == rustdoc_search::QUERY));
    let typed = typed.unwrap_or_else(|| panic!("the query was never typed: {:#?}", trajectory.tool_calls));
    assert!(
        matches!(trajectory.tool_calls[typed - 1].action, ToolAction::Click { .. }),
        "{:#?}",
        trajectory.tool_calls
    );
    // The search ran in the re-run (its URL and its results), and the result clicked led to the answer.
    let query = format!("search={}", rustdoc_search::QUERY);
    assert!(shown_after(report, &query), "{text}");
    assert!(shown_after(report, &format!("fn.{}.html", rustdoc_search::ITEM)), "{text}");
}

/// A server-driven interface over one socket (NiceGUI's) whose slider is throttled and whose button sends
/// at once: the person clicked the slider's thumb where it stood, nudged it with the arrow keys, paused,
/// and pressed Compute. The re-run must click the thumb, not the slider's middle (which would move it),
/// press the keys at a pace the slider follows and wait as the person did before the button, or the page
/// sends the click before the slider's last value and the summary shows another product. The page's own
/// acknowledgements of the server's updates are no checkpoint, and are answered with none of the server's
/// updates (answered with the slider's next one, the page sent every value a step ahead): the audit's run
/// without one arrow press must fail.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_throttled_slider_over_a_socket_replays_before_its_button() {
    let test = "a_throttled_slider_over_a_socket_replays_before_its_button";
    let Some(build) = Build::for_tests(test) else { return };
    let Some(python) = apps::python_for_tests(test) else { return };
    let mut app = NiceGuiSlider::start(&python).unwrap();
    let data = tempfile::tempdir().unwrap();
    let bundle = app.record(&build, data.path()).await.unwrap();
    let offline = replayed_offline(&build, &mut app.server, data.path(), &bundle);
    let Offline { zip, trajectory, report, text, .. } = &offline;
    let arrows = trajectory
        .tool_calls
        .iter()
        .filter(|call| matches!(&call.action, ToolAction::SendKeys { keys } if keys == "ArrowRight"))
        .count();
    assert_eq!(arrows, nicegui_slider::PRESSES, "{:#?}", trajectory.tool_calls);
    let frames = &report.websocket_frames;
    assert!(frames.played > 0 && frames.matched > 0 && frames.unmatched == 0, "{text}");
    // The summary the server sent for the slider at 6 is what the re-run's last judged step shows, and
    // what the task's final state is.
    let last = report.steps.iter().rev().find(|step| step.text_shown.is_some()).expect("no step was judged by text");
    assert!(last.text_shown.is_some_and(|shown| shown >= 0.9), "{text}");
    let summary = Predicate::Text { text: nicegui_slider::SUMMARY.to_owned() };
    let checkpoints = checkpoints_of(zip);
    assert!(checkpoints.iter().any(|checkpoint| checkpoint.predicate == summary), "{checkpoints:#?}");
}

/// A single-page application whose routes are URL fragments (docsify's `/#/rooms/oil`): every page is the
/// one document `/`, and choosing a route fetches its Markdown by script. The re-run must reach each route
/// the person chose, judged by the fragment, and show the second one's page.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_hash_routed_site_replays_each_route_offline() {
    let test = "a_hash_routed_site_replays_each_route_offline";
    let Some(build) = Build::for_tests(test) else { return };
    let mut app = match DocsifyHandbook::start() {
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
    let Offline { trajectory, report, text, .. } = &offline;
    // Each route is the URL a click reached, fragment and all.
    for route in [docsify_handbook::FIRST_ROUTE, docsify_handbook::SECOND_ROUTE] {
        let recorded = trajectory.tool_calls.iter().any(|call| {
            matches!(call.action, ToolAction::Click { .. })
                && call.url_after.as_deref().is_some_and(|url| url.ends_with(route))
        });
        assert!(recorded, "no click reached {route}: {:#?}", trajectory.tool_calls);
        assert!(shown_after(report, route), "{text}");
    }
}

/// An editor that saves by itself (Wagtail's): once the person stopped typing the new page's title, the
/// page posted the form in the background and its URL became the new page's edit URL; their Publish then
/// posted to that URL. The re-run must wait for the autosave as the person did, reach the edit URL, and
/// publish that page (a POST to the edit URL with the title typed), not post the add form a second time.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn an_autosaving_editor_replays_its_save_and_the_publish_after_it() {
    let test = "an_autosaving_editor_replays_its_save_and_the_publish_after_it";
    let Some(build) = Build::for_tests(test) else { return };
    let Some(python) = apps::python_for_tests(test) else { return };
    let mut app = WagtailPages::start(&python).unwrap();
    let data = tempfile::tempdir().unwrap();
    let bundle = app.record(&build, data.path()).await.unwrap();
    let offline = replayed_offline(&build, &mut app.server, data.path(), &bundle);
    let Offline { zip, trajectory, report, text, .. } = &offline;
    // The autosave's new URL is where the typing of the title left the person.
    let typed = trajectory
        .tool_calls
        .iter()
        .find(|call| matches!(&call.action, ToolAction::Input { text } if text == wagtail_pages::TITLE));
    let typed = typed.unwrap_or_else(|| panic!("the title was never typed: {:#?}", trajectory.tool_calls));
    assert!(typed.url_after.as_deref().is_some_and(|url| url.ends_with(wagtail_pages::EDIT_PATH)), "{typed:#?}");
    assert!(
        report
            .steps
            .iter()
            .any(|step| step.url_reached.as_deref().is_some_and(|url| url.ends_with(wagtail_pages::EDIT_PATH))),
        "{text}"
    );
    // Published: the listing the publish leads to says so.
    let last = report.steps.iter().rev().find(|step| step.text_shown.is_some()).expect("no step was judged by text");
    assert!(last.text_shown.is_some_and(|shown| shown >= 0.9), "{text}");
    let checkpoints = checkpoints_of(zip);
    let published = checkpoints.iter().any(|checkpoint| {
        matches!(&checkpoint.predicate, Predicate::Request { method, url_pattern, body_fields, .. }
            if method == "POST" && url_pattern.contains(wagtail_pages::EDIT_PATH)
                && body_fields.get("title").map(String::as_str) == Some(wagtail_pages::TITLE))
    });
    assert!(published, "no checkpoint for the publish of the page with its title: {checkpoints:#?}");
    // The editor tells the server every ten seconds that the page is still being edited: the page's doing,
    // on a timer, not the person's.
    let pinged = checkpoints.iter().any(|checkpoint| {
        matches!(&checkpoint.predicate,
            Predicate::Request { url_pattern, .. } if url_pattern.contains("/editing-sessions/"))
    });
    assert!(!pinged, "the editor's own editing-session ping is a checkpoint: {checkpoints:#?}");
}

/// Whether a checkpoint names a field of a request body whose last part is `name` (`flows[1].x`, `x`).
fn names_field(checkpoint: &Checkpoint, name: &str) -> bool {
    let last = |field: &str| field.rsplit(['.', '[', '/']).next().map(|part| part.trim_end_matches(']').to_owned());
    matches!(&checkpoint.predicate, Predicate::Request { body_fields, .. }
        if body_fields.keys().any(|field| last(field).as_deref() == Some(name)))
}

/// A canvas editor built by drag and drop (Node-RED): two nodes dragged from a palette onto an SVG canvas,
/// a wire dragged between their ports, Deploy (an HTTP POST after which the server pushes notifications
/// over its socket), and the inject node's button, whose debug message comes back over the socket. Each
/// drag is the person's act (issue #44): recorded as a drag from its source to its target, not as clicks
/// on the temporary copy under the pointer, and replayed with real pointer events, so that the re-run
/// builds the same flow and deploys it. The debug message the server pushes names the nodes by the ids the
/// recorded editor drew; the replayed editor drew others (seeded random numbers), which its deploy sent, so
/// the message must reach it with those, or the debug panel shows nothing. What the editor does on its own
/// (saving the user's settings on its first load) and where a node happens to sit on the canvas are not the
/// task's checkpoints.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_canvas_editor_replays_its_drags_and_the_deploy_offline() {
    let test = "a_canvas_editor_replays_its_drags_and_the_deploy_offline";
    let Some(build) = Build::for_tests(test) else { return };
    let mut app = match NodeRedFlows::start() {
        Ok(app) => app,
        Err(error) if std::env::var_os(trace_e2e::browser::REQUIRED_ENV).is_none() => {
            eprintln!("skipped {test}: {error:#}");
            return;
        }
        Err(error) => panic!("{test}: {error:#}"),
    };
    let data = tempfile::tempdir().unwrap();
    let bundle = app.record(&build, data.path()).await.unwrap();
    // What the person did, before anything is replayed: the two drops and the wire are drags (from the
    // palette's nodes, and from the inject node's output port), and none of them is also a click.
    let early = tempfile::tempdir().unwrap();
    let early_zip = export_redacted(&build, data.path(), &bundle, early.path());
    let trajectory = trajectory_of(&early_zip);
    print_steps(&trajectory);
    let deploy = trajectory
        .tool_calls
        .iter()
        .position(|call| call.target.as_ref().is_some_and(|target| target.selector.contains("deploy")))
        .unwrap_or_else(|| panic!("Deploy was never clicked: {:#?}", trajectory.tool_calls));
    let before_deploy = &trajectory.tool_calls[..deploy];
    let drags = before_deploy.iter().filter(|call| matches!(call.action, ToolAction::DragDrop { .. })).count();
    assert_eq!(drags, node_red_flows::DROPS.len() + 1, "the drops and the wire are not drags: {before_deploy:#?}");
    let clicks = before_deploy.iter().filter(|call| matches!(call.action, ToolAction::Click { .. })).count();
    assert_eq!(clicks, 0, "a drag was also recorded as a click: {before_deploy:#?}");

    let offline = replayed_offline(&build, &mut app.server, data.path(), &bundle);
    let Offline { zip, report, text, .. } = &offline;
    let last = report.steps.iter().rev().find(|step| step.text_shown.is_some()).expect("no step was judged by text");
    assert!(last.text_shown.is_some_and(|shown| shown >= 0.9), "{text}");
    let frames = &report.websocket_frames;
    assert!(frames.played > 0 && frames.matched > 0 && frames.unmatched == 0, "{text}");
    let checkpoints = checkpoints_of(zip);
    let deployed = checkpoints.iter().any(|checkpoint| {
        matches!(&checkpoint.predicate,
            Predicate::Request { method, url_pattern, .. } if method == "POST" && url_pattern.ends_with("/flows"))
    });
    assert!(deployed, "no checkpoint for the deploy: {checkpoints:#?}");
    let settings_saved = checkpoints.iter().any(|checkpoint| {
        matches!(&checkpoint.predicate,
            Predicate::Request { url_pattern, .. } if url_pattern.ends_with("/settings/user"))
    });
    assert!(!settings_saved, "the editor's own save of the user's settings is a checkpoint: {checkpoints:#?}");
    let positions =
        checkpoints.iter().filter(|checkpoint| names_field(checkpoint, "x") || names_field(checkpoint, "y"));
    assert_eq!(positions.count(), 0, "a node's position on the canvas is a checkpoint: {checkpoints:#?}");
}

/// An editor in an iframe that the page writes itself (TinyMCE 5 in Django's admin: the frame has no `src`,
/// its document is written by script). What the person typed there is their act like any other (issue
/// #44): in the trajectory, as typing into the frame's body, so that the re-run types it there and the
/// saved note holds it; the form's POST with that body is the task's checkpoint.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn typing_in_an_iframe_the_page_writes_replays_and_is_saved() {
    let test = "typing_in_an_iframe_the_page_writes_replays_and_is_saved";
    let Some(build) = Build::for_tests(test) else { return };
    let Some(python) = apps::python_for_tests(test) else { return };
    let mut app = TinyMceNotes::start(&python).unwrap();
    let data = tempfile::tempdir().unwrap();
    let bundle = app.record(&build, data.path()).await.unwrap();
    // What the person did, before anything is replayed: the body typed inside the editor's frame.
    let early = tempfile::tempdir().unwrap();
    let trajectory = trajectory_of(&export_redacted(&build, data.path(), &bundle, early.path()));
    print_steps(&trajectory);
    let in_frame = trajectory.tool_calls.iter().any(|call| {
        matches!(&call.action, ToolAction::Input { text } if text.contains(tinymce_notes::BODY))
            && call.target.as_ref().is_some_and(|target| !target.frame_path.is_empty())
    });
    assert!(in_frame, "the body typed in the editor's frame is not in the trajectory: {:#?}", trajectory.tool_calls);

    let offline = replayed_offline(&build, &mut app.server, data.path(), &bundle);
    let Offline { zip, report, text, .. } = &offline;
    // The list the save led to shows the note's body, as the re-run typed it.
    let listed = report.steps.iter().any(|step| {
        step.url_reached.as_deref().is_some_and(|url| url.ends_with("/admin/notes/note/"))
            && step.text_shown.is_some_and(|shown| shown >= 0.9)
    });
    assert!(listed, "{text}");
    let checkpoints = checkpoints_of(zip);
    let saved = checkpoints.iter().any(|checkpoint| {
        matches!(&checkpoint.predicate, Predicate::Request { method, body_fields, .. }
            if method == "POST" && body_fields.get("body").is_some_and(|body| body.contains(tinymce_notes::BODY)))
    });
    assert!(saved, "no checkpoint for the note saved with its body: {checkpoints:#?}");
}

/// A site behind HTTP Basic authentication (Trac's own server with `--basic-auth`): the person's Login was
/// answered with the browser's challenge, and they gave their name and password in the browser's dialog.
/// That authentication is a credential of the task (issue #44): recorded in the bundle's credentials,
/// nowhere in the redacted export, and given again by the re-run, which must be logged in as the person
/// was (New Ticket is there only then) and create the ticket.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_site_behind_basic_authentication_replays_logged_in() {
    let test = "a_site_behind_basic_authentication_replays_logged_in";
    let Some(build) = Build::for_tests(test) else { return };
    let Some(python) = apps::python_of_for_tests(test, apps::Environment::Trac) else { return };
    let mut app = TracTickets::start_behind_basic_auth(&python).unwrap();
    let data = tempfile::tempdir().unwrap();
    let bundle = app.record_behind_basic_auth(&build, data.path()).await.unwrap();
    // What the recording holds, before anything is replayed: the authentication, as a credential.
    let early = tempfile::tempdir().unwrap();
    let early_zip = export_redacted(&build, data.path(), &bundle, early.path());
    let credentials: Vec<CredentialEntry> = {
        let mut bundle = trace_bundle::archive::Bundle::open(&early_zip).unwrap();
        serde_json::from_slice(&bundle.read("credentials.json").unwrap()).unwrap()
    };
    // Redacted, its value is a placeholder, which the re-run gives in its place.
    let basic = credentials.iter().find(|credential| credential.field == "http_basic_auth");
    let basic =
        basic.unwrap_or_else(|| panic!("the Basic authentication is no credential of the task: {credentials:#?}"));
    assert!(!basic.value.contains(trac_tickets::PASSWORD), "{basic:#?}");
    // The header the browser sent carries the name and password in base64: the export holds neither.
    let header = basic_authorization(trac_tickets::USER, trac_tickets::PASSWORD);
    let zip = std::fs::read(&early_zip).unwrap();
    let mut archive = zip::ZipArchive::new(std::io::Cursor::new(zip)).unwrap();
    for index in 0..archive.len() {
        let mut file = archive.by_index(index).unwrap();
        let mut bytes = Vec::new();
        std::io::Read::read_to_end(&mut file, &mut bytes).unwrap();
        let text = String::from_utf8_lossy(&bytes);
        assert!(
            !text.contains(&header) && !text.contains(trac_tickets::PASSWORD),
            "{} holds the credential",
            file.name()
        );
    }

    let offline = replayed_offline(&build, &mut app.server, data.path(), &bundle);
    let Offline { zip, report, text, .. } = &offline;
    // New Ticket, which only a logged-in user is offered, reached; the ticket it made shown.
    let reached =
        |part: &str| report.steps.iter().any(|step| step.url_reached.as_deref().is_some_and(|url| url.contains(part)));
    assert!(reached("/newticket"), "{text}");
    assert!(shown_after(report, "/ticket/1"), "{text}");
    let checkpoints = checkpoints_of(zip);
    let created = checkpoints.iter().any(|checkpoint| {
        matches!(&checkpoint.predicate, Predicate::Request { method, body_fields, .. }
            if method == "POST" && body_fields.get("field_summary").map(String::as_str) == Some(trac_tickets::SUMMARY))
    });
    assert!(created, "no checkpoint for the ticket with its summary: {checkpoints:#?}");
}

/// `USER:PASSWORD` in base64, as an `Authorization: Basic` header carries it.
fn basic_authorization(user: &str, password: &str) -> String {
    use base64::Engine;
    base64::engine::general_purpose::STANDARD.encode(format!("{user}:{password}"))
}
