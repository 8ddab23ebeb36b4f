//! The recording in progress, as the service worker holds it.
//!
//! Starting a task opens (or takes) a tab, attaches `chrome.debugger` to it with the cache disabled, and
//! from then on every DevTools event of the recorded tabs goes through a [`NetworkTranslator`] per tab;
//! completed exchanges become `events` messages, and each finished response's body is fetched and sent in
//! chunks. Tabs opened by a recorded tab are recorded too. Every message goes through the task's
//! [`Outbox`], so that what the host has not acknowledged is sent again after a reconnect.

use std::cell::RefCell;
use std::collections::{BTreeSet, HashMap};

use base64::Engine as _;
use serde::Serialize;
use serde_json::{Value, json};
use trace_manifest::event::{
    BodyPart, ConsoleMessage, Event, EventKind, ImageFormat, Navigation, NavigationCause, PageLoad, StoragePhase,
    StorageSnapshot, TabEvent, TabOp,
};
use trace_manifest::task::{RecorderInfo, TaskId, TaskStart, TaskType};
use trace_manifest::wire::{ClientBody, HostMessage, SUGGESTED_CHUNK_BYTES};
use wasm_bindgen::prelude::*;
use wasm_bindgen_futures::JsFuture;

use crate::chrome::{self, from_js, to_js};
use crate::host_link;
use crate::network::NetworkTranslator;
use crate::outbox::{DEFAULT_LIMIT_BYTES, Outbox};

/// What the person asked to record.
#[derive(Debug, Clone)]
pub struct TaskRequest {
    pub source: String,
    pub task_type: TaskType,
    pub description: String,
    pub website: String,
    /// Record the active tab instead of opening the website in a new one.
    pub current_tab: bool,
}

/// What the popup shows while recording.
#[derive(Debug, Clone, Default, Serialize)]
pub struct Progress {
    pub task_id: String,
    pub task_type: String,
    pub started_at: f64,
    pub requests: u64,
    pub bytes: u64,
    pub steps: u64,
    pub tabs: usize,
    /// Messages waiting for the host's acknowledgement.
    pub unacknowledged: usize,
    /// Messages the full buffer refused while the host was away: lost, and said so.
    pub refused: u64,
}

struct Recording {
    outbox: Outbox,
    task_type: TaskType,
    tabs: BTreeSet<i64>,
    translators: HashMap<i64, NetworkTranslator>,
    /// Response bodies being streamed, by tab and request id.
    streams: HashMap<(i64, String), BodyStream>,
    /// Response bodies taken while their response was paused, waiting for their exchange to complete.
    captured: HashMap<(i64, String), Vec<u8>>,
    /// Exchanges whose body is too large to take whole: they are streamed.
    large: BTreeSet<(i64, String)>,
    next_body: u64,
    progress: Progress,
}

/// One response body on its way to the host. Chrome sends what arrived before streaming was switched on
/// in the command's answer, and the rest in `dataReceived` events that may overtake that answer: those
/// wait in `early` until it comes, so that chunks leave in order.
struct BodyStream {
    body_id: String,
    next_index: u64,
    started: bool,
    early: Vec<String>,
    finished: bool,
}

impl Recording {
    /// The id of a new body of this task: unique within it, as the host requires.
    fn new_body_id(&mut self, tab_id: i64) -> String {
        self.next_body += 1;
        format!("{tab_id}-{}", self.next_body)
    }
}

thread_local! {
    static ACTIVE: RefCell<Option<Recording>> = const { RefCell::new(None) };
}

pub fn active_task_id() -> Option<TaskId> {
    ACTIVE.with(|active| active.borrow().as_ref().map(|r| r.outbox.task_id().clone()))
}

pub fn progress() -> Option<Progress> {
    ACTIVE.with(|active| {
        active.borrow().as_ref().map(|r| Progress {
            unacknowledged: r.outbox.pending_messages(),
            tabs: r.tabs.len(),
            ..r.progress.clone()
        })
    })
}

