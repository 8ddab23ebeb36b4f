//! The HAR 1.2 model (<http://www.softwareishard.com/blog/har-12-spec/>) and its construction from
//! recorded events.
//!
//! The HAR is a view of `events.jsonl` for the tools that speak HAR: Playwright's `routeFromHAR` (which reads
//! a zip whose HAR points at sibling files through `content._file`), Chrome DevTools' import, and the WebArena
//! evaluator. Bodies are referenced by `content._file` (and `postData._file` for binary request bodies)
//! rather than inlined; [`Content::set_inline`] inlines them for tools that want one file.

use std::collections::HashMap;

use base64::Engine as _;
use serde::{Deserialize, Serialize};

use crate::event::{
    BodyPart, BodyStored, Cookie, EventKind, EventRecord, Header, Request, ResourceTiming, Response, header_value,
};
use crate::time_fmt::rfc3339_from_millis;

#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub struct Har {
    pub log: Log,
}

#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub struct Log {
    pub version: String,
    pub creator: Creator,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub browser: Option<Creator>,
    #[serde(default)]
    pub pages: Vec<Page>,
    pub entries: Vec<Entry>,
}

#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub struct Creator {
    pub name: String,
    pub version: String,
}

#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
#[serde(rename_all = "camelCase")]
pub struct Page {
    pub started_date_time: String,
    pub id: String,
    pub title: String,
    pub page_timings: PageTimings,
}

#[derive(Debug, Clone, Default, PartialEq, Serialize, Deserialize)]
#[serde(rename_all = "camelCase")]
pub struct PageTimings {
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub on_content_load: Option<f64>,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub on_load: Option<f64>,
}

#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
#[serde(rename_all = "camelCase")]
pub struct Entry {
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub pageref: Option<String>,
    pub started_date_time: String,
    pub time: f64,
    pub request: HarRequest,
    pub response: HarResponse,
    pub cache: Cache,
    pub timings: Timings,
    #[serde(default, rename = "serverIPAddress", skip_serializing_if = "Option::is_none")]
    pub server_ip_address: Option<String>,
    #[serde(default, rename = "_resourceType", skip_serializing_if = "Option::is_none")]
    pub resource_type: Option<String>,
    /// The browser's request id, so that an entry can be traced back to its events.
    #[serde(default, rename = "_requestId", skip_serializing_if = "Option::is_none")]
    pub request_id: Option<String>,
    /// Why no response was recorded (network error, cancelled, still pending when recording stopped).
    #[serde(default, rename = "_error", skip_serializing_if = "Option::is_none")]
    pub error: Option<String>,
}

#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
#[serde(rename_all = "camelCase")]
pub struct HarRequest {
    pub method: String,
    pub url: String,
    pub http_version: String,
    pub cookies: Vec<HarCookie>,
    pub headers: Vec<Header>,
    pub query_string: Vec<NameValue>,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub post_data: Option<PostData>,
    pub headers_size: i64,
    pub body_size: i64,
}

#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
#[serde(rename_all = "camelCase")]
pub struct HarResponse {
    pub status: u16,
    pub status_text: String,
    pub http_version: String,
    pub cookies: Vec<HarCookie>,
    pub headers: Vec<Header>,
    pub content: Content,
    #[serde(rename = "redirectURL")]
    pub redirect_url: String,
    pub headers_size: i64,
    pub body_size: i64,
    #[serde(default, rename = "_transferSize", skip_serializing_if = "Option::is_none")]
    pub transfer_size: Option<u64>,
}

#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
#[serde(rename_all = "camelCase")]
pub struct Content {
    pub size: i64,
    #[serde(default)]
    pub mime_type: String,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub text: Option<String>,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub encoding: Option<String>,
    /// The body's path inside the bundle.
    #[serde(default, rename = "_file", skip_serializing_if = "Option::is_none")]
    pub file: Option<String>,
}

impl Content {
    /// Puts `body` into `text`: as is when it is UTF-8 text, base64 with `encoding: "base64"` otherwise.
    pub fn set_inline(&mut self, body: &[u8]) {
        match std::str::from_utf8(body) {
            Ok(text) if is_textual(&self.mime_type) || body.is_empty() => {
                self.text = Some(text.to_owned());
                self.encoding = None;
            }
            _ => {
                self.text = Some(base64::engine::general_purpose::STANDARD.encode(body));
                self.encoding = Some("base64".to_owned());
            }
        }
        self.file = None;
    }
}

