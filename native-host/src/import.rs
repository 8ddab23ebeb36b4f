//! `trace-host import`: adds a bundle made elsewhere to the local data directory. The zip is opened with
//! [`Bundle::open`], which refuses unsafe paths, links and size bombs before anything is extracted; the
//! bundle must then pass validation; only then is it extracted, under a temporary name that is renamed
//! into `captures/` once complete, and registered in `tasks.db`. The events are read a line at a time,
//! in validation and again into the database, so that memory stays bounded however many a bundle holds.

use std::fs::File;
use std::io::BufWriter;
use std::path::Path;

use anyhow::{Context, Result, bail};
use indicatif::HumanBytes;
use trace_bundle::archive::{self, Bundle, ZipLimits};
use trace_manifest::bundle;
use trace_manifest::report::ImportReport;
use trace_manifest::task::TaskStart;
use trace_manifest::time_fmt::millis_from_rfc3339;

use crate::tasks::TaskStore;

pub fn import(store: &TaskStore, zip_path: &Path, limits: ZipLimits) -> Result<ImportReport> {
    let data = store.data();
    let mut source = Bundle::open_with_limits(zip_path, limits)
        .with_context(|| format!("refusing to import {}", zip_path.display()))?;
    let report = archive::validate(&mut source, &mut |_| {})?;
    if !report.is_valid() {
        let problems: Vec<String> = report.problems.iter().map(|p| format!("  {}: {}", p.file, p.message)).collect();
        bail!("{} is not a valid bundle:\n{}", zip_path.display(), problems.join("\n"));
    }
    let manifest = source.manifest()?;
    let task_id = manifest.task.id.clone();
    if store.task(&task_id)?.is_some() {
        bail!("a task {task_id} already exists here; `trace-host tasks` lists it");
    }

    let target = data.capture(&task_id);
    if target.exists() {
        bail!("{} already exists but is not a known task; move it away first", target.display());
    }
    let staging = data.root().join("captures").join(format!(".import-{task_id}"));
    if staging.exists() {
        std::fs::remove_dir_all(&staging)?;
    }
    let mut bytes = 0;
    let mut names: Vec<String> = manifest.files.iter().map(|f| f.path.clone()).collect();
    names.push(bundle::MANIFEST_FILE.to_owned());
    let sizes = source.files()?;
    let needed = names.iter().filter_map(|name| sizes.get(name)).sum();
    check_free_space(needed, available_space(data.root()))?;
    for name in &names {
        let path = staging.join(name);
        std::fs::create_dir_all(path.parent().expect("inside staging"))?;
        let mut out = BufWriter::new(File::create(&path).with_context(|| format!("cannot create {}", path.display()))?);
        bytes += source.copy_to(name, &mut out)?;
    }

    let start = TaskStart {
        task_id: task_id.clone(),
        source: manifest.task.source.clone(),
        task_type: manifest.task.task_type,
        description: manifest.task.description.clone(),
        website: manifest.task.website.clone(),
        recorder: manifest.recorder.clone(),
        started_at: millis_from_rfc3339(&manifest.started_at).unwrap_or(0.0),
    };
    let ended = manifest.ended_at.as_deref().and_then(millis_from_rfc3339).unwrap_or(start.started_at);
    let answer = manifest.task.answer.as_deref().map(|answer| (answer, ended));
    let registering = store.begin_import(&start, manifest.task.status, answer)?;
    let mut events: usize = 0;
    source.for_each_event(|mut record| {
        events += 1;
        registering.add_event(&mut record)
    })?;
    // The generated files are written anew whenever the bundle is finalized; only content is recorded.
    let generated = [bundle::EVENTS_FILE, bundle::HAR_FILE, bundle::STORAGE_FILE];
    for file in manifest.files.iter().filter(|f| !generated.contains(&f.path.as_str())) {
        registering.record_file(file)?;
    }
    std::fs::rename(&staging, &target).with_context(|| format!("cannot move the import into {}", target.display()))?;
    if let Err(error) = registering.commit() {
        let _ = std::fs::remove_dir_all(&target);
        return Err(error.into());
    }
    Ok(ImportReport { task_id, files: names.len(), bytes, events })
}

/// Left free after an import, for the recordings and databases that go on being written.
const FREE_SPACE_RESERVE: u64 = 256 << 20;

/// Refuses an import that would fill the disk: the zip's sizes were checked against the limits, but a
/// small zip within them can still expand to gigabytes, and a full disk would fail the recordings too.
/// `available` is what the file system has free, where the platform says.
fn check_free_space(needed: u64, available: Option<u64>) -> Result<()> {
    let Some(available) = available else { return Ok(()) };
    if needed.saturating_add(FREE_SPACE_RESERVE) > available {
        bail!(
            "the bundle expands to {} but only {} is free where the data directory is ({} kept free); \
             free some space first",
            HumanBytes(needed),
            HumanBytes(available),
            HumanBytes(FREE_SPACE_RESERVE)
        );
    }
    Ok(())
}

/// Bytes an unprivileged writer may still use on the file system holding `path`, where the platform says.
#[cfg(target_os = "linux")]
fn available_space(path: &Path) -> Option<u64> {
    let stats = rustix::fs::statvfs(path).ok()?;
    Some(stats.f_bavail.saturating_mul(stats.f_frsize))
}

#[cfg(not(target_os = "linux"))]
fn available_space(_path: &Path) -> Option<u64> {
    None
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn an_import_that_would_fill_the_disk_is_refused_and_says_how_much_it_needs() {
        let error = check_free_space(2 << 30, Some(1 << 30)).unwrap_err().to_string();
        assert!(error.contains("expands to 2.00 GiB") && error.contains("only 1.00 GiB is free"), "{error}");
        // The reserve counts: a bundle that fits only by eating it is refused too.
        assert!(check_free_space(900 << 20, Some(1 << 30)).is_err());
        assert!(check_free_space(100 << 20, Some(1 << 30)).is_ok());
        // Where the platform cannot say, the import goes on.
        assert!(check_free_space(u64::MAX, None).is_ok());
    }

    #[cfg(target_os = "linux")]
    #[test]
    fn the_free_space_of_a_real_directory_is_known() {
        let dir = tempfile::tempdir().unwrap();
        assert!(available_space(dir.path()).is_some_and(|bytes| bytes > 0));
    }
}