/// Starts recording: registers the task with the host, then opens (or takes) the tab and attaches to it.
pub async fn start(request: TaskRequest) -> Result<(), String> {
    if active_task_id().is_some() {
        return Err("a task is already being recorded; stop or discard it first".to_owned());
    }
    let started_at = js_sys::Date::now();
    let task_id = new_task_id(started_at);
    let manifest = chrome::get_manifest();
    let version = js_sys::Reflect::get(&manifest, &"version".into()).ok().and_then(|v| v.as_string());
    let start = TaskStart {
        task_id: task_id.clone(),
        source: request.source.clone(),
        task_type: request.task_type,
        description: request.description.clone(),
        website: request.website.clone(),
        recorder: RecorderInfo {
            name: "trace-extension".to_owned(),
            version: version.unwrap_or_default(),
            browser: None,
            user_agent: user_agent(),
            platform: None,
        },
        started_at,
    };
    ACTIVE.with(|active| {
        *active.borrow_mut() = Some(Recording {
            outbox: Outbox::new(task_id.clone(), DEFAULT_LIMIT_BYTES),
            task_type: request.task_type,
            tabs: BTreeSet::new(),
            translators: HashMap::new(),
            streams: HashMap::new(),
            captured: HashMap::new(),
            large: BTreeSet::new(),
            next_body: 0,
            progress: Progress {
                task_id: task_id.to_string(),
                task_type: request.task_type.as_str().to_owned(),
                started_at,
                ..Progress::default()
            },
        })
    });
    host_link::ensure_connected();
    send(ClientBody::StartTask(start));
    set_badge("REC").await;

    let tab_id = if request.current_tab {
        let tabs = JsFuture::from(chrome::tabs_query(&to_js(&json!({"active": true, "currentWindow": true}))))
            .await
            .map_err(describe)?;
        let tab = js_sys::Array::from(&tabs).get(0);
        number(&tab, "id").ok_or("there is no active tab to record")? as i64
    } else {
        let tab = JsFuture::from(chrome::tabs_create(&to_js(&json!({"url": "about:blank", "active": true}))))
            .await
            .map_err(describe)?;
        number(&tab, "id").ok_or("the new tab has no id")? as i64
    };
    attach(tab_id).await?;
    storage_snapshot(tab_id, StoragePhase::Start).await;
    if !request.current_tab {
        command(tab_id, "Page.navigate", json!({"url": request.website})).await?;
    }
    Ok(())
}

/// Stops recording: sends what is still in flight, the final storage, and `stop_task`.
pub async fn stop(answer: Option<String>) -> Result<(), String> {
    let Some((tabs, task_type)) = ACTIVE.with(|a| a.borrow().as_ref().map(|r| (r.tabs.clone(), r.task_type))) else {
        return Err("nothing is being recorded".to_owned());
    };
    let answer = answer.map(|a| a.trim().to_owned()).filter(|a| !a.is_empty());
    if task_type == TaskType::InformationRetrieval && answer.is_none() {
        return Err("an information retrieval task needs its answer before it stops".to_owned());
    }
    if let Some(&tab_id) = tabs.iter().next() {
        storage_snapshot(tab_id, StoragePhase::Stop).await;
    }
    for &tab_id in &tabs {
        let leftovers = ACTIVE.with(|a| {
            a.borrow_mut().as_mut().and_then(|r| r.translators.get_mut(&tab_id)).map(|t| t.flush(Some(tab_id)))
        });
        send_events(leftovers.unwrap_or_default());
        let _ = JsFuture::from(chrome::debugger_detach(&to_js(&json!({"tabId": tab_id})))).await;
    }
    let task_id = active_task_id().expect("checked above");
    send(ClientBody::StopTask { task_id, answer, ts: js_sys::Date::now() });
    finish().await;
    Ok(())
}

