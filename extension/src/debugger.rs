//! The recorder's handle on the DevTools protocol through `chrome.debugger`: which target a command goes
//! to, and sending it. A target is a recorded tab, or a child of one (a cross-process iframe, a worker)
//! that the tab's auto-attach reached and that answers on a flattened session of the tab's connection.

use serde_json::{Value, json};
use wasm_bindgen::JsValue;
use wasm_bindgen_futures::JsFuture;

use crate::chrome::{self, from_js, to_js};

#[derive(Debug, Clone, PartialEq, Eq, Hash, PartialOrd, Ord)]
pub struct Target {
    pub tab_id: i64,
    /// The flattened session of a child target; `None` for the tab itself.
    pub session_id: Option<String>,
}

impl Target {
    pub fn tab(tab_id: i64) -> Target {
        Target { tab_id, session_id: None }
    }

    pub fn child(tab_id: i64, session_id: String) -> Target {
        Target { tab_id, session_id: Some(session_id) }
    }

    /// The target an event came from (`chrome.debugger.onEvent`'s source).
    pub fn from_source(source: &Value) -> Option<Target> {
        Some(Target { tab_id: source["tabId"].as_i64()?, session_id: source["sessionId"].as_str().map(str::to_owned) })
    }

    pub fn is_tab(&self) -> bool {
        self.session_id.is_none()
    }

    fn to_js(&self) -> JsValue {
        match &self.session_id {
            None => to_js(&json!({"tabId": self.tab_id})),
            Some(session_id) => to_js(&json!({"tabId": self.tab_id, "sessionId": session_id})),
        }
    }
}

/// Sends a DevTools command and waits for its result.
pub async fn command(target: &Target, method: &str, params: Value) -> Result<Value, String> {
    let result = JsFuture::from(chrome::debugger_send_command(&target.to_js(), method, &to_js(&params)))
        .await
        .map_err(describe)?;
    Ok(from_js(&result))
}

/// [`command`], given up after `milliseconds`: an evaluation in a page whose main thread is stuck, or one
/// waiting on the page's storage (an IndexedDB open queued behind another tab's upgrade), may never answer.
pub async fn command_within(target: &Target, method: &str, params: Value, milliseconds: f64) -> Result<Value, String> {
    let answer = chrome::debugger_send_command(&target.to_js(), method, &to_js(&params));
    let raced = js_sys::Promise::race(&js_sys::Array::of2(&answer, &chrome::deadline(milliseconds)));
    let result = JsFuture::from(raced).await.map_err(describe)?;
    Ok(from_js(&result))
}

pub async fn attach(tab_id: i64) -> Result<(), String> {
    JsFuture::from(chrome::debugger_attach(&Target::tab(tab_id).to_js(), "1.3")).await.map_err(describe)?;
    Ok(())
}

/// Detaches from a tab; its child sessions end with it. A tab already gone is not an error.
pub async fn detach(tab_id: i64) {
    let _ = JsFuture::from(chrome::debugger_detach(&Target::tab(tab_id).to_js())).await;
}

/// The message of a rejected `chrome.*` promise.
pub fn describe(error: JsValue) -> String {
    js_sys::Reflect::get(&error, &"message".into())
        .ok()
        .and_then(|m| m.as_string())
        .unwrap_or_else(|| format!("{error:?}"))
}
