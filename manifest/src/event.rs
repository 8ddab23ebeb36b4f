//! The events a recording is made of, in the order they happened.
//!
//! Network events mirror the Chrome DevTools Protocol closely (the extension records through
//! `chrome.debugger`), so that nothing is lost on the way; [`crate::har`] turns them into HAR. One HTTP
//! exchange is a `request`, then a `response` (or `request_failed`), then `request_finished`; a redirect is a
//! `response` with a 3xx status followed by a new `request` with the same `request_id`. Bodies travel
//! separately as chunks and are recorded by the host as a `body` event once complete.
//!
//! Events that carry files (screenshots, DOM snapshots) are written by the host when it stores the file; the
//! extension sends those as their own wire messages (see [`crate::wire`]).

use schemars::JsonSchema;
use serde::{Deserialize, Serialize};

/// One recorded event, as sent by the extension.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize, JsonSchema)]
pub struct Event {
    /// Wall-clock time, milliseconds since the Unix epoch.
    pub ts: f64,
    /// The browser tab the event belongs to, if any (service workers have none).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub tab_id: Option<i64>,
    /// The frame within the tab; absent for the main frame or when unknown.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub frame_id: Option<String>,
    #[serde(flatten)]
    pub kind: EventKind,
}

/// An event as stored in a bundle's `events.jsonl`: the host numbers events from 0 in commit order.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize, JsonSchema)]
pub struct EventRecord {
    pub id: u64,
    #[serde(flatten)]
    pub event: Event,
}

#[derive(Debug, Clone, PartialEq, Serialize, Deserialize, JsonSchema)]
#[serde(tag = "type", rename_all = "snake_case")]
pub enum EventKind {
    Navigation(Navigation),
    PageLoad(PageLoad),
    Request(Request),
    Response(Response),
    RequestFinished(RequestFinished),
    RequestFailed(RequestFailed),
    /// Written by the host when a streamed body is complete.
    Body(BodyStored),
    /// Boxed: an action with its element's description is the largest kind by far.
    Action(Box<Action>),
    Tab(TabEvent),
    /// Written by the host when it stores a screenshot.
    Screenshot(ScreenshotStored),
    /// Written by the host when it stores a DOM snapshot.
    DomSnapshot(DomSnapshotStored),
    DomMutations(MutationSummary),
    Console(ConsoleMessage),
    Storage(StorageSnapshot),
    #[serde(rename = "websocket")]
    WebSocket(WebSocketEvent),
}

impl EventKind {
    /// The `type` tag this kind serializes with.
    pub fn name(&self) -> &'static str {
        match self {
            EventKind::Navigation(_) => "navigation",
            EventKind::PageLoad(_) => "page_load",
            EventKind::Request(_) => "request",
            EventKind::Response(_) => "response",
            EventKind::RequestFinished(_) => "request_finished",
            EventKind::RequestFailed(_) => "request_failed",
            EventKind::Body(_) => "body",
            EventKind::Action(_) => "action",
            EventKind::Tab(_) => "tab",
            EventKind::Screenshot(_) => "screenshot",
            EventKind::DomSnapshot(_) => "dom_snapshot",
            EventKind::DomMutations(_) => "dom_mutations",
            EventKind::Console(_) => "console",
            EventKind::Storage(_) => "storage",
            EventKind::WebSocket(_) => "websocket",
        }
    }

    /// Kinds that only the host writes; the extension may not send them as events.
    pub fn is_host_written(&self) -> bool {
        matches!(self, EventKind::Body(_) | EventKind::Screenshot(_) | EventKind::DomSnapshot(_))
    }
}

/// An HTTP header exactly as sent or received (names keep their case, repeats stay separate).
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize, JsonSchema)]
pub struct Header {
    pub name: String,
    pub value: String,
}

impl Header {
    pub fn new(name: impl Into<String>, value: impl Into<String>) -> Header {
        Header { name: name.into(), value: value.into() }
    }
}