/// Abandons the recording; the host deletes what it stored.
pub async fn discard() -> Result<(), String> {
    let task_id = active_task_id().ok_or("nothing is being recorded")?;
    let tabs = ACTIVE.with(|a| a.borrow().as_ref().map(|r| r.tabs.clone()).unwrap_or_default());
    for tab_id in tabs {
        let _ = JsFuture::from(chrome::debugger_detach(&to_js(&json!({"tabId": tab_id})))).await;
    }
    send(ClientBody::DiscardTask { task_id });
    finish().await;
    Ok(())
}

/// The recording is over once the host has everything: keep the outbox until its last acknowledgement.
async fn finish() {
    set_badge("").await;
    FINISHING.with(|f| *f.borrow_mut() = ACTIVE.with(|a| a.borrow_mut().take()));
}

thread_local! {
    /// A stopped recording whose last messages await acknowledgement.
    static FINISHING: RefCell<Option<Recording>> = const { RefCell::new(None) };
}

/// A DevTools event of an attached tab (`chrome.debugger.onEvent`).
pub fn on_debugger_event(tab_id: i64, method: &str, params: Value) {
    if !ACTIVE.with(|a| a.borrow().as_ref().is_some_and(|r| r.tabs.contains(&tab_id))) {
        return;
    }
    match method {
        m if m.starts_with("Network.") => {
            let events = ACTIVE.with(|a| {
                let mut active = a.borrow_mut();
                let recording = active.as_mut().expect("checked above");
                let translator = recording.translators.entry(tab_id).or_default();
                translator.handle(method, &params, Some(tab_id))
            });
            let request_id = params["requestId"].as_str().unwrap_or_default().to_owned();
            // A finished exchange's events are queued before the end of its body, so the body follows them.
            send_events(events);
            match method {
                "Network.responseReceived" => {
                    let key = (tab_id, request_id.clone());
                    let is_large = ACTIVE.with(|a| a.borrow().as_ref().is_some_and(|r| r.large.contains(&key)));
                    if is_large {
                        wasm_bindgen_futures::spawn_local(start_body_stream(tab_id, request_id));
                    }
                }
                "Network.dataReceived" => {
                    if let Some(data) = params["data"].as_str() {
                        stream_data(tab_id, &request_id, data.to_owned());
                    }
                }
                "Network.loadingFinished" => {
                    let key = (tab_id, request_id.clone());
                    let captured = ACTIVE.with(|a| {
                        let mut active = a.borrow_mut();
                        let recording = active.as_mut()?;
                        recording.large.remove(&key);
                        recording.captured.remove(&key)
                    });
                    match captured {
                        Some(bytes) => send_whole_body(tab_id, &request_id, &bytes),
                        None if finish_body_stream(tab_id, &request_id) => {}
                        None => wasm_bindgen_futures::spawn_local(send_body(tab_id, request_id)),
                    }
                }
                "Network.loadingFailed" => {
                    let key = (tab_id, request_id);
                    ACTIVE.with(|a| {
                        if let Some(recording) = a.borrow_mut().as_mut() {
                            recording.streams.remove(&key);
                            recording.captured.remove(&key);
                            recording.large.remove(&key);
                        }
                    });
                }
                _ => {}
            }
        }
        "Page.frameNavigated" => {
            let frame = &params["frame"];
            if frame.get("parentId").is_none() {
                let frame_id = frame["id"].as_str().unwrap_or_default().to_owned();
                ACTIVE.with(|a| {
                    if let Some(recording) = a.borrow_mut().as_mut() {
                        recording.translators.entry(tab_id).or_default().set_main_frame(&frame_id);
                        recording.progress.steps += 1;
                    }
                });
                let url = frame["url"].as_str().unwrap_or_default().to_owned();
                send_events(vec![event(
                    tab_id,
                    EventKind::Navigation(Navigation { url, cause: NavigationCause::Other, main_frame: true }),
                )]);
            }
        }
        "Page.loadEventFired" => wasm_bindgen_futures::spawn_local(page_loaded(tab_id)),
        "Fetch.requestPaused" => wasm_bindgen_futures::spawn_local(take_paused_body(tab_id, params)),
        "Runtime.consoleAPICalled" => {
            let text = params["args"]
                .as_array()
                .into_iter()
                .flatten()
                .map(|arg| match &arg["value"] {
                    Value::String(text) => text.clone(),
                    Value::Null => arg["description"].as_str().unwrap_or_default().to_owned(),
                    other => other.to_string(),
                })
                .collect::<Vec<_>>()
                .join(" ");
            let level = params["type"].as_str().unwrap_or("log").to_owned();
            let url = params["stackTrace"]["callFrames"][0]["url"].as_str().map(str::to_owned);
            send_events(vec![event(tab_id, EventKind::Console(ConsoleMessage { level, text, url }))]);
        }
        _ => {}
    }
}

