//! "Notes" (`/notes`): a small editor whose pages change under the person the ways real applications do,
//! for the tests of how a re-run judges each step on the page it settled to:
//! - the list loads through `GET /notes/api/list`, which the server answers after [`LIST_DELAY`], so the
//!   page first shows "Loading notes…" (a recording, made at the real server's pace, captures it; a
//!   replay, answered at once, never shows it);
//! - "Find" reveals a filter that rewrites the page's URL with `history.replaceState` as one types
//!   (`/notes?find=mug`);
//! - a new note's title saves itself as the person types (`POST /notes/api/draft`, once typing pauses),
//!   and the page then goes to the note's edit page (`/notes/<id>/edit`);
//! - saving the edit form posts it to a server that answers after [`SAVE_DELAY`], longer than a call's
//!   effect window, and redirects to the list (`/notes?saved=<id>`).
//!
//! Notes live in the site's state; the first, "Welcome", is there from the start, so ids are the same from
//! one run to the next.

use std::time::Duration;

use axum::extract::{Form, Path, Query, State};
use axum::http::{StatusCode, header};
use axum::response::{IntoResponse, Json, Response};
use serde::Deserialize;

use super::SiteState;
use super::html::{escape, respond};

/// How long the server takes to list the notes: the page shows its loading screen meanwhile.
pub const LIST_DELAY: Duration = Duration::from_secs(1);
/// How long the server takes to save the edit form: longer than a call's effect window
/// (`trace_analysis::trajectory::EFFECT_WINDOW_MS`), as a slow CMS's save is.
pub const SAVE_DELAY: Duration = Duration::from_secs(6);

/// One note.
#[derive(Clone)]
pub(super) struct Note {
    title: String,
    body: String,
}

/// The notes, numbered from 1 in the order they were made.
pub(super) struct Notes(Vec<Note>);

impl Default for Notes {
    fn default() -> Notes {
        Notes(vec![Note { title: "Welcome".into(), body: "Notes you make are listed here.".into() }])
    }
}

const SCRIPTS: &[&str] = &["/static/notes.js"];

#[derive(Deserialize)]
pub(super) struct ListQuery {
    saved: Option<usize>,
}

/// `GET /notes`: the list, which the script fills, and what was just saved.
pub(super) async fn list(State(state): State<SiteState>, Query(query): Query<ListQuery>) -> Response {
    let saved = query
        .saved
        .and_then(|id| state.notes().0.get(id.wrapping_sub(1)).cloned())
        .map(|note| format!("<p id=\"saved\">Saved “{}”.</p>\n", escape(&note.title)))
        .unwrap_or_default();
    let body = format!(
        "<h1>Notes</h1>\n{saved}<p><button id=\"find\" type=\"button\">Find</button> \
         <a id=\"new-note\" href=\"/notes/new\">New note</a></p>\n\
         <p id=\"finder\" hidden><input id=\"find-input\" aria-label=\"Find notes\"></p>\n\
         <ul id=\"notes\"><li>Loading notes…</li></ul>"
    );
    respond(StatusCode::OK, Some("Notes"), SCRIPTS, &body)
}

/// `GET /notes/api/list`: every note's id and title, after [`LIST_DELAY`].
pub(super) async fn list_json(State(state): State<SiteState>) -> Response {
    tokio::time::sleep(LIST_DELAY).await;
    let notes: Vec<serde_json::Value> = state
        .notes()
        .0
        .iter()
        .enumerate()
        .map(|(index, note)| serde_json::json!({"id": index + 1, "title": note.title}))
        .collect();
    Json(notes).into_response()
}

/// `GET /notes/new`: a title that saves itself.
pub(super) async fn new() -> Response {
    let body = "<h1>New note</h1>\n\
                <p><input id=\"title\" aria-label=\"Title\" autocomplete=\"off\"></p>\n\
                <p id=\"draft-status\">Your note saves itself as you type.</p>";
    respond(StatusCode::OK, Some("New note"), SCRIPTS, body)
}

#[derive(Deserialize)]
pub(super) struct Draft {
    title: String,
}

/// `POST /notes/api/draft`: makes a note of the title; answers its id.
pub(super) async fn draft(State(state): State<SiteState>, Json(draft): Json<Draft>) -> Response {
    if draft.title.trim().is_empty() {
        return (StatusCode::BAD_REQUEST, "a note needs a title").into_response();
    }
    let mut notes = state.notes();
    notes.0.push(Note { title: draft.title, body: String::new() });
    Json(serde_json::json!({"id": notes.0.len()})).into_response()
}

/// `GET /notes/{id}/edit`.
pub(super) async fn edit(State(state): State<SiteState>, Path(id): Path<usize>) -> Response {
    let Some(note) = state.notes().0.get(id.wrapping_sub(1)).cloned() else {
        return super::html::not_found().await;
    };
    let body = format!(
        "<h1>Edit note</h1>\n<form id=\"note-form\" method=\"post\" action=\"/notes/{id}\">\n\
         <p><input id=\"title\" name=\"title\" aria-label=\"Title\" value=\"{title}\"></p>\n\
         <p><textarea id=\"body\" name=\"body\" aria-label=\"Note\">{body}</textarea></p>\n\
         <p><button id=\"save\">Save</button></p>\n</form>",
        title = escape(&note.title),
        body = escape(&note.body),
    );
    respond(StatusCode::OK, Some("Edit note"), SCRIPTS, &body)
}

#[derive(Deserialize)]
pub(super) struct Edited {
    title: String,
    body: String,
}

/// `POST /notes/{id}`: saves the note after [`SAVE_DELAY`], then sends the browser to the list.
pub(super) async fn save(
    State(state): State<SiteState>,
    Path(id): Path<usize>,
    Form(edited): Form<Edited>,
) -> Response {
    tokio::time::sleep(SAVE_DELAY).await;
    let mut notes = state.notes();
    let Some(note) = notes.0.get_mut(id.wrapping_sub(1)) else {
        return (StatusCode::NOT_FOUND, "no such note").into_response();
    };
    *note = Note { title: edited.title, body: edited.body };
    (StatusCode::SEE_OTHER, [(header::LOCATION, format!("/notes?saved={id}"))]).into_response()
}
