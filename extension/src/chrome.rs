//! Bindings to the `chrome.*` extension APIs that the recorder uses, declared for wasm-bindgen. Only the
//! calls TRACE makes are declared; each returns what Chrome returns (promises where MV3 has them).

use js_sys::{Function, Promise};
use serde_json::Value;
use wasm_bindgen::prelude::*;

#[wasm_bindgen]
extern "C" {
    /// A `chrome.events.Event`: something listeners are added to.
    pub type ChromeEvent;
    #[wasm_bindgen(method, js_name = addListener)]
    pub fn add_listener(this: &ChromeEvent, listener: &Function);

    /// A `chrome.runtime.Port`, here the one to the native host.
    pub type Port;
    #[wasm_bindgen(method, js_name = postMessage, catch)]
    pub fn post_message(this: &Port, message: &JsValue) -> Result<(), JsValue>;
    #[wasm_bindgen(method)]
    pub fn disconnect(this: &Port);
    #[wasm_bindgen(method, getter, js_name = onMessage)]
    pub fn on_message(this: &Port) -> ChromeEvent;
    #[wasm_bindgen(method, getter, js_name = onDisconnect)]
    pub fn on_disconnect(this: &Port) -> ChromeEvent;

    #[wasm_bindgen(js_namespace = ["chrome", "runtime"], js_name = connectNative)]
    pub fn connect_native(application: &str) -> Port;
    /// `chrome.runtime.lastError`, set while a callback or listener reports a failure.
    #[wasm_bindgen(js_namespace = ["chrome", "runtime"], js_name = lastError, thread_local_v2)]
    pub static LAST_ERROR: JsValue;
    #[wasm_bindgen(js_namespace = ["chrome", "runtime"], js_name = sendMessage)]
    pub fn send_message(message: &JsValue) -> Promise;
    /// One message to a native host started for it; the promise holds its one reply.
    #[wasm_bindgen(js_namespace = ["chrome", "runtime"], js_name = sendNativeMessage)]
    pub fn send_native_message(application: &str, message: &JsValue) -> Promise;
    #[wasm_bindgen(js_namespace = ["chrome", "runtime"], js_name = getManifest)]
    pub fn get_manifest() -> JsValue;

    #[wasm_bindgen(js_namespace = ["chrome", "tabs"], js_name = create)]
    pub fn tabs_create(properties: &JsValue) -> Promise;
    #[wasm_bindgen(js_namespace = ["chrome", "tabs"], js_name = query)]
    pub fn tabs_query(query: &JsValue) -> Promise;

    /// `chrome.history.search({text, startTime, maxResults})`: the pages visited.
    #[wasm_bindgen(js_namespace = ["chrome", "history"], js_name = search)]
    pub fn history_search(query: &JsValue) -> Promise;
    /// `chrome.history.getVisits({url})`: every visit of one page.
    #[wasm_bindgen(js_namespace = ["chrome", "history"], js_name = getVisits)]
    pub fn history_get_visits(details: &JsValue) -> Promise;

    /// `target` is `{tabId}` or, for a child target attached with flatten, `{tabId, sessionId}`.
    #[wasm_bindgen(js_namespace = ["chrome", "debugger"], js_name = attach)]
    pub fn debugger_attach(target: &JsValue, protocol_version: &str) -> Promise;
    #[wasm_bindgen(js_namespace = ["chrome", "debugger"], js_name = detach)]
    pub fn debugger_detach(target: &JsValue) -> Promise;
    #[wasm_bindgen(js_namespace = ["chrome", "debugger"], js_name = sendCommand)]
    pub fn debugger_send_command(target: &JsValue, method: &str, params: &JsValue) -> Promise;

    #[wasm_bindgen(js_namespace = ["chrome", "action"], js_name = setBadgeText)]
    pub fn set_badge_text(details: &JsValue) -> Promise;
    #[wasm_bindgen(js_namespace = ["chrome", "action"], js_name = setBadgeBackgroundColor)]
    pub fn set_badge_background_color(details: &JsValue) -> Promise;

    #[wasm_bindgen(js_name = setTimeout)]
    fn set_timeout(handler: &Function, milliseconds: f64) -> JsValue;
}

/// A promise rejected with "timed out after N ms" once `milliseconds` have passed: raced against another,
/// it bounds the wait for it.
pub fn deadline(milliseconds: f64) -> Promise {
    Promise::new(&mut |_resolve, reject| {
        let message = JsValue::from_str(&format!("timed out after {milliseconds} ms"));
        let reject = Closure::once_into_js(move || {
            let _ = reject.call1(&JsValue::NULL, &message);
        });
        set_timeout(reject.unchecked_ref(), milliseconds.max(0.0));
    })
}

/// Waits `milliseconds` (a timer of the service worker, not a busy wait).
pub async fn sleep(milliseconds: f64) {
    let timer = Promise::new(&mut |resolve, _reject| {
        set_timeout(&resolve, milliseconds.max(0.0));
    });
    let _ = wasm_bindgen_futures::JsFuture::from(timer).await;
}

/// The message of `chrome.runtime.lastError`, if one is set.
pub fn last_error_message() -> Option<String> {
    LAST_ERROR.with(|error| {
        if error.is_undefined() || error.is_null() {
            return None;
        }
        js_sys::Reflect::get(error, &"message".into()).ok().and_then(|m| m.as_string())
    })
}

/// A JSON value as the JavaScript value the `chrome.*` APIs take.
pub fn to_js(value: &Value) -> JsValue {
    js_sys::JSON::parse(&value.to_string()).unwrap_or(JsValue::NULL)
}

/// A JavaScript value from the `chrome.*` APIs as JSON (`null` for what JSON cannot hold).
pub fn from_js(value: &JsValue) -> Value {
    js_sys::JSON::stringify(value)
        .ok()
        .and_then(|s| s.as_string())
        .and_then(|s| serde_json::from_str(&s).ok())
        .unwrap_or(Value::Null)
}