/// A tab was created; if a recorded tab opened it, it is recorded too.
pub fn on_tab_created(tab: JsValue) {
    let (Some(tab_id), Some(opener)) = (number(&tab, "id"), number(&tab, "openerTabId")) else { return };
    let (tab_id, opener) = (tab_id as i64, opener as i64);
    if !ACTIVE.with(|a| a.borrow().as_ref().is_some_and(|r| r.tabs.contains(&opener))) {
        return;
    }
    let url = js_sys::Reflect::get(&tab, &"pendingUrl".into()).ok().and_then(|u| u.as_string());
    send_events(vec![event(tab_id, EventKind::Tab(TabEvent { op: TabOp::Created, opener_tab_id: Some(opener), url }))]);
    wasm_bindgen_futures::spawn_local(async move {
        // The new tab's first request left before the debugger could attach (the browser starts it as it
        // creates the tab), so load it once more under the recorder.
        let attached = attach(tab_id).await;
        let reloaded = match attached {
            Ok(()) => command(tab_id, "Page.reload", json!({})).await.map(|_| ()),
            Err(error) => Err(error),
        };
        if let Err(error) = reloaded {
            crate::log(&format!("cannot record tab {tab_id}: {error}"));
        }
    });
}

/// A reply of the host that concerns a task: acknowledgements release what the outbox kept, and after a
/// reconnect, everything the host did not commit is sent again.
pub fn on_host_reply(reply: HostMessage) {
    match reply {
        HostMessage::Ack { task_id, seq } => {
            with_outbox_of(&task_id, |outbox| outbox.ack(seq));
            FINISHING.with(|f| {
                let done = f
                    .borrow()
                    .as_ref()
                    .is_some_and(|r| r.outbox.task_id() == &task_id && r.outbox.pending_messages() == 0);
                if done {
                    *f.borrow_mut() = None;
                }
            });
        }
        HostMessage::Hello { task: Some(progress), .. } => {
            let frames: Vec<String> = ACTIVE.with(|a| {
                a.borrow_mut()
                    .as_mut()
                    .filter(|r| r.outbox.task_id() == &progress.task_id)
                    .map(|r| r.outbox.resend_after(progress.acked_seq).into_iter().map(str::to_owned).collect())
                    .unwrap_or_default()
            });
            for frame in frames {
                host_link::send_json(&frame);
            }
        }
        HostMessage::Error { task_id: Some(task_id), code, message, .. } => {
            crate::log(&format!("trace-host refused a message of task {task_id}: {code:?}: {message}"));
        }
        _ => {}
    }
}

fn with_outbox_of(task_id: &TaskId, update: impl Fn(&mut Outbox)) {
    for slot in [&ACTIVE, &FINISHING] {
        slot.with(|s| {
            if let Some(recording) = s.borrow_mut().as_mut().filter(|r| r.outbox.task_id() == task_id) {
                update(&mut recording.outbox);
            }
        });
    }
}

