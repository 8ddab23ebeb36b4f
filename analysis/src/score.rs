//! The scores of an agent's episode, and of a run of episodes, all deterministic: the same session gives
//! the same scores. The agent's session is evidence like a person's recording ([`Evidence`]), so a
//! checkpoint holds for it exactly as [`holds`] says it holds for the person.
//!
//! - **Checkpoints**: TRACE's rule (in the recorded order, each at or after the previous one, stopping at
//!   the first missed; the checkpoints one step reached in any order among themselves, all after those of
//!   the steps before) gives the partial credit; the share reached in any order is reported beside it.
//!   "After" is by when events happened ([`Evidence::position`]), so that a request comes before the page
//!   it led to however the two were stored, and two checkpoints shown by one page are both in order.
//! - **Success**: for an action task, every state change and every final state holds (by their roles;
//!   for checkpoints without roles, every `request` and the last checkpoint); for information
//!   retrieval, the agent's answer equals the person's once both are normalized ([`normalize_answer`]),
//!   and an empty answer never does.
//! - **Validity**: a task whose bundle's audit found checkpoints that do not discriminate is counted apart
//!   in a run's summary, never averaged in.
//! - **Rubric**: a task's `rubric.json`, else its checkpoints as items of weight 1. A predicate item is
//!   scored here; a text item needs a judge and is otherwise left unscored (and counted as such).
//! - **SPL**, as Odysseys defines it: the rubric score over the agent's step count.
//! - **A run's summary**: means, the success rate's Wilson interval, and per-website (macro) figures with
//!   bootstrap intervals drawn from a fixed seed; the judge's figures apart, when a judge was asked.
//!
//! The judge's verdicts (`--judge`, asked by `trace-replay` with the questions of [`crate::judge`]) never
//! change a deterministic score; they fill in rubric text items, marked `judged_by`, and stand beside the
//! rest in `EvalResult::judge`.

use std::collections::BTreeMap;

use trace_manifest::eval::{
    CheckpointOutcome, CheckpointScores, EvalResult, EvalSummary, JudgeSummary, Rubric, RubricOutcome, RubricScores,
    Spl, Verification, WebsiteSummary,
};
use trace_manifest::event::EventKind;
use trace_manifest::postprocess::{Checkpoint, CheckpointRole, Predicate};

use crate::evidence::{Evidence, Position, holds};

/// Scores `checkpoints` against an agent's session.
pub fn checkpoints(checkpoints: &[Checkpoint], evidence: &Evidence) -> CheckpointScores {
    let mut items = Vec::new();
    // Where the latest checkpoint in order was reached, and where the current step's are looked for from.
    let mut after = Position::START;
    let mut step_from = Position::START;
    let mut in_order_so_far = true;
    let earliest = |positions: &mut dyn Iterator<Item = Position>| positions.reduce(|a, b| if b < a { b } else { a });
    for (index, checkpoint) in checkpoints.iter().enumerate() {
        let same_step = index > 0 && checkpoint.step.is_some() && checkpoint.step == checkpoints[index - 1].step;
        if !same_step {
            step_from = after;
        }
        let ids = holds(&checkpoint.predicate, evidence);
        let positions: Vec<Position> = ids.iter().filter_map(|id| evidence.position(*id)).collect();
        let next_in_order = earliest(&mut positions.iter().copied().filter(|at| *at >= step_from));
        let in_order = in_order_so_far && next_in_order.is_some();
        in_order_so_far = in_order;
        let event_id = if in_order { next_in_order } else { earliest(&mut positions.iter().copied()) }.map(|at| at.id);
        // One step's checkpoints are its effects, set going at once (a rename's request, the address it
        // shows, the layout it saves): they may come in any order among themselves, all after the
        // previous step's.
        if let Some(next) = next_in_order.filter(|next| in_order && *next > after) {
            after = next;
        }
        items.push(CheckpointOutcome {
            id: checkpoint.id.clone(),
            predicate: checkpoint.predicate.clone(),
            reached: !ids.is_empty(),
            in_order,
            event_id,
            evidence: event_id.map(|id| describe(evidence, id)),
            role: checkpoint.role,
        });
    }
    let total = items.len();
    let reached_in_order = items.iter().filter(|item| item.in_order).count();
    let reached_any_order = items.iter().filter(|item| item.reached).count();
    let share = |count: usize| if total == 0 { 1.0 } else { count as f64 / total as f64 };
    CheckpointScores {
        total,
        reached_in_order,
        reached_any_order,
        partial_credit: share(reached_in_order),
        any_order_share: share(reached_any_order),
        items,
    }
}

