//! `audit.json`: the proof that a bundle's checkpoints discriminate, beside `checkpoints.json`. An
//! evaluation is only worth its checkpoints: `trace-replay audit` replays the bundle offline and runs
//! (a) the person's demonstration, (b) an agent that does nothing, and (c) perturbed demonstrations (one
//! state-changing step left out; one typed or chosen value of a state change altered), and scores each
//! as `eval` scores an agent. A bundle is **valid** when (a) succeeds with every checkpoint in order, (b)
//! fails and reaches no checkpoint, and every (c) fails. `manifest.json` carries the verdict
//! ([`AuditSummary`]); `trace-host dataset` refuses an invalid bundle unless told otherwise.
//!
//! Those runs take the path `eval` takes (DevTools answers the browser). The demonstration is also re-run
//! through the proxy (`serve --proxy-port`), the path BrowserGym's package takes; a valid bundle is proven
//! on that path too when that run succeeds with every checkpoint in order ([`Audit::paths`]). A bundle the
//! proxy run fails stays valid for `eval`: what the proxy run missed is said apart
//! ([`Audit::proxy_problems`]).

use schemars::JsonSchema;
use serde::{Deserialize, Serialize};

use crate::postprocess::Predicate;
use crate::task::TaskId;

pub const AUDIT_FILE: &str = "audit.json";

/// `audit.json`.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize, JsonSchema)]
pub struct Audit {
    pub task_id: TaskId,
    /// RFC 3339.
    pub audited_at: String,
    pub valid: bool,
    /// Why the bundle is not valid, a line each, naming the checkpoint or run at fault; empty when valid.
    #[serde(default)]
    pub problems: Vec<String>,
    /// Each run and what it scored, the demonstration first.
    pub runs: Vec<AuditRun>,
    /// The checkpoints judged (those of `checkpoints.json` after the audit), each with what satisfied it
    /// in each run.
    pub checkpoints: Vec<AuditedCheckpoint>,
    /// Checkpoints proposed but left out because they did not discriminate, and why.
    #[serde(default, skip_serializing_if = "Vec::is_empty")]
    pub dropped: Vec<DroppedCheckpoint>,
    /// The paths an agent can be scored on that the audit proved the bundle on: none when it is invalid,
    /// `devtools` when it is valid, and `proxy` too when the demonstration re-run through the proxy
    /// succeeded with every checkpoint in order. Absent from audits made before the proxy run was.
    #[serde(default, skip_serializing_if = "Vec::is_empty")]
    pub paths: Vec<ServingPath>,
    /// Why the bundle is not proven on the proxy path, a line each; empty when it is, or was not tried.
    #[serde(default, skip_serializing_if = "Vec::is_empty")]
    pub proxy_problems: Vec<String>,
}

/// A way a replayed bundle reaches the browser an agent is scored in.
#[derive(Debug, Clone, Copy, PartialEq, Eq, PartialOrd, Ord, Serialize, Deserialize, JsonSchema)]
#[serde(rename_all = "snake_case")]
pub enum ServingPath {
    /// DevTools answers the browser's requests (`trace-replay eval`, `serve` without a proxy port).
    Devtools,
    /// The browser goes through the replay's proxy (`serve --proxy-port`, BrowserGym's package).
    Proxy,
}

/// One run of the audit.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize, JsonSchema)]
pub struct AuditRun {
    /// `demonstration`, `nothing`, `answer-from-start`, `without-step-4`, `altered-step-2`.
    pub name: String,
    pub kind: AuditRunKind,
    /// What a valid bundle scores in this run: 1 for the demonstration, 0 for every other.
    pub expected_success: f64,
    pub success: f64,
    /// Checkpoints reached in order over all checkpoints (TRACE's partial credit).
    pub partial_credit: f64,
    pub reached_in_order: usize,
    pub reached_any_order: usize,
    /// Why the run succeeded or not, as `result.json` says it.
    pub success_basis: String,
    /// Whether the run scored as a valid bundle's must.
    pub as_expected: bool,
    /// What went wrong running it (the replay, a step that could not be taken), if anything.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub error: Option<String>,
}