/// The first value of a header, compared case-insensitively.
pub fn header_value<'a>(headers: &'a [Header], name: &str) -> Option<&'a str> {
    headers.iter().find(|h| h.name.eq_ignore_ascii_case(name)).map(|h| h.value.as_str())
}

/// A frame committed a new document.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize, JsonSchema)]
pub struct Navigation {
    pub url: String,
    /// How the navigation came about (Chrome's transition type, simplified).
    pub cause: NavigationCause,
    /// False for a navigation inside an iframe.
    #[serde(default = "yes")]
    pub main_frame: bool,
}

fn yes() -> bool {
    true
}

#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize, Deserialize, JsonSchema)]
#[serde(rename_all = "snake_case")]
pub enum NavigationCause {
    Typed,
    Link,
    FormSubmit,
    Reload,
    BackForward,
    Redirect,
    /// Within the document: `history.pushState` or `replaceState`, or a fragment.
    Script,
    Other,
}

/// A document finished loading.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize, JsonSchema)]
pub struct PageLoad {
    pub url: String,
    #[serde(default)]
    pub title: String,
    /// Milliseconds from navigation start to `DOMContentLoaded`.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub dom_content_loaded_ms: Option<f64>,
    /// Milliseconds from navigation start to the `load` event.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub load_ms: Option<f64>,
}

/// A request as the browser sent it.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize, JsonSchema)]
pub struct Request {
    /// The browser's id for the exchange; shared by the hops of a redirect chain.
    pub request_id: String,
    pub url: String,
    pub method: String,
    /// The headers actually sent, including cookies and `sec-fetch-*`.
    pub headers: Vec<Header>,
    /// The request body when it is text. Binary bodies arrive as a `body` with part `request`.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub post_data: Option<String>,
    /// DevTools resource type: Document, Stylesheet, Image, XHR, Fetch, Script, Font, ...
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub resource_type: Option<String>,
}

/// A response's status and headers (its body arrives separately).
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize, JsonSchema)]
pub struct Response {
    pub request_id: String,
    pub url: String,
    pub status: u16,
    #[serde(default)]
    pub status_text: String,
    /// The protocol as the browser reports it: "http/1.1", "h2", "h3".
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub protocol: Option<String>,
    pub headers: Vec<Header>,
    #[serde(default)]
    pub mime_type: String,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub remote_ip_address: Option<String>,
    #[serde(default)]
    pub from_cache: bool,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub timing: Option<ResourceTiming>,
}

/// The browser's timing of one exchange, as DevTools reports it: `request_time` in seconds, the rest in
/// milliseconds relative to it, -1 where a phase did not happen.
#[derive(Debug, Clone, Copy, PartialEq, Serialize, Deserialize, JsonSchema)]
pub struct ResourceTiming {
    pub request_time: f64,
    pub dns_start: f64,
    pub dns_end: f64,
    pub connect_start: f64,
    pub connect_end: f64,
    pub ssl_start: f64,
    pub ssl_end: f64,
    pub send_start: f64,
    pub send_end: f64,
    pub receive_headers_end: f64,
}

/// The exchange completed; `encoded_data_length` is what crossed the network, compressed.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize, JsonSchema)]
pub struct RequestFinished {
    pub request_id: String,
    #[serde(default)]
    pub encoded_data_length: u64,
}

#[derive(Debug, Clone, PartialEq, Serialize, Deserialize, JsonSchema)]
pub struct RequestFailed {
    pub request_id: String,
    pub error_text: String,
    #[serde(default)]
    pub canceled: bool,
}

/// Which side of an exchange a body belongs to.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash, Serialize, Deserialize, JsonSchema)]
#[serde(rename_all = "snake_case")]
pub enum BodyPart {
    Request,
    Response,
}

impl BodyPart {
    pub fn as_str(self) -> &'static str {
        match self {
            BodyPart::Request => "request",
            BodyPart::Response => "response",
        }
    }
}

