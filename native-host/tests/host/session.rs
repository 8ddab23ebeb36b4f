//! A whole recording through the real binary: the bundle it leaves, its index, its HAR, and the commands
//! that read it.

use std::collections::BTreeSet;

use trace_bundle::archive::sha256_hex;
use trace_host::client::{TINY_PNG, TaskMessages};
use trace_manifest::event::{
    Action, ActionKind, BodyPart, Cookie, ElementDescriptor, EventKind, StoragePhase, StorageSnapshot,
};
use trace_manifest::task::TaskType;
use trace_manifest::wire::{ErrorCode, HostMessage};

use crate::common::*;

/// The bodies of the shop session below, so that tests can compare what comes back.
struct ShopBodies {
    home: Vec<u8>,
    logo: Vec<u8>,
    account: Vec<u8>,
}

fn shop_bodies() -> ShopBodies {
    ShopBodies {
        home: b"<html><body><h1>Shop</h1><img src=/logo.png></body></html>".repeat(50),
        logo: (0..=255u8).cycle().take(70_000).collect(),
        account: b"{\"user\":\"ann\",\"orders\":[1,2]}".to_vec(),
    }
}

/// Records a small shop session: a page with a logo loaded twice, a login POST that redirects, a JSON API,
/// a click, a screenshot, a DOM snapshot and storage. Returns the messages' builder for further use.
fn record_shop(scratch: &Scratch, id: &str) -> (trace_host::client::HostClient, TaskMessages, ShopBodies) {
    let bodies = shop_bodies();
    let mut host = scratch.host();
    let mut task = TaskMessages::new(task_id(id));
    let mut messages = vec![task.start(task_start(id, TaskType::Action))];
    messages.push(task.events(vec![
        event(
            0.0,
            EventKind::Storage(StorageSnapshot {
                phase: StoragePhase::Start,
                cookies: vec![Cookie {
                    name: "theme".into(),
                    value: "dark".into(),
                    domain: "127.0.0.1".into(),
                    path: "/".into(),
                    expires: None,
                    http_only: false,
                    secure: false,
                    same_site: Some("Lax".into()),
                }],
                local_storage:
                    [("http://127.0.0.1:8000".to_owned(), [("cart".to_owned(), "[]".to_owned())].into())].into(),
                session_storage: Default::default(),
                indexed_db: Default::default(),
            }),
        ),
        navigation(1.0, "http://127.0.0.1:8000/"),
        request(
            2.0,
            "1",
            "GET",
            "http://127.0.0.1:8000/",
            &[("Accept", "text/html"), ("Sec-Fetch-Mode", "navigate"), ("Cookie", "theme=dark")],
            None,
        ),
        response(
            10.0,
            "1",
            "http://127.0.0.1:8000/",
            200,
            "text/html",
            &[("Content-Type", "text/html"), ("Content-Encoding", "gzip")],
        ),
        finished(12.0, "1", 321),
        request(13.0, "2", "GET", "http://127.0.0.1:8000/logo.png", &[], None),
        response(14.0, "2", "http://127.0.0.1:8000/logo.png", 200, "image/png", &[]),
        finished(15.0, "2", 70_000),
        request(16.0, "3", "GET", "http://127.0.0.1:8000/logo.png?again", &[], None),
        response(17.0, "3", "http://127.0.0.1:8000/logo.png?again", 200, "image/png", &[]),
        finished(18.0, "3", 70_000),
        page_load(19.0, "http://127.0.0.1:8000/", "Shop"),
    ]));
    messages.extend(task.body("1", BodyPart::Response, &bodies.home, 1000));
    messages.extend(task.body("2", BodyPart::Response, &bodies.logo, 16_384));
    messages.extend(task.body("3", BodyPart::Response, &bodies.logo, 65_536));
    messages.push(task.screenshot(T0 + 20.0, 1, TINY_PNG, "load"));
    messages.push(task.dom_snapshot(
        T0 + 21.0,
        1,
        "http://127.0.0.1:8000/",
        "<html><body><h1>Shop</h1></body></html>",
        Some(serde_json::json!({"role": "WebArea", "name": "Shop"})),
    ));
    messages.push(task.events(vec![
        event(
            30.0,
            EventKind::Action(Box::new(Action {
                action: ActionKind::Click,
                target: Some(ElementDescriptor {
                    selector: "#login".into(),
                    xpath: "//button[1]".into(),
                    tag: "button".into(),
                    ..Default::default()
                }),
                url: "http://127.0.0.1:8000/".into(),
                value: None,
                key: None,
                modifiers: vec![],
                x: Some(10.0),
                y: Some(20.0),
                delta_x: None,
                delta_y: None,
                to_x: None,
                to_y: None,
                drop_target: None,
                moves: None,
                pressed_ts: None,
                until_ts: None,
                credential: false,
                page_made: false,
            })),
        ),
        request(
            31.0,
            "4",
            "POST",
            "http://127.0.0.1:8000/login",
            &[("Content-Type", "application/x-www-form-urlencoded")],
            Some("user=ann&csrf=t0k"),
        ),
        response(
            32.0,
            "4",
            "http://127.0.0.1:8000/login",
            303,
            "",
            &[("Location", "/account"), ("Set-Cookie", "sid=s3cr3t; HttpOnly")],
        ),
        request(33.0, "4", "GET", "http://127.0.0.1:8000/account", &[("Cookie", "sid=s3cr3t")], None),
        response(34.0, "4", "http://127.0.0.1:8000/account", 200, "application/json", &[]),
        finished(35.0, "4", 30),
    ]));
    messages.extend(task.body("4", BodyPart::Response, &bodies.account, 1 << 20));
    let others = send_all(&mut host, &task, &messages);
    assert!(others.is_empty(), "unexpected replies: {others:?}");
    (host, task, bodies)
}

