//! The shop's page layout, HTML escaping, and the page for what it does not have (404). Every page has a `<title>`, the stylesheet, the logo and the
//! tracker; nothing is inline (no `<script>` or `style` attribute), so that every page would also pass the
//! strict page's Content-Security-Policy.

use axum::http::StatusCode;
use axum::response::{Html, IntoResponse, Response};

/// The shop's name, the title of the home page and the end of every other title.
pub(super) const SHOP_NAME: &str = "TRACE Demo Shop";

/// A whole page of the shop: `title` (`None` for the home page), the page's own scripts, and its body.
fn page(title: Option<&str>, scripts: &[&str], body: &str) -> String {
    let title = match title {
        Some(title) => format!("{} · {SHOP_NAME}", escape(title)),
        None => SHOP_NAME.to_owned(),
    };
    let scripts: String = scripts.iter().map(|src| format!("<script src=\"{src}\" defer></script>\n")).collect();
    format!(
        r#"<!doctype html>
<html lang="en">
<head>
<meta charset="utf-8">
<meta name="viewport" content="width=device-width, initial-scale=1">
<title>{title}</title>
<link rel="stylesheet" href="/static/shop.css">
<script src="/static/tracker.js" defer></script>
{scripts}</head>
<body>
<header class="site-header">
<a id="home-link" href="/"><img id="logo" src="/static/logo.png" alt="{SHOP_NAME}" width="160" height="48"></a>
</header>
<main>
{body}
</main>
</body>
</html>
"#
    )
}

/// A page of the shop with its status.
pub(super) fn respond(status: StatusCode, title: Option<&str>, scripts: &[&str], body: &str) -> Response {
    (status, Html(page(title, scripts, body))).into_response()
}

/// Escapes text for HTML content and double-quoted attribute values.
pub(super) fn escape(text: &str) -> String {
    let mut escaped = String::with_capacity(text.len());
    for character in text.chars() {
        match character {
            '&' => escaped.push_str("&amp;"),
            '<' => escaped.push_str("&lt;"),
            '>' => escaped.push_str("&gt;"),
            '"' => escaped.push_str("&quot;"),
            '\'' => escaped.push_str("&#39;"),
            other => escaped.push(other),
        }
    }
    escaped
}

/// The page for anything the shop does not have.
pub(super) async fn not_found() -> Response {
    let body = "<h1>Not found</h1>\n<p>There is no such page. <a href=\"/\">Back to the shop</a></p>";
    respond(StatusCode::NOT_FOUND, Some("Not found"), &[], body)
}
