//! The TRACE recorder: a Chrome MV3 extension in Rust, compiled to WebAssembly.
//!
//! # Layout
//! - [`network`], [`outbox`], [`bodies`]: browser-independent logic, tested with plain `cargo test`:
//!   DevTools network events to TRACE events, the buffer of messages awaiting the host's acknowledgement,
//!   and response bodies on their way to the host (taken, streamed or fetched whole).
//! - [`chrome`], [`debugger`]: bindings to the `chrome.*` APIs used, and DevTools targets and commands.
//! - [`host_link`]: the service worker's native messaging port to `trace-host`.
//! - [`recording`]: the recording in progress, with its screenshots, DOM and storage captures
//!   (`recording::snapshots`).
//! - [`popup`]: the task UI (`popup.html`); [`last_recording`]: what it says was saved once stopped;
//!   [`campaign`]: a coordinator's campaign loaded in it;
//!   [`review`]: a campaign task's recording reviewed and submitted (`review.html`); [`journeys`]: the
//!   person's history grouped into journeys and annotated (`journeys.html`); [`dom`]: their shared helpers.
//!
//! The JavaScript in `static/` only bootstraps: it loads this module, and registers the listeners Chrome
//! needs at startup, forwarding them here. The in-page script that reports actions runs inside recorded pages,
//! where wasm may be forbidden; it is `trace_capture`'s, shared with `trace-replay eval`.

pub mod bodies;
pub mod campaign;
pub mod chrome;
pub mod debugger;
pub mod dom;
pub mod host_link;
#[cfg(test)]
mod icons;
pub mod journeys;
pub mod last_recording;
pub mod load_gate;
pub mod network;
pub mod outbox;
pub mod popup;
pub mod recording;
pub mod review;

use trace_manifest::task::TaskType;
use wasm_bindgen::prelude::*;

#[wasm_bindgen]
extern "C" {
    #[wasm_bindgen(js_namespace = console, js_name = info)]
    fn console_info(message: &str);
}

/// Writes to the service worker's (or popup's) console.
pub fn log(message: &str) {
    if cfg!(target_arch = "wasm32") {
        console_info(message);
    }
}

/// The capture format version this build writes.
#[wasm_bindgen]
pub fn format_version() -> u32 {
    trace_manifest::FORMAT_VERSION
}

/// Called by the service worker bootstrap once the module is loaded.
#[wasm_bindgen]
pub fn service_worker_start() {
    log(&format!("TRACE recorder {} (capture format {})", env!("CARGO_PKG_VERSION"), trace_manifest::FORMAT_VERSION));
    host_link::on_reply(recording::on_host_reply);
    host_link::ensure_connected();
}

/// Called by the pages' bootstrap once the module is loaded: renders the page its `<body data-page>` names.
#[wasm_bindgen]
pub fn page_main(page: Option<String>) {
    match page.as_deref() {
        Some("review") => review::main(),
        Some("journeys") => journeys::main(),
        _ => popup::main(),
    }
}

/// Answers a message from the popup (`chrome.runtime.onMessage`) with a promise of the reply:
/// `{ok: true, ...state}` or `{ok: false, error}`.
#[wasm_bindgen]
pub fn on_runtime_message(message: JsValue) -> js_sys::Promise {
    let message = chrome::from_js(&message);
    wasm_bindgen_futures::future_to_promise(async move {
        let text = |key: &str| message[key].as_str().unwrap_or_default().to_owned();
        let outcome = match message["command"].as_str() {
            Some("status") => Ok(()),
            Some(command @ ("start" | "record_current")) => match TaskType::parse(&text("task_type")) {
                Some(task_type) => {
                    recording::start(recording::TaskRequest {
                        source: text("source"),
                        task_type,
                        description: text("description"),
                        website: text("website"),
                        current_tab: command == "record_current",
                    })
                    .await
                }
                None => Err("choose a task type".to_owned()),
            },
            Some("stop") => recording::stop(message["answer"].as_str().map(str::to_owned)).await,
            Some("discard") => recording::discard().await,
            other => Err(format!("unknown command {other:?}")),
        };
        host_link::ensure_connected();
        let mut reply = serde_json::json!({
            "ok": outcome.is_ok(),
            "host": host_link::status(),
            "recording": recording::progress(),
            "last": recording::last_stopped(),
        });
        if let Err(error) = outcome {
            reply["error"] = error.into();
        }
        Ok(chrome::to_js(&reply))
    })
}

/// A DevTools event of a target the recorder is attached to (`chrome.debugger.onEvent`).
#[wasm_bindgen]
pub fn on_debugger_event(source: JsValue, method: String, params: JsValue) {
    if let Some(target) = debugger::Target::from_source(&chrome::from_js(&source)) {
        recording::on_debugger_event(target, &method, chrome::from_js(&params));
    }
}

/// The debugger let go of a target (`chrome.debugger.onDetach`).
#[wasm_bindgen]
pub fn on_debugger_detached(source: JsValue, reason: String) {
    if let Some(target) = debugger::Target::from_source(&chrome::from_js(&source)).filter(|t| t.is_tab()) {
        recording::on_debugger_detached(target.tab_id, &reason);
    }
}

/// A tab was created (`chrome.tabs.onCreated`).
#[wasm_bindgen]
pub fn on_tab_created(tab: JsValue) {
    recording::on_tab_created(tab);
}

/// The active tab changed (`chrome.tabs.onActivated`).
#[wasm_bindgen]
pub fn on_tab_activated(tab_id: f64) {
    recording::on_tab_activated(tab_id as i64);
}

/// A tab was closed (`chrome.tabs.onRemoved`).
#[wasm_bindgen]
pub fn on_tab_removed(tab_id: f64) {
    recording::on_tab_removed(tab_id as i64);
}

/// A navigation committed (`chrome.webNavigation.onCommitted`).
#[wasm_bindgen]
pub fn on_navigation_committed(details: JsValue) {
    recording::on_navigation_committed(chrome::from_js(&details));
}

/// A navigation within the document (`chrome.webNavigation.onHistoryStateUpdated` and
/// `onReferenceFragmentUpdated`).
#[wasm_bindgen]
pub fn on_same_document_navigation(details: JsValue) {
    recording::on_same_document_navigation(chrome::from_js(&details));
}
