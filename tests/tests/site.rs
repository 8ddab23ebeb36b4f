//! Tests of the TRACE Demo Shop over real HTTP: each test starts the site on a free port of 127.0.0.1 and
//! talks to it with the small HTTP/1.1 client below, which shows everything as sent (no redirect followed,
//! no cookie kept, no body decompressed unless asked), as the tests need.

use std::io::{Read, Write};
use std::net::{TcpListener, TcpStream};
use std::time::{Duration, Instant};

use flate2::read::GzDecoder;
use trace_e2e::site::{DEMO_PASSWORD, DEMO_USER, DemoSite, STRICT_CSP, ServedRequest};

struct HttpResponse {
    status: u16,
    headers: Vec<(String, String)>,
    body: Vec<u8>,
}

impl HttpResponse {
    fn header(&self, name: &str) -> Option<&str> {
        self.headers.iter().find(|(key, _)| key.eq_ignore_ascii_case(name)).map(|(_, value)| value.as_str())
    }

    fn all_headers(&self, name: &str) -> Vec<&str> {
        self.headers.iter().filter(|(key, _)| key.eq_ignore_ascii_case(name)).map(|(_, value)| value.as_str()).collect()
    }

    /// The body as text, gunzipped if it was sent gzipped.
    fn text(&self) -> String {
        let body = match self.header("content-encoding") {
            Some("gzip") => gunzip(&self.body),
            None => self.body.clone(),
            Some(other) => panic!("unexpected content encoding {other}"),
        };
        String::from_utf8(body).expect("the body is UTF-8")
    }

    /// The value of the cookie `name` that the response sets.
    fn set_cookie(&self, name: &str) -> Option<String> {
        self.all_headers("set-cookie").into_iter().find_map(|cookie| {
            let (pair, _) = cookie.split_once(';').unwrap_or((cookie, ""));
            let (key, value) = pair.split_once('=')?;
            (key == name).then(|| value.to_owned())
        })
    }
}

fn gunzip(bytes: &[u8]) -> Vec<u8> {
    let mut plain = Vec::new();
    GzDecoder::new(bytes).read_to_end(&mut plain).expect("the body is valid gzip");
    plain
}

/// One request on a new connection, closed after the response.
fn request(site: &DemoSite, method: &str, path: &str, headers: &[(&str, &str)], body: &[u8]) -> HttpResponse {
    let mut stream = TcpStream::connect(("127.0.0.1", site.port())).expect("connect to the site");
    stream.set_read_timeout(Some(Duration::from_secs(5))).unwrap();
    let mut head = format!("{method} {path} HTTP/1.1\r\nHost: 127.0.0.1:{}\r\nConnection: close\r\n", site.port());
    for (name, value) in headers {
        head.push_str(&format!("{name}: {value}\r\n"));
    }
    if !body.is_empty() || method == "POST" {
        head.push_str(&format!("Content-Length: {}\r\n", body.len()));
    }
    head.push_str("\r\n");
    stream.write_all(head.as_bytes()).unwrap();
    stream.write_all(body).unwrap();
    let mut raw = Vec::new();
    stream.read_to_end(&mut raw).expect("read the response");
    parse_response(&raw)
}

fn parse_response(raw: &[u8]) -> HttpResponse {
    let split = raw.windows(4).position(|window| window == b"\r\n\r\n").expect("a complete response head");
    let head = std::str::from_utf8(&raw[..split]).expect("an ASCII response head");
    let mut lines = head.split("\r\n");
    let status_line = lines.next().unwrap();
    let status = status_line.split(' ').nth(1).and_then(|code| code.parse().ok()).expect("a status code");
    let headers: Vec<(String, String)> = lines
        .map(|line| {
            let (name, value) = line.split_once(':').expect("a header line");
            (name.trim().to_owned(), value.trim().to_owned())
        })
        .collect();
    let rest = &raw[split + 4..];
    let chunked = headers
        .iter()
        .any(|(name, value)| name.eq_ignore_ascii_case("transfer-encoding") && value.eq_ignore_ascii_case("chunked"));
    let body = if chunked { dechunk(rest) } else { rest.to_vec() };
    HttpResponse { status, headers, body }
}

