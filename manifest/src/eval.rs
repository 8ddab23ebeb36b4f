//! Evaluation files: what `trace-replay eval` reads beside a bundle (`rubric.json`), what an agent may
//! write into its `TRACE_OUT` directory (`done.json`, browser-use's `done` action; `agent_response.json`,
//! WebArena Verified's answer), and what the run writes: per task `result.json` ([`EvalResult`]), and for
//! the run `results.jsonl` (one [`EvalResult`] per line) and `summary.json` ([`EvalSummary`]).
//!
//! A run directory:
//! ```text
//! RUN/results.jsonl, summary.json, summary.md
//! RUN/<task>/result.json           scores, with the evidence of each
//! RUN/<task>/agent_response.json   WebArena Verified's answer (the agent's own, or the runner's)
//! RUN/<task>/network.har           the agent's traffic, bodies inline as text where they are text
//! RUN/<task>/trajectory.json       the agent's steps as browser-use tool calls
//! RUN/<task>/demonstration.json    the person's steps, the same way
//! RUN/<task>/rerun.json            for the agent `human` (and the audit's perturbed runs): the re-run's
//!                                  report, step by step (a `trace-replay run --human --json` report)
//! RUN/<task>/session/              the agent's session as a bundle (events, bodies, screenshots, DOM)
//! RUN/webarena-infinity/data/       the run in WebArena-Infinity's trajectory layout (crate::dataset)
//! ```

use schemars::JsonSchema;
use serde::{Deserialize, Serialize};

use crate::audit::AuditSummary;
use crate::postprocess::{CheckpointRole, Predicate};
use crate::report::RequestCounts;
use crate::task::{TaskId, TaskType};

/// Beside a bundle's other files: the task's rubric, when it has one.
pub const RUBRIC_FILE: &str = "rubric.json";
/// In `TRACE_OUT` and in a task's output directory.
pub const AGENT_RESPONSE_FILE: &str = "agent_response.json";
/// In `TRACE_OUT`: the agent says it is done, with its answer.
pub const DONE_FILE: &str = "done.json";
pub const RESULT_FILE: &str = "result.json";
pub const RESULTS_FILE: &str = "results.jsonl";
pub const SUMMARY_FILE: &str = "summary.json";
pub const SUMMARY_TEXT_FILE: &str = "summary.md";
pub const NETWORK_HAR_FILE: &str = "network.har";
/// In a task's output: the person's demonstration (a `trajectory.json` of the bundle's), to set the agent's
/// steps beside.
pub const DEMONSTRATION_FILE: &str = "demonstration.json";
/// In a task's output when the agent re-ran the person's steps: the re-run's [`FidelityReport`], so that a
/// demonstration that failed says which step and why.
///
/// [`FidelityReport`]: crate::report::FidelityReport
pub const RERUN_FILE: &str = "rerun.json";
/// The agent's session, a bundle directory inside the task's output.
pub const SESSION_DIR: &str = "session";
/// In an episode served by `trace-replay serve --proxy-port --episode DIR`: what the proxy answered ([`Served`]).
pub const SERVED_FILE: &str = "served.json";
/// In a run: every episode in WebArena-Infinity's trajectory layout (`data/<agent>/<environment>/<task>/`).
pub const WEBARENA_INFINITY_DIR: &str = "webarena-infinity";

/// `rubric.json`: what a good outcome satisfies, item by item (Odysseys' rubric items).
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize, JsonSchema)]
pub struct Rubric {
    pub items: Vec<RubricItem>,
}

#[derive(Debug, Clone, PartialEq, Serialize, Deserialize, JsonSchema)]
pub struct RubricItem {
    pub id: String,
    /// Relative weight, positive.
    #[serde(default = "one")]
    pub weight: f64,
    /// What must be true, in words.
    pub requirement: String,
    pub verification: Verification,
}

fn one() -> f64 {
    1.0
}

/// How a rubric item is checked: a checkpoint predicate (deterministic), or words for a judge.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize, JsonSchema)]
#[serde(untagged)]
pub enum Verification {
    Predicate(Predicate),
    Text(String),
}

/// `done.json` in `TRACE_OUT`: browser-use's `done` action.
#[derive(Debug, Clone, Default, PartialEq, Serialize, Deserialize, JsonSchema)]
pub struct AgentDone {
    /// The answer, or what the agent says it did.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub text: Option<String>,
    /// Whether the agent thinks it succeeded.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub success: Option<bool>,
}

/// `agent_response.json`, in WebArena Verified's shape. Absent fields are left out rather than written as
/// null: its evaluator (1.2.3) refuses `"error_details": null`.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize, JsonSchema)]
pub struct AgentResponse {
    pub task_type: ResponseTaskType,
    pub status: ResponseStatus,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub retrieved_data: Option<Vec<serde_json::Value>>,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub error_details: Option<String>,
}

