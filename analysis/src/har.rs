//! The HAR of a recording, built from its events: the view of `events.jsonl` for the tools that speak HAR
//! (Playwright's `routeFromHAR`, Chrome DevTools' import, the WebArena evaluator), in the model of
//! [`trace_manifest::har`]. Bodies are referenced by `content._file` (and `postData._file` for binary
//! request bodies) rather than inlined. A WebSocket is an entry of its own (`_resourceType: websocket`,
//! status 101) carrying its frames in `_webSocketMessages`, as Chrome DevTools exports them.

use std::collections::HashMap;

use trace_manifest::bundle::body_file;
use trace_manifest::event::{EventKind, EventRecord, NavigationCause, Request, Response, WebSocketOp, header_value};
use trace_manifest::har::{
    Cache, Content, Creator, Entry, Har, HarCookie, HarRequest, HarResponse, Log, NameValue, Page, PageTimings,
    PostData, Timings, WebSocketMessage,
};
use trace_manifest::time_fmt::rfc3339_from_millis;

use crate::body::{self, ParsedBody};
use crate::exchange::{self, Hop};

/// Builds the HAR of a recording from its events, in event order.
///
/// Events may come in completion order rather than start order (a recorder emits an exchange once it has
/// all of it), so pages are found by time and entries are sorted by start; which answer belongs to which
/// request is [`exchange::hops`]'s rule.
pub fn build(creator: Creator, browser: Option<Creator>, events: &[EventRecord]) -> Har {
    let pages = Pages::of(events);
    let mut entries: Vec<(f64, Entry)> = exchange::hops(events)
        .iter()
        .map(|hop| {
            let pageref = pages.at(hop.tab_id, hop.request.ts).map(|index| pages.list[index].id.clone());
            (hop.request.ts, entry(hop, pageref))
        })
        .collect();
    entries.extend(sockets(events, &pages));
    entries.sort_by(|a, b| a.0.total_cmp(&b.0));
    let entries = entries.into_iter().map(|(_, entry)| entry).collect();
    Har { log: Log { version: "1.2".to_owned(), creator, browser, pages: pages.list, entries } }
}

/// The main-frame pages of a recording, each tab's in start order.
#[derive(Default)]
struct Pages {
    list: Vec<Page>,
    start_ms: Vec<f64>,
    /// Tab id → (start, page index) of each of its pages, in start order.
    of_tab: HashMap<Option<i64>, Vec<(f64, usize)>>,
}

impl Pages {
    fn of(events: &[EventRecord]) -> Pages {
        let mut pages = Pages::default();
        for record in events {
            let event = &record.event;
            match &event.kind {
                // A page is a document: a navigation within one (the history API) starts none.
                EventKind::Navigation(nav) if nav.main_frame && nav.cause != NavigationCause::Script => {
                    let id = format!("page_{}", pages.list.len() + 1);
                    pages.list.push(Page {
                        started_date_time: rfc3339_from_millis(event.ts),
                        id,
                        title: nav.url.clone(),
                        page_timings: PageTimings::default(),
                    });
                    pages.start_ms.push(event.ts);
                    let of_tab = pages.of_tab.entry(event.tab_id).or_default();
                    of_tab.push((event.ts, pages.list.len() - 1));
                    of_tab.sort_by(|a, b| a.0.total_cmp(&b.0));
                }
                EventKind::PageLoad(load) if event.frame_id.is_none() => {
                    if let Some(index) = pages.at(event.tab_id, event.ts) {
                        let page = &mut pages.list[index];
                        if !load.title.is_empty() {
                            page.title = load.title.clone();
                        }
                        page.page_timings = PageTimings {
                            on_content_load: load.dom_content_loaded_ms,
                            on_load: load.load_ms.or(Some(event.ts - pages.start_ms[index])),
                        };
                    }
                }
                _ => {}
            }
        }
        pages
    }

