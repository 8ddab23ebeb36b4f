//! The popup's card of the recording stopped last: once the person presses Stop, what was saved. While the
//! host is still taking the last messages, the recorder's own counts and how many messages wait for its
//! acknowledgement; once the host has finalized the bundle (every message committed), what the host itself
//! stored: the task id, its duration, steps, requests and size, and where. "View" opens the host's viewer
//! on it, and the command that exports it is shown to copy. The host's account is kept in the page's
//! storage, so that the popup shows it again after the service worker (which holds only what is in
//! flight) has gone.

use std::cell::RefCell;

use serde_json::{Value, json};
use trace_manifest::task::TaskId;
use trace_manifest::wire::{Answer, RecordedSummary, Request};
use wasm_bindgen_futures::{JsFuture, spawn_local};

use crate::chrome::{self, to_js};
use crate::dom::{set_hidden, set_text};
use crate::host_link::request;

/// Where the host's account of the last recording is kept (the extension's local storage).
const KEPT_KEY: &str = "trace.last_recording";

thread_local! {
    /// The task whose host account has been asked for, so that it is asked once.
    static ASKED: RefCell<Option<String>> = const { RefCell::new(None) };
    /// The task the card shows, which "View" opens.
    static SHOWN: RefCell<Option<String>> = const { RefCell::new(None) };
}

/// Wires the card's button (called once by the popup).
pub fn init(document: &web_sys::Document) {
    if let Some(button) = document.get_element_by_id("last-view") {
        crate::dom::on_click(&button, || spawn_local(view()));
    }
}

/// Shows the card for `last` (the service worker's account of the recording stopped last, or null), hidden
/// while a recording runs.
pub fn render(last: &Value, recording: bool) {
    let kept = kept();
    let stopped = last["task_id"].as_str();
    let summary = match (&kept, stopped) {
        (Some(kept), Some(task_id)) if kept.task_id.as_str() == task_id => Some(kept.clone()),
        (Some(kept), None) => Some(kept.clone()),
        _ => None,
    };
    let Some(task_id) = summary.as_ref().map(|s| s.task_id.to_string()).or(stopped.map(str::to_owned)) else {
        return set_hidden("last-recording", true);
    };
    set_hidden("last-recording", recording);
    SHOWN.with(|shown| *shown.borrow_mut() = Some(task_id.clone()));
    set_text("last-id", &task_id);
    set_text("last-export", &format!("trace-host export {task_id} --out {task_id}.zip"));
    match &summary {
        Some(summary) => {
            set_text(
                "last-counts",
                &counts(summary.duration_seconds, summary.steps as u64, summary.requests as u64, summary.bytes),
            );
            set_text("last-saved", &format!("Saved: trace-host has all of it, in {}", summary.bundle));
        }
        None => {
            let seconds =
                (last["stopped_at"].as_f64().unwrap_or(0.0) - last["started_at"].as_f64().unwrap_or(0.0)) / 1000.0;
            let number = |key: &str| last[key].as_u64().unwrap_or(0);
            set_text("last-counts", &counts(seconds, number("steps"), number("requests"), number("bytes")));
            let saved = if let Some(error) = last["error"].as_str() {
                format!("Not saved in full: {}", error.trim_end_matches('.'))
            } else if last["bundle"].is_string() {
                "Saved; asking trace-host what it holds…".to_owned()
            } else {
                match number("unacknowledged") {
                    0 => "Saving: trace-host is writing the bundle…".to_owned(),
                    waiting => format!("Saving: {waiting} messages wait for trace-host to confirm them…"),
                }
            };
            set_text("last-saved", &saved);
        }
    }
    crate::dom::set_disabled("last-view", summary.is_none());
    if summary.is_none() && last["bundle"].is_string() {
        ask_once(&task_id);
    }
}

/// Asks the host what it stored of `task_id`, once, and keeps its answer.
fn ask_once(task_id: &str) {
    let first = ASKED.with(|asked| asked.borrow_mut().replace(task_id.to_owned()).as_deref() != Some(task_id));
    let Ok(task_id) = TaskId::try_from(task_id.to_owned()) else { return };
    if !first {
        return;
    }
    spawn_local(async move {
        match request(&Request::Recorded { task_id }).await {
            Ok(Answer::Recorded(summary)) => keep(&summary),
            Ok(other) => set_text("last-message", &format!("trace-host answered something else: {other:?}")),
            Err(message) => {
                // Asked again at the next refresh.
                ASKED.with(|asked| *asked.borrow_mut() = None);
                set_text("last-message", &message);
            }
        }
    });
}

/// Opens the host's viewer on the recording shown.
async fn view() {
    let Some(task_id) = SHOWN.with(|shown| shown.borrow().clone()).and_then(|id| TaskId::try_from(id).ok()) else {
        return;
    };
    set_text("last-message", "Starting the viewer…");
    match request(&Request::View { task_id }).await {
        Ok(Answer::Viewer { url }) => {
            set_text("last-message", "");
            let _ = JsFuture::from(chrome::tabs_create(&to_js(&json!({"url": url, "active": true})))).await;
        }
        Ok(other) => set_text("last-message", &format!("trace-host answered something else: {other:?}")),
        Err(message) => set_text("last-message", &message),
    }
}

/// "42 s · 9 steps · 31 requests · 1.2 MB"
fn counts(seconds: f64, steps: u64, requests: u64, bytes: u64) -> String {
    format!("{:.0} s · {steps} steps · {requests} requests · {}", seconds.max(0.0), size_in_words(bytes))
}

fn size_in_words(bytes: u64) -> String {
    match bytes {
        0..1024 => format!("{bytes} B"),
        1024..1_048_576 => format!("{} KB", bytes / 1024),
        _ => format!("{:.1} MB", bytes as f64 / 1_048_576.0),
    }
}

fn storage() -> Option<web_sys::Storage> {
    web_sys::window()?.local_storage().ok()?
}

fn kept() -> Option<RecordedSummary> {
    serde_json::from_str(&storage()?.get_item(KEPT_KEY).ok()??).ok()
}

fn keep(summary: &RecordedSummary) {
    if let (Some(storage), Ok(text)) = (storage(), serde_json::to_string(summary)) {
        let _ = storage.set_item(KEPT_KEY, &text);
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn sizes_are_said_in_the_unit_that_reads_best() {
        assert_eq!(size_in_words(512), "512 B");
        assert_eq!(size_in_words(2048), "2 KB");
        assert_eq!(size_in_words(3 * 1_048_576 / 2), "1.5 MB");
        assert_eq!(counts(41.6, 9, 31, 2048), "42 s · 9 steps · 31 requests · 2 KB");
    }
}
