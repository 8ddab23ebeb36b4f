//! "Ask an expert": a page whose answer streams back as server-sent events keyed by a session id the page
//! makes itself, as Gradio-style apps do (`/ask`). The page picks a random id, posts the question with it
//! (`POST /ask/join`), then listens on `GET /ask/stream?session=<id>`; the server streams progress and the
//! answer, each event naming the session, and a last `done` event, after which the page closes the
//! stream. A stream for a session never joined is refused (404), and the page then says the connection
//! was lost, so that a replay that does not follow the page's own id shows no answer.

use std::convert::Infallible;
use std::time::Duration;

use axum::Json;
use axum::extract::{Query, State};
use axum::http::StatusCode;
use axum::response::sse::{Event, Sse};
use axum::response::{IntoResponse, Response};
use futures::{Stream, StreamExt, stream};
use serde::Deserialize;

use super::SiteState;
use super::html::respond;

/// The expert's answer to `question`.
pub fn answer(question: &str) -> String {
    if question.to_lowercase().contains("microwave") {
        "Yes: every mug is microwave safe, handle included.".to_owned()
    } else {
        format!("An expert will write back about: {question}")
    }
}

/// How long the expert "thinks" between events: long enough that the answer arrives after the question
/// was sent, as a real stream's would.
const THINKING: Duration = Duration::from_millis(150);

/// `GET /ask`.
pub(super) async fn page() -> Response {
    let body = "<h1>Ask an expert</h1>\n\
                <p><input id=\"question\" aria-label=\"Question\"> <button id=\"ask\">Ask</button></p>\n\
                <p id=\"status\"></p>\n<p id=\"answer\"></p>";
    respond(StatusCode::OK, Some("Ask an expert"), &["/static/ask.js"], body)
}

#[derive(Deserialize)]
pub(super) struct Join {
    session: String,
    question: String,
}

/// `POST /ask/join`: queues a question under the page's session id.
pub(super) async fn join(State(state): State<SiteState>, Json(join): Json<Join>) -> Response {
    if join.session.is_empty() || join.question.trim().is_empty() {
        return (StatusCode::BAD_REQUEST, "a session and a question are needed").into_response();
    }
    super::lock(&state.shared.questions).insert(join.session, join.question);
    Json(serde_json::json!({"queued": true})).into_response()
}

#[derive(Deserialize)]
pub(super) struct StreamQuery {
    session: String,
}

/// `GET /ask/stream?session=<id>`: the answer to the session's question, as events.
pub(super) async fn stream(State(state): State<SiteState>, Query(query): Query<StreamQuery>) -> Response {
    let Some(question) = super::lock(&state.shared.questions).remove(&query.session) else {
        return (StatusCode::NOT_FOUND, "no such session").into_response();
    };
    Sse::new(events(query.session, question)).into_response()
}

fn events(session: String, question: String) -> impl Stream<Item = Result<Event, Infallible>> {
    let data = |kind: &str, text: &str| serde_json::json!({"session": session, "kind": kind, "text": text});
    let steps = [
        data("progress", "Finding an expert…"),
        data("progress", "The expert is writing…"),
        data("answer", &answer(&question)),
        data("done", ""),
    ];
    stream::iter(steps).then(|step| async move {
        tokio::time::sleep(THINKING).await;
        Ok(Event::default().data(step.to_string()))
    })
}
