//! End to end, issue #33: a TRACE recording as a BrowserGym task. The demonstration of [`trace_e2e::demo`]
//! is recorded and exported redacted, as a dataset builder shares it; `browsergym-trace` (installed from
//! `integrations/browsergym` into `target/browsergym-venv`) registers it, and `tests/browsergym/episode.py`
//! runs an episode inside BrowserGym's own loop (`gym.make`, `reset`, `step`) with a scripted agent and
//! no model: BrowserGym's Playwright launches Chromium with its proxy set to `trace-replay serve
//! --proxy-port`, and `trace-replay score` rewards it. Doing the person's task again earns reward 1; saying
//! it is done without doing anything earns 0. As on a fresh machine, no Playwright browser is installed:
//! both browsers of an episode (the task's and BrowserGym's chat window) are the system's Chromium with
//! TRACE's flags. A reset that fails leaves no episode folder behind. Needs `cargo xtask dist` and
//! `bash .ci/install` (which installs the package with its README's command).

use std::path::Path;
use std::process::Command;

use serde_json::{Value, json};
use trace_e2e::apps::{Environment, python_of_for_tests};
use trace_e2e::demo;
use trace_manifest::trajectory::{ToolAction, Trajectory};

/// `episode.py` of `bundle`, with `actions` (Playwright code, then the answer) and `extra` configuration,
/// its episodes under `episodes`, run with this repository's `browsergym-trace` (whichever copy the
/// environment has installed).
fn episode_command(
    python: &Path,
    recorded: &demo::Recorded,
    bundle: &Path,
    actions: &[String],
    extra: Value,
    episodes: &Path,
) -> Command {
    let script = Path::new(env!("CARGO_MANIFEST_DIR")).join("browsergym/episode.py");
    let mut config = json!({
        "bundle": bundle,
        "trace_replay": recorded.build.trace_replay,
        "chromium": recorded.build.chromium,
        "actions": actions,
    });
    config.as_object_mut().unwrap().extend(extra.as_object().cloned().unwrap_or_default());
    let mut command = Command::new(python);
    command
        .arg(script)
        .arg(config.to_string())
        .env("TRACE_EPISODES", episodes)
        .env("PYTHONPATH", package_source())
        // No Playwright browser installed, as on a fresh machine.
        .env("PLAYWRIGHT_BROWSERS_PATH", episodes.join("no-playwright-browsers"));
    command
}

/// This repository's `browsergym-trace`, first on Python's path.
fn package_source() -> std::path::PathBuf {
    Path::new(env!("CARGO_MANIFEST_DIR")).join("../integrations/browsergym/src")
}

/// Runs one episode of the recorded task with `actions` (Playwright code, then the answer); its report.
fn episode(python: &Path, recorded: &demo::Recorded, actions: &[String]) -> Value {
    episode_with(python, recorded, actions, json!({}))
}

/// [`episode`] with `extra` configuration (`episode.py`'s: `then`, further episodes of the same
/// environment).
fn episode_with(python: &Path, recorded: &demo::Recorded, actions: &[String], extra: Value) -> Value {
    let episodes = tempfile::tempdir().unwrap();
    let output =
        episode_command(python, recorded, &recorded.exported.bundle, actions, extra, episodes.path()).output().unwrap();
    let stderr = String::from_utf8_lossy(&output.stderr);
    assert!(output.status.success(), "the episode failed: {stderr}");
    let report: Value = serde_json::from_slice(&output.stdout).unwrap_or_else(|e| panic!("{e}: {stderr}"));
    eprintln!("{stderr}");
    // A figure for the note, not a target: from `env.reset()` to the first observation.
    eprintln!("BrowserGym reset to first observation: {:.2} s", report["reset_seconds"].as_f64().unwrap_or(f64::NAN));
    report
}

