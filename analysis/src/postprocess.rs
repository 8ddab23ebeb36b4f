//! The four files `trace-host process` adds to a bundle, derived together from its evidence:
//! the trajectory and the credentials typed in it ([`crate::trajectory`]), the ignore list
//! ([`crate::ignore`]), and the checkpoints, chosen with that ignore list ([`crate::checkpoints`]).

use trace_manifest::bundle::TaskInfo;
use trace_manifest::postprocess::{Checkpoint, CredentialEntry};
use trace_manifest::trajectory::Trajectory;

use crate::evidence::Evidence;
use crate::{checkpoints, ignore, trajectory};

/// The content of `trajectory.json`, `credentials.json`, `checkpoints.json` and `ignored.json`.
#[derive(Debug, Clone)]
pub struct PostProcessed {
    pub trajectory: Trajectory,
    pub credentials: Vec<CredentialEntry>,
    pub checkpoints: Vec<Checkpoint>,
    pub ignored: Vec<String>,
}

/// Derives the post-processing files of the task `task` from its recording's `evidence`.
pub fn derive(task: &TaskInfo, evidence: &Evidence) -> PostProcessed {
    let derived = trajectory::derive(task.id.clone(), &evidence.events, task.answer.as_deref());
    let ignored = ignore::ignore_list(&evidence.exchanges);
    let checkpoints = checkpoints::select(evidence, &derived.trajectory, &derived.credentials, &ignored);
    let credentials = derived.credentials.iter().map(CredentialEntry::from).collect();
    PostProcessed { trajectory: derived.trajectory, credentials, checkpoints, ignored }
}
