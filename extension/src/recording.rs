//! The recording in progress, as the service worker holds it.
//!
//! Starting a task opens (or takes) a tab and attaches `chrome.debugger` to it with the cache disabled and
//! auto-attach on, so that its cross-process iframes and workers are recorded as child targets. From then
//! on every DevTools event of a recorded target goes through a [`NetworkTranslator`] per target; completed
//! exchanges become `events` messages, and each finished response's body is read, once its page has loaded
//! ([`LoadGate`]), and sent in chunks ([`body_reading`]). The in-page script ([`actions`]) reports the
//! person's actions through a binding; they are coalesced and recorded, and each triggers a throttled
//! capture ([`snapshots`]). Tabs opened by a recorded tab are recorded too. Every message goes through the
//! task's [`Outbox`], so that what the host has not acknowledged is sent again after a reconnect.

use std::cell::RefCell;
use std::collections::{BTreeMap, BTreeSet, HashMap};

use serde::Serialize;
use serde_json::{Value, json};
use trace_manifest::event::{ConsoleMessage, Event, EventKind, Navigation, NavigationCause, TabEvent, TabOp};
use trace_manifest::task::{RecorderInfo, TaskId, TaskStart, TaskType};
use trace_manifest::wire::{ClientBody, HostMessage};
use wasm_bindgen::prelude::*;
use wasm_bindgen_futures::JsFuture;

use crate::bodies::{Bodies, ExchangeKey, Finished};
use crate::chrome::{self, to_js};
use crate::debugger::{self, Target, command, describe};
use crate::host_link;
use crate::load_gate::{self, LoadGate};
use crate::network::NetworkTranslator;
use crate::outbox::{DEFAULT_LIMIT_BYTES, Outbox};
use trace_capture::actions::{self, PageReport, TypingCoalescer};
use trace_capture::storage as site_storage;

mod body_reading;
mod snapshots;

use body_reading::{
    BODY_BUFFER_BYTES, TAKE_WHOLE_LIMIT, on_request_paused, read_bodies, send_body, send_chunks, send_request_body,
    start_body_stream, unread_bodies_lost, with_bodies, with_gate,
};

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
    /// The task's source: a campaign task's id when the popup started one.
    pub source: String,
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

/// The recording stopped last, as the popup shows it while the host takes the rest of it: what the
/// recorder counted, and how far the host has it. Once the host has finalized its bundle (`bundle`), the
/// popup asks the host itself what it stored.
#[derive(Debug, Clone, Serialize)]
pub struct Stopped {
    pub task_id: String,
    pub started_at: f64,
    pub stopped_at: f64,
    pub steps: u64,
    pub requests: u64,
    pub bytes: u64,
    /// Messages the host has not acknowledged yet.
    pub unacknowledged: usize,
    /// Where the host finalized the bundle: once said, every message is committed and the bundle written.
    pub bundle: Option<String>,
    /// Why the host could not take it, in its words.
    pub error: Option<String>,
}

struct Recording {
    outbox: Outbox,
    task_type: TaskType,
    tabs: BTreeSet<i64>,
    translators: HashMap<i64, NetworkTranslator>,
    /// Response bodies on their way to the host.
    bodies: Bodies,
    /// The frame of each execution context of the in-page script's world.
    script_contexts: HashMap<(Target, i64), String>,
    /// The origins whose storage the recording has read, or is reading (see [`snapshots::origin_reached`]).
    storage_origins: BTreeSet<String>,
    /// The web origin of each tab's page, by its context of the in-page script's world. Only pages: an
    /// iframe of another site sees storage partitioned by the page's site, not its origin's own.
    page_origins: HashMap<(Target, i64), String>,
    /// Tabs the recorder is reloading itself (see [`on_tab_created`]): their reload is not the person's.
    reloading: BTreeSet<i64>,
    /// The bodies loading pages hold back, to read once they have loaded.
    gate: LoadGate<(Target, ExchangeKey)>,
    /// Targets where Chrome refused durable messages: every response is paused, and its body taken there.
    pause_takes_bodies: BTreeSet<Target>,
    typing: TypingCoalescer,
    /// Events not yet in the outbox: gathered for [`EVENT_BATCH_MS`] into one message (see [`send_events`]).
    unsent_events: Vec<Event>,
    progress: Progress,
}

