//! BrowserGym benchmark: resets and episodes per minute of a TRACE task in BrowserGym's own loop, with the
//! environment kept warm (its proxy and browsers kept from one episode to the next, the default) against
//! cold (each reset starting a proxy and launching both browsers, as before #48).
//!
//! The demonstration of [`trace_e2e::demo`] is recorded first (into `target/bench-browsergym/`, or taken
//! from `TRACE_BENCH_BUNDLE`); `tests/browsergym/resets.py` then makes one environment per way and round
//! and runs [`EPISODES`] episodes of an agent that answers at once, its scoring included; the rounds
//! alternate which way goes first, so that a noisy moment of this shared machine does not fall on one side
//! alone. Every episode must earn 0 (the agent did nothing), or no figure is printed.
//!
//! Printed: per way, the median reset (the first of each environment left out: it launches either way)
//! and episodes per minute (each environment's whole run, its first reset included), and warm against
//! cold. Target (#48): a warm reset at most 1 s on two cores.
//!
//! Run: `cargo xtask dist && bash .ci/install && cargo bench -p trace-e2e --bench browsergym`
//! (`TRACE_BENCH_ROUNDS`, 2 by default; `TRACE_BENCH_BUNDLE=DIR_OR_ZIP` skips recording the demonstration).

use std::path::Path;
use std::process::Command;

use anyhow::{Context, Result, ensure};
use serde_json::{Value, json};
use trace_e2e::apps::{Environment, python_of};
use trace_e2e::bench::{self, demo_bundle};
use trace_e2e::browser::Build;
use trace_e2e::median;

/// Episodes in each environment.
const EPISODES: usize = 8;
const DEFAULT_ROUNDS: usize = 2;

#[tokio::main(flavor = "multi_thread", worker_threads = 2)]
async fn main() -> Result<()> {
    let rounds = bench::rounds(DEFAULT_ROUNDS)?;
    let tests = Path::new(env!("CARGO_MANIFEST_DIR"));
    let work = tests.join("../target/bench-browsergym");
    let build = Build::from_workspace()?;
    let bundle = demo_bundle(&build, &work).await?;
    println!("bundle: {}", bundle.display());
    let python = python_of(Environment::BrowserGym)?;
    let scratch = tempfile::tempdir()?;
    let config = json!({
        "bundle": bundle,
        "trace_replay": build.trace_replay,
        "chromium": build.chromium,
        "episodes": EPISODES,
        "rounds": rounds,
    });
    let output = Command::new(python)
        .arg(tests.join("browsergym/resets.py"))
        .arg(config.to_string())
        .env("PYTHONPATH", tests.join("../integrations/browsergym/src"))
        .env("TRACE_EPISODES", scratch.path().join("episodes"))
        // No Playwright browser installed, as on a fresh machine: both browsers are the system's.
        .env("PLAYWRIGHT_BROWSERS_PATH", scratch.path().join("no-playwright-browsers"))
        .output()?;
    let stderr = String::from_utf8_lossy(&output.stderr);
    ensure!(output.status.success(), "resets.py failed: {stderr}");
    let measured: Value =
        serde_json::from_slice(&output.stdout).with_context(|| format!("resets.py said: {stderr}"))?;
    let figures = |way: &str| -> (f64, f64) {
        let seconds = |key: &str| -> Vec<f64> {
            measured[way][key].as_array().into_iter().flatten().filter_map(Value::as_f64).collect()
        };
        let per_minute: Vec<f64> = seconds("episodes").iter().map(|run| EPISODES as f64 * 60.0 / run).collect();
        (median(&seconds("resets")), median(&per_minute))
    };
    let ((warm_reset, warm_rate), (cold_reset, cold_rate)) = (figures("warm"), figures("cold"));
    println!("{EPISODES} episodes an environment, {rounds} rounds, medians:");
    println!("warm: reset {warm_reset:.2} s, {warm_rate:.1} episodes per minute");
    println!("cold: reset {cold_reset:.2} s, {cold_rate:.1} episodes per minute");
    println!(
        "warm against cold: reset {:.2}×, episodes per minute {:.2}×",
        warm_reset / cold_reset,
        warm_rate / cold_rate
    );
    Ok(())
}
