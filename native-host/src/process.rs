//! `trace-host process`: derives from a finished bundle the files that make it a task environment, and
//! writes them into it: `trajectory.json` (the demonstration as tool calls, with secrets as placeholders),
//! `credentials.json` (the secrets), `checkpoints.json` (progress states with checkable predicates) and
//! `ignored.json` (requests replay may fail at once). What they say is derived by
//! [`trace_analysis::postprocess`]; their formats are [`trace_manifest::postprocess`]'s.
//!
//! Then, unless told not to, the checkpoints are audited: `trace-replay audit --prune` (beside this
//! binary, or `TRACE_REPLAY`) replays the bundle offline and keeps only the checkpoints that tell the
//! person's demonstration from an agent doing nothing and from demonstrations that miss a step; its
//! `checkpoints.json` replaces the rules' and its `audit.json` joins the bundle, its verdict in
//! `manifest.json`. With `--llm MODEL` the audit also asks a model for checkpoints, kept only if they
//! discriminate. Without a Chromium or `trace-replay` the audit is skipped, and the report says why.
//!
//! Every file is written under a temporary name and renamed into place, then `manifest.json` is rewritten
//! with them in its index, so that the bundle still validates. For a task of the data directory the files
//! are also recorded in `tasks.db` (so that a later finalize indexes them too) with the time of processing.
//! Processing again replaces them; processing without an audit removes an earlier `audit.json`, which
//! spoke of other checkpoints.

use std::path::{Path, PathBuf};
use std::process::Stdio;

use anyhow::{Context, Result, bail};
use trace_analysis::evidence::Evidence;
use trace_analysis::postprocess::PostProcessed;
use trace_bundle::archive::{Bundle, parse_manifest};
use trace_manifest::audit::{AUDIT_FILE, Audit};
use trace_manifest::bundle::{self, BundleManifest, FileEntry};
use trace_manifest::postprocess::{
    self, CHECKPOINTS_FILE, CREDENTIALS_FILE, Checkpoint, IGNORED_FILE, TRAJECTORY_FILE,
};
use trace_manifest::report::{ProcessAudit, ProcessReport};
use trace_manifest::task::TaskId;

use crate::tasks::{Purpose, TaskBundle, TaskStore};

/// Names the `trace-replay` that audits checkpoints, instead of the one beside `trace-host` or on `PATH`.
pub const TRACE_REPLAY_ENV: &str = "TRACE_REPLAY";

/// How `process` runs.
#[derive(Debug, Clone, Default)]
pub struct ProcessOptions {
    /// Audit the checkpoints (where `trace-replay` and a Chromium are found).
    pub audit: bool,
    /// A model the audit asks for checkpoints too (`--llm`), with its cache.
    pub llm: Option<String>,
    pub llm_cache: Option<PathBuf>,
}

impl ProcessOptions {
    /// Processing on the way to something else (an export, the review page): no audit.
    pub fn without_audit() -> ProcessOptions {
        ProcessOptions::default()
    }
}

/// Derives the four files' content from a bundle (directory or zip), writing nothing.
pub fn derive(bundle: &mut Bundle) -> Result<(PostProcessed, Evidence)> {
    let manifest = bundle.manifest()?;
    let evidence = Evidence::load_recording(bundle)?;
    let derived = trace_analysis::postprocess::derive(&manifest.task, &evidence);
    Ok((derived, evidence))
}

/// Processes a task of the data directory, finalizing its bundle first if need be.
pub fn process_task(store: &TaskStore, task_id: &TaskId, options: &ProcessOptions) -> Result<ProcessReport> {
    process_task_bundle(&store.bundle_for(task_id, Purpose::Process)?, options)
}

/// Processes a task's finalized bundle, held under its lock, and records the files written in `tasks.db`.
pub fn process_task_bundle(bundle: &TaskBundle<'_>, options: &ProcessOptions) -> Result<ProcessReport> {
    let (mut report, written) = process_dir(bundle.dir(), options)?;
    // An `audit.json` not written again spoke of other checkpoints.
    let forgotten: &[&str] = if written.iter().any(|entry| entry.path == AUDIT_FILE) { &[] } else { &[AUDIT_FILE] };
    bundle.record_processed(&written, forgotten)?;
    report.recorded = true;
    Ok(report)
}

