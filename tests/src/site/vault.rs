//! "Partner vault" (`/vault`): a sign-in that carries its secrets the ways real pages do and no redaction
//! rule of names alone would catch, for the redaction tests to record through the extension. The page sets
//! a 7-character session cookie with an innocent name (`v`), holds a CSRF token in a hidden input named
//! `form_key` and an API key, an API token and a client secret in data attributes, and asks for a
//! passphrase in a *text* field labelled "Passphrase". Its script (`static/vault.js`) then sends, as
//! jQuery-era code does:
//! - `POST /vault/connect` as `$.ajax` does with a JSON string: JSON declared
//!   `application/x-www-form-urlencoded`, with `client_secret` and `form_key`;
//! - `POST /vault/connect` with `text/plain` JSON: `user:passphrase` in base64, `form_key`, `api_token`;
//! - `GET /vault/check?key=<API key>&p=<passphrase>&basic=<base64 of user:passphrase>`, each value through
//!   `encodeURIComponent` (the base64 holds a `/`, which becomes `%2F`).
//!
//! The check's answer echoes the passphrase as a PHP page escapes it for HTML, every character but letters
//! and digits as a numeric reference (`&#64;`). The server checks every value (the cookie, the form key, the
//! API key and token and the client secret it issued, the passphrase), so that a replay must carry the
//! redacted stand-ins consistently to reach "Vault open".

use std::collections::HashSet;

use axum::extract::{Query, State};
use axum::http::{HeaderMap, HeaderValue, StatusCode, header};
use axum::response::{IntoResponse, Response};
use base64::Engine as _;
use serde::Deserialize;

use super::account::cookie;
use super::html::{escape, respond};
use super::{DEMO_USER, SiteState};

/// What the demonstration types into the passphrase field: a space, `?`, `@`, `!` and parentheses, which
/// `encodeURIComponent`, form encoding and base64 each write differently; after `ann:`, its base64 holds a
/// `/`, which `encodeURIComponent` writes `%2F`.
pub const VAULT_PASSPHRASE: &str = "open? sesame@vault!(7)";
/// The session cookie's name, which says nothing about what it holds.
const COOKIE: &str = "v";

/// The values the vault handed out, which later requests must carry back.
#[derive(Default)]
pub(super) struct Vault {
    cookies: HashSet<String>,
    form_keys: HashSet<String>,
    api_keys: HashSet<String>,
    api_tokens: HashSet<String>,
    client_secrets: HashSet<String>,
}

