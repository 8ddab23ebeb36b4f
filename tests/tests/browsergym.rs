//! End to end, issue #33: a TRACE recording as a BrowserGym task. The demonstration of [`trace_e2e::demo`]
//! is recorded and exported redacted, as a dataset builder shares it; `browsergym-trace` (installed from
//! `integrations/browsergym` into `target/browsergym-venv`) registers it, and `tests/browsergym/episode.py`
//! runs an episode inside BrowserGym's own loop (`gym.make`, `reset`, `step`) with a scripted agent and
//! no model: BrowserGym's Playwright launches Chromium with its proxy set to `trace-replay serve
//! --proxy-port`, and `trace-replay score` rewards it. Doing the person's task again earns reward 1; saying
//! it is done without doing anything earns 0. Needs `cargo xtask dist` and `bash .ci/install`.

use std::path::Path;
use std::process::Command;

use serde_json::{Value, json};
use trace_e2e::apps::{Environment, python_of_for_tests};
use trace_e2e::demo;
use trace_manifest::trajectory::{ToolAction, Trajectory};

/// Runs one episode of the recorded task with `actions` (Playwright code, then the answer); its report.
fn episode(python: &Path, recorded: &demo::Recorded, actions: &[String]) -> Value {
    let script = Path::new(env!("CARGO_MANIFEST_DIR")).join("browsergym/episode.py");
    let config = json!({
        "bundle": recorded.exported.bundle,
        "trace_replay": recorded.build.trace_replay,
        "chromium": recorded.build.chromium,
        "actions": actions,
    });
    let episodes = tempfile::tempdir().unwrap();
    let output = Command::new(python)
        .arg(script)
        .arg(config.to_string())
        .env("TRACE_EPISODES", episodes.path())
        // Where `.ci/install` put Debian's Chromium for BrowserGym's chat window (Playwright's own build).
        .env("PLAYWRIGHT_BROWSERS_PATH", Path::new(env!("CARGO_MANIFEST_DIR")).join("../target/ms-playwright"))
        .output()
        .unwrap();
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
    let origin = &recorded.exported.origin;
    let task_id = recorded.exported.bundle.file_stem().unwrap().to_str().unwrap().to_owned();

    let demonstration = demo::in_playwright(origin);
    let report = episode(&python, recorded, &demonstration);
    assert_eq!(report["env_id"], format!("browsergym/trace.{task_id}"), "{report:#}");
    assert_eq!(report["goal"], demo::DESCRIPTION, "{report:#}");
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