    /// The page a tab showed at `ts`: the latest one started by then.
    fn at(&self, tab_id: Option<i64>, ts: f64) -> Option<usize> {
        let pages = self.of_tab.get(&tab_id)?;
        pages.iter().rev().find(|(start, _)| *start <= ts).or(pages.first()).map(|(_, index)| *index)
    }
}

/// A hop as a HAR entry: its request, then its response, end, failure and bodies.
fn entry(hop: &Hop<'_>, pageref: Option<String>) -> Entry {
    let mut entry = new_entry(hop.request.value, pageref, hop.request.ts);
    if let Some(response) = hop.response {
        entry.response = har_response(response.value, &entry.request.url, response.ts);
        entry.request.http_version = entry.response.http_version.clone();
        entry.server_ip_address = response.value.remote_ip_address.clone();
    }
    if let Some(finished) = hop.finished {
        entry.response.body_size = finished.value.encoded_data_length as i64;
        entry.response.transfer_size = Some(finished.value.encoded_data_length);
    }
    entry.error = match hop.failure() {
        Some(failed) if failed.value.canceled => Some(format!("canceled: {}", failed.value.error_text)),
        Some(failed) => Some(failed.value.error_text.clone()),
        None if hop.response.is_none() => Some("no response was recorded".to_owned()),
        None => None,
    };
    // A body its recorder left out (`omitted`) has its size and no `_file`: the bundle holds none.
    if let Some(body) = hop.response_body {
        entry.response.content.size = body.size as i64;
        entry.response.content.file = body_file(body);
    }
    if let Some(body) = hop.request_body {
        let request = &mut entry.request;
        request.body_size = body.size as i64;
        let mime_type = header_value(&request.headers, "content-type").unwrap_or_default();
        let post_data = request.post_data.get_or_insert_with(|| PostData {
            mime_type: mime_type.to_owned(),
            text: None,
            params: Vec::new(),
            file: None,
        });
        post_data.file = body_file(body);
    }
    entry.timings = timings(hop);
    entry.time = entry.timings.total();
    entry
}

/// The recording's WebSockets as entries, each with its start: the handshake (its headers were not recorded)
/// answered `101`, and the text and binary frames both ways in the order they passed (events are read by
/// `id`). Frames of a socket whose opening was not recorded are left out, as [`crate::websocket`] leaves them.
fn sockets(events: &[EventRecord], pages: &Pages) -> Vec<(f64, Entry)> {
    let mut ordered: Vec<&EventRecord> = events.iter().collect();
    ordered.sort_by_key(|record| record.id);
    let mut sockets: Vec<(f64, Entry)> = Vec::new();
    let mut open: HashMap<(Option<i64>, &str), usize> = HashMap::new();
    for record in ordered {
        let EventKind::WebSocket(socket) = &record.event.kind else { continue };
        let (ts, tab_id) = (record.event.ts, record.event.tab_id);
        let key = (tab_id, socket.request_id.as_str());
        if socket.op == WebSocketOp::Opened {
            let Some(url) = &socket.url else { continue };
            let handshake = Request {
                request_id: socket.request_id.clone(),
                url: url.clone(),
                method: "GET".to_owned(),
                headers: Vec::new(),
                post_data: None,
                resource_type: Some("websocket".to_owned()),
            };
            let pageref = pages.at(tab_id, ts).map(|index| pages.list[index].id.clone());
            let mut entry = new_entry(&handshake, pageref, ts);
            entry.response.status = 101;
            entry.response.status_text = "Switching Protocols".to_owned();
            open.insert(key, sockets.len());
            sockets.push((ts, entry));
            continue;
        }
        let Some(&index) = open.get(&key) else { continue };
        let entry = &mut sockets[index].1;
        match socket.op {
            WebSocketOp::Sent | WebSocketOp::Received => {
                // Control frames (ping, pong, close) are the browser's business; DevTools leaves them out too.
                let opcode = socket.opcode.unwrap_or(1);
                if opcode == 1 || opcode == 2 {
                    entry.web_socket_messages.push(WebSocketMessage {
                        kind: if socket.op == WebSocketOp::Sent { "send" } else { "receive" }.to_owned(),
                        time: ts / 1000.0,
                        opcode,
                        data: socket.data.clone().unwrap_or_default(),
                    });
                }
            }
            WebSocketOp::Error => entry.error = socket.data.clone().or_else(|| Some("the socket failed".to_owned())),
            WebSocketOp::Opened | WebSocketOp::Closed => {}
        }
    }
    sockets
}

