//! `trace-demo`: the README's main job. Serves the demo shop, records the demonstration in Chromium with
//! the built extension and `trace-host`, stops the shop, processes the bundle (trajectory, credentials,
//! checkpoints, ignore list) and audits its checkpoints offline (the demonstration earns full marks, an
//! agent that does nothing and every perturbed demonstration zero), exports it redacted, validates and
//! inspects it, replays the redacted zip offline, re-running the demonstration step by step with the real
//! binaries, and last makes a one-task dataset of it (`cargo xtask demo` builds everything first).

use std::path::{Path, PathBuf};
use std::process::Command;

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
    let site = DemoSite::start(0)?;
    println!("demo shop at {}", site.url("/"));
    println!("recording in Chromium with the TRACE extension: {}", demo::DESCRIPTION);
    let recorded = demo::record(&build, &site, &data).await?;
    println!("bundle:    {}", recorded.bundle.display());

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
    run(host().args(["export", &task_id, "--redact", "--out"]).arg(&zip))?;
    run(Command::new(&build.trace_host).arg("validate").arg(&zip))?;
    run(Command::new(replay_binary(&build.trace_host)).arg("inspect").arg(&zip))?;
    println!("\nreplaying {} with the shop stopped: the demonstration, step by step", zip.display());
    run(Command::new(replay_binary(&build.trace_host))
        .args(["run", "--human", "--headless", "--chromium"])
        .arg(&build.chromium)
        .arg(&zip)
        .env("TRACE_LOG", "warn"))?;
    println!();
    run(host().args(["dataset", &task_id, "--out"]).arg(&dataset))?;
    println!("\ndone: the bundle is in {}, exported redacted as {}", recorded.bundle.display(), zip.display());
    println!(
        "its trajectory, audited checkpoints and ignore list are in the zip; the dataset is in {}",
        dataset.display()
    );
    println!("serve it to a browser of your own with: trace-replay serve {}", zip.display());
    Ok(())
}

fn replay_binary(trace_host: &Path) -> PathBuf {
    trace_host.with_file_name("trace-replay")
}

fn run(command: &mut Command) -> Result<()> {
    let status = command.status().with_context(|| format!("cannot run {command:?}"))?;
    ensure!(status.success(), "{command:?} failed with {status}");
    Ok(())
}