/// Whether an action task succeeded: every state change and every final state was reached (see the
/// module's rule). Returns the verdict and what it rests on.
pub fn action_success(scores: &CheckpointScores) -> (bool, String) {
    let Some(last) = scores.items.last() else {
        return (false, "the recording has no checkpoints to judge an action task by".to_owned());
    };
    let with_roles = scores.items.iter().any(|item| item.role.is_some());
    let changes: Vec<&CheckpointOutcome> = scores
        .items
        .iter()
        .filter(|item| match item.role {
            Some(role) => role == CheckpointRole::StateChange,
            None => !with_roles && matches!(item.predicate, Predicate::Request { .. } | Predicate::Frame { .. }),
        })
        .collect();
    let finals: Vec<&CheckpointOutcome> = if with_roles {
        scores.items.iter().filter(|item| item.role == Some(CheckpointRole::FinalState)).collect()
    } else {
        vec![last]
    };
    let mut missing: Vec<&str> =
        changes.iter().chain(&finals).filter(|item| !item.reached).map(|item| item.id.as_str()).collect();
    let final_ids: Vec<&str> = finals.iter().map(|item| item.id.as_str()).collect();
    let basis = format!(
        "the {} state change(s) and the final state ({}) of the recording",
        changes.len(),
        if final_ids.is_empty() { "none".to_owned() } else { final_ids.join(", ") }
    );
    if changes.is_empty() && finals.is_empty() {
        return (false, "the recording has no state change or final state to judge an action task by".to_owned());
    }
    if missing.is_empty() {
        (true, format!("reached {basis}"))
    } else {
        missing.dedup();
        (false, format!("missed {} of {basis}", missing.join(", ")))
    }
}

/// Whether an information-retrieval answer equals the person's: the same items once normalized.
pub fn answers_match(expected: &str, given: &str) -> bool {
    let expected = normalize_answer(expected);
    !expected.is_empty() && expected == normalize_answer(given)
}

/// An answer as a sorted set of items: split on commas, semicolons and line breaks (a list in any
/// order), each item lowercased with its whitespace collapsed and its closing punctuation dropped, and
/// numbers written one way (`1,234.50`, `$1234.5` and `1234.5` are one number; `%` is kept).
pub fn normalize_answer(answer: &str) -> Vec<String> {
    let without_thousands = drop_thousands_separators(answer);
    let mut items: Vec<String> = without_thousands
        .split([',', ';', '\n'])
        .map(|item| {
            let item = item.split_whitespace().collect::<Vec<_>>().join(" ").to_lowercase();
            let item = item.trim_end_matches(['.', '!', '?']).trim().to_owned();
            normalize_number(&item).unwrap_or(item)
        })
        .filter(|item| !item.is_empty())
        .collect();
    items.sort();
    items.dedup();
    items
}

/// `1,234,567.5` → `1234567.5`: a comma between a digit and a group of exactly three digits.
fn drop_thousands_separators(text: &str) -> String {
    let chars: Vec<char> = text.chars().collect();
    let mut out = String::with_capacity(text.len());
    for (index, &c) in chars.iter().enumerate() {
        let is_separator = c == ','
            && index > 0
            && chars[index - 1].is_ascii_digit()
            && chars.len() > index + 3
            && chars[index + 1..=index + 3].iter().all(char::is_ascii_digit)
            && !chars.get(index + 4).is_some_and(char::is_ascii_digit);
        if !is_separator {
            out.push(c);
        }
    }
    out
}

/// A number with an optional currency sign, written without trailing zeros; `None` for anything else.
fn normalize_number(item: &str) -> Option<String> {
    let (body, percent) = match item.strip_suffix('%') {
        Some(body) => (body.trim(), "%"),
        None => (item, ""),
    };
    let body = body.trim_start_matches(['$', '€', '£', '¥']).trim();
    if body.is_empty() || !body.chars().all(|c| c.is_ascii_digit() || matches!(c, '.' | '-' | '+')) {
        return None;
    }
    let value: f64 = body.parse().ok()?;
    Some(format!("{value}{percent}"))
}

