//! What the benchmarks share: the demonstration recorded once into a benchmark's work directory, and copying
//! and sizing bundle directories.

use std::path::{Path, PathBuf};

use anyhow::Result;

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