#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
#[serde(rename_all = "camelCase")]
pub struct PostData {
    pub mime_type: String,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub text: Option<String>,
    #[serde(default, skip_serializing_if = "Vec::is_empty")]
    pub params: Vec<NameValue>,
    /// A binary request body's path inside the bundle.
    #[serde(default, rename = "_file", skip_serializing_if = "Option::is_none")]
    pub file: Option<String>,
}

#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
pub struct NameValue {
    pub name: String,
    pub value: String,
}

#[derive(Debug, Clone, Default, PartialEq, Serialize, Deserialize)]
#[serde(rename_all = "camelCase")]
pub struct HarCookie {
    pub name: String,
    pub value: String,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub path: Option<String>,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub domain: Option<String>,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub expires: Option<String>,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub http_only: Option<bool>,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub secure: Option<bool>,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub same_site: Option<String>,
}

impl From<&Cookie> for HarCookie {
    fn from(cookie: &Cookie) -> HarCookie {
        HarCookie {
            name: cookie.name.clone(),
            value: cookie.value.clone(),
            path: Some(cookie.path.clone()),
            domain: Some(cookie.domain.clone()),
            expires: cookie.expires.map(|seconds| rfc3339_from_millis(seconds * 1000.0)),
            http_only: Some(cookie.http_only),
            secure: Some(cookie.secure),
            same_site: cookie.same_site.clone(),
        }
    }
}

#[derive(Debug, Clone, Default, PartialEq, Serialize, Deserialize)]
pub struct Cache {}

/// Phase durations in milliseconds; -1 where a phase did not apply.
#[derive(Debug, Clone, Copy, PartialEq, Serialize, Deserialize)]
pub struct Timings {
    pub blocked: f64,
    pub dns: f64,
    pub connect: f64,
    pub send: f64,
    pub wait: f64,
    pub receive: f64,
    pub ssl: f64,
}

impl Timings {
    /// The entry's total time: the sum of the phases that applied (`ssl` is part of `connect`).
    pub fn total(&self) -> f64 {
        [self.blocked, self.dns, self.connect, self.send, self.wait, self.receive]
            .into_iter()
            .filter(|t| *t > 0.0)
            .sum()
    }
}

/// Builds the HAR of a recording from its events, in event order.
pub fn build(creator: Creator, browser: Option<Creator>, events: &[EventRecord]) -> Har {
    let mut builder = Builder::default();
    for record in events {
        builder.add(record);
    }
    builder.finish(creator, browser)
}

/// Events may come in completion order rather than start order (a recorder emits an exchange once it has
/// all of it), so pages are found by time, entries are sorted by start, and a body that comes before its
/// request waits for it.
#[derive(Default)]
struct Builder {
    pages: Vec<Page>,
    page_start_ms: Vec<f64>,
    /// Tab id → (start, page index) of each of its pages, in start order.
    tab_pages: HashMap<Option<i64>, Vec<(f64, usize)>>,
    entries: Vec<PendingEntry>,
    /// Request id → index of its latest entry (the latest hop of a redirect chain).
    latest_entry: HashMap<String, usize>,
    /// Bodies whose request has not been seen yet.
    early_bodies: HashMap<String, Vec<BodyStored>>,
}

struct PendingEntry {
    entry: Entry,
    request_ms: f64,
    response_ms: Option<f64>,
    finished_ms: Option<f64>,
    timing: Option<ResourceTiming>,
}

