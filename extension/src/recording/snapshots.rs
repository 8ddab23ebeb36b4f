//! What the recorder captures of a page's state, as opposed to its traffic: screenshots, DOM snapshots
//! (HTML with shadow roots and same-process iframes, plus the accessibility tree) and storage (cookies,
//! and each origin's local and session storage and IndexedDB, as the recording first reached it and as it
//! ends). Pages are captured when they load and, if they changed, once they have settled ([`page_loaded`]),
//! and after actions; captures after actions are throttled per tab, so that a burst of clicks costs one
//! capture, taken once the page has had a moment to react, has no request in flight and then gone
//! [`QUIET_MS`] without changing its DOM (an answer that streams in is captured once it is all there, a form
//! sent by script once its answer shows), waiting at most [`MAX_QUIET_WAIT_MS`] for a page that never
//! rests. When the recording stops, each tab is captured once more as the person left it ([`at_stop`]): the
//! final state is what an evaluation's checkpoints are chosen from, and a capture still waiting for the page
//! to rest would be lost.
//!
//! Those captures are throttled, so the person may act again before one comes: the page they act on next
//! would then be shown only as it was a second or more earlier (before the two fields they just filled).
//! So besides them, each action is followed by a picture of the page once it is quiet ([`settled_picture`],
//! reason `settled`): a screenshot alone, taken as soon as the DOM has gone [`SETTLED_QUIET_MS`] without a
//! change after the person's latest action, and kept only if no action came while it was taken. It is what
//! the next action was taken on, which the viewer boxes that action's target on. It waits on nothing but
//! the page (not the network, nor the throttle): a person's next action is rarely half a second away.

use std::cell::RefCell;
use std::collections::HashMap;

use serde_json::{Value, json};
use trace_capture::storage::{self as site_storage, OriginStorage};
use trace_manifest::event::{Cookie, EventKind, ImageFormat, PageLoad, StoragePhase, StorageSnapshot, Viewport};
use trace_manifest::wire::ClientBody;

use super::{active_task_id, event, send, send_events};
use crate::chrome;
use crate::debugger::{Target, command, command_within};

/// How long after an action its capture waits, so that the page shows the action's effect.
const SETTLE_MS: f64 = 500.0;
/// At most one capture per tab in this interval, whatever the number of actions.
const MIN_INTERVAL_MS: f64 = 1000.0;
/// How long the DOM must stay unchanged before a capture after an action.
const QUIET_MS: u32 = 300;
/// The longest a capture after an action waits for the DOM to rest (an animation never does), and for the
/// tab's requests to end (a long poll never does).
const MAX_QUIET_WAIT_MS: u32 = 2000;
/// The longest the capture of a tab at stop may take: a page that never answers does not hold the stop.
const STOP_CAPTURE_MS: f64 = 5000.0;
/// How often a capture waiting for the tab's requests looks again.
const NETWORK_POLL_MS: f64 = 50.0;
/// How long the DOM must stay unchanged after an action before its settled picture.
const SETTLED_QUIET_MS: u32 = 100;
/// The longest a settled picture waits for the DOM to rest (an animation never does).
const SETTLED_MAX_WAIT_MS: u32 = 1000;

#[derive(Debug, Default, Clone, Copy)]
struct Schedule {
    last_capture: f64,
    pending: bool,
    /// The `ts` of the latest action of the burst the pending capture will show.
    action_ts: Option<f64>,
    /// Counts the tab's documents: a capture scheduled for one document is dropped once another replaced
    /// it (the new one is captured when it loads).
    document: u64,
    /// Counts the person's actions in the tab, so that a capture can tell whether they acted meanwhile.
    actions: u64,
    /// A settled picture is being waited for or taken ([`settled_picture`]): one at a time per tab.
    settling: bool,
}

thread_local! {
    static SCHEDULES: RefCell<HashMap<i64, Schedule>> = RefCell::new(HashMap::new());
}

