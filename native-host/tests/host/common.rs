//! Helpers shared by the host tests: a fresh data directory, the CLI, and the events of a small shop.

use std::path::{Path, PathBuf};
use std::process::{Command, Output};
use std::time::Duration;

use trace_host::client::{HostClient, TaskMessages};
use trace_manifest::event::{
    Action, ActionKind, ElementDescriptor, Event, EventKind, Header, Navigation, NavigationCause, PageLoad, Request,
    RequestFinished, Response,
};
use trace_manifest::task::{RecorderInfo, TaskId, TaskStart, TaskType};

pub const TIMEOUT: Duration = Duration::from_secs(20);
pub const T0: f64 = 1_763_805_600_000.0;

pub fn host_exe() -> PathBuf {
    PathBuf::from(env!("CARGO_BIN_EXE_trace-host"))
}

/// A temporary directory holding a data directory and room for exports.
pub struct Scratch {
    pub dir: tempfile::TempDir,
}

impl Scratch {
    pub fn new() -> Scratch {
        Scratch { dir: tempfile::tempdir().unwrap() }
    }

    pub fn data(&self) -> PathBuf {
        self.dir.path().join("data")
    }

    pub fn path(&self, name: &str) -> PathBuf {
        self.dir.path().join(name)
    }

    pub fn host(&self) -> HostClient {
        HostClient::spawn(&host_exe(), &self.data()).unwrap()
    }

    /// Runs `trace-host --data DATA args...`.
    pub fn cli(&self, args: &[&str]) -> Output {
        Command::new(host_exe()).arg("--data").arg(self.data()).args(args).env_remove("TRACE_DATA").output().unwrap()
    }

    /// Runs the CLI, asserting success, and parses its JSON output.
    pub fn cli_json(&self, args: &[&str]) -> serde_json::Value {
        let output = self.cli(args);
        assert!(output.status.success(), "trace-host {args:?} failed: {}", String::from_utf8_lossy(&output.stderr));
        serde_json::from_slice(&output.stdout)
            .unwrap_or_else(|e| panic!("{e}: {}", String::from_utf8_lossy(&output.stdout)))
    }

    pub fn capture(&self, task_id: &str) -> PathBuf {
        self.data().join("captures").join(task_id)
    }
}

impl Drop for Scratch {
    /// A failing test shows what the hosts logged: the log lives in the data directory about to be deleted.
    fn drop(&mut self) {
        if std::thread::panicking() {
            let log = self.data().join("logs").join("trace-host.log");
            if let Ok(text) = std::fs::read_to_string(&log) {
                eprintln!("--- {} ---\n{text}", log.display());
            }
        }
    }
}

pub fn task_id(id: &str) -> TaskId {
    id.parse().unwrap()
}

pub fn task_start(id: &str, task_type: TaskType) -> TaskStart {
    TaskStart {
        task_id: task_id(id),
        source: "self".into(),
        task_type,
        description: "buy the blue mug".into(),
        website: "http://127.0.0.1:8000/".into(),
        recorder: RecorderInfo {
            name: "host-tests".into(),
            version: "0".into(),
            browser: Some("Chromium 156.0".into()),
            user_agent: None,
            platform: None,
        },
        started_at: T0,
    }
}

pub fn event(ts: f64, kind: EventKind) -> Event {
    Event { ts: T0 + ts, tab_id: Some(1), frame_id: None, kind }
}

pub fn navigation(ts: f64, url: &str) -> Event {
    event(ts, EventKind::Navigation(Navigation { url: url.into(), cause: NavigationCause::Typed, main_frame: true }))
}

pub fn page_load(ts: f64, url: &str, title: &str) -> Event {
    event(
        ts,
        EventKind::PageLoad(PageLoad {
            url: url.into(),
            title: title.into(),
            dom_content_loaded_ms: None,
            load_ms: None,
        }),
    )
}

pub fn request(ts: f64, id: &str, method: &str, url: &str, headers: &[(&str, &str)], post_data: Option<&str>) -> Event {
    event(
        ts,
        EventKind::Request(Request {
            request_id: id.into(),
            url: url.into(),
            method: method.into(),
            headers: headers.iter().map(|(n, v)| Header::new(*n, *v)).collect(),
            post_data: post_data.map(str::to_owned),
            resource_type: Some("Document".into()),
        }),
    )
}

