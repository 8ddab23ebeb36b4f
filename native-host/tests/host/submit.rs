//! `trace-host submit` and `trace-host outbox`: a recording submitted to a campaign's destination, checked
//! where it landed, never with a secret in it; and what happens when the destination cannot be reached
//! (the submission waits in the outbox, nothing lost, and goes when it can), when an upload was cut off
//! (a retry replaces what it left), and when the campaign is not valid.

use std::path::Path;

use trace_bundle::archive::sha256_hex;

use crate::common::{PASSWORD, Scratch, contains, read_json, record_login_and_cart, zip_entries};

/// A campaign with one task, sending to `destination`.
fn campaign(scratch: &Scratch, destination: &Path) -> std::path::PathBuf {
    let path = scratch.path("campaign.json");
    let campaign = serde_json::json!({
        "id": "shop-2026",
        "title": "Shopping tasks",
        "tasks": [{"id": "mug", "description": "Put the blue mug in the cart", "website": "http://127.0.0.1:8000/",
                   "task_type": "action"}],
        "destination": destination.to_str().unwrap()
    });
    std::fs::write(&path, serde_json::to_vec(&campaign).unwrap()).unwrap();
    path
}

#[test]
fn a_submission_lands_under_its_key_checked_and_without_secrets() {
    let scratch = Scratch::new();
    record_login_and_cart(&scratch, "login-cart");
    let destination = scratch.path("store");
    let campaign = campaign(&scratch, &destination);
    let sent =
        scratch.cli_json(&["submit", "login-cart", "--campaign", campaign.to_str().unwrap(), "--as", "mug", "--json"]);
    assert_eq!(sent[0]["files"].as_array().unwrap().iter().filter(|file| file["landed"] == true).count(), 2, "{sent}");

    let pseudonym = std::fs::read_to_string(scratch.data().join("pseudonym")).unwrap();
    assert!(pseudonym.starts_with("p-"));
    let folder = destination.join("shop-2026").join(&pseudonym);
    let zip = std::fs::read(folder.join("mug.zip")).unwrap();
    let annotation = read_json(&folder.join("mug.annotation.json"));
    assert_eq!(annotation["bundle_sha256"], sha256_hex(&zip));
    assert_eq!(annotation["bundle_size"], zip.len());
    assert_eq!(
        (annotation["campaign_task"].as_str(), annotation["task_id"].as_str()),
        (Some("mug"), Some("login-cart"))
    );
    for (name, bytes) in zip_entries(&folder.join("mug.zip")) {
        assert!(!contains(&bytes, PASSWORD.as_bytes()), "the typed password is in {name}");
    }
    // The outbox keeps the receipt, not the zip.
    let listed = scratch.cli(&["outbox"]);
    assert!(listed.status.success());
    assert!(String::from_utf8_lossy(&listed.stdout).contains("sent     shop-2026/"));
    let receipt = scratch.data().join("outbox/sent").join(format!("shop-2026--{pseudonym}--mug"));
    assert!(receipt.join("outbox.json").is_file() && !receipt.join("mug.zip").exists());
}