/// Scores a rubric; `None` scores the checkpoints as a rubric of equal weights.
pub fn rubric(rubric: Option<&Rubric>, checkpoints: &[Checkpoint], evidence: &Evidence) -> RubricScores {
    let (source, items): (&str, Vec<(String, f64, Verification)>) = match rubric {
        Some(rubric) => (
            "rubric.json",
            rubric.items.iter().map(|item| (item.id.clone(), item.weight, item.verification.clone())).collect(),
        ),
        None => (
            "checkpoints",
            checkpoints.iter().map(|c| (c.id.clone(), 1.0, Verification::Predicate(c.predicate.clone()))).collect(),
        ),
    };
    let outcomes: Vec<RubricOutcome> = items
        .into_iter()
        .map(|(id, weight, verification)| {
            let (satisfied, evidence) = match &verification {
                Verification::Predicate(predicate) => {
                    let first = holds(predicate, evidence).into_iter().min();
                    (Some(first.is_some()), first.map(|event_id| describe(evidence, event_id)))
                }
                Verification::Text(_) => (None, None),
            };
            RubricOutcome { id, weight, satisfied, evidence, judged_by: None }
        })
        .collect();
    let mut scores = RubricScores {
        source: source.to_owned(),
        averaged: 0.0,
        perfect: 0.0,
        unjudged: 0,
        judged: 0,
        items: outcomes,
    };
    total_rubric(&mut scores);
    scores
}

/// Sets a rubric's scores and counts from its items, as they stand once a judge has scored text items.
pub fn total_rubric(scores: &mut RubricScores) {
    let items = &scores.items;
    let scored = || items.iter().filter(|item| item.satisfied.is_some());
    let weight: f64 = scored().map(|item| item.weight).sum();
    let earned: f64 = scored().filter(|item| item.satisfied == Some(true)).map(|item| item.weight).sum();
    scores.averaged = if weight > 0.0 { earned / weight } else { 0.0 };
    scores.perfect = if !items.is_empty() && items.iter().all(|item| item.satisfied == Some(true)) { 1.0 } else { 0.0 };
    scores.unjudged = items.iter().filter(|item| item.satisfied.is_none()).count();
    scores.judged = items.iter().filter(|item| item.judged_by.is_some() && item.satisfied.is_some()).count();
}

/// SPL of one episode ([`Spl`]): the rubric scores over the agent's `steps` (at least one), beside its
/// `navigation` SPL ([`navigation_spl`]).
pub fn spl(rubric: &RubricScores, steps: usize, navigation: f64) -> Spl {
    let taken = steps.max(1) as f64;
    Spl { averaged: rubric.averaged / taken, perfect: rubric.perfect / taken, navigation }
}

/// The navigation SPL of Anderson et al.: `success` × l / max(p, l), p the agent's `steps` and l the
/// person's `person_steps` (each at least one).
pub fn navigation_spl(success: bool, steps: usize, person_steps: usize) -> f64 {
    let (taken, shortest) = (steps.max(1) as f64, person_steps.max(1) as f64);
    if success { shortest / taken.max(shortest) } else { 0.0 }
}

/// One event of a session in words: the request and its answer, the page reached, the page shown.
pub fn describe(evidence: &Evidence, event_id: u64) -> String {
    if let Some(exchange) = evidence.exchanges.iter().find(|exchange| exchange.request_event == event_id) {
        let status = exchange.status.map_or_else(|| "no answer".to_owned(), |status| status.to_string());
        return format!("{} {} → {status}", exchange.method, exchange.url);
    }
    if let Some(page) = evidence.pages.iter().find(|page| page.event_id == event_id) {
        return format!("{} showed it ({})", page.url, page.file);
    }
    match evidence.events.iter().find(|record| record.id == event_id).map(|record| &record.event.kind) {
        Some(EventKind::Navigation(navigation)) => format!("reached {}", navigation.url),
        Some(kind) => format!("event {event_id} ({})", kind.name()),
        None => format!("event {event_id}"),
    }
}

/// The Wilson score interval of `successes` in `n` at 95%; `[0, 1]` when there is nothing to go by.
pub fn wilson_interval(successes: f64, n: usize) -> [f64; 2] {
    if n == 0 {
        return [0.0, 1.0];
    }
    let n = n as f64;
    let z = 1.959_963_984_540_054_f64;
    let p = successes / n;
    let denominator = 1.0 + z * z / n;
    let center = (p + z * z / (2.0 * n)) / denominator;
    let half = z * (p * (1.0 - p) / n + z * z / (4.0 * n * n)).sqrt() / denominator;
    [(center - half).max(0.0), (center + half).min(1.0)]
}

