//! The static files under `/static/`, embedded in the binary from `static/` and served with their types.
//!
//! The pictures are small PNGs and `shop.woff2` a valid WOFF2 font holding only a space and `.notdef`, so
//! that browsers download and accept it while every visible character falls back to the next family.

use axum::extract::Path;
use axum::http::header;
use axum::response::{IntoResponse, Response};

use super::html;

const CSS: &str = "text/css; charset=utf-8";
const JAVASCRIPT: &str = "text/javascript; charset=utf-8";
const PNG: &str = "image/png";
const WOFF2: &str = "font/woff2";

/// File name under `/static/`, content type, contents.
const ASSETS: &[(&str, &str, &[u8])] = &[
    ("shop.css", CSS, include_bytes!("static/shop.css")),
    ("shop.woff2", WOFF2, include_bytes!("static/shop.woff2")),
    ("background.png", PNG, include_bytes!("static/background.png")),
    ("logo.png", PNG, include_bytes!("static/logo.png")),
    ("blue-mug.png", PNG, include_bytes!("static/blue-mug.png")),
    ("red-mug.png", PNG, include_bytes!("static/red-mug.png")),
    ("teapot.png", PNG, include_bytes!("static/teapot.png")),
    ("app.js", JAVASCRIPT, include_bytes!("static/app.js")),
    ("tracker.js", JAVASCRIPT, include_bytes!("static/tracker.js")),
    ("widget.js", JAVASCRIPT, include_bytes!("static/widget.js")),
    ("strict.js", JAVASCRIPT, include_bytes!("static/strict.js")),
    ("strict-worker.js", JAVASCRIPT, include_bytes!("static/strict-worker.js")),
    ("clock.js", JAVASCRIPT, include_bytes!("static/clock.js")),
    ("forge.js", JAVASCRIPT, include_bytes!("static/forge.js")),
    ("chat.js", JAVASCRIPT, include_bytes!("static/chat.js")),
    ("chat-worker.js", JAVASCRIPT, include_bytes!("static/chat-worker.js")),
    ("ask.js", JAVASCRIPT, include_bytes!("static/ask.js")),
    ("vault.js", JAVASCRIPT, include_bytes!("static/vault.js")),
    ("sealed.js", JAVASCRIPT, include_bytes!("static/sealed.js")),
    ("notes.js", JAVASCRIPT, include_bytes!("static/notes.js")),
];

/// `GET /static/{file}`.
pub(super) async fn asset(Path(file): Path<String>) -> Response {
    match ASSETS.iter().find(|(name, _, _)| *name == file) {
        Some((_, content_type, contents)) => ([(header::CONTENT_TYPE, *content_type)], *contents).into_response(),
        None => html::not_found().await,
    }
}
