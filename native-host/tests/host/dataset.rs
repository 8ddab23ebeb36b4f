//! `trace-host dataset` over a folder of bundle zips (one of them broken) and a task of the data
//! directory, in both layouts, read back through the format's own types.

use std::path::Path;

use trace_manifest::dataset::{BrowserUseHistory, TaskLine, WebArenaEntry, WebArenaResult};

use crate::common::*;

/// Every file under `dir`, with its bytes.
fn files_under(dir: &Path) -> Vec<(String, Vec<u8>)> {
    let mut files = Vec::new();
    let mut pending = vec![dir.to_owned()];
    while let Some(current) = pending.pop() {
        for entry in std::fs::read_dir(&current).unwrap() {
            let path = entry.unwrap().path();
            if path.is_dir() {
                pending.push(path);
            } else {
                files.push((path.display().to_string(), std::fs::read(&path).unwrap()));
            }
        }
    }
    files
}

/// Two recorded tasks: `zipped` exported as it is into `bundles/` beside a zip that is not a bundle, and
/// `kept` left in the data directory.
fn two_tasks_and_a_broken_zip(scratch: &Scratch) -> std::path::PathBuf {
    record_login_and_cart(scratch, "zipped");
    record_login_and_cart(scratch, "kept");
    let folder = scratch.path("bundles");
    std::fs::create_dir_all(&folder).unwrap();
    let zip = folder.join("zipped.zip");
    scratch.cli_json(&["export", "zipped", "--out", zip.to_str().unwrap(), "--json"]);
    std::fs::write(folder.join("broken.zip"), b"PK\x03\x04 this is not a zip").unwrap();
    folder
}

#[test]
fn a_trace_dataset_lists_every_valid_task_redacted_and_skips_the_broken_one() {
    let scratch = Scratch::new();
    let folder = two_tasks_and_a_broken_zip(&scratch);
    let out = scratch.path("dataset");
    let report =
        scratch.cli_json(&["dataset", folder.to_str().unwrap(), "kept", "--out", out.to_str().unwrap(), "--json"]);
    assert_eq!(report["tasks"], serde_json::json!(["zipped", "kept"]), "{report}");
    let skipped = report["skipped"].as_array().unwrap();
    assert_eq!(skipped.len(), 1, "{report}");
    assert!(skipped[0]["source"].as_str().unwrap().ends_with("broken.zip"), "{report}");

    let text = std::fs::read_to_string(out.join("tasks.jsonl")).unwrap();
    let lines: Vec<TaskLine> = text.lines().map(|line| serde_json::from_str(line).unwrap()).collect();
    assert_eq!(lines.len(), 2);
    for line in &lines {
        assert_eq!(line.task_description, "buy the blue mug");
        assert_eq!(line.website_url, "http://127.0.0.1:8000/");
        assert_eq!(line.num_steps, line.tool_calls.len());
        assert_eq!(line.tool_calls.last().unwrap().action.name(), "done");
        assert!(line.checkpoints.len() >= 2, "{:?}", line.checkpoints);
        assert_eq!(line.checkpoints_reasoning.lines().count(), line.checkpoints.len());
        assert_eq!(line.ignored, ["127.0.0.1:8000/collect?"]);
        assert!(line.redacted);
        assert_eq!(line.credentials.len(), 1);
        assert!(line.credentials[0].value.starts_with("trace-redacted-credential-"), "the stand-in, not the password");
        let validated = scratch.cli_json(&["validate", out.join(&line.bundle).to_str().unwrap(), "--json"]);
        assert_eq!(validated["valid"], true, "{validated}");
    }
    // No file of the dataset holds the password, in the folder or inside a zip.
    for (name, bytes) in files_under(&out) {
        assert!(!contains(&bytes, PASSWORD.as_bytes()), "{name}");
        if name.ends_with(".zip") {
            for (entry, bytes) in crate::common::zip_entries(Path::new(&name)) {
                assert!(!contains(&bytes, PASSWORD.as_bytes()), "{name}: {entry}");
            }
        }
    }

    // A second run into the same folder is refused rather than mixed with the first.
    let again = scratch.cli(&["dataset", folder.to_str().unwrap(), "--out", out.to_str().unwrap()]);
    assert_eq!(again.status.code(), Some(2));
    assert!(String::from_utf8_lossy(&again.stderr).contains("is not empty"));
}

#[test]
fn a_webarena_infinity_dataset_has_a_manifest_a_history_and_a_result_per_task() {
    let scratch = Scratch::new();
    let folder = two_tasks_and_a_broken_zip(&scratch);
    let out = scratch.path("webarena");
    let output = scratch.cli(&[
        "dataset",
        folder.join("zipped.zip").to_str().unwrap(),
        "--out",
        out.to_str().unwrap(),
        "--format",
        "webarena-infinity",
    ]);
    assert!(output.status.success(), "{}", String::from_utf8_lossy(&output.stderr));
    assert!(String::from_utf8_lossy(&output.stdout).contains("WebArena-Infinity dataset of 1 task(s)"));

    let entries: Vec<WebArenaEntry> =
        serde_json::from_slice(&std::fs::read(out.join("data/manifest.json")).unwrap()).unwrap();
    assert_eq!(entries.len(), 1);
    let entry = &entries[0];
    assert_eq!((entry.model.as_str(), entry.task_id.as_str()), ("human", "zipped"));
    assert_eq!(entry.instruction, "buy the blue mug");
    assert_eq!(entry.environment, "127-0-0-1-8000");
    let task = out.join("data/human/127-0-0-1-8000/zipped");

    let history: BrowserUseHistory =
        serde_json::from_slice(&std::fs::read(task.join("history.json")).unwrap()).unwrap();
    assert_eq!(history.history.len(), entry.steps);
    // Step 0 is the initial navigation, as browser-use records it.
    let first = &history.history[0];
    assert_eq!(first.metadata.as_ref().unwrap().step_number, 0);
    let first_action = &first.model_output.as_ref().unwrap().action;
    assert!(first_action[0].get("navigate").is_some(), "{first_action:?}");
    let typed = history
        .history
        .iter()
        .find_map(|step| step.model_output.as_ref().and_then(|output| output.action[0].get("input").cloned()))
        .unwrap();
    assert_eq!(typed["index"], serde_json::Value::Null, "a person's step has no element index");
    let last = history.history.last().unwrap();
    assert!(last.result[0].is_done && last.result[0].success == Some(true));
    assert!(!contains(&std::fs::read(task.join("history.json")).unwrap(), PASSWORD.as_bytes()));

    let result: WebArenaResult = serde_json::from_slice(&std::fs::read(task.join("result.json")).unwrap()).unwrap();
    assert!(result.passed && result.is_done, "{result:?}");
    assert!(result.verifier_message.contains("checkpoints hold"), "{result:?}");
    assert_eq!(result.verifier_message, entry.verifier_message);
    assert_eq!(result.errors, vec![None; result.steps]);
}

#[test]
fn a_dataset_of_nothing_valid_says_no() {
    let scratch = Scratch::new();
    let folder = scratch.path("junk");
    std::fs::create_dir_all(&folder).unwrap();
    std::fs::write(folder.join("a.zip"), b"not a zip").unwrap();
    let output = scratch.cli(&["dataset", folder.to_str().unwrap(), "--out", scratch.path("out").to_str().unwrap()]);
    assert_eq!(output.status.code(), Some(1));
    assert!(String::from_utf8_lossy(&output.stdout).contains("skipped"));
}