/// Bootstrap resamples behind every interval of a summary.
const BOOTSTRAP_ROUNDS: usize = 2000;
/// The resamples' seed: fixed, so that the same results always give the same intervals.
const BOOTSTRAP_SEED: u64 = 0x7472_6163_6500_0001;

/// A 95% bootstrap interval of the mean over groups of the groups' means, resampling values within each
/// group (stratified by website).
pub fn macro_bootstrap_interval(groups: &[Vec<f64>]) -> [f64; 2] {
    let groups: Vec<&Vec<f64>> = groups.iter().filter(|group| !group.is_empty()).collect();
    if groups.is_empty() {
        return [0.0, 1.0];
    }
    let mut random = SplitMix64(BOOTSTRAP_SEED);
    let mut means: Vec<f64> = (0..BOOTSTRAP_ROUNDS)
        .map(|_| {
            let sum: f64 = groups
                .iter()
                .map(|group| {
                    let total: f64 = (0..group.len()).map(|_| group[random.below(group.len())]).sum();
                    total / group.len() as f64
                })
                .sum();
            sum / groups.len() as f64
        })
        .collect();
    means.sort_by(f64::total_cmp);
    let at = |quantile: f64| means[((quantile * (means.len() - 1) as f64).round()) as usize];
    [at(0.025), at(0.975)]
}

/// The resampling's random numbers: SplitMix64, small and fully determined by its seed (the same sequence
/// on every machine; benchmarks draw their inputs from it too).
pub struct SplitMix64(pub u64);

impl SplitMix64 {
    pub fn next_u64(&mut self) -> u64 {
        self.0 = self.0.wrapping_add(0x9E37_79B9_7F4A_7C15);
        let mut z = self.0;
        z = (z ^ (z >> 30)).wrapping_mul(0xBF58_476D_1CE4_E5B9);
        z = (z ^ (z >> 27)).wrapping_mul(0x94D0_49BB_1331_11EB);
        z ^ (z >> 31)
    }

    /// A number in `0..n`.
    pub fn below(&mut self, n: usize) -> usize {
        (self.next_u64() % n as u64) as usize
    }
}

/// A run's summary. Results are taken in task-id order, so that the order they finished in (a parallel
/// run, merged shards) does not change a figure. Tasks whose bundle's audit failed are counted apart and
/// in no figure.
pub fn summarize(results: &[EvalResult]) -> EvalSummary {
    let invalid_tasks = results.iter().filter(|r| r.task_invalid()).count();
    let mut results: Vec<&EvalResult> = results.iter().filter(|r| !r.task_invalid()).collect();
    results.sort_by(|a, b| a.task_id.as_str().cmp(b.task_id.as_str()));
    let mean = |values: &mut dyn Iterator<Item = f64>| {
        let (sum, count) = values.fold((0.0, 0usize), |(sum, count), value| (sum + value, count + 1));
        if count == 0 { 0.0 } else { sum / count as f64 }
    };
    let n = results.len();
    let successes: f64 = results.iter().map(|r| r.success).sum();
    let mut by_website: BTreeMap<&str, Vec<&EvalResult>> = BTreeMap::new();
    for result in &results {
        by_website.entry(result.website.as_str()).or_default().push(result);
    }
    let success_groups: Vec<Vec<f64>> =
        by_website.values().map(|group| group.iter().map(|r| r.success).collect()).collect();
    let credit_groups: Vec<Vec<f64>> =
        by_website.values().map(|group| group.iter().map(|r| r.checkpoints.partial_credit).collect()).collect();
    let websites: Vec<WebsiteSummary> = by_website
        .iter()
        .map(|(website, group)| WebsiteSummary {
            website: (*website).to_owned(),
            tasks: group.len(),
            success_rate: mean(&mut group.iter().map(|r| r.success)),
            success_interval: macro_bootstrap_interval(&[group.iter().map(|r| r.success).collect()]),
            partial_credit_mean: mean(&mut group.iter().map(|r| r.checkpoints.partial_credit)),
            rubric_averaged_mean: mean(&mut group.iter().map(|r| r.rubric.averaged)),
            spl_averaged: mean(&mut group.iter().map(|r| r.spl.averaged)),
        })
        .collect();
    EvalSummary {
        tasks: n,
        invalid_tasks,
        unaudited_tasks: results.iter().filter(|r| r.audit.is_none()).count(),
        errors: results.iter().filter(|r| r.error.is_some()).count(),
        success_rate: if n == 0 { 0.0 } else { successes / n as f64 },
        success_interval: wilson_interval(successes, n),
        partial_credit_mean: mean(&mut results.iter().map(|r| r.checkpoints.partial_credit)),
        any_order_share_mean: mean(&mut results.iter().map(|r| r.checkpoints.any_order_share)),
        rubric_averaged_mean: mean(&mut results.iter().map(|r| r.rubric.averaged)),
        rubric_perfect_rate: mean(&mut results.iter().map(|r| r.rubric.perfect)),
        spl_averaged: mean(&mut results.iter().map(|r| r.spl.averaged)),
        spl_perfect: mean(&mut results.iter().map(|r| r.spl.perfect)),
        spl_navigation: mean(&mut results.iter().map(|r| r.spl.navigation)),
        steps_mean: mean(&mut results.iter().map(|r| r.steps as f64)),
        seconds_mean: mean(&mut results.iter().map(|r| r.duration_seconds)),
        macro_success_rate: mean(&mut websites.iter().map(|w| w.success_rate)),
        macro_success_interval: macro_bootstrap_interval(&success_groups),
        macro_partial_credit: mean(&mut websites.iter().map(|w| w.partial_credit_mean)),
        macro_partial_credit_interval: macro_bootstrap_interval(&credit_groups),
        websites,
        judge: summarize_judge(&results),
    }
}

