//! `trace-host process`: derives from a finished bundle the files that make it a task environment, and
//! writes them into it: `trajectory.json` (the demonstration as tool calls, with secrets as placeholders),
//! `credentials.json` (the secrets), `checkpoints.json` (progress states with checkable predicates) and
//! `ignored.json` (requests replay may fail at once). What they say is derived by
//! [`trace_analysis::postprocess`]; their formats are [`trace_manifest::postprocess`]'s.
//!
//! Every file is written under a temporary name and renamed into place, then `manifest.json` is rewritten
//! with them in its index, so that the bundle still validates. For a task of the data directory the files
//! are also recorded in `tasks.db` (so that a later finalize indexes them too) with the time of processing.
//! Processing again replaces them. The checkpoints are chosen by fixed rules; there is no model-based
//! selection (`--llm`) yet.

use std::path::Path;

use anyhow::{Context, Result, bail};
use rusqlite::Connection;
use trace_analysis::evidence::Evidence;
use trace_analysis::postprocess::PostProcessed;
use trace_manifest::archive::{Bundle, parse_manifest};
use trace_manifest::bundle::{self, FileEntry};
use trace_manifest::postprocess::{self, CHECKPOINTS_FILE, CREDENTIALS_FILE, IGNORED_FILE, TRAJECTORY_FILE};
use trace_manifest::report::ProcessReport;
use trace_manifest::task::TaskId;

use crate::db;
use crate::finalize;
use crate::paths::DataDir;

/// Derives the four files' content from a bundle (directory or zip), writing nothing.
pub fn derive(bundle: &mut Bundle) -> Result<(PostProcessed, Evidence)> {
    let manifest = bundle.manifest()?;
    let evidence = Evidence::load(bundle)?;
    let derived = trace_analysis::postprocess::derive(&manifest.task, &evidence);
    Ok((derived, evidence))
}

/// Processes a task of the data directory, finalizing its bundle first if need be.
pub fn process_task(conn: &Connection, data: &DataDir, task_id: &TaskId) -> Result<ProcessReport> {
    let (_, dir, _lock) = finalize::locked_bundle(conn, data, task_id, "process")?;
    process_locked(conn, task_id, &dir)
}

/// Processes the finalized bundle `dir` of a task whose lock the caller holds, and records it in `tasks.db`.
pub fn process_locked(conn: &Connection, task_id: &TaskId, dir: &Path) -> Result<ProcessReport> {
    let (mut report, written) = process_dir(dir)?;
    let transaction = conn.unchecked_transaction()?;
    for entry in &written {
        db::record_derived_file(&transaction, task_id, &entry.path, entry.size, &entry.sha256)?;
    }
    db::set_processed(&transaction, task_id, trace_manifest::time_fmt::now_ms())?;
    transaction.commit()?;
    report.recorded = true;
    Ok(report)
}

/// Processes a bundle directory, whether or not it belongs to a data directory. A directory that is the
/// capture directory of a task in `data` is processed as that task.
pub fn process_path(path: &Path, data: Option<(&Connection, &DataDir)>) -> Result<ProcessReport> {
    if !path.is_dir() {
        bail!(
            "{} is not a bundle directory; process writes into one (unzip the bundle, or `trace-host import` it)",
            path.display()
        );
    }
    if let Some((conn, data)) = data {
        let mut bundle = Bundle::open(path).with_context(|| format!("cannot open the bundle {}", path.display()))?;
        let task_id = bundle.manifest()?.task.id;
        let same = |a: &Path, b: &Path| a.canonicalize().ok().is_some_and(|a| Some(a) == b.canonicalize().ok());
        if same(path, &data.capture(&task_id)) && db::task(conn, &task_id)?.is_some() {
            return process_task(conn, data, &task_id);
        }
    }
    Ok(process_dir(path)?.0)
}

/// Writes the derived files into a bundle directory and adds them to its index; returns the report and the
/// index entries written.
fn process_dir(dir: &Path) -> Result<(ProcessReport, Vec<FileEntry>)> {
    let mut bundle = Bundle::open(dir).with_context(|| format!("cannot open the bundle {}", dir.display()))?;
    let (derived, _) = derive(&mut bundle)?;
    let manifest_bytes = std::fs::read(dir.join(bundle::MANIFEST_FILE))
        .with_context(|| format!("{} has no manifest.json: it is not a finished bundle", dir.display()))?;
    let mut manifest = parse_manifest(&manifest_bytes)?;

    let written = vec![
        write_json(dir, TRAJECTORY_FILE, &derived.trajectory)?,
        write_json(dir, CREDENTIALS_FILE, &derived.credentials)?,
        write_json(dir, CHECKPOINTS_FILE, &derived.checkpoints)?,
        write_json(dir, IGNORED_FILE, &derived.ignored)?,
    ];
    manifest.files.retain(|entry| !postprocess::FILES.contains(&entry.path.as_str()));
    manifest.files.extend(written.iter().cloned());
    manifest.files.sort();
    finalize::write_generated(dir, bundle::MANIFEST_FILE, |out| Ok(serde_json::to_writer_pretty(out, &manifest)?))?;

    let report = ProcessReport {
        task_id: manifest.task.id.clone(),
        bundle: dir.to_owned(),
        tool_calls: derived.trajectory.tool_calls.len(),
        credentials: derived.credentials.len(),
        checkpoints: derived.checkpoints.len(),
        ignored: derived.ignored.len(),
        files: written.iter().map(|entry| entry.path.clone()).collect(),
        recorded: false,
    };
    Ok((report, written))
}

fn write_json(dir: &Path, name: &str, value: &impl serde::Serialize) -> Result<FileEntry> {
    let (size, sha256) = crate::atomic::write_json(&dir.join(name), value)?;
    Ok(FileEntry { path: name.to_owned(), size, sha256 })
}
