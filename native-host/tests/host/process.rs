//! `trace-host process` on a session recorded through the real binary: a login with a password flagged as
//! a credential, a JSON API, a cart POST, a tracker beacon, and DOM snapshots.

use std::collections::BTreeSet;
use std::path::Path;

use trace_host::client::TaskMessages;
use trace_host::process::{Evidence, holds};
use trace_manifest::archive::Bundle;
use trace_manifest::event::{ActionKind, BodyPart, NavigationCause};
use trace_manifest::postprocess::{Checkpoint, CredentialEntry};
use trace_manifest::task::TaskType;
use trace_manifest::trajectory::Trajectory;

use crate::common::*;

const PASSWORD: &str = "hunter2-Blue!";
const SITE: &str = "http://127.0.0.1:8000";

/// Records a login, a look at the products API, adding a mug to the cart, and a tracker beacon on each page.
fn record_login_and_cart(scratch: &Scratch, id: &str) {
    let mut host = scratch.host();
    let mut task = TaskMessages::new(task_id(id));
    let login = format!("{SITE}/login");
    let account = format!("{SITE}/account");
    let mut messages = vec![task.start(task_start(id, TaskType::Action))];
    messages.push(task.events(vec![
        navigation(1.0, &login),
        request(2.0, "1", "GET", &login, &[], None),
        response(3.0, "1", &login, 200, "text/html", &[]),
        finished(4.0, "1", 300),
        typed_request(5.0, "2", "POST", &format!("{SITE}/collect?e=pageview&p=/login"), "Ping", None),
        response(6.0, "2", &format!("{SITE}/collect?e=pageview&p=/login"), 204, "text/plain", &[]),
        finished(7.0, "2", 0),
        page_load(8.0, &login, "Sign in"),
    ]));
    messages.push(task.dom_snapshot(
        T0 + 9.0,
        1,
        &login,
        "<html><head><title>Sign in</title></head><body><h1>Sign in</h1><form><input id=username>\
         <input id=password type=password></form></body></html>",
        None,
    ));
    messages.push(task.events(vec![
        action(1000.0, ActionKind::Click, &login, "#username", None, false),
        action(1100.0, ActionKind::Input, &login, "#username", Some("ann"), false),
        action(1200.0, ActionKind::Click, &login, "#password", None, false),
        action(1300.0, ActionKind::Input, &login, "#password", Some(PASSWORD), true),
        action(1400.0, ActionKind::Click, &login, "#login-submit", None, false),
        action(1401.0, ActionKind::Submit, &login, "#login-form", None, false),
        request(
            1410.0,
            "3",
            "POST",
            &login,
            &[("Content-Type", "application/x-www-form-urlencoded")],
            Some(&format!("csrf=9f2c41d07be84a61&username=ann&password={}", PASSWORD.replace('!', "%21"))),
        ),
        response(1420.0, "3", &login, 303, "", &[("Location", "/account")]),
        request(1421.0, "3", "GET", &account, &[], None),
        response(1430.0, "3", &account, 200, "text/html", &[]),
        finished(1431.0, "3", 500),
        navigation_by(1432.0, &account, NavigationCause::FormSubmit),
        typed_request(1440.0, "4", "POST", &format!("{SITE}/collect?e=pageview&p=/account"), "Ping", None),
        response(1441.0, "4", &format!("{SITE}/collect?e=pageview&p=/account"), 204, "text/plain", &[]),
        finished(1442.0, "4", 0),
        typed_request(1450.0, "5", "GET", &format!("{SITE}/api/products?_=1763805601450"), "Fetch", None),
        response(1460.0, "5", &format!("{SITE}/api/products?_=1763805601450"), 200, "application/json", &[]),
        finished(1461.0, "5", 60),
        page_load(1470.0, &account, "Your account"),
    ]));
    messages.extend(task.body("5", BodyPart::Response, br#"[{"id":"blue-mug","price":12}]"#, 1024));
    messages.push(task.dom_snapshot(
        T0 + 1480.0,
        1,
        &account,
        "<html><head><title>Your account</title></head><body><h1>Your account</h1>\
         <p>Signed in as ann</p><button id=add>Add to cart</button></body></html>",
        None,
    ));
    messages.push(task.events(vec![
        action(2000.0, ActionKind::Click, &account, "#add", None, false),
        typed_request(2010.0, "6", "POST", &format!("{SITE}/api/cart"), "Fetch", None),
        response(2020.0, "6", &format!("{SITE}/api/cart"), 200, "application/json", &[]),
        finished(2021.0, "6", 20),
    ]));
    messages.extend(task.body("6", BodyPart::Request, br#"{"product":"blue-mug","qty":1,"token":"abc"}"#, 1024));
    messages.extend(task.body("6", BodyPart::Response, br#"{"items":1}"#, 1024));
    messages.push(task.dom_snapshot(
        T0 + 2100.0,
        1,
        &account,
        "<html><body><h1>Your account</h1><p>Signed in as ann</p><p id=cart>Cart: 1 item</p></body></html>",
        None,
    ));
    messages.push(task.stop(T0 + 3000.0, None));
    let others = send_all(&mut host, &task, &messages);
    assert!(others.iter().all(|m| matches!(m, trace_manifest::wire::HostMessage::TaskStopped { .. })), "{others:?}");
    host.close().unwrap();
}

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

fn contains(haystack: &[u8], needle: &[u8]) -> bool {
    haystack.windows(needle.len()).any(|window| window == needle)
}

#[test]
fn process_writes_trajectory_credentials_checkpoints_and_ignore_list_into_a_valid_bundle() {
    let scratch = Scratch::new();
    record_login_and_cart(&scratch, "login-cart");
    let dir = scratch.capture("login-cart");

    let report = scratch.cli_json(&["process", "login-cart", "--json"]);
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
    let conn = trace_host::db::open(&scratch.data().join("tasks.db")).unwrap();
    assert!(trace_host::db::processed_at(&conn, &task_id("login-cart")).unwrap().is_some());
    drop(conn);

    // Processing again, by the bundle's path this time, replaces the files; an export carries them.
    let again = scratch.cli_json(&["process", dir.to_str().unwrap(), "--json"]);
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