/// The judge's figures over the tasks it gave a success verdict on; `None` when no task was judged.
fn summarize_judge(results: &[&EvalResult]) -> Option<JudgeSummary> {
    let judged: Vec<&EvalResult> = results.iter().copied().filter(|r| r.judge.is_some()).collect();
    if judged.is_empty() {
        return None;
    }
    let mut models: Vec<String> = judged.iter().filter_map(|r| r.judge.as_ref()).map(|j| j.model.clone()).collect();
    models.sort();
    models.dedup();
    let verdicts: Vec<(&EvalResult, bool, f64)> = judged
        .iter()
        .filter_map(|r| {
            let judge = r.judge.as_ref()?;
            Some((*r, judge.success.as_ref()?.satisfied, judge.partial_credit))
        })
        .collect();
    let n = verdicts.len();
    let share = |count: usize| if n == 0 { 0.0 } else { count as f64 / n as f64 };
    let successes = verdicts.iter().filter(|(_, success, _)| *success).count();
    let agreeing = verdicts.iter().filter(|(r, success, _)| (r.success > 0.0) == *success).count();
    Some(JudgeSummary {
        models,
        tasks: n,
        success_rate: share(successes),
        success_interval: wilson_interval(successes as f64, n),
        partial_credit_mean: if n == 0 {
            0.0
        } else {
            verdicts.iter().map(|(_, _, credit)| credit).sum::<f64>() / n as f64
        },
        agreement: share(agreeing),
        errors: judged.iter().filter(|r| r.judge.as_ref().is_some_and(|j| j.error.is_some())).count(),
    })
}

