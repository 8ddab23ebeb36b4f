//! Signing in and the cart: the login form and its CSRF token, cookie sessions, `/account` and `/cart`.
//!
//! The CSRF token is both in the form and in a `csrf` cookie scoped to `/login`, and the server remembers
//! the tokens it issued: a sign-in counts only if the form's token equals the cookie's and was issued here.
//! Everything lives in memory for the life of the server.

use std::collections::{HashMap, HashSet};

use axum::extract::State;
use axum::http::{HeaderMap, StatusCode, header};
use axum::response::{AppendHeaders, IntoResponse, Redirect, Response};
use axum::{Form, http::HeaderValue};
use serde::Deserialize;

use super::catalog::{self, Product};
use super::html::{escape, respond};
use super::{DEMO_PASSWORD, DEMO_USER, SiteState};

const CSRF_COOKIE: &str = "csrf";
const SESSION_COOKIE: &str = "session";
/// The most of one product a cart takes in one go.
pub(super) const MAX_QUANTITY: u32 = 99;

#[derive(Default)]
pub(super) struct Accounts {
    /// Tokens handed out with the login form and not yet used to sign in.
    login_tokens: HashSet<String>,
    /// Session id → session.
    sessions: HashMap<String, Session>,
}

struct Session {
    user: String,
    /// In the order products were first added.
    cart: Vec<CartLine>,
}

struct CartLine {
    product: &'static Product,
    quantity: u32,
}

impl CartLine {
    fn price_cents(&self) -> u64 {
        u64::from(self.product.price_cents) * u64::from(self.quantity)
    }
}

/// 128 random bits as hex: session ids and CSRF tokens (and the tests' other secrets).
pub(crate) fn random_token() -> String {
    let mut bytes = [0u8; 16];
    // Without the operating system's randomness, nothing on the machine could be trusted anyway.
    getrandom::fill(&mut bytes).expect("the operating system's random source failed");
    bytes.iter().map(|byte| format!("{byte:02x}")).collect()
}

/// The value of cookie `name` in the request, if any.
pub(super) fn cookie<'a>(headers: &'a HeaderMap, name: &str) -> Option<&'a str> {
    headers
        .get_all(header::COOKIE)
        .iter()
        .filter_map(|value| value.to_str().ok())
        .flat_map(|value| value.split(';'))
        .filter_map(|pair| pair.trim().split_once('='))
        .find_map(|(key, value)| (key == name).then_some(value))
}

/// The signed-in user's session id, if the request carries a live session.
fn session_id(state: &SiteState, headers: &HeaderMap) -> Option<String> {
    let id = cookie(headers, SESSION_COOKIE)?;
    state.accounts().sessions.contains_key(id).then(|| id.to_owned())
}

fn login_page(status: StatusCode, token: &str, error: Option<&str>) -> Response {
    let error =
        error.map(|message| format!("<p id=\"login-error\" class=\"error\">{message}</p>\n")).unwrap_or_default();
    let body = format!(
        r#"<h1>Sign in</h1>
{error}<form id="login-form" method="post" action="/login">
<input type="hidden" name="csrf" value="{token}">
<p><label for="username">Username</label>
<input id="username" name="username" autocomplete="username" required></p>
<p><label for="password">Password</label>
<input id="password" name="password" type="password" autocomplete="current-password" required></p>
<p><button id="login-submit" type="submit">Sign in</button></p>
</form>
<p>The demo account is <code>{DEMO_USER}</code> with the password <code>{DEMO_PASSWORD}</code>.</p>"#,
        token = escape(token),
    );
    let mut response = respond(status, Some("Sign in"), &[], &body);
    let csrf_cookie = format!("{CSRF_COOKIE}={token}; HttpOnly; Path=/login; SameSite=Lax");
    if let Ok(value) = HeaderValue::from_str(&csrf_cookie) {
        response.headers_mut().append(header::SET_COOKIE, value);
    }
    response
}

/// `GET /login`: the form, with a CSRF token. A token still valid in the `csrf` cookie is reused, so that
/// opening the form in a second tab does not spoil the first.
pub(super) async fn login_form(State(state): State<SiteState>, headers: HeaderMap) -> Response {
    let token = {
        let mut accounts = state.accounts();
        match cookie(&headers, CSRF_COOKIE) {
            Some(token) if accounts.login_tokens.contains(token) => token.to_owned(),
            _ => {
                let token = random_token();
                accounts.login_tokens.insert(token.clone());
                token
            }
        }
    };
    login_page(StatusCode::OK, &token, None)
}

/// Every field defaults to empty so that a missing one is answered by the site's rules (403 for a missing
/// token), not by the form extractor.
#[derive(Deserialize)]
pub(super) struct LoginForm {
    #[serde(default)]
    username: String,
    #[serde(default)]
    password: String,
    #[serde(default)]
    csrf: String,
}