/// A tab committed a new document: a capture still waiting for the old one would show the new one instead,
/// so it is dropped.
pub fn page_changed(tab_id: i64) {
    SCHEDULES.with(|s| {
        let mut schedules = s.borrow_mut();
        let schedule = schedules.entry(tab_id).or_default();
        schedule.document += 1;
        schedule.pending = false;
        schedule.action_ts = None;
    });
}

/// A page finished loading: records it and captures it (a screenshot only for whole tabs: a child target is
/// an iframe, whose pixels are the tab's), then once more when it has settled, if it changed meanwhile and
/// the person has not acted since (their action's own capture shows it). Both are needed: a client-side
/// application draws its first screen after the load event, and a page the person reached by a search
/// fills its results by script after it, so the load capture alone shows neither; but a person may act on
/// the page before it rests, and the settled capture alone would then come after their action, leaving
/// nothing of the page as they acted on it.
pub async fn page_loaded(target: Target) {
    let page = command(
        &target,
        "Runtime.evaluate",
        json!({"expression": "({url: location.href, title: document.title})", "returnByValue": true}),
    )
    .await
    .map(|result| result["result"]["value"].clone())
    .unwrap_or_default();
    let url = page["url"].as_str().unwrap_or_default().to_owned();
    if !target.is_tab() {
        dom_snapshot(&target, Occasion::LOAD).await;
        return;
    }
    let title = page["title"].as_str().unwrap_or_default().to_owned();
    send_events(vec![event(
        target.tab_id,
        EventKind::PageLoad(PageLoad { url, title, dom_content_loaded_ms: None, load_ms: None }),
    )]);
    let loaded = SCHEDULES.with(|s| {
        let mut schedules = s.borrow_mut();
        let schedule = schedules.entry(target.tab_id).or_default();
        schedule.last_capture = js_sys::Date::now();
        (schedule.document, schedule.actions)
    });
    screenshot(target.tab_id, Occasion::LOAD).await;
    dom_snapshot(&target, Occasion::LOAD).await;
    if !until_settled(&target).await {
        return;
    }
    // A document that another replaced meanwhile is not captured (the new one is, when it loads), nor one
    // the person acted on (a capture after the action is scheduled).
    let unchanged_since =
        SCHEDULES.with(|s| s.borrow().get(&target.tab_id).is_some_and(|s| (s.document, s.actions) == loaded));
    if unchanged_since && active_task_id().is_some() {
        screenshot(target.tab_id, Occasion::LOAD).await;
        dom_snapshot(&target, Occasion::LOAD).await;
    }
}

/// Why a capture was taken: its reason (`load`, `action`), and for one after an action, the `ts` of the
/// action event whose effect it shows (see `ScreenshotStored::after_action_ts`).
#[derive(Debug, Clone, Copy)]
struct Occasion {
    reason: &'static str,
    after_action_ts: Option<f64>,
}

impl Occasion {
    const LOAD: Occasion = Occasion { reason: "load", after_action_ts: None };
}

/// The recording stops: the tab is captured as it ends (a screenshot and a DOM snapshot, reason `stop`), so
/// that the state the person left it in is in the recording even when the capture after their last action
/// was still waiting (an animation that never rests, a stop right after the last click).
pub async fn at_stop(tab_id: i64) {
    let capture = wasm_bindgen_futures::future_to_promise(async move {
        let occasion = Occasion { reason: "stop", after_action_ts: None };
        screenshot(tab_id, occasion).await;
        dom_snapshot(&Target::tab(tab_id), occasion).await;
        Ok(wasm_bindgen::JsValue::UNDEFINED)
    });
    let raced = js_sys::Promise::race(&js_sys::Array::of2(&capture, &chrome::deadline(STOP_CAPTURE_MS)));
    if let Err(error) = wasm_bindgen_futures::JsFuture::from(raced).await {
        web_sys::console::warn_1(
            &format!("no capture of tab {tab_id} at stop: {}", crate::debugger::describe(error)).into(),
        );
    }
}

