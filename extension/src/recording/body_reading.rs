//! Reading the bodies of a recorded tab's exchanges out of Chrome: a response's body taken whole while it
//! is paused at its headers (`Fetch.requestPaused`), streamed when it is too large or endless
//! (`Network.streamResourceContent`), or fetched whole once its loading finished and its page has loaded
//! ([`LoadGate`]); a request's body that DevTools only announced; and a response the `Network` domain never
//! reported, recorded from its pause. What is read goes to the host in chunks; which chunks, and when, is
//! [`Bodies`]' decision, with no browser in it.

use base64::Engine as _;
use serde_json::{Value, json};
use trace_manifest::event::BodyPart;
use trace_manifest::wire::ClientBody;

use super::{ACTIVE, active_task_id, send, send_events};
use crate::bodies::{Bodies, Chunk, ExchangeKey};
use crate::chrome;
use crate::debugger::{Target, command};
use crate::load_gate::LoadGate;
use crate::network::NetworkTranslator;

/// Runs `update` on the recording's load gate; `None` when no task is being recorded.
pub(super) fn with_gate<T>(update: impl FnOnce(&mut LoadGate<(Target, ExchangeKey)>) -> T) -> Option<T> {
    ACTIVE.with(|a| a.borrow_mut().as_mut().map(|recording| update(&mut recording.gate)))
}

/// A tab that can no longer be read (closed, or detached) while its page loaded: its exchanges are kept,
/// and the bodies its load held back are lost, as the log says.
pub(super) fn unread_bodies_lost(tab_id: i64, lost: usize) {
    if lost > 0 {
        crate::log(&format!("tab {tab_id} went away while its page loaded: {lost} bodies not read"));
    }
}

/// Reads bodies a load held back, or one that need not wait.
pub(super) fn read_bodies(bodies: Vec<(Target, ExchangeKey)>) {
    for (target, key) in bodies {
        wasm_bindgen_futures::spawn_local(send_body(target, key));
    }
}

/// Switches on streaming of a response's body. Where Chrome refuses (some resource types, or the body
/// is already complete), the body is fetched whole when loading finishes.
pub(super) async fn start_body_stream(target: Target, key: ExchangeKey) {
    if with_bodies(|bodies| bodies.stream_requested(key.clone())).is_none() {
        return;
    }
    match command(&target, "Network.streamResourceContent", json!({"requestId": key.1})).await {
        Ok(result) => {
            let buffered = result["bufferedData"].as_str().unwrap_or_default().to_owned();
            send_chunks(with_bodies(|bodies| bodies.stream_started(&key, buffered)).unwrap_or_default());
        }
        Err(_) => {
            if with_bodies(|bodies| bodies.stream_refused(&key)) == Some(true) {
                send_body(target, key).await;
            }
        }
    }
}

/// Runs `update` on the recording's bodies; `None` when no task is being recorded.
pub(super) fn with_bodies<T>(update: impl FnOnce(&mut Bodies) -> T) -> Option<T> {
    ACTIVE.with(|a| a.borrow_mut().as_mut().map(|recording| update(&mut recording.bodies)))
}

/// Sends response body chunks to the host, counting their bytes for the popup.
pub(super) fn send_chunks(chunks: impl IntoIterator<Item = Chunk>) {
    send_chunks_of(BodyPart::Response, chunks);
}

/// Sends body chunks of `part` to the host, counting their bytes for the popup.
fn send_chunks_of(part: BodyPart, chunks: impl IntoIterator<Item = Chunk>) {
    let Some(task_id) = active_task_id() else { return };
    for chunk in chunks {
        ACTIVE.with(|a| a.borrow_mut().as_mut().map(|r| r.progress.bytes += chunk.bytes));
        send(ClientBody::BodyChunk {
            task_id: task_id.clone(),
            body_id: chunk.body_id,
            request_id: chunk.request_id,
            part,
            index: chunk.index,
            data: chunk.data,
            last: chunk.last,
        });
    }
}

/// Bodies up to this size are taken whole; larger ones are streamed.
pub(super) const TAKE_WHOLE_LIMIT: u64 = 16 << 20;

/// What Chrome may keep of a target's response bodies until the recorder reads them.
pub(super) const BODY_BUFFER_BYTES: u64 = 256 << 20;

/// A request paused by `Fetch`, at its start or at its response's headers.
///
/// At its start, a request the Network domain has reported (it has a `networkId`) goes on; one it has not is
/// a request sent during unload, and is paused again at its response to be recorded from there.
pub(super) async fn on_request_paused(target: Target, params: Value) {
    let at_response = params.get("responseStatusCode").is_some() || params.get("responseErrorReason").is_some();
    if at_response {
        return take_paused_body(target, params).await;
    }
    let fetch_id = params["requestId"].as_str().unwrap_or_default();
    // A reported request's response is paused only where the patterns say (a `fetch` response, whose body
    // may be large); an unreported one's always.
    let go_on = match params.get("networkId") {
        Some(_) => json!({"requestId": fetch_id}),
        None => json!({"requestId": fetch_id, "interceptResponse": true}),
    };
    if let Err(error) = command(&target, "Fetch.continueRequest", go_on).await {
        crate::log(&format!("a paused request of tab {} could not go on: {error}", target.tab_id));
    }
}