fn dechunk(mut rest: &[u8]) -> Vec<u8> {
    let mut body = Vec::new();
    loop {
        let line_end = rest.windows(2).position(|window| window == b"\r\n").expect("a chunk size line");
        let size_text = std::str::from_utf8(&rest[..line_end]).unwrap();
        let size = usize::from_str_radix(size_text.split(';').next().unwrap().trim(), 16).expect("a chunk size");
        rest = &rest[line_end + 2..];
        if size == 0 {
            return body;
        }
        body.extend_from_slice(&rest[..size]);
        rest = &rest[size + 2..];
    }
}

fn get(site: &DemoSite, path: &str) -> HttpResponse {
    request(site, "GET", path, &[], b"")
}

fn get_with_cookie(site: &DemoSite, path: &str, cookie: &str) -> HttpResponse {
    request(site, "GET", path, &[("Cookie", cookie)], b"")
}

fn post_form(site: &DemoSite, path: &str, cookie: Option<&str>, fields: &[(&str, &str)]) -> HttpResponse {
    let body: Vec<String> = fields.iter().map(|(name, value)| format!("{}={}", encode(name), encode(value))).collect();
    let mut headers = vec![("Content-Type", "application/x-www-form-urlencoded")];
    if let Some(cookie) = cookie {
        headers.push(("Cookie", cookie));
    }
    request(site, "POST", path, &headers, body.join("&").as_bytes())
}

/// application/x-www-form-urlencoded encoding of one name or value.
fn encode(text: &str) -> String {
    text.bytes()
        .map(|byte| match byte {
            b'A'..=b'Z' | b'a'..=b'z' | b'0'..=b'9' | b'-' | b'_' | b'.' | b'~' => (byte as char).to_string(),
            b' ' => "+".to_owned(),
            other => format!("%{other:02X}"),
        })
        .collect()
}

fn start() -> DemoSite {
    DemoSite::start(0).expect("start the demo site")
}

/// The value of the hidden `csrf` input of a login page.
fn csrf_field(page: &str) -> String {
    let marker = r#"name="csrf" value=""#;
    let start = page.find(marker).expect("a csrf field") + marker.len();
    page[start..].split('"').next().unwrap().to_owned()
}

/// Signs in as the demo user and returns the `Cookie` header value of the session.
fn sign_in(site: &DemoSite) -> String {
    let form = get(site, "/login");
    let token = form.set_cookie("csrf").expect("the form sets a csrf cookie");
    assert_eq!(csrf_field(&form.text()), token);
    let response = post_form(
        site,
        "/login",
        Some(&format!("csrf={token}")),
        &[("username", DEMO_USER), ("password", DEMO_PASSWORD), ("csrf", &token)],
    );
    assert_eq!(response.status, 303);
    format!("session={}", response.set_cookie("session").expect("a session cookie"))
}

/// Every `attribute="/..."` value in `html`, e.g. every local `src`.
fn local_links<'a>(html: &'a str, attribute: &str) -> Vec<&'a str> {
    let marker = format!("{attribute}=\"/");
    html.match_indices(&marker)
        .map(|(index, _)| {
            let value = &html[index + marker.len() - 1..];
            &value[..value.find('"').unwrap()]
        })
        .collect()
}

