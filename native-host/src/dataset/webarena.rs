//! One task in WebArena-Infinity's trajectory layout, the person as the model: the history and result
//! `trace_analysis::webarena_infinity` derives from the demonstration, and its screenshots copied out of
//! the exported bundle.

use std::path::Path;

use anyhow::{Context, Result};
use trace_analysis::webarena_infinity::{self, Outcome};
use trace_bundle::archive::Bundle;
use trace_manifest::dataset::{self as format, WebArenaEntry};

use super::Added;
use trace_store::atomic;

pub(super) fn write_task(added: &Added, out: &Path) -> Result<WebArenaEntry> {
    let mut bundle = Bundle::open(&added.zip)?;
    let manifest = bundle.manifest()?.clone();
    let environment = format::environment_name(&manifest.task.website);
    let dir = out.join(format::webarena_task_dir(format::HUMAN_MODEL, &environment, added.task_id.as_str()));
    std::fs::create_dir_all(dir.join("screenshots")).with_context(|| format!("cannot create {}", dir.display()))?;
    let calls = &added.derived.trajectory.tool_calls;
    let checkpoints = &added.derived.checkpoints;
    let reached = checkpoints
        .iter()
        .filter(|checkpoint| !trace_analysis::evidence::holds(&checkpoint.predicate, &added.evidence).is_empty())
        .count();
    let started_at_ms = calls.first().map_or(0.0, |call| call.ts);
    let outcome = Outcome {
        task_id: added.task_id.to_string(),
        instruction: manifest.task.description.clone(),
        demonstration_steps: calls.len(),
        // A demonstration reaches its own goal.
        passed: true,
        verifier_message: format!(
            "human demonstration: {reached} of {} checkpoints hold on the recording",
            checkpoints.len()
        ),
        elapsed_seconds: manifest.duration_seconds,
        error: None,
    };
    let ended_at_ms = started_at_ms + manifest.duration_seconds * 1000.0;
    let task = webarena_infinity::task(calls, &added.evidence, &manifest.task.website, ended_at_ms, outcome);
    for (name, file) in &task.screenshots {
        atomic::write(&dir.join(name), |out| Ok(bundle.copy_to(file, out).map(drop)?))?;
    }
    atomic::write_json(&dir.join(format::HISTORY_FILE), &task.history)?;
    atomic::write_json(&dir.join(format::RESULT_FILE), &task.result)?;
    Ok(task.entry(format::HUMAN_MODEL, &environment))
}