/// Something happened in a tab: an action (`action_ts`, the `ts` its event is recorded with) or a change of
/// what its document shows. Captures it once the page has reacted, at most once per interval; a burst of
/// actions gets one capture, tied to the last of them.
pub fn after_action(tab_id: i64, action_ts: Option<f64>) {
    let now = js_sys::Date::now();
    let due = SCHEDULES.with(|s| {
        let mut schedules = s.borrow_mut();
        let schedule = schedules.entry(tab_id).or_default();
        schedule.action_ts = action_ts.or(schedule.action_ts);
        schedule.actions += u64::from(action_ts.is_some());
        if action_ts.is_some() && !schedule.settling {
            schedule.settling = true;
            wasm_bindgen_futures::spawn_local(settled_picture(tab_id));
        }
        if schedule.pending {
            return None;
        }
        schedule.pending = true;
        Some(((now + SETTLE_MS).max(schedule.last_capture + MIN_INTERVAL_MS), schedule.document))
    });
    let Some((due, document)) = due else { return };
    wasm_bindgen_futures::spawn_local(async move {
        chrome::sleep(due - now).await;
        let same_document = SCHEDULES.with(|s| {
            let mut schedules = s.borrow_mut();
            let schedule = schedules.entry(tab_id).or_default();
            if schedule.document != document {
                return false;
            }
            schedule.last_capture = js_sys::Date::now();
            schedule.pending = false;
            true
        });
        if same_document && active_task_id().is_some() {
            // Taken before settling: an action done meanwhile schedules a capture of its own.
            let after_action_ts = SCHEDULES.with(|s| s.borrow_mut().get_mut(&tab_id).and_then(|s| s.action_ts.take()));
            until_settled(&Target::tab(tab_id)).await;
            let occasion = Occasion { reason: "action", after_action_ts };
            screenshot(tab_id, occasion).await;
            dom_snapshot(&Target::tab(tab_id), occasion).await;
        }
    });
}

/// Takes a screenshot of the tab once its DOM has gone [`SETTLED_QUIET_MS`] without a change after the
/// person's latest action (reason `settled`, tied to no action: it shows the page the next one is taken
/// on). An action that comes while it waits, or while the picture is taken, starts the wait again: a
/// picture that may already show that action's effect would be taken for what it acted on. A new document
/// ends it (its load is captured).
async fn settled_picture(tab_id: i64) {
    let target = Target::tab(tab_id);
    let state = || SCHEDULES.with(|s| s.borrow().get(&tab_id).map(|s| (s.actions, s.document)));
    loop {
        let waited_for = state();
        until_quiet_for(&target, SETTLED_QUIET_MS, SETTLED_MAX_WAIT_MS).await;
        let acted_meanwhile = state() != waited_for;
        if !acted_meanwhile && active_task_id().is_some() {
            let occasion = Occasion { reason: "settled", after_action_ts: None };
            let taken_at = js_sys::Date::now();
            if let Some(shot) = take_screenshot(tab_id).await
                && state() == waited_for
            {
                send_screenshot(tab_id, occasion, taken_at, shot);
            }
        }
        let done = SCHEDULES.with(|s| {
            let mut schedules = s.borrow_mut();
            let schedule = schedules.entry(tab_id).or_default();
            let unchanged = Some((schedule.actions, schedule.document)) == waited_for;
            let document_replaced = waited_for.is_some_and(|(_, document)| document != schedule.document);
            // Decided and cleared in one turn: an action reported later starts a wait of its own.
            let done = unchanged || document_replaced || active_task_id().is_none();
            if done {
                schedule.settling = false;
            }
            done
        });
        if done {
            return;
        }
    }
}

