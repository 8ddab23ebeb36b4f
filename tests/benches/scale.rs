//! Scale benchmark: how each stage of TRACE grows from the demo's recording to one of the seed paper's size
//! (issue #48). Two demonstrations are recorded through the extension and the real host, each into a data
//! directory of its own: the demo shop's ([`trace_e2e::demo`]), and a walk through a generated site of
//! about 3,000 requests and 150 MB over 30 parts ([`trace_e2e::paper_size`]). Each is then taken through
//! what a person sharing it runs, and every stage is timed and its peak memory read (`VmHWM` of the
//! processes, sampled from `/proc` while they run):
//! - **record**: the demonstration's own time, and the host's peak memory while it stored it; for the
//!   paper-size walk also the recording's overhead, each part's load time recorded against the same walk
//!   in a browser that records nothing (the extension loaded, no task started), walked just before;
//! - **the bundle**: its requests (HAR entries), DOM snapshots and size on disk, the redacted zip, and the
//!   HAR with every body inline, gzipped (what a person could share without TRACE);
//! - **process**: `trace-host process` (the trajectory, checkpoints, and the offline audit of them), against
//!   the demonstration's own time, and `trace-replay`'s peak memory during its audit;
//! - **export**: `trace-host export --redact`;
//! - **re-run**: `trace-replay run --human` on the zip, offline, every step judged.
//!
//! Replay's page loads against Playwright's `routeFromHAR` and the viewer's first paint have benchmarks of
//! their own, which measure any bundle: the commands that run them on the paper-size recording are printed
//! (`TRACE_BENCH_BUNDLE`: the zip for the page loads, the bundle's directory for the viewer, which zips it
//! itself).
//!
//! Run: `cargo xtask dist && bash .ci/install && cargo bench -p trace-e2e --bench scale`. The recordings and
//! zips are left in `target/bench-scale/`.

use std::path::{Path, PathBuf};
use std::process::{Child, Command, Output};
use std::sync::Arc;
use std::sync::atomic::{AtomicBool, Ordering};
use std::time::{Duration, Instant};

use anyhow::{Context, Result, ensure};
use serde_json::Value;
use trace_bundle::archive::Bundle;
use trace_e2e::bench::{
    directory_size, embedded_har_sizes, geometric_mean, peak_memory_below, peak_memory_of, recorded_seconds,
};
use trace_e2e::browser::Build;
use trace_e2e::paper_size::{PaperSizeSite, Shape};
use trace_e2e::site::DemoSite;
use trace_e2e::{demo, median};
use trace_manifest::report::FidelityReport;

/// What one demonstration's stages gave.
struct Figures {
    name: &'static str,
    recorded_seconds: f64,
    host_peak: u64,
    requests: usize,
    dom_snapshots: usize,
    bundle_bytes: u64,
    zip_bytes: u64,
    har_gzip_bytes: u64,
    process_seconds: f64,
    audit_peak: u64,
    audit_valid: bool,
    export_seconds: f64,
    rerun_seconds: f64,
    rerun_peak: u64,
    steps_passed: usize,
    steps: usize,
    zip: PathBuf,
}

