//! What the benchmarks share: the bundle they measure (`TRACE_BENCH_BUNDLE`, or the demonstration recorded
//! once into a benchmark's work directory) and its website's origin, copying and sizing bundle directories,
//! and the CPU time and memory of a browser's processes, one of which can be told from the others by the
//! page whose scripts it runs; how many rounds to run, the sides' order in each, one value per side
//! compared ([`PerSide`]), and the geometric mean of ratios.

use std::ffi::OsStr;
use std::ops::{Index, IndexMut};
use std::path::{Path, PathBuf};
use std::time::Duration;

use anyhow::{Context, Result};

use crate::browser::Build;
use crate::demo;
use crate::site::DemoSite;

/// Names a bundle to measure instead of recording the demonstration.
pub const BUNDLE_ENV: &str = "TRACE_BENCH_BUNDLE";
/// How many counted rounds a benchmark runs, instead of its default.
pub const ROUNDS_ENV: &str = "TRACE_BENCH_ROUNDS";

/// The number of counted rounds: [`ROUNDS_ENV`]'s, else `default`; at least one.
pub fn rounds(default: usize) -> Result<usize> {
    let rounds = match std::env::var(ROUNDS_ENV) {
        Ok(value) => value.parse().with_context(|| format!("{ROUNDS_ENV}={value} is not a number"))?,
        Err(_) => default,
    };
    anyhow::ensure!(rounds > 0, "{ROUNDS_ENV} must be at least 1");
    Ok(rounds)
}

/// The order of the sides in round `round`: each goes first in turn, so that a noisy moment of a shared
/// machine does not always fall on the same side.
pub fn rotated<T, const N: usize>(mut sides: [T; N], round: usize) -> [T; N] {
    sides.rotate_left(round % N);
    sides
}

/// The geometric mean of per-page ratios: each page counts alike, however long it takes to load.
pub fn geometric_mean(ratios: &[f64]) -> f64 {
    (ratios.iter().map(|ratio| ratio.ln()).sum::<f64>() / ratios.len() as f64).exp()
}

/// The bundle a benchmark measures: the one [`BUNDLE_ENV`] names, else the demonstration [`recorded_demo`]
/// keeps in `work`.
pub async fn demo_bundle(build: &Build, work: &Path) -> Result<PathBuf> {
    match std::env::var_os(BUNDLE_ENV) {
        Some(bundle) => {
            let bundle = in_workspace(&bundle);
            bundle.canonicalize().with_context(|| format!("{BUNDLE_ENV}: {}", bundle.display()))
        }
        None => recorded_demo(build, work).await,
    }
}

/// A path a benchmark was given: `cargo bench` runs benchmarks in the package's directory, so a relative
/// path is taken as the workspace's.
pub fn in_workspace(path: &OsStr) -> PathBuf {
    Path::new(env!("CARGO_MANIFEST_DIR")).join("..").join(path)
}

/// `scheme://host[:port]` of a URL.
pub fn origin(url: &str) -> Option<&str> {
    let after_scheme = url.find("://")? + 3;
    let end = url[after_scheme..].find('/').map_or(url.len(), |i| after_scheme + i);
    Some(&url[..end])
}

/// Records the demonstration (the demo shop stopped after) into `work`, once; later runs reuse it.
pub async fn recorded_demo(build: &Build, work: &Path) -> Result<PathBuf> {
    let kept = work.join("bundle");
    if kept.join("manifest.json").exists() {
        return Ok(kept);
    }
    std::fs::create_dir_all(work)?;
    let site = DemoSite::start(0)?;
    let data = tempfile::tempdir_in(work)?;
    eprintln!("recording the demonstration on {} (TRACE_BENCH_BUNDLE=DIR skips this)", site.url("/"));
    let demonstration = demo::record(build, &site, data.path()).await?;
    site.stop();
    let _ = std::fs::remove_dir_all(&kept);
    copy_dir(&demonstration.bundle, &kept)?;
    Ok(kept)
}

/// Copies the directory `from` to `to`, recursively.
pub fn copy_dir(from: &Path, to: &Path) -> Result<()> {
    std::fs::create_dir_all(to)?;
    for entry in std::fs::read_dir(from)? {
        let entry = entry?;
        let target = to.join(entry.file_name());
        if entry.file_type()?.is_dir() {
            copy_dir(&entry.path(), &target)?;
        } else {
            std::fs::copy(entry.path(), target)?;
        }
    }
    Ok(())
}

