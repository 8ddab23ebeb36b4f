//! "Partner vault" (`/vault`): a sign-in that carries its secrets the ways real pages do and no redaction
//! rule of names alone would catch, for the redaction tests to record through the extension. The page sets
//! a 7-character session cookie with an innocent name (`v`), holds a CSRF token in a hidden input named
//! `form_key` and an API key and API token in data attributes, and asks for a passphrase in a *text* field
//! labelled "Passphrase". Its script (`static/vault.js`) then sends, as jQuery-era code does:
//! - `POST /vault/connect` with `text/plain` JSON: `user:passphrase` in base64, `form_key`, `api_token`;
//! - `GET /vault/check?key=<API key>&p=<passphrase, encodeURIComponent>`.
//!
//! The server checks every one of them (the cookie, the form key and the API key it issued, the
//! passphrase), so that a replay must carry the redacted stand-ins consistently to reach "Vault open".

use std::collections::HashSet;

use axum::extract::{Query, State};
use axum::http::{HeaderMap, HeaderValue, StatusCode, header};
use axum::response::{IntoResponse, Response};
use base64::Engine as _;
use serde::Deserialize;

use super::account::cookie;
use super::html::{escape, respond};
use super::{DEMO_USER, SiteState};

/// What the demonstration types into the passphrase field: a space, `@`, `!` and parentheses, which
/// `encodeURIComponent`, form encoding and base64 each write differently.
pub const VAULT_PASSPHRASE: &str = "open sesame@vault!(7)";
/// The session cookie's name, which says nothing about what it holds.
const COOKIE: &str = "v";

/// The values the vault handed out, which later requests must carry back.
#[derive(Default)]
pub(super) struct Vault {
    cookies: HashSet<String>,
    form_keys: HashSet<String>,
    api_keys: HashSet<String>,
    api_tokens: HashSet<String>,
}

impl Vault {
    pub(super) fn issued(&self) -> Vec<String> {
        let all = [&self.cookies, &self.form_keys, &self.api_keys, &self.api_tokens];
        all.into_iter().flatten().cloned().collect()
    }
}

/// `length` random letters and digits.
fn random_text(length: usize) -> String {
    const ALPHABET: &[u8] = b"ABCDEFGHIJKLMNOPQRSTUVWXYZabcdefghijklmnopqrstuvwxyz0123456789";
    let mut bytes = vec![0u8; length];
    getrandom::fill(&mut bytes).expect("the operating system's random source failed");
    bytes.iter().map(|byte| ALPHABET[usize::from(*byte) % ALPHABET.len()] as char).collect()
}

/// `GET /vault`: the form, with a new cookie, form key, API key and API token.
pub(super) async fn page(State(state): State<SiteState>) -> Response {
    let (session, form_key, api_key, api_token) = (random_text(7), random_text(32), random_text(32), random_text(40));
    {
        let mut vault = state.vault();
        vault.cookies.insert(session.clone());
        vault.form_keys.insert(form_key.clone());
        vault.api_keys.insert(api_key.clone());
        vault.api_tokens.insert(api_token.clone());
    }
    let body = format!(
        r#"<h1>Partner vault</h1>
<form id="vault-form" data-api-key="{api_key}" data-api-token="{api_token}">
<input type="hidden" name="form_key" value="{form_key}">
<p><label for="vault-user">User</label> <input id="vault-user" name="user"></p>
<p><label for="vault-passphrase">Passphrase</label> <input id="vault-passphrase" name="passphrase" type="text"></p>
<p><button id="vault-open" type="button">Open the vault</button></p>
</form>
<p id="vault-status"></p>"#,
        api_key = escape(&api_key),
        api_token = escape(&api_token),
        form_key = escape(&form_key),
    );
    let mut response = respond(StatusCode::OK, Some("Partner vault"), &["/static/vault.js"], &body);
    if let Ok(value) = HeaderValue::from_str(&format!("{COOKIE}={session}; Path=/vault; SameSite=Lax")) {
        response.headers_mut().append(header::SET_COOKIE, value);
    }
    response
}

#[derive(Deserialize)]
pub(super) struct Connect {
    auth: String,
    form_key: String,
    api_token: String,
}

/// `POST /vault/connect`: the user and passphrase (base64 of `user:passphrase`), the form key and the API
/// token, in JSON sent as `text/plain`, with the session cookie.
pub(super) async fn connect(State(state): State<SiteState>, headers: HeaderMap, body: String) -> Response {
    let Ok(connect) = serde_json::from_str::<Connect>(&body) else {
        return (StatusCode::BAD_REQUEST, "not JSON").into_response();
    };
    let expected = base64::engine::general_purpose::STANDARD.encode(format!("{DEMO_USER}:{VAULT_PASSPHRASE}"));
    let vault = state.vault();
    let known = cookie(&headers, COOKIE).is_some_and(|session| vault.cookies.contains(session))
        && vault.form_keys.contains(&connect.form_key)
        && vault.api_tokens.contains(&connect.api_token);
    if !known {
        return (StatusCode::FORBIDDEN, axum::Json(serde_json::json!({"error": "unknown session"}))).into_response();
    }
    if connect.auth != expected {
        return (StatusCode::UNAUTHORIZED, axum::Json(serde_json::json!({"error": "wrong passphrase"})))
            .into_response();
    }
    axum::Json(serde_json::json!({"user": DEMO_USER})).into_response()
}

#[derive(Deserialize)]
pub(super) struct Check {
    key: String,
    p: String,
}

/// `GET /vault/check?key=…&p=…`: the API key issued with the page and the passphrase again.
pub(super) async fn check(State(state): State<SiteState>, Query(check): Query<Check>) -> Response {
    if !state.vault().api_keys.contains(&check.key) || check.p != VAULT_PASSPHRASE {
        return (StatusCode::FORBIDDEN, axum::Json(serde_json::json!({"status": "locked"}))).into_response();
    }
    axum::Json(serde_json::json!({"status": "open"})).into_response()
}
