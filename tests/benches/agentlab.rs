//! AgentLab benchmark: episodes per minute of an AgentLab study of TRACE tasks, run sequentially, on Ray
//! with one worker, and on Ray with two.
//!
//! A dataset of [`TASKS`] tasks shares the demonstration of [`trace_e2e::demo`] (recorded first, as the
//! other benchmarks do, into `target/bench-agentlab/`, or taken from `TRACE_BENCH_BUNDLE`); the scripted
//! agent of the end-to-end test (`tests/agentlab/scripted_agent.py`) does the person's task again on each,
//! through AgentLab's own `make_study(...).run` ([`trace_e2e::agentlab::run_study`]). Each of the three
//! ways runs the whole study once per round; the rounds rotate which goes first, so that a noisy moment of
//! this shared machine does not fall on one side alone. A study's time includes starting its backend (Ray's
//! local cluster); every episode includes BrowserGym's two browsers and `trace-replay serve`'s start.
//!
//! Printed: per way, the median episodes per minute over the rounds, and Ray's two workers against one.
//! Every episode must earn reward 1, or the figures are not printed. No target: a figure for the note.
//!
//! Run: `cargo xtask dist && bash .ci/install && cargo bench -p trace-e2e --bench agentlab`
//! (`TRACE_BENCH_ROUNDS`, 2 by default; `TRACE_BENCH_BUNDLE=DIR_OR_ZIP` skips recording the demonstration).

use std::collections::BTreeMap;
use std::path::Path;

use anyhow::{Context, Result, ensure};
use trace_e2e::agentlab::{self, Backend};
use trace_e2e::bench::{self, demo_bundle, origin};
use trace_e2e::browser::Build;
use trace_e2e::{demo, median};
use trace_replay::archive::ReplayArchive;

const TASKS: usize = 6;
const DEFAULT_ROUNDS: usize = 2;
const BACKENDS: [Backend; 3] = [Backend::Sequential, Backend::Ray { workers: 1 }, Backend::Ray { workers: 2 }];

#[tokio::main(flavor = "multi_thread", worker_threads = 2)]
async fn main() -> Result<()> {
    let rounds = bench::rounds(DEFAULT_ROUNDS)?;
    let work = Path::new(env!("CARGO_MANIFEST_DIR")).join("../target/bench-agentlab");
    let build = Build::from_workspace()?;
    let bundle = demo_bundle(&build, &work).await?;
    println!("bundle: {}", bundle.display());
    let archive = ReplayArchive::open(&bundle)?;
    let origin = origin(archive.start_url()).context("the bundle's website has no origin")?.to_owned();

    let dataset = tempfile::tempdir()?;
    let task_ids: Vec<String> = (1..=TASKS).map(|n| format!("shop-{n}")).collect();
    let ids: Vec<&str> = task_ids.iter().map(String::as_str).collect();
    agentlab::dataset(dataset.path(), &bundle, &origin, demo::DESCRIPTION, &ids)?;
    let demonstration = demo::in_playwright(&origin, &demo::given_password(&bundle)?);
    let scripts: BTreeMap<String, Vec<String>> =
        task_ids.iter().map(|id| (format!("trace.{id}"), demonstration.clone())).collect();

    let mut per_minute: Vec<Vec<f64>> = vec![Vec::new(); BACKENDS.len()];
    for round in 0..rounds {
        for offset in 0..BACKENDS.len() {
            let which = (round + offset) % BACKENDS.len();
            let study_work = tempfile::tempdir()?;
            let study = agentlab::run_study(&build, dataset.path(), &scripts, BACKENDS[which], study_work.path())?;
            let unearned: Vec<_> = study.rewards().into_iter().filter(|(_, reward)| *reward != Some(1.0)).collect();
            ensure!(unearned.is_empty(), "{:?}: episodes that did not earn 1: {unearned:?}", BACKENDS[which]);
            println!("round {}: {:?}: {TASKS} episodes in {:.1} s", round + 1, BACKENDS[which], study.seconds);
            per_minute[which].push(study.episodes_per_minute());
        }
    }
    let medians: Vec<f64> = per_minute.iter().map(|rates| median(rates)).collect();
    for (backend, rate) in BACKENDS.iter().zip(&medians) {
        println!("{backend:?}: {rate:.1} episodes per minute (median of {rounds})");
    }
    println!("Ray, 2 workers against 1: {:.2}×", medians[2] / medians[1]);
    Ok(())
}
