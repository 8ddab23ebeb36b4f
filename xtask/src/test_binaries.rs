//! Running the workspace's test binaries several at a time, as `cargo xtask test` does.
//!
//! `cargo test` runs one test binary after another. Some end-to-end binaries spend most of their time
//! waiting (on Chromium, on the applications they start, on the pauses a re-run keeps as the person made
//! them: `postprocess` alone keeps a quarter of two cores busy), and on a machine with cores to spare
//! those waits can overlap. Here Cargo builds the binaries (`--no-run`) and says where they are; they then
//! run side by side, each exactly as `cargo test` would run it (from its package's folder, with its
//! environment), the slowest started first. A binary's output is held and printed whole when it ends, so
//! the log reads as `cargo test`'s, `test result:` lines included; a table of each binary's time closes it,
//! which is where to look first when the suite grows slow.

use std::collections::VecDeque;
use std::fs::File;
use std::path::{Path, PathBuf};
use std::process::{Child, Command, Stdio};
use std::time::{Duration, Instant};

use anyhow::{Context, Result, bail};
use serde_json::Value;

/// Binaries that ran longest in the last measured run (`cargo xtask test` prints the table), longest first.
/// Started first, they do not end alone after everything else has finished; the rest follow in Cargo's
/// order. A name missing here only costs time, never a test.
const SLOWEST_FIRST: &[&str] = &["real_apps", "recording", "agentlab", "postprocess", "host", "eval", "replay"];

/// One test binary Cargo built.
struct TestBinary {
    /// The target's name (`real_apps`, or the crate's for its unit tests) and its package's.
    name: String,
    package: String,
    executable: PathBuf,
    /// `cargo test` runs a binary from its package's folder; tests may read files relative to it.
    package_dir: PathBuf,
}

/// A binary running, its output held in `log` until it ends.
struct Running {
    binary: TestBinary,
    child: Child,
    log: PathBuf,
    began: Instant,
}

/// Builds every test binary of the workspace with `cargo_test` (a `cargo test …` command to which
/// `--no-run` is added), runs them `jobs` at a time with `env` and `args`, and fails if any failed.
pub fn run_all(mut cargo_test: Command, jobs: usize, env: &[(&str, &str)], args: &[String]) -> Result<()> {
    let binaries = build(&mut cargo_test)?;
    let logs = std::env::temp_dir().join(format!("xtask-test-{}", std::process::id()));
    std::fs::create_dir_all(&logs).with_context(|| format!("cannot create {}", logs.display()))?;
    let started = Instant::now();
    let mut waiting: VecDeque<TestBinary> = order(binaries).into();
    let mut running: Vec<Running> = Vec::new();
    let mut finished: Vec<(String, Duration, bool)> = Vec::new();
    eprintln!("running {} test binaries, {jobs} at a time", waiting.len());
    while !waiting.is_empty() || !running.is_empty() {
        while running.len() < jobs {
            let Some(binary) = waiting.pop_front() else { break };
            running.push(start(binary, &logs, env, args)?);
        }
        let mut index = 0;
        while index < running.len() {
            let Some(status) = running[index].child.try_wait()? else {
                index += 1;
                continue;
            };
            let Running { binary, log, began, .. } = running.swap_remove(index);
            let took = began.elapsed();
            let verdict = if status.success() { "passed" } else { "FAILED" };
            println!("\n── {} ({}) {verdict} in {:.0} s", binary.name, binary.package, took.as_secs_f64());
            print!("{}", String::from_utf8_lossy(&std::fs::read(&log)?));
            finished.push((format!("{} ({})", binary.name, binary.package), took, status.success()));
        }
        std::thread::sleep(Duration::from_millis(100));
    }
    let _ = std::fs::remove_dir_all(&logs);
    finished.sort_by_key(|(_, took, _)| std::cmp::Reverse(*took));
    println!("\ntest binaries, longest first ({:.0} s in all, {jobs} at a time):", started.elapsed().as_secs_f64());
    for (name, took, passed) in &finished {
        println!("  {:>5.0} s  {name}{}", took.as_secs_f64(), if *passed { "" } else { "  FAILED" });
    }
    let failed: Vec<&str> = finished.iter().filter(|(_, _, passed)| !passed).map(|(name, ..)| name.as_str()).collect();
    if !failed.is_empty() {
        bail!("{} test binaries failed: {}", failed.len(), failed.join(", "));
    }
    Ok(())
}

/// Starts `binary` as `cargo test` would, its stdout and stderr going, interleaved as written, to one file
/// in `logs`.
fn start(binary: TestBinary, logs: &Path, env: &[(&str, &str)], args: &[String]) -> Result<Running> {
    let log =
        logs.join(binary.executable.file_name().context("a test binary without a file name")?).with_extension("log");
    let file = File::create(&log).with_context(|| format!("cannot create {}", log.display()))?;
    let child = Command::new(&binary.executable)
        .args(args)
        .current_dir(&binary.package_dir)
        .env("CARGO_MANIFEST_DIR", &binary.package_dir)
        .env("CARGO_PKG_NAME", &binary.package)
        .envs(env.iter().copied())
        .stdin(Stdio::null())
        .stdout(file.try_clone()?)
        .stderr(file)
        .spawn()
        .with_context(|| format!("cannot start {}", binary.executable.display()))?;
    Ok(Running { binary, child, log, began: Instant::now() })
}

/// Builds the test binaries and reads where Cargo put them from its JSON messages.
fn build(cargo_test: &mut Command) -> Result<Vec<TestBinary>> {
    let output = cargo_test
        .args(["--no-run", "--message-format=json-render-diagnostics"])
        .stderr(Stdio::inherit())
        .output()
        .context("cannot run cargo test --no-run")?;
    if !output.status.success() {
        bail!("building the tests failed with {}", output.status);
    }
    let mut binaries = Vec::new();
    for line in String::from_utf8_lossy(&output.stdout).lines() {
        let Ok(message) = serde_json::from_str::<Value>(line) else { continue };
        let is_test = message["reason"] == "compiler-artifact" && message["profile"]["test"] == true;
        let (Some(executable), true) = (message["executable"].as_str(), is_test) else { continue };
        let manifest = Path::new(message["manifest_path"].as_str().context("an artifact without its manifest")?);
        binaries.push(TestBinary {
            name: message["target"]["name"].as_str().unwrap_or_default().to_owned(),
            package: package_name(message["package_id"].as_str().unwrap_or_default(), manifest),
            executable: executable.into(),
            package_dir: manifest.parent().context("a manifest path without a folder")?.to_owned(),
        });
    }
    if binaries.is_empty() {
        bail!("cargo test --no-run named no test binary");
    }
    Ok(binaries)
}

/// A package's name from its id: `path+file:///…/tests#trace-e2e@0.1.0` names it after `#`, while an id
/// whose name is its folder's (`path+file:///…/xtask#0.1.0`) does not.
fn package_name(id: &str, manifest: &Path) -> String {
    let fragment = id.rsplit_once('#').map_or(id, |(_, fragment)| fragment);
    match fragment.split_once('@') {
        Some((name, _)) => name.to_owned(),
        None => manifest
            .parent()
            .and_then(Path::file_name)
            .map(|name| name.to_string_lossy().into_owned())
            .unwrap_or_default(),
    }
}

/// The slowest known binaries first, then the others in Cargo's order.
fn order(mut binaries: Vec<TestBinary>) -> Vec<TestBinary> {
    binaries.sort_by_key(|binary| SLOWEST_FIRST.iter().position(|name| *name == binary.name).unwrap_or(usize::MAX));
    binaries
}
