//! `trace-replay audit`: proves, for each bundle of a source, that its checkpoints discriminate. The runs
//! are episodes as `eval` runs them ([`crate::eval`]), offline and recorded: the person's demonstration,
//! the built-in agent that does nothing, and the perturbed demonstrations `trace_analysis::audit` asks for
//! (a state-changing step left out, a typed or chosen value altered), and the demonstration again through
//! the proxy ([`crate::proxied_rerun`]), which proves the bundle on the path BrowserGym's package takes.
//! What they show is judged by
//! `trace_analysis::audit`; this module runs them and writes, per task, into the audit's directory:
//!
//! ```text
//! OUT/<task>/audit.json          the verdict, each run's scores, each checkpoint's evidence per run
//! OUT/<task>/checkpoints.json    the checkpoints judged (with --prune, those that discriminate)
//! OUT/<task>/<run>/              each run's episode (result.json, session/, and for the demonstration and
//!                                the perturbed runs rerun.json, the re-run step by step)
//! ```
//!
//! A model may propose checkpoints too ([`crate::proposals`]); its proposals are judged with the rules'
//! own and, with `--prune`, kept only if they discriminate. Replay never writes into a bundle:
//! `trace-host process` copies the two files into its bundle.

use std::path::{Path, PathBuf};

use anyhow::{Context, Result};
use futures::StreamExt;
use trace_analysis::audit::{self, Run, run_name};
use trace_analysis::evidence::Evidence;
use trace_bundle::archive::Bundle;
use trace_manifest::audit::{AUDIT_FILE, Audit, AuditRunKind};
use trace_manifest::eval::SESSION_DIR;
use trace_manifest::postprocess::{CHECKPOINTS_FILE, Checkpoint};
use trace_manifest::time_fmt::{now_ms, rfc3339_from_millis};
use trace_store::atomic;

use crate::archive::open_bundle;
use crate::browsers::Browsers;
use crate::eval::{Agent, Episode, EvalOptions, OpenedTask, Perturbation};
use crate::proposals::Proposer;
use crate::proxied_rerun::rerun_through_proxy;
use crate::tasks::TaskSource;

/// How many times the demonstration is run before its failed steps are believed.
const DEMONSTRATION_ATTEMPTS: usize = 3;

/// How an audit runs.
pub struct AuditOptions {
    /// The episodes' options; the agent is set per run.
    pub episode: EvalOptions,
    /// Drop the checkpoints that do not discriminate, and judge the rest.
    pub prune: bool,
    /// Runs at once, each in a browser context of its own, in browsers the runs share (unless
    /// `episode.browser_per_episode`).
    pub parallel: usize,
    /// A model that proposes checkpoints beside the rules (`--llm`).
    pub proposer: Option<Proposer>,
    /// Re-run the demonstration through the proxy too (not with `--skip-proxy`).
    pub through_proxy: bool,
}

/// One task's audit and where it was written.
pub struct TaskAudit {
    pub audit: Audit,
    /// The checkpoints judged: the bundle's (and a model's proposals), less what pruning dropped.
    pub checkpoints: Vec<Checkpoint>,
    pub dir: PathBuf,
}

/// `trace-replay audit`: audits every task of `source` (a bundle or a dataset), one after another, into
/// `out/<task>/`, handing each audit to `audited` as it is done; returns them in task order.
pub async fn audit_tasks(
    source: &Path,
    out: &Path,
    options: &AuditOptions,
    mut audited: impl FnMut(&Audit),
) -> Result<Vec<Audit>> {
    let tasks = crate::tasks::tasks(source, options.episode.limits)?;
    let mut audits = Vec::with_capacity(tasks.len());
    for task in &tasks {
        let task_audit = audit_task(task, out, options).await?;
        audited(&task_audit.audit);
        audits.push(task_audit.audit);
    }
    Ok(audits)
}