impl Builder {
    fn add(&mut self, record: &EventRecord) {
        let event = &record.event;
        match &event.kind {
            EventKind::Navigation(nav) if nav.main_frame => {
                let id = format!("page_{}", self.pages.len() + 1);
                self.pages.push(Page {
                    started_date_time: rfc3339_from_millis(event.ts),
                    id,
                    title: nav.url.clone(),
                    page_timings: PageTimings::default(),
                });
                self.page_start_ms.push(event.ts);
                let pages = self.tab_pages.entry(event.tab_id).or_default();
                pages.push((event.ts, self.pages.len() - 1));
                pages.sort_by(|a, b| a.0.total_cmp(&b.0));
            }
            EventKind::PageLoad(load) if event.frame_id.is_none() => {
                if let Some(index) = self.page_at(event.tab_id, event.ts) {
                    let page = &mut self.pages[index];
                    if !load.title.is_empty() {
                        page.title = load.title.clone();
                    }
                    page.page_timings = PageTimings {
                        on_content_load: load.dom_content_loaded_ms,
                        on_load: load.load_ms.or(Some(event.ts - self.page_start_ms[index])),
                    };
                }
            }
            EventKind::Request(request) => {
                let pageref = self.page_at(event.tab_id, event.ts).map(|i| self.pages[i].id.clone());
                self.latest_entry.insert(request.request_id.clone(), self.entries.len());
                self.entries.push(PendingEntry {
                    entry: new_entry(request, pageref, event.ts),
                    request_ms: event.ts,
                    response_ms: None,
                    finished_ms: None,
                    timing: None,
                });
                for body in self.early_bodies.remove(&request.request_id).unwrap_or_default() {
                    self.attach_body(&body);
                }
            }
            EventKind::Response(response) => {
                if let Some(pending) = self.latest(&response.request_id) {
                    let earlier_body = pending.entry.response.content.file.take();
                    let earlier_size = pending.entry.response.content.size;
                    pending.entry.response = har_response(response, &pending.entry.request.url, event.ts);
                    if earlier_body.is_some() {
                        pending.entry.response.content.file = earlier_body;
                        pending.entry.response.content.size = earlier_size;
                    }
                    pending.entry.request.http_version = pending.entry.response.http_version.clone();
                    pending.entry.server_ip_address = response.remote_ip_address.clone();
                    pending.entry.error = None;
                    pending.response_ms = Some(event.ts);
                    pending.timing = response.timing;
                }
            }
            EventKind::RequestFinished(finished) => {
                if let Some(pending) = self.latest(&finished.request_id) {
                    pending.finished_ms = Some(event.ts);
                    pending.entry.response.body_size = finished.encoded_data_length as i64;
                    pending.entry.response.transfer_size = Some(finished.encoded_data_length);
                }
            }
            EventKind::RequestFailed(failed) => {
                if let Some(pending) = self.latest(&failed.request_id) {
                    pending.finished_ms = Some(event.ts);
                    pending.entry.error = Some(if failed.canceled {
                        format!("canceled: {}", failed.error_text)
                    } else {
                        failed.error_text.clone()
                    });
                }
            }
            EventKind::Body(body) => self.attach_body(body),
            _ => {}
        }
    }

    /// The page a tab showed at `ts`: the latest one started by then.
    fn page_at(&self, tab_id: Option<i64>, ts: f64) -> Option<usize> {
        let pages = self.tab_pages.get(&tab_id)?;
        pages.iter().rev().find(|(start, _)| *start <= ts).or(pages.first()).map(|(_, index)| *index)
    }

    fn attach_body(&mut self, body: &BodyStored) {
        let Some(pending) = self.latest(&body.request_id) else {
            self.early_bodies.entry(body.request_id.clone()).or_default().push(body.clone());
            return;
        };
        match body.part {
            BodyPart::Response => {
                let content = &mut pending.entry.response.content;
                content.size = body.size as i64;
                content.file = Some(body.path());
            }
            BodyPart::Request => {
                let request = &mut pending.entry.request;
                request.body_size = body.size as i64;
                let mime_type = header_value(&request.headers, "content-type").unwrap_or_default();
                let post_data = request.post_data.get_or_insert_with(|| PostData {
                    mime_type: mime_type.to_owned(),
                    text: None,
                    params: Vec::new(),
                    file: None,
                });
                post_data.file = Some(body.path());
            }
        }
    }

    fn latest(&mut self, request_id: &str) -> Option<&mut PendingEntry> {
        let index = *self.latest_entry.get(request_id)?;
        self.entries.get_mut(index)
    }

    fn finish(mut self, creator: Creator, browser: Option<Creator>) -> Har {
        self.entries.sort_by(|a, b| a.request_ms.total_cmp(&b.request_ms));
        let entries = self
            .entries
            .into_iter()
            .map(|mut pending| {
                if pending.response_ms.is_none() && pending.entry.error.is_none() {
                    pending.entry.error = Some("no response was recorded".to_owned());
                }
                pending.entry.timings = timings(&pending);
                pending.entry.time = pending.entry.timings.total();
                pending.entry
            })
            .collect();
        Har { log: Log { version: "1.2".to_owned(), creator, browser, pages: self.pages, entries } }
    }
}