/// A body stored in the bundle as `resources/<sha256>`. Response bodies are stored decoded (after the
/// browser undid any `Content-Encoding`), exactly as the page received them.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize, JsonSchema)]
pub struct BodyStored {
    pub request_id: String,
    pub part: BodyPart,
    pub sha256: String,
    pub size: u64,
    /// The body is not in the bundle: it came past its recorder's budget for bodies (a replay session's,
    /// `--max-episode-bytes`), so only its size and SHA-256 are known and no file holds it.
    #[serde(default, skip_serializing_if = "std::ops::Not::not")]
    pub omitted: bool,
}

/// Something the person did in a page.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize, JsonSchema)]
pub struct Action {
    pub action: ActionKind,
    /// The element acted on (absent for page-level scrolls and key presses).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub target: Option<ElementDescriptor>,
    /// The URL of the document the action happened in.
    pub url: String,
    /// Text typed, option chosen, or checkbox state, as a string.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub value: Option<String>,
    /// The key pressed (DOM `KeyboardEvent.key`), with modifiers such as "Control".
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub key: Option<String>,
    #[serde(default, skip_serializing_if = "Vec::is_empty")]
    pub modifiers: Vec<String>,
    /// Pointer position in the viewport, CSS pixels.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub x: Option<f64>,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub y: Option<f64>,
    /// Scroll deltas, CSS pixels.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub delta_x: Option<f64>,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub delta_y: Option<f64>,
    /// For a drag: where the release came (`x`, `y` are where the press came), CSS pixels in the frame's
    /// viewport.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub to_x: Option<f64>,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub to_y: Option<f64>,
    /// For a drag: the element the release came over, when it was in the page before the drag began (not
    /// the copy a page drags around, nor the wire it draws on the way).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub drop_target: Option<ElementDescriptor>,
    /// For a drag: how many times the pointer moved on the way.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub moves: Option<u32>,
    /// For a click: when the press it ends began. A page may act on the press (tabs that switch on
    /// `mousedown`), before the click.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub pressed_ts: Option<f64>,
    /// For a run of typing (whose `ts` is when its first key came): when its last change came.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub until_ts: Option<f64>,
    /// The value is a secret (password, one-time code, card number, ...): redacted on export.
    #[serde(default)]
    pub credential: bool,
    /// The page's own doing: an input, change or submit that a page script's `execCommand` or
    /// `requestSubmit` made (not one the browser delivers for a gesture of the person's, nor text that
    /// arrives without keys: autofill, paste, drop, IME), or a scroll no input of the person's caused.
    /// Kept in the recording, left out of the trajectory and of the credentials.
    #[serde(default, skip_serializing_if = "std::ops::Not::not")]
    pub page_made: bool,
}

#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize, Deserialize, JsonSchema)]
#[serde(rename_all = "snake_case")]
pub enum ActionKind {
    Click,
    /// A press moved with the button held and released elsewhere (see `to_x`, `drop_target`).
    Drag,
    DoubleClick,
    Input,
    KeyPress,
    Scroll,
    Submit,
    Change,
}

/// How an element can be found again, from several angles, so that replay can fall back from one to the
/// next when the page differs slightly.
#[derive(Debug, Clone, Default, PartialEq, Serialize, Deserialize, JsonSchema)]
pub struct ElementDescriptor {
    pub selector: String,
    pub xpath: String,
    pub tag: String,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub id: Option<String>,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub name: Option<String>,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub input_type: Option<String>,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub role: Option<String>,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub accessible_name: Option<String>,
    /// Visible text, trimmed and shortened.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub text: Option<String>,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub bbox: Option<Rect>,
    /// Selectors of the iframes enclosing the element, outermost first; empty in the main frame.
    #[serde(default, skip_serializing_if = "Vec::is_empty")]
    pub frame_path: Vec<String>,
}

#[derive(Debug, Clone, Copy, Default, PartialEq, Serialize, Deserialize, JsonSchema)]
pub struct Rect {
    pub x: f64,
    pub y: f64,
    pub width: f64,
    pub height: f64,
}

