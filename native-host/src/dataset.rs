//! `trace-host dataset`: many recordings made into one dataset folder, in TRACE's layout or in
//! WebArena-Infinity's (both described in [`trace_manifest::dataset`]).
//!
//! Each bundle is validated, exported (redacted unless asked otherwise) to `bundles/<task_id>.zip`, and then
//! everything the dataset says about the task (trajectory, credentials, checkpoints, ignore list, the
//! browser-use history and its screenshots) is derived from that exported zip, so that the dataset can hold
//! nothing the zip does not. A bundle that fails validation or redaction is reported and skipped; the rest
//! of the dataset is still written.
//!
//! A dataset is for scoring agents, so a bundle whose checkpoints do not discriminate is skipped too
//! (unless `--allow-invalid`), naming the checkpoint and why: one whose audit (`audit.json`, by
//! `trace-host process`) failed, or, never audited, one where what the recording alone shows already
//! fails (a checkpoint that holds on the start page, or that the recording does not reach in order,
//! `trace_analysis::audit::static_problems`). Never-audited bundles are listed as such. The index (`tasks.jsonl` or `data/manifest.json`) is written last, under a
//! temporary name then renamed, so that an interrupted run never leaves an index that looks whole.

mod webarena;

use std::path::{Path, PathBuf};

use anyhow::{Context, Result, bail};
use trace_bundle::archive::{self, Bundle};
use trace_manifest::audit::ServingPath;
use trace_manifest::bundle;
use trace_manifest::dataset::{self as format, TaskLine, WebArenaEntry};
use trace_manifest::postprocess::{CHECKPOINTS_FILE, Checkpoint};
use trace_manifest::task::TaskId;

use crate::export::{self, ExportOptions};
use crate::redact::SuspectDecisions;
use crate::tasks::{Purpose, TaskStore};
use trace_analysis::evidence::Evidence;
use trace_analysis::postprocess::PostProcessed;
use trace_manifest::report::{DatasetFormat, DatasetReport, Skipped};

use crate::{process, progress};

#[derive(Debug, Clone)]
pub struct DatasetOptions {
    pub format: DatasetFormat,
    /// Redact every bundle (the default: a dataset is for sharing).
    pub redact: bool,
    /// What to do with values that look like secrets but no rule chose (a bundle with one undecided is
    /// reported and skipped).
    pub suspects: SuspectDecisions,
    /// Add bundles whose checkpoints failed their audit too (listed as invalid).
    pub allow_invalid: bool,
    pub progress: bool,
}

/// Where a task of the dataset comes from.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum Source {
    /// A task of the data directory.
    Task(TaskId),
    /// A bundle directory or zip.
    Bundle(PathBuf),
}

impl std::fmt::Display for Source {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        match self {
            Source::Task(task_id) => write!(f, "task {task_id}"),
            Source::Bundle(path) => write!(f, "{}", path.display()),
        }
    }
}

/// Turns the command line's arguments into sources: a bundle (directory with `manifest.json`, or a zip), a
/// folder of bundles (each zip and bundle directory directly inside it, in name order), or a task id of the
/// data directory.
pub fn sources(args: &[String], tasks: Option<&TaskStore>) -> Result<Vec<Source>> {
    let mut sources = Vec::new();
    for arg in args {
        let path = Path::new(arg);
        if is_bundle(path) {
            sources.push(Source::Bundle(path.to_owned()));
        } else if path.is_dir() {
            let mut found: Vec<PathBuf> = std::fs::read_dir(path)
                .with_context(|| format!("cannot list {}", path.display()))?
                .filter_map(|entry| entry.ok().map(|entry| entry.path()))
                .filter(|path| is_bundle(path))
                .collect();
            found.sort();
            if found.is_empty() {
                bail!("{} holds no bundle (no zip, no directory with a manifest.json)", path.display());
            }
            sources.extend(found.into_iter().map(Source::Bundle));
        } else if let Ok(task_id) = arg.parse::<TaskId>()
            && let Some(store) = tasks
            && store.task(&task_id)?.is_some()
        {
            sources.push(Source::Task(task_id));
        } else {
            bail!("{arg} is neither a bundle, a folder of bundles, nor a task of the data directory");
        }
    }
    Ok(sources)
}

fn is_bundle(path: &Path) -> bool {
    (path.is_dir() && path.join(bundle::MANIFEST_FILE).is_file())
        || (path.is_file() && path.extension().is_some_and(|extension| extension.eq_ignore_ascii_case("zip")))
}