/// The HAR of an export made with `--embed-bodies` (every body inline, what Playwright's `recordHar`
/// embeds), and its size gzipped (the smallest a person could share it): `(HAR bytes, gzipped bytes)`.
pub fn embedded_har_sizes(embedded_zip: &Path) -> Result<(u64, u64)> {
    use std::io::Write as _;
    let har = trace_bundle::archive::Bundle::open(embedded_zip)?.read(trace_manifest::bundle::HAR_FILE)?;
    let mut gzip = flate2::write::GzEncoder::new(Vec::new(), flate2::Compression::default());
    gzip.write_all(&har)?;
    Ok((har.len() as u64, gzip.finish()?.len() as u64))
}

/// A recording's own time in seconds, its first event to its last (`events.jsonl` of the bundle directory
/// `bundle`): what an audit's or a re-run's time is set against.
pub fn recorded_seconds(bundle: &Path) -> Result<f64> {
    let events = std::fs::read_to_string(bundle.join("events.jsonl"))?;
    let times: Vec<f64> = events
        .lines()
        .filter_map(|line| serde_json::from_str::<serde_json::Value>(line).ok()?["ts"].as_f64())
        .collect();
    Ok(match (times.iter().copied().reduce(f64::min), times.iter().copied().reduce(f64::max)) {
        (Some(first), Some(last)) => (last - first) / 1000.0,
        _ => 0.0,
    })
}

/// The bytes of the files under `path`.
pub fn directory_size(path: &Path) -> Result<u64> {
    let mut total = 0;
    for entry in std::fs::read_dir(path)? {
        let entry = entry?;
        total += if entry.file_type()?.is_dir() { directory_size(&entry.path())? } else { entry.metadata()?.len() };
    }
    Ok(total)
}

/// The CPU time a process and every process below it have used so far, from Linux's `/proc`: what a
/// benchmark charges to a browser (its renderers, GPU and utility processes, the extension's service worker
/// and the native host it started). A process that has exited counts in the one that waited for it
/// (`cutime`, `cstime`); one not yet waited for is missed, which is rare and a few ticks at most.
pub fn cpu_time_of_tree(root: u32) -> Result<Duration> {
    let ticks_per_second = clock_ticks_per_second()?;
    let ticks: u64 = processes_below(root)?.iter().map(|process| process.cpu_ticks).sum();
    Ok(Duration::from_secs_f64(ticks as f64 / ticks_per_second))
}

/// The process below `root` (command line holding `marker`) that runs `page`'s scripts: the one whose CPU
/// time grows while the page spins for half a second, as long as it grew by most of that. Chromium names no
/// extension in its processes' command lines, and an extension's pages run in its extension's process, so
/// this tells two extensions' processes apart. `None` when no process clearly ran the spin.
pub async fn process_running(page: &chromiumoxide::Page, root: u32, marker: &str) -> Result<Option<u32>> {
    const SPIN_MS: u64 = 500;
    let ticks_of = || -> Result<Vec<(u32, u64)>> {
        let processes = processes_below(root)?;
        Ok(processes.iter().filter(|p| p.command_line.contains(marker)).map(|p| (p.pid, p.cpu_ticks)).collect())
    };
    let before = ticks_of()?;
    page.evaluate(format!("{{ const end = performance.now() + {SPIN_MS}; while (performance.now() < end); }}")).await?;
    let grown: Vec<(u32, u64)> = ticks_of()?
        .into_iter()
        .filter_map(|(pid, ticks)| {
            before.iter().find(|(known, _)| *known == pid).map(|(_, old)| (pid, ticks.saturating_sub(*old)))
        })
        .collect();
    let least = (clock_ticks_per_second()? * SPIN_MS as f64 / 1000.0 * 0.6) as u64;
    Ok(grown.into_iter().filter(|(_, ticks)| *ticks >= least).max_by_key(|(_, ticks)| *ticks).map(|(pid, _)| pid))
}

/// The peak resident memory (`VmHWM`) of process `pid` in bytes, if it still runs.
pub fn peak_memory_of(pid: u32) -> Option<u64> {
    let status = std::fs::read_to_string(format!("/proc/{pid}/status")).ok()?;
    let line = status.lines().find(|line| line.starts_with("VmHWM:"))?;
    let kib: u64 = line.trim_start_matches("VmHWM:").trim().trim_end_matches("kB").trim().parse().ok()?;
    Some(kib * 1024)
}