#[derive(Debug, Clone, PartialEq, Serialize, Deserialize, JsonSchema)]
pub struct TabEvent {
    pub op: TabOp,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub opener_tab_id: Option<i64>,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub url: Option<String>,
}

#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize, Deserialize, JsonSchema)]
#[serde(rename_all = "snake_case")]
pub enum TabOp {
    Created,
    Activated,
    Removed,
}

/// Image formats a screenshot may be stored in.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize, Deserialize, JsonSchema)]
#[serde(rename_all = "snake_case")]
pub enum ImageFormat {
    Png,
    Jpeg,
    Webp,
}

impl ImageFormat {
    pub fn extension(self) -> &'static str {
        match self {
            ImageFormat::Png => "png",
            ImageFormat::Jpeg => "jpg",
            ImageFormat::Webp => "webp",
        }
    }
}

#[derive(Debug, Clone, PartialEq, Serialize, Deserialize, JsonSchema)]
pub struct ScreenshotStored {
    /// Path inside the bundle, `screenshots/<event id>.<png|jpg>`.
    pub file: String,
    pub format: ImageFormat,
    /// Why it was taken: "load", "action", ...
    #[serde(default)]
    pub reason: String,
    /// The tab's viewport when it was taken (absent in recordings made before it was recorded).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub viewport: Option<Viewport>,
    /// For a capture after an action (reason `action`), the `ts` of the action event whose effect it shows,
    /// the last of a burst: with the capture's tab it names exactly one action event. Not its id, which the
    /// host gives as events arrive, after the recorder has sent the capture (a run of typing is held until
    /// it ends); `trace_analysis::trajectory` resolves it to the event.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub after_action_ts: Option<f64>,
}

/// A tab's viewport: its size in CSS pixels and how many device pixels make one (a screenshot is
/// `width × device_scale_factor` pixels wide). Replay shows pages at the recorded viewport, so that they lay
/// out as they did and screenshots compare.
#[derive(Debug, Clone, Copy, PartialEq, Serialize, Deserialize, JsonSchema)]
pub struct Viewport {
    pub width: u32,
    pub height: u32,
    pub device_scale_factor: f64,
}

#[derive(Debug, Clone, PartialEq, Serialize, Deserialize, JsonSchema)]
pub struct DomSnapshotStored {
    pub url: String,
    #[serde(default)]
    pub reason: String,
    /// Serialized HTML, `dom/<event id>.html`.
    pub file: String,
    /// The accessibility tree as JSON, `dom/<event id>.a11y.json`, when one was captured.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub accessibility_file: Option<String>,
    /// See [`ScreenshotStored::after_action_ts`].
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub after_action_ts: Option<f64>,
}

/// A bounded summary of DOM changes between two snapshots.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize, JsonSchema)]
pub struct MutationSummary {
    pub added: u64,
    pub removed: u64,
    pub attributes: u64,
    pub text: u64,
    /// True when the recorder stopped counting because of a mutation storm.
    #[serde(default)]
    pub truncated: bool,
}

/// A page's WebSocket: opened, a frame sent or received, closed. `Fetch` does not see sockets, so their
/// frames are recorded as they pass, to be played back by replay.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize, JsonSchema)]
pub struct WebSocketEvent {
    /// DevTools' id of the socket, which ties its events together.
    pub request_id: String,
    pub op: WebSocketOp,
    /// The socket's URL (`ws://` or `wss://`), on `opened`.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub url: Option<String>,
    /// A frame's opcode: 1 for text, 2 for binary.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub opcode: Option<u8>,
    /// A frame's payload: text as it is, binary in base64; on `error`, the browser's message.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub data: Option<String>,
}

#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize, Deserialize, JsonSchema)]
#[serde(rename_all = "snake_case")]
pub enum WebSocketOp {
    Opened,
    /// A frame the page sent.
    Sent,
    /// A frame the server sent.
    Received,
    Closed,
    Error,
}

