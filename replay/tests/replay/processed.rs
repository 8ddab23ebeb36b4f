//! Replay reads what post-processing wrote (`ignored.json`, `trajectory.json`, `credentials.json`), and
//! derives the same from the recording, by `trace-analysis`'s rules, when the bundle was never processed.

use serde_json::json;

use crate::common::{har, har_entry, write_bundle, write_file, write_manifest};

use trace_replay::run::human_trajectory;

const BEACON: &str = "http://shop.test/collect?e=pageview";

/// A bundle of a page and its beacon (a `Ping` answered 204), without `ignored.json`.
fn unprocessed_bundle() -> tempfile::TempDir {
    let dir = tempfile::tempdir().unwrap();
    let entries = vec![
        har_entry("http://shop.test/", json!({ "size": 4, "mimeType": "text/html", "text": "shop" })),
        har_entry(BEACON, json!({ "size": 0, "mimeType": "text/plain", "text": "" })),
    ];
    write_bundle(dir.path(), "ignore-list", &har(entries), &json!({ "snapshots": [] }));
    let event = |id: u64, kind: serde_json::Value| {
        let mut record = json!({ "id": id, "ts": 1_763_805_601_000.0 + id as f64, "tab_id": 1 });
        record.as_object_mut().unwrap().extend(kind.as_object().unwrap().clone());
        record.to_string()
    };
    let events = [
        event(
            1,
            json!({ "type": "request", "request_id": "1", "url": "http://shop.test/", "method": "GET",
                         "headers": [], "resource_type": "Document" }),
        ),
        event(
            2,
            json!({ "type": "response", "request_id": "1", "url": "http://shop.test/", "status": 200,
                         "headers": [], "mime_type": "text/html" }),
        ),
        event(
            3,
            json!({ "type": "request", "request_id": "2", "url": BEACON, "method": "POST",
                         "headers": [], "resource_type": "Ping" }),
        ),
        event(4, json!({ "type": "response", "request_id": "2", "url": BEACON, "status": 204, "headers": [] })),
    ];
    write_file(dir.path(), "events.jsonl", (events.join("\n") + "\n").as_bytes());
    write_manifest(dir.path(), 1, "ignore-list");
    dir
}

fn ignored(bundle: &std::path::Path) -> Vec<(String, u64)> {
    let summary = trace_replay::inspect::inspect(bundle, Default::default()).unwrap();
    summary.ignored.into_iter().map(|ignored| (ignored.pattern, ignored.requests)).collect()
}

#[test]
fn an_unprocessed_bundle_gets_the_ignore_list_processing_would_write() {
    let bundle = unprocessed_bundle();
    assert_eq!(ignored(bundle.path()), [("shop.test/collect?".to_owned(), 1)]);
}

#[test]
fn a_processed_bundle_is_replayed_with_the_list_it_holds() {
    let bundle = unprocessed_bundle();
    write_file(bundle.path(), "ignored.json", b"[\"shop.test/\"]");
    write_manifest(bundle.path(), 1, "ignore-list");
    // The page and the beacon: what the file says, not what would be derived.
    assert_eq!(ignored(bundle.path()), [("shop.test/".to_owned(), 2)]);
}

#[test]
fn the_human_run_follows_the_trajectory_processing_wrote() {
    let bundle = unprocessed_bundle();
    // Never processed: derived from the events, which hold no action (a navigation-less recording ends
    // with its `done`).
    let (calls, credentials) = human_trajectory(bundle.path(), Default::default()).unwrap();
    let names: Vec<&str> = calls.iter().map(|call| call.action.name()).collect();
    assert_eq!(names, ["done"]);
    assert!(credentials.is_empty());

    let trajectory = json!({ "task_id": "ignore-list", "tool_calls": [
        { "name": "navigate", "params": { "url": "http://shop.test/" }, "ts": 1.0 },
        { "name": "input", "params": { "text": "{{credentials.shop.test.password}}" }, "ts": 2.0 },
        { "name": "done", "params": { "text": "", "success": true }, "ts": 3.0 }
    ]});
    let descriptor = json!({ "selector": "#password", "xpath": "//input[@id=\"password\"]", "tag": "input", "input_type": "password" });
    let credentials = json!([{ "site": "shop.test", "field": "password", "descriptor": descriptor,
                               "value": "stand-in-1", "placeholder": "{{credentials.shop.test.password}}" }]);
    write_file(bundle.path(), "trajectory.json", trajectory.to_string().as_bytes());
    write_file(bundle.path(), "credentials.json", credentials.to_string().as_bytes());
    write_manifest(bundle.path(), 1, "ignore-list");
    let (calls, credentials) = human_trajectory(bundle.path(), Default::default()).unwrap();
    let names: Vec<&str> = calls.iter().map(|call| call.action.name()).collect();
    assert_eq!(names, ["navigate", "input", "done"]);
    assert_eq!(credentials.len(), 1);
    assert_eq!(
        (credentials[0].placeholder(), credentials[0].value.as_str()),
        ("{{credentials.shop.test.password}}".to_owned(), "stand-in-1")
    );
}
