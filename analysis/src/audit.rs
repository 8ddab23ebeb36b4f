//! The audit of a bundle's checkpoints (`audit.json`): whether they tell the person's demonstration from
//! an agent that does nothing and from demonstrations that miss something. `trace-replay audit` runs the
//! sessions; everything said about them is decided here, from their evidence:
//!
//! - **The runs.** (a) The demonstration, re-run. (b) An agent that opens the start page and does
//!   nothing; for an information-retrieval task also (b') the same agent answering with each text the start
//!   page shows. (c) For an action task, [`perturbations`]: the demonstration without one of the steps a
//!   state change came from, with one value it typed or chose into a state change altered
//!   ([`alter_text`]; a checkbox or radio button it clicked left alone), and with one credential a state
//!   change checks (a sign-in's password, `credential_fields`) typed wrong.
//! - **Valid** when (a) succeeds with every checkpoint reached in order, (b) and (b') fail and reach no
//!   checkpoint, and every (c) fails. Each checkpoint gets a verdict from (a) and (b)
//!   ([`CheckpointVerdict`]).
//! - **Paths.** (d) The demonstration re-run through the proxy, when it was: a valid bundle is proven on
//!   the proxy path too when (d) succeeds with every checkpoint in order ([`Audit::paths`]); what (d)
//!   missed is said apart ([`Audit::proxy_problems`]), since the bundle stays valid for `eval`.
//! - **Pruning** (`--prune`, which `trace-host process` asks for): checkpoints that do not discriminate
//!   are dropped one at a time, the first in order first, since dropping one can put the next in order;
//!   the runs are then judged on what is left, and the dropped ones listed with their verdict. A
//!   model's proposals (`process --llm`) are judged so too: kept only if they discriminate.
//!
//! [`static_problems`] is what can be said without a browser, from the recording alone: a checkpoint
//! that holds at the recording's start, or one the recording itself does not reach in order.

use trace_manifest::audit::{
    Audit, AuditReach, AuditRun, AuditRunKind, AuditedCheckpoint, CheckpointVerdict, DroppedCheckpoint, ServingPath,
};
use trace_manifest::bundle::TaskInfo;
use trace_manifest::eval::{CheckpointOutcome, CheckpointScores};
use trace_manifest::postprocess::{Checkpoint, CheckpointRole, Predicate};
use trace_manifest::task::TaskType;
use trace_manifest::trajectory::{ToolAction, ToolCall};

use crate::evidence::{Evidence, holds};
use crate::judge::predicate_in_words;
use crate::score;

/// One session of the audit and what came of it.
pub struct Run<'a> {
    pub kind: AuditRunKind,
    pub evidence: &'a Evidence,
    /// The answer the run gave (the demonstration's is the person's).
    pub answer: Option<String>,
    /// What went wrong running it, if anything.
    pub error: Option<String>,
}

/// A run's name in `audit.json` and in its output directory: `demonstration`, `nothing`,
/// `answer-from-start`, `without-step-4`, `altered-step-2`, `wrong-credential-step-3` (steps counted from 1,
/// as reports count them).
pub fn run_name(kind: &AuditRunKind) -> String {
    match kind {
        AuditRunKind::Demonstration => "demonstration".to_owned(),
        AuditRunKind::DemonstrationThroughProxy => "demonstration-through-proxy".to_owned(),
        AuditRunKind::Nothing => "nothing".to_owned(),
        AuditRunKind::AnswerFromStart => "answer-from-start".to_owned(),
        AuditRunKind::StepLeftOut { step } => format!("without-step-{}", step + 1),
        AuditRunKind::ValueAltered { step } => format!("altered-step-{}", step + 1),
        AuditRunKind::CredentialAltered { step } => format!("wrong-credential-step-{}", step + 1),
    }
}