/// The person's steps in `bundle`'s demonstration, counted as an agent's are: its tool calls but the
/// opening of the start page and the final `done`.
fn person_steps(bundle: &Path) -> usize {
    let mut bundle = trace_bundle::archive::Bundle::open(bundle).unwrap();
    let trajectory: Trajectory = serde_json::from_slice(&bundle.read("trajectory.json").unwrap()).unwrap();
    let calls = &trajectory.tool_calls;
    let opening = calls.first().is_some_and(|call| matches!(call.action, ToolAction::Navigate { .. }));
    calls.iter().filter(|call| !matches!(call.action, ToolAction::Done { .. })).count() - usize::from(opening)
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_browsergym_episode_rewards_the_demonstration_1_and_doing_nothing_0() {
    let test = "a_browsergym_episode_rewards_the_demonstration_1_and_doing_nothing_0";
    let Some(recorded) = demo::recorded_once(test).await else { return };
    let Some(python) = python_of_for_tests(test, Environment::BrowserGym) else { return };
    let task_id = recorded.exported.bundle.file_stem().unwrap().to_str().unwrap().to_owned();

    let demonstration = demo::in_playwright(&recorded.exported.origin, &recorded.exported.password().unwrap());
    let report = episode(&python, recorded, &demonstration);
    assert_eq!(report["env_id"], format!("browsergym/trace.{task_id}"), "{report:#}");
    // The goal is the task's, with the credentials it gives: the redacted bundle's password, which signs in.
    let goal = report["goal"].as_str().unwrap();
    assert!(goal.starts_with(demo::DESCRIPTION), "{report:#}");
    assert!(goal.contains(&recorded.exported.password().unwrap()), "{report:#}");
    assert_eq!(report["terminated"], true, "{report:#}");
    let rewards = report["rewards"].as_array().unwrap();
    assert_eq!(rewards.len(), demonstration.len(), "the reward comes with the answer: {report:#}");
    assert!(rewards[..rewards.len() - 1].iter().all(|reward| reward == 0.0), "{report:#}");
    assert_eq!(rewards.last().unwrap(), 1.0, "{report:#}");
    let result = &report["result"];
    assert_eq!(result["live_attempts"], 0, "{report:#}");
    assert_eq!(result["checkpoints"]["reached_in_order"], result["checkpoints"]["items"].as_array().unwrap().len());
    // Steps are the agent's actions, its answer not among them, counted as `eval` counts an agent's; the
    // navigation SPL weighs them against the person's.
    let steps = demonstration.len() - 1;
    assert_eq!((result["steps"].as_u64(), result["step_basis"].as_str()), (Some(steps as u64), Some("actions")));
    let person = person_steps(&recorded.exported.bundle);
    let navigation = person as f64 / steps.max(person) as f64;
    assert!((result["spl"]["navigation"].as_f64().unwrap() - navigation).abs() < 1e-9, "{report:#}");

    // Two browsers, since BrowserGym's chat window launches its own (it takes no browser of ours), both
    // the system's Chromium run through `trace-replay chromium`, with every flag a TRACE Chromium has.
    let browsers = report["browsers"].as_array().unwrap();
    assert_eq!(browsers.len(), 2, "the task's browser and the chat's: {browsers:#?}");
    for browser in browsers {
        let arguments: Vec<&str> = browser.as_array().unwrap().iter().filter_map(Value::as_str).collect();
        assert!(!arguments[0].contains("ms-playwright"), "not Playwright's own build: {arguments:?}");
        for flag in trace_replay::chromium::command_line_flags() {
            let named = |argument: &&str| match flag.strip_prefix("--disable-features=") {
                Some(features) => argument
                    .strip_prefix("--disable-features=")
                    .is_some_and(|given| features.split(',').all(|feature| given.split(',').any(|off| off == feature))),
                None => **argument == flag,
            };
            assert!(arguments.iter().any(named), "{flag} missing: {arguments:?}");
        }
    }

    let nothing = ["send_message_to_user('Done.')".to_owned()];
    let report = episode(&python, recorded, &nothing);
    assert_eq!(report["terminated"], true, "{report:#}");
    assert_eq!(report["rewards"], json!([0.0]), "{report:#}");
    assert_eq!(report["result"]["checkpoints"]["reached_any_order"], 0, "{report:#}");
    assert_eq!(
        (report["result"]["steps"].as_u64(), report["result"]["spl"]["navigation"].as_f64()),
        (Some(0), Some(0.0))
    );
}

/// Issue #48: BrowserGym launched both its browsers, and the package a proxy, at every reset. An
/// environment now keeps them for its episodes, and each episode starts clean. Three episodes in one
/// environment that would tell: the demonstration, which also leaves a cookie and a stored item of the
/// agent's own; then an agent that goes straight to the cart and the account page and answers; then the
/// demonstration again.
/// - The browsers are the same processes in all three: kept, not launched again.
/// - The second and third start with nothing of the first: no cookie of its, the storage the recording
///   started with and no more, and the page's clock at the recording's start again (a kept clock would
///   be on by the first episode's whole length).
/// - The second episode's session is its own: the first's sign-in and cart form are not in it, so the
///   checkpoints on them are not reached, and it earns 0.
/// - The third, in a proxy that served the first, earns full marks again.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_browsergym_environment_keeps_its_browsers_and_proxy_and_each_episode_starts_clean() {
    let test = "a_browsergym_environment_keeps_its_browsers_and_proxy_and_each_episode_starts_clean";
    let Some(recorded) = demo::recorded_once(test).await else { return };
    let Some(python) = python_of_for_tests(test, Environment::BrowserGym) else { return };
    let origin = &recorded.exported.origin;
    let mut demonstration = demo::in_playwright(origin, &recorded.exported.password().unwrap());
    let answer = demonstration.pop().unwrap();
    let leave_something = "page.evaluate(\"() => { document.cookie = 'left=by-the-first; path=/'; \
                           localStorage.setItem('left', 'by-the-first') }\")";
    let first: Vec<String> =
        demonstration.iter().cloned().chain([leave_something.to_owned(), answer.clone()]).collect();
    let straight_to_the_cart = vec![
        format!("page.goto('{origin}/cart')"),
        format!("page.goto('{origin}/account')"),
        "send_message_to_user('Done.')".to_owned(),
    ];
    let again: Vec<String> = demonstration.iter().cloned().chain([answer]).collect();
    let report = episode_with(&python, recorded, &first, json!({ "then": [straight_to_the_cart, again] }));
    let episodes: Vec<&Value> = std::iter::once(&report).chain(report["then"].as_array().unwrap()).collect();
    assert_eq!(episodes.len(), 3, "{report:#}");
    let resets: Vec<String> =
        episodes.iter().map(|e| format!("{:.2} s", e["reset_seconds"].as_f64().unwrap())).collect();
    // Figures for the note, not targets: the first reset launches, the others are warm.
    eprintln!("BrowserGym resets in one environment: {}", resets.join(", "));

    assert_eq!(episodes[0]["rewards"].as_array().unwrap().last().unwrap(), 1.0, "{report:#}");
    let pids = &episodes[0]["browser_pids"];
    assert_eq!(pids.as_array().unwrap().len(), 2, "the task's browser and the chat's: {report:#}");
    let recording_started =
        trace_replay::archive::ReplayArchive::open(&recorded.exported.bundle).unwrap().started_at_ms;
    for (number, episode) in episodes.iter().enumerate() {
        assert_eq!(&episode["browser_pids"], pids, "episode {number} ran in the browsers kept: {report:#}");
        let page = &episode["page_at_reset"];
        assert!(!page["cookie"].as_str().unwrap().contains("left="), "episode {number}: {page}");
        assert_eq!(page["stored"], episodes[0]["page_at_reset"]["stored"], "episode {number}: {page}");
        let clock_on = page["now"].as_f64().unwrap() - recording_started;
        let since_reset = page["since_reset_ms"].as_f64().unwrap();
        assert!(
            (0.0..=since_reset + 1000.0).contains(&clock_on),
            "episode {number}'s clock is {clock_on:.0} ms past the recording's start, {since_reset:.0} ms after its reset"
        );
    }

    let second = &episodes[1]["result"];
    assert_eq!(episodes[1]["rewards"], json!([0.0, 0.0, 0.0]), "{report:#}");
    let items = second["checkpoints"]["items"].as_array().unwrap();
    let forms: Vec<&Value> = items.iter().filter(|checkpoint| checkpoint["role"] == "state_change").collect();
    assert!(!forms.is_empty(), "the demonstration's sign-in and cart are checkpoints: {second:#}");
    for checkpoint in forms {
        assert_eq!(checkpoint["reached"], false, "the first episode's forms are not the second's: {checkpoint:#}");
    }
    let third = &episodes[2];
    assert_eq!(third["rewards"].as_array().unwrap().last().unwrap(), 1.0, "{report:#}");
    let checkpoints = &third["result"]["checkpoints"];
    assert_eq!(checkpoints["reached_in_order"], checkpoints["items"].as_array().unwrap().len(), "{report:#}");
}