/// Builds the dataset in `out`, which must not exist or be empty.
pub fn build(
    sources: &[Source],
    tasks: Option<&TaskStore>,
    out: &Path,
    options: &DatasetOptions,
) -> Result<DatasetReport> {
    if out.exists() && std::fs::read_dir(out)?.next().is_some() {
        bail!("{} exists and is not empty; a dataset is written into a new folder", out.display());
    }
    std::fs::create_dir_all(out.join(format::BUNDLES_DIR))
        .with_context(|| format!("cannot create {}", out.display()))?;
    let progress = progress::bar(
        sources.len() as u64,
        options.progress,
        "{spinner} dataset [{bar:30}] {pos}/{len} bundles ({eta}) {wide_msg}",
    );
    let mut report = DatasetReport {
        out: out.to_owned(),
        format: options.format,
        redacted: options.redact,
        tasks: vec![],
        skipped: vec![],
        invalid: vec![],
        unaudited: vec![],
        devtools_only: vec![],
    };
    let mut lines = Vec::new();
    let mut entries = Vec::new();
    for source in sources {
        progress.set_message(source.to_string());
        match add(source, tasks, out, options, &report.tasks) {
            Ok(added) => {
                report.tasks.push(added.task_id.clone());
                match added.validity {
                    Validity::Audited if !added.line.paths.contains(&ServingPath::Proxy) => {
                        report.devtools_only.push(added.task_id.clone())
                    }
                    Validity::Audited => {}
                    Validity::Unaudited => report.unaudited.push(added.task_id.clone()),
                    Validity::Invalid => report.invalid.push(added.task_id.clone()),
                }
                match options.format {
                    DatasetFormat::Trace => lines.push(added.line),
                    DatasetFormat::WebarenaInfinity => entries.push(added.webarena_entry(out)?),
                }
            }
            Err(error) => {
                tracing::debug!("skipped {source}: {error:#}");
                report.skipped.push(Skipped { source: source.to_string(), reason: format!("{error:#}") });
            }
        }
        progress.inc(1);
    }
    progress.finish_and_clear();
    match options.format {
        DatasetFormat::Trace => write_index(out, format::TASKS_FILE, |file| {
            for line in &lines {
                serde_json::to_writer(&mut *file, line)?;
                file.write_all(b"\n")?;
            }
            Ok(())
        })?,
        DatasetFormat::WebarenaInfinity => write_index(out, format::WEBARENA_MANIFEST_FILE, |file| {
            serde_json::to_writer_pretty(&mut *file, &entries)?;
            Ok(file.write_all(b"\n")?)
        })?,
    }
    Ok(report)
}

/// A task added to the dataset: its line, and what the other layout needs besides.
struct Added {
    task_id: TaskId,
    line: TaskLine,
    zip: PathBuf,
    derived: PostProcessed,
    evidence: Evidence,
    validity: Validity,
}

/// What is known of a bundle's checkpoints.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
enum Validity {
    /// Its audit found them discriminating.
    Audited,
    /// Never audited; the recording alone shows nothing wrong.
    Unaudited,
    /// They fail (added with `--allow-invalid`).
    Invalid,
}

impl Added {
    fn webarena_entry(&self, out: &Path) -> Result<WebArenaEntry> {
        webarena::write_task(self, out)
    }
}

fn add(
    source: &Source,
    tasks: Option<&TaskStore>,
    out: &Path,
    options: &DatasetOptions,
    already: &[TaskId],
) -> Result<Added> {
    // A task of the data directory is held under its lock, and processed first if it never was, as on export.
    let (mut bundle, _task_bundle) = match source {
        Source::Task(task_id) => {
            let store = tasks.context("task ids need the data directory")?;
            let (task_bundle, _) = export::processed_task_bundle(store, task_id, Purpose::AddToDataset)?;
            (Bundle::open(task_bundle.dir())?, Some(task_bundle))
        }
        Source::Bundle(path) => (Bundle::open(path).context("cannot open the bundle")?, None),
    };
    let validation = archive::validate(&mut bundle, &mut |_| {})?;
    if let Some(problem) = validation.problems.first() {
        let file = if problem.file.is_empty() { "bundle" } else { problem.file.as_str() };
        bail!("invalid bundle ({} problem(s); {file}: {})", validation.problems.len(), problem.message);
    }
    let task_id = bundle.manifest()?.task.id;
    if already.contains(&task_id) {
        bail!("task {task_id} is already in the dataset, from an earlier source");
    }
    let problems = checkpoint_problems(&mut bundle)?;
    let validity = match &problems {
        Ok(audited) if *audited => Validity::Audited,
        Ok(_) => Validity::Unaudited,
        Err(_) if options.allow_invalid => Validity::Invalid,
        Err(problems) => {
            bail!("its checkpoints do not discriminate ({}); --allow-invalid adds it anyway", problems.join("; "))
        }
    };

    let zip = out.join(format::bundle_path(&task_id));
    let export_options = ExportOptions {
        format: trace_manifest::report::ExportFormat::Zip,
        embed_bodies: false,
        progress: false,
        redact: options.redact,
        suspects: options.suspects.clone(),
    };
    export::export_bundle(&mut bundle, &zip, &export_options)?;
    drop(bundle);

    // From here on, only the exported zip is read: the dataset holds nothing the zip does not.
    let result = describe(&zip, &task_id, options.redact).map(|added| Added { validity, ..added });
    if result.is_err() {
        let _ = std::fs::remove_file(&zip);
    }
    result
}