/// Audits one task into `out/<task>/`.
pub async fn audit_task(task: &TaskSource, out: &Path, options: &AuditOptions) -> Result<TaskAudit> {
    // The bundle is opened once: the reference and a model's evidence are read from it, and it then
    // serves every run (the one through the proxy too), its bodies read and kept once.
    let mut bundle = open_bundle(&task.bundle, options.episode.limits)?;
    let recording = match options.proposer {
        Some(_) => Some(Evidence::load_recording(&mut bundle)?),
        None => None,
    };
    let opened = &OpenedTask::of_bundle(bundle)?;
    let reference = &opened.reference;
    let dir = out.join(task.task_id.as_str());
    std::fs::create_dir_all(&dir).with_context(|| format!("cannot create {}", dir.display()))?;
    let candidates = match (&options.proposer, &recording) {
        (Some(proposer), Some(recording)) => proposer.propose(reference, recording).await?,
        _ => reference.checkpoints.clone(),
    };
    drop(recording);
    let mut kinds = vec![AuditRunKind::Demonstration, AuditRunKind::Nothing];
    kinds.extend(audit::perturbations(reference.task.task_type, &reference.calls, &candidates));
    if options.through_proxy {
        kinds.push(AuditRunKind::DemonstrationThroughProxy);
    }

    // The runs share browsers, each run in a browser context of its own ([`crate::browsers`]).
    let browsers = &Browsers::new(options.episode.browser.clone(), !options.episode.browser_per_episode);
    let run = |kind: AuditRunKind| {
        let dir = &dir;
        async move {
            let agent = match &kind {
                AuditRunKind::Demonstration | AuditRunKind::DemonstrationThroughProxy => Agent::Human,
                AuditRunKind::Nothing | AuditRunKind::AnswerFromStart => Agent::Nothing,
                AuditRunKind::StepLeftOut { step } => Agent::Perturbed(Perturbation::StepLeftOut(*step)),
                AuditRunKind::ValueAltered { step } => Agent::Perturbed(Perturbation::ValueAltered(*step)),
                AuditRunKind::CredentialAltered { step } => Agent::Perturbed(Perturbation::CredentialAltered(*step)),
            };
            let options = EvalOptions { agent, webarena_infinity: false, judge: None, ..options.episode.clone() };
            let run_dir = dir.join(run_name(&kind));
            let result = match &kind {
                AuditRunKind::DemonstrationThroughProxy => rerun_through_proxy(opened, &run_dir, &options).await,
                _ => Episode { task, out: &run_dir, options: &options, opened: Some(opened) }.run_in(browsers).await,
            };
            (kind, run_dir, result)
        }
    };
    // The runs as long as the demonstration start first and the short one that does nothing last, so
    // that the audit takes about its longest run rather than a long run started last; they are reported
    // in the order above.
    let mut launch_order: Vec<usize> = (0..kinds.len()).collect();
    launch_order.sort_by_key(|&index| match kinds[index] {
        AuditRunKind::Demonstration => 0,
        AuditRunKind::DemonstrationThroughProxy => 1,
        AuditRunKind::StepLeftOut { .. }
        | AuditRunKind::ValueAltered { .. }
        | AuditRunKind::CredentialAltered { .. } => 2,
        AuditRunKind::Nothing | AuditRunKind::AnswerFromStart => 3,
    });
    let launched = launch_order.iter().map(|&index| run(kinds[index].clone()));
    // Unordered: a run that ends frees its place at once, whatever started before it is still running.
    let mut episodes =
        futures::stream::iter(launched).buffer_unordered(options.parallel.max(1)).collect::<Vec<_>>().await;
    episodes.sort_by_key(|(kind, _, _)| kinds.iter().position(|listed| listed == kind));
    // Pruning keeps only what the demonstration reaches, so a demonstration that lost a step to a loaded
    // machine (a click before the page answered) would cost the bundle the checkpoints after that step.
    // It is re-run alone, with the machine no longer shared with the other runs, before it is believed.
    // The proxy run only proves a path more, and a bundle that path cannot serve fails it every time: it
    // gets one more try.
    let attempts =
        [(AuditRunKind::Demonstration, DEMONSTRATION_ATTEMPTS), (AuditRunKind::DemonstrationThroughProxy, 2)];
    for (demonstration, attempts) in attempts {
        for attempt in 2..=attempts {
            let Some(index) = episodes.iter().position(|(kind, _, result)| {
                *kind == demonstration && result.as_ref().is_ok_and(|result| result.error.is_some())
            }) else {
                break;
            };
            if let (_, _, Ok(result)) = &episodes[index] {
                tracing::warn!(
                    task = %task.task_id,
                    "the {} run went wrong ({}); running it again, attempt {attempt} of {attempts}",
                    run_name(&demonstration),
                    result.error.as_deref().unwrap_or_default()
                );
            }
            episodes[index] = run(demonstration.clone()).await;
        }
    }
    browsers.close().await;

    // Each run's kind, evidence, answer and error.
    let mut sessions: Vec<(AuditRunKind, Evidence, Option<String>, Option<String>)> = Vec::new();
    for (kind, run_dir, result) in episodes {
        let session = run_dir.join(SESSION_DIR);
        let evidence = || -> Result<Evidence> {
            let mut bundle = Bundle::open_with_limits(&session, options.episode.limits)
                .with_context(|| format!("cannot open the session {}", session.display()))?;
            Ok(Evidence::load(&mut bundle)?.judged_with_credentials(&reference.credentials))
        };
        match (kind, result) {
            // The proxy run only proves a path more: one that cannot be run (its proxy, its browser) leaves
            // the bundle proven on the DevTools path, saying why.
            (kind @ AuditRunKind::DemonstrationThroughProxy, result) => {
                match result.and_then(|result| Ok((evidence()?, result))) {
                    Ok((evidence, result)) => sessions.push((kind, evidence, result.answer, result.error)),
                    Err(error) => sessions.push((kind, Evidence::default(), None, Some(format!("{error:#}")))),
                }
            }
            (kind, result) => {
                let result = result.with_context(|| format!("the audit's {} run could not be run", run_name(&kind)))?;
                sessions.push((kind, evidence()?, result.answer, result.error));
            }
        }
    }
    let runs: Vec<Run<'_>> = sessions
        .iter()
        .map(|(kind, evidence, answer, error)| Run {
            kind: kind.clone(),
            evidence,
            answer: answer.clone(),
            error: error.clone(),
        })
        .collect();
    let (audit, checkpoints) =
        audit::judge(&reference.task, &candidates, &runs, options.prune, rfc3339_from_millis(now_ms()));
    atomic::write_json(&dir.join(AUDIT_FILE), &audit)?;
    atomic::write_json(&dir.join(CHECKPOINTS_FILE), &checkpoints)?;
    Ok(TaskAudit { audit, checkpoints, dir })
}