#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize, Deserialize, JsonSchema)]
#[serde(rename_all = "SCREAMING_SNAKE_CASE")]
pub enum ResponseTaskType {
    Retrieve,
    Mutate,
    Navigate,
}

#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize, Deserialize, JsonSchema)]
#[serde(rename_all = "SCREAMING_SNAKE_CASE")]
pub enum ResponseStatus {
    Success,
    NotFoundError,
    PermissionDeniedError,
    ActionNotAllowedError,
    DataValidationError,
    UnknownError,
}

/// How an episode ended.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize, JsonSchema)]
#[serde(tag = "kind", rename_all = "snake_case")]
pub enum EpisodeEnd {
    /// The agent's process exited by itself.
    Exited {
        #[serde(default, skip_serializing_if = "Option::is_none")]
        code: Option<i32>,
    },
    /// Stopped at `--timeout`.
    Timeout { seconds: f64 },
    /// Stopped at `--max-steps`.
    MaxSteps { steps: usize },
    /// The built-in `human` agent re-ran the demonstration (or, for an audit, a perturbed one).
    Replayed,
    /// The built-in `nothing` agent opened the start page and did nothing.
    Idle,
    /// A browser the agent launched went through `trace-replay serve --proxy-port`, until the proxy stopped.
    Proxied,
}

/// `served.json`: how a proxy answered an episode's browser, kept for `trace-replay score` to give in the
/// episode's result.
#[derive(Debug, Clone, Default, PartialEq, Serialize, Deserialize, JsonSchema)]
pub struct Served {
    pub requests: RequestCounts,
    pub live_attempts: u64,
    /// RFC 3339: when the proxy started and stopped.
    pub started_at: String,
    pub duration_seconds: f64,
    /// The bodies the session left out, past its budget; absent when it kept them all.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub bodies_left_out: Option<BodiesLeftOut>,
}

/// The bodies an episode's session kept by their SHA-256 and size alone (its `body` events say
/// `omitted`): those that came past its budget (`--max-episode-bytes`), which bounds what an agent or a
/// page can make an episode hold, on disk and in memory.
#[derive(Debug, Clone, Copy, Default, PartialEq, Eq, Serialize, Deserialize, JsonSchema)]
pub struct BodiesLeftOut {
    /// How many bodies were left out.
    pub bodies: u64,
    /// Their bytes in all.
    pub bytes: u64,
    /// The budget they came past.
    pub budget_bytes: u64,
}

/// `result.json`: one task's scores, each with what it rests on.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize, JsonSchema)]
pub struct EvalResult {
    pub task_id: TaskId,
    pub website: String,
    pub task_type: TaskType,
    pub description: String,
    /// The agent command, or `human`.
    pub agent: String,
    /// RFC 3339: when the episode's turn came, its browser launched then.
    pub started_at: String,
    /// From the episode's turn to its session's end: the browser's launch, the agent's time, the last
    /// captures, the browser closed.
    pub duration_seconds: f64,
    pub ended: EpisodeEnd,
    /// What went wrong with the agent (a crash, a hang, a malformed answer, no action at all); the scores
    /// are still those its session earned.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub error: Option<String>,
    /// The agent's steps: its trajectory's tool calls but the initial navigation to the start page and the
    /// final `done` (on the proxy path, the actions its harness counted; see `step_basis`).
    pub steps: usize,
    /// What `steps` counts.
    #[serde(default)]
    pub step_basis: StepBasis,
    /// Whether the agent said it was done (`done.json`, or an `agent_response.json` with SUCCESS).
    pub said_done: bool,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub answer: Option<String>,
    /// 1 or 0.
    pub success: f64,
    /// What success was judged on, in words.
    pub success_basis: String,
    pub checkpoints: CheckpointScores,
    pub rubric: RubricScores,
    pub spl: Spl,
    /// How replay answered the agent's requests.
    pub requests: RequestCounts,
    pub live_attempts: u64,
    /// The bodies the session left out, past the episode's budget; absent when it kept them all.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub bodies_left_out: Option<BodiesLeftOut>,
    /// What the optional judge said (`--judge MODEL`); absent when none was asked. Its verdicts stand
    /// beside the deterministic scores above and never replace them, but for the rubric's text items,
    /// which only a judge can score (each marked `judged_by`).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub judge: Option<JudgeScores>,
    /// The verdict of the bundle's audit (`audit.json`), when it was audited: whether its checkpoints
    /// were shown to tell the demonstration from doing nothing, and which did not. A task whose audit
    /// failed is counted apart in the summary.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub audit: Option<AuditSummary>,
}

impl EvalResult {
    /// Whether the task's bundle was audited and found invalid: its scores prove nothing.
    pub fn task_invalid(&self) -> bool {
        self.audit.as_ref().is_some_and(|audit| !audit.valid)
    }
}

