//! What the recorder captures of a page's state, as opposed to its traffic: screenshots, DOM snapshots
//! (HTML with shadow roots and same-process iframes, plus the accessibility tree) and storage (cookies,
//! local and session storage). Pages are captured when they load and after actions; captures after
//! actions are throttled per tab, so that a burst of clicks costs one capture, taken once the page has
//! had a moment to react, has no request in flight and then gone [`QUIET_MS`] without changing its DOM (an
//! answer that streams in is captured once it is all there, a form sent by script once its answer shows),
//! waiting at most [`MAX_QUIET_WAIT_MS`] for a page that never rests.

use std::cell::RefCell;
use std::collections::HashMap;

use serde_json::{Value, json};
use trace_manifest::event::{Cookie, EventKind, ImageFormat, PageLoad, StoragePhase, StorageSnapshot, Viewport};
use trace_manifest::wire::ClientBody;

use crate::chrome;
use crate::debugger::{Target, command};
use crate::recording::{active_task_id, event, send, send_events};

/// How long after an action its capture waits, so that the page shows the action's effect.
const SETTLE_MS: f64 = 500.0;
/// At most one capture per tab in this interval, whatever the number of actions.
const MIN_INTERVAL_MS: f64 = 1000.0;
/// How long the DOM must stay unchanged before a capture after an action.
const QUIET_MS: u32 = 300;
/// The longest a capture after an action waits for the DOM to rest (an animation never does), and for the
/// tab's requests to end (a long poll never does).
const MAX_QUIET_WAIT_MS: u32 = 2000;
/// How often a capture waiting for the tab's requests looks again.
const NETWORK_POLL_MS: f64 = 50.0;

#[derive(Debug, Default, Clone, Copy)]
struct Schedule {
    last_capture: f64,
    pending: bool,
    /// Counts the tab's documents: a capture scheduled for one document is dropped once another replaced
    /// it (the new one is captured when it loads).
    document: u64,
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
    });
}

/// A page finished loading: records it, and captures it (a screenshot only for whole tabs: a child
/// target is an iframe, whose pixels are the tab's).
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
    if target.is_tab() {
        let title = page["title"].as_str().unwrap_or_default().to_owned();
        send_events(vec![event(
            target.tab_id,
            EventKind::PageLoad(PageLoad { url, title, dom_content_loaded_ms: None, load_ms: None }),
        )]);
        SCHEDULES.with(|s| s.borrow_mut().entry(target.tab_id).or_default().last_capture = js_sys::Date::now());
        screenshot(target.tab_id, "load").await;
    }
    dom_snapshot(&target, "load").await;
}

/// An action happened in a tab: captures it once the page has reacted, at most once per interval.
pub fn after_action(tab_id: i64) {
    let now = js_sys::Date::now();
    let due = SCHEDULES.with(|s| {
        let mut schedules = s.borrow_mut();
        let schedule = schedules.entry(tab_id).or_default();
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
            until_settled(&Target::tab(tab_id)).await;
            screenshot(tab_id, "action").await;
            dom_snapshot(&Target::tab(tab_id), "action").await;
        }
    });
}

/// Waits until the tab has no request in flight and its document has then gone [`QUIET_MS`] without a
/// mutation, both at once (a page sending a second request after the first one's answer is waited for too),
/// or about [`MAX_QUIET_WAIT_MS`]. Under load the recorder holds responses a while: without the network, a
/// capture could take a form's "Sending…" for what the action led to.
async fn until_settled(target: &Target) {
    let deadline = js_sys::Date::now() + f64::from(MAX_QUIET_WAIT_MS);
    loop {
        while crate::recording::requests_in_flight(target.tab_id) > 0 && js_sys::Date::now() < deadline {
            chrome::sleep(NETWORK_POLL_MS).await;
        }
        until_quiet(target).await;
        if crate::recording::requests_in_flight(target.tab_id) == 0 || js_sys::Date::now() >= deadline {
            return;
        }
    }
}

/// Waits until the tab's document has gone [`QUIET_MS`] without a mutation, or [`MAX_QUIET_WAIT_MS`].
/// A DevTools expression rather than WebAssembly: it must run in the page, where the mutations are.
async fn until_quiet(target: &Target) {
    let expression = format!(
        "new Promise((rest) => {{ \
           let timer; \
           const done = () => {{ observer.disconnect(); rest(true); }}; \
           const observer = new MutationObserver(() => {{ clearTimeout(timer); timer = setTimeout(done, {QUIET_MS}); }}); \
           observer.observe(document, {{subtree: true, childList: true, characterData: true, attributes: true}}); \
           timer = setTimeout(done, {QUIET_MS}); \
           setTimeout(done, {MAX_QUIET_WAIT_MS}); \
         }})"
    );
    let _ = command(target, "Runtime.evaluate", json!({"expression": expression, "awaitPromise": true})).await;
}

/// WebP quality of the screenshots, which dominate small recordings' bundles. Measured on the demo shop's
/// pages at 1280×657: WebP at 85 takes 0.7× the bytes of PNG (JPEG at 85 took 1.26×: flat page colours suit
/// PNG better than JPEG), with artefacts below the per-pixel tolerance replay compares with.
const SCREENSHOT_QUALITY: u32 = 85;

async fn screenshot(tab_id: i64, reason: &str) {
    let target = Target::tab(tab_id);
    let viewport = viewport(&target).await;
    let params = json!({"format": "webp", "quality": SCREENSHOT_QUALITY});
    let Ok(shot) = command(&target, "Page.captureScreenshot", params).await else {
        return;
    };
    let Some(task_id) = active_task_id() else { return };
    send(ClientBody::Screenshot {
        task_id,
        ts: js_sys::Date::now(),
        tab_id: Some(tab_id),
        format: ImageFormat::Webp,
        reason: reason.to_owned(),
        viewport,
        data: shot["data"].as_str().unwrap_or_default().to_owned(),
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
async fn dom_snapshot(target: &Target, reason: &str) {
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
    send_dom(target, frame_id, url, reason, html["outerHTML"].as_str().unwrap_or_default(), accessibility);

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
                reason,
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
    reason: &str,
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
        reason: reason.to_owned(),
        html: html.to_owned(),
        accessibility,
    });
}

/// Cookies of every site the tab can see, and its origin's web storage.
pub async fn storage_snapshot(tab_id: i64, phase: StoragePhase) {
    let target = Target::tab(tab_id);
    let cookies = command(&target, "Network.getAllCookies", json!({})).await.unwrap_or_default();
    let cookies = cookies["cookies"]
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
        .collect();
    let expression = "(() => { try { const dump = (s) => Object.fromEntries(Object.keys(s).map((k) => [k, s.getItem(k)])); \
        return {origin: location.origin, local: dump(localStorage), session: dump(sessionStorage)}; } catch (e) { return null; } })()";
    let web = command(&target, "Runtime.evaluate", json!({"expression": expression, "returnByValue": true}))
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