#[test]
fn a_stopped_session_becomes_a_valid_self_contained_bundle() {
    let scratch = Scratch::new();
    let (mut host, mut task, bodies) = record_shop(&scratch, "shop-1");
    let stop = task.stop(T0 + 40_000.0, None);
    host.send(&stop).unwrap();
    let others = host.wait_for_ack(&task.task_id, stop.seq, TIMEOUT).unwrap();
    let stopped = match others.first() {
        Some(stopped) => stopped.clone(),
        None => host.recv_non_ack(TIMEOUT).expect("a task_stopped reply"),
    };
    let HostMessage::TaskStopped { bundle, .. } = stopped else { panic!("expected task_stopped, got {stopped:?}") };
    let dir = scratch.capture("shop-1");
    assert_eq!(std::path::Path::new(&bundle), dir);

    // The index names every file once, with its real size and hash, and nothing else is in the bundle.
    let manifest = read_json(&dir.join("manifest.json"));
    assert_eq!(manifest["format"], "trace-bundle");
    assert_eq!(manifest["format_version"], trace_manifest::FORMAT_VERSION);
    assert_eq!(manifest["task"]["status"], "stopped");
    assert_eq!(manifest["task"]["description"], "buy the blue mug");
    assert_eq!(manifest["recorder"]["name"], "host-tests");
    assert_eq!(manifest["producer"]["name"], "trace-host");
    assert_eq!(manifest["duration_seconds"], 40.0);
    let indexed: BTreeSet<String> = manifest["files"]
        .as_array()
        .unwrap()
        .iter()
        .map(|f| {
            let path = f["path"].as_str().unwrap();
            let bytes = std::fs::read(dir.join(path)).unwrap();
            assert_eq!(f["size"], bytes.len() as u64, "{path}");
            assert_eq!(f["sha256"], sha256_hex(&bytes), "{path}");
            path.to_owned()
        })
        .collect();
    let home = format!("resources/{}", sha256_hex(&bodies.home));
    let logo = format!("resources/{}", sha256_hex(&bodies.logo));
    let account = format!("resources/{}", sha256_hex(&bodies.account));
    let expected: BTreeSet<String> = [
        "events.jsonl",
        "recording.har",
        "storage.json",
        "screenshots/000015.png",
        "dom/000016.html",
        "dom/000016.a11y.json",
        &home,
        &logo,
        &account,
    ]
    .iter()
    .map(|s| s.to_string())
    .collect();
    assert_eq!(indexed, expected);
    assert_eq!(std::fs::read_dir(dir.join("resources")).unwrap().count(), 3, "the logo, seen twice, is stored once");
    assert!(!dir.join(".parts").exists(), "working files are cleaned up on stop");
    assert_eq!(manifest["counts"]["requests"], 5);
    assert_eq!(manifest["counts"]["bodies"], 4);
    assert_eq!(manifest["counts"]["body_bytes"], (bodies.home.len() + bodies.logo.len() + bodies.account.len()) as u64);
    assert_eq!(manifest["counts"]["screenshots"], 1);
    assert_eq!(manifest["counts"]["actions"], 1);

    // events.jsonl holds every event in order, host-written ones included.
    let events: Vec<serde_json::Value> = std::fs::read_to_string(dir.join("events.jsonl"))
        .unwrap()
        .lines()
        .map(|l| serde_json::from_str(l).unwrap())
        .collect();
    assert_eq!(events.len() as u64, manifest["counts"]["events"].as_u64().unwrap());
    assert!(events.iter().enumerate().all(|(i, e)| e["id"] == i as u64));
    assert_eq!(events[15]["type"], "screenshot");
    assert_eq!(events[15]["file"], "screenshots/000015.png");
    assert_eq!(std::fs::read(dir.join("screenshots/000015.png")).unwrap(), TINY_PNG);

    // The HAR is HAR 1.2 with real headers, post data, redirects, cookies and bodies by _file.
    let har = read_json(&dir.join("recording.har"));
    let entries = har["log"]["entries"].as_array().unwrap();
    assert_eq!(har["log"]["version"], "1.2");
    assert_eq!(har["log"]["pages"][0]["title"], "Shop");
    assert_eq!(entries.len(), 5);
    let first = &entries[0];
    assert_eq!(first["pageref"], "page_1");
    assert!(
        first["request"]["headers"]
            .as_array()
            .unwrap()
            .iter()
            .any(|h| h["name"] == "Sec-Fetch-Mode" && h["value"] == "navigate")
    );
    assert_eq!(first["request"]["cookies"][0]["name"], "theme");
    assert_eq!(first["response"]["content"]["_file"], home.as_str());
    for entry in entries.iter().filter(|e| e["response"]["content"]["_file"].is_string()) {
        let file = entry["response"]["content"]["_file"].as_str().unwrap();
        let bytes = std::fs::read(dir.join(file)).unwrap();
        assert_eq!(entry["response"]["content"]["size"], bytes.len() as u64);
    }
    let login = &entries[3];
    assert_eq!(login["request"]["postData"]["text"], "user=ann&csrf=t0k");
    assert_eq!(login["response"]["status"], 303);
    assert_eq!(login["response"]["redirectURL"], "http://127.0.0.1:8000/account");
    assert_eq!(login["response"]["cookies"][0]["name"], "sid");
    assert_eq!(entries[4]["response"]["content"]["_file"], account.as_str());

    let storage = read_json(&dir.join("storage.json"));
    assert_eq!(storage["snapshots"][0]["phase"], "start");
    assert_eq!(storage["snapshots"][0]["cookies"][0]["name"], "theme");
    assert_eq!(storage["snapshots"][0]["local_storage"]["http://127.0.0.1:8000"]["cart"], "[]");

    // The commands people run see the same thing.
    let (status, _) = host.close().unwrap();
    assert!(status.success());
    let log = std::fs::read_to_string(scratch.data().join("logs/trace-host.log")).unwrap();
    assert!(log.contains("task started") && log.contains("task stopped"), "{log}");
    let report = scratch.cli_json(&["validate", dir.to_str().unwrap(), "--json"]);
    assert_eq!(report["valid"], true, "{report}");
    let tasks = scratch.cli_json(&["tasks", "--json"]);
    assert_eq!(tasks[0]["id"], "shop-1");
    assert_eq!(tasks[0]["status"], "stopped");
    assert_eq!(tasks[0]["website"], "http://127.0.0.1:8000/");
    assert_eq!(tasks[0]["started_at"], "2025-11-22T10:00:00.000Z");
    assert_eq!(tasks[0]["events"], events.len() as u64);
    let table = scratch.cli(&["tasks"]);
    assert!(
        String::from_utf8_lossy(&table.stdout).contains("shop-1  stopped"),
        "{}",
        String::from_utf8_lossy(&table.stdout)
    );
}