/// The judge's verdicts on one episode: TRACE's binary judge and its checkpoint judge.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize, JsonSchema)]
pub struct JudgeScores {
    /// The model asked.
    pub model: String,
    /// Whether the agent accomplished the task, judged from the task, the person's demonstration and the
    /// agent's steps, answer and final page. Absent when the judge could not be asked (see `error`).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub success: Option<JudgeVerdict>,
    /// The checkpoints judged in order, stopping at the first missed (TRACE's rule): the ones after it are
    /// not asked.
    pub checkpoints: Vec<JudgedCheckpoint>,
    /// Checkpoints the judge found reached in order, over all checkpoints (1 when there are none).
    pub partial_credit: f64,
    /// Questions answered from the cache rather than by the model.
    pub cached: usize,
    /// Questions the model answered in this run.
    pub asked: usize,
    /// Why some verdicts are missing: the endpoint failed or answered with no verdict.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub error: Option<String>,
}

#[derive(Debug, Clone, PartialEq, Serialize, Deserialize, JsonSchema)]
pub struct JudgeVerdict {
    pub satisfied: bool,
    /// The judge's reason, in its words.
    pub reason: String,
    /// SHA-256 of the request sent (model, messages, settings): the cache key, so the verdict can be traced
    /// to the exact question.
    pub input_hash: String,
}

#[derive(Debug, Clone, PartialEq, Serialize, Deserialize, JsonSchema)]
pub struct JudgedCheckpoint {
    pub id: String,
    #[serde(flatten)]
    pub verdict: JudgeVerdict,
}

#[derive(Debug, Clone, PartialEq, Serialize, Deserialize, JsonSchema)]
pub struct CheckpointScores {
    pub total: usize,
    /// TRACE's rule: checkpoints reached in order, stopping at the first missed.
    pub reached_in_order: usize,
    pub reached_any_order: usize,
    /// `reached_in_order / total` (1 when there are none).
    pub partial_credit: f64,
    /// `reached_any_order / total` (1 when there are none).
    pub any_order_share: f64,
    pub items: Vec<CheckpointOutcome>,
}

#[derive(Debug, Clone, PartialEq, Serialize, Deserialize, JsonSchema)]
pub struct CheckpointOutcome {
    pub id: String,
    pub predicate: Predicate,
    pub reached: bool,
    /// Counted by the in-order rule.
    pub in_order: bool,
    /// The agent's session event that satisfied it (the first, or the first after the previous
    /// checkpoint's for the in-order rule).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub event_id: Option<u64>,
    /// What that event was, in words: the request, the page reached, the snapshot.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub evidence: Option<String>,
    /// The checkpoint's role, as `checkpoints.json` gives it.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub role: Option<CheckpointRole>,
}

#[derive(Debug, Clone, PartialEq, Serialize, Deserialize, JsonSchema)]
pub struct RubricScores {
    /// `rubric.json`, or `checkpoints` when the task has no rubric (each checkpoint an item of weight 1).
    pub source: String,
    /// Weighted share of the items satisfied, over the items that could be scored.
    pub averaged: f64,
    /// 1 when every item is satisfied, else 0.
    pub perfect: f64,
    /// Text items left unscored for want of a judge (`--judge`), or because it gave no verdict.
    pub unjudged: usize,
    /// Text items the judge scored (each marked `judged_by`).
    #[serde(default)]
    pub judged: usize,
    pub items: Vec<RubricOutcome>,
}

#[derive(Debug, Clone, PartialEq, Serialize, Deserialize, JsonSchema)]
pub struct RubricOutcome {
    pub id: String,
    pub weight: f64,
    /// Absent when no one could tell (a text item without a judge).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub satisfied: Option<bool>,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub evidence: Option<String>,
    /// The model that scored the item, for a text item the judge scored; absent for a predicate.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub judged_by: Option<String>,
}

/// What an episode's steps count.
#[derive(Debug, Clone, Copy, Default, PartialEq, Eq, Serialize, Deserialize, JsonSchema)]
#[serde(rename_all = "snake_case")]
pub enum StepBasis {
    /// The agent's actions: its tool calls (`eval`), or the actions its harness says it took
    /// (`trace-replay score --steps`, which BrowserGym's package passes).
    #[default]
    Actions,
    /// The pages the agent reached after the first: a proxied episode scored without `--steps`, whose
    /// session holds no actions. Fewer than its actions whenever it acted within a page.
    Pages,
}