pub fn response(ts: f64, id: &str, url: &str, status: u16, mime_type: &str, headers: &[(&str, &str)]) -> Event {
    event(
        ts,
        EventKind::Response(Response {
            request_id: id.into(),
            url: url.into(),
            status,
            status_text: "OK".into(),
            protocol: Some("http/1.1".into()),
            headers: headers.iter().map(|(n, v)| Header::new(*n, *v)).collect(),
            mime_type: mime_type.into(),
            remote_ip_address: Some("127.0.0.1".into()),
            from_cache: false,
            timing: None,
        }),
    )
}

pub fn finished(ts: f64, id: &str, length: u64) -> Event {
    event(ts, EventKind::RequestFinished(RequestFinished { request_id: id.into(), encoded_data_length: length }))
}

/// Sends every message and waits until the last is acknowledged; returns the other replies.
pub fn send_all(
    host: &mut HostClient,
    task: &TaskMessages,
    messages: &[trace_manifest::wire::ClientMessage],
) -> Vec<trace_manifest::wire::HostMessage> {
    for message in messages {
        host.send(message).unwrap();
    }
    host.wait_for_ack(&task.task_id, task.last_seq(), TIMEOUT).unwrap()
}

pub fn read_json(path: &Path) -> serde_json::Value {
    serde_json::from_slice(&std::fs::read(path).unwrap()).unwrap()
}

pub fn sha256_hex(bytes: &[u8]) -> String {
    trace_manifest::archive::sha256_hex(bytes)
}

/// A request of a given DevTools resource type (`Ping`, `Fetch`, `Script`, …).
pub fn typed_request(
    ts: f64,
    id: &str,
    method: &str,
    url: &str,
    resource_type: &str,
    post_data: Option<&str>,
) -> Event {
    let mut event = request(ts, id, method, url, &[], post_data);
    if let EventKind::Request(request) = &mut event.kind {
        request.resource_type = Some(resource_type.into());
    }
    event
}

/// Something the person did to the element `selector` (an `<input>` when there is a value, else a button).
pub fn action(ts: f64, kind: ActionKind, url: &str, selector: &str, value: Option<&str>, credential: bool) -> Event {
    let name = selector.trim_start_matches('#');
    let tag = if value.is_some() { "input" } else { "button" };
    event(
        ts,
        EventKind::Action(Action {
            action: kind,
            target: Some(ElementDescriptor {
                selector: selector.into(),
                xpath: format!("//{tag}[@id='{name}']"),
                tag: tag.into(),
                id: Some(name.into()),
                name: Some(name.into()),
                input_type: credential.then(|| "password".to_owned()),
                ..Default::default()
            }),
            url: url.into(),
            value: value.map(str::to_owned),
            key: None,
            modifiers: vec![],
            x: Some(10.0),
            y: Some(20.0),
            delta_x: None,
            delta_y: None,
            credential,
            page_made: false,
        }),
    )
}

/// A main-frame navigation with its cause.
pub fn navigation_by(ts: f64, url: &str, cause: NavigationCause) -> Event {
    event(ts, EventKind::Navigation(Navigation { url: url.into(), cause, main_frame: true }))
}

/// A small tmpfs mounted on `dir` (which must exist) until dropped, for tests of a full disk; `None`, said
/// in a line naming `test`, when it cannot be mounted (it needs root).
pub fn mount_tmpfs(dir: &Path, size: &str, test: &str) -> Option<Unmount> {
    let mounted = Command::new("mount")
        .args(["-t", "tmpfs", "-o", &format!("size={size}"), "tmpfs"])
        .arg(dir)
        .stderr(std::process::Stdio::null())
        .status()
        .is_ok_and(|status| status.success());
    if !mounted {
        eprintln!("skipped {test}: cannot mount a tmpfs (needs root)");
        return None;
    }
    Some(Unmount(dir.to_owned()))
}

/// Unmounts what [`mount_tmpfs`] mounted.
pub struct Unmount(PathBuf);

impl Drop for Unmount {
    fn drop(&mut self) {
        let _ = Command::new("umount").arg(&self.0).status();
    }
}