/// Issue #45: BrowserGym's episode was not as closed as `trace-replay eval`'s. Its browser lacked the
/// offline flags: a page's WebRTC sent STUN packets to a UDP sentinel outside the proxy (4 of them), and
/// the browser held an mDNS socket; and the agent could open `file:///etc/hostname` and `chrome://version`
/// and read them in its observation. Now no packet reaches the sentinel, the local file is refused, the
/// browser's page is never observed; and the person's demonstration, run after them, still earns 1.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_browsergym_agent_reaches_nothing_outside_the_replay() {
    let test = "a_browsergym_agent_reaches_nothing_outside_the_replay";
    let Some(recorded) = demo::recorded_once(test).await else { return };
    let Some(python) = python_of_for_tests(test, Environment::BrowserGym) else { return };
    let sentinel = std::net::UdpSocket::bind("127.0.0.1:0").unwrap();
    sentinel.set_read_timeout(Some(std::time::Duration::from_millis(200))).unwrap();
    let port = sentinel.local_addr().unwrap().port();
    let hostname = std::fs::read_to_string("/etc/hostname").unwrap_or_default().trim().to_owned();
    let webrtc = format!(
        "page.evaluate(\"\"\"() => {{ const pc = new RTCPeerConnection({{iceServers: [{{urls: 'stun:127.0.0.1:{port}'}}]}}); \
         pc.createDataChannel('x'); return pc.createOffer().then((o) => pc.setLocalDescription(o)); }}\"\"\"); page.wait_for_timeout(3000)"
    );
    let mut actions = vec![
        webrtc,
        "page.goto('file:///etc/hostname')".to_owned(),
        "page.goto('chrome://version')".to_owned(),
        "page.context.new_page().goto('chrome://version')".to_owned(),
    ];
    actions.extend(demo::in_playwright(&recorded.exported.origin, &recorded.exported.password().unwrap()));
    let report = episode(&python, recorded, &actions);
    let mut packets = 0;
    let mut buffer = [0u8; 2048];
    while sentinel.recv_from(&mut buffer).is_ok() {
        packets += 1;
    }
    assert_eq!(packets, 0, "STUN packets reached the sentinel");
    for (step, seen) in report["seen"].as_array().unwrap().iter().enumerate() {
        let text = seen["text"].as_str().unwrap_or_default();
        let url = seen["url"].as_str().unwrap_or_default();
        assert!(!url.starts_with("file:") && !url.starts_with("chrome:"), "step {step} observed {url}");
        assert!(hostname.is_empty() || !text.contains(&hostname), "step {step} showed the host's name: {text}");
        assert!(!text.contains("Chromium Authors") && !text.contains("Command Line"), "step {step}: {text}");
        let pages = seen["open_pages"].as_array().unwrap();
        assert!(pages.iter().all(|page| !page.as_str().unwrap_or_default().starts_with("chrome:")), "{pages:?}");
    }
    assert_eq!(report["rewards"].as_array().unwrap().last().unwrap(), 1.0, "{report:#}");
}

