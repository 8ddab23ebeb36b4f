//! What the benchmarks share: the demonstration recorded once into a benchmark's work directory, copying
//! and sizing bundle directories, and the CPU time of a browser's processes.

use std::path::{Path, PathBuf};
use std::time::Duration;

use anyhow::{Context, Result};

use crate::browser::Build;
use crate::demo;
use crate::site::DemoSite;

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
    let mut parents = Vec::new();
    for entry in std::fs::read_dir("/proc").context("cannot read /proc")?.flatten() {
        let Some(pid) = entry.file_name().to_str().and_then(|name| name.parse::<u32>().ok()) else { continue };
        // Gone since the listing: nothing to count.
        let Ok(stat) = std::fs::read_to_string(entry.path().join("stat")) else { continue };
        // After the command's closing parenthesis (a command may hold spaces and parentheses): the state is
        // field 3, the parent 4, and utime, stime, cutime, cstime fields 14 to 17.
        let Some((_, rest)) = stat.rsplit_once(')') else { continue };
        let fields: Vec<&str> = rest.split_whitespace().collect();
        let number = |field: usize| fields.get(field - 3).and_then(|v| v.parse::<u64>().ok()).unwrap_or(0);
        parents.push((pid, number(4) as u32, number(14) + number(15) + number(16) + number(17)));
    }
    let mut in_tree = std::collections::BTreeSet::from([root]);
    // Parents come before their children in pid order nearly always; repeat until nothing joins.
    loop {
        let before = in_tree.len();
        for &(pid, parent, _) in &parents {
            if in_tree.contains(&parent) {
                in_tree.insert(pid);
            }
        }
        if in_tree.len() == before {
            break;
        }
    }
    let ticks: u64 = parents.iter().filter(|(pid, ..)| in_tree.contains(pid)).map(|&(.., ticks)| ticks).sum();
    Ok(Duration::from_secs_f64(ticks as f64 / ticks_per_second))
}

/// `sysconf(_SC_CLK_TCK)`, the unit of `/proc`'s CPU times, as `getconf` tells it.
fn clock_ticks_per_second() -> Result<f64> {
    let output = std::process::Command::new("getconf").arg("CLK_TCK").output().context("cannot run getconf")?;
    String::from_utf8_lossy(&output.stdout).trim().parse().context("getconf CLK_TCK did not give a number")
}
