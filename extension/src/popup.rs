//! The task UI, `popup.html` (also usable as the side panel): the host's state (and how to install it when
//! it is missing), a campaign's tasks ([`crate::campaign`]), the task form, and while recording, live
//! counts with Stop and Discard. The page only asks; the service worker records. A campaign's task, once
//! stopped, opens its review ([`crate::review`]), where it is submitted.

use std::cell::RefCell;

use serde_json::{Value, json};
use wasm_bindgen::prelude::*;
use wasm_bindgen_futures::JsFuture;
use web_sys::Document;

use crate::chrome::{self, from_js, to_js};
use crate::dom::{set_hidden, set_text, value};

/// How often the popup asks the service worker for its state.
const REFRESH_MS: f64 = 500.0;

thread_local! {
    /// The task being recorded and its source, as the service worker last said.
    static RECORDING: RefCell<Option<(String, String)>> = const { RefCell::new(None) };
}

/// Renders the popup (called by [`crate::page_main`]).
pub fn main() {
    let Some(document) = crate::dom::document() else { return };
    on_click(&document, "start", || command(json!({"command": "start"}), true));
    on_click(&document, "record-current", || command(json!({"command": "record_current"}), true));
    on_click(&document, "stop", || wasm_bindgen_futures::spawn_local(stop()));
    on_click(&document, "discard", || command(json!({"command": "discard"}), false));
    crate::campaign::init(&document);
    crate::last_recording::init(&document);
    // The campaign's Record buttons, drawn anew whenever its list changes, start their task from here.
    if let Some(list) = document.get_element_by_id("campaign-tasks") {
        let handler = Closure::<dyn FnMut(web_sys::Event)>::new(|click: web_sys::Event| {
            if let Some(task) = crate::campaign::task_to_record(&click) {
                start_task(&task.id, task.task_type.as_str(), &task.description, &task.website);
            }
        });
        let _ = list.add_event_listener_with_callback("click", handler.as_ref().unchecked_ref());
        handler.forget(); // lives as long as the page
    }
    wasm_bindgen_futures::spawn_local(async {
        loop {
            ask(json!({"command": "status"})).await;
            crate::chrome::sleep(REFRESH_MS).await;
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
fn start_task(source: &str, task_type: &str, description: &str, website: &str) {
    let message = json!({
        "command": "start", "source": source, "task_type": task_type, "description": description, "website": website
    });
    wasm_bindgen_futures::spawn_local(async move {
        ask(message).await;
    });
}

/// Stops the recording; a campaign task stopped well counts as recorded, and its review opens.
async fn stop() {
    let recording = RECORDING.with(|recording| recording.borrow().clone());
    let reply = ask(json!({"command": "stop", "answer": value("answer")})).await;
    if let (Some(reply), Some((task_id, source))) = (reply, recording)
        && reply["recording"].is_null()
        && reply["error"].is_null()
        && crate::campaign::mark_done(&source)
    {
        let url = format!("review.html?task={}", js_sys::encode_uri_component(&task_id));
        let _ = JsFuture::from(chrome::tabs_create(&to_js(&json!({"url": url, "active": true})))).await;
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
    RECORDING.with(|kept| {
        *kept.borrow_mut() = recording["task_id"]
            .as_str()
            .map(|task_id| (task_id.to_owned(), recording["source"].as_str().unwrap_or_default().to_owned()))
    });
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
    crate::last_recording::render(&reply["last"], !recording.is_null());
}