/// Processes a bundle directory, whether or not it belongs to a data directory. A directory that is the
/// capture directory of a task in `store` is processed as that task.
pub fn process_path(path: &Path, store: Option<&TaskStore>, options: &ProcessOptions) -> Result<ProcessReport> {
    if !path.is_dir() {
        bail!(
            "{} is not a bundle directory; process writes into one (unzip the bundle, or `trace-host import` it)",
            path.display()
        );
    }
    if let Some(store) = store {
        let mut bundle = Bundle::open(path).with_context(|| format!("cannot open the bundle {}", path.display()))?;
        let task_id = bundle.manifest()?.task.id;
        let same = |a: &Path, b: &Path| a.canonicalize().ok().is_some_and(|a| Some(a) == b.canonicalize().ok());
        if same(path, &store.data().capture(&task_id)) && store.task(&task_id)?.is_some() {
            return process_task(store, &task_id, options);
        }
    }
    Ok(process_dir(path, options)?.0)
}

/// Writes the derived files into a bundle directory and adds them to its index; returns the report and the
/// index entries written.
fn process_dir(dir: &Path, options: &ProcessOptions) -> Result<(ProcessReport, Vec<FileEntry>)> {
    let mut bundle = Bundle::open(dir).with_context(|| format!("cannot open the bundle {}", dir.display()))?;
    let (derived, _) = derive(&mut bundle)?;
    let manifest_bytes = std::fs::read(dir.join(bundle::MANIFEST_FILE))
        .with_context(|| format!("{} has no manifest.json: it is not a finished bundle", dir.display()))?;
    let mut manifest = parse_manifest(&manifest_bytes)?;

    let mut written = vec![
        write_json(dir, TRAJECTORY_FILE, &derived.trajectory)?,
        write_json(dir, CREDENTIALS_FILE, &derived.credentials)?,
        write_json(dir, CHECKPOINTS_FILE, &derived.checkpoints)?,
        write_json(dir, IGNORED_FILE, &derived.ignored)?,
    ];
    // An earlier audit spoke of other checkpoints.
    remove_if_there(&dir.join(AUDIT_FILE))?;
    manifest.audit = None;
    let index = |manifest: &mut BundleManifest, written: &[FileEntry]| {
        manifest.files.retain(|entry| !postprocess::FILES.contains(&entry.path.as_str()) && entry.path != AUDIT_FILE);
        manifest.files.extend(written.iter().cloned());
        manifest.files.sort();
    };
    index(&mut manifest, &written);
    write_manifest(dir, &manifest)?;

    let mut checkpoints = derived.checkpoints.len();
    let audit = if options.audit {
        match audit(dir, &manifest.task.id, options)? {
            Audited::Skipped(reason) => ProcessAudit::Skipped { reason },
            Audited::Done(audit, kept) => {
                checkpoints = kept.len();
                written.retain(|entry| entry.path != CHECKPOINTS_FILE);
                written.push(write_json(dir, CHECKPOINTS_FILE, &kept)?);
                written.push(write_json(dir, AUDIT_FILE, &audit)?);
                manifest.audit = Some(audit.summary());
                index(&mut manifest, &written);
                write_manifest(dir, &manifest)?;
                ProcessAudit::Audited { valid: audit.valid, dropped: audit.dropped.len(), problems: audit.problems }
            }
        }
    } else if options.llm.is_some() {
        bail!("--llm proposes checkpoints for the audit to judge: it cannot go with --no-audit");
    } else {
        ProcessAudit::NotAsked
    };

    let report = ProcessReport {
        task_id: manifest.task.id.clone(),
        bundle: dir.to_owned(),
        tool_calls: derived.trajectory.tool_calls.len(),
        credentials: derived.credentials.len(),
        checkpoints,
        ignored: derived.ignored.len(),
        files: written.iter().map(|entry| entry.path.clone()).collect(),
        recorded: false,
        audit,
    };
    Ok((report, written))
}

