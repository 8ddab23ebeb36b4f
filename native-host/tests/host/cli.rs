//! The command line as scripts use it: every `--json` output is its report type from the format crate
//! (the contract a schema under `docs/schema/` describes), and output into a closed pipe ends quietly.

use std::process::{Command, Stdio};

use trace_manifest::report::{DatasetReport, ExportReport, ImportReport, ProcessReport, TaskSummary, ValidateReport};

use crate::common::{Scratch, host_exe, record_login_and_cart};

fn parsed<T: serde::de::DeserializeOwned>(value: serde_json::Value) -> T {
    serde_json::from_value(value.clone()).unwrap_or_else(|e| panic!("{e}: {value:#}"))
}

#[test]
fn every_json_report_reads_back_as_its_type() {
    let scratch = Scratch::new();
    record_login_and_cart(&scratch, "json-reports");

    let tasks: Vec<TaskSummary> = parsed(scratch.cli_json(&["tasks", "--json"]));
    assert_eq!(tasks.len(), 1);
    assert_eq!(tasks[0].id.as_str(), "json-reports");

    let capture = scratch.capture("json-reports");
    let capture = capture.to_str().unwrap();
    let processed: ProcessReport = parsed(scratch.cli_json(&["process", "json-reports", "--no-audit", "--json"]));
    assert!(processed.recorded && processed.tool_calls > 0, "{processed:?}");

    let zip = scratch.path("reports.zip");
    let zip = zip.to_str().unwrap();
    let exported: ExportReport =
        parsed(scratch.cli_json(&["export", "json-reports", "--out", zip, "--redact", "--json"]));
    let redaction = exported.redaction.expect("a redacted export says what it replaced");
    assert!(redaction.replacements > 0, "{redaction:?}");

    let validated: ValidateReport = parsed(scratch.cli_json(&["validate", zip, "--json"]));
    assert!(validated.valid && validated.problems.is_empty(), "{validated:?}");
    let validated_dir: ValidateReport = parsed(scratch.cli_json(&["validate", capture, "--json"]));
    assert!(validated_dir.valid, "{validated_dir:?}");

    let elsewhere = Scratch::new();
    let imported: ImportReport = parsed(elsewhere.cli_json(&["import", zip, "--json"]));
    assert_eq!(imported.task_id.as_str(), "json-reports");

    // A dataset of zips that were redacted already (as people share them) redacts them again.
    let out = scratch.path("dataset");
    let dataset: DatasetReport = parsed(scratch.cli_json(&["dataset", zip, "--out", out.to_str().unwrap(), "--json"]));
    assert_eq!(dataset.tasks.len(), 1);
    assert!(dataset.redacted && dataset.skipped.is_empty(), "{dataset:?}");
}

#[test]
fn output_into_a_closed_pipe_ends_quietly() {
    let scratch = Scratch::new();
    record_login_and_cart(&scratch, "closed-pipe");
    for args in [&["tasks", "--json"][..], &["tasks"]] {
        // The reading end is closed before the host writes, as `| head -1` closes it after its line.
        let mut child = Command::new(host_exe())
            .arg("--data")
            .arg(scratch.data())
            .args(args)
            .env_remove("TRACE_DATA")
            .stdout(Stdio::piped())
            .stderr(Stdio::piped())
            .spawn()
            .unwrap();
        drop(child.stdout.take());
        let output = child.wait_with_output().unwrap();
        let stderr = String::from_utf8_lossy(&output.stderr);
        assert!(output.status.success(), "trace-host {args:?}: {:?}\n{stderr}", output.status);
        assert!(!stderr.contains("panicked"), "trace-host {args:?}: {stderr}");
    }
}