fn new_entry(request: &Request, pageref: Option<String>, ts: f64) -> Entry {
    let cookies = header_value(&request.headers, "cookie").map(parse_cookie_header).unwrap_or_default();
    let post_data = request.post_data.as_ref().map(|text| {
        let mime_type = header_value(&request.headers, "content-type").unwrap_or_default().to_owned();
        let params = match body::parse(text.as_bytes(), Some(&mime_type)) {
            ParsedBody::Form(fields) => fields.into_iter().map(|(name, value)| NameValue { name, value }).collect(),
            _ => Vec::new(),
        };
        PostData { mime_type, text: Some(text.clone()), params, file: None }
    });
    Entry {
        pageref,
        started_date_time: rfc3339_from_millis(ts),
        time: 0.0,
        request: HarRequest {
            method: request.method.clone(),
            url: request.url.clone(),
            http_version: String::new(),
            cookies,
            headers: request.headers.clone(),
            query_string: query_string(&request.url),
            body_size: request.post_data.as_ref().map_or(0, |text| text.len() as i64),
            post_data,
            headers_size: -1,
        },
        response: HarResponse {
            status: 0,
            status_text: String::new(),
            http_version: String::new(),
            cookies: Vec::new(),
            headers: Vec::new(),
            content: Content { size: 0, mime_type: String::new(), text: None, encoding: None, file: None },
            redirect_url: String::new(),
            headers_size: -1,
            body_size: -1,
            transfer_size: None,
        },
        cache: Cache {},
        timings: Timings { blocked: -1.0, dns: -1.0, connect: -1.0, send: 0.0, wait: 0.0, receive: 0.0, ssl: -1.0 },
        server_ip_address: None,
        resource_type: request.resource_type.clone(),
        request_id: Some(request.request_id.clone()),
        error: None,
        web_socket_messages: Vec::new(),
    }
}

fn har_response(response: &Response, request_url: &str, ts: f64) -> HarResponse {
    let mime_type = if response.mime_type.is_empty() {
        header_value(&response.headers, "content-type").unwrap_or_default().to_owned()
    } else {
        response.mime_type.clone()
    };
    let redirect_url = if (300..400).contains(&response.status) {
        header_value(&response.headers, "location").map(|location| resolve(request_url, location)).unwrap_or_default()
    } else {
        String::new()
    };
    let cookies = response
        .headers
        .iter()
        .filter(|h| h.name.eq_ignore_ascii_case("set-cookie"))
        // DevTools joins repeated Set-Cookie headers with newlines.
        .flat_map(|h| h.value.split('\n'))
        .filter_map(|line| parse_set_cookie(line, ts))
        .collect();
    HarResponse {
        status: response.status,
        status_text: response.status_text.clone(),
        http_version: http_version(response.protocol.as_deref()),
        cookies,
        headers: response.headers.clone(),
        content: Content { size: 0, mime_type, text: None, encoding: None, file: None },
        redirect_url,
        headers_size: -1,
        body_size: -1,
        transfer_size: None,
    }
}