thread_local! {
    static ACTIVE: RefCell<Option<Recording>> = const { RefCell::new(None) };
    static LAST_STOPPED: RefCell<Option<Stopped>> = const { RefCell::new(None) };
}

/// The recording stopped last, if the service worker has seen one stop since it started.
pub fn last_stopped() -> Option<Stopped> {
    let mut stopped = LAST_STOPPED.with(|last| last.borrow().clone())?;
    stopped.unacknowledged = FINISHING.with(|f| {
        f.borrow()
            .as_ref()
            .filter(|r| r.outbox.task_id().as_str() == stopped.task_id)
            .map_or(0, |r| r.outbox.pending_messages())
    });
    Some(stopped)
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
            bodies: Bodies::default(),
            script_contexts: HashMap::new(),
            storage_origins: BTreeSet::new(),
            page_origins: HashMap::new(),
            reloading: BTreeSet::new(),
            gate: LoadGate::default(),
            pause_takes_bodies: BTreeSet::new(),
            typing: TypingCoalescer::default(),
            unsent_events: Vec::new(),
            progress: Progress {
                task_id: task_id.to_string(),
                source: request.source.clone(),
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
    snapshots::cookies_at_start(tab_id).await;
    if !request.current_tab {
        command(&Target::tab(tab_id), "Page.navigate", json!({"url": request.website})).await?;
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
    // One page of each origin the tabs show: its storage is the origin's.
    let pages: BTreeMap<String, (Target, i64)> = ACTIVE.with(|a| {
        let active = a.borrow();
        let pages = active.as_ref().map(|r| &r.page_origins).into_iter().flatten();
        pages.map(|(context, origin)| (origin.clone(), context.clone())).collect()
    });
    for &tab_id in &tabs {
        snapshots::at_stop(tab_id).await;
    }
    let tab_ids: Vec<i64> = tabs.iter().copied().collect();
    snapshots::storage_at_stop(&tab_ids, pages.into_values().collect()).await;
    // The bodies loading pages held back are read while the tabs are still attached.
    for (target, key) in with_gate(LoadGate::release_all).unwrap_or_default() {
        send_body(target, key).await;
    }
    let leftovers = ACTIVE.with(|a| {
        let mut active = a.borrow_mut();
        let recording = active.as_mut().expect("checked above");
        let mut events: Vec<Event> = recording.typing.flush().into_iter().collect();
        for (&tab_id, translator) in &mut recording.translators {
            events.extend(translator.flush(Some(tab_id)));
        }
        events
    });
    send_events(leftovers);
    // Bodies still streaming (a live feed) end with what arrived, after their exchanges' events.
    send_chunks(with_bodies(|bodies| bodies.end_streams(None)).unwrap_or_default());
    for &tab_id in &tabs {
        debugger::detach(tab_id).await;
    }
    let task_id = active_task_id().expect("checked above");
    let stopped_at = js_sys::Date::now();
    send(ClientBody::StopTask { task_id, answer, ts: stopped_at });
    let stopped = progress().map(|progress| Stopped {
        task_id: progress.task_id,
        started_at: progress.started_at,
        stopped_at,
        steps: progress.steps,
        requests: progress.requests,
        bytes: progress.bytes,
        unacknowledged: progress.unacknowledged,
        bundle: None,
        error: None,
    });
    LAST_STOPPED.with(|last| *last.borrow_mut() = stopped);
    finish().await;
    Ok(())
}

/// Abandons the recording; the host deletes what it stored.
pub async fn discard() -> Result<(), String> {
    let task_id = active_task_id().ok_or("nothing is being recorded")?;
    let tabs = ACTIVE.with(|a| a.borrow().as_ref().map(|r| r.tabs.clone()).unwrap_or_default());
    for tab_id in tabs {
        debugger::detach(tab_id).await;
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

/// A DevTools event of a recorded target (`chrome.debugger.onEvent`).
pub fn on_debugger_event(target: Target, method: &str, params: Value) {
    if !ACTIVE.with(|a| a.borrow().as_ref().is_some_and(|r| r.tabs.contains(&target.tab_id))) {
        return;
    }
    let tab_id = target.tab_id;
    match method {
        m if m.starts_with("Network.") => on_network_event(target, method, &params),
        "Fetch.requestPaused" => wasm_bindgen_futures::spawn_local(on_request_paused(target, params)),
        "Page.frameNavigated" if params["frame"].get("parentId").is_none() && target.is_tab() => {
            let frame_id = params["frame"]["id"].as_str().unwrap_or_default().to_owned();
            let held_typing = ACTIVE.with(|a| {
                let mut active = a.borrow_mut();
                let recording = active.as_mut()?;
                recording.translators.entry(tab_id).or_default().set_main_frame(&frame_id);
                recording.typing.flush()
            });
            send_events(held_typing.into_iter().collect());
        }
        "Page.frameStartedLoading" if target.is_tab() => {
            let frame_id = params["frameId"].as_str().unwrap_or_default();
            // The main frame's load only: an iframe's start is part of the page's load, not a new one.
            let previous = ACTIVE.with(|a| {
                let mut active = a.borrow_mut();
                let recording = active.as_mut()?;
                let is_main = recording.translators.get(&tab_id).is_some_and(|t| t.is_main_frame(frame_id));
                is_main.then(|| recording.gate.load_started(tab_id, js_sys::Date::now()))
            });
            let Some(previous) = previous else { return };
            read_bodies(previous);
            wasm_bindgen_futures::spawn_local(async move {
                chrome::sleep(load_gate::LONGEST_HOLD_MS).await;
                read_bodies(with_gate(|gate| gate.release_overdue(tab_id, js_sys::Date::now())).unwrap_or_default());
            });
        }
        "Page.loadEventFired" => {
            if target.is_tab() {
                read_bodies(with_gate(|gate| gate.load_ended(tab_id)).unwrap_or_default());
            }
            wasm_bindgen_futures::spawn_local(snapshots::page_loaded(target))
        }
        "Runtime.executionContextCreated" => {
            let context = &params["context"];
            if context["name"].as_str() == Some(actions::WORLD)
                && let (Some(id), Some(frame_id)) = (context["id"].as_i64(), context["auxData"]["frameId"].as_str())
            {
                let origin = context["origin"].as_str().filter(|o| o.starts_with("http")).map(str::to_owned);
                let first_reached = ACTIVE.with(|a| {
                    let mut active = a.borrow_mut();
                    let recording = active.as_mut()?;
                    recording.script_contexts.insert((target.clone(), id), frame_id.to_owned());
                    let is_page = target.is_tab()
                        && recording.translators.get(&target.tab_id).is_some_and(|t| t.is_main_frame(frame_id));
                    let origin = origin.filter(|_| is_page)?;
                    recording.page_origins.insert((target.clone(), id), origin.clone());
                    recording.storage_origins.insert(origin.clone()).then_some(origin)
                });
                if let Some(origin) = first_reached {
                    wasm_bindgen_futures::spawn_local(snapshots::origin_reached(target, id, origin));
                }
            }
        }
        "Runtime.executionContextDestroyed" => {
            let id = params["executionContextId"].as_i64().unwrap_or_default();
            ACTIVE.with(|a| {
                if let Some(recording) = a.borrow_mut().as_mut() {
                    recording.script_contexts.remove(&(target.clone(), id));
                    recording.page_origins.remove(&(target, id));
                }
            });
        }
        "Runtime.bindingCalled" if params["name"].as_str() == Some(actions::BINDING) => {
            on_page_report(target, &params);
        }
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
        "Target.attachedToTarget" => {
            let Some(session_id) = params["sessionId"].as_str() else { return };
            let child = Target::child(tab_id, session_id.to_owned());
            let kind = params["targetInfo"]["type"].as_str().unwrap_or_default().to_owned();
            wasm_bindgen_futures::spawn_local(async move {
                if let Err(error) = set_up_target(&child, &kind).await {
                    crate::log(&format!("cannot record a {kind} of tab {tab_id}: {error}"));
                }
            });
        }
        "Target.detachedFromTarget" => {
            let Some(session_id) = params["sessionId"].as_str() else { return };
            let child = Target::child(tab_id, session_id.to_owned());
            ACTIVE.with(|a| {
                if let Some(recording) = a.borrow_mut().as_mut() {
                    recording.script_contexts.retain(|(target, _), _| *target != child);
                }
            });
        }
        _ => {}
    }
}

fn on_network_event(target: Target, method: &str, params: &Value) {
    let events = ACTIVE.with(|a| {
        let mut active = a.borrow_mut();
        let recording = active.as_mut().expect("the caller checked");
        let translator = recording.translators.entry(target.tab_id).or_default();
        translator.handle(method, params, Some(target.tab_id))
    });
    // A finished exchange's events are queued before the end of its body, so the body follows them.
    send_events(events);
    let key = (target.tab_id, params["requestId"].as_str().unwrap_or_default().to_owned());
    match method {
        "Network.requestWillBeSent" if crate::network::body_left_out(params) => {
            wasm_bindgen_futures::spawn_local(send_request_body(target, key));
        }
        "Network.responseReceived" => {
            let announced_large =
                params["response"]["headers"].as_object().into_iter().flatten().any(|(name, value)| {
                    name.eq_ignore_ascii_case("content-length")
                        && value
                            .as_str()
                            .and_then(|v| v.trim().parse::<u64>().ok())
                            .is_some_and(|n| n > TAKE_WHOLE_LIMIT)
                });
            // An event stream may never end: it is streamed from its start, whatever its size.
            let endless = params["response"]["mimeType"].as_str() == Some("text/event-stream");
            let is_large =
                with_bodies(|bodies| bodies.response_received(&key, announced_large || endless)).unwrap_or(false);
            if is_large {
                wasm_bindgen_futures::spawn_local(start_body_stream(target, key));
            }
        }
        "Network.dataReceived" => {
            if let Some(data) = params["data"].as_str() {
                send_chunks(with_bodies(|bodies| bodies.data_received(&key, data.to_owned())).flatten());
            }
        }
        "Network.loadingFinished" => match with_bodies(|bodies| bodies.loading_finished(&key)) {
            Some(Finished::Send(chunks)) => send_chunks(chunks),
            Some(Finished::Fetch) => {
                let tab_id = key.0;
                read_bodies(
                    with_gate(|gate| gate.hold_body(tab_id, (target, key), js_sys::Date::now())).unwrap_or_default(),
                );
            }
            None => {}
        },
        "Network.loadingFailed" => {
            send_chunks(with_bodies(|bodies| bodies.loading_failed(&key)).unwrap_or_default());
        }
        _ => {}
    }
}

/// A report of the in-page script: an action (coalesced, then recorded and captured after) or a count of
/// mutations.
fn on_page_report(target: Target, params: &Value) {
    let tab_id = target.tab_id;
    let report = match actions::parse_report(params["payload"].as_str().unwrap_or_default()) {
        Ok(report) => report,
        Err(reason) => return crate::log(&format!("tab {tab_id}: {reason}")),
    };
    let context = params["executionContextId"].as_i64().unwrap_or_default();
    // Events of the main frame carry no frame id (see `Event::frame_id`).
    let frame_id = ACTIVE.with(|a| {
        let active = a.borrow();
        let recording = active.as_ref()?;
        let frame_id = recording.script_contexts.get(&(target.clone(), context))?;
        let is_main = recording.translators.get(&target.tab_id).is_some_and(|t| t.is_main_frame(frame_id));
        (!is_main).then(|| frame_id.clone())
    });
    match report {
        PageReport::Action { ts, action } => {
            let action = Event { ts, tab_id: Some(tab_id), frame_id, kind: EventKind::Action(action) };
            let recorded = ACTIVE.with(|a| {
                let mut active = a.borrow_mut();
                let recording = active.as_mut()?;
                let events = recording.typing.push(action);
                // The time the action's event is recorded with: a run of typing keeps its first keystroke's.
                let recorded_ts = recording.typing.held().map_or(ts, |held| held.ts);
                Some((events, recorded_ts))
            });
            let Some((events, recorded_ts)) = recorded else { return };
            send_events(events);
            snapshots::after_action(tab_id, Some(recorded_ts));
        }
        PageReport::Mutations { ts, summary } => {
            send_events(vec![Event { ts, tab_id: Some(tab_id), frame_id, kind: EventKind::DomMutations(summary) }]);
        }
        PageReport::Error { message, .. } => crate::log(&format!("the page script of tab {tab_id} failed: {message}")),
    }
}

/// A tab was created; if a recorded tab opened it, it is recorded too.
pub fn on_tab_created(tab: JsValue) {
    let (Some(tab_id), Some(opener)) = (number(&tab, "id"), number(&tab, "openerTabId")) else { return };
    let (tab_id, opener) = (tab_id as i64, opener as i64);
    if !is_recorded(opener) {
        return;
    }
    // Recorded from now on, so that its activation, which Chrome reports next, is recorded too.
    ACTIVE.with(|a| {
        if let Some(recording) = a.borrow_mut().as_mut() {
            recording.tabs.insert(tab_id);
            recording.reloading.insert(tab_id);
        }
    });
    let url = js_sys::Reflect::get(&tab, &"pendingUrl".into()).ok().and_then(|u| u.as_string());
    send_events(vec![event(tab_id, EventKind::Tab(TabEvent { op: TabOp::Created, opener_tab_id: Some(opener), url }))]);
    wasm_bindgen_futures::spawn_local(async move {
        // The new tab's first request left before the debugger could attach (the browser starts it as it
        // creates the tab), so load it once more under the recorder.
        let attached = attach(tab_id).await;
        let reloaded = match attached {
            Ok(()) => command(&Target::tab(tab_id), "Page.reload", json!({})).await.map(|_| ()),
            Err(error) => Err(error),
        };
        if let Err(error) = reloaded {
            crate::log(&format!("cannot record tab {tab_id}: {error}"));
        }
    });
}

/// The person switched to a tab (`chrome.tabs.onActivated`).
pub fn on_tab_activated(tab_id: i64) {
    if is_recorded(tab_id) {
        let switched = TabEvent { op: TabOp::Activated, opener_tab_id: None, url: None };
        send_events(vec![event(tab_id, EventKind::Tab(switched))]);
    }
}

/// A tab was closed (`chrome.tabs.onRemoved`); its debugger session ended with it.
pub fn on_tab_removed(tab_id: i64) {
    if !is_recorded(tab_id) {
        return;
    }
    let leftovers = ACTIVE.with(|a| {
        let mut active = a.borrow_mut();
        let recording = active.as_mut()?;
        recording.tabs.remove(&tab_id);
        unread_bodies_lost(tab_id, recording.gate.load_ended(tab_id).len());
        recording.translators.remove(&tab_id).map(|mut translator| translator.flush(Some(tab_id)))
    });
    let mut events = leftovers.unwrap_or_default();
    events.push(event(tab_id, EventKind::Tab(TabEvent { op: TabOp::Removed, opener_tab_id: None, url: None })));
    send_events(events);
    send_chunks(with_bodies(|bodies| bodies.end_streams(Some(tab_id))).unwrap_or_default());
}

/// The debugger let go of a tab (`chrome.debugger.onDetach`): the person dismissed Chrome's "is debugging
/// this browser" bar, or the tab crashed. The tab is no longer recorded, and the log says so.
pub fn on_debugger_detached(tab_id: i64, reason: &str) {
    // A closed tab detaches too; `on_tab_removed` records that, whichever of the two Chrome reports first.
    if reason != "target_closed" && is_recorded(tab_id) {
        crate::log(&format!("tab {tab_id} is no longer recorded: the debugger was detached ({reason})"));
        ACTIVE.with(|a| {
            if let Some(recording) = a.borrow_mut().as_mut() {
                recording.tabs.remove(&tab_id);
                unread_bodies_lost(tab_id, recording.gate.load_ended(tab_id).len());
            }
        });
    }
}

/// A navigation committed in a tab (`chrome.webNavigation.onCommitted`), with how it came about.
pub fn on_navigation_committed(details: Value) {
    let Some(tab_id) = details["tabId"].as_i64().filter(|&tab| is_recorded(tab)) else { return };
    let Some(url) = details["url"].as_str() else { return };
    let main_frame = details["frameId"].as_i64() == Some(0);
    let qualifiers: Vec<&str> =
        details["transitionQualifiers"].as_array().into_iter().flatten().filter_map(Value::as_str).collect();
    let transition = details["transitionType"].as_str().unwrap_or_default();
    let mut cause = navigation_cause(transition, &qualifiers);
    if main_frame {
        let reloaded_by_recorder = ACTIVE.with(|a| {
            let mut active = a.borrow_mut();
            let recording = active.as_mut()?;
            recording.progress.steps += 1;
            Some(transition == "reload" && recording.reloading.remove(&tab_id))
        });
        if reloaded_by_recorder == Some(true) {
            cause = NavigationCause::Other;
        }
        snapshots::page_changed(tab_id);
    }
    let mut navigation = event(tab_id, EventKind::Navigation(Navigation { url: url.to_owned(), cause, main_frame }));
    navigation.ts = details["timeStamp"].as_f64().unwrap_or(navigation.ts);
    send_events(vec![navigation]);
}

/// A navigation within the document (`history.pushState` or `replaceState`, a fragment): recorded with cause
/// `script`, so that a single-page app's route and a URL the page rewrote itself (a token removed from it)
/// are where the recording says the person was.
pub fn on_same_document_navigation(details: Value) {
    let Some(tab_id) = details["tabId"].as_i64().filter(|&tab| is_recorded(tab)) else { return };
    let Some(url) = details["url"].as_str() else { return };
    let main_frame = details["frameId"].as_i64() == Some(0);
    if main_frame {
        // The same document shows something else: captured as after an action (no load will come).
        snapshots::after_action(tab_id, None);
    }
    let cause = NavigationCause::Script;
    let mut navigation = event(tab_id, EventKind::Navigation(Navigation { url: url.to_owned(), cause, main_frame }));
    navigation.ts = details["timeStamp"].as_f64().unwrap_or(navigation.ts);
    send_events(vec![navigation]);
}

/// How a navigation came about, from Chrome's transition type and qualifiers. What the person did wins
/// over a server redirect on the way (a form posted, then redirected, is a form submission); a page that
/// sends itself elsewhere (a client redirect) is a redirect.
pub fn navigation_cause(transition_type: &str, qualifiers: &[&str]) -> NavigationCause {
    if qualifiers.contains(&"forward_back") {
        NavigationCause::BackForward
    } else if qualifiers.contains(&"client_redirect") {
        NavigationCause::Redirect
    } else {
        match transition_type {
            "link" => NavigationCause::Link,
            "typed" | "generated" | "keyword" | "keyword_generated" | "auto_bookmark" => NavigationCause::Typed,
            "reload" => NavigationCause::Reload,
            "form_submit" => NavigationCause::FormSubmit,
            _ => NavigationCause::Other,
        }
    }
}

fn is_recorded(tab_id: i64) -> bool {
    ACTIVE.with(|a| a.borrow().as_ref().is_some_and(|r| r.tabs.contains(&tab_id)))
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
        HostMessage::TaskStopped { task_id, bundle } => with_last_stopped(&task_id, |last| last.bundle = Some(bundle)),
        HostMessage::Error { task_id: Some(task_id), code, message, .. } => {
            crate::log(&format!("trace-host refused a message of task {task_id}: {code:?}: {message}"));
            with_last_stopped(&task_id, |last| last.error = Some(message));
        }
        _ => {}
    }
}

fn with_last_stopped(task_id: &TaskId, update: impl FnOnce(&mut Stopped)) {
    LAST_STOPPED.with(|last| {
        if let Some(last) = last.borrow_mut().as_mut().filter(|last| last.task_id == task_id.as_str()) {
            update(last);
        }
    });
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

/// Attaches to a tab and sets it up for recording.
async fn attach(tab_id: i64) -> Result<(), String> {
    debugger::attach(tab_id).await?;
    // The main frame keeps its id across navigations: known now, the requests of the first navigation
    // (a redirect before the first document commits, say) are the main frame's too.
    let tree = command(&Target::tab(tab_id), "Page.getFrameTree", json!({})).await.ok();
    let main_frame = tree.as_ref().and_then(|tree| tree["frameTree"]["frame"]["id"].as_str());
    ACTIVE.with(|a| {
        if let Some(recording) = a.borrow_mut().as_mut() {
            recording.tabs.insert(tab_id);
            if let Some(frame_id) = main_frame {
                recording.translators.entry(tab_id).or_default().set_main_frame(frame_id);
            }
        }
    });
    set_up_target(&Target::tab(tab_id), "page").await
}

/// Turns on what the recorder listens to in a target: a tab (`page`), an iframe in another process
/// (`iframe`), or a worker. Children are attached paused until this is done, so that no request escapes.
async fn set_up_target(target: &Target, kind: &str) -> Result<(), String> {
    let is_document = matches!(kind, "page" | "iframe");
    // Every resource must really be fetched to be captured: no cache while recording.
    let network = [
        (
            "Network.enable",
            json!({"maxPostDataSize": 1 << 20, "maxTotalBufferSize": BODY_BUFFER_BYTES, "maxResourceBufferSize": TAKE_WHOLE_LIMIT}),
        ),
        ("Network.setCacheDisabled", json!({"cacheDisabled": true})),
    ];
    let outcome = run_commands(target, kind, network).await;
    // No response is paused for its body: pausing every response made page loads 1.6–1.8× as long. Bodies
    // are read once their page has loaded ([`LoadGate`]), from the copy the browser keeps for DevTools
    // (durable messages), which outlives the page's own (a stylesheet's font is evicted with its document).
    // `Fetch` stays on for what the Network domain cannot do:
    // - requests a page sends as it unloads (beacons, keep-alive fetches), which it never reports: beacons
    //   and `fetch` requests are paused at their start, and those it has not reported are paused again at
    //   their response and recorded from there (see [`on_request_paused`]);
    // - bodies too large for Chrome to keep (over 16 MiB) and event streams, which must be streamed from
    //   their first byte: responses of the kinds that may carry one (documents, which may be downloads,
    //   `fetch`, XHR, media, event streams, others) are paused at their headers, just long enough to start
    //   the stream of those that do.
    // With `Fetch` on, every request of the page goes through the browser's interception, about ×1.15 on
    // page loads even with patterns that match nothing; without it, a page's last requests and the start of
    // large bodies would be lost. Where durable messages are refused, every response is paused, and its
    // body taken there before anything can evict it.
    let durable = json!({"maxTotalBufferSize": BODY_BUFFER_BYTES, "maxResourceBufferSize": TAKE_WHOLE_LIMIT});
    let patterns = match command(target, "Network.configureDurableMessages", durable).await {
        Ok(_) => {
            let at = |stage: &str, types: &[&str]| -> Vec<Value> {
                types
                    .iter()
                    .map(|kind| json!({"urlPattern": "*", "resourceType": kind, "requestStage": stage}))
                    .collect()
            };
            let mut patterns = at("Request", &["Ping", "Fetch"]);
            patterns.extend(at("Response", &["Document", "Fetch", "XHR", "Media", "EventSource", "Other"]));
            json!(patterns)
        }
        Err(error) => {
            crate::log(&format!("durable messages refused in a {kind} ({error}): every response is paused"));
            ACTIVE.with(|a| a.borrow_mut().as_mut().map(|r| r.pause_takes_bodies.insert(target.clone())));
            json!([{"urlPattern": "*", "requestStage": "Response"}])
        }
    };
    let mut commands = vec![("Fetch.enable", json!({"patterns": patterns}))];
    if is_document {
        commands.extend([
            ("Page.enable", json!({})),
            ("Runtime.addBinding", json!({"name": actions::BINDING, "executionContextName": actions::WORLD})),
            ("Runtime.enable", json!({})),
            (
                "Page.addScriptToEvaluateOnNewDocument",
                json!({"source": actions::capture_script(), "worldName": actions::WORLD, "runImmediately": true}),
            ),
            (
                "Page.addScriptToEvaluateOnNewDocument",
                json!({"source": site_storage::copy_at_document_start(), "worldName": actions::WORLD, "runImmediately": true}),
            ),
            // In the page's own world, before its scripts: what they make the browser do is marked theirs.
            (
                "Page.addScriptToEvaluateOnNewDocument",
                json!({"source": actions::SCRIPTED_SCRIPT, "runImmediately": true}),
            ),
        ]);
    }
    commands
        .push(("Target.setAutoAttach", json!({"autoAttach": true, "waitForDebuggerOnStart": true, "flatten": true})));
    let outcome = match outcome {
        Ok(()) => run_commands(target, kind, commands).await,
        failed => failed,
    };
    if !target.is_tab() {
        let _ = command(target, "Runtime.runIfWaitingForDebugger", json!({})).await;
    }
    outcome
}

/// Sends `commands` to a target in order. A tab must accept each (the first refusal ends it); a worker may
/// lack a domain (Fetch, or auto-attach), and then records what it offers rather than nothing.
async fn run_commands(
    target: &Target,
    kind: &str,
    commands: impl IntoIterator<Item = (&str, Value)>,
) -> Result<(), String> {
    for (method, params) in commands {
        if let Err(error) = command(target, method, params).await {
            if target.is_tab() {
                return Err(format!("{method}: {error}"));
            }
            crate::log(&format!("{method} in a {kind}: {error}"));
        }
    }
    Ok(())
}

/// The storage of `origin` could not be read where the recording first reached it (the document went away
/// at once, a redirect by script): its next page is read instead.
pub fn storage_origin_unread(origin: &str) {
    ACTIVE.with(|a| a.borrow_mut().as_mut().map(|r| r.storage_origins.remove(origin)));
}

/// How many of the tab's exchanges (its frames' and workers' too) are in flight.
pub fn requests_in_flight(tab_id: i64) -> usize {
    ACTIVE.with(|a| {
        a.borrow().as_ref().and_then(|active| active.translators.get(&tab_id)).map_or(0, NetworkTranslator::in_flight)
    })
}

pub(crate) fn event(tab_id: i64, kind: EventKind) -> Event {
    Event { ts: js_sys::Date::now(), tab_id: Some(tab_id), frame_id: None, kind }
}

/// Records `events`, after the run of typing they end, if any ([`TypingCoalescer::end_before`]).
pub(crate) fn send_events(mut events: Vec<Event>) {
    if events.is_empty() {
        return;
    }
    let requests = events.iter().filter(|e| matches!(e.kind, EventKind::Request(_))).count() as u64;
    // Whether these events begin a batch, and whether they fill it.
    let batch = ACTIVE.with(|a| {
        let mut active = a.borrow_mut();
        let recording = active.as_mut()?;
        recording.progress.requests += requests;
        if let Some(typing) = recording.typing.end_before(&events) {
            events.insert(0, typing);
        }
        // Counted as they leave: a run of typing is held until what ends it (the next event, or the stop).
        recording.progress.steps += events.iter().filter(|e| matches!(e.kind, EventKind::Action(_))).count() as u64;
        let first = recording.unsent_events.is_empty();
        recording.unsent_events.append(&mut events);
        Some((first, recording.unsent_events.len() >= EVENT_BATCH_MAX))
    });
    match batch {
        // A full batch leaves at once.
        Some((_, true)) => flush_events(),
        // The first of a batch sets the timer that sends it.
        Some((true, false)) => wasm_bindgen_futures::spawn_local(async {
            chrome::sleep(EVENT_BATCH_MS).await;
            flush_events();
        }),
        // A later event of a batch leaves with it; with no recording, nothing is gathered.
        Some((false, false)) | None => {}
    }
}

/// How long events wait for others before they leave as one message. A page load's exchanges end within
/// a few milliseconds of each other: one message for them all, rather than one each (with its own
/// acknowledgement, and a transaction in the host), keeps the recorder's work off the page's load.
const EVENT_BATCH_MS: f64 = 20.0;
/// Events in one message at most: each may carry a request's body (up to 1 MiB), and a message must stay
/// far below the host's limit.
const EVENT_BATCH_MAX: usize = 16;

/// Puts the gathered events in the outbox as one message.
fn flush_events() {
    let Some(events) = ACTIVE.with(|a| a.borrow_mut().as_mut().map(|r| std::mem::take(&mut r.unsent_events))) else {
        return;
    };
    if let (false, Some(task_id)) = (events.is_empty(), active_task_id()) {
        enqueue(ClientBody::Events { task_id, events });
    }
}

/// Queues a message in the active task's outbox and sends it if the host is there, after the events
/// gathered before it: a body's end follows its exchange's events, and the task's stop every event.
pub(crate) fn send(body: ClientBody) {
    flush_events();
    enqueue(body);
}

fn enqueue(body: ClientBody) {
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

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn navigations_are_told_apart_by_how_chrome_says_they_came_about() {
        let cases = [
            ("typed", &[][..], NavigationCause::Typed),
            ("link", &["forward_back"][..], NavigationCause::BackForward),
            ("link", &["client_redirect"][..], NavigationCause::Redirect),
            ("form_submit", &["server_redirect"][..], NavigationCause::FormSubmit),
            ("link", &[][..], NavigationCause::Link),
            ("form_submit", &[][..], NavigationCause::FormSubmit),
            ("reload", &[][..], NavigationCause::Reload),
            ("auto_subframe", &[][..], NavigationCause::Other),
        ];
        for (transition, qualifiers, cause) in cases {
            assert_eq!(navigation_cause(transition, qualifiers), cause, "{transition} {qualifiers:?}");
        }
    }
}