#[test]
fn a_destination_out_of_reach_keeps_the_submission_until_it_can_be_sent() {
    let scratch = Scratch::new();
    record_login_and_cart(&scratch, "login-cart");
    // A file where the destination's directory should be: nothing can be written there.
    let blocked = scratch.path("store");
    std::fs::write(&blocked, b"not a directory").unwrap();
    let campaign = campaign(&scratch, &blocked.join("inner"));
    let output = scratch.cli(&["submit", "login-cart", "--campaign", campaign.to_str().unwrap(), "--as", "mug"]);
    assert_eq!(output.status.code(), Some(1), "{}", String::from_utf8_lossy(&output.stderr));
    let stdout = String::from_utf8_lossy(&output.stdout);
    assert!(stdout.contains("waiting  shop-2026/") && stdout.contains("attempt 1"), "{stdout}");

    // Another trace-host (a page's Submit beside the popup's Send) holds the submission: this one leaves it
    // alone and says so, and its entry is as the other left it.
    let pseudonym = std::fs::read_to_string(scratch.data().join("pseudonym")).unwrap();
    let folder_name = format!("shop-2026--{pseudonym}--mug");
    let other = trace_host::folder_lock::FolderLock::acquire(
        &scratch.data().join("outbox/.locks").join(&folder_name),
        std::time::Duration::ZERO,
    )
    .unwrap()
    .unwrap();
    let output = scratch.cli(&["outbox", "--send", "--json"]);
    assert_eq!(output.status.code(), Some(1), "it still waits: {}", String::from_utf8_lossy(&output.stderr));
    let listed: serde_json::Value = serde_json::from_slice(&output.stdout).unwrap();
    assert_eq!(listed[0]["last_error"], "being sent by another trace-host", "{listed}");
    assert_eq!(read_json(&scratch.data().join("outbox").join(&folder_name).join("outbox.json"))["attempts"], 1);
    drop(other);

    // Back within reach, with half a zip where an upload was cut off: the retry replaces it.
    std::fs::remove_file(&blocked).unwrap();
    let folder = blocked.join("inner/shop-2026").join(&pseudonym);
    std::fs::create_dir_all(&folder).unwrap();
    std::fs::write(folder.join("mug.zip"), b"PK\x03\x04 cut off").unwrap();
    let sent = scratch.cli_json(&["outbox", "--send", "--json"]);
    assert_eq!(sent[0]["attempts"], 2);
    assert!(sent[0]["last_error"].is_null(), "{sent}");
    let zip = std::fs::read(folder.join("mug.zip")).unwrap();
    assert_eq!(read_json(&folder.join("mug.annotation.json"))["bundle_sha256"], sha256_hex(&zip));
    let validated = scratch.cli(&["validate", folder.join("mug.zip").to_str().unwrap()]);
    assert!(validated.status.success(), "{}", String::from_utf8_lossy(&validated.stdout));
}

