//! The HAR 1.2 model (<http://www.softwareishard.com/blog/har-12-spec/>). Its construction from recorded
//! events is `trace_analysis::har`'s; every HAR TRACE writes is serialized from these types.
//!
//! The HAR is a view of `events.jsonl` for the tools that speak HAR: Playwright's `routeFromHAR` (which reads
//! a zip whose HAR points at sibling files through `content._file`), Chrome DevTools' import, and the WebArena
//! evaluator. Bodies are referenced by `content._file` (and `postData._file` for binary request bodies)
//! rather than inlined; [`Content::set_inline`] inlines them for tools that want one file.

use base64::Engine as _;
use serde::{Deserialize, Serialize};

use crate::event::{Cookie, Header};
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
    /// A WebSocket's frames both ways, on the socket's entry, as Chrome DevTools writes and reads them.
    #[serde(default, rename = "_webSocketMessages", skip_serializing_if = "Vec::is_empty")]
    pub web_socket_messages: Vec<WebSocketMessage>,
}

/// One frame of a WebSocket, in DevTools' HAR extension.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub struct WebSocketMessage {
    /// `send` (by the page) or `receive` (from the server).
    #[serde(rename = "type")]
    pub kind: String,
    /// When it passed, in seconds since the Unix epoch.
    pub time: f64,
    /// 1 for text, 2 for binary (whose `data` is base64).
    pub opcode: u8,
    pub data: String,
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

    /// Puts `body` into `text` when it is text (by its MIME type, and UTF-8), and returns whether it did; a
    /// binary body keeps its `_file`, for readers that ignore `encoding` (WebArena Verified).
    pub fn set_inline_if_text(&mut self, body: &[u8]) -> bool {
        let text = is_textual(&self.mime_type) && std::str::from_utf8(body).is_ok();
        if text {
            self.set_inline(body);
        }
        text
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

impl PostData {
    /// Puts `body` (read from `_file`) into `text` when it is UTF-8, and returns whether it did. HAR's
    /// postData has no encoding field: a binary body keeps its `_file`.
    pub fn set_inline_if_text(&mut self, body: Vec<u8>) -> bool {
        match String::from_utf8(body) {
            Ok(text) => {
                self.text = Some(text);
                self.file = None;
                true
            }
            Err(_) => false,
        }
    }
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

/// Whether a body of this MIME type is text, and so kept as text rather than base64.
pub fn is_textual(mime_type: &str) -> bool {
    let mime_type = mime_type.to_ascii_lowercase();
    mime_type.starts_with("text/")
        || ["json", "javascript", "xml", "html", "css", "svg", "x-www-form-urlencoded"]
            .iter()
            .any(|kind| mime_type.contains(kind))
}