/// Whether a bundle's checkpoints discriminate: `Ok(true)` when its audit says so, `Ok(false)` when it was
/// never audited and its recording shows nothing wrong, else the problems, each naming a checkpoint.
fn checkpoint_problems(bundle: &mut Bundle) -> Result<Result<bool, Vec<String>>> {
    let manifest = bundle.manifest()?;
    if let Some(audit) = &manifest.audit {
        if audit.valid {
            return Ok(Ok(true));
        }
        let mut problems = audit.problems.clone();
        if problems.is_empty() {
            problems.push("its audit failed".to_owned());
        }
        return Ok(Err(problems));
    }
    let (derived, evidence) = process::derive(bundle)?;
    let checkpoints = bundle_checkpoints(bundle)?.unwrap_or(derived.checkpoints);
    let first_step = evidence.start_end(&derived.trajectory);
    let problems = trace_analysis::audit::static_problems(&checkpoints, &evidence, first_step);
    Ok(if problems.is_empty() { Ok(false) } else { Err(problems) })
}

/// The bundle's own `checkpoints.json` (audited ones, when it was audited), if it has one.
fn bundle_checkpoints(bundle: &mut Bundle) -> Result<Option<Vec<Checkpoint>>> {
    if !bundle.contains(CHECKPOINTS_FILE) {
        return Ok(None);
    }
    let bytes = bundle.read(CHECKPOINTS_FILE)?;
    Ok(Some(serde_json::from_slice(&bytes).with_context(|| format!("the bundle's {CHECKPOINTS_FILE} does not parse"))?))
}

fn describe(zip: &Path, task_id: &TaskId, redacted: bool) -> Result<Added> {
    let mut exported = Bundle::open(zip)?;
    let manifest = exported.manifest()?;
    let (mut derived, evidence) = process::derive(&mut exported)?;
    // The checkpoints the bundle holds are the ones its audit judged: the dataset says the same.
    if let Some(checkpoints) = bundle_checkpoints(&mut exported)? {
        derived.checkpoints = checkpoints;
    }
    let task = &manifest.task;
    let line = TaskLine {
        task_id: task_id.clone(),
        task_description: task.description.clone(),
        task_type: task.task_type,
        website_url: task.website.clone(),
        num_steps: derived.trajectory.tool_calls.len(),
        duration_seconds: manifest.duration_seconds,
        answer: task.answer.clone(),
        tool_calls: derived.trajectory.tool_calls.clone(),
        credentials: derived.credentials.clone(),
        checkpoints: derived.checkpoints.clone(),
        checkpoints_reasoning: derived
            .checkpoints
            .iter()
            .map(|checkpoint| format!("{}: {}", checkpoint.id, checkpoint.reason))
            .collect::<Vec<_>>()
            .join("\n"),
        ignored: derived.ignored.clone(),
        bundle: format::bundle_path(task_id),
        redacted,
        paths: manifest.audit.as_ref().map(|audit| audit.paths.clone()).unwrap_or_default(),
    };
    Ok(Added { task_id: task_id.clone(), line, zip: zip.to_owned(), derived, evidence, validity: Validity::Audited })
}

fn write_index(out: &Path, name: &str, write: impl FnOnce(&mut dyn std::io::Write) -> Result<()>) -> Result<()> {
    let path = out.join(name);
    if let Some(parent) = path.parent() {
        std::fs::create_dir_all(parent).with_context(|| format!("cannot create {}", parent.display()))?;
    }
    trace_store::atomic::write(&path, write).map(drop)
}