/// `POST /login`: 403 without a valid CSRF token, 401 with the form again for wrong credentials, else a new
/// session and 303 to `/account`.
pub(super) async fn login(State(state): State<SiteState>, headers: HeaderMap, Form(form): Form<LoginForm>) -> Response {
    let mut accounts = state.accounts();
    let token_valid = !form.csrf.is_empty()
        && cookie(&headers, CSRF_COOKIE) == Some(form.csrf.as_str())
        && accounts.login_tokens.contains(&form.csrf);
    if !token_valid {
        drop(accounts);
        let body = r#"<h1>Forbidden</h1>
<p id="csrf-error" class="error">This form has expired or did not come from this site.</p>
<p><a href="/login">Sign in again</a></p>"#;
        return respond(StatusCode::FORBIDDEN, Some("Forbidden"), &[], body);
    }
    if form.username != DEMO_USER || form.password != DEMO_PASSWORD {
        drop(accounts);
        return login_page(StatusCode::UNAUTHORIZED, &form.csrf, Some("Wrong username or password."));
    }
    accounts.login_tokens.remove(&form.csrf);
    let session = random_token();
    accounts.sessions.insert(session.clone(), Session { user: form.username, cart: Vec::new() });
    (
        AppendHeaders([
            (header::SET_COOKIE, format!("{SESSION_COOKIE}={session}; HttpOnly; Path=/; SameSite=Lax")),
            // The token is spent: forget it in the browser too.
            (header::SET_COOKIE, format!("{CSRF_COOKIE}=; Max-Age=0; HttpOnly; Path=/login; SameSite=Lax")),
        ]),
        Redirect::to("/account"),
    )
        .into_response()
}

/// `GET /account`: who is signed in, and a form that adds blue mugs to the cart.
pub(super) async fn account(State(state): State<SiteState>, headers: HeaderMap) -> Response {
    let Some(session) = session_id(&state, &headers) else {
        return Redirect::to("/login").into_response();
    };
    let user = state.accounts().sessions.get(&session).map(|session| session.user.clone()).unwrap_or_default();
    let body = format!(
        r#"<h1>Your account</h1>
<p id="signed-in-as">Signed in as {user}</p>
<form id="add-to-cart-form" method="post" action="/cart">
<input type="hidden" name="product" value="blue-mug">
<p><label for="qty">Quantity</label>
<input id="qty" name="qty" type="number" min="1" max="{MAX_QUANTITY}" value="1"></p>
<p><label for="shipping">Shipping</label>
<select id="shipping" name="shipping"><option value="standard">Standard</option><option value="express">Express (next day)</option></select></p>
<p><input id="gift-wrap" name="gift_wrap" type="checkbox" value="yes"> <label for="gift-wrap">Gift wrap</label></p>
<p><button id="add-to-cart" type="submit">Add a Blue Mug to the cart</button></p>
</form>
<p><a id="view-cart" href="/cart">View the cart</a></p>"#,
        user = escape(&user),
    );
    respond(StatusCode::OK, Some("Your account"), &[], &body)
}

#[derive(Deserialize)]
pub(super) struct CartForm {
    #[serde(default)]
    product: String,
    /// Text, so that a bad number gets the site's 400 rather than the extractor's 422. Empty means 1.
    #[serde(default)]
    qty: String,
}

/// `POST /cart`: adds `qty` of `product` to the signed-in user's cart, then 303 to `/cart`.
pub(super) async fn add_to_cart(
    State(state): State<SiteState>,
    headers: HeaderMap,
    Form(form): Form<CartForm>,
) -> Response {
    let Some(session) = session_id(&state, &headers) else {
        return Redirect::to("/login").into_response();
    };
    let Some(product) = catalog::find(&form.product) else {
        return bad_request(&format!("There is no product “{}”.", escape(&form.product)));
    };
    let quantity = match form.qty.trim() {
        "" => 1,
        text => match text.parse::<u32>() {
            Ok(quantity) if (1..=MAX_QUANTITY).contains(&quantity) => quantity,
            _ => return bad_request(&format!("The quantity must be a whole number from 1 to {MAX_QUANTITY}.")),
        },
    };
    if let Some(session) = state.accounts().sessions.get_mut(&session) {
        match session.cart.iter_mut().find(|line| line.product.id == product.id) {
            Some(line) => line.quantity = line.quantity.saturating_add(quantity),
            None => session.cart.push(CartLine { product, quantity }),
        }
    }
    Redirect::to("/cart").into_response()
}

fn bad_request(message: &str) -> Response {
    let body = format!("<h1>Bad request</h1>\n<p class=\"error\">{message}</p>\n<p><a href=\"/account\">Back</a></p>");
    respond(StatusCode::BAD_REQUEST, Some("Bad request"), &[], &body)
}

/// `GET /cart`: the signed-in user's cart.
pub(super) async fn cart(State(state): State<SiteState>, headers: HeaderMap) -> Response {
    let Some(session) = session_id(&state, &headers) else {
        return Redirect::to("/login").into_response();
    };
    let (items, total_cents) = {
        let accounts = state.accounts();
        let lines = accounts.sessions.get(&session).map(|session| session.cart.as_slice()).unwrap_or_default();
        let items: String = lines
            .iter()
            .map(|line| {
                format!(
                    "<li data-product=\"{id}\" data-qty=\"{qty}\">{name} × {qty}: {price}</li>\n",
                    id = line.product.id,
                    qty = line.quantity,
                    name = escape(line.product.name),
                    price = catalog::format_price(line.price_cents()),
                )
            })
            .collect();
        let total: u64 = lines.iter().map(CartLine::price_cents).sum();
        (items, total)
    };
    let contents = if items.is_empty() {
        "<p id=\"cart-empty\">Your cart is empty.</p>".to_owned()
    } else {
        format!(
            "<ul id=\"cart-items\">\n{items}</ul>\n<p id=\"cart-total\">Total: {}</p>",
            catalog::format_price(total_cents)
        )
    };
    let body = format!("<h1>Your cart</h1>\n{contents}\n<p><a href=\"/account\">Back to your account</a></p>");
    respond(StatusCode::OK, Some("Your cart"), &[], &body)
}
