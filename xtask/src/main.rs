//! Build automation for the workspace, run as `cargo xtask <task>`:
//! - `dist`: everything in release mode: `target/release/trace-host`, `target/release/trace-replay`, the
//!   demo's binaries (`trace-demo`, `trace-demo-site`), and the unpacked, loadable extension in
//!   `target/extension/` (Rust compiled to wasm32 and bound for the web by wasm-bindgen's own library, plus
//!   the static files of `extension/static/`).
//! - `demo`: `dist`, then the README's main job: record a demonstration of the demo shop in Chromium with
//!   the extension and the host, export the bundle, validate and inspect it; then how long each phase took,
//!   the build's included.
//! - `modules`: the check that no crate has a module cycle (`module_cycles`).
//! - `test`: `modules`, `dist` (the end-to-end tests drive the release build), a check that `trace-manifest`,
//!   `trace-analysis` and `trace-capture` build for wasm32, then every test of `cargo test --workspace`,
//!   its binaries run side by side (`test_binaries`; `TRACE_TEST_JOBS` at a time, one per two cores unless set).
//!
//! Kept cheap to compile: anyhow, serde_json (for Cargo's messages; the binder needs it anyway), syn (which
//! the derive macros build anyway), and wasm-bindgen's binding library, which spares a person the separate
//! install (and release build) of `wasm-bindgen-cli` before the first `cargo xtask demo`.

use std::path::{Path, PathBuf};
use std::process::Command;
use std::time::{Duration, Instant};

use anyhow::{Context, Result, bail};

mod module_cycles;
mod test_binaries;

fn main() -> Result<()> {
    let task = std::env::args().nth(1);
    match task.as_deref() {
        Some("dist") => dist().map(drop),
        Some("demo") => {
            let built = dist()?;
            demo()?;
            println!("before it, the build took {:.0} s: {built}", built.total().as_secs_f64());
            Ok(())
        }
        Some("modules") => module_cycles::check(&root(), &module_cycles::workspace_targets(&mut cargo())?),
        Some("test") => {
            module_cycles::check(&root(), &module_cycles::workspace_targets(&mut cargo())?)?;
            dist()?;
            // The format, the derivations and the page scripts build for the browser too (the extension's
            // target).
            let wasm = ["-p", "trace-manifest", "-p", "trace-analysis", "-p", "trace-capture"];
            run(cargo().arg("check").args(wasm).args(["--target", WASM_TARGET]))?;
            host_links_no_browser_driver()?;
            run(cargo().args(["test", "--workspace", "--doc"]))?;
            // The end-to-end tests skip, saying so, when the release build is missing; here it was just
            // built, so a missing piece must fail them instead.
            let mut tests = cargo();
            tests.args(["test", "--workspace"]);
            // What follows `--` goes to every test binary, as with `cargo test -- <filter>`.
            let binary_args: Vec<String> = std::env::args().skip(2).skip_while(|arg| arg != "--").skip(1).collect();
            test_binaries::run_all(tests, test_jobs()?, &[("TRACE_E2E_REQUIRED", "1")], &binary_args)
        }
        _ => {
            eprintln!("usage: cargo xtask <dist|demo|modules|test>");
            eprintln!(
                "  dist     build trace-host, trace-replay and the extension (target/extension/) in release mode"
            );
            eprintln!("  demo     dist, then record, bundle and check a demonstration on the demo site");
            eprintln!("  modules  check that no crate has a module cycle (sibling modules that name each other)");
            eprintln!("  test     modules, dist, then every test of the workspace (the end-to-end ones drive the");
            eprintln!("           release build); `cargo xtask test -- <filter>` passes what follows `--` to every");
            eprintln!("           test binary");
            std::process::exit(2);
        }
    }
}

/// How many test binaries run at once: `TRACE_TEST_JOBS`, or one for every two cores. An end-to-end binary
/// runs two tests at a time, each with a browser (and often an application) that keeps about a core busy.
/// On two cores, two binaries at a time took the suite from 1706 s to 1316 s, but starved the browsers
/// enough to fail steps bound by time (a page load past 30 s, a replayed cart not drawn in 20 s).
fn test_jobs() -> Result<usize> {
    match std::env::var("TRACE_TEST_JOBS") {
        Ok(jobs) => match jobs.parse() {
            Ok(jobs) if jobs > 0 => Ok(jobs),
            _ => bail!("TRACE_TEST_JOBS must be a positive whole number, not {jobs:?}"),
        },
        Err(_) => Ok(std::thread::available_parallelism().map_or(1, |cores| (cores.get() / 2).max(1))),
    }
}

const WASM_TARGET: &str = "wasm32-unknown-unknown";

fn root() -> PathBuf {
    Path::new(env!("CARGO_MANIFEST_DIR")).parent().expect("xtask lives in the workspace").to_owned()
}

fn cargo() -> Command {
    let mut command = Command::new(std::env::var_os("CARGO").unwrap_or_else(|| "cargo".into()));
    command.current_dir(root());
    command
}