#[test]
fn export_writes_a_zip_that_validates_and_embeds_bodies_on_request() {
    let scratch = Scratch::new();
    let (mut host, mut task, bodies) = record_shop(&scratch, "shop-2");
    let stop = task.stop(T0 + 50_000.0, None);
    host.send(&stop).unwrap();
    host.wait_for_ack(&task.task_id, stop.seq, TIMEOUT).unwrap();
    host.close().unwrap();

    let zip_path = scratch.path("shop.zip");
    let report = scratch.cli_json(&["export", "shop-2", "--out", zip_path.to_str().unwrap(), "--json"]);
    // The recording's 10 files, the 4 that processing (done on the way) derived from it, and the pack
    // that holds the DOM snapshots among them.
    assert_eq!(report["files"], 15);
    assert_eq!(report["processed"], true);
    assert!(!scratch.path(".shop.zip.partial").exists());
    let validated = scratch.cli_json(&["validate", zip_path.to_str().unwrap(), "--json"]);
    assert_eq!(validated["valid"], true, "{validated}");
    // The DOM snapshots are packed, and read back exactly as the host stored them.
    let mut bundle = trace_bundle::archive::Bundle::open(&zip_path).unwrap();
    let snapshots: Vec<String> = bundle.files().unwrap().into_keys().filter(|name| name.starts_with("dom/")).collect();
    assert!(!snapshots.is_empty());
    for name in &snapshots {
        let stored = std::fs::read(scratch.capture("shop-2").join(name)).unwrap();
        assert_eq!(bundle.read(name).unwrap(), stored, "{name}");
    }

    // As Playwright reads it: the zip's one .har, and each _file as a zip entry.
    let mut zip = zip::ZipArchive::new(std::fs::File::open(&zip_path).unwrap()).unwrap();
    let hars: Vec<String> = zip.file_names().filter(|n| n.ends_with(".har")).map(str::to_owned).collect();
    assert_eq!(hars, ["recording.har"]);
    let har: serde_json::Value = serde_json::from_slice(&read_zip_entry(&mut zip, "recording.har").unwrap()).unwrap();
    let plain_har = har.clone();
    let logo_file = har["log"]["entries"][1]["response"]["content"]["_file"].as_str().unwrap().to_owned();
    assert_eq!(read_zip_entry(&mut zip, &logo_file).unwrap(), bodies.logo);

    let embedded_path = scratch.path("embedded.zip");
    scratch.cli_json(&["export", "shop-2", "--out", embedded_path.to_str().unwrap(), "--embed-bodies", "--json"]);
    let validated = scratch.cli_json(&["validate", embedded_path.to_str().unwrap(), "--json"]);
    assert_eq!(validated["valid"], true, "{validated}");
    let mut zip = zip::ZipArchive::new(std::fs::File::open(&embedded_path).unwrap()).unwrap();
    let har: serde_json::Value = serde_json::from_slice(&read_zip_entry(&mut zip, "recording.har").unwrap()).unwrap();
    let entries = har["log"]["entries"].as_array().unwrap();
    assert_eq!(entries[0]["response"]["content"]["text"].as_str().unwrap().as_bytes(), bodies.home);
    assert!(entries[0]["response"]["content"].get("_file").is_none());
    let logo = &entries[1]["response"]["content"];
    assert_eq!(logo["encoding"], "base64");
    use base64::Engine as _;
    assert_eq!(base64::engine::general_purpose::STANDARD.decode(logo["text"].as_str().unwrap()).unwrap(), bodies.logo);

    // Written from the HAR model: apart from where the bodies are, it is the bundle's own HAR, field for field.
    let without_bodies = |mut har: serde_json::Value| {
        for entry in har["log"]["entries"].as_array_mut().unwrap() {
            let content = entry["response"]["content"].as_object_mut().unwrap();
            for field in ["text", "encoding", "_file"] {
                content.remove(field);
            }
        }
        har
    };
    assert_eq!(without_bodies(har), without_bodies(plain_har));
}