/// Waits until the tab has no request in flight and its document has then gone [`QUIET_MS`] without a
/// mutation, both at once (a page sending a second request after the first one's answer is waited for too),
/// or about [`MAX_QUIET_WAIT_MS`]. Under load the recorder holds responses a while: without the network, a
/// capture could take a form's "Sending…" for what the action led to. Says whether the document changed
/// while it waited.
async fn until_settled(target: &Target) -> bool {
    let deadline = js_sys::Date::now() + f64::from(MAX_QUIET_WAIT_MS);
    let mut changed = false;
    loop {
        while super::requests_in_flight(target.tab_id) > 0 && js_sys::Date::now() < deadline {
            chrome::sleep(NETWORK_POLL_MS).await;
        }
        changed |= until_quiet(target).await;
        if super::requests_in_flight(target.tab_id) == 0 || js_sys::Date::now() >= deadline {
            return changed;
        }
    }
}

/// Waits until the tab's document has gone [`QUIET_MS`] without a mutation, or [`MAX_QUIET_WAIT_MS`];
/// says whether it saw one (or could not tell).
async fn until_quiet(target: &Target) -> bool {
    until_quiet_for(target, QUIET_MS, MAX_QUIET_WAIT_MS).await
}

/// Waits until the tab's document has gone `quiet_ms` without a mutation, or `max_wait_ms`; says whether
/// it saw one (or could not tell). A DevTools expression rather than WebAssembly: it must run in the page,
/// where the mutations are.
async fn until_quiet_for(target: &Target, quiet_ms: u32, max_wait_ms: u32) -> bool {
    let expression = format!(
        "new Promise((rest) => {{ \
           let timer, changed = false; \
           const done = () => {{ observer.disconnect(); rest(changed); }}; \
           const observer = new MutationObserver(() => {{ \
             changed = true; clearTimeout(timer); timer = setTimeout(done, {quiet_ms}); \
           }}); \
           observer.observe(document, {{subtree: true, childList: true, characterData: true, attributes: true}}); \
           timer = setTimeout(done, {quiet_ms}); \
           setTimeout(done, {max_wait_ms}); \
         }})"
    );
    let params = json!({"expression": expression, "awaitPromise": true, "returnByValue": true});
    command(target, "Runtime.evaluate", params)
        .await
        .map_or(true, |result| result["result"]["value"].as_bool() != Some(false))
}

/// WebP quality of the screenshots, which dominate small recordings' bundles. Measured on the demo shop's
/// pages at 1280×657: WebP at 85 takes 0.7× the bytes of PNG (JPEG at 85 took 1.26×: flat page colours suit
/// PNG better than JPEG), with artefacts below the per-pixel tolerance replay compares with.
const SCREENSHOT_QUALITY: u32 = 85;

async fn screenshot(tab_id: i64, occasion: Occasion) {
    if let Some(shot) = take_screenshot(tab_id).await {
        send_screenshot(tab_id, occasion, js_sys::Date::now(), shot);
    }
}

/// A screenshot of the tab, as Chrome encoded it.
struct Shot {
    viewport: Option<Viewport>,
    /// WebP, base64.
    data: String,
}

async fn take_screenshot(tab_id: i64) -> Option<Shot> {
    let target = Target::tab(tab_id);
    let viewport = viewport(&target).await;
    let params = json!({"format": "webp", "quality": SCREENSHOT_QUALITY});
    let shot = command(&target, "Page.captureScreenshot", params).await.ok()?;
    Some(Shot { viewport, data: shot["data"].as_str().unwrap_or_default().to_owned() })
}

/// Sends a screenshot recorded at `ts`.
fn send_screenshot(tab_id: i64, occasion: Occasion, ts: f64, shot: Shot) {
    let Some(task_id) = active_task_id() else { return };
    send(ClientBody::Screenshot {
        task_id,
        ts,
        tab_id: Some(tab_id),
        format: ImageFormat::Webp,
        reason: occasion.reason.to_owned(),
        viewport: shot.viewport,
        after_action_ts: occasion.after_action_ts,
        data: shot.data,
    });
}

/// The tab's viewport in CSS pixels and its device scale factor, as the page sees them.
async fn viewport(target: &Target) -> Option<Viewport> {
    let expression = "({width: innerWidth, height: innerHeight, device_scale_factor: devicePixelRatio})";
    let result =
        command(target, "Runtime.evaluate", json!({"expression": expression, "returnByValue": true})).await.ok()?;
    serde_json::from_value(result["result"]["value"].clone()).ok()
}

