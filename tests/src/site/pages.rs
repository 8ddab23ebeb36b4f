//! The shop's pages that hold no state: the home page, help, the embedded widget, the strict-CSP page, the
//! clock, the deals redirect, the page that forges a person's actions, and a card checkout.

use axum::Json;
use axum::extract::Path;
use axum::http::{HeaderMap, HeaderValue, StatusCode, header};
use axum::response::{Html, IntoResponse, Response};
use serde_json::{Value, json};

use super::catalog::{self, PRODUCTS};
use super::html::{SHOP_NAME, escape, respond};

/// The policy of `/strict`: only this origin, no inline script or style, no eval, no WebAssembly compiling.
pub const STRICT_CSP: &str = "default-src 'self'; script-src 'self'; object-src 'none'";

/// `GET /`: links to every part of the shop, the search form, three product pictures, and the product list
/// that `app.js` fills from the JSON API.
pub(super) async fn home() -> Response {
    let featured: String = PRODUCTS.iter().map(catalog::product_item).collect();
    let body = format!(
        r#"<h1>{SHOP_NAME}</h1>
{search_form}
<nav id="site-nav">
<ul>
<li><a id="login-link" href="/login">Sign in</a></li>
<li><a id="account-link" href="/account">Your account</a></li>
<li><a id="cart-link" href="/cart">Your cart</a></li>
<li><a id="deals-link" href="/deals">Today's deals</a></li>
<li><a id="embed-link" href="/embed">The widget</a></li>
<li><a id="help-link" href="/help" target="_blank">Help (opens a new tab)</a></li>
<li><a id="strict-link" href="/strict">The strict page</a></li>
<li><a id="clock-link" href="/clock">The clock</a></li>
<li><a id="api-link" href="/api/products">The products as JSON</a></li>
</ul>
</nav>
<h2>Featured</h2>
<ul id="featured" class="products">{featured}</ul>
<h2>All products</h2>
<ul id="products"><li>Loading the products…</li></ul>"#,
        search_form = catalog::search_form(""),
    );
    respond(StatusCode::OK, None, &["/static/app.js"], &body)
}

/// `GET /help`: a plain page, which the home page opens in a new tab.
pub(super) async fn help() -> Response {
    let body = "<h1>Help</h1>\n<p id=\"help-text\">Sign in as the demo user, add a blue mug to your cart, and \
                search for anything with “mug” in its name.</p>\n<p><a href=\"/\">Back to the shop</a></p>";
    respond(StatusCode::OK, Some("Help"), &[], body)
}

/// How many pictures `/gallery` shows.
pub const GALLERY_PICTURES: usize = 240;

/// `GET /gallery`: a large page, a grid of [`GALLERY_PICTURES`] pictures, each a request of its own, as a
/// catalogue or a photo site has.
pub(super) async fn gallery() -> Response {
    let pictures: String = (0..GALLERY_PICTURES)
        .map(|n| format!("<img src=\"/picture/{n}.svg\" alt=\"Picture {n}\" width=\"48\" height=\"48\">"))
        .collect();
    let body = format!("<h1>Gallery</h1>\n<p>Every picture of the shop.</p>\n<div id=\"gallery\">{pictures}</div>");
    respond(StatusCode::OK, Some("Gallery"), &[], &body)
}

/// `GET /picture/{n}.svg`: one of the gallery's pictures, each a different colour.
pub(super) async fn picture(Path(name): Path<String>) -> Response {
    let Some(n) = name.strip_suffix(".svg").and_then(|n| n.parse::<u32>().ok()) else {
        return StatusCode::NOT_FOUND.into_response();
    };
    let svg = format!(
        "<svg xmlns=\"http://www.w3.org/2000/svg\" width=\"48\" height=\"48\">\
         <rect width=\"48\" height=\"48\" fill=\"hsl({} 60% 55%)\"/></svg>",
        n * 37 % 360
    );
    ([(header::CONTENT_TYPE, "image/svg+xml")], svg).into_response()
}

/// `GET /deals`: a temporary redirect (302, as older sites do, rather than 303 or 307) to a search.
pub(super) async fn deals() -> Response {
    (StatusCode::FOUND, [(header::LOCATION, "/search?q=mug")]).into_response()
}

/// `GET /embed`: a page that frames `/widget` twice: from this site, and as a partner's widget from
/// `localhost`, another site to the browser, which runs such a frame in a process of its own.
pub(super) async fn embed(headers: HeaderMap) -> Response {
    let port = headers
        .get(header::HOST)
        .and_then(|host| host.to_str().ok())
        .and_then(|host| host.rsplit_once(':'))
        .map_or("80", |(_, port)| port)
        .to_owned();
    let body = format!(
        "<h1>The widget</h1>\n<p>The widget below is a page of its own in an iframe.</p>\n\
         <iframe id=\"widget\" src=\"/widget\" title=\"Widget\" width=\"360\" height=\"160\"></iframe>\n\
         <p>And a partner's widget, from another site:</p>\n\
         <iframe id=\"partner-widget\" src=\"http://localhost:{port}/widget?partner=1\" title=\"Partner widget\" \
         width=\"360\" height=\"160\"></iframe>",
        port = escape(&port)
    );
    respond(StatusCode::OK, Some("Widget"), &[], &body)
}

