//! The audit of a bundle's checkpoints as the end-to-end tests ask for it (`trace-replay audit`), and what
//! a passing audit is: the person's demonstration, re-run offline, succeeds with every checkpoint reached in
//! order, on both paths an agent is scored on (DevTools, and through the proxy as BrowserGym's package
//! serves it); an agent that does nothing reaches none and fails; every perturbed demonstration (a
//! state-changing step left out, a typed or chosen value altered, a wrong credential) fails.

use std::path::Path;

use trace_analysis::audit::run_name;
use trace_manifest::audit::{Audit, AuditRunKind, CheckpointVerdict, ServingPath};
use trace_manifest::bundle::{DOM_DIR, SCREENSHOTS_DIR};
use trace_manifest::eval::{RERUN_FILE, SESSION_DIR};
use trace_manifest::report::FidelityReport;

use crate::browser::Build;

/// `trace-replay audit BUNDLE --json` in this build's Chromium: the bundle's audit, whatever its verdict.
pub fn audit(build: &Build, bundle: &Path) -> Audit {
    audit_into(build, bundle, tempfile::tempdir().unwrap().path())
}

/// [`audit`], with the report of its demonstration's re-run (its `rerun.json`): the person's steps re-run
/// offline, step by step, as `trace-replay run --human` reports them, without running them once more.
pub fn audit_with_rerun(build: &Build, bundle: &Path) -> (Audit, FidelityReport) {
    let out = tempfile::tempdir().unwrap();
    let audit = audit_into(build, bundle, out.path());
    let rerun = out.path().join(audit.task_id.as_str()).join(run_name(&AuditRunKind::Demonstration)).join(RERUN_FILE);
    let report = std::fs::read(&rerun).unwrap_or_else(|error| panic!("{}: {error}", rerun.display()));
    // The runs judged by their checkpoints alone (the perturbed ones) keep the pages' text and no pictures;
    // the demonstration keeps both, for the people who look at its re-run.
    for run in &audit.runs {
        let session = out.path().join(audit.task_id.as_str()).join(&run.name).join(SESSION_DIR);
        let files = |dir: &str| std::fs::read_dir(session.join(dir)).map_or(0, |entries| entries.count());
        let (screenshots, snapshots) = (files(SCREENSHOTS_DIR), files(DOM_DIR));
        match run.kind {
            AuditRunKind::StepLeftOut { .. }
            | AuditRunKind::ValueAltered { .. }
            | AuditRunKind::CredentialAltered { .. } => {
                assert!(
                    screenshots == 0 && snapshots > 0,
                    "{}: {screenshots} screenshots, {snapshots} snapshots",
                    run.name
                )
            }
            AuditRunKind::Demonstration => {
                assert!(
                    screenshots > 0 && snapshots > 0,
                    "{}: {screenshots} screenshots, {snapshots} snapshots",
                    run.name
                )
            }
            _ => {}
        }
    }
    (audit, serde_json::from_slice(&report).unwrap())
}

/// [`audit`], its runs' folders written into `out` (each run's `rerun.json`, `session/`), for a test to
/// read.
pub fn audit_into(build: &Build, bundle: &Path, out: &Path) -> Audit {
    let output = std::process::Command::new(&build.trace_replay)
        // Two runs at once: tests run two at a time on these two-core machines.
        .args(["audit", "--json", "--parallel", "2", "--chromium"])
        .arg(&build.chromium)
        .arg("--out")
        .arg(out)
        .arg(bundle)
        .output()
        .unwrap();
    let audits: Vec<Audit> = serde_json::from_slice(&output.stdout).unwrap_or_else(|error| {
        panic!("trace-replay audit printed no audit ({error}): {}", String::from_utf8_lossy(&output.stderr))
    });
    assert_eq!(audits.len(), 1, "one bundle, one audit");
    audits.into_iter().next().unwrap()
}

/// Asserts that `audit` proves its checkpoints, run by run, with the audit's own table when it does not.
pub fn assert_proves(audit: &Audit) {
    let table = trace_analysis::audit::table(audit);
    assert!(audit.valid && audit.problems.is_empty(), "{table}");
    assert!(!audit.checkpoints.is_empty(), "{table}");
    for run in &audit.runs {
        match run.kind {
            AuditRunKind::Demonstration | AuditRunKind::DemonstrationThroughProxy => {
                assert_eq!(run.success, 1.0, "{table}");
                assert_eq!(run.reached_in_order, audit.checkpoints.len(), "{table}");
            }
            AuditRunKind::Nothing | AuditRunKind::AnswerFromStart => {
                assert_eq!((run.success, run.reached_any_order), (0.0, 0), "{table}");
            }
            AuditRunKind::StepLeftOut { .. }
            | AuditRunKind::ValueAltered { .. }
            | AuditRunKind::CredentialAltered { .. } => {
                assert_eq!(run.success, 0.0, "{table}");
            }
        }
        assert!(run.as_expected, "{table}");
    }
    assert!(audit.checkpoints.iter().all(|checkpoint| checkpoint.verdict == CheckpointVerdict::Discriminates));
    assert_eq!(audit.paths, [ServingPath::Devtools, ServingPath::Proxy], "{table}");
    eprintln!("{table}");
}