/// `summary.md`: the summary as a person reads it, then one line per task.
pub fn summary_text(summary: &EvalSummary, results: &[EvalResult]) -> String {
    use std::fmt::Write as _;
    let mut results: Vec<&EvalResult> = results.iter().collect();
    results.sort_by(|a, b| a.task_id.as_str().cmp(b.task_id.as_str()));
    let percent = |value: f64| format!("{:.1}%", value * 100.0);
    let interval = |[low, high]: [f64; 2]| format!("[{}, {}]", percent(low), percent(high));
    let mut text = String::from("# Evaluation summary\n\n");
    let _ = writeln!(text, "| | |\n|---|---|");
    let _ = writeln!(text, "| tasks | {} ({} with an agent error) |", summary.tasks, summary.errors);
    if summary.invalid_tasks > 0 {
        let _ = writeln!(text, "| invalid tasks (their audit failed; in no figure here) | {} |", summary.invalid_tasks);
    }
    if summary.unaudited_tasks > 0 {
        let _ = writeln!(text, "| tasks never audited | {} |", summary.unaudited_tasks);
    }
    let _ = writeln!(
        text,
        "| success | {} (Wilson 95% {}) |",
        percent(summary.success_rate),
        interval(summary.success_interval)
    );
    let _ = writeln!(text, "| partial credit (in order) | {} |", percent(summary.partial_credit_mean));
    let _ = writeln!(text, "| checkpoints reached (any order) | {} |", percent(summary.any_order_share_mean));
    let _ = writeln!(
        text,
        "| rubric averaged / perfect | {} / {} |",
        percent(summary.rubric_averaged_mean),
        percent(summary.rubric_perfect_rate)
    );
    let _ = writeln!(
        text,
        "| SPL (Odysseys) averaged / perfect | {:.3} / {:.3} |",
        summary.spl_averaged, summary.spl_perfect
    );
    let _ = writeln!(text, "| SPL (navigation, against the person's path) | {:.3} |", summary.spl_navigation);
    let _ = writeln!(text, "| steps, seconds (mean) | {:.1}, {:.1} |", summary.steps_mean, summary.seconds_mean);
    let _ = writeln!(
        text,
        "| macro success over websites | {} (bootstrap 95% {}) |",
        percent(summary.macro_success_rate),
        interval(summary.macro_success_interval)
    );
    let _ = writeln!(
        text,
        "| macro partial credit | {} (bootstrap 95% {}) |",
        percent(summary.macro_partial_credit),
        interval(summary.macro_partial_credit_interval)
    );
    if let Some(judge) = &summary.judge {
        let _ = writeln!(
            text,
            "| judge ({}): success | {} (Wilson 95% {}) over {} tasks, agreeing with the rules on {} |",
            judge.models.join(", "),
            percent(judge.success_rate),
            interval(judge.success_interval),
            judge.tasks,
            percent(judge.agreement)
        );
        let _ = writeln!(
            text,
            "| judge: partial credit | {} ({} tasks judged in part) |",
            percent(judge.partial_credit_mean),
            judge.errors
        );
        let _ = writeln!(
            text,
            "\nThe judge's figures come from a model. Every other figure is computed from the recorded sessions, but \
             rubric text items, which only the judge scores (marked `judged_by` in `result.json`)."
        );
    }
    let _ = writeln!(text, "\n## Websites\n\n| website | tasks | success | 95% | partial credit | rubric | SPL |");
    let _ = writeln!(text, "|---|---|---|---|---|---|---|");
    for site in &summary.websites {
        let _ = writeln!(
            text,
            "| {} | {} | {} | {} | {} | {} | {:.3} |",
            site.website,
            site.tasks,
            percent(site.success_rate),
            interval(site.success_interval),
            percent(site.partial_credit_mean),
            percent(site.rubric_averaged_mean),
            site.spl_averaged
        );
    }
    let _ = writeln!(
        text,
        "\n## Tasks\n\n| task | website | success | judge | checkpoints | rubric | steps | seconds | error |"
    );
    let _ = writeln!(text, "|---|---|---|---|---|---|---|---|---|");
    for result in results {
        let _ = writeln!(
            text,
            "| {} | {} | {} | {} | {}/{} | {} | {} | {:.1} | {} |",
            result.task_id,
            result.website,
            result.success,
            match result.judge.as_ref().and_then(|judge| judge.success.as_ref()) {
                Some(verdict) =>
                    if verdict.satisfied {
                        "yes"
                    } else {
                        "no"
                    },
                None if result.judge.is_some() => "?",
                None => "",
            },
            result.checkpoints.reached_in_order,
            result.checkpoints.total,
            percent(result.rubric.averaged),
            result.steps,
            result.duration_seconds,
            result.error.as_deref().unwrap_or("").replace('|', "\\|").replace('\n', " ")
        );
    }
    text
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn answers_match_across_case_spacing_number_forms_and_list_order() {
        for (expected, given) in [
            ("Blue Mug", "  blue   mug. "),
            ("$1,234.50", "1234.5"),
            ("12", "12.0"),
            ("red, green, blue", "Blue; RED\ngreen"),
            ("1,234 and more", "1234 and more"),
            ("45%", "45.0%"),
        ] {
            assert!(answers_match(expected, given), "{expected:?} vs {given:?}");
        }
        for (expected, given) in
            [("Blue Mug", "Red Mug"), ("12", "13"), ("red, green", "red"), ("45%", "45"), ("anything", "")]
        {
            assert!(!answers_match(expected, given), "{expected:?} vs {given:?}");
        }
        assert!(!answers_match("", ""), "an empty expected answer matches nothing");
    }

    fn reached(urls: &[&str]) -> Evidence {
        use trace_manifest::event::{Event, EventRecord, Navigation, NavigationCause};
        let events = urls
            .iter()
            .enumerate()
            .map(|(id, url)| EventRecord {
                id: id as u64,
                event: Event {
                    ts: id as f64,
                    tab_id: Some(1),
                    frame_id: None,
                    kind: EventKind::Navigation(Navigation {
                        url: format!("http://shop.test{url}"),
                        cause: NavigationCause::Link,
                        main_frame: true,
                    }),
                },
            })
            .collect();
        Evidence { events, ..Evidence::default() }
    }

    fn pages(patterns: &[&str]) -> Vec<Checkpoint> {
        patterns
            .iter()
            .enumerate()
            .map(|(index, pattern)| Checkpoint {
                id: format!("cp{}", index + 1),
                reason: String::new(),
                predicate: Predicate::Url { pattern: format!("shop.test{pattern}") },
                event_ids: Vec::new(),
                step: None,
                role: None,
                proposed_by: None,
            })
            .collect()
    }

    #[test]
    fn checkpoints_count_in_order_until_the_first_missed_and_in_any_order_beside() {
        let expected = pages(&["/login", "/account", "/cart", "/done"]);
        let scores = checkpoints(&expected, &reached(&["/login", "/account", "/done"]));
        let in_order: Vec<bool> = scores.items.iter().map(|item| item.in_order).collect();
        assert_eq!(in_order, [true, true, false, false]);
        assert_eq!((scores.reached_in_order, scores.reached_any_order), (2, 3));
        assert_eq!((scores.partial_credit, scores.any_order_share), (0.5, 0.75));
        assert_eq!(scores.items[3].evidence.as_deref(), Some("reached http://shop.test/done"));

        // A state reached only before the previous checkpoint's does not count in order.
        let scores = checkpoints(&expected, &reached(&["/cart", "/login", "/account", "/done"]));
        assert_eq!(scores.reached_in_order, 2);
        assert_eq!(scores.reached_any_order, 4);
        // Reached again after, it does.
        let scores = checkpoints(&expected, &reached(&["/cart", "/login", "/account", "/cart", "/done"]));
        assert_eq!(scores.reached_in_order, 4);
        assert!(action_success(&scores).0);
    }

    #[test]
    fn one_steps_checkpoints_count_in_order_whichever_of_them_came_first() {
        let step = |mut checkpoints: Vec<Checkpoint>, steps: &[usize]| {
            for (checkpoint, step) in checkpoints.iter_mut().zip(steps) {
                checkpoint.step = Some(*step);
            }
            checkpoints
        };
        // A rename's effects (its request, the address it shows) in either order after the save's.
        let expected = step(pages(&["/saved", "/renamed", "/answer"]), &[1, 2, 2]);
        let scores = checkpoints(&expected, &reached(&["/saved", "/answer", "/renamed"]));
        assert_eq!(scores.reached_in_order, 3);
        // Still all after the step before: one of them before the save is out of order.
        let scores = checkpoints(&expected, &reached(&["/answer", "/saved", "/renamed"]));
        assert_eq!(scores.reached_in_order, 2);
        // Two steps' checkpoints keep the recorded order.
        let expected = step(pages(&["/saved", "/renamed", "/answer"]), &[1, 2, 3]);
        let scores = checkpoints(&expected, &reached(&["/saved", "/answer", "/renamed"]));
        assert_eq!(scores.reached_in_order, 2);
    }

    #[test]
    fn an_action_task_succeeds_on_its_state_changes_and_its_final_state() {
        let mut expected = pages(&["/account", "/done"]);
        expected.insert(
            0,
            Checkpoint {
                id: "cp0".into(),
                reason: String::new(),
                predicate: Predicate::Request {
                    method: "POST".into(),
                    url_pattern: "shop.test/cart".into(),
                    body_fields: Default::default(),
                    credential_fields: Default::default(),
                },
                event_ids: Vec::new(),
                step: None,
                role: None,
                proposed_by: None,
            },
        );
        // The pages without the state change: no success, and the basis says what was missed.
        let scores = checkpoints(&expected, &reached(&["/account", "/done"]));
        let (success, basis) = action_success(&scores);
        assert!(!success && basis.contains("cp0"), "{basis}");
        let (success, basis) = action_success(&checkpoints(&[], &reached(&["/done"])));
        assert!(!success && basis.contains("no checkpoints"), "{basis}");
    }

    #[test]
    fn navigation_spl_weighs_a_success_by_the_persons_path_and_a_failure_not_at_all() {
        // The person's own path, and a shorter one: full marks; twice as long: half.
        assert_eq!(navigation_spl(true, 8, 8), 1.0);
        assert_eq!(navigation_spl(true, 5, 8), 1.0);
        assert_eq!(navigation_spl(true, 16, 8), 0.5);
        // A failure earns nothing however short.
        assert_eq!(navigation_spl(false, 1, 8), 0.0);
        // An agent that answered at once took no step: counted as one, never a division by zero.
        assert_eq!(navigation_spl(true, 0, 0), 1.0);
    }

    #[test]
    fn a_rubric_scores_its_predicates_and_leaves_text_items_to_a_judge() {
        use trace_manifest::eval::RubricItem;
        let item = |id: &str, weight: f64, verification: Verification| RubricItem {
            id: id.into(),
            weight,
            requirement: String::new(),
            verification,
        };
        let rubric = Rubric {
            items: vec![
                item("a", 3.0, Verification::Predicate(Predicate::Url { pattern: "shop.test/cart".into() })),
                item("b", 1.0, Verification::Predicate(Predicate::Url { pattern: "shop.test/never".into() })),
                item("c", 5.0, Verification::Text("the answer is polite".into())),
            ],
        };
        let scores = rubric_scores(&rubric);
        assert_eq!((scores.averaged, scores.perfect, scores.unjudged), (0.75, 0.0, 1));
        assert_eq!(scores.items[2].satisfied, None);
        assert_eq!(spl(&scores, 3, 0.0).averaged, 0.25);
        let from_checkpoints = super::rubric(None, &pages(&["/cart"]), &reached(&["/cart"]));
        assert_eq!((from_checkpoints.source.as_str(), from_checkpoints.perfect), ("checkpoints", 1.0));
    }

    fn rubric_scores(rubric: &Rubric) -> RubricScores {
        super::rubric(Some(rubric), &[], &reached(&["/cart"]))
    }

    /// Issue #29: a task whose checkpoints do not discriminate is counted apart, not averaged in.
    #[test]
    fn a_summary_counts_invalid_tasks_apart_and_averages_the_rest() {
        let result = |task: &str, success: f64, valid: Option<bool>| -> EvalResult {
            let audit = valid
                .map(|valid| serde_json::json!({"valid": valid, "audited_at": "", "runs_as_expected": 2, "runs": 2}));
            serde_json::from_value(serde_json::json!({
                "task_id": task, "website": "http://shop.test/", "task_type": "action", "description": "",
                "agent": "a", "started_at": "", "duration_seconds": 1.0, "ended": {"kind": "replayed"},
                "steps": 2, "said_done": true, "success": success, "success_basis": "",
                "checkpoints": {"total": 1, "reached_in_order": success as usize, "reached_any_order": success as usize,
                                "partial_credit": success, "any_order_share": success, "items": []},
                "rubric": {"source": "checkpoints", "averaged": success, "perfect": success, "unjudged": 0, "judged": 0, "items": []},
                "spl": {"averaged": success / 2.0, "perfect": success / 2.0},
                "requests": {"exact": 0, "canonical": 0, "fuzzy": 0, "ignored": 0, "missed": 0},
                "live_attempts": 0,
                "audit": audit,
            }))
            .unwrap()
        };
        let results = [result("a", 1.0, Some(true)), result("b", 0.0, None), result("c", 1.0, Some(false))];
        let summary = summarize(&results);
        assert_eq!((summary.tasks, summary.invalid_tasks, summary.unaudited_tasks), (2, 1, 1));
        assert_eq!(summary.success_rate, 0.5, "the invalid task's success is in no figure");
        assert!(summary_text(&summary, &results).contains("| invalid tasks"));
    }

    #[test]
    fn wilson_intervals_are_the_published_ones() {
        // Values from Wilson (1927) as tabulated in Newcombe (1998), method 3.
        let [low, high] = wilson_interval(81.0, 263);
        assert!((low - 0.2553).abs() < 5e-4 && (high - 0.3662).abs() < 5e-4, "{low} {high}");
        let [low, high] = wilson_interval(0.0, 10);
        assert!(low == 0.0 && (high - 0.2775).abs() < 5e-4, "{low} {high}");
        assert_eq!(wilson_interval(0.0, 0), [0.0, 1.0]);
    }

    #[test]
    fn bootstrap_intervals_are_reproducible_and_contain_the_mean() {
        let groups = vec![vec![1.0, 0.0, 1.0, 1.0], vec![0.0, 0.0, 1.0]];
        let first = macro_bootstrap_interval(&groups);
        assert_eq!(first, macro_bootstrap_interval(&groups));
        let mean = (0.75 + 1.0 / 3.0) / 2.0;
        assert!(first[0] < mean && mean < first[1], "{first:?}");
        assert_eq!(macro_bootstrap_interval(&[vec![1.0, 1.0]]), [1.0, 1.0]);
    }
}