#[test]
fn an_invalid_campaign_is_refused_and_nothing_is_queued() {
    let scratch = Scratch::new();
    record_login_and_cart(&scratch, "login-cart");
    let path = scratch.path("campaign.json");
    std::fs::write(&path, br#"{"id": "../up", "title": "x", "tasks": []}"#).unwrap();
    let output = scratch.cli(&["submit", "login-cart", "--campaign", path.to_str().unwrap(), "--as", "mug"]);
    assert_eq!(output.status.code(), Some(2));
    assert!(String::from_utf8_lossy(&output.stderr).contains("this campaign cannot be used: its id \"../up\""));
    assert!(!scratch.data().join("outbox").exists());
    // A task the campaign does not have.
    let campaign = campaign(&scratch, &scratch.path("store"));
    let output = scratch.cli(&["submit", "login-cart", "--campaign", campaign.to_str().unwrap()]);
    assert_eq!(output.status.code(), Some(2));
    assert!(String::from_utf8_lossy(&output.stderr).contains("name the task with --as"));
}

#[test]
fn collect_makes_a_dataset_of_the_submissions_checked_deduplicated_and_reviewed() {
    let scratch = Scratch::new();
    record_login_and_cart(&scratch, "login-cart");
    record_login_and_cart(&scratch, "second-run");
    let destination = scratch.path("store");
    let campaign = campaign(&scratch, &destination);
    let json = std::fs::read_to_string(&campaign).unwrap().replace(
        r#""tasks":["#,
        r#""tasks":[{"id":"mug-again","description":"Again","website":"http://127.0.0.1:8000/","task_type":"action"},"#,
    );
    std::fs::write(&campaign, json).unwrap();
    for task in ["login-cart", "second-run"] {
        let as_task = if task == "login-cart" { "mug" } else { "mug-again" };
        let output = scratch.cli(&["submit", task, "--campaign", campaign.to_str().unwrap(), "--as", as_task]);
        assert!(output.status.success(), "{}", String::from_utf8_lossy(&output.stderr));
    }
    let pseudonym = std::fs::read_to_string(scratch.data().join("pseudonym")).unwrap();
    let mine = destination.join("shop-2026").join(&pseudonym);
    // The same bundle sent again by someone else, a zip that is not what its annotation says, and a
    // submission the coordinator rejects. Each annotation names the pseudonym it is sent under.
    let annotation_as = |pseudonym: &str| {
        let mut annotation = read_json(&mine.join("mug.annotation.json"));
        annotation["pseudonym"] = pseudonym.into();
        serde_json::to_vec(&annotation).unwrap()
    };
    let twin = destination.join("shop-2026/p-twin");
    std::fs::create_dir_all(&twin).unwrap();
    std::fs::copy(mine.join("mug.zip"), twin.join("mug.zip")).unwrap();
    std::fs::write(twin.join("mug.annotation.json"), annotation_as("p-twin")).unwrap();
    let tampered = destination.join("shop-2026/p-tampered");
    std::fs::create_dir_all(&tampered).unwrap();
    std::fs::write(tampered.join("mug.annotation.json"), annotation_as("p-tampered")).unwrap();
    std::fs::write(tampered.join("mug.zip"), b"PK\x03\x04 something else").unwrap();
    // Journeys a person sent, a line each.
    let journey = |id: &str| {
        let step = |visit: u64, path: &str| {
            serde_json::json!({"visit_id": visit, "url": format!("http://127.0.0.1:8000{path}"), "title": path,
                               "time": "2026-11-24T10:00:00Z"})
        };
        serde_json::json!({
            "campaign": "shop-2026", "pseudonym": "p-twin", "submitted_at": "2026-11-24T11:00:00Z",
            "journey": {"id": id, "grouped_by": "trace", "steps": [step(1, "/"), step(2, "/cart")]},
            "annotation": {"journey_id": id, "key_url": "http://127.0.0.1:8000/cart", "automate": false,
                           "label": "Look at what is in my cart", "feasibility": "unsure"}
        })
    };
    std::fs::write(twin.join("journeys.jsonl"), format!("{}\n{}\n", journey("j-1"), journey("j-2"))).unwrap();
    let review = scratch.path("review.json");
    let rejected = format!("shop-2026/{pseudonym}/mug-again");
    std::fs::write(
        &review,
        serde_json::json!({ rejected.clone(): {"accept": false, "reason": "wrong site"} }).to_string(),
    )
    .unwrap();

    let out = scratch.path("dataset");
    let report = scratch.cli_json(&[
        "collect",
        destination.to_str().unwrap(),
        "--out",
        out.to_str().unwrap(),
        "--review",
        review.to_str().unwrap(),
        "--json",
    ]);
    assert_eq!(report["submissions"], serde_json::json!([format!("shop-2026/{pseudonym}/mug")]), "{report}");
    assert_eq!(report["per_task"], serde_json::json!({"mug": 1}));
    let reasons: Vec<(String, String)> = report["skipped"]
        .as_array()
        .unwrap()
        .iter()
        .map(|s| (s["submission"].as_str().unwrap().to_owned(), s["reason"].as_str().unwrap().to_owned()))
        .collect();
    assert!(reasons.iter().any(|(name, reason)| name == &rejected && reason.contains("wrong site")), "{reasons:?}");
    assert!(
        reasons.iter().any(|(name, reason)| name == "shop-2026/p-twin/mug" && reason.contains("submitted already"))
    );
    assert!(reasons.iter().any(|(name, reason)| name == "shop-2026/p-tampered/mug" && reason.contains("not the one")));
    let lines = std::fs::read_to_string(out.join("tasks.jsonl")).unwrap();
    assert_eq!(lines.lines().count(), 1);
    assert_eq!(report["journeys"], 2);
    assert_eq!(std::fs::read_to_string(out.join("journeys.jsonl")).unwrap().lines().count(), 2);
    assert_eq!(read_json(&out.join("collected.json")), report);
}