/// `GET /widget`: the framed page. Its button shows "clicked" and fetches `/api/ping` from inside the frame.
/// Only the stylesheet and its own script: no site header and no tracker, as third-party widgets have.
pub(super) async fn widget() -> Html<&'static str> {
    Html(
        r#"<!doctype html>
<html lang="en">
<head>
<meta charset="utf-8">
<title>Widget</title>
<link rel="stylesheet" href="/static/shop.css">
<script src="/static/widget.js" defer></script>
</head>
<body>
<p><button id="widget-button" type="button">Click me</button></p>
<p>Button: <output id="widget-output"></output></p>
<p>Server: <output id="widget-ping"></output></p>
</body>
</html>
"#,
    )
}

/// `GET /api/ping`: `{"ok":true}`, for the widget.
pub(super) async fn ping() -> Json<Value> {
    Json(json!({ "ok": true }))
}

/// `GET /strict`: a page under [`STRICT_CSP`], whose external script copies the input into the output and
/// starts a worker that asks the server for a pong.
pub(super) async fn strict() -> Response {
    let body = r#"<h1>The strict page</h1>
<p>This page allows no inline script or style and no WebAssembly compiling: a recorder has to work within that.</p>
<p><label for="strict-input">Text</label> <input id="strict-input" type="text"></p>
<p><button id="strict-button" type="button">Copy</button></p>
<p>Copied: <output id="strict-output"></output></p>
<p>Worker: <output id="strict-worker"></output></p>"#;
    let mut response = respond(StatusCode::OK, Some("Strict page"), &["/static/strict.js"], body);
    response.headers_mut().insert(header::CONTENT_SECURITY_POLICY, HeaderValue::from_static(STRICT_CSP));
    response
}

/// `GET /clock`: the time and a random number, written by `clock.js`.
pub(super) async fn clock() -> Response {
    let body = "<h1>The clock</h1>\n<p>Now: <output id=\"now\"></output></p>\n\
                <p>Random: <output id=\"random\"></output></p>";
    respond(StatusCode::OK, Some("Clock"), &["/static/clock.js"], body)
}

/// `GET /forge`: a page whose script (`forge.js`) types into its password field, submits its form and
/// scrolls itself, as if it were the person; a search field for the person's own typing, which the page
/// scrolls along as they type (as editors keep their cursor in view); a note form whose second field the
/// page fills while the person types in the first; and a slider of its own making that the arrow keys move
/// without any change event.
pub(super) async fn forge() -> Response {
    let body = "<h1>Forged actions</h1>\n<form id=\"forge-form\" action=\"/forge\">\
                <input id=\"forge-password\" name=\"password\" type=\"password\"></form>\n\
                <p><input id=\"forge-search\" name=\"q\"></p>\n\
                <form id=\"note-form\"><input id=\"forge-title\" name=\"title\">\
                <input id=\"forge-note\" name=\"note\"></form>\n\
                <p><span id=\"volume\" role=\"slider\" tabindex=\"0\" aria-valuemin=\"0\" aria-valuemax=\"10\" \
                aria-valuenow=\"5\">5</span></p>\n<div style=\"height: 3000px\"></div>";
    respond(StatusCode::OK, Some("Forged actions"), &["/static/forge.js"], body)
}

/// `GET /checkout`: a card form whose fields say what they take (`autocomplete`), as the browser's card
/// autofill wants; `POST /checkout` answers which card paid (its last four digits) and for whom.
pub(super) async fn checkout() -> Response {
    let body = "<h1>Checkout</h1>\n<form id=\"card-form\" method=\"post\" action=\"/checkout\">\
                <p><input id=\"cc-name\" name=\"name\" autocomplete=\"cc-name\" aria-label=\"Name on card\"></p>\
                <p><input id=\"cc-number\" name=\"number\" autocomplete=\"cc-number\" aria-label=\"Card number\"></p>\
                <p><input id=\"cc-exp\" name=\"exp\" autocomplete=\"cc-exp\" aria-label=\"Expiry\"></p>\
                <p><input id=\"cc-csc\" name=\"csc\" autocomplete=\"cc-csc\" aria-label=\"Security code\"></p>\
                <p><button id=\"pay\">Pay</button></p></form>";
    respond(StatusCode::OK, Some("Checkout"), &[], body)
}

#[derive(serde::Deserialize)]
pub(super) struct Card {
    name: String,
    number: String,
}

/// `POST /checkout`.
pub(super) async fn pay(axum::Form(card): axum::Form<Card>) -> Response {
    let digits: String = card.number.chars().filter(char::is_ascii_digit).collect();
    if digits.len() < 12 {
        return respond(StatusCode::BAD_REQUEST, Some("Checkout"), &[], "<h1>That is no card number</h1>");
    }
    let body = format!(
        "<h1>Paid</h1>\n<p id=\"paid\">Thank you, {}: paid with the card ending {}.</p>",
        escape(&card.name),
        &digits[digits.len() - 4..]
    );
    respond(StatusCode::OK, Some("Paid"), &[], &body)
}
