//! Evaluation benchmark: what `trace-replay eval` costs around an agent.
//!
//! 1. **Episode start**: from opening the bundle to its start page loaded in the replayed browser (the
//!    moment an agent can act), on the demo bundle and on the same bundle grown past 100 MB (300
//!    screenshots of random pixels, each indexed in its manifest, as a long recording's are). Median of
//!    [`STARTS`] runs each, in a browser launched for the episode and in a browser kept from the episode
//!    before (the reset: the episode before ended, its context discarded, a new one made). Targets: 1 s
//!    and 2 s.
//! 2. **Observation**: page loads of the demo's pages in a replay that records the session (as `eval`
//!    does) against one that does not (as `serve` does), both launched side by side, interleaved page by
//!    page and alternating which side goes first. Printed: the ratio of the medians and the geometric mean
//!    of the per-page ratios. Target: 1.10.
//! 3. **Parallel episodes**: `trace-replay eval` (the release build) of a dataset of [`DATASET_TASKS`]
//!    tasks with the scripted agent of the tests (`tests/agents/shop-agent.mjs`, Playwright over CDP)
//!    at `--parallel 1`, then `--parallel 2`: episodes per minute, and their ratio.
//! 4. **Kept browsers**: the same dataset with an agent that reads the start page's title and answers,
//!    in browsers kept between episodes (the default) and with `--browser-per-episode`, at `--parallel 1`
//!    and 2, the two designs alternating over [`EPISODE_ROUNDS`] rounds: seconds per episode (scoring
//!    included), episodes per minute, and the ratio. Targets: under 0.65 s an episode and at least 3× the
//!    episodes per minute.
//!
//! Run: `cargo xtask dist && cargo bench -p trace-e2e --bench eval` (`TRACE_BENCH_ROUNDS`, 10 by default,
//! sets the observation rounds; `TRACE_BENCH_BUNDLE=DIR_OR_ZIP` skips recording the demonstration).

use std::io::Write as _;
use std::path::{Path, PathBuf};
use std::time::{Duration, Instant};

use anyhow::{Context, Result, ensure};
use serde_json::json;
use trace_e2e::bench::{self, copy_dir, demo_bundle, directory_size, geometric_mean, origin};
use trace_e2e::browser::{Build, load_event_end};
use trace_e2e::median;
use trace_replay::archive::ReplayArchive;
use trace_replay::browsers::Browsers;
use trace_replay::serve::{Options, Replay};
use trace_replay::session::SessionRecorder;

const PAGES: [&str; 6] = ["/", "/login", "/search?q=mug", "/embed", "/help", "/clock"];
const STARTS: usize = 5;
const DEFAULT_ROUNDS: usize = 10;
const DATASET_TASKS: usize = 6;
const EPISODE_ROUNDS: usize = 2;
const WAIT: Duration = Duration::from_secs(30);