/// What a run of the audit does.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize, JsonSchema)]
#[serde(tag = "kind", rename_all = "snake_case")]
pub enum AuditRunKind {
    /// The person's demonstration, re-run.
    Demonstration,
    /// The person's demonstration, re-run in a browser that goes through the proxy.
    DemonstrationThroughProxy,
    /// An agent that opens the start page and does nothing.
    Nothing,
    /// An agent that does nothing and answers with a text of the start page (information retrieval).
    AnswerFromStart,
    /// The demonstration without one of its state-changing steps (an index into `trajectory.json`).
    StepLeftOut { step: usize },
    /// The demonstration with the value one step typed or chose altered.
    ValueAltered { step: usize },
    /// The demonstration with the credential one step typed altered: a wrong password.
    CredentialAltered { step: usize },
}

/// A checkpoint as the audit judged it.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize, JsonSchema)]
pub struct AuditedCheckpoint {
    pub id: String,
    pub predicate: Predicate,
    /// Per run, in the order of [`Audit::runs`].
    pub runs: Vec<AuditReach>,
    pub verdict: CheckpointVerdict,
}

/// What satisfied a checkpoint in one run.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize, JsonSchema)]
pub struct AuditReach {
    pub run: String,
    pub reached: bool,
    pub in_order: bool,
    /// The event that satisfied it, in words.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub evidence: Option<String>,
}

/// Whether a checkpoint tells the demonstration from an agent that does nothing.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize, Deserialize, JsonSchema)]
#[serde(rename_all = "snake_case")]
pub enum CheckpointVerdict {
    /// The demonstration reaches it in order; doing nothing does not.
    Discriminates,
    /// An agent that does nothing reaches it.
    ReachedByNothing,
    /// The demonstration does not reach it.
    MissedByDemonstration,
    /// The demonstration reaches it, but not in order.
    OutOfOrder,
}

/// A checkpoint proposed and left out.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize, JsonSchema)]
pub struct DroppedCheckpoint {
    pub predicate: Predicate,
    pub verdict: CheckpointVerdict,
    /// The model that proposed it; absent for the rules' own.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub proposed_by: Option<String>,
}

/// What `manifest.json` and `result.json` carry of an audit.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize, JsonSchema)]
pub struct AuditSummary {
    pub valid: bool,
    /// RFC 3339.
    pub audited_at: String,
    /// The runs that scored as a valid bundle's must, of all runs.
    pub runs_as_expected: usize,
    pub runs: usize,
    /// The checkpoints that do not discriminate, by id, with their verdict.
    #[serde(default, skip_serializing_if = "Vec::is_empty")]
    pub non_discriminative: Vec<NonDiscriminative>,
    #[serde(default, skip_serializing_if = "Vec::is_empty")]
    pub problems: Vec<String>,
    /// The paths the bundle was proven on ([`Audit::paths`]).
    #[serde(default, skip_serializing_if = "Vec::is_empty")]
    pub paths: Vec<ServingPath>,
}

#[derive(Debug, Clone, PartialEq, Serialize, Deserialize, JsonSchema)]
pub struct NonDiscriminative {
    pub id: String,
    pub verdict: CheckpointVerdict,
}

impl Audit {
    pub fn summary(&self) -> AuditSummary {
        AuditSummary {
            valid: self.valid,
            audited_at: self.audited_at.clone(),
            runs_as_expected: self.runs.iter().filter(|run| run.as_expected).count(),
            runs: self.runs.len(),
            non_discriminative: self
                .checkpoints
                .iter()
                .filter(|checkpoint| checkpoint.verdict != CheckpointVerdict::Discriminates)
                .map(|checkpoint| NonDiscriminative { id: checkpoint.id.clone(), verdict: checkpoint.verdict })
                .collect(),
            problems: self.problems.clone(),
            paths: self.paths.clone(),
        }
    }
}