#[tokio::main(flavor = "multi_thread", worker_threads = 2)]
async fn main() -> Result<()> {
    let work = Path::new(env!("CARGO_MANIFEST_DIR")).join("../target/bench-scale");
    let build = Build::from_workspace()?;
    let fresh = |name: &str| -> Result<PathBuf> {
        let dir = work.join(name);
        if dir.exists() {
            std::fs::remove_dir_all(&dir).with_context(|| format!("cannot clear {}", dir.display()))?;
        }
        std::fs::create_dir_all(&dir)?;
        Ok(dir.canonicalize()?)
    };

    eprintln!("recording the demo shop's demonstration");
    let data = fresh("demo")?;
    let host = PeakSampler::start("trace-host", Some(format!("TRACE_DATA={}", data.display())));
    let site = DemoSite::start(0)?;
    let recorded = demo::record(&build, &site, &data).await;
    site.stop();
    let demo_figures = follow(&build, "demo shop", &data, &recorded?.bundle, host.stop())?;

    let shape = Shape::PAPER;
    let site = PaperSizeSite::start(shape)?;
    eprintln!(
        "the paper-size site: {} parts, {} requests, {:.0} MB, at {}",
        shape.pages,
        shape.requests(),
        site.bytes as f64 / 1e6,
        site.part_url(1)
    );
    eprintln!("walking it unrecorded");
    let unrecorded = site.walk_unrecorded(&build, &fresh("paper-unrecorded")?).await?;
    eprintln!("recording the walk");
    let data = fresh("paper")?;
    let host = PeakSampler::start("trace-host", Some(format!("TRACE_DATA={}", data.display())));
    let walked = site.record(&build, &data).await?;
    drop(site);
    let paper_figures = follow(&build, "paper size", &data, &walked.bundle, host.stop())?;

    report(&[&demo_figures, &paper_figures]);
    let per_part: Vec<f64> = walked.loads.iter().zip(&unrecorded).map(|(recorded, plain)| recorded / plain).collect();
    println!(
        "recording overhead, paper size: part loads {:.0} ms recorded against {:.0} ms unrecorded (medians of {} \
         parts), {:.2}× (geometric mean of the per-part ratios {:.2}×)",
        median(&walked.loads),
        median(&unrecorded),
        per_part.len(),
        median(&walked.loads) / median(&unrecorded),
        geometric_mean(&per_part)
    );
    println!("the demo's recording overhead is the overhead bench's (cargo bench -p trace-e2e --bench overhead)");
    println!();
    println!("page loads against routeFromHAR (on the zip) and the viewer's first paint (on the bundle), paper size:");
    for (bench, bundle) in [("replay_pageload", &paper_figures.zip), ("view", &walked.bundle)] {
        println!("  TRACE_BENCH_BUNDLE={} cargo bench -p trace-e2e --bench {bench}", bundle.display());
    }
    Ok(())
}

/// Takes a recorded bundle through processing, export and a re-run; `host_peak` is the host's peak memory
/// while it recorded.
fn follow(build: &Build, name: &'static str, data: &Path, bundle: &Path, host_peak: u64) -> Result<Figures> {
    let mut opened = Bundle::open(bundle)?;
    let manifest = opened.manifest()?;
    let task = manifest.task.id.as_str().to_owned();
    let har: Value = serde_json::from_slice(&opened.read(trace_manifest::bundle::HAR_FILE)?)?;
    let requests = har["log"]["entries"].as_array().map_or(0, Vec::len);
    let dom_snapshots =
        manifest.files.iter().filter(|file| file.path.starts_with(trace_manifest::bundle::DOM_DIR)).count();
    let bundle_bytes = directory_size(bundle)?;

    eprintln!("{name}: trace-host process");
    let host = || {
        let mut command = Command::new(&build.trace_host);
        command.arg("--data").arg(data).env("TRACE_LOG", "warn");
        command
    };
    let processed = measured(host().arg("process").arg(&task), Some("trace-replay"))?;
    // An invalid bundle is a figure to report, not the benchmark's failure: process says so and exits 1.
    ensure!(
        processed.output.status.success() || processed.output.status.code() == Some(1),
        "process failed: {}",
        String::from_utf8_lossy(&processed.output.stderr)
    );
    let audit: Value = serde_json::from_slice(&std::fs::read(bundle.join("audit.json")).context("no audit.json")?)?;

    eprintln!("{name}: trace-host export");
    let dir = data.parent().context("a data directory has a parent")?;
    let zip = dir.join(format!("{}.zip", data.file_name().and_then(|n| n.to_str()).unwrap_or("task")));
    let embedded = zip.with_extension("embedded.zip");
    let started = Instant::now();
    run(host().args(["export", &task, "--redact", "--out"]).arg(&zip))?;
    let export_seconds = started.elapsed().as_secs_f64();
    run(host().args(["export", &task, "--redact", "--embed-bodies", "--out"]).arg(&embedded))?;
    let (_, har_gzip_bytes) = embedded_har_sizes(&embedded)?;

    eprintln!("{name}: trace-replay run --human");
    let mut rerun = Command::new(build.trace_host.with_file_name("trace-replay"));
    rerun.args(["run", "--human", "--json", "--chromium"]).arg(&build.chromium).arg(&zip).env("TRACE_LOG", "warn");
    let rerun = measured(&mut rerun, None)?;
    let report: FidelityReport = serde_json::from_slice(&rerun.output.stdout)
        .with_context(|| format!("no report: {}", String::from_utf8_lossy(&rerun.output.stderr)))?;

    Ok(Figures {
        name,
        recorded_seconds: recorded_seconds(bundle)?,
        host_peak,
        requests,
        dom_snapshots,
        bundle_bytes,
        zip_bytes: std::fs::metadata(&zip)?.len(),
        har_gzip_bytes,
        process_seconds: processed.seconds,
        audit_peak: processed.children_peak,
        audit_valid: audit["valid"] == true,
        export_seconds,
        rerun_seconds: rerun.seconds,
        rerun_peak: rerun.own_peak,
        steps_passed: report.steps_passed,
        steps: report.steps_total,
        zip,
    })
}