fn run(command: &mut Command) -> Result<()> {
    let status = command.status().with_context(|| format!("cannot run {command:?}"))?;
    if !status.success() {
        bail!("{command:?} failed with {status}");
    }
    Ok(())
}

/// `trace-host` runs beside a person's Chrome: it must not link a browser driver (chromiumoxide, which
/// `trace-replay` uses), however a dependency comes to pull one in.
fn host_links_no_browser_driver() -> Result<()> {
    let output = cargo()
        .args(["tree", "-p", "trace-host", "-e", "normal", "--prefix", "none", "--format", "{p}"])
        .output()
        .context("cannot run cargo tree")?;
    if !output.status.success() {
        bail!("cargo tree failed: {}", String::from_utf8_lossy(&output.stderr));
    }
    let tree = String::from_utf8_lossy(&output.stdout);
    if let Some(driver) = tree.lines().find(|line| line.starts_with("chromiumoxide")) {
        bail!("trace-host depends on {driver}; `cargo tree -p trace-host -i chromiumoxide` says through what");
    }
    Ok(())
}

/// How long each step of a build took, in order.
struct Steps(Vec<(&'static str, Duration)>);

impl Steps {
    fn timed(&mut self, name: &'static str, step: impl FnOnce() -> Result<()>) -> Result<()> {
        let started = Instant::now();
        step()?;
        self.0.push((name, started.elapsed()));
        Ok(())
    }

    fn total(&self) -> Duration {
        self.0.iter().map(|(_, took)| *took).sum()
    }
}

impl std::fmt::Display for Steps {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        let steps: Vec<String> =
            self.0.iter().map(|(name, took)| format!("{name} {:.0} s", took.as_secs_f64())).collect();
        f.write_str(&steps.join(", "))
    }
}

fn dist() -> Result<Steps> {
    let mut steps = Steps(Vec::new());
    // One cargo invocation for every native binary, the demo's included: Cargo resolves the features of
    // the packages it builds together once, so the demo's binaries can never need a second build of a
    // dependency (chromiumoxide and the rest) with other features, and the build is one timed step.
    steps.timed("the binaries", || {
        run(cargo().args(["build", "--release", "-p", "trace-host", "-p", "trace-replay", "-p", "trace-e2e", "--bins"]))
    })?;
    steps.timed("the extension", build_extension)?;
    let target = root().join("target");
    println!("built:");
    for path in ["release/trace-host", "release/trace-replay", "release/trace-demo", "extension/manifest.json"] {
        println!("  {}", target.join(path).display());
    }
    Ok(steps)
}

fn build_extension() -> Result<()> {
    let root = root();
    run(cargo().args(["build", "--release", "-p", "trace-extension", "--target", WASM_TARGET]))
        .context("building the extension needs the wasm32 target: rustup target add wasm32-unknown-unknown")?;
    // wasm-bindgen's library binds the module here, at the version of the wasm-bindgen crate the extension
    // is built with: the two must match exactly, or the bindings are refused ("schema version").
    let (linked, binder) = (locked_version(&root, "wasm-bindgen")?, locked_version(&root, "wasm-bindgen-cli-support")?);
    if linked != binder {
        bail!(
            "the extension links wasm-bindgen {linked} but xtask binds with {binder}: give xtask/Cargo.toml's wasm-bindgen-cli-support the same version"
        );
    }
    let out = root.join("target/extension");
    if out.exists() {
        std::fs::remove_dir_all(&out)?;
    }
    copy_dir(&root.join("extension/static"), &out)?;
    let wasm = root.join("target/wasm32-unknown-unknown/release/trace_extension.wasm");
    wasm_bindgen_cli_support::Bindgen::new()
        .input_path(&wasm)
        .web(true)?
        .typescript(false)
        // As the CLI does: `init()` with no argument loads the module from beside the script.
        .omit_default_module_path(false)
        .generate(out.join("pkg"))
        .with_context(|| format!("cannot bind {}", wasm.display()))
}

fn demo() -> Result<()> {
    let root = root();
    // The binary `dist` built, run as it is.
    run(Command::new(root.join("target/release/trace-demo"))
        .current_dir(&root)
        .arg("--out")
        .arg(root.join("target/demo")))
}

/// The version of `package` that Cargo.lock pins.
fn locked_version(root: &Path, package: &str) -> Result<String> {
    let lock = std::fs::read_to_string(root.join("Cargo.lock")).context("cannot read Cargo.lock")?;
    let marker = format!("name = \"{package}\"\nversion = \"");
    let start = lock.find(&marker).with_context(|| format!("{package} is not in Cargo.lock"))? + marker.len();
    Ok(lock[start..].split('"').next().unwrap_or_default().to_owned())
}

fn copy_dir(from: &Path, to: &Path) -> Result<()> {
    std::fs::create_dir_all(to)?;
    for entry in std::fs::read_dir(from)? {
        let entry = entry?;
        let target = to.join(entry.file_name());
        if entry.file_type()?.is_dir() {
            copy_dir(&entry.path(), &target)?;
        } else {
            std::fs::copy(entry.path(), &target)?;
        }
    }
    Ok(())
}