async fn attach(tab_id: i64) -> Result<(), String> {
    let target = to_js(&json!({"tabId": tab_id}));
    JsFuture::from(chrome::debugger_attach(&target, "1.3")).await.map_err(describe)?;
    ACTIVE.with(|a| {
        if let Some(recording) = a.borrow_mut().as_mut() {
            recording.tabs.insert(tab_id);
        }
    });
    // Every resource must really be fetched to be captured: no cache while recording. Responses pause at
    // their headers so that their body is taken before anything (a navigation) can evict it.
    for (method, params) in [
        ("Network.enable", json!({"maxPostDataSize": 1 << 20})),
        ("Network.setCacheDisabled", json!({"cacheDisabled": true})),
        ("Page.enable", json!({})),
        ("Runtime.enable", json!({})),
        ("Fetch.enable", json!({"patterns": [{"urlPattern": "*", "requestStage": "Response"}]})),
    ] {
        command(tab_id, method, params).await?;
    }
    Ok(())
}

async fn command(tab_id: i64, method: &str, params: Value) -> Result<Value, String> {
    let target = to_js(&json!({"tabId": tab_id}));
    let result =
        JsFuture::from(chrome::debugger_send_command(&target, method, &to_js(&params))).await.map_err(describe)?;
    Ok(from_js(&result))
}

/// Switches on streaming of a response's body. Where Chrome refuses (some resource types, or the body
/// is already complete), the body is fetched whole when loading finishes.
async fn start_body_stream(tab_id: i64, request_id: String) {
    let key = (tab_id, request_id.clone());
    let registered = ACTIVE.with(|a| {
        let mut active = a.borrow_mut();
        let recording = active.as_mut()?;
        let body_id = recording.new_body_id(tab_id);
        let stream = BodyStream { body_id, next_index: 0, started: false, early: Vec::new(), finished: false };
        recording.streams.insert(key.clone(), stream);
        Some(())
    });
    if registered.is_none() {
        return;
    }
    match command(tab_id, "Network.streamResourceContent", json!({"requestId": request_id})).await {
        Ok(result) => {
            let buffered = result["bufferedData"].as_str().unwrap_or_default().to_owned();
            let (early, finished) = ACTIVE.with(|a| {
                let mut active = a.borrow_mut();
                let stream = active.as_mut().and_then(|r| r.streams.get_mut(&key));
                stream.map_or((Vec::new(), false), |s| {
                    s.started = true;
                    (std::mem::take(&mut s.early), s.finished)
                })
            });
            for data in std::iter::once(buffered).chain(early) {
                send_chunk(&key, data, false);
            }
            if finished {
                send_chunk(&key, String::new(), true);
            }
        }
        Err(_) => {
            let finished = ACTIVE
                .with(|a| a.borrow_mut().as_mut().and_then(|r| r.streams.remove(&key)).is_some_and(|s| s.finished));
            if finished {
                send_body(tab_id, request_id).await;
            }
        }
    }
}

/// Data of a streamed body (`Network.dataReceived` carries it once streaming is on), base64 as Chrome
/// sends it: forwarded as it is, never decoded or held whole.
fn stream_data(tab_id: i64, request_id: &str, data: String) {
    let key = (tab_id, request_id.to_owned());
    let started = ACTIVE.with(|a| {
        let mut active = a.borrow_mut();
        let stream = active.as_mut().and_then(|r| r.streams.get_mut(&key))?;
        if !stream.started {
            stream.early.push(data.clone());
        }
        Some(stream.started)
    });
    if started == Some(true) {
        send_chunk(&key, data, false);
    }
}

/// Ends a streamed body; false if the body was not being streamed (it is then fetched whole).
fn finish_body_stream(tab_id: i64, request_id: &str) -> bool {
    let key = (tab_id, request_id.to_owned());
    let started = ACTIVE.with(|a| {
        let mut active = a.borrow_mut();
        let stream = active.as_mut().and_then(|r| r.streams.get_mut(&key))?;
        stream.finished = true;
        Some(stream.started)
    });
    match started {
        Some(true) => {
            send_chunk(&key, String::new(), true);
            true
        }
        Some(false) => true, // the stream's start sends the end, or fetches the body whole
        None => false,
    }
}

