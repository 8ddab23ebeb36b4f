//! Bundles written by hand, file by file, as the host writes them (a HAR of the recorded exchanges, an empty
//! `events.jsonl`, `storage.json`, bodies under `resources/` named by their SHA-256, and `manifest.json`
//! last, indexing the rest), for the end-to-end tests whose page no real site has: a page that posts
//! bodies of any size, as a hostile page or agent would.

use std::path::Path;

use serde_json::{Value, json};
use trace_bundle::archive::sha256_hex;

/// When every bundle written here was recorded.
const STARTED_AT: &str = "2025-11-22T10:00:00.000Z";

/// One recorded exchange: its method and URL, and the answer's MIME type and body.
pub struct Exchange<'a> {
    pub method: &'a str,
    pub url: &'a str,
    pub mime_type: &'a str,
    pub body: &'a [u8],
}

/// Writes a bundle of `exchanges` into `dir` for the task `task_id`, whose website is the first one's URL.
pub fn write_bundle(dir: &Path, task_id: &str, exchanges: &[Exchange<'_>]) {
    let entries: Vec<Value> = exchanges
        .iter()
        .map(|exchange| {
            let path = format!("resources/{}", sha256_hex(exchange.body));
            write_file(dir, &path, exchange.body);
            json!({
                "pageref": "page_1", "startedDateTime": STARTED_AT, "time": 1.0,
                "request": {
                    "method": exchange.method, "url": exchange.url, "httpVersion": "http/1.1", "cookies": [],
                    "headers": [], "queryString": [], "headersSize": -1, "bodySize": 0
                },
                "response": {
                    "status": 200, "statusText": "OK", "httpVersion": "http/1.1", "cookies": [],
                    "headers": [{ "name": "Content-Type", "value": exchange.mime_type }],
                    "content": { "size": exchange.body.len(), "mimeType": exchange.mime_type, "_file": path },
                    "redirectURL": "", "headersSize": -1, "bodySize": exchange.body.len()
                },
                "cache": {},
                "timings": { "blocked": -1, "dns": -1, "connect": -1, "send": 0, "wait": 1, "receive": 0, "ssl": -1 }
            })
        })
        .collect();
    let har = json!({ "log": {
        "version": "1.2",
        "creator": { "name": "trace-host", "version": "0.1.0" },
        "pages": [{ "startedDateTime": STARTED_AT, "id": "page_1", "title": "Page", "pageTimings": {} }],
        "entries": entries,
    }});
    write_file(dir, "events.jsonl", b"");
    write_file(dir, "recording.har", har.to_string().as_bytes());
    write_file(dir, "storage.json", br#"{"snapshots":[]}"#);
    let mut files = Vec::new();
    index(dir, dir, &mut files);
    files.sort_by(|a: &Value, b: &Value| a["path"].as_str().cmp(&b["path"].as_str()));
    let manifest = json!({
        "format": "trace-bundle",
        "format_version": trace_manifest::FORMAT_VERSION,
        "task": {
            "id": task_id, "source": "self", "task_type": "action", "description": "Look at the page",
            "website": exchanges.first().map_or("", |exchange| exchange.url), "status": "stopped"
        },
        "recorder": { "name": "trace-extension", "version": "0.1.0" },
        "producer": { "name": "trace-e2e", "version": "0" },
        "started_at": STARTED_AT,
        "ended_at": STARTED_AT,
        "duration_seconds": 0.0,
        "counts": {
            "events": 0, "pages": 1, "requests": exchanges.len(), "actions": 0, "bodies": exchanges.len(),
            "body_bytes": 0, "screenshots": 0, "dom_snapshots": 0
        },
        "files": files,
    });
    write_file(dir, "manifest.json", serde_json::to_vec_pretty(&manifest).unwrap().as_slice());
}

/// A page that, once loaded, posts a text body of each size of `mib` (in MiB) to `/upload`, as `posting`
/// says, then says `done` in its title. Body `i` is [`posted_body`]`(i, mib[i])`.
pub fn posting_page(mib: &[usize], posting: Posting) -> String {
    let sizes = mib.iter().map(usize::to_string).collect::<Vec<_>>().join(",");
    let together = matches!(posting, Posting::AllAtOnce);
    format!(
        r#"<!doctype html><title>posting</title><h1>Uploads</h1><script>
(async () => {{
  const sizes = [{sizes}];
  const post = async (i) => {{
    const body = String.fromCharCode(97 + (i % 26)).repeat(sizes[i] * 1048576 - 8) + String(i).padStart(8, '0');
    try {{ await fetch('/upload', {{method: 'POST', headers: {{'content-type': 'text/plain'}}, body}}); }} catch (e) {{}}
  }};
  if ({together}) {{
    await Promise.all(sizes.map((_, i) => post(i)));
  }} else {{
    for (let i = 0; i < sizes.length; i++) await post(i);
  }}
  document.title = 'done';
}})();
</script>"#
    )
}

/// How [`posting_page`] sends its bodies.
#[derive(Debug, Clone, Copy)]
pub enum Posting {
    /// Each once the one before is answered, as an uploader does.
    OneAfterAnother,
    /// All at once, as a hostile page does.
    AllAtOnce,
}

/// The body [`posting_page`] posts `i`-th, of `mib` MiB.
pub fn posted_body(i: usize, mib: usize) -> Vec<u8> {
    let mut body = vec![b'a' + (i % 26) as u8; (mib << 20) - 8];
    body.extend_from_slice(format!("{i:08}").as_bytes());
    body
}

fn index(root: &Path, dir: &Path, files: &mut Vec<Value>) {
    for entry in std::fs::read_dir(dir).unwrap() {
        let path = entry.unwrap().path();
        if path.is_dir() {
            index(root, &path, files);
        } else {
            let bytes = std::fs::read(&path).unwrap();
            let name = path.strip_prefix(root).unwrap().to_string_lossy().replace('\\', "/");
            files.push(json!({ "path": name, "size": bytes.len(), "sha256": sha256_hex(&bytes) }));
        }
    }
}

fn write_file(dir: &Path, name: &str, bytes: &[u8]) {
    let path = dir.join(name);
    std::fs::create_dir_all(path.parent().unwrap()).unwrap();
    std::fs::write(path, bytes).unwrap();
}
