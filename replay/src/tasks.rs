//! The tasks a run is given: every task of a TRACE dataset (`tasks.jsonl` and its bundles), or the one
//! task of a bundle. `eval` and `audit` run a [`TaskSource`]; a batch ([`crate::batch`]) runs them all.

use std::collections::HashSet;
use std::path::{Path, PathBuf};

use anyhow::{Context, Result, bail};
use trace_bundle::archive::Bundle;
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

/// The tasks of `source`: a dataset directory (with `tasks.jsonl`), or one bundle (directory or zip).
pub fn tasks(source: &Path) -> Result<Vec<TaskSource>> {
    let lines = source.join(TASKS_FILE);
    if source.is_dir() && lines.is_file() {
        let text = std::fs::read_to_string(&lines).with_context(|| format!("cannot read {}", lines.display()))?;
        let mut tasks = Vec::new();
        for (number, line) in text.lines().enumerate().filter(|(_, line)| !line.trim().is_empty()) {
            let line: TaskLine = serde_json::from_str(line)
                .with_context(|| format!("line {} of {} is not a task", number + 1, lines.display()))?;
            if !trace_manifest::bundle::is_safe_relative_path(&line.bundle) {
                bail!("task {} names the bundle {:?}, outside the dataset", line.task_id, line.bundle);
            }
            tasks.push(TaskSource {
                bundle: source.join(&line.bundle),
                task_id: line.task_id,
                description: line.task_description,
                task_type: line.task_type,
                website: line.website_url,
            });
        }
        let mut seen = HashSet::new();
        if let Some(duplicate) = tasks.iter().find(|task| !seen.insert(task.task_id.clone())) {
            bail!("{} lists the task {} twice", lines.display(), duplicate.task_id);
        }
        tasks.sort_by(|a, b| a.task_id.cmp(&b.task_id));
        return Ok(tasks);
    }
    let mut bundle =
        Bundle::open(source).with_context(|| format!("{} is neither a dataset nor a bundle", source.display()))?;
    let task = bundle.manifest()?.task.clone();
    Ok(vec![TaskSource {
        task_id: task.id,
        bundle: source.to_owned(),
        description: task.description,
        task_type: task.task_type,
        website: task.website,
    }])
}