/// The perturbed demonstrations of an action task (see the module's runs): the steps state changes came
/// from, left out, and the steps whose typed or chosen value a state change carries, altered. None for
/// an information-retrieval task, whose success is its answer.
pub fn perturbations(task_type: TaskType, calls: &[ToolCall], checkpoints: &[Checkpoint]) -> Vec<AuditRunKind> {
    if task_type != TaskType::Action {
        return Vec::new();
    }
    let changes: Vec<&Checkpoint> =
        checkpoints.iter().filter(|checkpoint| is_state_change(checkpoint, checkpoints)).collect();
    let mut steps: Vec<usize> = changes
        .iter()
        .filter_map(|checkpoint| checkpoint.step)
        .filter(|&step| {
            !(step == 0 && calls.first().is_some_and(|call| matches!(call.action, ToolAction::Navigate { .. })))
        })
        .collect();
    steps.sort_unstable();
    steps.dedup();
    let mut runs: Vec<AuditRunKind> = steps.into_iter().map(|step| AuditRunKind::StepLeftOut { step }).collect();
    for (index, call) in calls.iter().enumerate() {
        let carried = changes.iter().any(|checkpoint| {
            let (url_pattern, body_fields) = match &checkpoint.predicate {
                Predicate::Request { url_pattern, body_fields, .. } => (url_pattern, body_fields),
                Predicate::Frame { url_pattern, fields } => (url_pattern, fields),
                Predicate::Url { .. } | Predicate::Text { .. } => return false,
            };
            // A value the person replaced in the same field before the state change never reached it:
            // altering it is no alternative the site could tell apart.
            let sent_by = checkpoint.step.unwrap_or(calls.len());
            if calls.get(index + 1..sent_by).is_some_and(|later| later.iter().any(|later| replaces(later, call))) {
                return false;
            }
            let field_name = call.target.as_ref().and_then(|target| target.name.as_deref());
            let by_name = field_name.is_some_and(|name| body_fields.contains_key(name));
            match &call.action {
                ToolAction::Input { text } if !text.is_empty() && !text.contains("{{credentials.") => {
                    by_name
                        || body_fields.values().any(|value| value == text)
                        || url_pattern.contains(text.as_str())
                        || url_pattern.contains(&percent_encoded(text))
                }
                ToolAction::SelectDropdown { .. } => by_name,
                ToolAction::Click { .. } => {
                    let toggles = call
                        .target
                        .as_ref()
                        .and_then(|target| target.input_type.as_deref())
                        .is_some_and(|kind| matches!(kind, "checkbox" | "radio"));
                    toggles && by_name
                }
                _ => false,
            }
        });
        if carried {
            runs.push(AuditRunKind::ValueAltered { step: index });
        }
        // A credential typed into a sign-in that a state change checks: typed wrong, it must not sign in.
        let checked_credential = matches!(&call.action, ToolAction::Input { text } if changes.iter().any(|checkpoint| {
            matches!(&checkpoint.predicate, Predicate::Request { credential_fields, .. }
                if credential_fields.values().any(|placeholder| placeholder == text))
        }));
        if checked_credential {
            runs.push(AuditRunKind::CredentialAltered { step: index });
        }
    }
    runs
}

/// Whether `later` gives the field `earlier` typed or chose into another value, replacing it.
fn replaces(later: &ToolCall, earlier: &ToolCall) -> bool {
    let (Some(field), Some(earlier_field)) = (later.target.as_ref(), earlier.target.as_ref()) else { return false };
    let same_field = field.frame_path == earlier_field.frame_path
        && (field.selector == earlier_field.selector
            || (field.name.is_some() && field.name == earlier_field.name && field.tag == earlier_field.tag));
    same_field
        && matches!(
            (&later.action, &earlier.action),
            (ToolAction::Input { .. }, ToolAction::Input { .. })
                | (ToolAction::SelectDropdown { .. }, ToolAction::SelectDropdown { .. })
        )
}

/// Whether a checkpoint is a state change: by its role, or, in checkpoints without roles, a `request`.
fn is_state_change(checkpoint: &Checkpoint, all: &[Checkpoint]) -> bool {
    match checkpoint.role {
        Some(role) => role == CheckpointRole::StateChange,
        None => {
            !all.iter().any(|other| other.role.is_some())
                && matches!(checkpoint.predicate, Predicate::Request { .. } | Predicate::Frame { .. })
        }
    }
}

/// `text` as a URL path writes it (`My Title` → `My%20Title`).
fn percent_encoded(text: &str) -> String {
    url::form_urlencoded::byte_serialize(text.as_bytes()).collect::<String>().replace('+', "%20")
}

/// A typed value altered the least that makes it another value of the same shape: its last character
/// moved on (a digit to the next digit, a letter to the next letter of its case, anything else to `x`),
/// so that a field's length limit or a number field keeps it.
pub fn alter_text(text: &str) -> String {
    let mut chars: Vec<char> = text.chars().collect();
    let Some(last) = chars.last_mut() else { return "x".to_owned() };
    *last = match *last {
        '9' => '0',
        'z' => 'a',
        'Z' => 'A',
        c if c.is_ascii_alphanumeric() => (c as u8 + 1) as char,
        _ => 'x',
    };
    chars.into_iter().collect()
}