fn timings(hop: &Hop<'_>) -> Timings {
    let response_ms = hop.response.map(|response| response.ts);
    // The hop ended when it finished, or when it failed.
    let finished_ms = hop.finished.map(|finished| finished.ts).or(hop.failed.map(|failed| failed.ts));
    let receive = match (response_ms, finished_ms) {
        (Some(response), Some(finished)) => (finished - response).max(0.0),
        _ => 0.0,
    };
    let Some(t) = hop.response.and_then(|response| response.value.timing) else {
        let wait = response_ms.map_or(0.0, |response| (response - hop.request.ts).max(0.0));
        return Timings { blocked: -1.0, dns: -1.0, connect: -1.0, send: 0.0, wait, receive, ssl: -1.0 };
    };
    let span = |start: f64, end: f64| if start >= 0.0 && end >= start { end - start } else { -1.0 };
    let first_activity = [t.dns_start, t.connect_start, t.send_start].into_iter().find(|v| *v >= 0.0);
    Timings {
        blocked: first_activity.unwrap_or(-1.0),
        dns: span(t.dns_start, t.dns_end),
        connect: span(t.connect_start, t.connect_end),
        send: span(t.send_start, t.send_end).max(0.0),
        wait: span(t.send_end, t.receive_headers_end).max(0.0),
        receive,
        ssl: span(t.ssl_start, t.ssl_end),
    }
}

fn http_version(protocol: Option<&str>) -> String {
    match protocol.map(str::to_ascii_lowercase).as_deref() {
        Some("h2") | Some("http/2") | Some("http/2.0") => "HTTP/2".to_owned(),
        Some("h3") | Some("http/3") => "HTTP/3".to_owned(),
        Some("http/1.0") => "HTTP/1.0".to_owned(),
        Some("http/1.1") | None => "HTTP/1.1".to_owned(),
        Some(other) => other.to_ascii_uppercase(),
    }
}

fn resolve(base: &str, location: &str) -> String {
    url::Url::parse(base).and_then(|base| base.join(location)).map_or_else(|_| location.to_owned(), String::from)
}

/// The decoded parameters of a URL's query, in order.
pub fn query_string(url: &str) -> Vec<NameValue> {
    let Ok(url) = url::Url::parse(url) else { return Vec::new() };
    url.query_pairs().map(|(name, value)| NameValue { name: name.into_owned(), value: value.into_owned() }).collect()
}

/// `a=1; b=2` → cookies.
pub fn parse_cookie_header(header: &str) -> Vec<HarCookie> {
    crate::http::cookie_pairs(header)
        .filter_map(|(name, value)| {
            Some(HarCookie { name: name.to_owned(), value: value?.to_owned(), ..HarCookie::default() })
        })
        .collect()
}

/// One `Set-Cookie` value → a cookie; `received_ms` anchors `Max-Age`.
pub fn parse_set_cookie(line: &str, received_ms: f64) -> Option<HarCookie> {
    let mut parts = line.split(';');
    let (name, value) = parts.next()?.trim().split_once('=')?;
    let mut cookie = HarCookie { name: name.trim().to_owned(), value: value.trim().to_owned(), ..HarCookie::default() };
    for attribute in parts {
        let (key, value) = attribute.trim().split_once('=').unwrap_or((attribute.trim(), ""));
        match key.to_ascii_lowercase().as_str() {
            "path" => cookie.path = Some(value.to_owned()),
            "domain" => cookie.domain = Some(value.to_owned()),
            "expires" if cookie.expires.is_none() => cookie.expires = Some(http_date_to_rfc3339(value)),
            "max-age" => {
                if let Ok(seconds) = value.parse::<f64>() {
                    cookie.expires = Some(rfc3339_from_millis(received_ms + seconds * 1000.0));
                }
            }
            "httponly" => cookie.http_only = Some(true),
            "secure" => cookie.secure = Some(true),
            "samesite" => cookie.same_site = Some(value.to_owned()),
            _ => {}
        }
    }
    Some(cookie)
}