/// Issue #45: `register` read a dataset itself, and took a bundle named by an absolute path outside the
/// dataset, and a task starting at a `file://` page, which `eval` refuses. It takes the tasks from
/// `trace-replay list`, the reading `eval` uses: both are refused, saying why; the dataset's own bundle
/// is registered.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn browsergym_registers_only_what_eval_would_run() {
    let test = "browsergym_registers_only_what_eval_would_run";
    let Some(recorded) = demo::recorded_once(test).await else { return };
    let Some(python) = python_of_for_tests(test, Environment::BrowserGym) else { return };
    let scratch = tempfile::tempdir().unwrap();
    let line = |bundle: &str| {
        json!({
            "task_id": "demo", "task_description": "x", "task_type": "action", "website_url": "http://shop.test/",
            "num_steps": 0, "duration_seconds": 0.0, "answer": null, "tool_calls": [], "credentials": [],
            "checkpoints": [], "checkpoints_reasoning": "", "ignored": [], "bundle": bundle, "redacted": false,
        })
        .to_string()
    };
    let register = |dataset: &Path| {
        let script =
            "import sys, browsergym_trace\nprint(browsergym_trace.register(sys.argv[1], trace_replay=sys.argv[2]))";
        Command::new(&python)
            .args(["-c", script])
            .arg(dataset)
            .arg(&recorded.build.trace_replay)
            .env("PYTHONPATH", package_source())
            .output()
            .unwrap()
    };
    let outside = scratch.path().join("outside");
    std::fs::create_dir_all(&outside).unwrap();
    std::fs::write(outside.join("tasks.jsonl"), line(recorded.exported.bundle.to_str().unwrap()) + "\n").unwrap();
    let refused = register(&outside);
    let stderr = String::from_utf8_lossy(&refused.stderr);
    assert!(!refused.status.success() && stderr.contains("outside the dataset"), "{stderr}");

    let own = scratch.path().join("own");
    std::fs::create_dir_all(own.join("bundles")).unwrap();
    std::fs::copy(&recorded.exported.bundle, own.join("bundles/demo.zip")).unwrap();
    std::fs::write(own.join("tasks.jsonl"), line("bundles/demo.zip") + "\n").unwrap();
    let registered = register(&own);
    assert!(registered.status.success(), "{}", String::from_utf8_lossy(&registered.stderr));
    assert!(String::from_utf8_lossy(&registered.stdout).contains("browsergym/trace.demo"));

    // A bundle whose demonstration starts at a local file.
    let local = scratch.path().join("local");
    std::fs::create_dir_all(local.join("bundles/demo")).unwrap();
    let unpacked = local.join("bundles/demo");
    let mut zip = zip::ZipArchive::new(std::fs::File::open(&recorded.exported.bundle).unwrap()).unwrap();
    zip.extract(&unpacked).unwrap();
    let trajectory_path = unpacked.join("trajectory.json");
    let mut trajectory: Value = serde_json::from_slice(&std::fs::read(&trajectory_path).unwrap()).unwrap();
    let first = trajectory["tool_calls"].as_array_mut().unwrap().iter_mut().find(|call| call["name"] == "navigate");
    first.unwrap()["params"]["url"] = json!("file:///etc/hostname");
    std::fs::write(&trajectory_path, trajectory.to_string()).unwrap();
    reindex(&unpacked);
    std::fs::write(local.join("tasks.jsonl"), line("bundles/demo") + "\n").unwrap();
    let refused = register(&local);
    let stderr = String::from_utf8_lossy(&refused.stderr);
    assert!(!refused.status.success() && stderr.contains("which is no web page"), "{stderr}");
}