#[tokio::main(flavor = "multi_thread", worker_threads = 2)]
async fn main() -> Result<()> {
    let rounds = bench::rounds(DEFAULT_ROUNDS)?;
    let target = Path::new(env!("CARGO_MANIFEST_DIR")).join("../target");
    let work = target.join("bench-eval");
    let build = Build::from_workspace()?;
    let bundle = demo_bundle(&build, &work).await?;
    println!("bundle: {}", bundle.display());
    let options = Options { chromium: Some(build.chromium.clone()), ..Options::default() };

    // 1. Episode start.
    let large = grown(&bundle, &work.join("large"), 100 << 20)?;
    for (name, path, target) in [("demo", &bundle, 1.0), ("100 MB", &large, 2.0)] {
        let size = directory_size(path)?;
        let kept = Browsers::new(options.clone(), true);
        // The kept browser's first episode launches it.
        let mut previous = Some(kept_episode_start(path, &kept, None, &work).await?.1);
        let (mut launched, mut reset) = ([Vec::new(), Vec::new(), Vec::new()], [Vec::new(), Vec::new(), Vec::new()]);
        for _ in 0..STARTS {
            for (phase, seconds) in launched.iter_mut().zip(episode_start(path, &options, &work).await?) {
                phase.push(seconds);
            }
            let (seconds, replay) = kept_episode_start(path, &kept, previous.take(), &work).await?;
            previous = Some(replay);
            for (phase, seconds) in reset.iter_mut().zip(seconds) {
                phase.push(seconds);
            }
        }
        if let Some((replay, _)) = previous {
            kept.give_back(replay).await?;
        }
        kept.close().await;
        for (design, phases, browser) in [("launched", launched, "browser up"), ("kept", reset, "reset")] {
            let totals: Vec<f64> = (0..STARTS).map(|run| phases.iter().map(|phase| phase[run]).sum()).collect();
            let [open, up, page] = phases.map(|seconds| median(&seconds));
            let total = median(&totals);
            println!(
                "episode start, {name} bundle ({:.1} MB), browser {design}: median {total:.2} s of {STARTS} \
                 (target ≤ {target} s){}: bundle opened {open:.2} s, {browser} {up:.2} s, start page loaded {page:.2} s",
                size as f64 / 1e6,
                if total <= target { "" } else { "  MISSED" }
            );
        }
    }

    // 2. Observation.
    let archive = ReplayArchive::open(&bundle)?;
    let origin = origin(archive.start_url()).context("the bundle's website has no origin")?.to_owned();
    let plain = Replay::launch(archive, &options).await?;
    let session_dir = tempfile::tempdir()?;
    let session = SessionRecorder::create(&session_dir.path().join("session"))?;
    let observed = Replay::launch_recorded(ReplayArchive::open(&bundle)?, &options, Some(session)).await?;
    let plain_page = plain.open(&format!("{origin}/")).await?;
    let observed_page = observed.open(&format!("{origin}/")).await?;
    let mut samples = vec![(Vec::new(), Vec::new()); PAGES.len()];
    for round in 0..rounds + 1 {
        for (index, path) in PAGES.iter().enumerate() {
            let url = format!("{origin}{path}");
            let order = if (round + index) % 2 == 0 { [false, true] } else { [true, false] };
            for observe in order {
                tokio::time::sleep(Duration::from_millis(200)).await;
                let page = if observe { &observed_page } else { &plain_page };
                let millis = load_event_end(page, &url, WAIT).await?;
                // The first round warms both browsers up.
                if round > 0 {
                    let (plain_ms, observed_ms) = &mut samples[index];
                    if observe { observed_ms.push(millis) } else { plain_ms.push(millis) }
                }
            }
        }
    }
    plain.close().await?;
    observed.close().await?;
    let (mut all_plain, mut all_observed, mut ratios) = (Vec::new(), Vec::new(), Vec::new());
    for (path, (plain_ms, observed_ms)) in PAGES.iter().zip(&samples) {
        let (p, o) = (median(plain_ms), median(observed_ms));
        println!("  {path:<16} serve {p:>7.1} ms   eval {o:>7.1} ms   ratio {:.2}", o / p);
        ratios.push(o / p);
        all_plain.extend(plain_ms.iter());
        all_observed.extend(observed_ms.iter());
    }
    let ratio_of_medians = median(&all_observed) / median(&all_plain);
    let geometric_mean = geometric_mean(&ratios);
    println!(
        "observation: ratio of medians {ratio_of_medians:.2}, geometric mean {geometric_mean:.2} over {rounds} rounds (target ≤ 1.10)"
    );

    // 3. Parallel episodes.
    let dataset = dataset(&bundle, &work.join("dataset"))?;
    let node_modules = trace_e2e::playwright::install(&target.join("bench-node"))?;
    let script = Path::new(env!("CARGO_MANIFEST_DIR")).join("agents/shop-agent.mjs");
    let agent = format!("node {} {} other-path", script.display(), node_modules.display());
    let mut rates = Vec::new();
    for parallel in [1, 2] {
        let out = work.join(format!("run-parallel-{parallel}"));
        let per_minute = DATASET_TASKS as f64 / timed_eval(&build, &dataset, &agent, parallel, &out, &[])? * 60.0;
        println!("--parallel {parallel}: {per_minute:.1} episodes per minute ({DATASET_TASKS} episodes)");
        rates.push(per_minute);
    }
    println!("--parallel 2 against --parallel 1: {:.2}×", rates[1] / rates[0]);

    // 4. Kept browsers.
    let agent = format!("node {} {} title", script.display(), node_modules.display());
    let designs: [&[&str]; 2] = [&["--browser-per-episode"], &[]];
    for parallel in [1, 2] {
        let mut seconds = [Vec::new(), Vec::new()];
        for round in 0..EPISODE_ROUNDS {
            for which in if round % 2 == 0 { [0, 1] } else { [1, 0] } {
                let out = work.join(format!("run-kept-{parallel}-{which}"));
                let took = timed_eval(&build, &dataset, &agent, parallel, &out, designs[which])?;
                seconds[which].push(took / DATASET_TASKS as f64);
            }
        }
        let [fresh, kept] = seconds.map(|each| median(&each));
        println!(
            "--parallel {parallel}, an agent that answers at once: {fresh:.2} s an episode ({:.0} per minute) with a \
             browser per episode, {kept:.2} s ({:.0} per minute, target ≤ 0.65 s) with kept browsers: {:.2}× the \
             episodes per minute (target ≥ 3×)",
            60.0 / fresh,
            60.0 / kept,
            fresh / kept
        );
    }
    Ok(())
}

/// [`episode_start`] in one of `browsers` kept from the episode `previous` served (ended first, as a run
/// ends it before the next begins): the bundle opened, the reset (the previous episode ended and this one
/// begun), the start page loaded; and the replay, to be given back, with its session's folder.
async fn kept_episode_start(
    bundle: &Path,
    browsers: &Browsers,
    previous: Option<Kept>,
    work: &Path,
) -> Result<([f64; 3], Kept)> {
    let session_dir = tempfile::tempdir_in(work)?;
    let started = Instant::now();
    let archive = ReplayArchive::open(bundle)?;
    let start_url = archive.start_url().to_owned();
    let session = SessionRecorder::create(&session_dir.path().join("session"))?;
    let opened = started.elapsed().as_secs_f64();
    if let Some((previous, _)) = previous {
        browsers.give_back(previous).await?;
    }
    let replay = browsers.episode(std::sync::Arc::new(archive), session).await?;
    let reset = started.elapsed().as_secs_f64();
    replay.open(&start_url).await?;
    let loaded = started.elapsed().as_secs_f64();
    Ok(([opened, reset - opened, loaded - reset], (replay, session_dir)))
}

