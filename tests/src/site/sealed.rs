//! "Sealed note" (`/sealed`): a sign-in whose script compresses its JSON itself and sends it as
//! `application/octet-stream`, saying nothing of the compression (no `Content-Encoding`), as pages that
//! save bandwidth with `CompressionStream('gzip')` do. The password and a passphrase are in it. DevTools
//! gives the recorder such a body as text of one character per byte, which the redaction tests must read
//! back as the bytes it stands for. The server needs the content: it gunzips the body and answers only a
//! JSON sign-in of the demo user with both fields given, so that a replay must answer it as recorded.

use axum::http::StatusCode;
use axum::response::{IntoResponse, Response};

use super::DEMO_USER;
use super::html::respond;

/// What the demonstration types as the passphrase.
pub const SEALED_PASSPHRASE: &str = "correct-horse-battery-staple-77";

/// `GET /sealed`: the form.
pub(super) async fn page() -> Response {
    let body = r#"<h1>Sealed note</h1>
<p><label for="sealed-user">User</label> <input id="sealed-user"></p>
<p><label for="sealed-password">Password</label> <input id="sealed-password" type="password"></p>
<p><label for="sealed-passphrase">Passphrase</label> <input id="sealed-passphrase" type="password"></p>
<p><button id="sealed-send" type="button">Seal</button></p>
<p id="sealed-status"></p>"#;
    respond(StatusCode::OK, Some("Sealed note"), &["/static/sealed.js"], body)
}

/// `POST /sealed/send`: a gzipped JSON sign-in, whatever the content type says.
pub(super) async fn send(body: axum::body::Bytes) -> Response {
    use std::io::Read as _;
    let mut json = Vec::new();
    if flate2::read::GzDecoder::new(&body[..]).take(1 << 20).read_to_end(&mut json).is_err() {
        return (StatusCode::BAD_REQUEST, "not gzip").into_response();
    }
    let Ok(sign_in) = serde_json::from_slice::<serde_json::Value>(&json) else {
        return (StatusCode::BAD_REQUEST, "not JSON").into_response();
    };
    let given = |field: &str| sign_in.pointer(field).and_then(|value| value.as_str()).is_some_and(|v| !v.is_empty());
    if sign_in["user"] != DEMO_USER || !given("/password") || !given("/vault/passphrase") {
        return (StatusCode::FORBIDDEN, axum::Json(serde_json::json!({"error": "refused"}))).into_response();
    }
    axum::Json(serde_json::json!({"sealed_for": DEMO_USER})).into_response()
}