fn send_chunk(key: &(i64, String), data: String, last: bool) {
    let chunk = ACTIVE.with(|a| {
        let mut active = a.borrow_mut();
        let recording = active.as_mut()?;
        let stream = recording.streams.get_mut(key)?;
        let index = stream.next_index;
        stream.next_index += 1;
        recording.progress.bytes += (data.len() as u64) * 3 / 4;
        let body_id = stream.body_id.clone();
        if last {
            recording.streams.remove(key);
        }
        Some((body_id, index))
    });
    let (Some((body_id, index)), Some(task_id)) = (chunk, active_task_id()) else { return };
    send(ClientBody::BodyChunk {
        task_id,
        body_id,
        request_id: key.1.clone(),
        part: BodyPart::Response,
        index,
        data,
        last,
    });
}

/// Bodies up to this size are taken whole while their response is paused; larger ones are streamed.
const TAKE_WHOLE_LIMIT: u64 = 16 << 20;

/// A response paused at its headers (`Fetch.requestPaused`): takes its body unless it is a redirect, has
/// none, or is too large (then it is streamed), and lets it go on. Always lets it go on.
async fn take_paused_body(tab_id: i64, params: Value) {
    let fetch_id = params["requestId"].as_str().unwrap_or_default().to_owned();
    let network_id = params["networkId"].as_str().map(str::to_owned);
    let status = params["responseStatusCode"].as_u64().unwrap_or(0);
    let length = params["responseHeaders"].as_array().into_iter().flatten().find_map(|h| {
        h["name"].as_str().filter(|n| n.eq_ignore_ascii_case("content-length"))?;
        h["value"].as_str()?.trim().parse::<u64>().ok()
    });
    if let Some(network_id) = network_id
        && !(300..400).contains(&status)
        && !matches!(status, 0 | 204 | 304)
    {
        let key = (tab_id, network_id);
        if length.is_some_and(|n| n > TAKE_WHOLE_LIMIT) {
            ACTIVE.with(|a| a.borrow_mut().as_mut().map(|r| r.large.insert(key)));
        } else if let Ok(body) = command(tab_id, "Fetch.getResponseBody", json!({"requestId": fetch_id})).await {
            let bytes = body_bytes(&body);
            ACTIVE.with(|a| a.borrow_mut().as_mut().map(|r| r.captured.insert(key, bytes)));
        }
    }
    if command(tab_id, "Fetch.continueResponse", json!({"requestId": fetch_id})).await.is_err() {
        let _ = command(tab_id, "Fetch.continueRequest", json!({"requestId": fetch_id})).await;
    }
}

fn body_bytes(body: &Value) -> Vec<u8> {
    let text = body["body"].as_str().unwrap_or_default();
    if body["base64Encoded"].as_bool() == Some(true) {
        base64::engine::general_purpose::STANDARD.decode(text).unwrap_or_default()
    } else {
        text.as_bytes().to_vec()
    }
}

/// Fetches a finished response's body whole and sends it in chunks (when it could not be streamed).
async fn send_body(tab_id: i64, request_id: String) {
    // Fails for responses without a body (a redirect, a 204) and for resources Chrome already evicted.
    if let Ok(body) = command(tab_id, "Network.getResponseBody", json!({"requestId": request_id})).await {
        send_whole_body(tab_id, &request_id, &body_bytes(&body));
    }
}