#[test]
fn home_page_links_every_asset_and_every_part_of_the_shop() {
    let site = start();
    let home = get(&site, "/");
    assert_eq!(home.status, 200);
    assert_eq!(home.header("content-type"), Some("text/html; charset=utf-8"));
    let html = home.text();
    assert!(html.contains("<title>TRACE Demo Shop</title>"));
    for asset in ["/static/shop.css", "/static/logo.png", "/static/app.js", "/static/tracker.js"] {
        assert!(html.contains(&format!("\"{asset}\"")), "the home page links {asset}");
    }
    let images = local_links(&html, "src").into_iter().filter(|src| src.ends_with(".png")).count();
    assert_eq!(images, 4, "the logo and three products");
    assert!(html.contains(r#"<a id="help-link" href="/help" target="_blank">"#));
    assert!(html.contains(r#"<form id="search-form" action="/search" method="get""#));
    assert!(html.contains(r#"id="search-input" name="q""#) && html.contains(r#"id="search-submit""#));
    assert!(html.contains(r#"<ul id="products">"#));
    for path in ["/login", "/account", "/cart", "/deals", "/embed", "/help", "/strict", "/clock", "/api/products"] {
        assert!(html.contains(&format!("href=\"{path}\"")), "the home page links {path}");
    }

    // Everything the page links exists.
    let links = local_links(&html, "src").into_iter().chain(local_links(&html, "href"));
    for link in links {
        let status = get(&site, link).status;
        assert!([200, 302, 303].contains(&status), "{link} answers {status}");
    }

    let css = get(&site, "/static/shop.css").text();
    assert!(css.contains("@font-face") && css.contains("url(\"/static/shop.woff2\") format(\"woff2\")"));
    assert!(css.contains("url(\"/static/background.png\")"));
    assert_eq!(get(&site, "/static/background.png").status, 200);
    assert_eq!(get(&site, "/static/shop.woff2").status, 200);
    let app = get(&site, "/static/app.js").text();
    assert!(app.contains("fetch('/api/products?_=' + Date.now())") && app.contains("'products'"));
    let tracker = get(&site, "/static/tracker.js").text();
    assert!(tracker.contains("navigator.sendBeacon('/collect?e=pageview&p=' + location.pathname)"));
}

#[test]
fn assets_have_their_content_types() {
    let site = start();
    let expected = [
        ("/static/shop.css", "text/css; charset=utf-8"),
        ("/static/app.js", "text/javascript; charset=utf-8"),
        ("/static/tracker.js", "text/javascript; charset=utf-8"),
        ("/static/widget.js", "text/javascript; charset=utf-8"),
        ("/static/strict.js", "text/javascript; charset=utf-8"),
        ("/static/strict-worker.js", "text/javascript; charset=utf-8"),
        ("/static/clock.js", "text/javascript; charset=utf-8"),
        ("/static/shop.woff2", "font/woff2"),
        ("/static/logo.png", "image/png"),
        ("/static/background.png", "image/png"),
        ("/static/blue-mug.png", "image/png"),
        ("/static/red-mug.png", "image/png"),
        ("/static/teapot.png", "image/png"),
        ("/api/products", "application/json"),
    ];
    for (path, content_type) in expected {
        let response = get(&site, path);
        assert_eq!(response.status, 200, "{path}");
        assert_eq!(response.header("content-type"), Some(content_type), "{path}");
        if content_type == "image/png" {
            assert!(response.body.starts_with(b"\x89PNG\r\n\x1a\n"), "{path} is a PNG");
        }
    }
    assert!(get(&site, "/static/shop.woff2").body.starts_with(b"wOF2"));
    assert_eq!(get(&site, "/static/missing.css").status, 404);
}

#[test]
fn text_is_gzipped_when_the_client_accepts_it_and_only_then() {
    let site = start();
    let gzip = [("Accept-Encoding", "gzip")];
    for path in ["/", "/static/shop.css", "/static/app.js", "/api/products", "/api/ping", "/login", "/search?q=mug"] {
        let plain = get(&site, path);
        assert_eq!(plain.header("content-encoding"), None, "{path} plain");
        let compressed = request(&site, "GET", path, &gzip, b"");
        assert_eq!(compressed.header("content-encoding"), Some("gzip"), "{path} gzipped");
        assert_ne!(compressed.body, plain.body);
        let text = compressed.text();
        if path != "/login" {
            // The login form carries a new CSRF token each time.
            assert_eq!(text.as_bytes(), plain.body, "{path} decompresses to the plain body");
        }
    }
    for path in ["/static/logo.png", "/static/shop.woff2"] {
        let response = request(&site, "GET", path, &gzip, b"");
        assert_eq!(response.header("content-encoding"), None, "{path} is compressed already");
    }
}

#[test]
fn api_lists_the_products_whatever_the_query() {
    let site = start();
    let products: serde_json::Value = serde_json::from_str(&get(&site, "/api/products").text()).unwrap();
    assert_eq!(
        products,
        serde_json::json!([
            { "id": "blue-mug", "name": "Blue Mug", "price": 12.5 },
            { "id": "red-mug", "name": "Red Mug", "price": 12.5 },
            { "id": "teapot", "name": "Teapot", "price": 29.0 },
        ])
    );
    assert_eq!(get(&site, "/api/products?_=1700000000000").body, get(&site, "/api/products").body);
    assert_eq!(get(&site, "/api/ping").text(), r#"{"ok":true}"#);
}

#[test]
fn sign_in_with_token_and_credentials_opens_the_account() {
    let site = start();
    let form = get(&site, "/login");
    assert_eq!(form.status, 200);
    let page = form.text();
    assert!(page.contains("<title>Sign in · TRACE Demo Shop</title>"));
    assert!(page.contains(r#"<form id="login-form" method="post" action="/login">"#));
    assert!(page.contains(r#"id="username" name="username""#));
    assert!(page.contains(r#"id="password" name="password" type="password" autocomplete="current-password""#));
    assert!(page.contains(r#"id="login-submit" type="submit""#));
    let token = csrf_field(&page);
    assert_eq!(token.len(), 32);
    let csrf_cookie = form.all_headers("set-cookie");
    assert_eq!(csrf_cookie, [format!("csrf={token}; HttpOnly; Path=/login; SameSite=Lax")]);

    let signed_in = post_form(
        &site,
        "/login",
        Some(&format!("csrf={token}")),
        &[("username", DEMO_USER), ("password", DEMO_PASSWORD), ("csrf", &token)],
    );
    assert_eq!(signed_in.status, 303);
    assert_eq!(signed_in.header("location"), Some("/account"));
    let session = signed_in.set_cookie("session").expect("a session cookie");
    assert_eq!(session.len(), 32);
    assert!(
        signed_in
            .all_headers("set-cookie")
            .contains(&format!("session={session}; HttpOnly; Path=/; SameSite=Lax").as_str())
    );

    let account = get_with_cookie(&site, "/account", &format!("session={session}"));
    assert_eq!(account.status, 200);
    let page = account.text();
    assert!(page.contains("Signed in as ann"));
    assert!(page.contains(r#"<form id="add-to-cart-form" method="post" action="/cart">"#));
    assert!(page.contains(r#"name="product" value="blue-mug""#) && page.contains(r#"name="qty""#));
    assert!(page.contains(r#"id="add-to-cart""#));

    // The token is spent.
    let again = post_form(
        &site,
        "/login",
        Some(&format!("csrf={token}")),
        &[("username", DEMO_USER), ("password", DEMO_PASSWORD), ("csrf", &token)],
    );
    assert_eq!(again.status, 403);
}

#[test]
fn sign_in_refuses_wrong_passwords_and_missing_tokens() {
    let site = start();
    let token = get(&site, "/login").set_cookie("csrf").unwrap();
    let cookie = format!("csrf={token}");

    let wrong_password = post_form(
        &site,
        "/login",
        Some(&cookie),
        &[("username", DEMO_USER), ("password", "red-mug"), ("csrf", &token)],
    );
    assert_eq!(wrong_password.status, 401);
    assert_eq!(wrong_password.set_cookie("session"), None);
    let page = wrong_password.text();
    assert!(page.contains("Wrong username or password.") && page.contains(r#"id="login-form""#));
    assert_eq!(csrf_field(&page), token, "the form can be sent again");

    let credentials = [("username", DEMO_USER), ("password", DEMO_PASSWORD)];
    let no_token = post_form(&site, "/login", Some(&cookie), &credentials);
    assert_eq!(no_token.status, 403);
    let no_cookie = post_form(&site, "/login", None, &[credentials[0], credentials[1], ("csrf", &token)]);
    assert_eq!(no_cookie.status, 403);
    let forged = "0123456789abcdef0123456789abcdef";
    let forged_pair = post_form(
        &site,
        "/login",
        Some(&format!("csrf={forged}")),
        &[credentials[0], credentials[1], ("csrf", forged)],
    );
    assert_eq!(forged_pair.status, 403, "a token the site never issued");
    for refused in [&no_token, &no_cookie, &forged_pair] {
        assert_eq!(refused.set_cookie("session"), None);
    }

    // The right password still works after all that.
    let signed_in = post_form(&site, "/login", Some(&cookie), &[credentials[0], credentials[1], ("csrf", &token)]);
    assert_eq!(signed_in.status, 303);
}

#[test]
fn account_and_cart_need_a_session() {
    let site = start();
    for path in ["/account", "/cart"] {
        for cookie in [None, Some("session=not-a-session")] {
            let response = match cookie {
                Some(cookie) => get_with_cookie(&site, path, cookie),
                None => get(&site, path),
            };
            assert_eq!(response.status, 303, "{path} with {cookie:?}");
            assert_eq!(response.header("location"), Some("/login"));
        }
    }
    let anonymous = post_form(&site, "/cart", None, &[("product", "blue-mug"), ("qty", "1")]);
    assert_eq!(anonymous.status, 303);
    assert_eq!(anonymous.header("location"), Some("/login"));
}

#[test]
fn cart_keeps_what_was_added() {
    let site = start();
    let session = sign_in(&site);
    let empty = get_with_cookie(&site, "/cart", &session);
    assert!(empty.text().contains("Your cart is empty."));

    let added = post_form(&site, "/cart", Some(&session), &[("product", "blue-mug"), ("qty", "2")]);
    assert_eq!(added.status, 303);
    assert_eq!(added.header("location"), Some("/cart"));
    let cart = get_with_cookie(&site, "/cart", &session).text();
    assert!(cart.contains(r#"<li data-product="blue-mug" data-qty="2">Blue Mug × 2: $25.00</li>"#), "{cart}");

    post_form(&site, "/cart", Some(&session), &[("product", "blue-mug"), ("qty", "1")]);
    post_form(&site, "/cart", Some(&session), &[("product", "teapot"), ("qty", "1")]);
    let cart = get_with_cookie(&site, "/cart", &session).text();
    assert!(cart.contains(r#"data-product="blue-mug" data-qty="3""#));
    assert!(cart.contains(r#"data-product="teapot" data-qty="1""#));
    assert!(cart.contains("Total: $66.50"));

    for (product, qty) in [("blue-mug", "0"), ("blue-mug", "many"), ("blue-mug", "100"), ("spoon", "1")] {
        let refused = post_form(&site, "/cart", Some(&session), &[("product", product), ("qty", qty)]);
        assert_eq!(refused.status, 400, "{product} × {qty}");
    }

    // Another session has its own cart.
    let other = sign_in(&site);
    assert!(get_with_cookie(&site, "/cart", &other).text().contains("Your cart is empty."));
}

#[test]
fn search_filters_the_products_ignoring_case() {
    let site = start();
    let found = |query: &str| -> Vec<String> {
        let response = get(&site, &format!("/search?q={}", encode(query)));
        assert_eq!(response.status, 200);
        let page = response.text();
        let results = &page[page.find(r#"<ul id="results""#).expect("a result list")..];
        results
            .match_indices(r#"data-product=""#)
            .map(|(i, m)| results[i + m.len()..].split('"').next().unwrap().to_owned())
            .collect()
    };
    assert_eq!(found("MUG"), ["blue-mug", "red-mug"]);
    assert_eq!(found(" tea "), ["teapot"]);
    assert_eq!(found("saucer"), Vec::<String>::new());
    assert_eq!(found("").len(), 3);

    let page = get(&site, "/search?q=%3Cscript%3E").text();
    assert!(!page.contains("<script>") && page.contains("&lt;script&gt;"), "the query is escaped");
    assert!(get(&site, "/search?q=mug").text().contains(r#"id="search-input" name="q" type="search" value="mug""#));
}

#[test]
fn deals_redirect_to_a_search() {
    let site = start();
    let response = get(&site, "/deals");
    assert_eq!(response.status, 302);
    assert_eq!(response.header("location"), Some("/search?q=mug"));
}

#[test]
fn strict_page_carries_its_policy_and_no_inline_code() {
    let site = start();
    let response = get(&site, "/strict");
    assert_eq!(response.status, 200);
    assert_eq!(STRICT_CSP, "default-src 'self'; script-src 'self'; object-src 'none'");
    assert_eq!(response.all_headers("content-security-policy"), [STRICT_CSP]);
    let page = response.text();
    for id in ["strict-input", "strict-button", "strict-output", "strict-worker"] {
        assert!(page.contains(&format!("id=\"{id}\"")), "{id}");
    }
    assert!(page.contains(r#"<script src="/static/strict.js" defer></script>"#));
    assert_eq!(page.matches("<script").count(), page.matches("<script src=\"/static/").count(), "no inline script");
    assert!(!page.contains("style=") && !page.contains("<style"), "no inline style");
    let script = get(&site, "/static/strict.js").text();
    assert!(script.contains("'strict-output'") && script.contains("'strict-input'"));
    assert_eq!(get(&site, "/").header("content-security-policy"), None);
}

#[test]
fn clock_widget_and_help_pages_exist() {
    let site = start();
    let clock = get(&site, "/clock").text();
    assert!(clock.contains(r#"id="now""#) && clock.contains(r#"id="random""#));
    assert!(clock.contains(r#"<script src="/static/clock.js" defer></script>"#));
    let clock_js = get(&site, "/static/clock.js").text();
    assert!(clock_js.contains("Date.now()") && clock_js.contains("Math.random()"));

    let embed = get(&site, "/embed").text();
    assert!(embed.contains(r#"<iframe id="widget" src="/widget""#));
    let partner = format!(r#"<iframe id="partner-widget" src="http://localhost:{}/widget?partner=1""#, site.port());
    assert!(embed.contains(&partner), "{embed}");
    let widget = get(&site, "/widget").text();
    assert!(widget.contains("<title>Widget</title>") && widget.contains(r#"id="widget-button""#));
    let widget_js = get(&site, "/static/widget.js").text();
    assert!(widget_js.contains("'clicked'") && widget_js.contains("fetch('/api/ping')"));

    let help = get(&site, "/help");
    assert_eq!(help.status, 200);
    assert!(help.text().contains("<title>Help · TRACE Demo Shop</title>"));
}

#[test]
fn every_page_has_a_title_and_unknown_paths_are_404() {
    let site = start();
    for path in ["/", "/login", "/search?q=mug", "/embed", "/widget", "/help", "/strict", "/clock", "/nowhere"] {
        let page = get(&site, path).text();
        assert!(page.contains("<title>") && page.contains("</title>"), "{path} has a title");
    }
    for path in ["/nowhere", "/static/", "/static/shop.css/x", "/api/nothing"] {
        assert_eq!(get(&site, path).status, 404, "{path}");
    }
    assert_eq!(request(&site, "POST", "/collect?e=pageview&p=/", &[("Content-Type", "text/plain")], b"").status, 204);
}

#[test]
fn served_lists_every_request_in_order() {
    let site = start();
    get(&site, "/");
    get(&site, "/nowhere?x=1");
    request(&site, "POST", "/collect?e=pageview&p=/", &[], b"");
    get(&site, "/deals");
    let served = |method: &str, path_and_query: &str, status| ServedRequest {
        method: method.to_owned(),
        path_and_query: path_and_query.to_owned(),
        status,
    };
    assert_eq!(
        site.served(),
        [
            served("GET", "/", 200),
            served("GET", "/nowhere?x=1", 404),
            served("POST", "/collect?e=pageview&p=/", 204),
            served("GET", "/deals", 302),
        ]
    );
}

#[test]
fn a_busy_port_is_a_clear_error_and_a_stopped_site_frees_its_port() {
    let taken = TcpListener::bind("127.0.0.1:0").unwrap();
    let port = taken.local_addr().unwrap().port();
    let error = DemoSite::start(port).err().expect("the port is taken");
    assert!(format!("{error:#}").contains(&format!("cannot listen on 127.0.0.1:{port}")), "{error:#}");
    drop(taken);

    let site = DemoSite::start(port).expect("the port is free again");
    assert_eq!(site.url("/login"), format!("http://127.0.0.1:{port}/login"));
    assert_eq!(get(&site, "/").status, 200);
    let stopping = Instant::now();
    site.stop();
    assert!(stopping.elapsed() < Duration::from_secs(1), "stopping takes {:?}", stopping.elapsed());
    assert!(TcpStream::connect(("127.0.0.1", port)).is_err(), "nothing listens any more");
    DemoSite::start(port).expect("the port can be used again").stop();
}
