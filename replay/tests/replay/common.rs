//! Bundles written by hand, file by file, as the host writes them: a HAR of one page, `storage.json`,
//! an empty `events.jsonl`, bodies under `resources/` named by their sha256, and `manifest.json` last,
//! indexing and counting the rest. Each test file builds the bundle it needs from these pieces.

use std::path::Path;

use serde_json::{Value, json};
use trace_bundle::archive::sha256_hex;

/// When every bundle written here was recorded (`manifest.json`'s `started_at`).
pub const STARTED_AT: &str = "2025-11-22T10:00:00.000Z";

/// Where the bundle stores `body`: `resources/<sha256>`.
pub fn body_path(body: &[u8]) -> String {
    format!("resources/{}", sha256_hex(body))
}

/// Writes `body` to the bundle in `dir` and returns the HAR `content` naming it (`content._file`).
pub fn stored_body(dir: &Path, body: &[u8], mime_type: &str) -> Value {
    write_file(dir, &body_path(body), body);
    json!({ "size": body.len(), "mimeType": mime_type, "_file": body_path(body) })
}

/// One HAR entry for a GET of `url` answered 200 with `content`, its `Content-Type` the content's MIME type.
pub fn har_entry(url: &str, content: Value) -> Value {
    json!({
        "pageref": "page_1",
        "startedDateTime": "2025-11-22T10:00:01.000Z",
        "time": 1.0,
        "request": {
            "method": "GET", "url": url, "httpVersion": "http/1.1", "cookies": [], "headers": [],
            "queryString": [], "headersSize": -1, "bodySize": 0
        },
        "response": {
            "status": 200, "statusText": "OK", "httpVersion": "http/1.1", "cookies": [],
            "headers": [{ "name": "Content-Type", "value": content["mimeType"] }],
            "content": content, "redirectURL": "", "headersSize": -1, "bodySize": content["size"]
        },
        "cache": {},
        "timings": { "blocked": -1, "dns": -1, "connect": -1, "send": 0, "wait": 1, "receive": 0, "ssl": -1 }
    })
}

/// A HAR of one page, titled "Shop", holding `entries`.
pub fn har(entries: Vec<Value>) -> Value {
    json!({
        "log": {
            "version": "1.2",
            "creator": { "name": "trace-host", "version": "0.1.0" },
            "pages": [{ "startedDateTime": STARTED_AT, "id": "page_1", "title": "Shop", "pageTimings": {} }],
            "entries": entries
        }
    })
}

/// Completes the bundle in `dir` (whose bodies, and any other file it should hold, are already written) for
/// the task `task_id`: `recording.har`, `storage.json`, an empty `events.jsonl`, then `manifest.json`.
pub fn write_bundle(dir: &Path, task_id: &str, har: &Value, storage: &Value) {
    write_file(dir, "events.jsonl", b"");
    write_file(dir, "recording.har", har.to_string().as_bytes());
    write_file(dir, "storage.json", storage.to_string().as_bytes());
    write_manifest(dir, 1, task_id);
}

/// Writes `manifest.json` with `format_version`, indexing every other file of `dir` and counting what its
/// HAR and `resources/` hold.
pub fn write_manifest(dir: &Path, format_version: u32, task_id: &str) {
    let files = files_under(dir);
    let har: Value = serde_json::from_slice(&std::fs::read(dir.join("recording.har")).unwrap()).unwrap();
    let bodies: Vec<&Vec<u8>> =
        files.iter().filter(|(name, _)| name.starts_with("resources/")).map(|(_, bytes)| bytes).collect();
    let index: Vec<Value> = files
        .iter()
        .filter(|(name, _)| name != "manifest.json")
        .map(|(path, bytes)| json!({ "path": path, "size": bytes.len(), "sha256": sha256_hex(bytes) }))
        .collect();
    let manifest = json!({
        "format": "trace-bundle",
        "format_version": format_version,
        "task": {
            "id": task_id, "source": "self", "task_type": "action",
            "description": "Look at the shop", "website": "http://shop.test/", "status": "stopped"
        },
        "recorder": { "name": "trace-extension", "version": "0.1.0" },
        "producer": { "name": "trace-replay tests", "version": "0" },
        "started_at": STARTED_AT,
        "ended_at": "2025-11-22T10:00:05.000Z",
        "duration_seconds": 5.0,
        "counts": {
            "events": 0,
            "pages": har["log"]["pages"].as_array().map_or(0, Vec::len),
            "requests": har["log"]["entries"].as_array().map_or(0, Vec::len),
            "actions": 0,
            "bodies": bodies.len(),
            "body_bytes": bodies.iter().map(|body| body.len()).sum::<usize>(),
            "screenshots": 0,
            "dom_snapshots": 0
        },
        "files": index
    });
    write_file(dir, "manifest.json", serde_json::to_string_pretty(&manifest).unwrap().as_bytes());
}

pub fn write_file(dir: &Path, name: &str, bytes: &[u8]) {
    let path = dir.join(name);
    std::fs::create_dir_all(path.parent().unwrap()).unwrap();
    std::fs::write(path, bytes).unwrap();
}

/// Every file under `dir` as (relative `/`-separated path, contents), sorted by path.
pub fn files_under(dir: &Path) -> Vec<(String, Vec<u8>)> {
    fn walk(root: &Path, dir: &Path, files: &mut Vec<(String, Vec<u8>)>) {
        for entry in std::fs::read_dir(dir).unwrap() {
            let path = entry.unwrap().path();
            if path.is_dir() {
                walk(root, &path, files);
            } else {
                let name = path.strip_prefix(root).unwrap().to_str().unwrap().replace('\\', "/");
                files.push((name, std::fs::read(&path).unwrap()));
            }
        }
    }
    let mut files = Vec::new();
    walk(dir, dir, &mut files);
    files.sort();
    files
}
