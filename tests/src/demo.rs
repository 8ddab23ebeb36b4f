//! The demo: a scripted demonstration of a small shop (home page with a stylesheet and a logo, a search
//! with a query string, a login POST that redirects with a session cookie, an account page), streamed
//! through the real `trace-host` binary with a screenshot and a DOM snapshot, then turned into a bundle,
//! exported as a zip, validated and inspected with the real binaries.

use std::path::{Path, PathBuf};
use std::process::Command;
use std::time::Duration;

use anyhow::{Context, Result, bail, ensure};
use serde_json::json;
use trace_host::client::{HostClient, TINY_PNG, TaskMessages};
use trace_manifest::event::{BodyPart, Event};
use trace_manifest::task::{RecorderInfo, TaskId, TaskStart, TaskType};
use trace_manifest::wire::HostMessage;

pub const TASK_ID: &str = "demo-shop";
const SITE: &str = "http://127.0.0.1:8000";

/// Where the demo finds the binaries and puts what it makes.
pub struct DemoConfig {
    pub bin_dir: PathBuf,
    pub out_dir: PathBuf,
}

/// What the demo made.
pub struct DemoOutput {
    pub bundle_dir: PathBuf,
    pub zip: PathBuf,
}

pub fn run(config: &DemoConfig) -> Result<DemoOutput> {
    let data = config.out_dir.join("data");
    if data.exists() {
        std::fs::remove_dir_all(&data).with_context(|| format!("cannot clear {}", data.display()))?;
    }
    std::fs::create_dir_all(&data)?;
    let host_exe = config.bin_dir.join("trace-host");
    println!("recording: streaming a scripted shop session through {}", host_exe.display());
    let bundle_dir = record(&host_exe, &data)?;
    println!("bundle:    {}", bundle_dir.display());

    let zip = config.out_dir.join(format!("{TASK_ID}.zip"));
    run_binary(Command::new(&host_exe).arg("--data").arg(&data).args(["export", TASK_ID, "--out"]).arg(&zip))?;
    run_binary(Command::new(&host_exe).arg("validate").arg(&zip))?;
    run_binary(Command::new(config.bin_dir.join("trace-replay")).arg("inspect").arg(&zip))?;
    Ok(DemoOutput { bundle_dir, zip })
}

fn run_binary(command: &mut Command) -> Result<()> {
    let status = command.status().with_context(|| format!("cannot run {command:?}"))?;
    ensure!(status.success(), "{command:?} failed with {status}");
    Ok(())
}

fn record(host_exe: &Path, data: &Path) -> Result<PathBuf> {
    let mut host = HostClient::spawn(host_exe, data)?;
    let task_id: TaskId = TASK_ID.parse().map_err(anyhow::Error::msg)?;
    let mut task = TaskMessages::new(task_id.clone());
    let t0 = 1_763_805_600_000.0;
    let mut messages = vec![task.start(TaskStart {
        task_id: task_id.clone(),
        source: "demo".into(),
        task_type: TaskType::Action,
        description: "Log in and look at the account page".into(),
        website: format!("{SITE}/"),
        recorder: RecorderInfo {
            name: "trace-demo".into(),
            version: env!("CARGO_PKG_VERSION").into(),
            ..RecorderInfo::default()
        },
        started_at: t0,
    })];
    let pages: [(&str, &str, &str, &[u8]); 5] = [
        ("1", "GET", "/", b"<html><head><link rel=stylesheet href=/shop.css></head><body><h1>Shop</h1><img src=/logo.png></body></html>"),
        ("2", "GET", "/shop.css", b"h1 { color: teal }"),
        ("3", "GET", "/logo.png", TINY_PNG),
        ("4", "GET", "/search?q=mug&_=1763805601000", b"<html><body><ul><li>Blue mug</li></ul></body></html>"),
        ("6", "GET", "/account", b"{\"user\":\"ann\",\"orders\":[1]}"),
    ];
    let mut events = vec![event(t0, json!({"type": "navigation", "url": format!("{SITE}/"), "cause": "typed"}))];
    for (offset, (id, method, path, body)) in pages.iter().enumerate() {
        let ts = t0 + 100.0 * (offset as f64 + 1.0);
        if *id == "6" {
            events.push(event(
                ts - 50.0,
                json!({"type": "request", "request_id": "5", "url": format!("{SITE}/login"),
                "method": "POST", "headers": [{"name": "Content-Type", "value": "application/x-www-form-urlencoded"}],
                "post_data": "user=ann&csrf=demo"}),
            ));
            events.push(event(ts - 40.0, json!({"type": "response", "request_id": "5", "url": format!("{SITE}/login"),
                "status": 303, "headers": [{"name": "Location", "value": "/account"}, {"name": "Set-Cookie", "value": "sid=demo; HttpOnly"}]})));
            events.push(event(ts - 30.0, json!({"type": "request_finished", "request_id": "5"})));
        }
        events.push(event(
            ts,
            json!({"type": "request", "request_id": id, "url": format!("{SITE}{path}"), "method": method,
            "headers": [{"name": "Accept", "value": "*/*"}]}),
        ));
        events.push(event(
            ts + 10.0,
            json!({"type": "response", "request_id": id, "url": format!("{SITE}{path}"), "status": 200,
            "status_text": "OK", "headers": [], "mime_type": mime_type(path)}),
        ));
        events.push(event(
            ts + 20.0,
            json!({"type": "request_finished", "request_id": id, "encoded_data_length": body.len()}),
        ));
    }
    events.push(event(t0 + 700.0, json!({"type": "page_load", "url": format!("{SITE}/account"), "title": "Account"})));
    messages.push(task.events(events));
    for (id, _, _, body) in pages {
        messages.extend(task.body(id, BodyPart::Response, body, 64 * 1024));
    }
    messages.push(task.screenshot(t0 + 800.0, 1, TINY_PNG, "load"));
    messages.push(task.dom_snapshot(t0 + 810.0, 1, &format!("{SITE}/account"), "<html><body>ann</body></html>", None));
    messages.push(task.stop(t0 + 5_000.0, None));
    for message in &messages {
        host.send(message)?;
    }
    let replies = host.wait_for_ack(&task_id, task.last_seq(), Duration::from_secs(30))?;
    let bundle =
        replies.iter().chain(host.recv_non_ack(Duration::from_secs(30)).as_ref()).find_map(|reply| match reply {
            HostMessage::TaskStopped { bundle, .. } => Some(PathBuf::from(bundle)),
            _ => None,
        });
    let (status, _) = host.close()?;
    ensure!(status.success(), "trace-host exited with {status}");
    match bundle {
        Some(bundle) => Ok(bundle),
        None => bail!("trace-host did not report a finished bundle; replies: {replies:?}"),
    }
}

fn event(ts: f64, kind: serde_json::Value) -> Event {
    let mut value = kind;
    value["ts"] = json!(ts);
    value["tab_id"] = json!(1);
    serde_json::from_value(value).expect("the demo's events are well formed")
}

fn mime_type(path: &str) -> &'static str {
    match path.rsplit('.').next() {
        Some("css") => "text/css",
        Some("png") => "image/png",
        _ if path.starts_with("/account") => "application/json",
        _ => "text/html",
    }
}