/// Issue #47: a task whose audit proved it for `eval` only (its demonstration failed through the proxy this
/// package serves from) is registered with a warning naming it; one proven on both paths, without.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn browsergym_warns_of_tasks_not_proven_through_its_proxy() {
    let test = "browsergym_warns_of_tasks_not_proven_through_its_proxy";
    let Some(recorded) = demo::recorded_once(test).await else { return };
    let Some(python) = python_of_for_tests(test, Environment::BrowserGym) else { return };
    let scratch = tempfile::tempdir().unwrap();
    let warned = |paths: Value| {
        let bundle = scratch.path().join(format!("audited-{}", paths.as_array().unwrap().len()));
        let mut zip = zip::ZipArchive::new(std::fs::File::open(&recorded.exported.bundle).unwrap()).unwrap();
        zip.extract(&bundle).unwrap();
        let manifest_path = bundle.join("manifest.json");
        let mut manifest: Value = serde_json::from_slice(&std::fs::read(&manifest_path).unwrap()).unwrap();
        manifest["audit"] = json!({
            "valid": true, "audited_at": "2026-11-30T00:00:00Z", "runs_as_expected": 3, "runs": 3, "paths": paths,
        });
        std::fs::write(&manifest_path, serde_json::to_vec_pretty(&manifest).unwrap()).unwrap();
        let script = "import sys, warnings, browsergym_trace\n\
                      with warnings.catch_warnings(record=True) as caught:\n\
                      \x20   warnings.simplefilter('always')\n\
                      \x20   browsergym_trace.register(sys.argv[1], trace_replay=sys.argv[2])\n\
                      print([str(warning.message) for warning in caught])";
        let output = Command::new(&python)
            .args(["-c", script])
            .arg(&bundle)
            .arg(&recorded.build.trace_replay)
            .env("PYTHONPATH", package_source())
            .output()
            .unwrap();
        assert!(output.status.success(), "{}", String::from_utf8_lossy(&output.stderr));
        String::from_utf8_lossy(&output.stdout).into_owned()
    };
    let task_id = {
        let mut bundle = trace_bundle::archive::Bundle::open(&recorded.exported.bundle).unwrap();
        bundle.manifest().unwrap().task.id.to_string()
    };
    let devtools_only = warned(json!(["devtools"]));
    assert!(devtools_only.contains("did not prove 1 task(s) through the proxy") && devtools_only.contains(&task_id));
    let both = warned(json!(["devtools", "proxy"]));
    assert!(!both.contains("through the proxy"), "{both}");
}