/// A response paused at its headers: takes its body unless it is a redirect, has
/// none, or is too large or endless (then it is streamed), and lets it go on. Always lets it go on.
async fn take_paused_body(target: Target, params: Value) {
    let fetch_id = params["requestId"].as_str().unwrap_or_default().to_owned();
    let network_id = params["networkId"].as_str().map(str::to_owned);
    let status = params["responseStatusCode"].as_u64().unwrap_or(0);
    let header = |name: &str| {
        params["responseHeaders"].as_array().into_iter().flatten().find_map(|h| {
            h["name"].as_str().filter(|n| n.eq_ignore_ascii_case(name))?;
            h["value"].as_str()
        })
    };
    let length = header("content-length").and_then(|value| value.trim().parse::<u64>().ok());
    // An event stream may never end: taking it whole would hold its page until it did.
    let endless =
        header("content-type").is_some_and(|value| value.trim().to_ascii_lowercase().starts_with("text/event-stream"));
    let Some(network_id) = network_id else {
        return record_unreported_exchange(target, params, fetch_id).await;
    };
    if has_body(status) {
        let key = (target.tab_id, network_id);
        let takes_bodies = ACTIVE.with(|a| a.borrow().as_ref().is_some_and(|r| r.pause_takes_bodies.contains(&target)));
        if endless || length.is_some_and(|n| n > TAKE_WHOLE_LIMIT) {
            with_bodies(|bodies| bodies.mark_large(key.clone()));
            // Chrome keeps no copy of a body this large: its stream must start before its first byte flows.
            if !takes_bodies {
                start_body_stream(target.clone(), key).await;
            }
        } else if takes_bodies
            && let Ok(body) = command(&target, "Fetch.getResponseBody", json!({"requestId": fetch_id})).await
        {
            let bytes = body_bytes(&body);
            with_bodies(|bodies| bodies.captured(key, bytes));
        }
    }
    let_go_on(&target, &fetch_id).await;
}

/// A paused response the `Network` domain never reported (a request sent during unload; see
/// [`crate::network`]): recorded from the pause, with its body, then let go on.
async fn record_unreported_exchange(target: Target, params: Value, fetch_id: String) {
    let tab_id = target.tab_id;
    let translated = ACTIVE.with(|a| {
        let active = a.borrow();
        let translator = active.as_ref()?.translators.get(&tab_id);
        match translator {
            Some(translator) => translator.unreported_exchange(&params, Some(tab_id)),
            None => NetworkTranslator::new().unreported_exchange(&params, Some(tab_id)),
        }
    });
    let status = params["responseStatusCode"].as_u64().unwrap_or(0);
    let body = if has_body(status) {
        command(&target, "Fetch.getResponseBody", json!({"requestId": fetch_id})).await.ok()
    } else {
        None
    };
    let_go_on(&target, &fetch_id).await;
    let Some((request_id, events)) = translated else { return };
    send_events(events);
    if let Some(body) = body {
        send_chunks(with_bodies(|bodies| bodies.whole(&(tab_id, request_id), &body_bytes(&body))).unwrap_or_default());
    }
}

/// Lets a paused response go on to the page.
async fn let_go_on(target: &Target, fetch_id: &str) {
    if command(target, "Fetch.continueResponse", json!({"requestId": fetch_id})).await.is_err() {
        let _ = command(target, "Fetch.continueRequest", json!({"requestId": fetch_id})).await;
    }
}

/// Whether a response with this status has a body to take: not a redirect, a 204 or a 304.
fn has_body(status: u64) -> bool {
    !(300..400).contains(&status) && !matches!(status, 0 | 204 | 304)
}

fn body_bytes(body: &Value) -> Vec<u8> {
    let text = body["body"].as_str().unwrap_or_default();
    if body["base64Encoded"].as_bool() == Some(true) {
        base64::engine::general_purpose::STANDARD.decode(text).unwrap_or_default()
    } else {
        text.as_bytes().to_vec()
    }
}

/// Fetches a finished response's body whole and sends it in chunks (when it could not be streamed).
pub(super) async fn send_body(target: Target, key: ExchangeKey) {
    // Fails for responses without a body (a redirect, a 204) and for resources Chrome already evicted; on a
    // loaded machine it also fails now and then for a body that is there a moment later, so it is asked
    // for again, from the tab too when the exchange was reported by one of its children.
    let mut last_error = String::new();
    for (attempt, delay_ms) in [0.0, 100.0, 400.0].into_iter().enumerate() {
        chrome::sleep(delay_ms).await;
        let ask = if attempt == 2 { Target::tab(target.tab_id) } else { target.clone() };
        match command(&ask, "Network.getResponseBody", json!({"requestId": key.1})).await {
            Ok(body) => {
                return send_chunks(with_bodies(|bodies| bodies.whole(&key, &body_bytes(&body))).unwrap_or_default());
            }
            Err(error) => last_error = error,
        }
    }
    crate::log(&format!("no body for request {} of tab {}: {last_error}", key.1, key.0));
}

/// Asks for a request's body that its event left out (a `fetch` given a `Request` object sends its body
/// as a stream, which DevTools only announces), at once, while Chrome still holds it, and sends it as the
/// request's body: a save that replay cannot match without it.
pub(super) async fn send_request_body(target: Target, key: ExchangeKey) {
    match command(&target, "Network.getRequestPostData", json!({"requestId": key.1})).await {
        Ok(answer) => {
            let text = answer["postData"].as_str().unwrap_or_default();
            let bytes = if answer["base64Encoded"].as_bool() == Some(true) {
                base64::engine::general_purpose::STANDARD.decode(text).unwrap_or_default()
            } else {
                text.as_bytes().to_vec()
            };
            send_chunks_of(BodyPart::Request, with_bodies(|bodies| bodies.whole(&key, &bytes)).unwrap_or_default());
        }
        Err(error) => crate::log(&format!("no body for request {} of tab {}: {error}", key.1, key.0)),
    }
}