fn report(flows: &[&Figures]) {
    let mb = |bytes: u64| match bytes {
        0..1_000_000 => format!("{:.0} kB", bytes as f64 / 1e3),
        _ => format!("{:.1} MB", bytes as f64 / 1e6),
    };
    let seconds = |s: f64| format!("{s:.1} s");
    type Row = (&'static str, fn(&Figures) -> f64, Box<dyn Fn(&Figures) -> String>);
    let rows: Vec<Row> = vec![
        ("recorded demonstration", |f| f.recorded_seconds, Box::new(move |f| seconds(f.recorded_seconds))),
        ("host peak memory, recording", |f| f.host_peak as f64, Box::new(move |f| mb(f.host_peak))),
        ("requests (HAR entries)", |f| f.requests as f64, Box::new(|f| f.requests.to_string())),
        ("DOM snapshots", |f| f.dom_snapshots as f64, Box::new(|f| f.dom_snapshots.to_string())),
        ("bundle on disk", |f| f.bundle_bytes as f64, Box::new(move |f| mb(f.bundle_bytes))),
        ("redacted zip", |f| f.zip_bytes as f64, Box::new(move |f| mb(f.zip_bytes))),
        ("HAR, bodies inline, gzipped", |f| f.har_gzip_bytes as f64, Box::new(move |f| mb(f.har_gzip_bytes))),
        ("process (audit included)", |f| f.process_seconds, Box::new(move |f| seconds(f.process_seconds))),
        (
            "process ÷ demonstration",
            |f| f.process_seconds / f.recorded_seconds,
            Box::new(|f| format!("{:.1}×", f.process_seconds / f.recorded_seconds)),
        ),
        ("audit's peak memory (trace-replay)", |f| f.audit_peak as f64, Box::new(move |f| mb(f.audit_peak))),
        ("export --redact", |f| f.export_seconds, Box::new(move |f| seconds(f.export_seconds))),
        ("re-run (run --human)", |f| f.rerun_seconds, Box::new(move |f| seconds(f.rerun_seconds))),
        ("re-run peak memory (trace-replay)", |f| f.rerun_peak as f64, Box::new(move |f| mb(f.rerun_peak))),
    ];
    println!();
    println!("{:<36} {:>14} {:>14} {:>10}", "stage", flows[0].name, flows[1].name, "growth");
    for (label, value, shown) in &rows {
        let growth = value(flows[1]) / value(flows[0]);
        println!("{label:<36} {:>14} {:>14} {:>9.1}×", shown(flows[0]), shown(flows[1]), growth);
    }
    for flow in flows {
        println!(
            "{}: audit {}, re-run passed {} of {} steps",
            flow.name,
            if flow.audit_valid { "valid" } else { "NOT valid" },
            flow.steps_passed,
            flow.steps
        );
    }
}

/// A command run to its end.
struct Measured {
    output: Output,
    seconds: f64,
    /// The command's own peak memory, in bytes.
    own_peak: u64,
    /// The largest peak of the processes below it that were watched (0 when none ran or none was).
    children_peak: u64,
}

/// Runs `command` to its end, watching its memory and that of the processes below it whose command line
/// holds `child_marker`.
fn measured(command: &mut Command, child_marker: Option<&'static str>) -> Result<Measured> {
    let started = Instant::now();
    let child: Child = command
        .stdout(std::process::Stdio::piped())
        .stderr(std::process::Stdio::piped())
        .spawn()
        .with_context(|| format!("cannot run {command:?}"))?;
    let own = PeakSampler::of_process(child.id());
    let children = child_marker.map(|marker| PeakSampler::below(child.id(), marker));
    let output = child.wait_with_output()?;
    let seconds = started.elapsed().as_secs_f64();
    Ok(Measured { output, seconds, own_peak: own.stop(), children_peak: children.map_or(0, PeakSampler::stop) })
}

fn run(command: &mut Command) -> Result<()> {
    let output = command.output().with_context(|| format!("cannot run {command:?}"))?;
    ensure!(output.status.success(), "{command:?} failed: {}", String::from_utf8_lossy(&output.stderr));
    Ok(())
}

/// Samples, every 100 ms until stopped, the peak resident memory (`VmHWM`) of the processes it is told to
/// watch, and keeps the largest seen: a process's own peak is only readable while it runs.
struct PeakSampler {
    stop: Arc<AtomicBool>,
    thread: std::thread::JoinHandle<u64>,
}

impl PeakSampler {
    /// Any process whose command line holds `marker` and, if given, whose environment holds `environment`
    /// (`TRACE_DATA=<dir>`: the host one recording's browser started, wherever in the process tree).
    fn start(marker: &'static str, environment: Option<String>) -> PeakSampler {
        PeakSampler::watching(move || {
            processes()
                .filter(|pid| read_nul_separated(*pid, "cmdline").iter().any(|part| part.contains(marker)))
                .filter(|pid| {
                    environment.as_ref().is_none_or(|wanted| read_nul_separated(*pid, "environ").contains(wanted))
                })
                .filter_map(peak_memory_of)
                .max()
                .unwrap_or(0)
        })
    }

    fn of_process(pid: u32) -> PeakSampler {
        PeakSampler::watching(move || peak_memory_of(pid).unwrap_or(0))
    }

    /// The processes below `root` whose command line holds `marker`.
    fn below(root: u32, marker: &'static str) -> PeakSampler {
        PeakSampler::watching(move || {
            peak_memory_below(root, marker).ok().and_then(|peaks| peaks.first().copied()).unwrap_or(0)
        })
    }

    /// Samples `peak_now` (the largest peak of the processes watched, as they are now) until stopped.
    fn watching(peak_now: impl Fn() -> u64 + Send + 'static) -> PeakSampler {
        let stop = Arc::new(AtomicBool::new(false));
        let stopped = stop.clone();
        let thread = std::thread::spawn(move || {
            let mut peak = 0;
            while !stopped.load(Ordering::Relaxed) {
                peak = peak.max(peak_now());
                std::thread::sleep(Duration::from_millis(100));
            }
            peak
        });
        PeakSampler { stop, thread }
    }

    /// The largest peak seen, in bytes.
    fn stop(self) -> u64 {
        self.stop.store(true, Ordering::Relaxed);
        self.thread.join().unwrap_or(0)
    }
}

fn processes() -> impl Iterator<Item = u32> {
    std::fs::read_dir("/proc")
        .into_iter()
        .flatten()
        .flatten()
        .filter_map(|entry| entry.file_name().to_str().and_then(|name| name.parse().ok()))
}

fn read_nul_separated(pid: u32, file: &str) -> Vec<String> {
    let bytes = std::fs::read(format!("/proc/{pid}/{file}")).unwrap_or_default();
    bytes.split(|byte| *byte == 0).map(|part| String::from_utf8_lossy(part).into_owned()).collect()
}
