//! `trace-host process` on a session recorded through the real binary: a login with a password flagged as
//! a credential, a JSON API, a cart POST, a tracker beacon, and DOM snapshots.

use std::collections::BTreeSet;
use std::path::Path;

use trace_analysis::evidence::{Evidence, holds};
use trace_bundle::archive::Bundle;
use trace_manifest::postprocess::{Checkpoint, CredentialEntry};
use trace_manifest::trajectory::Trajectory;

use crate::common::*;

/// Every file of a bundle directory (hidden working files aside), relative to it.
fn bundle_files(dir: &Path) -> Vec<String> {
    let mut files = Vec::new();
    let mut pending = vec![dir.to_owned()];
    while let Some(current) = pending.pop() {
        for entry in std::fs::read_dir(&current).unwrap() {
            let path = entry.unwrap().path();
            if path.file_name().unwrap().to_string_lossy().starts_with('.') {
                continue;
            }
            if path.is_dir() {
                pending.push(path);
            } else {
                files.push(path.strip_prefix(dir).unwrap().to_string_lossy().replace('\\', "/"));
            }
        }
    }
    files.sort();
    files
}

#[test]
fn process_writes_trajectory_credentials_checkpoints_and_ignore_list_into_a_valid_bundle() {
    let scratch = Scratch::new();
    record_login_and_cart(&scratch, "login-cart");
    let dir = scratch.capture("login-cart");

    let report = scratch.cli_json(&["process", "login-cart", "--no-audit", "--json"]);
    assert_eq!(report["task_id"], "login-cart");
    assert_eq!(report["credentials"], 1);
    assert_eq!(report["recorded"], true);
    assert_eq!(
        report["files"],
        serde_json::json!(["trajectory.json", "credentials.json", "checkpoints.json", "ignored.json"])
    );

    let trajectory: Trajectory = serde_json::from_slice(&std::fs::read(dir.join("trajectory.json")).unwrap()).unwrap();
    assert_eq!(report["tool_calls"], trajectory.tool_calls.len());
    let credentials: Vec<CredentialEntry> =
        serde_json::from_slice(&std::fs::read(dir.join("credentials.json")).unwrap()).unwrap();
    assert_eq!(credentials.len(), 1);
    assert_eq!(credentials[0].value, PASSWORD);
    assert_eq!(credentials[0].descriptor.selector, "#password");
    assert_eq!(credentials[0].placeholder, "{{credentials.127.0.0.1.password}}");
    let trajectory_text = std::fs::read_to_string(dir.join("trajectory.json")).unwrap();
    assert!(trajectory_text.contains(&credentials[0].placeholder), "{trajectory_text}");

    // The secret is in credentials.json and in nothing else processing wrote. The recording itself keeps
    // what was typed and sent (events.jsonl, the HAR's login POST): replacing it there is the redacted
    // export's job, not post-processing's.
    let encoded = PASSWORD.replace('!', "%21");
    let holding: BTreeSet<String> = bundle_files(&dir)
        .into_iter()
        .filter(|file| {
            let bytes = std::fs::read(dir.join(file)).unwrap();
            contains(&bytes, PASSWORD.as_bytes()) || contains(&bytes, encoded.as_bytes())
        })
        .collect();
    let expected: BTreeSet<String> =
        ["credentials.json", "events.jsonl", "recording.har"].iter().map(|s| s.to_string()).collect();
    assert_eq!(holding, expected);

    // At least two checkpoints, each holding on the recording itself, none naming a secret.
    let checkpoints: Vec<Checkpoint> =
        serde_json::from_slice(&std::fs::read(dir.join("checkpoints.json")).unwrap()).unwrap();
    assert!(checkpoints.len() >= 2, "{checkpoints:#?}");
    assert_eq!(report["checkpoints"], checkpoints.len());
    let evidence = Evidence::load(&mut Bundle::open(&dir).unwrap()).unwrap();
    for checkpoint in &checkpoints {
        let at = holds(&checkpoint.predicate, &evidence);
        assert!(at.contains(&checkpoint.event_ids[0]), "{checkpoint:?} holds at {at:?}");
    }
    let kinds: Vec<String> = checkpoints
        .iter()
        .map(|c| serde_json::to_value(&c.predicate).unwrap()["kind"].as_str().unwrap().into())
        .collect();
    assert!(kinds.contains(&"request".into()) && kinds.contains(&"url".into()), "{kinds:?}");
    let checkpoints_json = serde_json::to_value(&checkpoints).unwrap();
    let login =
        checkpoints_json.as_array().unwrap().iter().find(|c| c["predicate"]["url_pattern"] == "127.0.0.1:8000/login");
    let login = login.expect("the login POST is a checkpoint");
    assert_eq!(login["predicate"]["body_fields"], serde_json::json!({"username": "ann"}), "no csrf, no password");
    let cart = checkpoints_json
        .as_array()
        .unwrap()
        .iter()
        .find(|c| c["predicate"]["url_pattern"] == "127.0.0.1:8000/api/cart");
    assert_eq!(
        cart.expect("the cart POST")["predicate"]["body_fields"],
        serde_json::json!({"product": "blue-mug", "qty": "1"})
    );
    assert_eq!(
        checkpoints.last().unwrap().predicate,
        trace_manifest::postprocess::Predicate::Text { text: "Cart: 1 item".into() }
    );

    // The tracker is ignored, the site's API is not.
    let ignored: Vec<String> = serde_json::from_slice(&std::fs::read(dir.join("ignored.json")).unwrap()).unwrap();
    assert_eq!(ignored, ["127.0.0.1:8000/collect?"]);
    assert_eq!(report["ignored"], 1);

    // The bundle still validates, and the task is recorded as processed.
    let validated = scratch.cli_json(&["validate", dir.to_str().unwrap(), "--json"]);
    assert_eq!(validated["valid"], true, "{validated}");
    let data = trace_host::paths::DataDir::at(scratch.data()).unwrap();
    let store = trace_host::tasks::TaskStore::open(&data).unwrap();
    assert!(store.processed_at(&task_id("login-cart")).unwrap().is_some());
    drop(store);

    // Processing again, by the bundle's path this time, replaces the files; an export carries them.
    let again = scratch.cli_json(&["process", dir.to_str().unwrap(), "--no-audit", "--json"]);
    assert_eq!(again["recorded"], true, "the capture directory is the task's");
    assert_eq!(again["checkpoints"], report["checkpoints"]);
    let zip = scratch.path("login-cart.zip");
    scratch.cli_json(&["export", "login-cart", "--out", zip.to_str().unwrap(), "--json"]);
    let validated = scratch.cli_json(&["validate", zip.to_str().unwrap(), "--json"]);
    assert_eq!(validated["valid"], true, "{validated}");
    let archive = zip::ZipArchive::new(std::fs::File::open(&zip).unwrap()).unwrap();
    assert!(archive.file_names().any(|name| name == "checkpoints.json"));
}

#[test]
fn process_refuses_what_is_not_a_bundle_directory() {
    let scratch = Scratch::new();
    let output = scratch.cli(&["process", "no-such-task"]);
    assert_eq!(output.status.code(), Some(2));
    assert!(String::from_utf8_lossy(&output.stderr).contains("no task no-such-task"));
    let output = scratch.cli(&["process", scratch.path("missing/bundle").to_str().unwrap()]);
    assert_eq!(output.status.code(), Some(2));
    assert!(String::from_utf8_lossy(&output.stderr).contains("not a bundle directory"));
}