/// Success weighted by path length, two ways. Steps are the agent's actions on the page, counted alike on
/// every path (`eval`'s tool calls, the actions a BrowserGym agent took), neither the opening of the start
/// page nor the final answer counted.
#[derive(Debug, Clone, Copy, Default, PartialEq, Serialize, Deserialize, JsonSchema)]
pub struct Spl {
    /// Odysseys' SPL: the averaged rubric score over the agent's steps (at least one).
    pub averaged: f64,
    /// Odysseys' SPL of the perfect rubric score (1 when every item is satisfied) over the agent's steps.
    pub perfect: f64,
    /// The navigation SPL of Anderson et al. (2018): success × l / max(p, l), with l the person's steps in
    /// the demonstration and p the agent's. 1 for a success in as few steps as the person took or fewer,
    /// 0 for a failure; a recording gives TRACE the shortest known path that Odysseys lacks.
    #[serde(default)]
    pub navigation: f64,
}

/// `summary.json`: a run's scores, overall and per website.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize, JsonSchema)]
pub struct EvalSummary {
    /// The tasks scored: every task but the invalid ones.
    pub tasks: usize,
    /// Tasks whose bundle's audit found checkpoints that do not discriminate: their results are in
    /// `results.jsonl` but in no figure of the summary.
    #[serde(default)]
    pub invalid_tasks: usize,
    /// Tasks scored whose bundle was never audited.
    #[serde(default)]
    pub unaudited_tasks: usize,
    /// Tasks whose agent hit an error (they count as scored).
    pub errors: usize,
    pub success_rate: f64,
    /// Wilson score interval, 95%.
    pub success_interval: [f64; 2],
    pub partial_credit_mean: f64,
    pub any_order_share_mean: f64,
    pub rubric_averaged_mean: f64,
    pub rubric_perfect_rate: f64,
    pub spl_averaged: f64,
    pub spl_perfect: f64,
    /// The mean of [`Spl::navigation`].
    #[serde(default)]
    pub spl_navigation: f64,
    pub steps_mean: f64,
    pub seconds_mean: f64,
    /// The mean of the websites' success rates.
    pub macro_success_rate: f64,
    /// Bootstrap over tasks within websites, 95%, with a fixed seed (the same results give the same interval).
    pub macro_success_interval: [f64; 2],
    pub macro_partial_credit: f64,
    pub macro_partial_credit_interval: [f64; 2],
    pub websites: Vec<WebsiteSummary>,
    /// The judge's figures, when any task was judged.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub judge: Option<JudgeSummary>,
}

/// A run's judge figures, over the tasks whose success the judge gave a verdict on.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize, JsonSchema)]
pub struct JudgeSummary {
    /// The models asked, in name order (one, unless runs were merged).
    pub models: Vec<String>,
    /// Tasks with a success verdict.
    pub tasks: usize,
    pub success_rate: f64,
    /// Wilson score interval, 95%.
    pub success_interval: [f64; 2],
    pub partial_credit_mean: f64,
    /// Share of those tasks where the judge's success equals the deterministic one.
    pub agreement: f64,
    /// Tasks whose judging failed in part (`judge.error`).
    pub errors: usize,
}

#[derive(Debug, Clone, PartialEq, Serialize, Deserialize, JsonSchema)]
pub struct WebsiteSummary {
    pub website: String,
    pub tasks: usize,
    pub success_rate: f64,
    pub success_interval: [f64; 2],
    pub partial_credit_mean: f64,
    pub rubric_averaged_mean: f64,
    pub spl_averaged: f64,
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn a_rubric_item_is_verified_by_a_predicate_or_by_words() {
        let rubric: Rubric = serde_json::from_value(serde_json::json!({"items": [
            {"id": "r1", "weight": 2, "requirement": "The mug is in the cart",
             "verification": {"kind": "request", "method": "POST", "url_pattern": "shop.test/cart"}},
            {"id": "r2", "requirement": "The answer is polite", "verification": "Read the final message"}
        ]}))
        .unwrap();
        assert!(matches!(&rubric.items[0].verification, Verification::Predicate(Predicate::Request { .. })));
        assert_eq!(rubric.items[1].weight, 1.0, "the weight defaults to 1");
        assert!(matches!(&rubric.items[1].verification, Verification::Text(text) if text.starts_with("Read")));
    }

    #[test]
    fn an_agent_response_leaves_out_what_it_does_not_have() {
        let response = AgentResponse {
            task_type: ResponseTaskType::Mutate,
            status: ResponseStatus::Success,
            retrieved_data: None,
            error_details: None,
        };
        // WebArena Verified's evaluator refuses `"error_details": null`.
        assert_eq!(serde_json::to_string(&response).unwrap(), r#"{"task_type":"MUTATE","status":"SUCCESS"}"#);
        let read: AgentResponse =
            serde_json::from_str(r#"{"task_type":"RETRIEVE","status":"NOT_FOUND_ERROR","retrieved_data":[1,"a"]}"#)
                .unwrap();
        assert_eq!(read.status, ResponseStatus::NotFoundError);
    }
}
