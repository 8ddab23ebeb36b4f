//! The TRACE recorder: a Chrome MV3 extension in Rust, compiled to WebAssembly.
//!
//! # Layout
//! - [`network`], [`outbox`]: browser-independent logic, tested with plain `cargo test`: DevTools network
//!   events to TRACE events, and the buffer of messages awaiting the host's acknowledgement.
//! - [`chrome`]: bindings to the `chrome.*` APIs used.
//! - [`host_link`]: the service worker's native messaging port to `trace-host`.
//! - [`recording`]: the recording in progress.
//! - [`popup`]: the task UI (`popup.html`).
//!
//! The JavaScript in `static/` only bootstraps: it loads this module, and registers the listeners Chrome
//! needs at startup, forwarding them here.

pub mod chrome;
pub mod host_link;
pub mod network;
pub mod outbox;
pub mod popup;
pub mod recording;

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
    host_link::ensure_connected();
}

/// Answers a message from the popup (`chrome.runtime.onMessage`). Returns the reply as a JS value.
#[wasm_bindgen]
pub fn on_runtime_message(message: JsValue) -> JsValue {
    let command = js_sys::Reflect::get(&message, &"command".into()).ok().and_then(|c| c.as_string());
    match command.as_deref() {
        Some("status") => {
            host_link::ensure_connected();
            let status = serde_json::json!({ "host": host_link::status() });
            js_sys::JSON::parse(&status.to_string()).unwrap_or(JsValue::NULL)
        }
        _ => JsValue::NULL,
    }
}