/// The peak resident memory (`VmHWM`) of each process below `root` (itself included) whose command line
/// contains `marker`, in bytes, largest first: `trace-host`, say, or `--extension-process` for the
/// process of the extension's service worker.
pub fn peak_memory_below(root: u32, marker: &str) -> Result<Vec<u64>> {
    let mut peaks: Vec<u64> = processes_below(root)?
        .iter()
        .filter(|process| process.command_line.contains(marker))
        .filter_map(|process| peak_memory_of(process.pid))
        .collect();
    peaks.sort_unstable_by(|a, b| b.cmp(a));
    Ok(peaks)
}

struct Process {
    pid: u32,
    command_line: String,
    cpu_ticks: u64,
}

/// `root` and every process below it, as `/proc` lists them now.
fn processes_below(root: u32) -> Result<Vec<Process>> {
    let mut all = Vec::new();
    for entry in std::fs::read_dir("/proc").context("cannot read /proc")?.flatten() {
        let Some(pid) = entry.file_name().to_str().and_then(|name| name.parse::<u32>().ok()) else { continue };
        // Gone since the listing: nothing to count.
        let Ok(stat) = std::fs::read_to_string(entry.path().join("stat")) else { continue };
        // After the command's closing parenthesis (a command may hold spaces and parentheses): the parent is
        // field 4, and utime, stime, cutime, cstime fields 14 to 17.
        let Some((_, rest)) = stat.rsplit_once(')') else { continue };
        let fields: Vec<&str> = rest.split_whitespace().collect();
        let number = |field: usize| fields.get(field - 3).and_then(|v| v.parse::<u64>().ok()).unwrap_or(0);
        let command_line = std::fs::read(entry.path().join("cmdline")).unwrap_or_default();
        let command_line = String::from_utf8_lossy(&command_line).replace('\0', " ");
        let cpu_ticks = number(14) + number(15) + number(16) + number(17);
        all.push((number(4) as u32, Process { pid, command_line, cpu_ticks }));
    }
    let mut in_tree = std::collections::BTreeSet::from([root]);
    // Parents nearly always come before their children in pid order; repeat until nothing joins.
    loop {
        let before = in_tree.len();
        for (parent, process) in &all {
            if in_tree.contains(parent) {
                in_tree.insert(process.pid);
            }
        }
        if in_tree.len() == before {
            break;
        }
    }
    Ok(all.into_iter().map(|(_, process)| process).filter(|process| in_tree.contains(&process.pid)).collect())
}

/// `sysconf(_SC_CLK_TCK)`, the unit of `/proc`'s CPU times, as `getconf` tells it.
/// Asked once: the benchmark reads CPU times twice per page load.
fn clock_ticks_per_second() -> Result<f64> {
    static TICKS: std::sync::OnceLock<f64> = std::sync::OnceLock::new();
    if let Some(&ticks) = TICKS.get() {
        return Ok(ticks);
    }
    let output = std::process::Command::new("getconf").arg("CLK_TCK").output().context("cannot run getconf")?;
    let ticks =
        String::from_utf8_lossy(&output.stdout).trim().parse().context("getconf CLK_TCK did not give a number")?;
    Ok(*TICKS.get_or_init(|| ticks))
}

/// One value for each of the `N` sides a benchmark compares (a baseline and the ways it measures), indexed
/// by the side: a benchmark's own `Side` enum converts into its position.
#[derive(Debug, Clone)]
pub struct PerSide<T, const N: usize>(pub [T; N]);

impl<T: Default, const N: usize> Default for PerSide<T, N> {
    fn default() -> Self {
        PerSide(std::array::from_fn(|_| T::default()))
    }
}

impl<T, S: Into<usize>, const N: usize> Index<S> for PerSide<T, N> {
    type Output = T;
    fn index(&self, side: S) -> &T {
        &self.0[side.into()]
    }
}

impl<T, S: Into<usize>, const N: usize> IndexMut<S> for PerSide<T, N> {
    fn index_mut(&mut self, side: S) -> &mut T {
        &mut self.0[side.into()]
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn every_side_goes_first_once_in_as_many_rounds_as_there_are_sides() {
        let firsts: Vec<char> = (0..3).map(|round| rotated(['a', 'b', 'c'], round)[0]).collect();
        assert_eq!(firsts, ['a', 'b', 'c']);
        assert_eq!(rotated(['a', 'b', 'c'], 4), ['b', 'c', 'a'], "the order comes back after three rounds");
    }

    #[test]
    fn the_geometric_mean_weighs_a_page_twice_as_slow_as_one_twice_as_fast() {
        assert!((geometric_mean(&[2.0, 0.5]) - 1.0).abs() < 1e-12);
        assert!((geometric_mean(&[4.0, 1.0]) - 2.0).abs() < 1e-12);
    }
}