#[test]
fn resent_messages_are_acknowledged_once_and_gaps_are_named() {
    let scratch = Scratch::new();
    let mut host = scratch.host();
    let mut task = TaskMessages::new(task_id("resend"));
    let start = task.start(task_start("resend", TaskType::Action));
    let events = task.events(vec![navigation(1.0, "http://127.0.0.1:8000/")]);
    send_all(&mut host, &task, &[start.clone(), events.clone()]);

    // A reconnecting extension resends everything after what it saw acknowledged, and maybe more.
    host.send(&start).unwrap();
    host.send(&events).unwrap();
    host.wait_for_ack(&task.task_id, 2, TIMEOUT).unwrap();
    let mut skipped = task.events(vec![navigation(2.0, "http://127.0.0.1:8000/a")]);
    skipped.seq += 1;
    host.send(&skipped).unwrap();
    let reply = host.recv_non_ack(TIMEOUT).unwrap();
    assert!(
        matches!(reply, HostMessage::Error { code: ErrorCode::SequenceGap, expected_seq: Some(3), .. }),
        "{reply:?}"
    );

    host.send(&trace_manifest::wire::ClientMessage {
        seq: 0,
        body: trace_manifest::wire::ClientBody::Hello { task_id: Some(task.task_id.clone()) },
    })
    .unwrap();
    let reply = host.recv_non_ack(TIMEOUT).unwrap();
    let HostMessage::Hello { task: Some(progress), format_version, .. } = reply else { panic!("{reply:?}") };
    assert_eq!((progress.acked_seq, format_version), (2, trace_manifest::FORMAT_VERSION));
    host.close().unwrap();
    let tasks = scratch.cli_json(&["tasks", "--json"]);
    assert_eq!(tasks[0]["events"], 1, "the resent events were stored once");
    assert_eq!(tasks[0]["status"], "interrupted", "the port closed without a stop");
}