/// `Wed, 21 Oct 2015 07:28:00 GMT` → RFC 3339; left as it was when it does not parse.
fn http_date_to_rfc3339(value: &str) -> String {
    let normalized = value.trim().replace('-', " ");
    match time::OffsetDateTime::parse(&normalized, &time::format_description::well_known::Rfc2822) {
        Ok(at) => rfc3339_from_millis(at.unix_timestamp() as f64 * 1000.0),
        Err(_) => value.to_owned(),
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use trace_manifest::event::{
        BodyPart, BodyStored, Event, Navigation, NavigationCause, PageLoad, RequestFailed, RequestFinished,
        WebSocketEvent,
    };
    use trace_manifest::testing::{request, response};

    fn record(id: u64, ts: f64, kind: EventKind) -> EventRecord {
        EventRecord { id, event: Event { ts, tab_id: Some(1), frame_id: None, kind } }
    }

    fn creator() -> Creator {
        Creator { name: "test".into(), version: "0".into() }
    }

    #[test]
    fn redirect_chain_becomes_two_entries_with_redirect_url_and_one_body() {
        let events = vec![
            record(
                0,
                1000.0,
                EventKind::Navigation(Navigation {
                    url: "http://127.0.0.1:8000/login".into(),
                    cause: NavigationCause::Typed,
                    main_frame: true,
                }),
            ),
            record(
                1,
                1001.0,
                request(
                    "r1",
                    "POST",
                    "http://127.0.0.1:8000/login",
                    &[("Content-Type", "application/x-www-form-urlencoded"), ("Cookie", "csrf=abc; theme=dark")],
                    Some("user=ann&pass=s%21"),
                ),
            ),
            record(
                2,
                1010.0,
                response(
                    "r1",
                    "http://127.0.0.1:8000/login",
                    302,
                    "text/html",
                    &[("Location", "/account?tab=1"), ("Set-Cookie", "sid=42; Path=/; HttpOnly\nlang=en; Max-Age=60")],
                ),
            ),
            record(3, 1011.0, request("r1", "GET", "http://127.0.0.1:8000/account?tab=1&q=a+b", &[], None)),
            record(4, 1020.0, response("r1", "http://127.0.0.1:8000/account?tab=1&q=a+b", 200, "text/html", &[])),
            record(
                5,
                1030.0,
                EventKind::Body(BodyStored {
                    request_id: "r1".into(),
                    part: BodyPart::Response,
                    sha256: "ab".repeat(32),
                    size: 5,
                    omitted: false,
                }),
            ),
            record(
                6,
                1031.0,
                EventKind::RequestFinished(RequestFinished { request_id: "r1".into(), encoded_data_length: 99 }),
            ),
            record(
                7,
                1040.0,
                EventKind::PageLoad(PageLoad {
                    url: "http://127.0.0.1:8000/account".into(),
                    title: "Account".into(),
                    dom_content_loaded_ms: Some(20.0),
                    load_ms: None,
                }),
            ),
            record(8, 1050.0, request("r2", "GET", "http://127.0.0.1:9/gone", &[], None)),
            record(
                9,
                1051.0,
                EventKind::RequestFailed(RequestFailed {
                    request_id: "r2".into(),
                    error_text: "net::ERR_CONNECTION_REFUSED".into(),
                    canceled: false,
                }),
            ),
        ];
        let har = build(creator(), None, &events);
        let log = &har.log;
        assert_eq!(log.pages.len(), 1);
        assert_eq!(log.pages[0].title, "Account");
        assert_eq!(log.pages[0].page_timings.on_load, Some(40.0));
        assert_eq!(log.entries.len(), 3);

        let login = &log.entries[0];
        assert_eq!(login.pageref.as_deref(), Some("page_1"));
        assert_eq!(login.response.status, 302);
        assert_eq!(login.response.redirect_url, "http://127.0.0.1:8000/account?tab=1");
        assert_eq!(login.request.cookies.iter().map(|c| c.name.as_str()).collect::<Vec<_>>(), ["csrf", "theme"]);
        let post = login.request.post_data.as_ref().unwrap();
        assert_eq!(post.text.as_deref(), Some("user=ann&pass=s%21"));
        assert_eq!(post.params[1], NameValue { name: "pass".into(), value: "s!".into() });
        assert_eq!(login.response.cookies.len(), 2);
        assert_eq!(login.response.cookies[0].http_only, Some(true));
        assert_eq!(login.response.cookies[1].expires.as_deref(), Some("1970-01-01T00:01:01.010Z"));
        assert_eq!(login.response.content.file, None, "the redirect hop has no body");

        let account = &log.entries[1];
        assert_eq!(account.request.query_string[1], NameValue { name: "q".into(), value: "a b".into() });
        assert_eq!(account.response.content.file.as_deref(), Some(format!("resources/{}", "ab".repeat(32)).as_str()));
        assert_eq!(account.response.content.size, 5);
        assert_eq!(account.response.body_size, 99);
        assert_eq!(account.timings.wait, 9.0);
        assert_eq!(account.timings.receive, 11.0);
        assert_eq!(account.time, 20.0);

        let failed = &log.entries[2];
        assert_eq!(failed.response.status, 0);
        assert_eq!(failed.error.as_deref(), Some("net::ERR_CONNECTION_REFUSED"));
    }

    #[test]
    fn exchanges_logged_in_completion_order_keep_their_page_start_order_and_body() {
        let navigation = |id, ts, url: &str| {
            record(
                id,
                ts,
                EventKind::Navigation(Navigation { url: url.into(), cause: NavigationCause::Link, main_frame: true }),
            )
        };
        let events = vec![
            navigation(0, 0.0, "http://h/a"),
            navigation(1, 100.0, "http://h/b"),
            // A slow request of page a, logged after page b started, its body logged before it.
            record(
                2,
                150.0,
                EventKind::Body(BodyStored {
                    request_id: "slow".into(),
                    part: BodyPart::Response,
                    sha256: "cd".repeat(32),
                    size: 9,
                    omitted: false,
                }),
            ),
            record(3, 120.0, request("fast", "GET", "http://h/b.css", &[], None)),
            record(4, 50.0, request("slow", "GET", "http://h/a.js", &[], None)),
            record(5, 140.0, response("slow", "http://h/a.js", 200, "text/html", &[])),
        ];
        let har = build(creator(), None, &events);
        let urls: Vec<&str> = har.log.entries.iter().map(|e| e.request.url.as_str()).collect();
        assert_eq!(urls, ["http://h/a.js", "http://h/b.css"]);
        assert_eq!(har.log.entries[0].pageref.as_deref(), Some("page_1"));
        assert_eq!(har.log.entries[1].pageref.as_deref(), Some("page_2"));
        assert_eq!(har.log.entries[0].response.content.size, 9);
    }

    /// Issue #45: a body its recorder left out (past a replay session's budget) keeps its size and names
    /// no file, so that the HAR references nothing the bundle lacks.
    #[test]
    fn a_body_left_out_has_its_size_and_no_file() {
        let left_out = |id: u64, part| {
            record(
                id,
                2.0,
                EventKind::Body(BodyStored {
                    request_id: "up".into(),
                    part,
                    sha256: "ef".repeat(32),
                    size: 60 << 20,
                    omitted: true,
                }),
            )
        };
        let events = vec![
            record(0, 0.0, request("up", "POST", "http://h/upload", &[("Content-Type", "text/plain")], None)),
            left_out(1, BodyPart::Request),
            record(2, 3.0, response("up", "http://h/upload", 200, "text/plain", &[])),
            left_out(3, BodyPart::Response),
        ];
        let har = build(creator(), None, &events);
        let entry = &har.log.entries[0];
        assert_eq!(entry.request.body_size, 60 << 20);
        assert_eq!(entry.request.post_data.as_ref().map(|post| post.file.clone()), Some(None));
        assert_eq!((entry.response.content.size, entry.response.content.file.as_deref()), (60 << 20, None));
        let exchange = crate::exchange::exchanges(&events).remove(0);
        assert_eq!((exchange.request_body_file, exchange.response_body_file), (None, None));
    }

    #[test]
    fn har_serializes_with_spec_field_names() {
        let events = vec![
            record(0, 0.0, request("a", "GET", "http://h/", &[], None)),
            record(1, 1.0, response("a", "http://h/", 200, "text/html", &[])),
        ];
        let json = serde_json::to_value(build(creator(), None, &events)).unwrap();
        let entry = &json["log"]["entries"][0];
        for field in ["startedDateTime", "time", "cache", "timings", "serverIPAddress", "_resourceType"] {
            assert!(entry.get(field).is_some(), "entry lacks {field}: {entry}");
        }
        for field in ["redirectURL", "headersSize", "bodySize", "httpVersion", "statusText"] {
            assert!(entry["response"].get(field).is_some(), "response lacks {field}");
        }
        assert_eq!(entry["request"]["queryString"], serde_json::json!([]));
        assert_eq!(json["log"]["version"], "1.2");
    }

    #[test]
    fn a_websocket_is_an_entry_with_its_frames_as_devtools_writes_them() {
        let socket = |op, url: Option<&str>, opcode: Option<u8>, data: Option<&str>| {
            EventKind::WebSocket(WebSocketEvent {
                request_id: "ws1".into(),
                op,
                url: url.map(str::to_owned),
                opcode,
                data: data.map(str::to_owned),
            })
        };
        let events = vec![
            record(0, 1_000.0, request("a", "GET", "http://h/chat", &[], None)),
            record(1, 1_010.0, response("a", "http://h/chat", 200, "text/html", &[])),
            record(2, 1_500.0, socket(WebSocketOp::Opened, Some("ws://h/chat/socket"), None, None)),
            record(3, 1_600.0, socket(WebSocketOp::Sent, None, Some(1), Some("{\"say\":\"hi\"}"))),
            record(4, 1_700.0, socket(WebSocketOp::Received, None, Some(9), Some(""))),
            record(5, 1_750.0, socket(WebSocketOp::Received, None, Some(2), Some("AAE="))),
            record(6, 1_800.0, socket(WebSocketOp::Closed, None, None, None)),
        ];
        let har = build(creator(), None, &events);
        assert_eq!(har.log.entries.len(), 2);
        let entry = &har.log.entries[1];
        assert_eq!((entry.request.url.as_str(), entry.response.status), ("ws://h/chat/socket", 101));
        assert_eq!(entry.resource_type.as_deref(), Some("websocket"));
        assert_eq!(entry.pageref.as_deref(), har.log.entries[0].pageref.as_deref());
        let json = serde_json::to_value(entry).unwrap();
        assert_eq!(
            json["_webSocketMessages"],
            serde_json::json!([
                {"type": "send", "time": 1.6, "opcode": 1, "data": "{\"say\":\"hi\"}"},
                {"type": "receive", "time": 1.75, "opcode": 2, "data": "AAE="},
            ]),
            "a ping is left out"
        );
        assert!(serde_json::to_value(&har.log.entries[0]).unwrap().get("_webSocketMessages").is_none());
    }

    #[test]
    fn inline_content_is_text_for_text_and_base64_for_binary() {
        let mut content = Content {
            size: 3,
            mime_type: "application/json".into(),
            text: None,
            encoding: None,
            file: Some("resources/x".into()),
        };
        content.set_inline(b"{}\n");
        assert_eq!(
            (content.text.as_deref(), content.encoding.as_deref(), content.file.as_deref()),
            (Some("{}\n"), None, None)
        );
        content.mime_type = "image/png".into();
        content.set_inline(&[0x89, b'P', b'N', b'G']);
        assert_eq!((content.text.as_deref(), content.encoding.as_deref()), (Some("iVBORw=="), Some("base64")));
    }

    #[test]
    fn set_cookie_expires_in_http_date_form_becomes_rfc3339() {
        let cookie = parse_set_cookie("id=a3fWa; Expires=Wed, 21 Oct 2015 07:28:00 GMT; Secure", 0.0).unwrap();
        assert_eq!(cookie.expires.as_deref(), Some("2015-10-21T07:28:00.000Z"));
        assert_eq!(cookie.secure, Some(true));
    }
}
