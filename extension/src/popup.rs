//! The task UI, `popup.html` (also usable as the side panel): the host's state (and how to install it when
//! it is missing), a campaign's tasks ([`crate::campaign`]), the task form, and while recording, live
//! counts with Stop and Discard. The page only asks; the service worker records.

use std::cell::RefCell;

use serde_json::{Value, json};
use wasm_bindgen::prelude::*;
use wasm_bindgen_futures::JsFuture;
use web_sys::{Document, HtmlElement, HtmlInputElement, HtmlSelectElement, HtmlTextAreaElement};

use crate::chrome::{self, from_js, to_js};

/// How often the popup asks the service worker for its state.
const REFRESH_MS: i32 = 500;

thread_local! {
    /// The source of the task being recorded, as the service worker last said.
    static RECORDING_SOURCE: RefCell<Option<String>> = const { RefCell::new(None) };
}

/// Called by the popup bootstrap once the module is loaded.
#[wasm_bindgen]
pub fn popup_main() {
    let Some(document) = web_sys::window().and_then(|w| w.document()) else { return };
    on_click(&document, "start", || command(json!({"command": "start"}), true));
    on_click(&document, "record-current", || command(json!({"command": "record_current"}), true));
    on_click(&document, "stop", || wasm_bindgen_futures::spawn_local(stop()));
    on_click(&document, "discard", || command(json!({"command": "discard"}), false));
    crate::campaign::init(&document);
    wasm_bindgen_futures::spawn_local(async {
        loop {
            ask(json!({"command": "status"})).await;
            sleep(REFRESH_MS).await;
        }
    });
}

fn on_click(document: &Document, id: &str, action: fn()) {
    let Some(element) = document.get_element_by_id(id) else { return };
    let handler = Closure::<dyn FnMut(web_sys::Event)>::new(move |event: web_sys::Event| {
        event.prevent_default(); // the Start button submits the form: stay on the page
        action();
    });
    let _ = element.add_event_listener_with_callback("click", handler.as_ref().unchecked_ref());
    handler.forget(); // lives as long as the page
}

/// Sends a command, with the task form's fields when it starts a task.
fn command(mut message: Value, with_form: bool) {
    if with_form {
        for (key, id) in
            [("source", "source"), ("task_type", "task-type"), ("description", "description"), ("website", "website")]
        {
            message[key] = value(id).into();
        }
    }
    wasm_bindgen_futures::spawn_local(async move {
        ask(message).await;
    });
}

/// Starts a campaign's task, with its id as the source.
pub fn start_task(source: &str, task_type: &str, description: &str, website: &str) {
    let message = json!({
        "command": "start", "source": source, "task_type": task_type, "description": description, "website": website
    });
    wasm_bindgen_futures::spawn_local(async move {
        ask(message).await;
    });
}

/// Stops the recording; a campaign task stopped well counts as recorded.
async fn stop() {
    let source = RECORDING_SOURCE.with(|source| source.borrow().clone());
    let reply = ask(json!({"command": "stop", "answer": value("answer")})).await;
    if let (Some(reply), Some(source)) = (reply, source)
        && reply["recording"].is_null()
        && reply["error"].is_null()
    {
        crate::campaign::mark_done(&source);
    }
}

/// Sends `message` to the service worker and shows its reply, which it returns.
async fn ask(message: Value) -> Option<Value> {
    match JsFuture::from(chrome::send_message(&to_js(&message))).await {
        Ok(reply) => {
            let reply = from_js(&reply);
            render(&reply);
            Some(reply)
        }
        Err(error) => {
            set_text("status", &format!("cannot reach the recorder: {error:?}"));
            None
        }
    }
}

fn render(reply: &Value) {
    let host = &reply["host"];
    let mut status = if host["connected"].as_bool() == Some(true) {
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
    let recording = &reply["recording"];
    RECORDING_SOURCE.with(|source| *source.borrow_mut() = recording["source"].as_str().map(str::to_owned));
    if let Some(task_id) = recording["task_id"].as_str() {
        status = format!("Recording {task_id}. {status}");
        let elapsed = (js_sys::Date::now() - recording["started_at"].as_f64().unwrap_or(0.0)) / 1000.0;
        let mut counts = format!(
            "{} steps, {} requests, {} KB, {:.0} s",
            recording["steps"],
            recording["requests"],
            recording["bytes"].as_u64().unwrap_or(0) / 1024,
            elapsed.max(0.0)
        );
        if recording["refused"].as_u64().unwrap_or(0) > 0 {
            counts.push_str(&format!(" — {} messages lost while the host was away", recording["refused"]));
        }
        set_text("counts", &counts);
    }
    if let Some(error) = reply["error"].as_str() {
        status = format!("{error}. {status}");
    }
    set_text("status", &status);
    set_hidden("recording", recording.is_null());
    set_hidden("task-form", !recording.is_null());
}

pub(crate) fn element(id: &str) -> Option<web_sys::Element> {
    web_sys::window()?.document()?.get_element_by_id(id)
}

pub(crate) fn value(id: &str) -> String {
    let Some(element) = element(id) else { return String::new() };
    if let Some(input) = element.dyn_ref::<HtmlInputElement>() {
        input.value()
    } else if let Some(select) = element.dyn_ref::<HtmlSelectElement>() {
        select.value()
    } else if let Some(text) = element.dyn_ref::<HtmlTextAreaElement>() {
        text.value()
    } else {
        String::new()
    }
}

pub(crate) fn set_text(id: &str, text: &str) {
    if let Some(element) = element(id) {
        element.set_text_content(Some(text));
    }
}

pub(crate) fn set_hidden(id: &str, hidden: bool) {
    if let Some(element) = element(id).and_then(|e| e.dyn_into::<HtmlElement>().ok()) {
        element.set_hidden(hidden);
    }
}

async fn sleep(ms: i32) {
    let promise = js_sys::Promise::new(&mut |resolve, _| {
        if let Some(window) = web_sys::window() {
            let _ = window.set_timeout_with_callback_and_timeout_and_arguments_0(&resolve, ms);
        }
    });
    let _ = JsFuture::from(promise).await;
}