#[test]
fn an_information_retrieval_task_needs_its_answer_to_stop() {
    let scratch = Scratch::new();
    let mut host = scratch.host();
    let mut task = TaskMessages::new(task_id("question"));
    let start = task.start(task_start("question", TaskType::InformationRetrieval));
    send_all(&mut host, &task, &[start]);
    let stop = task.stop(T0 + 1000.0, Some("  "));
    host.send(&stop).unwrap();
    let others = host.wait_for_ack(&task.task_id, stop.seq, TIMEOUT).unwrap();
    assert!(matches!(others.as_slice(), [HostMessage::Error { code: ErrorCode::AnswerRequired, .. }]), "{others:?}");
    let stop = task.stop(T0 + 2000.0, Some("42 mugs"));
    host.send(&stop).unwrap();
    host.wait_for_ack(&task.task_id, stop.seq, TIMEOUT).unwrap();
    host.close().unwrap();
    let manifest = read_json(&scratch.capture("question").join("manifest.json"));
    assert_eq!(manifest["task"]["answer"], "42 mugs");
    assert_eq!(manifest["task"]["task_type"], "information_retrieval");
}

#[test]
fn a_discarded_task_leaves_nothing_behind_and_takes_no_more_data() {
    let scratch = Scratch::new();
    let (mut host, mut task, _) = record_shop(&scratch, "oops");
    assert!(scratch.capture("oops").join("resources").exists());
    let discard = task.discard();
    send_all(&mut host, &task, &[discard]);
    let late = task.events(vec![navigation(99.0, "http://127.0.0.1:8000/late")]);
    host.send(&late).unwrap();
    let reply = host.recv_non_ack(TIMEOUT).unwrap();
    assert!(matches!(reply, HostMessage::Error { code: ErrorCode::TaskClosed, .. }), "{reply:?}");
    host.close().unwrap();
    assert!(!scratch.capture("oops").exists());
    assert_eq!(scratch.cli_json(&["tasks", "--json"]), serde_json::json!([]));
    assert_eq!(scratch.cli_json(&["tasks", "--all", "--json"])[0]["status"], "discarded");
    let export = scratch.cli(&["export", "oops", "--out", scratch.path("x.zip").to_str().unwrap()]);
    assert_eq!(export.status.code(), Some(2));
    assert!(String::from_utf8_lossy(&export.stderr).contains("discarded"));
}

fn read_zip_entry(zip: &mut zip::ZipArchive<std::fs::File>, name: &str) -> std::io::Result<Vec<u8>> {
    let mut bytes = Vec::new();
    std::io::Read::read_to_end(&mut zip.by_name(name)?, &mut bytes)?;
    Ok(bytes)
}
