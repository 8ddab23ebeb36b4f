//! The task UI, `popup.html`: shows whether the host is there (and how to install it when it is not), and
//! the task form. The page asks the service worker for its state; the service worker does the work.

use wasm_bindgen::prelude::*;
use wasm_bindgen_futures::JsFuture;

use crate::chrome;

/// How often the popup asks the service worker for its state.
const REFRESH_MS: i32 = 500;

/// Called by the popup bootstrap once the module is loaded.
#[wasm_bindgen]
pub fn popup_main() {
    wasm_bindgen_futures::spawn_local(async {
        loop {
            if let Err(error) = refresh_status().await {
                set_text("status", &format!("cannot reach the recorder: {error:?}"));
            }
            sleep(REFRESH_MS).await;
        }
    });
}

async fn sleep(ms: i32) {
    let promise = js_sys::Promise::new(&mut |resolve, _| {
        if let Some(window) = web_sys::window() {
            let _ = window.set_timeout_with_callback_and_timeout_and_arguments_0(&resolve, ms);
        }
    });
    let _ = JsFuture::from(promise).await;
}

async fn refresh_status() -> Result<(), JsValue> {
    let request = js_sys::JSON::parse(r#"{"command":"status"}"#)?;
    let reply = JsFuture::from(chrome::send_message(&request)).await?;
    let text = js_sys::JSON::stringify(&reply)?.as_string().unwrap_or_default();
    let reply: serde_json::Value = serde_json::from_str(&text).unwrap_or_default();
    let host = &reply["host"];
    let message = if host["connected"].as_bool() == Some(true) {
        format!("Host connected: trace-host {}", host["host_version"].as_str().unwrap_or("?"))
    } else if host["error"].is_null() {
        "Connecting to trace-host…".to_owned()
    } else {
        let error = host["error"].as_str().unwrap_or("unknown error").trim_end_matches('.');
        let mut text = format!("Host not connected: {error}.");
        if let Some(command) = host["install_command"].as_str() {
            text.push_str(&format!(" Install it with: {command}"));
        }
        text
    };
    set_text("status", &message);
    Ok(())
}

fn set_text(id: &str, text: &str) {
    if let Some(element) = web_sys::window().and_then(|w| w.document()).and_then(|d| d.get_element_by_id(id)) {
        element.set_text_content(Some(text));
    }
}
