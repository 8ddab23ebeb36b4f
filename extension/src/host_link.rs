//! The service worker's connection to `trace-host`: opens the native messaging port, asks `hello`, keeps
//! what the person needs to know about it (connected, which version, or why not and how to fix it), and
//! passes the host's replies on to whoever asked to hear them ([`on_reply`]).
//!
//! Chrome starts the host when the port opens and stops it when the port closes; a closed port is opened
//! again on the next need. The extension's pages ask their questions ([`request`]) in messages of their own
//! instead, each answered by a host Chrome starts for it, so that a long upload never holds up a recording.

use std::cell::{Cell, RefCell};

use js_sys::Function;
use serde::Serialize;
use trace_manifest::wire::{Answer, ClientBody, ClientMessage, HostMessage, Request};
use wasm_bindgen::prelude::*;

use crate::chrome::{self, Port};

/// What the popup shows about the host.
#[derive(Debug, Clone, Default, Serialize)]
pub struct HostStatus {
    pub connected: bool,
    pub host_version: Option<String>,
    pub format_version: Option<u32>,
    /// Why the host is not connected, in Chrome's words or the host's.
    pub error: Option<String>,
    /// The command that fixes a missing host.
    pub install_command: Option<String>,
}

struct Link {
    port: Option<Port>,
    status: HostStatus,
    /// Listener closures must live as long as the port.
    _listeners: Vec<Closure<dyn FnMut(JsValue)>>,
}

thread_local! {
    /// Who hears the host's replies on the port: the recording, wired when the service worker starts.
    static ON_REPLY: Cell<Option<fn(HostMessage)>> = const { Cell::new(None) };
    static LINK: RefCell<Link> =
        RefCell::new(Link { port: None, status: HostStatus::default(), _listeners: Vec::new() });
}

/// The command that registers the host, shown when Chrome cannot find it.
pub const INSTALL_COMMAND: &str = "trace-host install";

/// Sets who hears the host's replies on the port (the recording; set before the port first opens).
pub fn on_reply(handler: fn(HostMessage)) {
    ON_REPLY.with(|on_reply| on_reply.set(Some(handler)));
}

/// Opens the port if it is not open, and greets the host.
pub fn ensure_connected() {
    if LINK.with(|link| link.borrow().port.is_some()) {
        return;
    }
    let port = chrome::connect_native(trace_manifest::HOST_NAME);
    let on_message = Closure::<dyn FnMut(JsValue)>::new(on_host_message);
    let on_disconnect = Closure::<dyn FnMut(JsValue)>::new(|_port: JsValue| on_port_closed());
    port.on_message().add_listener(on_message.as_ref().unchecked_ref::<Function>());
    port.on_disconnect().add_listener(on_disconnect.as_ref().unchecked_ref::<Function>());
    LINK.with(|link| {
        let mut link = link.borrow_mut();
        link.port = Some(port);
        link._listeners = vec![on_message, on_disconnect];
    });
    send_json(
        &serde_json::to_string(&ClientMessage { seq: 0, body: ClientBody::Hello { task_id: None } })
            .expect("serializes"),
    );
}

/// Sends one frame (already JSON) to the host; false if there is no open port.
pub fn send_json(json: &str) -> bool {
    let Ok(message) = js_sys::JSON::parse(json) else { return false };
    LINK.with(|link| match &link.borrow().port {
        Some(port) => port.post_message(&message).is_ok(),
        None => false,
    })
}

pub fn status() -> HostStatus {
    LINK.with(|link| link.borrow().status.clone())
}

fn on_host_message(message: JsValue) {
    let message = chrome::from_js(&message);
    let reply: HostMessage = match serde_json::from_value(message.clone()) {
        Ok(reply) => reply,
        Err(error) => {
            crate::log(&format!("trace-host sent something unexpected ({error}): {message}"));
            return;
        }
    };
    LINK.with(|link| {
        let status = &mut link.borrow_mut().status;
        match &reply {
            HostMessage::Hello { host_version, format_version, .. } => {
                *status = HostStatus {
                    connected: true,
                    host_version: Some(host_version.clone()),
                    format_version: Some(*format_version),
                    error: None,
                    install_command: None,
                };
            }
            HostMessage::Error { code, message, task_id: None, .. } => {
                status.error = Some(format!("{code:?}: {message}"));
            }
            _ => {}
        }
    });
    if let Some(handler) = ON_REPLY.with(Cell::get) {
        handler(reply);
    }
}

fn on_port_closed() {
    let error = chrome::last_error_message().unwrap_or_else(|| "the host exited".to_owned());
    LINK.with(|link| {
        let mut link = link.borrow_mut();
        link.port = None;
        let missing = error.contains("not found") || error.contains("forbidden");
        link.status = HostStatus {
            connected: false,
            host_version: None,
            format_version: None,
            error: Some(error),
            install_command: missing.then(|| INSTALL_COMMAND.to_owned()),
        };
        // The listeners stay until the next connection replaces them: this one is running now.
    });
}

/// Asks the host one question in a message of its own and returns its answer, or why there is none (the
/// host missing, or what it could not do), in words for the person.
pub async fn request(request: &Request) -> Result<Answer, String> {
    let message = chrome::to_js(&serde_json::to_value(request).map_err(|error| error.to_string())?);
    let reply = wasm_bindgen_futures::JsFuture::from(chrome::send_native_message(trace_manifest::HOST_NAME, &message))
        .await
        .map_err(|error| {
            let text = js_sys::Error::from(error).message().as_string().unwrap_or_default();
            match chrome::last_error_message().unwrap_or(text) {
                missing if missing.contains("not found") => {
                    format!("trace-host is not installed ({missing}); install it with: {INSTALL_COMMAND}")
                }
                other => format!("trace-host did not answer: {other}"),
            }
        })?;
    match serde_json::from_value::<HostMessage>(chrome::from_js(&reply)) {
        Ok(HostMessage::Answer(Answer::Failed { message })) => Err(message),
        Ok(HostMessage::Answer(answer)) => Ok(answer),
        Ok(HostMessage::Error { message, .. }) => Err(message),
        Ok(other) => Err(format!("trace-host answered something else: {other:?}")),
        Err(error) => Err(format!("trace-host's answer does not parse: {error}")),
    }
}
