//! Helpers shared by the host tests: a fresh data directory, the CLI, and the events of a small shop.

use std::path::{Path, PathBuf};
use std::process::{Command, Output};
use std::time::Duration;

use trace_host::client::{HostClient, TaskMessages};
use trace_manifest::event::{
    Action, ActionKind, BodyPart, ElementDescriptor, Event, EventKind, Navigation, NavigationCause, PageLoad,
    RequestFinished,
};
use trace_manifest::task::{RecorderInfo, TaskId, TaskStart, TaskType};
use trace_manifest::testing;

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
    event(ts, testing::request(id, method, url, headers, post_data))
}

pub fn response(ts: f64, id: &str, url: &str, status: u16, mime_type: &str, headers: &[(&str, &str)]) -> Event {
    event(ts, testing::response(id, url, status, mime_type, headers))
}

pub fn finished(ts: f64, id: &str, length: u64) -> Event {
    event(ts, EventKind::RequestFinished(RequestFinished { request_id: id.into(), encoded_data_length: length }))
}

/// Records the task "short": a PIN of three characters typed on the login page, a credential too short to
/// redact reliably, which a redacted export must refuse.
pub fn record_too_short_credential(scratch: &Scratch) {
    let login = format!("{SITE}/login");
    record_action_task(
        scratch,
        "short",
        vec![navigation(1.0, &login), action(100.0, ActionKind::Input, &login, "#pin", Some("123"), true)],
    );
}

/// Records an action task `id` made of `events` through a host of its own, stopped, and closes the host.
pub fn record_action_task(scratch: &Scratch, id: &str, events: Vec<Event>) {
    let mut host = scratch.host();
    let mut task = TaskMessages::new(task_id(id));
    let messages =
        vec![task.start(task_start(id, TaskType::Action)), task.events(events), task.stop(T0 + 1000.0, None)];
    send_all(&mut host, &task, &messages);
    host.close().unwrap();
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
    let tag = if value.is_some() { "input" } else { "button" };
    let element = testing::element(selector, tag);
    let target = ElementDescriptor {
        name: element.id.clone(),
        input_type: credential.then(|| "password".to_owned()),
        ..element
    };
    event(
        ts,
        EventKind::Action(Box::new(Action {
            value: value.map(str::to_owned),
            x: Some(10.0),
            y: Some(20.0),
            credential,
            ..testing::action(kind, url, Some(target))
        })),
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

/// The recording most tests start from: a login on a small shop, flagged credentials and session secrets,
/// recorded through the real binary by [`record_login_and_cart`].
pub const PASSWORD: &str = "hunter2-Blue!";
pub const SITE: &str = "http://127.0.0.1:8000";
/// The session secrets the recording carries besides the password.
pub const CSRF: &str = "9f2c41d07be84a61";
pub const SESSION: &str = "s3ss10n-0a1b2c3d4e";
pub const API_TOKEN: &str = "api-tok-5566778899";

/// Records a login (its form's CSRF token in a hidden input and a cookie, a session cookie set on success),
/// a look at the products API (with a bearer token), adding a mug to the cart, and a tracker beacon on each
/// page.
pub fn record_login_and_cart(scratch: &Scratch, id: &str) {
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
    ]));
    let login_form = format!(
        "<form id=login-form method=post><input type=hidden name=csrf value=\"{CSRF}\"><input id=username>\
         <input id=password type=password></form>"
    );
    messages.extend(task.body("1", BodyPart::Response, login_form.as_bytes(), 1024));
    messages.push(task.events(vec![
        typed_request(5.0, "2", "POST", &format!("{SITE}/collect?e=pageview&p=/login"), "Ping", None),
        response(6.0, "2", &format!("{SITE}/collect?e=pageview&p=/login"), 204, "text/plain", &[]),
        finished(7.0, "2", 0),
        page_load(8.0, &login, "Sign in"),
    ]));
    messages.push(task.dom_snapshot(
        T0 + 9.0,
        1,
        &login,
        &format!(
            "<html><head><title>Sign in</title></head><body><h1>Sign in</h1><form>\
             <input type=hidden name=csrf value=\"{CSRF}\"><input id=username>\
             <input id=password type=password></form></body></html>"
        ),
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
            &[("Content-Type", "application/x-www-form-urlencoded"), ("Cookie", &format!("csrf={CSRF}"))],
            Some(&format!("csrf={CSRF}&username=ann&password={}", PASSWORD.replace('!', "%21"))),
        ),
        response(
            1420.0,
            "3",
            &login,
            303,
            "",
            &[("Location", "/account"), ("Set-Cookie", &format!("session={SESSION}; HttpOnly; Path=/"))],
        ),
        request(
            1421.0,
            "3",
            "GET",
            &account,
            &[("Cookie", &format!("session={SESSION}")), ("Authorization", &format!("Bearer {API_TOKEN}"))],
            None,
        ),
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

/// Copies a directory's files and folders, as they are, into `to`.
pub fn copy_dir(from: &Path, to: &Path) {
    std::fs::create_dir_all(to).unwrap();
    for entry in std::fs::read_dir(from).unwrap() {
        let entry = entry.unwrap();
        let target = to.join(entry.file_name());
        if entry.file_type().unwrap().is_dir() {
            copy_dir(&entry.path(), &target);
        } else {
            std::fs::copy(entry.path(), &target).unwrap();
        }
    }
}

/// Whether `needle` occurs in `haystack`.
pub fn contains(haystack: &[u8], needle: &[u8]) -> bool {
    haystack.windows(needle.len()).any(|window| window == needle)
}

/// Every entry of the zip, decompressed, and every file of its snapshot pack, unpacked.
pub fn zip_entries(zip: &Path) -> std::collections::BTreeMap<String, Vec<u8>> {
    let mut archive = zip::ZipArchive::new(std::fs::File::open(zip).unwrap()).unwrap();
    let mut entries: std::collections::BTreeMap<String, Vec<u8>> = (0..archive.len())
        .map(|index| {
            let mut entry = archive.by_index(index).unwrap();
            let mut bytes = Vec::new();
            std::io::Read::read_to_end(&mut entry, &mut bytes).unwrap();
            (entry.name().to_owned(), bytes)
        })
        .collect();
    let mut bundle = trace_bundle::archive::Bundle::open(zip).unwrap();
    for name in bundle.files().unwrap().into_keys().filter(|name| trace_bundle::pack::is_packed(name)) {
        let bytes = bundle.read(&name).unwrap();
        entries.insert(name, bytes);
    }
    entries
}
