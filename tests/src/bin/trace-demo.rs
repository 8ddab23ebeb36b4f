//! `trace-demo`: the README's main job. Serves the demo shop, records the demonstration in Chromium with
//! the built extension and `trace-host`, stops the shop, processes the bundle (trajectory, credentials,
//! checkpoints, ignore list) and audits its checkpoints offline (the demonstration earns full marks, an
//! agent that does nothing and every perturbed demonstration zero), exports it redacted, validates and
//! inspects it, replays the redacted zip offline, re-running the demonstration step by step with the real
//! binaries, and last makes a one-task dataset of it (`cargo xtask demo` builds everything first). It
//! ends with how long each of these phases took.

use std::path::{Path, PathBuf};
use std::process::Command;
use std::time::{Duration, Instant};

use anyhow::{Context, Result, ensure};
use clap::Parser;
use trace_e2e::browser::Build;
use trace_e2e::demo;
use trace_e2e::site::DemoSite;

/// Record a demonstration on the demo shop, bundle it, export it redacted, check it, replay it offline, and
/// make a dataset of it.
#[derive(Debug, Parser)]
struct Args {
    /// Where to put the host's data directory, the exported zip and the dataset.
    #[arg(long, default_value = "target/demo")]
    out: PathBuf,
}

#[tokio::main]
async fn main() -> Result<()> {
    let args = Args::parse();
    let build = Build::from_workspace()?;
    let data = args.out.join("data");
    let dataset = args.out.join("dataset");
    for previous in [&data, &dataset] {
        if previous.exists() {
            std::fs::remove_dir_all(previous).with_context(|| format!("cannot clear {}", previous.display()))?;
        }
    }
    std::fs::create_dir_all(&data)?;
    let data = data.canonicalize()?;
    let mut phases = Phases::start();
    let site = DemoSite::start(0)?;
    println!("demo shop at {}", site.url("/"));
    println!("recording in Chromium with the TRACE extension: {}", demo::DESCRIPTION);
    let recorded = demo::record(&build, &site, &data).await?;
    println!("bundle:    {}", recorded.bundle.display());
    phases.done("record");

    let task_id = recorded.bundle.file_name().context("a bundle directory has a name")?.to_string_lossy().into_owned();
    let zip = args.out.join(format!("{task_id}.zip"));
    let host = || {
        let mut command = Command::new(&build.trace_host);
        command.arg("--data").arg(&data);
        command
    };
    site.stop();
    println!("\nprocessing it, and proving its checkpoints offline with the shop stopped");
    run(host().args(["process", &task_id]).env("TRACE_LOG", "warn"))?;
    phases.done("process and audit");
    run(host().args(["export", &task_id, "--redact", "--out"]).arg(&zip))?;
    run(Command::new(&build.trace_host).arg("validate").arg(&zip))?;
    run(Command::new(replay_binary(&build.trace_host)).arg("inspect").arg(&zip))?;
    phases.done("export, validate, inspect");
    println!("\nreplaying {} with the shop stopped: the demonstration, step by step", zip.display());
    run(Command::new(replay_binary(&build.trace_host))
        .args(["run", "--human", "--headless", "--chromium"])
        .arg(&build.chromium)
        .arg(&zip)
        .env("TRACE_LOG", "warn"))?;
    phases.done("replay");
    println!();
    run(host().args(["dataset", &task_id, "--out"]).arg(&dataset))?;
    phases.done("dataset");
    println!("\ndone: the bundle is in {}, exported redacted as {}", recorded.bundle.display(), zip.display());
    println!(
        "its trajectory, audited checkpoints and ignore list are in the zip; the dataset is in {}",
        dataset.display()
    );
    println!("serve it to a browser of your own with: trace-replay serve {}", zip.display());
    println!("\n{phases}");
    Ok(())
}

/// How long each phase of the demo took, in order.
struct Phases {
    last: Instant,
    done: Vec<(&'static str, Duration)>,
}

impl Phases {
    fn start() -> Phases {
        Phases { last: Instant::now(), done: Vec::new() }
    }

    /// Ends the phase `name`, which began when the one before it ended.
    fn done(&mut self, name: &'static str) {
        let now = Instant::now();
        self.done.push((name, now - self.last));
        self.last = now;
    }
}

impl std::fmt::Display for Phases {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        let total: Duration = self.done.iter().map(|(_, took)| *took).sum();
        write!(f, "the demo took {:.0} s", total.as_secs_f64())?;
        for (i, (name, took)) in self.done.iter().enumerate() {
            write!(f, "{} {name} {:.0} s", if i == 0 { ":" } else { "," }, took.as_secs_f64())?;
        }
        Ok(())
    }
}

fn replay_binary(trace_host: &Path) -> PathBuf {
    trace_host.with_file_name("trace-replay")
}

fn run(command: &mut Command) -> Result<()> {
    let status = command.status().with_context(|| format!("cannot run {command:?}"))?;
    ensure!(status.success(), "{command:?} failed with {status}");
    Ok(())
}