/// Sends a body held whole, in chunks of the suggested size.
fn send_whole_body(tab_id: i64, request_id: &str, bytes: &[u8]) {
    let Some(task_id) = active_task_id() else { return };
    let body_id = ACTIVE.with(|a| {
        let mut active = a.borrow_mut();
        let recording = active.as_mut()?;
        recording.progress.bytes += bytes.len() as u64;
        Some(recording.new_body_id(tab_id))
    });
    let Some(body_id) = body_id else { return };
    let chunks: Vec<&[u8]> = if bytes.is_empty() { vec![&[]] } else { bytes.chunks(SUGGESTED_CHUNK_BYTES).collect() };
    let count = chunks.len();
    for (index, chunk) in chunks.into_iter().enumerate() {
        send(ClientBody::BodyChunk {
            task_id: task_id.clone(),
            body_id: body_id.clone(),
            request_id: request_id.to_owned(),
            part: BodyPart::Response,
            index: index as u64,
            data: base64::engine::general_purpose::STANDARD.encode(chunk),
            last: index + 1 == count,
        });
    }
}

async fn page_loaded(tab_id: i64) {
    let page = command(
        tab_id,
        "Runtime.evaluate",
        json!({"expression": "({url: location.href, title: document.title})", "returnByValue": true}),
    )
    .await
    .map(|result| result["result"]["value"].clone())
    .unwrap_or_default();
    let url = page["url"].as_str().unwrap_or_default().to_owned();
    let title = page["title"].as_str().unwrap_or_default().to_owned();
    send_events(vec![event(
        tab_id,
        EventKind::PageLoad(PageLoad { url: url.clone(), title, dom_content_loaded_ms: None, load_ms: None }),
    )]);
    if let Ok(shot) = command(tab_id, "Page.captureScreenshot", json!({"format": "png"})).await
        && let Some(task_id) = active_task_id()
    {
        send(ClientBody::Screenshot {
            task_id,
            ts: js_sys::Date::now(),
            tab_id: Some(tab_id),
            format: ImageFormat::Png,
            reason: "load".to_owned(),
            data: shot["data"].as_str().unwrap_or_default().to_owned(),
        });
    }
    dom_snapshot(tab_id, &url, "load").await;
}

/// The document as HTML, shadow roots included, with the accessibility tree.
async fn dom_snapshot(tab_id: i64, url: &str, reason: &str) {
    let Ok(document) = command(tab_id, "DOM.getDocument", json!({"depth": 0})).await else { return };
    let root = document["root"]["nodeId"].clone();
    let Ok(html) = command(tab_id, "DOM.getOuterHTML", json!({"nodeId": root, "includeShadowDOM": true})).await else {
        return;
    };
    let accessibility =
        command(tab_id, "Accessibility.getFullAXTree", json!({})).await.ok().map(|tree| tree["nodes"].clone());
    let Some(task_id) = active_task_id() else { return };
    send(ClientBody::DomSnapshot {
        task_id,
        ts: js_sys::Date::now(),
        tab_id: Some(tab_id),
        frame_id: None,
        url: url.to_owned(),
        reason: reason.to_owned(),
        html: html["outerHTML"].as_str().unwrap_or_default().to_owned(),
        accessibility,
    });
}

/// Cookies of every site the tab can see, and its origin's web storage.
async fn storage_snapshot(tab_id: i64, phase: StoragePhase) {
    let cookies = command(tab_id, "Network.getAllCookies", json!({})).await.unwrap_or_default();
    let cookies = cookies["cookies"]
        .as_array()
        .into_iter()
        .flatten()
        .filter_map(|c| {
            Some(trace_manifest::event::Cookie {
                name: c["name"].as_str()?.to_owned(),
                value: c["value"].as_str()?.to_owned(),
                domain: c["domain"].as_str()?.to_owned(),
                path: c["path"].as_str().unwrap_or("/").to_owned(),
                expires: c["expires"].as_f64().filter(|e| *e > 0.0),
                http_only: c["httpOnly"].as_bool().unwrap_or(false),
                secure: c["secure"].as_bool().unwrap_or(false),
                same_site: c["sameSite"].as_str().map(str::to_owned),
            })
        })
        .collect();
    let expression = "(() => { try { const dump = (s) => Object.fromEntries(Object.keys(s).map((k) => [k, s.getItem(k)])); \
        return {origin: location.origin, local: dump(localStorage), session: dump(sessionStorage)}; } catch (e) { return null; } })()";
    let web = command(tab_id, "Runtime.evaluate", json!({"expression": expression, "returnByValue": true}))
        .await
        .map(|r| r["result"]["value"].clone())
        .unwrap_or_default();
    let mut snapshot =
        StorageSnapshot { phase, cookies, local_storage: Default::default(), session_storage: Default::default() };
    if let Some(origin) = web["origin"].as_str().filter(|o| o.starts_with("http")) {
        let entries = |value: &Value| {
            value
                .as_object()
                .map(|map| map.iter().map(|(k, v)| (k.clone(), v.as_str().unwrap_or_default().to_owned())).collect())
        };
        if let Some(local) = entries(&web["local"]) {
            snapshot.local_storage.insert(origin.to_owned(), local);
        }
        if let Some(session) = entries(&web["session"]) {
            snapshot.session_storage.insert(origin.to_owned(), session);
        }
    }
    send_events(vec![event(tab_id, EventKind::Storage(snapshot))]);
}

