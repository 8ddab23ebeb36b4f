//! The shop's support chat: a page whose conversation runs over a WebSocket (`/chat`, and the socket at
//! `/chat/socket`). The server greets on connecting and answers each message, so that a recording holds
//! frames both ways and a replay must play the server's side back without a server. Frames are JSON: the
//! page names its conversation with an id it makes itself (`Math.random()`), the server's answers name it
//! back, and the page shows only answers to its own conversation, as multiplexing chat clients do, so that
//! a replay must follow the page's id into the frames it plays. At `/chat/worker` the same page keeps its
//! connection in a dedicated worker, where replay must play the socket too.

use axum::extract::ws::{Message, WebSocket, WebSocketUpgrade};
use axum::http::StatusCode;
use axum::response::Response;

use super::html::respond;

/// What the server says first.
pub const GREETING: &str = "Hello! Ask us anything about our mugs.";

/// The server's answer to `message`.
pub fn answer(message: &str) -> String {
    if message.to_lowercase().contains("dishwasher") {
        "Yes, every mug is dishwasher safe.".to_owned()
    } else {
        format!("Thanks, we will look into: {message}")
    }
}

/// `GET /chat` and `GET /chat/worker`.
pub(super) async fn page() -> Response {
    let body = "<h1>Support chat</h1>\n<ul id=\"messages\"></ul>\n\
                <p><input id=\"chat-input\" aria-label=\"Message\"> <button id=\"chat-send\">Send</button></p>";
    respond(StatusCode::OK, Some("Support chat"), &["/static/chat.js"], body)
}

/// `GET /chat/socket`: the conversation.
pub(super) async fn socket(upgrade: WebSocketUpgrade) -> Response {
    upgrade.on_upgrade(converse)
}

async fn converse(mut socket: WebSocket) {
    let greeting = serde_json::json!({ "text": GREETING }).to_string();
    if socket.send(Message::Text(greeting.into())).await.is_err() {
        return;
    }
    while let Some(Ok(message)) = socket.recv().await {
        let said: serde_json::Value = match message {
            Message::Text(text) => serde_json::from_str(text.as_str()).unwrap_or_default(),
            Message::Close(_) => return,
            _ => continue,
        };
        let text = said["text"].as_str().unwrap_or_default();
        let reply = serde_json::json!({ "conversation": said["conversation"], "text": answer(text) }).to_string();
        if socket.send(Message::Text(reply.into())).await.is_err() {
            return;
        }
    }
}