/// Issue #47: a `reset` that failed left an empty episode folder in `TRACE_EPISODES`. Here `trace-replay
/// serve` cannot start (the bundle registered is gone by then): `reset` fails saying so, and leaves nothing.
/// An episode that starts keeps its folder (`the_proxy_dies_with_a_killed_browsergym_and_writes_its_episode`).
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_failed_browsergym_reset_leaves_no_episode_folder() {
    let test = "a_failed_browsergym_reset_leaves_no_episode_folder";
    let Some(recorded) = demo::recorded_once(test).await else { return };
    let Some(python) = python_of_for_tests(test, Environment::BrowserGym) else { return };
    let scratch = tempfile::tempdir().unwrap();
    let bundle = scratch.path().join("gone.zip");
    std::fs::copy(&recorded.exported.bundle, &bundle).unwrap();
    let episodes = scratch.path().join("episodes");
    let script = [
        "import os, sys, gymnasium as gym, browsergym_trace",
        "env_id = browsergym_trace.register(sys.argv[1], trace_replay=sys.argv[2], chromium=sys.argv[3])[0]",
        "env = gym.make(env_id, headless=True)",
        "os.remove(sys.argv[1])",
        "try:",
        "    env.reset()",
        "finally:",
        "    env.close()",
    ]
    .join("\n");
    let output = Command::new(&python)
        .args(["-c", &script])
        .arg(&bundle)
        .arg(&recorded.build.trace_replay)
        .arg(&recorded.build.chromium)
        .env("PYTHONPATH", package_source())
        .env("TRACE_EPISODES", &episodes)
        .env("PLAYWRIGHT_BROWSERS_PATH", scratch.path().join("no-playwright-browsers"))
        .output()
        .unwrap();
    let stderr = String::from_utf8_lossy(&output.stderr);
    assert!(!output.status.success() && stderr.contains("trace-replay serve did not start"), "{stderr}");
    let left: Vec<_> =
        std::fs::read_dir(&episodes).map(|entries| entries.flatten().map(|e| e.path()).collect()).unwrap_or_default();
    assert!(left.is_empty(), "the failed reset left {left:?}");
}