fn event(tab_id: i64, kind: EventKind) -> Event {
    Event { ts: js_sys::Date::now(), tab_id: Some(tab_id), frame_id: None, kind }
}

fn send_events(events: Vec<Event>) {
    if events.is_empty() {
        return;
    }
    let requests = events.iter().filter(|e| matches!(e.kind, EventKind::Request(_))).count() as u64;
    ACTIVE.with(|a| {
        if let Some(recording) = a.borrow_mut().as_mut() {
            recording.progress.requests += requests;
        }
    });
    if let Some(task_id) = active_task_id() {
        send(ClientBody::Events { task_id, events });
    }
}

/// Queues a message in the active task's outbox and sends it if the host is there.
fn send(body: ClientBody) {
    let frame = ACTIVE.with(|a| {
        let mut active = a.borrow_mut();
        let recording = active.as_mut()?;
        match recording.outbox.push(body) {
            Ok(frame) => Some(frame.to_owned()),
            Err(full) => {
                recording.progress.refused += 1;
                crate::log(&format!(
                    "the buffer for trace-host is full ({} bytes): a message was refused",
                    full.pending_bytes
                ));
                None
            }
        }
    });
    if let Some(frame) = frame
        && !host_link::send_json(&frame)
    {
        host_link::ensure_connected(); // the hello's answer resends what the host lacks
    }
}

async fn set_badge(text: &str) {
    let _ = JsFuture::from(chrome::set_badge_background_color(&to_js(&json!({"color": "#c62828"})))).await;
    let _ = JsFuture::from(chrome::set_badge_text(&to_js(&json!({"text": text})))).await;
}

/// `20261122-103000-a1b2`: sortable, readable, and unique enough for one person's recordings.
fn new_task_id(now_ms: f64) -> TaskId {
    let date = js_sys::Date::new(&JsValue::from_f64(now_ms));
    let suffix = (js_sys::Math::random() * 65536.0) as u32;
    let id = format!(
        "{:04}{:02}{:02}-{:02}{:02}{:02}-{suffix:04x}",
        date.get_utc_full_year(),
        date.get_utc_month() + 1,
        date.get_utc_date(),
        date.get_utc_hours(),
        date.get_utc_minutes(),
        date.get_utc_seconds()
    );
    id.parse().expect("the id uses only digits, letters and dashes")
}

fn user_agent() -> Option<String> {
    let navigator = js_sys::Reflect::get(&js_sys::global(), &"navigator".into()).ok()?;
    js_sys::Reflect::get(&navigator, &"userAgent".into()).ok()?.as_string()
}

fn number(value: &JsValue, key: &str) -> Option<f64> {
    js_sys::Reflect::get(value, &key.into()).ok()?.as_f64()
}

fn describe(error: JsValue) -> String {
    js_sys::Reflect::get(&error, &"message".into())
        .ok()
        .and_then(|m| m.as_string())
        .unwrap_or_else(|| format!("{error:?}"))
}