/// Judges the runs (see the module's rules); returns the audit and the checkpoints it judged, which are
/// `candidates` less what pruning dropped, numbered again from `cp1`.
pub fn judge(
    task: &TaskInfo,
    candidates: &[Checkpoint],
    runs: &[Run<'_>],
    prune: bool,
    audited_at: String,
) -> (Audit, Vec<Checkpoint>) {
    let demonstration = runs.iter().find(|run| run.kind == AuditRunKind::Demonstration);
    let nothing = runs.iter().find(|run| run.kind == AuditRunKind::Nothing);
    let mut kept: Vec<Checkpoint> = candidates.to_vec();
    let mut dropped = Vec::new();
    if prune && let Some(demonstration) = demonstration {
        loop {
            let demo = score::checkpoints(&kept, demonstration.evidence);
            let idle = nothing.map(|run| score::checkpoints(&kept, run.evidence));
            let first_bad = demo.items.iter().enumerate().find_map(|(index, item)| {
                let verdict = verdict(item, idle.as_ref().map(|idle| &idle.items[index]));
                (verdict != CheckpointVerdict::Discriminates).then_some((index, verdict))
            });
            let Some((index, verdict)) = first_bad else { break };
            let checkpoint = kept.remove(index);
            dropped.push(DroppedCheckpoint {
                predicate: checkpoint.predicate,
                verdict,
                proposed_by: checkpoint.proposed_by,
            });
        }
        for (index, checkpoint) in kept.iter_mut().enumerate() {
            checkpoint.id = format!("cp{}", index + 1);
        }
    }

    let mut audit_runs = Vec::new();
    let mut scores: Vec<(String, CheckpointScores)> = Vec::new();
    let (mut problems, mut proxy_problems) = (Vec::new(), Vec::new());
    for run in runs {
        let name = run_name(&run.kind);
        let checkpoint_scores = score::checkpoints(&kept, run.evidence);
        let (success, basis) = success(task, &checkpoint_scores, run.answer.as_deref());
        let audit_run = audit_run(&run.kind, name.clone(), success, basis, &checkpoint_scores, run.error.clone());
        let run_problems = run_problem(&audit_run, &checkpoint_scores, &kept);
        match run.kind {
            AuditRunKind::DemonstrationThroughProxy => proxy_problems.extend(run_problems),
            _ => problems.extend(run_problems),
        }
        audit_runs.push(audit_run);
        scores.push((name, checkpoint_scores));
    }
    if task.task_type == TaskType::InformationRetrieval
        && let (Some(expected), Some(nothing)) = (task.answer.as_deref(), nothing)
    {
        let shown = start_answer(expected, nothing.evidence);
        let basis = match &shown {
            Some(text) => format!("the start page shows {text:?}, which equals the person's answer"),
            None => "no text of the start page equals the person's answer".to_owned(),
        };
        let idle_scores = score::checkpoints(&kept, nothing.evidence);
        let run = audit_run(
            &AuditRunKind::AnswerFromStart,
            run_name(&AuditRunKind::AnswerFromStart),
            shown.is_some(),
            basis,
            &idle_scores,
            None,
        );
        if let Some(text) = &shown {
            problems.push(format!("the answer is on the start page: an agent that does nothing can read {text:?}"));
        }
        audit_runs.push(run);
    }
    if runs.is_empty() || demonstration.is_none() {
        problems.push("the demonstration was not run".to_owned());
    }
    if kept.is_empty() {
        problems.push("no checkpoint is left to score an agent by".to_owned());
    }

    let demo_items = scores.iter().find(|(name, _)| name == "demonstration").map(|(_, scores)| &scores.items);
    let idle_items = scores.iter().find(|(name, _)| name == "nothing").map(|(_, scores)| &scores.items);
    let checkpoints: Vec<AuditedCheckpoint> = kept
        .iter()
        .enumerate()
        .map(|(index, checkpoint)| {
            let verdict = match demo_items {
                Some(demo) => verdict(&demo[index], idle_items.map(|idle| &idle[index])),
                None => CheckpointVerdict::MissedByDemonstration,
            };
            let runs = scores
                .iter()
                .map(|(name, scores)| {
                    let item = &scores.items[index];
                    AuditReach {
                        run: name.clone(),
                        reached: item.reached,
                        in_order: item.in_order,
                        evidence: item.evidence.clone(),
                    }
                })
                .collect();
            AuditedCheckpoint { id: checkpoint.id.clone(), predicate: checkpoint.predicate.clone(), runs, verdict }
        })
        .collect();
    let is_proxy_run = |run: &AuditRun| run.kind == AuditRunKind::DemonstrationThroughProxy;
    let valid = problems.is_empty()
        && audit_runs.iter().filter(|run| !is_proxy_run(run)).all(|run| run.as_expected)
        && checkpoints.iter().all(|checkpoint| checkpoint.verdict == CheckpointVerdict::Discriminates);
    let mut paths = Vec::new();
    if valid {
        paths.push(ServingPath::Devtools);
        if audit_runs.iter().any(|run| is_proxy_run(run) && run.as_expected) {
            paths.push(ServingPath::Proxy);
        }
    }
    let audit = Audit {
        task_id: task.id.clone(),
        audited_at,
        valid,
        problems,
        runs: audit_runs,
        checkpoints,
        dropped,
        paths,
        proxy_problems,
    };
    (audit, kept)
}

/// A checkpoint's verdict from what the demonstration and an agent doing nothing reached of it.
fn verdict(demonstration: &CheckpointOutcome, nothing: Option<&CheckpointOutcome>) -> CheckpointVerdict {
    if nothing.is_some_and(|idle| idle.reached) {
        CheckpointVerdict::ReachedByNothing
    } else if !demonstration.reached {
        CheckpointVerdict::MissedByDemonstration
    } else if !demonstration.in_order {
        CheckpointVerdict::OutOfOrder
    } else {
        CheckpointVerdict::Discriminates
    }
}

/// A run's success as `eval` decides it: the answer for information retrieval, else the checkpoints.
fn success(task: &TaskInfo, scores: &CheckpointScores, answer: Option<&str>) -> (bool, String) {
    match (task.task_type, &task.answer) {
        (TaskType::InformationRetrieval, Some(expected)) => {
            let given = answer.unwrap_or_default();
            let matched = score::answers_match(expected, given);
            (matched, format!("the answer {given:?} {} the person's", if matched { "equals" } else { "differs from" }))
        }
        (TaskType::InformationRetrieval, None) => (false, "the recording holds no answer to compare with".to_owned()),
        (TaskType::Action, _) => score::action_success(scores),
    }
}

fn audit_run(
    kind: &AuditRunKind,
    name: String,
    success: bool,
    success_basis: String,
    scores: &CheckpointScores,
    error: Option<String>,
) -> AuditRun {
    let demonstration = matches!(kind, AuditRunKind::Demonstration | AuditRunKind::DemonstrationThroughProxy);
    let as_expected = if demonstration {
        success && scores.reached_in_order == scores.total
    } else {
        let idle = matches!(kind, AuditRunKind::Nothing | AuditRunKind::AnswerFromStart);
        !success && (!idle || scores.reached_any_order == 0)
    };
    AuditRun {
        name,
        kind: kind.clone(),
        expected_success: if demonstration { 1.0 } else { 0.0 },
        success: if success { 1.0 } else { 0.0 },
        partial_credit: scores.partial_credit,
        reached_in_order: scores.reached_in_order,
        reached_any_order: scores.reached_any_order,
        success_basis,
        as_expected,
        error,
    }
}

/// What is wrong with a run that did not score as a valid bundle's must, in a line per fault.
fn run_problem(run: &AuditRun, scores: &CheckpointScores, checkpoints: &[Checkpoint]) -> Vec<String> {
    if run.as_expected {
        return Vec::new();
    }
    let named = |item: &CheckpointOutcome| format!("{} ({})", item.id, predicate_in_words(&item.predicate));
    match &run.kind {
        AuditRunKind::Demonstration | AuditRunKind::DemonstrationThroughProxy => {
            let which = match run.kind {
                AuditRunKind::Demonstration => "the demonstration",
                _ => "the demonstration through the proxy",
            };
            let mut problems: Vec<String> = scores
                .items
                .iter()
                .filter(|item| !item.in_order)
                .map(|item| {
                    let how = if item.reached { "out of order" } else { "not at all" };
                    format!("{which} reached {} {how}", named(item))
                })
                .collect();
            if run.success < 1.0 {
                problems.push(format!("{which} did not succeed: {}", run.success_basis));
            }
            if let Some(error) = run.error.as_deref().filter(|_| run.kind == AuditRunKind::DemonstrationThroughProxy) {
                problems.push(format!("{which} went wrong: {error}"));
            }
            problems
        }
        AuditRunKind::Nothing | AuditRunKind::AnswerFromStart => {
            let mut problems: Vec<String> = scores
                .items
                .iter()
                .filter(|item| item.reached)
                .map(|item| {
                    let at = item.evidence.as_deref().unwrap_or("the start page");
                    format!("an agent that does nothing reached {} ({at})", named(item))
                })
                .collect();
            if run.success > 0.0 {
                problems.push(format!("an agent that does nothing succeeded: {}", run.success_basis));
            }
            problems
        }
        AuditRunKind::StepLeftOut { step } => vec![format!(
            "the demonstration without step {} still succeeded: no checkpoint needs what that step did{}",
            step + 1,
            changes_named(checkpoints)
        )],
        AuditRunKind::ValueAltered { step } => vec![format!(
            "the demonstration with the value of step {} altered still succeeded: no checkpoint checks that value{}",
            step + 1,
            changes_named(checkpoints)
        )],
        AuditRunKind::CredentialAltered { step } => vec![format!(
            "the demonstration with a wrong credential typed at step {} still succeeded: a wrong password signs in{}",
            step + 1,
            changes_named(checkpoints)
        )],
    }
}

fn changes_named(checkpoints: &[Checkpoint]) -> String {
    let changes: Vec<String> = checkpoints
        .iter()
        .filter(|checkpoint| is_state_change(checkpoint, checkpoints))
        .map(|checkpoint| format!("{} ({})", checkpoint.id, predicate_in_words(&checkpoint.predicate)))
        .collect();
    if changes.is_empty() {
        " (there is no state change checkpoint)".to_owned()
    } else {
        format!(" (state changes: {})", changes.join("; "))
    }
}

/// A text of the start page (as an agent that does nothing saw it) that equals the person's answer: a
/// block, a heading, a run, or the whole text of one of its pages.
fn start_answer(expected: &str, start: &Evidence) -> Option<String> {
    start.pages.iter().find_map(|page| {
        let texts = page.blocks.iter().map(|block| block.text.as_str()).chain(page.headings.iter().map(String::as_str));
        texts
            .chain(page.runs.iter().map(String::as_str))
            .chain(std::iter::once(page.text.as_str()))
            .find(|text| score::answers_match(expected, text))
            .map(str::to_owned)
    })
}

/// What can be said of a bundle's checkpoints without a browser, from its recording: a checkpoint that
/// holds at the start (before the person's first step, where an agent that does nothing is) or that the
/// recording itself does not reach in order. `first_step` is where the start ends
/// ([`crate::evidence::Evidence::start_end`]).
pub fn static_problems(
    checkpoints: &[Checkpoint],
    recording: &Evidence,
    first_step: crate::evidence::Position,
) -> Vec<String> {
    let mut problems = Vec::new();
    for checkpoint in checkpoints {
        let at_start = holds(&checkpoint.predicate, recording)
            .iter()
            .filter_map(|id| recording.position(*id))
            .find(|at| *at < first_step);
        if let Some(at) = at_start {
            problems.push(format!(
                "{} ({}) holds on the start page ({}): an agent that does nothing reaches it",
                checkpoint.id,
                predicate_in_words(&checkpoint.predicate),
                score::describe(recording, at.id)
            ));
        }
    }
    let scores = score::checkpoints(checkpoints, recording);
    for item in scores.items.iter().filter(|item| !item.in_order) {
        let how = if item.reached { "out of order" } else { "not at all" };
        problems.push(format!(
            "the recording itself reaches {} ({}) {how}",
            item.id,
            predicate_in_words(&item.predicate)
        ));
    }
    problems
}

/// An audit as people read it: the verdict, a line per run, a line per checkpoint with what each run
/// reached of it, and the problems.
pub fn table(audit: &Audit) -> String {
    use std::fmt::Write as _;
    let mut f = String::new();
    let verdict = if audit.valid { "valid" } else { "INVALID" };
    let paths: Vec<&str> = audit
        .paths
        .iter()
        .map(|path| match path {
            ServingPath::Devtools => "devtools",
            ServingPath::Proxy => "proxy",
        })
        .collect();
    let on = if paths.is_empty() { String::new() } else { format!(" on {}", paths.join(" and ")) };
    let _ = writeln!(f, "{}: {verdict}{on}", audit.task_id);
    let _ = writeln!(f, "  {:<28} {:>8} {:>9} {:>14}  as expected", "run", "success", "credit", "in order");
    for run in &audit.runs {
        let total = audit.checkpoints.len();
        let _ = writeln!(
            f,
            "  {:<28} {:>8} {:>8.0}% {:>14}  {}{}",
            run.name,
            run.success,
            run.partial_credit * 100.0,
            format!("{}/{total}", run.reached_in_order),
            if run.as_expected { "yes" } else { "NO" },
            run.error.as_deref().map(|error| format!(" ({error})")).unwrap_or_default()
        );
    }
    for checkpoint in &audit.checkpoints {
        let reached: Vec<String> = checkpoint
            .runs
            .iter()
            .map(|reach| {
                format!(
                    "{}={}",
                    reach.run,
                    if reach.in_order {
                        "✓"
                    } else if reach.reached {
                        "~"
                    } else {
                        "·"
                    }
                )
            })
            .collect();
        let verdict = match checkpoint.verdict {
            CheckpointVerdict::Discriminates => "discriminates",
            CheckpointVerdict::ReachedByNothing => "REACHED BY NOTHING",
            CheckpointVerdict::MissedByDemonstration => "MISSED BY THE DEMONSTRATION",
            CheckpointVerdict::OutOfOrder => "OUT OF ORDER",
        };
        let _ = writeln!(
            f,
            "  {} {}: {verdict} [{}]",
            checkpoint.id,
            predicate_in_words(&checkpoint.predicate),
            reached.join(" ")
        );
    }
    for dropped in &audit.dropped {
        let by = dropped.proposed_by.as_deref().map(|model| format!(" (proposed by {model})")).unwrap_or_default();
        let _ = writeln!(f, "  dropped{by}: {} ({:?})", predicate_in_words(&dropped.predicate), dropped.verdict);
    }
    for problem in &audit.problems {
        let _ = writeln!(f, "  problem: {problem}");
    }
    for problem in &audit.proxy_problems {
        let _ = writeln!(f, "  not proven on the proxy path: {problem}");
    }
    f
}

#[cfg(test)]
mod tests {
    use trace_manifest::task::TaskStatus;

    use super::*;
    use crate::testing::{Recording, SHOP};

    const START: &str = "<main><h1>Mugs</h1><p>Blue mug, $12</p></main>";

    fn task(task_type: TaskType, answer: Option<&str>) -> TaskInfo {
        TaskInfo {
            id: "t".parse().unwrap(),
            source: "test".into(),
            task_type,
            description: "Put two mugs in the cart".into(),
            website: "http://app.test/".into(),
            status: TaskStatus::Stopped,
            answer: answer.map(str::to_owned),
        }
    }

    /// The start page, as every run opens it.
    fn start() -> Recording {
        let mut recording = Recording::default();
        recording.navigate(0.0, "/", "typed");
        recording.page(100.0, "/", &format!("{SHOP}{START}"));
        recording
    }

    /// The demonstration: two mugs typed, added; or a run of it that sent `qty` or nothing at all.
    fn run(qty: Option<&str>) -> Evidence {
        let mut recording = start();
        if let Some(qty) = qty {
            recording.act(1000.0, "input", "/", "qty", Some(qty));
            recording.act(1500.0, "click", "/", "add", None);
            recording.request(1510.0, "POST", "/cart", Some(&format!("qty={qty}")), Some("{}"), false);
            recording.page(2000.0, "/", &format!("{SHOP}<p role=status>Added to your cart</p>{START}"));
        }
        recording.evidence().0
    }

    fn runs<'a>(
        demonstration: &'a Evidence,
        nothing: &'a Evidence,
        others: &'a [(AuditRunKind, Evidence)],
    ) -> Vec<Run<'a>> {
        let run = |kind: AuditRunKind, evidence| Run { kind, evidence, answer: None, error: None };
        let mut runs = vec![run(AuditRunKind::Demonstration, demonstration), run(AuditRunKind::Nothing, nothing)];
        runs.extend(others.iter().map(|(kind, evidence)| run(kind.clone(), evidence)));
        runs
    }

    #[test]
    fn the_rules_checkpoints_pass_their_audit_and_a_perturbed_demonstration_fails() {
        let mut recording = start();
        recording.act(1000.0, "input", "/", "qty", Some("2"));
        recording.act(1500.0, "click", "/", "add", None);
        recording.request(1510.0, "POST", "/cart", Some("qty=2"), Some("{}"), false);
        recording.page(2000.0, "/", &format!("{SHOP}<p role=status>Added to your cart</p>{START}"));
        let (evidence, trajectory) = recording.evidence();
        let checkpoints = crate::checkpoints::select(&evidence, &trajectory, &[], &[]);
        let perturbed = perturbations(TaskType::Action, &trajectory.tool_calls, &checkpoints);
        let input = trajectory.tool_calls.iter().position(|call| matches!(call.action, ToolAction::Input { .. }));
        let click = trajectory.tool_calls.iter().position(|call| matches!(call.action, ToolAction::Click { .. }));
        assert_eq!(
            perturbed,
            [AuditRunKind::StepLeftOut { step: click.unwrap() }, AuditRunKind::ValueAltered { step: input.unwrap() }]
        );

        let demonstration = run(Some("2"));
        let nothing = run(None);
        let others = [(perturbed[0].clone(), run(None)), (perturbed[1].clone(), run(Some("3")))];
        let (audit, kept) = judge(
            &task(TaskType::Action, None),
            &checkpoints,
            &runs(&demonstration, &nothing, &others),
            false,
            String::new(),
        );
        assert!(audit.valid, "{audit:#?}");
        assert_eq!(kept, checkpoints);
        let scored: Vec<(f64, bool)> = audit.runs.iter().map(|run| (run.success, run.as_expected)).collect();
        assert_eq!(scored, [(1.0, true), (0.0, true), (0.0, true), (0.0, true)]);

        // The perturbed run that still succeeds (the value was not checked) makes the bundle invalid.
        let lenient: Vec<Checkpoint> = checkpoints
            .iter()
            .cloned()
            .map(|mut checkpoint| {
                if let Predicate::Request { body_fields, .. } = &mut checkpoint.predicate {
                    body_fields.clear();
                }
                checkpoint
            })
            .collect();
        let (audit, _) = judge(
            &task(TaskType::Action, None),
            &lenient,
            &runs(&demonstration, &nothing, &others),
            false,
            String::new(),
        );
        assert!(!audit.valid);
        assert!(
            audit.problems.iter().any(|p| p.contains("with the value of step") && p.contains("still succeeded")),
            "{:#?}",
            audit.problems
        );
    }

    /// #47: a bundle is proven on the proxy path only by the demonstration re-run through the proxy; one
    /// that run fails stays valid for `eval`, and says what the proxy run missed.
    #[test]
    fn the_proxy_path_is_proven_by_the_demonstration_through_the_proxy_and_only_by_it() {
        let (demonstration, nothing) = (run(Some("2")), run(None));
        let (_, trajectory) = {
            let mut recording = start();
            recording.act(1000.0, "input", "/", "qty", Some("2"));
            recording.evidence()
        };
        let checkpoints = crate::checkpoints::select(&demonstration, &trajectory, &[], &[]);
        let judged = |through_proxy: Option<&Evidence>| {
            let others: Vec<(AuditRunKind, Evidence)> = through_proxy
                .map(|evidence| (AuditRunKind::DemonstrationThroughProxy, evidence.clone()))
                .into_iter()
                .collect();
            judge(
                &task(TaskType::Action, None),
                &checkpoints,
                &runs(&demonstration, &nothing, &others),
                false,
                String::new(),
            )
            .0
        };

        // Not tried: proven on the DevTools path alone.
        let untried = judged(None);
        assert!(untried.valid, "{untried:#?}");
        assert_eq!(untried.paths, [ServingPath::Devtools]);
        assert!(untried.proxy_problems.is_empty());

        // Reached through the proxy as through DevTools: both paths.
        let proven = judged(Some(&run(Some("2"))));
        assert!(proven.valid && proven.proxy_problems.is_empty(), "{proven:#?}");
        assert_eq!(proven.paths, [ServingPath::Devtools, ServingPath::Proxy]);
        let proxy_run = proven.runs.iter().find(|run| run.name == "demonstration-through-proxy").unwrap();
        assert_eq!((proxy_run.expected_success, proxy_run.success, proxy_run.as_expected), (1.0, 1.0, true));

        // The proxy run that sent nothing: still valid for `eval`, not proven on the proxy, and why.
        let missed = judged(Some(&run(None)));
        assert!(missed.valid && missed.problems.is_empty(), "{missed:#?}");
        assert_eq!(missed.paths, [ServingPath::Devtools]);
        assert!(
            missed
                .proxy_problems
                .iter()
                .any(|problem| problem.starts_with("the demonstration through the proxy reached")),
            "{:#?}",
            missed.proxy_problems
        );

        // An invalid bundle is proven on no path, whatever the proxy run did.
        let invalid = judge(
            &task(TaskType::Action, None),
            &checkpoints,
            &runs(&demonstration, &demonstration, &[(AuditRunKind::DemonstrationThroughProxy, run(Some("2")))]),
            false,
            String::new(),
        )
        .0;
        assert!(!invalid.valid && invalid.paths.is_empty(), "{invalid:#?}");
    }

    /// Issue #29: a final state that every page shows (the site's name), which an agent doing nothing reaches.
    #[test]
    fn a_checkpoint_an_agent_doing_nothing_reaches_makes_the_bundle_invalid_and_pruning_drops_it() {
        let demonstration = run(Some("2"));
        let nothing = run(None);
        let (_, trajectory) = {
            let mut recording = start();
            recording.act(1000.0, "input", "/", "qty", Some("2"));
            recording.evidence()
        };
        let mut checkpoints = crate::checkpoints::select(&demonstration, &trajectory, &[], &[]);
        let site_name = Checkpoint {
            id: format!("cp{}", checkpoints.len() + 1),
            reason: "the shop's name".into(),
            predicate: Predicate::Text { text: "Mug Shop".into() },
            event_ids: vec![],
            step: None,
            role: Some(CheckpointRole::FinalState),
            proposed_by: Some("a model".into()),
        };
        checkpoints.push(site_name.clone());
        let (audit, _) = judge(
            &task(TaskType::Action, None),
            &checkpoints,
            &runs(&demonstration, &nothing, &[]),
            false,
            String::new(),
        );
        assert!(!audit.valid);
        assert_eq!(audit.checkpoints.last().map(|c| c.verdict), Some(CheckpointVerdict::ReachedByNothing));
        assert!(
            audit
                .problems
                .iter()
                .any(|p| p.starts_with("an agent that does nothing reached") && p.contains("Mug Shop")),
            "{:#?}",
            audit.problems
        );

        let (audit, kept) = judge(
            &task(TaskType::Action, None),
            &checkpoints,
            &runs(&demonstration, &nothing, &[]),
            true,
            String::new(),
        );
        assert!(audit.valid, "{audit:#?}");
        assert!(!kept.iter().any(|checkpoint| checkpoint.predicate == site_name.predicate));
        assert_eq!(audit.dropped.len(), 1);
        assert_eq!(audit.dropped[0].verdict, CheckpointVerdict::ReachedByNothing);
        assert_eq!(audit.dropped[0].proposed_by.as_deref(), Some("a model"));
    }

    #[test]
    fn an_answer_the_start_page_shows_is_no_task_and_an_empty_answer_never_succeeds() {
        let demonstration = run(Some("2"));
        let nothing = run(None);
        let checkpoints = crate::checkpoints::select(&demonstration, &start().evidence().1, &[], &[]);
        let mut all = runs(&demonstration, &nothing, &[]);
        all[0].answer = Some("Blue mug, $12".into());
        let (audit, _) = judge(
            &task(TaskType::InformationRetrieval, Some("Blue mug, $12")),
            &checkpoints,
            &all,
            false,
            String::new(),
        );
        let idle = audit.runs.iter().find(|run| run.kind == AuditRunKind::Nothing).unwrap();
        assert_eq!(idle.success, 0.0, "no answer is no success");
        let from_start = audit.runs.iter().find(|run| run.kind == AuditRunKind::AnswerFromStart).unwrap();
        assert!(!from_start.as_expected && !audit.valid, "{audit:#?}");
        assert!(audit.problems.iter().any(|p| p.contains("the answer is on the start page")));
    }

    /// Issue #43: a wiki page typed as its heading, Enter, then the whole text in the same field: only the
    /// text the save sent is an alternative the site could tell apart.
    #[test]
    fn a_value_replaced_in_the_same_field_before_the_save_is_not_perturbed() {
        let mut recording = start();
        recording.act(1000.0, "input", "/", "wikitext", Some("====== Team wiki ======"));
        recording.act(1500.0, "input", "/", "title", Some("Team"));
        recording.act(2000.0, "input", "/", "wikitext", Some("====== Team wiki ======\nWelcome"));
        recording.act(2500.0, "click", "/", "save", None);
        recording.request(2510.0, "POST", "/save", Some("wikitext=x&title=Team"), Some("{}"), false);
        recording.page(3000.0, "/", &format!("{SHOP}<p role=status>Saved the page</p>{START}"));
        let (evidence, trajectory) = recording.evidence();
        let calls = &trajectory.tool_calls;
        let mut checkpoints = crate::checkpoints::select(&evidence, &trajectory, &[], &[]);
        let save = calls.iter().position(|call| matches!(call.action, ToolAction::Click { .. })).unwrap();
        for checkpoint in &mut checkpoints {
            if let Predicate::Request { body_fields, .. } = &mut checkpoint.predicate {
                *body_fields =
                    [("wikitext".into(), "====== Team wiki ======\nWelcome".into()), ("title".into(), "Team".into())]
                        .into();
            }
        }
        let typed = |value: &str| {
            calls.iter().position(|call| matches!(&call.action, ToolAction::Input { text } if text == value))
        };
        let (heading, title, whole) = (
            typed("====== Team wiki ======").unwrap(),
            typed("Team").unwrap(),
            typed("====== Team wiki ======\nWelcome").unwrap(),
        );
        let altered: Vec<usize> = perturbations(TaskType::Action, calls, &checkpoints)
            .into_iter()
            .filter_map(|kind| match kind {
                AuditRunKind::ValueAltered { step } => Some(step),
                _ => None,
            })
            .collect();
        assert!(heading < whole && whole < save);
        assert_eq!(altered, [title, whole], "the heading typed first was replaced before the save sent the field");
    }

    #[test]
    fn a_typed_value_is_altered_in_its_last_character_keeping_its_shape() {
        assert_eq!(alter_text("2"), "3");
        assert_eq!(alter_text("19"), "10");
        assert_eq!(alter_text("Editors"), "Editort");
        assert_eq!(alter_text("buzz"), "buza");
        assert_eq!(alter_text("a@b.c!"), "a@b.cx");
        assert_eq!(alter_text(""), "x");
        assert_eq!(alter_text("Zoë"), "Zox");
    }
}