/// Rewrites the index of the bundle directory `dir` (sizes and hashes in `manifest.json`) after a file of it
/// was changed by hand.
fn reindex(dir: &Path) {
    let manifest_path = dir.join("manifest.json");
    let mut manifest: Value = serde_json::from_slice(&std::fs::read(&manifest_path).unwrap()).unwrap();
    for file in manifest["files"].as_array_mut().unwrap() {
        let path = dir.join(file["path"].as_str().unwrap());
        if let Ok(bytes) = std::fs::read(&path) {
            file["size"] = json!(bytes.len());
            file["sha256"] = json!(trace_bundle::archive::sha256_hex(&bytes));
        }
    }
    std::fs::write(&manifest_path, serde_json::to_vec_pretty(&manifest).unwrap()).unwrap();
}

/// Issue #45: when the Python process running BrowserGym was killed (SIGKILL, or SIGTERM, which Python does
/// not catch), `trace-replay serve --proxy-port --episode` went on listening for good and never wrote its
/// episode. Its standard input is a pipe only that process holds: killed, the proxy stops within seconds,
/// and the episode it has is written.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn the_proxy_dies_with_a_killed_browsergym_and_writes_its_episode() {
    let test = "the_proxy_dies_with_a_killed_browsergym_and_writes_its_episode";
    let Some(recorded) = demo::recorded_once(test).await else { return };
    let Some(python) = python_of_for_tests(test, Environment::BrowserGym) else { return };
    let episodes = tempfile::tempdir().unwrap();
    // The proxy's command line names its bundle: a copy only this test serves.
    let bundle = episodes.path().join("only-this-test.zip");
    std::fs::copy(&recorded.exported.bundle, &bundle).unwrap();
    let output = episode_command(&python, recorded, &bundle, &[], json!({ "kill_after_reset": true }), episodes.path())
        .output()
        .unwrap();
    assert!(!output.status.success(), "the harness was killed");
    let serving = || {
        let needle = bundle.to_str().unwrap().as_bytes().to_vec();
        std::fs::read_dir("/proc")
            .unwrap()
            .filter_map(|entry| {
                let pid = entry.ok()?.file_name().to_str()?.parse::<u32>().ok()?;
                let command = std::fs::read(format!("/proc/{pid}/cmdline")).ok()?;
                (command.windows(needle.len()).any(|window| window == needle.as_slice())
                    && command.windows(5).any(|window| window == b"serve"))
                .then_some(pid)
            })
            .collect::<Vec<u32>>()
    };
    let deadline = std::time::Instant::now() + std::time::Duration::from_secs(30);
    while !serving().is_empty() {
        assert!(std::time::Instant::now() < deadline, "the proxy outlived its harness: {:?}", serving());
        std::thread::sleep(std::time::Duration::from_millis(100));
    }
    let written: Vec<std::path::PathBuf> = walk(episodes.path());
    assert!(written.iter().any(|path| path.ends_with("episode/served.json")), "{written:?}");
    assert!(written.iter().any(|path| path.ends_with("episode/session/manifest.json")), "{written:?}");
}

fn walk(dir: &Path) -> Vec<std::path::PathBuf> {
    let mut found = Vec::new();
    for entry in std::fs::read_dir(dir).unwrap().flatten() {
        let path = entry.path();
        if path.is_dir() {
            found.extend(walk(&path));
        } else {
            found.push(path);
        }
    }
    found
}