/// The target's document as HTML, shadow roots included, with the accessibility tree; then each iframe
/// running in the same process, as a snapshot of its own. (Iframes in other processes are child targets:
/// they are snapshot when they load.)
async fn dom_snapshot(target: &Target, occasion: Occasion) {
    let Ok(document) = command(target, "DOM.getDocument", json!({"depth": 0})).await else { return };
    let root = &document["root"];
    let url = root["documentURL"].as_str().unwrap_or_default().to_owned();
    let html = command(target, "DOM.getOuterHTML", json!({"nodeId": root["nodeId"], "includeShadowDOM": true})).await;
    let Ok(html) = html else { return };
    let accessibility =
        command(target, "Accessibility.getFullAXTree", json!({})).await.ok().map(|tree| tree["nodes"].clone());
    let tree = command(target, "Page.getFrameTree", json!({})).await.unwrap_or_default();
    // A child target's document is an iframe's: it names its frame (the tab's main frame goes unnamed).
    let frame_id = if target.is_tab() { None } else { tree["frameTree"]["frame"]["id"].as_str().map(str::to_owned) };
    send_dom(target, frame_id, url, occasion, html["outerHTML"].as_str().unwrap_or_default(), accessibility);

    let mut frames: Vec<&Value> = tree["frameTree"]["childFrames"].as_array().into_iter().flatten().collect();
    while let Some(node) = frames.pop() {
        frames.extend(node["childFrames"].as_array().into_iter().flatten());
        let frame = &node["frame"];
        let Some(frame_id) = frame["id"].as_str() else { continue };
        let Ok(owner) = command(target, "DOM.getFrameOwner", json!({"frameId": frame_id})).await else { continue };
        let described = command(
            target,
            "DOM.describeNode",
            json!({"backendNodeId": owner["backendNodeId"], "depth": 0, "pierce": true}),
        )
        .await;
        // An iframe in another process has no content document here.
        let Some(content) = described.ok().and_then(|d| d["node"]["contentDocument"]["backendNodeId"].as_i64()) else {
            continue;
        };
        let html =
            command(target, "DOM.getOuterHTML", json!({"backendNodeId": content, "includeShadowDOM": true})).await;
        if let Ok(html) = html {
            let url = frame["url"].as_str().unwrap_or_default().to_owned();
            send_dom(
                target,
                Some(frame_id.to_owned()),
                url,
                occasion,
                html["outerHTML"].as_str().unwrap_or_default(),
                None,
            );
        }
    }
}

fn send_dom(
    target: &Target,
    frame_id: Option<String>,
    url: String,
    occasion: Occasion,
    html: &str,
    accessibility: Option<Value>,
) {
    let Some(task_id) = active_task_id() else { return };
    send(ClientBody::DomSnapshot {
        task_id,
        ts: js_sys::Date::now(),
        tab_id: Some(target.tab_id),
        frame_id,
        url,
        reason: occasion.reason.to_owned(),
        html: html.to_owned(),
        accessibility,
        after_action_ts: occasion.after_action_ts,
    });
}

/// Every cookie of the browser, as the recording starts; each origin's storage follows when the recording
/// reaches it ([`origin_reached`]).
pub async fn cookies_at_start(tab_id: i64) {
    let snapshot = StorageSnapshot { phase: StoragePhase::Start, cookies: cookies(&[tab_id]).await, ..empty_storage() };
    send_events(vec![event(tab_id, EventKind::Storage(snapshot))]);
}

/// The recording reached `origin` for the first time, in the page of `context` (of the capture script's
/// world): its storage as that page found it is, for this origin, where the recording started (a `start`
/// snapshot of its own). Where it cannot be read, the origin's next page is read instead.
pub async fn origin_reached(target: Target, context: i64, origin: String) {
    match read_origin(&target, context, true).await {
        Some(storage) => send_storage(target.tab_id, StoragePhase::Start, storage),
        None => super::storage_origin_unread(&origin),
    }
}