/// What came of running the audit.
enum Audited {
    Skipped(String),
    Done(Audit, Vec<Checkpoint>),
}

/// Runs `trace-replay audit --prune` on the bundle `dir` into a temporary directory and reads what it
/// wrote. Its stdout is left unread (in native messaging mode this process's stdout is the protocol); its
/// log goes to this process's stderr.
fn audit(dir: &Path, task_id: &TaskId, options: &ProcessOptions) -> Result<Audited> {
    let Some(replay) = trace_replay_binary() else {
        return Ok(Audited::Skipped(format!(
            "trace-replay is neither beside trace-host nor on PATH (or name it with {TRACE_REPLAY_ENV})"
        )));
    };
    let out = tempfile::Builder::new()
        .prefix(".audit-")
        .tempdir_in(dir.parent().unwrap_or(dir))
        .or_else(|_| tempfile::tempdir())
        .context("cannot make a directory for the audit")?;
    let mut command = std::process::Command::new(&replay);
    command.arg("audit").arg(dir).arg("--prune").arg("--json").arg("--out").arg(out.path());
    if let Some(model) = &options.llm {
        command.arg("--llm").arg(model);
    }
    if let Some(cache) = &options.llm_cache {
        command.arg("--llm-cache").arg(cache);
    }
    let status = command
        .stdin(Stdio::null())
        .stdout(Stdio::null())
        .stderr(Stdio::inherit())
        .status()
        .with_context(|| format!("cannot run {}", replay.display()))?;
    match status.code() {
        Some(0 | 1) => {}
        Some(3) => return Ok(Audited::Skipped("there is no Chromium to replay the bundle in".to_owned())),
        _ => bail!("the audit failed ({} {status}; its log is above)", replay.display()),
    }
    let task_dir = out.path().join(task_id.as_str());
    let read = |name: &str| -> Result<Vec<u8>> {
        std::fs::read(task_dir.join(name)).with_context(|| format!("the audit wrote no {name}"))
    };
    let audit: Audit = serde_json::from_slice(&read(AUDIT_FILE)?).context("the audit's audit.json does not parse")?;
    let kept: Vec<Checkpoint> =
        serde_json::from_slice(&read(CHECKPOINTS_FILE)?).context("the audit's checkpoints.json does not parse")?;
    Ok(Audited::Done(audit, kept))
}

/// The `trace-replay` to run: `TRACE_REPLAY`, else the one beside this binary, else one on `PATH`.
fn trace_replay_binary() -> Option<PathBuf> {
    if let Some(path) = std::env::var_os(TRACE_REPLAY_ENV).filter(|value| !value.is_empty()) {
        return Some(PathBuf::from(path));
    }
    let name = format!("trace-replay{}", std::env::consts::EXE_SUFFIX);
    let beside = std::env::current_exe().ok().and_then(|exe| exe.parent().map(|dir| dir.join(&name)));
    let on_path = std::env::var_os("PATH")
        .map(|paths| std::env::split_paths(&paths).map(|dir| dir.join(&name)).collect::<Vec<_>>())
        .unwrap_or_default();
    beside.into_iter().chain(on_path).find(|path| path.is_file())
}

fn remove_if_there(path: &Path) -> Result<()> {
    match std::fs::remove_file(path) {
        Err(error) if error.kind() != std::io::ErrorKind::NotFound => {
            Err(error).with_context(|| format!("cannot remove {}", path.display()))
        }
        _ => Ok(()),
    }
}

/// Rewrites the bundle's `manifest.json`, as finalizing writes it (pretty, through a temporary name).
fn write_manifest(dir: &Path, manifest: &BundleManifest) -> Result<()> {
    trace_store::atomic::write(&dir.join(bundle::MANIFEST_FILE), |out| {
        Ok(serde_json::to_writer_pretty(out, manifest)?)
    })?;
    Ok(())
}

fn write_json(dir: &Path, name: &str, value: &impl serde::Serialize) -> Result<FileEntry> {
    let (size, sha256) = trace_store::atomic::write_json(&dir.join(name), value)?;
    Ok(FileEntry { path: name.to_owned(), size, sha256 })
}