fn new_entry(request: &Request, pageref: Option<String>, ts: f64) -> Entry {
    let cookies = header_value(&request.headers, "cookie").map(parse_cookie_header).unwrap_or_default();
    let post_data = request.post_data.as_ref().map(|text| {
        let mime_type = header_value(&request.headers, "content-type").unwrap_or_default().to_owned();
        let params = if mime_type.starts_with("application/x-www-form-urlencoded") {
            url::form_urlencoded::parse(text.as_bytes())
                .map(|(name, value)| NameValue { name: name.into_owned(), value: value.into_owned() })
                .collect()
        } else {
            Vec::new()
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

fn timings(pending: &PendingEntry) -> Timings {
    let receive = match (pending.response_ms, pending.finished_ms) {
        (Some(response), Some(finished)) => (finished - response).max(0.0),
        _ => 0.0,
    };
    let Some(t) = pending.timing else {
        let wait = pending.response_ms.map_or(0.0, |response| (response - pending.request_ms).max(0.0));
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
    header
        .split(';')
        .filter_map(|pair| {
            let (name, value) = pair.trim().split_once('=')?;
            Some(HarCookie { name: name.trim().to_owned(), value: value.trim().to_owned(), ..HarCookie::default() })
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

fn is_textual(mime_type: &str) -> bool {
    let mime_type = mime_type.to_ascii_lowercase();
    mime_type.starts_with("text/")
        || ["json", "javascript", "xml", "html", "css", "svg", "x-www-form-urlencoded"]
            .iter()
            .any(|kind| mime_type.contains(kind))
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::event::{Event, Navigation, NavigationCause, PageLoad, RequestFailed, RequestFinished};

    fn record(id: u64, ts: f64, kind: EventKind) -> EventRecord {
        EventRecord { id, event: Event { ts, tab_id: Some(1), frame_id: None, kind } }
    }

    fn request(id: &str, method: &str, url: &str, headers: Vec<Header>, post_data: Option<&str>) -> EventKind {
        EventKind::Request(Request {
            request_id: id.into(),
            url: url.into(),
            method: method.into(),
            headers,
            post_data: post_data.map(str::to_owned),
            resource_type: Some("Document".into()),
        })
    }

    fn response(id: &str, url: &str, status: u16, headers: Vec<Header>) -> EventKind {
        EventKind::Response(Response {
            request_id: id.into(),
            url: url.into(),
            status,
            status_text: "x".into(),
            protocol: Some("http/1.1".into()),
            headers,
            mime_type: "text/html".into(),
            remote_ip_address: Some("127.0.0.1".into()),
            from_cache: false,
            timing: None,
        })
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
                    vec![
                        Header::new("Content-Type", "application/x-www-form-urlencoded"),
                        Header::new("Cookie", "csrf=abc; theme=dark"),
                    ],
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
                    vec![
                        Header::new("Location", "/account?tab=1"),
                        Header::new("Set-Cookie", "sid=42; Path=/; HttpOnly\nlang=en; Max-Age=60"),
                    ],
                ),
            ),
            record(3, 1011.0, request("r1", "GET", "http://127.0.0.1:8000/account?tab=1&q=a+b", vec![], None)),
            record(4, 1020.0, response("r1", "http://127.0.0.1:8000/account?tab=1&q=a+b", 200, vec![])),
            record(
                5,
                1030.0,
                EventKind::Body(BodyStored {
                    request_id: "r1".into(),
                    part: BodyPart::Response,
                    sha256: "ab".repeat(32),
                    size: 5,
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
            record(8, 1050.0, request("r2", "GET", "http://127.0.0.1:9/gone", vec![], None)),
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
                }),
            ),
            record(3, 120.0, request("fast", "GET", "http://h/b.css", vec![], None)),
            record(4, 50.0, request("slow", "GET", "http://h/a.js", vec![], None)),
            record(5, 140.0, response("slow", "http://h/a.js", 200, vec![])),
        ];
        let har = build(creator(), None, &events);
        let urls: Vec<&str> = har.log.entries.iter().map(|e| e.request.url.as_str()).collect();
        assert_eq!(urls, ["http://h/a.js", "http://h/b.css"]);
        assert_eq!(har.log.entries[0].pageref.as_deref(), Some("page_1"));
        assert_eq!(har.log.entries[1].pageref.as_deref(), Some("page_2"));
        assert_eq!(har.log.entries[0].response.content.size, 9);
    }

    #[test]
    fn har_serializes_with_spec_field_names() {
        let events = vec![
            record(0, 0.0, request("a", "GET", "http://h/", vec![], None)),
            record(1, 1.0, response("a", "http://h/", 200, vec![])),
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