/// An episode of a kept browser, and its session's folder.
type Kept = (Replay, tempfile::TempDir);

/// Seconds `trace-replay eval` took on `dataset` with `agent`, `parallel` episodes at once and `extra`
/// arguments, into `out` (emptied first).
fn timed_eval(build: &Build, dataset: &Path, agent: &str, parallel: usize, out: &Path, extra: &[&str]) -> Result<f64> {
    let _ = std::fs::remove_dir_all(out);
    let started = Instant::now();
    let status = std::process::Command::new(&build.trace_replay)
        .arg("eval")
        .arg(dataset)
        .args(["--agent", agent, "--parallel", &parallel.to_string(), "--timeout", "120", "--out"])
        .arg(out)
        .args(extra)
        .stdout(std::process::Stdio::null())
        .stderr(std::process::Stdio::null())
        .status()?;
    ensure!(status.success(), "trace-replay eval --parallel {parallel} {extra:?} failed: {status}");
    Ok(started.elapsed().as_secs_f64())
}

/// Seconds from opening `bundle` to its start page loaded in a replay that records the session, in three
/// phases: the bundle opened, the browser up, the start page loaded.
async fn episode_start(bundle: &Path, options: &Options, work: &Path) -> Result<[f64; 3]> {
    let session_dir = tempfile::tempdir_in(work)?;
    let started = Instant::now();
    let archive = ReplayArchive::open(bundle)?;
    let start_url = archive.start_url().to_owned();
    let session = SessionRecorder::create(&session_dir.path().join("session"))?;
    let opened = started.elapsed().as_secs_f64();
    let replay = Replay::launch_recorded(archive, options, Some(session)).await?;
    let launched = started.elapsed().as_secs_f64();
    replay.open(&start_url).await?;
    let loaded = started.elapsed().as_secs_f64();
    replay.close().await?;
    Ok([opened, launched - opened, loaded - launched])
}

/// A copy of the bundle directory `bundle` grown to `bytes` or more with screenshots of random pixels,
/// indexed in its manifest. Made once.
fn grown(bundle: &Path, out: &Path, bytes: u64) -> Result<PathBuf> {
    ensure!(bundle.is_dir(), "the episode-start benchmark grows a bundle directory");
    if out.join("manifest.json").exists() {
        return Ok(out.to_owned());
    }
    let _ = std::fs::remove_dir_all(out);
    copy_dir(bundle, out)?;
    let mut manifest: serde_json::Value = serde_json::from_slice(&std::fs::read(out.join("manifest.json"))?)?;
    let count = 300u64;
    let each = bytes / count + 1;
    let mut state = 0x2545_f491_4f6c_dd1d_u64;
    for index in 0..count {
        let mut pixels = Vec::with_capacity(each as usize);
        while (pixels.len() as u64) < each {
            state ^= state << 13;
            state ^= state >> 7;
            state ^= state << 17;
            pixels.extend_from_slice(&state.to_le_bytes());
        }
        let path = format!("screenshots/padding-{index:04}.png");
        std::fs::write(out.join(&path), &pixels)?;
        let sha256 = trace_bundle::archive::sha256_hex(&pixels);
        manifest["files"].as_array_mut().context("the manifest's files")?.push(json!({
            "path": path, "size": pixels.len(), "sha256": sha256
        }));
    }
    let files = manifest["files"].as_array_mut().context("the manifest's files")?;
    files.sort_by(|a, b| a["path"].as_str().cmp(&b["path"].as_str()));
    std::fs::write(out.join("manifest.json"), serde_json::to_vec_pretty(&manifest)?)?;
    Ok(out.to_owned())
}

/// A dataset of [`DATASET_TASKS`] tasks sharing the one recording.
fn dataset(bundle: &Path, out: &Path) -> Result<PathBuf> {
    let _ = std::fs::remove_dir_all(out);
    let bundles = out.join("bundles/shop");
    copy_dir(bundle, &bundles)?;
    let manifest: serde_json::Value = serde_json::from_slice(&std::fs::read(bundle.join("manifest.json"))?)?;
    let task = &manifest["task"];
    let mut lines = std::fs::File::create(out.join("tasks.jsonl"))?;
    for index in 0..DATASET_TASKS {
        let line = json!({
            "task_id": format!("shop-{index}"), "task_description": task["description"], "task_type": "action",
            "website_url": task["website"], "num_steps": 0, "duration_seconds": 0.0, "tool_calls": [],
            "credentials": [], "checkpoints": [], "checkpoints_reasoning": "", "ignored": [],
            "bundle": "bundles/shop", "redacted": false
        });
        writeln!(lines, "{line}")?;
    }
    Ok(out.to_owned())
}