#[derive(Debug, Clone, PartialEq, Serialize, Deserialize, JsonSchema)]
pub struct ConsoleMessage {
    pub level: String,
    pub text: String,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub url: Option<String>,
}

/// Cookies, web storage and IndexedDB of the recorded sites at one moment.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize, JsonSchema)]
pub struct StorageSnapshot {
    pub phase: StoragePhase,
    #[serde(default)]
    pub cookies: Vec<Cookie>,
    /// Origin → key → value.
    #[serde(default)]
    pub local_storage: std::collections::BTreeMap<String, std::collections::BTreeMap<String, String>>,
    #[serde(default)]
    pub session_storage: std::collections::BTreeMap<String, std::collections::BTreeMap<String, String>>,
    /// Origin → its IndexedDB databases.
    #[serde(default, skip_serializing_if = "std::collections::BTreeMap::is_empty")]
    pub indexed_db: std::collections::BTreeMap<String, Vec<crate::site_storage::IndexedDatabase>>,
}

/// When a snapshot was taken. A recording has one `start` snapshot when it starts (every cookie, and the
/// storage of the origins open then), one more `start` snapshot for each origin it reaches later (that
/// origin's storage as its first document found it: the start of the recording, for that origin), and
/// one `stop` snapshot (every cookie, and the storage of the origins open at the end).
#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize, Deserialize, JsonSchema)]
#[serde(rename_all = "snake_case")]
pub enum StoragePhase {
    Start,
    Stop,
}

/// A cookie as the browser holds it (`chrome.cookies` / CDP `Network.Cookie`).
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize, JsonSchema)]
pub struct Cookie {
    pub name: String,
    pub value: String,
    pub domain: String,
    #[serde(default = "root_path")]
    pub path: String,
    /// Seconds since the Unix epoch; absent for session cookies.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub expires: Option<f64>,
    #[serde(default)]
    pub http_only: bool,
    #[serde(default)]
    pub secure: bool,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub same_site: Option<String>,
}

fn root_path() -> String {
    "/".to_owned()
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn events_round_trip_with_flat_type_tag() {
        let json = r#"{"ts":1700000000000.5,"tab_id":3,"type":"request","request_id":"7.1",
            "url":"http://127.0.0.1/a?q=1","method":"GET","headers":[{"name":"Cookie","value":"s=1"}]}"#;
        let event: Event = serde_json::from_str(json).unwrap();
        assert_eq!(event.tab_id, Some(3));
        let EventKind::Request(request) = &event.kind else { panic!("not a request: {event:?}") };
        assert_eq!(header_value(&request.headers, "cookie"), Some("s=1"));
        let record = EventRecord { id: 4, event: event.clone() };
        let text = serde_json::to_string(&record).unwrap();
        assert!(text.starts_with(r#"{"id":4,"ts":"#), "{text}");
        assert_eq!(serde_json::from_str::<EventRecord>(&text).unwrap(), record);
        assert_eq!(record.event.kind.name(), "request");
    }

    #[test]
    fn a_websocket_frame_is_tagged_as_its_kind_says() {
        let json = r#"{"ts":2,"type":"websocket","request_id":"W","op":"received","opcode":1,"data":"hi"}"#;
        let event: Event = serde_json::from_str(json).unwrap();
        let EventKind::WebSocket(socket) = &event.kind else { panic!("not a websocket event: {event:?}") };
        assert_eq!((socket.op, socket.opcode, socket.data.as_deref()), (WebSocketOp::Received, Some(1), Some("hi")));
        let value = serde_json::to_value(&event).unwrap();
        assert_eq!(value["type"], event.kind.name());
    }

    #[test]
    fn unknown_event_type_is_an_error_naming_it() {
        let err = serde_json::from_str::<Event>(r#"{"ts":1,"type":"telepathy"}"#).unwrap_err();
        assert!(err.to_string().contains("telepathy"), "{err}");
    }
}