/// The `stop` snapshots: every cookie (read through any of the recorded `tabs`), then the storage of each
/// origin the tabs show (`pages`, one context of each), one snapshot each, so that no message holds more
/// than one origin's.
pub async fn storage_at_stop(tabs: &[i64], pages: Vec<(Target, i64)>) {
    let Some(&tab_id) = tabs.first() else { return };
    let snapshot = StorageSnapshot { phase: StoragePhase::Stop, cookies: cookies(tabs).await, ..empty_storage() };
    send_events(vec![event(tab_id, EventKind::Storage(snapshot))]);
    for (target, context) in pages {
        if let Some(storage) = read_origin(&target, context, false).await {
            send_storage(target.tab_id, StoragePhase::Stop, storage);
        }
    }
}

fn send_storage(tab_id: i64, phase: StoragePhase, storage: OriginStorage) {
    let mut snapshot = StorageSnapshot { phase, ..empty_storage() };
    if let Some(local) = storage.local {
        snapshot.local_storage.insert(storage.origin.clone(), local);
    }
    if let Some(session) = storage.session {
        snapshot.session_storage.insert(storage.origin.clone(), session);
    }
    if !storage.indexed_db.is_empty() {
        snapshot.indexed_db.insert(storage.origin, storage.indexed_db);
    }
    send_events(vec![event(tab_id, EventKind::Storage(snapshot))]);
}

fn empty_storage() -> StorageSnapshot {
    StorageSnapshot {
        phase: StoragePhase::Start,
        cookies: Vec::new(),
        local_storage: Default::default(),
        session_storage: Default::default(),
        indexed_db: Default::default(),
    }
}

/// The longest a page's storage is waited for: a stuck page, or a database another tab holds in an upgrade,
/// must not hold the recording (its stop least of all).
const READ_STORAGE_MS: f64 = 10_000.0;

/// The storage of the origin of `context`'s document (`at_start`: its web storage as the document found
/// it). `None` when the document has gone, or has no origin storage can be read in.
async fn read_origin(target: &Target, context: i64, at_start: bool) -> Option<OriginStorage> {
    let params = json!({
        "expression": site_storage::read_expression(at_start),
        "contextId": context,
        "awaitPromise": true,
        "returnByValue": true,
    });
    let result = match command_within(target, "Runtime.evaluate", params, READ_STORAGE_MS).await {
        Ok(result) => result,
        Err(error) => {
            crate::log(&format!("cannot read the storage of a page of tab {}: {error}", target.tab_id));
            return None;
        }
    };
    let origin: OriginStorage = serde_json::from_value(result["result"]["value"].clone()).ok()?;
    if !origin.origin.starts_with("http") {
        return None;
    }
    if origin.records_left_out > 0 {
        crate::log(&format!(
            "the IndexedDB of {} was kept in part: {} records left out (over {} MiB, or not serializable)",
            origin.origin,
            origin.records_left_out,
            site_storage::READ_LIMIT_BYTES >> 20
        ));
    }
    Some(origin)
}

/// Every cookie of the browser (DevTools gives them whatever the site), asked of each of `tabs` in turn,
/// twice over, until one answers: a tab that is closing, or busy being detached, fails the command, and
/// an empty list in its place would lose the login a replay needs. Said in the log when none answers.
async fn cookies(tabs: &[i64]) -> Vec<Cookie> {
    let mut answer = Err("no tab to ask".to_owned());
    for &tab_id in tabs.iter().chain(tabs) {
        answer = command(&Target::tab(tab_id), "Network.getAllCookies", json!({})).await;
        if answer.is_ok() {
            break;
        }
    }
    let cookies = answer.unwrap_or_else(|error| {
        crate::log(&format!("cannot read the browser's cookies: {error}"));
        Value::Null
    });
    cookies["cookies"]
        .as_array()
        .into_iter()
        .flatten()
        .filter_map(|c| {
            Some(Cookie {
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
        .collect()
}
