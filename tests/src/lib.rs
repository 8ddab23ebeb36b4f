//! End-to-end tests of TRACE and the demo the README runs.
//!
//! # Layout
//! - [`archiveweb`]: ArchiveWeb.page, Webrecorder's recording extension, beside TRACE's for the overhead
//!   benchmark: where it is built, starting it on a tab, what it stored.
//! - [`agentlab`]: AgentLab studies of a dataset of TRACE tasks, sequential or on Ray.
//! - [`apps`]: real web applications from the package registries, and the demonstrations recorded on them.
//! - [`audit`]: `trace-replay audit` as the tests ask for it, and what a passing audit is.
//! - [`demo`]: the demonstration of the demo shop that the README's main job records and the end-to-end
//!   test checks, in Chromium with the extension and the real `trace-host`.
//! - [`paper_size`]: a generated site of the seed paper's size (3,000 requests, 150 MB) and a person's
//!   walk through it, for the scale benchmark.
//! - [`handmade`]: bundles written by hand, for a page no real site has (one that posts huge bodies).
//! - [`site`]: the TRACE Demo Shop, the local site that tests and the demo record (`trace-demo-site` serves it).
//! - [`playwright`]: Playwright from npm and the Node scripts of the benchmarks that measure TRACE against it.
//! - [`s3`]: an S3 server on loopback (moto's) for runs and datasets in an object store.
//! - [`sentinel`]: a listener counting connections to a stopped site's port (replay must make none).
//! - [`browser`]: Debian's Chromium with the built extension and the real host registered, for end-to-end
//!   tests.
//! - [`judge`]: a scripted judge, an OpenAI-compatible endpoint on loopback answering by a fixed rule.
//! - [`run`]: a program of the build run to completion, its failure a test's panic with what it said.
//! - [`bench`]: what the benchmarks share: the demonstration recorded once, bundle directories copied, the
//!   CPU time and memory of a browser's processes.
//! - [`median`]: the middle of the benchmarks' samples.
//! - `src/bin/trace-demo.rs`: the README's main job (`cargo xtask demo`): record, export, validate, inspect.

pub mod agentlab;
pub mod apps;
pub mod archiveweb;
pub mod audit;
pub mod bench;
pub mod browser;
pub mod demo;
pub mod handmade;
pub mod judge;
pub mod paper_size;
pub mod playwright;
pub mod s3;
pub mod sentinel;
pub mod site;

/// Runs `program` with `args` to completion; a failure panics with what it printed, as a test failure.
pub fn run(program: &std::path::Path, args: &[&str]) -> std::process::Output {
    let output = std::process::Command::new(program).args(args).output().unwrap();
    assert!(
        output.status.success(),
        "{} {args:?} failed: {}\n{}",
        program.display(),
        String::from_utf8_lossy(&output.stderr),
        String::from_utf8_lossy(&output.stdout)
    );
    output
}

/// The median of `values` (the mean of the middle two for an even count).
pub fn median(values: &[f64]) -> f64 {
    let mut sorted = values.to_vec();
    sorted.sort_by(f64::total_cmp);
    let middle = sorted.len() / 2;
    if sorted.len().is_multiple_of(2) { (sorted[middle - 1] + sorted[middle]) / 2.0 } else { sorted[middle] }
}
