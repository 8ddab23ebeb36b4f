//! Turns a task's rows and files into a finished bundle directory: `events.jsonl`, `recording.har`,
//! `storage.json`, and last `manifest.json` with the index of every file. Runs when a task stops, and again
//! on export for a task that was interrupted (so the bundle holds everything acknowledged so far). Only the
//! store calls it, under the task's lock ([`super::TaskStore`]).
//!
//! Every generated file is written to a temporary name and renamed into place, and `manifest.json` comes
//! last: a bundle with a manifest is complete, whatever happened while it was written. The files are not
//! fsynced: they are derived from `tasks.db` and written again whenever the manifest is missing or does
//! not parse (an fsync here would also wait for every body the task wrote, which doubled the time to stop).

use std::io::Write;
use std::path::{Path, PathBuf};

use anyhow::{Context, Result, bail};
use rusqlite::Connection;
use trace_analysis::har;

use trace_manifest::audit::{AUDIT_FILE, Audit, AuditSummary};
use trace_manifest::bundle::{
    self, BundleManifest, Counts, FileEntry, ProducerInfo, StorageFile, TaskInfo, TimedStorageSnapshot,
};
use trace_manifest::event::{EventKind, EventRecord};
use trace_manifest::har::Creator;
use trace_manifest::task::{TaskId, TaskStatus};
use trace_manifest::time_fmt::rfc3339_from_millis;

use super::db::{self, TaskRow};
use super::staging::recover_staged_files;
use crate::paths::{DataDir, PARTS_DIR};
use trace_store::atomic;

/// Writes the bundle of `task_id` into its capture directory and returns the directory.
pub(super) fn finalize(conn: &Connection, data: &DataDir, task_id: &TaskId) -> Result<PathBuf> {
    let task = db::task(conn, task_id)?.with_context(|| format!("no task {task_id}"))?;
    if task.status == TaskStatus::Discarded {
        bail!("task {task_id} was discarded");
    }
    let dir = data.capture(task_id);
    std::fs::create_dir_all(&dir).with_context(|| format!("cannot create {}", dir.display()))?;
    recover_staged_files(conn, data, task_id)?;

    let mut index = Vec::new();
    for (path, size, sha256) in db::files(conn, task_id)? {
        let on_disk = std::fs::metadata(dir.join(&path)).map(|m| m.len()).ok();
        if on_disk != Some(size) {
            bail!("{} of task {task_id} is missing or damaged ({on_disk:?} bytes on disk, {size} recorded)", path);
        }
        index.push(FileEntry { path, size, sha256 });
    }

    // One pass over the stored events: each line is written as stored and parsed for the HAR and storage.
    let mut events: Vec<EventRecord> = Vec::new();
    index.push(write_generated(&dir, bundle::EVENTS_FILE, |out| {
        db::for_each_event(conn, task_id, |json| {
            out.write_all(json.as_bytes())?;
            out.write_all(b"\n")?;
            events.push(serde_json::from_str(json).context("a stored event does not parse")?);
            Ok(())
        })
    })?);
    let har = har::build(producer_creator(), browser_creator(&task), &events);
    index.push(write_generated(&dir, bundle::HAR_FILE, |out| Ok(serde_json::to_writer(out, &har)?))?);
    let storage = storage_file(&events);
    index.push(write_generated(&dir, bundle::STORAGE_FILE, |out| Ok(serde_json::to_writer_pretty(out, &storage)?))?);
    index.sort();

    let mut manifest = bundle_manifest(&task, &events, index);
    manifest.audit = audit_summary(&dir, &manifest.files);
    write_generated(&dir, bundle::MANIFEST_FILE, |out| Ok(serde_json::to_writer_pretty(out, &manifest)?))?;

    if task.status == TaskStatus::Stopped {
        // Bodies still incomplete when the task stopped can never complete.
        let parts = dir.join(PARTS_DIR);
        if parts.exists() {
            std::fs::remove_dir_all(&parts).with_context(|| format!("cannot clean {}", parts.display()))?;
        }
    }
    Ok(dir)
}

/// The verdict of the bundle's `audit.json`, when the index holds one (`trace-host process` wrote it), for
/// `manifest.json` to carry.
fn audit_summary(dir: &Path, files: &[FileEntry]) -> Option<AuditSummary> {
    if !files.iter().any(|entry| entry.path == AUDIT_FILE) {
        return None;
    }
    let bytes = std::fs::read(dir.join(AUDIT_FILE)).ok()?;
    serde_json::from_slice::<Audit>(&bytes).ok().map(|audit| audit.summary())
}

/// Has this task's bundle been written (and not gone stale since)? Stopped tasks are finalized once; an
/// interrupted task may grow if its recording resumes, so it is finalized again whenever it is exported.
/// An imported bundle is kept as it came.
pub(super) fn needs_finalizing(task: &TaskRow, dir: &Path) -> bool {
    let written = std::fs::read(dir.join(bundle::MANIFEST_FILE))
        .is_ok_and(|bytes| trace_bundle::archive::parse_manifest(&bytes).is_ok());
    !written || (task.status != TaskStatus::Stopped && !task.imported)
}

fn bundle_manifest(task: &TaskRow, events: &[EventRecord], files: Vec<FileEntry>) -> BundleManifest {
    let last_event =
        events.iter().map(|r| r.event.ts).fold(None, |max: Option<f64>, ts| Some(max.map_or(ts, |m| m.max(ts))));
    let ended_at = task.ended_at.or(last_event);
    BundleManifest {
        format: bundle::FORMAT_NAME.to_owned(),
        format_version: trace_manifest::FORMAT_VERSION,
        task: TaskInfo {
            id: task.id.clone(),
            source: task.source.clone(),
            task_type: task.task_type,
            description: task.description.clone(),
            website: task.website.clone(),
            status: task.status,
            answer: task.answer.clone(),
        },
        recorder: task.recorder.clone(),
        producer: ProducerInfo { name: "trace-host".to_owned(), version: env!("CARGO_PKG_VERSION").to_owned() },
        started_at: rfc3339_from_millis(task.started_at),
        ended_at: ended_at.map(rfc3339_from_millis),
        duration_seconds: ended_at.map_or(0.0, |end| ((end - task.started_at) / 1000.0).max(0.0)),
        counts: Counts::of(events),
        files,
        audit: None,
    }
}

fn storage_file(events: &[EventRecord]) -> StorageFile {
    let snapshots = events
        .iter()
        .filter_map(|record| match &record.event.kind {
            EventKind::Storage(snapshot) => {
                Some(TimedStorageSnapshot { time: rfc3339_from_millis(record.event.ts), snapshot: snapshot.clone() })
            }
            _ => None,
        })
        .collect();
    StorageFile { snapshots }
}

fn producer_creator() -> Creator {
    Creator { name: "trace-host".to_owned(), version: env!("CARGO_PKG_VERSION").to_owned() }
}

/// "Chromium 156.0.8078.73" → name and version, for the HAR's `browser`.
fn browser_creator(task: &TaskRow) -> Option<Creator> {
    let browser = task.recorder.browser.as_deref()?.trim();
    let (name, version) = browser.rsplit_once(' ').unwrap_or((browser, ""));
    Some(Creator { name: name.to_owned(), version: version.to_owned() })
}

/// Writes one generated file of the bundle directory `dir` through a temporary name, returning its index
/// entry.
fn write_generated(dir: &Path, name: &str, write: impl FnOnce(&mut dyn Write) -> Result<()>) -> Result<FileEntry> {
    let (size, sha256) = atomic::write(&dir.join(name), write)?;
    Ok(FileEntry { path: name.to_owned(), size, sha256 })
}
