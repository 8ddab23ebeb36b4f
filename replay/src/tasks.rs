//! The tasks a run is given: every task of a TRACE dataset (`tasks.jsonl` and its bundles), or the one
//! task of a bundle. `eval` and `audit` run a [`TaskSource`]; a batch ([`crate::batch`]) runs them all;
//! `list` prints them, and BrowserGym's tasks are registered from that list. This is the one reading of a
//! dataset, and it trusts a dataset no more than a bundle ([`tasks`]).

use std::collections::HashSet;
use std::path::{Path, PathBuf};

use anyhow::{Context, Result, bail};
use trace_bundle::archive::{self, Bundle, ZipLimits};
use trace_manifest::dataset::{TASKS_FILE, TaskLine};
use trace_manifest::task::{TaskId, TaskType};

/// A task to run: its id, its bundle, and what the dataset says of it (for a result when the bundle
/// itself cannot be opened).
#[derive(Debug, Clone)]
pub struct TaskSource {
    pub task_id: TaskId,
    pub bundle: PathBuf,
    pub description: String,
    pub task_type: TaskType,
    pub website: String,
}

/// The longest line of `tasks.jsonl`: one task with its demonstration's tool calls and checkpoints.
const MAX_TASK_LINE_BYTES: u64 = 16 << 20;

/// The tasks of `source`: a dataset directory (with `tasks.jsonl`), or one bundle (directory or zip). The
/// one reading of a dataset, for `eval`, `audit` and `list` (which BrowserGym's tasks take theirs from),
/// which trusts it no more than a bundle: `tasks.jsonl` is a regular file of the dataset's own (no link),
/// read a line at a time, at most [`ZipLimits::max_document_bytes`] in all and [`MAX_TASK_LINE_BYTES`] a
/// line; each task's bundle is a path inside the dataset, reached through folders alone (no link on the
/// way or at its end) and a regular file or a folder (not a FIFO, which would hold its opening).
pub fn tasks(source: &Path, limits: ZipLimits) -> Result<Vec<TaskSource>> {
    let lines_path = source.join(TASKS_FILE);
    if source.is_dir() && std::fs::symlink_metadata(&lines_path).is_ok() {
        let mut tasks = Vec::new();
        for_each_task_line(source, limits, |number, line| {
            if !trace_manifest::bundle::is_safe_relative_path(&line.bundle) {
                bail!("task {} names the bundle {:?}, outside the dataset", line.task_id, line.bundle);
            }
            check_inside(source, &line.bundle).with_context(|| {
                format!(
                    "line {number} of {}: task {} names the bundle {:?}",
                    lines_path.display(),
                    line.task_id,
                    line.bundle
                )
            })?;
            tasks.push(TaskSource {
                bundle: source.join(&line.bundle),
                task_id: line.task_id,
                description: line.task_description,
                task_type: line.task_type,
                website: line.website_url,
            });
            Ok(())
        })?;
        let mut seen = HashSet::new();
        if let Some(duplicate) = tasks.iter().find(|task| !seen.insert(task.task_id.clone())) {
            bail!("{} lists the task {} twice", lines_path.display(), duplicate.task_id);
        }
        tasks.sort_by(|a, b| a.task_id.cmp(&b.task_id));
        return Ok(tasks);
    }
    let mut bundle = Bundle::open_with_limits(source, limits)
        .with_context(|| format!("{} is neither a dataset nor a bundle", source.display()))?;
    let task = bundle.manifest()?.task.clone();
    Ok(vec![TaskSource {
        task_id: task.id,
        bundle: source.to_owned(),
        description: task.description,
        task_type: task.task_type,
        website: task.website,
    }])
}

/// Gives `visit` each task of the dataset `source`'s `tasks.jsonl` with its line number, read as
/// [`tasks`] says.
fn for_each_task_line(
    source: &Path,
    limits: ZipLimits,
    mut visit: impl FnMut(usize, TaskLine) -> Result<()>,
) -> Result<()> {
    use std::io::{BufRead, Read};
    let path = source.join(TASKS_FILE);
    let file = archive::open_beneath(source, TASKS_FILE).map_err(|error| {
        let why = if archive::is_link_refused(&error) { "is a symbolic link".to_owned() } else { error.to_string() };
        anyhow::anyhow!("{} {why}: a dataset's tasks.jsonl is a regular file of its own", path.display())
    })?;
    let size = file.metadata()?.len();
    if size > limits.max_document_bytes {
        bail!(
            "{} is {size} bytes, more than the limit of {} for a file read whole (--max-document-size)",
            path.display(),
            limits.max_document_bytes
        );
    }
    let mut reader = std::io::BufReader::new(file.take(limits.max_document_bytes));
    let mut line = Vec::new();
    for number in 1.. {
        line.clear();
        let read = (&mut reader)
            .take(MAX_TASK_LINE_BYTES + 1)
            .read_until(b'\n', &mut line)
            .with_context(|| format!("cannot read {}", path.display()))?;
        if read == 0 {
            break;
        }
        if line.len() as u64 > MAX_TASK_LINE_BYTES {
            bail!("line {number} of {} is longer than {MAX_TASK_LINE_BYTES} bytes", path.display());
        }
        if line.iter().all(u8::is_ascii_whitespace) {
            continue;
        }
        let task: TaskLine = serde_json::from_slice(&line)
            .with_context(|| format!("line {number} of {} is not a task", path.display()))?;
        visit(number, task)?;
    }
    Ok(())
}

/// Checks that `relative` leads, under `root`, through folders alone to a regular file or a folder: no
/// symbolic link on the way or at its end (it would lead out of `root`), and nothing else (a FIFO, a
/// device).
fn check_inside(root: &Path, relative: &str) -> Result<()> {
    let parts: Vec<&str> = relative.split('/').filter(|part| !part.is_empty()).collect();
    let mut path = root.to_owned();
    for (at, part) in parts.iter().enumerate() {
        path.push(part);
        let kind =
            std::fs::symlink_metadata(&path).with_context(|| format!("cannot find {}", path.display()))?.file_type();
        if kind.is_symlink() {
            bail!("{} is a symbolic link; a dataset's bundles are its own", path.display());
        }
        let last = at + 1 == parts.len();
        if !(kind.is_dir() || (last && kind.is_file())) {
            bail!("{} is neither a regular file nor a folder", path.display());
        }
    }
    Ok(())
}