impl Vault {
    pub(super) fn issued(&self) -> Vec<String> {
        let all = [&self.cookies, &self.form_keys, &self.api_keys, &self.api_tokens, &self.client_secrets];
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

/// `GET /vault`: the form, with a new cookie, form key, API key, API token and client secret.
pub(super) async fn page(State(state): State<SiteState>) -> Response {
    let (session, form_key, api_key, api_token) = (random_text(7), random_text(32), random_text(32), random_text(40));
    let client_secret = random_text(36);
    {
        let mut vault = state.vault();
        vault.cookies.insert(session.clone());
        vault.form_keys.insert(form_key.clone());
        vault.api_keys.insert(api_key.clone());
        vault.api_tokens.insert(api_token.clone());
        vault.client_secrets.insert(client_secret.clone());
    }
    let body = format!(
        r#"<h1>Partner vault</h1>
<form id="vault-form" data-api-key="{api_key}" data-api-token="{api_token}" data-client-secret="{client_secret}">
<input type="hidden" name="form_key" value="{form_key}">
<p><label for="vault-user">User</label> <input id="vault-user" name="user"></p>
<p><label for="vault-passphrase">Passphrase</label> <input id="vault-passphrase" name="passphrase" type="text"></p>
<p><button id="vault-open" type="button">Open the vault</button></p>
</form>
<p id="vault-status"></p>"#,
        api_key = escape(&api_key),
        api_token = escape(&api_token),
        client_secret = escape(&client_secret),
        form_key = escape(&form_key),
    );
    let mut response = respond(StatusCode::OK, Some("Partner vault"), &["/static/vault.js"], &body);
    if let Ok(value) = HeaderValue::from_str(&format!("{COOKIE}={session}; Path=/vault; SameSite=Lax")) {
        response.headers_mut().append(header::SET_COOKIE, value);
    }
    response
}

/// What `POST /vault/connect` carries: the partner's handshake, or the sign-in.
#[derive(Deserialize)]
#[serde(untagged)]
pub(super) enum Connect {
    SignIn { auth: String, form_key: String, api_token: String },
    Partner { client_secret: String, form_key: String },
}

/// `POST /vault/connect`, with the session cookie, whatever the content type says (the body is JSON): the
/// partner's handshake (the client secret and the form key, sent as jQuery sends a JSON string, declared a
/// form), or the sign-in (the user and passphrase as base64 of `user:passphrase`, the form key and the API
/// token, sent as `text/plain`).
pub(super) async fn connect(State(state): State<SiteState>, headers: HeaderMap, body: String) -> Response {
    let Ok(connect) = serde_json::from_str::<Connect>(&body) else {
        return (StatusCode::BAD_REQUEST, "not JSON").into_response();
    };
    let vault = state.vault();
    let known_session = cookie(&headers, COOKIE).is_some_and(|session| vault.cookies.contains(session));
    let (auth, form_key, api_token) = match &connect {
        Connect::Partner { client_secret, form_key } => {
            if !known_session || !vault.form_keys.contains(form_key) || !vault.client_secrets.contains(client_secret) {
                return (StatusCode::FORBIDDEN, axum::Json(serde_json::json!({"error": "unknown partner"})))
                    .into_response();
            }
            return axum::Json(serde_json::json!({"partner": true})).into_response();
        }
        Connect::SignIn { auth, form_key, api_token } => (auth, form_key, api_token),
    };
    let known = known_session && vault.form_keys.contains(form_key) && vault.api_tokens.contains(api_token);
    if !known {
        return (StatusCode::FORBIDDEN, axum::Json(serde_json::json!({"error": "unknown session"}))).into_response();
    }
    if *auth != basic_credentials() {
        return (StatusCode::UNAUTHORIZED, axum::Json(serde_json::json!({"error": "wrong passphrase"})))
            .into_response();
    }
    axum::Json(serde_json::json!({"user": DEMO_USER})).into_response()
}

/// Base64 of `user:passphrase`, as `btoa` writes it.
pub fn basic_credentials() -> String {
    base64::engine::general_purpose::STANDARD.encode(format!("{DEMO_USER}:{VAULT_PASSPHRASE}"))
}

/// The passphrase as the check's answer echoes it: every character but letters and digits a numeric
/// reference, as PHP's and many templates' HTML escaping writes it (`open&#63;&#32;sesame&#64;…`).
pub fn passphrase_echoed() -> String {
    VAULT_PASSPHRASE
        .chars()
        .map(|c| if c.is_ascii_alphanumeric() { c.to_string() } else { format!("&#{};", u32::from(c)) })
        .collect()
}

#[derive(Deserialize)]
pub(super) struct Check {
    key: String,
    p: String,
    basic: String,
}

/// `GET /vault/check?key=…&p=…&basic=…`: the API key issued with the page, the passphrase, and base64 of
/// `user:passphrase` again; the answer echoes the passphrase, escaped for HTML.
pub(super) async fn check(State(state): State<SiteState>, Query(check): Query<Check>) -> Response {
    if !state.vault().api_keys.contains(&check.key) || check.p != VAULT_PASSPHRASE || check.basic != basic_credentials()
    {
        return (StatusCode::FORBIDDEN, axum::Json(serde_json::json!({"status": "locked"}))).into_response();
    }
    let receipt = format!("<p>Opened with {}</p>", passphrase_echoed());
    axum::Json(serde_json::json!({"status": "open", "receipt": receipt})).into_response()
}
