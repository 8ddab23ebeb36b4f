//! Turns the DevTools Protocol's `Network.*` events of one debuggee (a tab, or a frame or worker attached
//! to it) into TRACE's network events.
//!
//! DevTools reports one exchange in pieces: `requestWillBeSent` (headers as the page asked, without
//! cookies), `requestWillBeSentExtraInfo` (the headers actually sent, cookies and `sec-fetch-*` included),
//! `responseReceived`, `responseReceivedExtraInfo` (raw response headers, `Set-Cookie` included), then
//! `loadingFinished` or `loadingFailed`. The extra-info events may come before or after their main event,
//! or not at all. So each hop is held until it completes (a redirect, a finish, a failure), merged with
//! whatever raw headers arrived, and emitted whole: `request`, `response`, then `request_finished` or
//! `request_failed`. Events therefore leave in completion order; their `ts` says when things happened.
//!
//! WebSockets are not exchanges: their events (`webSocketCreated`, frames either way, `webSocketClosed`)
//! become `websocket` events as they come.
//!
//! Requests a page sends as it unloads (`sendBeacon`, `fetch` with `keepalive`, from `pagehide` or
//! `unload`) outlive their document, and DevTools' `Network` domain never reports them: only the `Fetch`
//! pause at their response does, with no `networkId`. [`NetworkTranslator::unreported_exchange`] makes the
//! whole exchange from that pause.
//!
//! Pure logic over JSON: no browser needed to test it.

use std::collections::{HashMap, VecDeque};

use base64::Engine as _;
use serde_json::Value;
use trace_manifest::event::{
    Event, EventKind, Header, Request, RequestFailed, RequestFinished, ResourceTiming, Response, WebSocketEvent,
    WebSocketOp,
};

#[derive(Debug, Default)]
pub struct NetworkTranslator {
    /// Wall-clock milliseconds minus DevTools' monotonic milliseconds, from the latest `wallTime` seen.
    clock_offset_ms: Option<f64>,
    main_frame: Option<String>,
    hops: HashMap<String, Hop>,
    request_extra: HashMap<String, VecDeque<Vec<Header>>>,
    response_extra: HashMap<String, VecDeque<Vec<Header>>>,
}

#[derive(Debug)]
struct Hop {
    request: Request,
    request_ts: f64,
    frame_id: Option<String>,
    response: Option<(Response, f64)>,
}

impl NetworkTranslator {
    pub fn new() -> NetworkTranslator {
        NetworkTranslator::default()
    }

    /// Events of this frame are the tab's main frame: they carry no `frame_id`.
    pub fn set_main_frame(&mut self, frame_id: &str) {
        self.main_frame = Some(frame_id.to_owned());
    }

    pub fn is_main_frame(&self, frame_id: &str) -> bool {
        self.main_frame.as_deref() == Some(frame_id)
    }

    /// Feeds one DevTools event; returns the TRACE events it completes.
    pub fn handle(&mut self, method: &str, params: &Value, tab_id: Option<i64>) -> Vec<Event> {
        let Some(request_id) = params.get("requestId").and_then(Value::as_str) else { return Vec::new() };
        let mut out = Vec::new();
        match method {
            "Network.requestWillBeSent" => {
                if let (Some(wall), Some(monotonic)) = (number(params, "wallTime"), number(params, "timestamp")) {
                    self.clock_offset_ms = Some(wall * 1000.0 - monotonic * 1000.0);
                }
                if let Some(redirect) = params.get("redirectResponse") {
                    let ts = self.wall_ms(params);
                    if let Some(hop) = self.hops.get_mut(request_id) {
                        hop.response = Some((response(request_id, redirect), ts));
                    }
                    self.complete(request_id, tab_id, None, &mut out);
                }
                let Some(request) = request(request_id, params) else { return out };
                let request_ts = number(params, "wallTime").map_or_else(|| self.wall_ms(params), |s| s * 1000.0);
                let frame_id = params.get("frameId").and_then(Value::as_str).map(str::to_owned);
                self.hops.insert(request_id.to_owned(), Hop { request, request_ts, frame_id, response: None });
            }
            "Network.requestWillBeSentExtraInfo" => {
                self.request_extra.entry(request_id.to_owned()).or_default().push_back(headers(params.get("headers")));
            }
            "Network.responseReceived" => {
                let ts = self.wall_ms(params);
                if let (Some(hop), Some(raw)) = (self.hops.get_mut(request_id), params.get("response")) {
                    hop.response = Some((response(request_id, raw), ts));
                }
            }
            "Network.responseReceivedExtraInfo" => {
                self.response_extra.entry(request_id.to_owned()).or_default().push_back(headers(params.get("headers")));
            }
            "Network.loadingFinished" => {
                let ts = self.wall_ms(params);
                let length = number(params, "encodedDataLength").unwrap_or(0.0).max(0.0) as u64;
                let end = EventKind::RequestFinished(RequestFinished {
                    request_id: request_id.to_owned(),
                    encoded_data_length: length,
                });
                self.complete(request_id, tab_id, Some((end, ts)), &mut out);
            }
            "Network.webSocketCreated" => {
                let url = params.get("url").and_then(Value::as_str).map(str::to_owned);
                out.push(self.socket_event(params, tab_id, request_id, WebSocketOp::Opened, url, None));
            }
            "Network.webSocketFrameSent" | "Network.webSocketFrameReceived" => {
                let op = if method.ends_with("Sent") { WebSocketOp::Sent } else { WebSocketOp::Received };
                let frame = params.get("response").unwrap_or(&Value::Null);
                let opcode = frame.get("opcode").and_then(Value::as_u64).and_then(|code| u8::try_from(code).ok());
                let data = frame.get("payloadData").and_then(Value::as_str).map(str::to_owned);
                let mut event = self.socket_event(params, tab_id, request_id, op, None, data);
                if let EventKind::WebSocket(socket) = &mut event.kind {
                    socket.opcode = opcode;
                }
                out.push(event);
            }
            "Network.webSocketClosed" => {
                out.push(self.socket_event(params, tab_id, request_id, WebSocketOp::Closed, None, None));
            }
            "Network.webSocketFrameError" => {
                let message = params.get("errorMessage").and_then(Value::as_str).map(str::to_owned);
                out.push(self.socket_event(params, tab_id, request_id, WebSocketOp::Error, None, message));
            }
            "Network.loadingFailed" => {
                let ts = self.wall_ms(params);
                let end = EventKind::RequestFailed(RequestFailed {
                    request_id: request_id.to_owned(),
                    error_text: params.get("errorText").and_then(Value::as_str).unwrap_or("failed").to_owned(),
                    canceled: params.get("canceled").and_then(Value::as_bool).unwrap_or(false),
                });
                self.complete(request_id, tab_id, Some((end, ts)), &mut out);
            }
            _ => {}
        }
        out
    }

    /// The exchange of a response paused by `Fetch` that the `Network` domain never reported (its pause
    /// has no `networkId`): its request, its response's status and headers, and its end, all at `now`
    /// (the pause carries no time). The request id is the pause's own, which no `Network` id equals.
    pub fn unreported_exchange(&self, paused: &Value, tab_id: Option<i64>) -> Option<(String, Vec<Event>)> {
        let request_id = format!("unreported-{}", paused.get("requestId")?.as_str()?);
        let mut request = request(&request_id, paused)?;
        request.resource_type = paused.get("resourceType").and_then(Value::as_str).map(str::to_owned);
        let headers: Vec<Header> = paused
            .get("responseHeaders")
            .and_then(Value::as_array)
            .into_iter()
            .flatten()
            .filter_map(|h| Some(Header::new(h.get("name")?.as_str()?.to_owned(), h.get("value")?.as_str()?)))
            .collect();
        let mime_type = headers
            .iter()
            .find(|h| h.name.eq_ignore_ascii_case("content-type"))
            .map(|h| trace_analysis::body::mime_essence(&h.value))
            .unwrap_or_default();
        let response = Response {
            request_id: request_id.clone(),
            url: request.url.clone(),
            status: paused.get("responseStatusCode").and_then(Value::as_u64).unwrap_or(0) as u16,
            status_text: paused.get("responseStatusText").and_then(Value::as_str).unwrap_or_default().to_owned(),
            protocol: None,
            headers,
            mime_type,
            remote_ip_address: None,
            from_cache: false,
            timing: None,
        };
        let frame_id = paused
            .get("frameId")
            .and_then(Value::as_str)
            .filter(|frame| Some(*frame) != self.main_frame.as_deref())
            .map(str::to_owned);
        let now = js_now();
        let event = |kind| Event { ts: now, tab_id, frame_id: frame_id.clone(), kind };
        let end = RequestFinished { request_id: request_id.clone(), encoded_data_length: 0 };
        let events = vec![
            event(EventKind::Request(request)),
            event(EventKind::Response(response)),
            event(EventKind::RequestFinished(end)),
        ];
        Some((request_id, events))
    }

    /// Emits every exchange still in flight (the recording is stopping): their requests, and responses
    /// where one arrived.
    pub fn flush(&mut self, tab_id: Option<i64>) -> Vec<Event> {
        let mut out = Vec::new();
        let mut pending: Vec<String> = self.hops.keys().cloned().collect();
        pending.sort_by(|a, b| self.hops[a].request_ts.total_cmp(&self.hops[b].request_ts));
        for request_id in pending {
            self.complete(&request_id, tab_id, None, &mut out);
        }
        out
    }

    /// How many exchanges are in flight.
    pub fn in_flight(&self) -> usize {
        self.hops.len()
    }

    /// Whether the exchange is known and in flight (its body may be streamed).
    pub fn is_in_flight(&self, request_id: &str) -> bool {
        self.hops.contains_key(request_id)
    }

    fn complete(&mut self, request_id: &str, tab_id: Option<i64>, end: Option<(EventKind, f64)>, out: &mut Vec<Event>) {
        let Some(mut hop) = self.hops.remove(request_id) else { return };
        if let Some(raw) = self.request_extra.get_mut(request_id).and_then(VecDeque::pop_front) {
            hop.request.headers = raw;
        }
        let frame_id = hop.frame_id.filter(|frame| Some(frame) != self.main_frame.as_ref());
        let event = |ts: f64, kind| Event { ts, tab_id, frame_id: frame_id.clone(), kind };
        out.push(event(hop.request_ts, EventKind::Request(hop.request)));
        if let Some((mut response, ts)) = hop.response {
            if let Some(raw) = self.response_extra.get_mut(request_id).and_then(VecDeque::pop_front) {
                response.headers = raw;
            }
            out.push(event(ts, EventKind::Response(response)));
        }
        if let Some((kind, ts)) = end {
            out.push(event(ts, kind));
            self.request_extra.remove(request_id);
            self.response_extra.remove(request_id);
        }
    }

    /// A WebSocket's event, at once: a socket has no hop to wait for.
    fn socket_event(
        &self,
        params: &Value,
        tab_id: Option<i64>,
        request_id: &str,
        op: WebSocketOp,
        url: Option<String>,
        data: Option<String>,
    ) -> Event {
        let socket = WebSocketEvent { request_id: request_id.to_owned(), op, url, opcode: None, data };
        Event { ts: self.wall_ms(params), tab_id, frame_id: None, kind: EventKind::WebSocket(socket) }
    }

    fn wall_ms(&self, params: &Value) -> f64 {
        match (number(params, "timestamp"), self.clock_offset_ms) {
            (Some(monotonic), Some(offset)) => monotonic * 1000.0 + offset,
            _ => js_now(),
        }
    }
}

fn number(value: &Value, key: &str) -> Option<f64> {
    value.get(key).and_then(Value::as_f64)
}

/// Only http(s) exchanges are recorded: `data:`, `blob:` and the extension's own URLs are not traffic.
fn request(request_id: &str, params: &Value) -> Option<Request> {
    let raw = params.get("request")?;
    let mut url = raw.get("url")?.as_str()?.to_owned();
    if !(url.starts_with("http://") || url.starts_with("https://")) {
        return None;
    }
    if let Some(fragment) = raw.get("urlFragment").and_then(Value::as_str) {
        url.push_str(fragment);
    }
    Some(Request {
        request_id: request_id.to_owned(),
        url,
        method: raw.get("method").and_then(Value::as_str).unwrap_or("GET").to_owned(),
        headers: headers(raw.get("headers")),
        post_data: post_data(raw),
        resource_type: params.get("type").and_then(Value::as_str).map(str::to_owned),
    })
}

/// Whether a `requestWillBeSent` announces a body it does not carry (`hasPostData` without `postData` or
/// `postDataEntries`): a body sent as a stream, which `Network.getRequestPostData` gives.
pub fn body_left_out(params: &Value) -> bool {
    let request = &params["request"];
    request["hasPostData"].as_bool() == Some(true)
        && request.get("postData").is_none()
        && request.get("postDataEntries").is_none_or(|entries| entries.as_array().is_none_or(Vec::is_empty))
}

/// A request's body as text. Current Chrome sends it as `postDataEntries` (base64 pieces) and may leave
/// out the older `postData`. Binary bodies are not text and are left out.
fn post_data(raw: &Value) -> Option<String> {
    if let Some(text) = raw.get("postData").and_then(Value::as_str) {
        return Some(text.to_owned());
    }
    let entries = raw.get("postDataEntries")?.as_array()?;
    let mut bytes = Vec::new();
    for entry in entries {
        let piece = entry.get("bytes").and_then(Value::as_str).unwrap_or_default();
        bytes.extend(base64::engine::general_purpose::STANDARD.decode(piece).ok()?);
    }
    String::from_utf8(bytes).ok()
}

fn response(request_id: &str, raw: &Value) -> Response {
    let text = |key: &str| raw.get(key).and_then(Value::as_str).map(str::to_owned);
    let flag = |key: &str| raw.get(key).and_then(Value::as_bool).unwrap_or(false);
    Response {
        request_id: request_id.to_owned(),
        url: text("url").unwrap_or_default(),
        status: raw.get("status").and_then(Value::as_u64).unwrap_or(0) as u16,
        status_text: text("statusText").unwrap_or_default(),
        protocol: text("protocol"),
        headers: headers(raw.get("headers")),
        mime_type: text("mimeType").unwrap_or_default(),
        remote_ip_address: text("remoteIPAddress"),
        from_cache: flag("fromDiskCache") || flag("fromPrefetchCache") || flag("fromServiceWorker"),
        timing: raw.get("timing").and_then(timing),
    }
}

fn timing(raw: &Value) -> Option<ResourceTiming> {
    let field = |key: &str| number(raw, key).unwrap_or(-1.0);
    Some(ResourceTiming {
        request_time: number(raw, "requestTime")?,
        dns_start: field("dnsStart"),
        dns_end: field("dnsEnd"),
        connect_start: field("connectStart"),
        connect_end: field("connectEnd"),
        ssl_start: field("sslStart"),
        ssl_end: field("sslEnd"),
        send_start: field("sendStart"),
        send_end: field("sendEnd"),
        receive_headers_end: field("receiveHeadersEnd"),
    })
}

/// DevTools gives headers as an object; repeated headers (`Set-Cookie`) are joined by newlines.
pub fn headers(raw: Option<&Value>) -> Vec<Header> {
    let Some(Value::Object(map)) = raw else { return Vec::new() };
    map.iter()
        .flat_map(|(name, value)| {
            let value = value.as_str().unwrap_or_default();
            value.split('\n').map(move |part| Header::new(name.clone(), part))
        })
        .collect()
}

#[cfg(target_arch = "wasm32")]
fn js_now() -> f64 {
    js_sys::Date::now()
}

#[cfg(not(target_arch = "wasm32"))]
fn js_now() -> f64 {
    std::time::SystemTime::now().duration_since(std::time::UNIX_EPOCH).map_or(0.0, |d| d.as_secs_f64() * 1000.0)
}

#[cfg(test)]
mod tests {
    use serde_json::json;
    use trace_manifest::event::header_value;

    use super::*;

    fn feed(translator: &mut NetworkTranslator, events: &[(&str, Value)]) -> Vec<Event> {
        events.iter().flat_map(|(method, params)| translator.handle(method, params, Some(7))).collect()
    }

    fn kinds(events: &[Event]) -> Vec<&'static str> {
        events.iter().map(|e| e.kind.name()).collect()
    }

    #[test]
    fn a_websocket_is_recorded_frame_by_frame_as_it_goes() {
        let mut translator = NetworkTranslator::new();
        let frame = |opcode: u64, data: &str| json!({"opcode": opcode, "mask": false, "payloadData": data});
        let events = feed(
            &mut translator,
            &[
                (
                    "Network.requestWillBeSent",
                    json!({"requestId": "R", "timestamp": 10.0, "wallTime": 1000.0,
                    "request": {"url": "http://s.test/", "method": "GET", "headers": {}}}),
                ),
                ("Network.webSocketCreated", json!({"requestId": "W", "url": "ws://s.test/chat"})),
                (
                    "Network.webSocketFrameReceived",
                    json!({"requestId": "W", "timestamp": 11.0, "response": frame(1, "hello")}),
                ),
                (
                    "Network.webSocketFrameSent",
                    json!({"requestId": "W", "timestamp": 12.0, "response": frame(2, "AAE=")}),
                ),
                ("Network.webSocketClosed", json!({"requestId": "W", "timestamp": 13.0})),
            ],
        );
        let sockets: Vec<(f64, &WebSocketEvent)> = events
            .iter()
            .filter_map(|event| match &event.kind {
                EventKind::WebSocket(socket) => Some((event.ts, socket)),
                _ => None,
            })
            .collect();
        let socket = |op, url: Option<&str>, opcode: Option<u8>, data: Option<&str>| WebSocketEvent {
            request_id: "W".to_owned(),
            op,
            url: url.map(str::to_owned),
            opcode,
            data: data.map(str::to_owned),
        };
        assert_eq!(sockets.len(), 4, "{events:?}");
        assert_eq!(*sockets[0].1, socket(WebSocketOp::Opened, Some("ws://s.test/chat"), None, None));
        assert_eq!(sockets[1], (1_001_000.0, &socket(WebSocketOp::Received, None, Some(1), Some("hello"))));
        assert_eq!(sockets[2], (1_002_000.0, &socket(WebSocketOp::Sent, None, Some(2), Some("AAE="))));
        assert_eq!(sockets[3], (1_003_000.0, &socket(WebSocketOp::Closed, None, None, None)));
        assert!(events.iter().all(|event| event.tab_id == Some(7)));
    }

    #[test]
    fn a_login_redirect_merges_raw_headers_whichever_comes_first() {
        let mut translator = NetworkTranslator::new();
        translator.set_main_frame("F1");
        let events = feed(
            &mut translator,
            &[
                // The raw headers of the POST arrive before the request itself.
                (
                    "Network.requestWillBeSentExtraInfo",
                    json!({"requestId": "9", "headers": {"Cookie": "csrf=abc", "Sec-Fetch-Mode": "navigate"}}),
                ),
                (
                    "Network.requestWillBeSent",
                    json!({"requestId": "9", "frameId": "F1", "type": "Document", "timestamp": 100.0, "wallTime": 1_700_000_000.0,
                "request": {"url": "http://127.0.0.1:8000/login", "method": "POST", "headers": {"Content-Type": "application/x-www-form-urlencoded"},
                            "postData": "user=ann&csrf=abc"}}),
                ),
                (
                    "Network.responseReceivedExtraInfo",
                    json!({"requestId": "9", "headers": {"Location": "/account", "Set-Cookie": "sid=1; HttpOnly\nlang=en"}}),
                ),
                // The redirect: a new request with the same id, carrying the 303.
                (
                    "Network.requestWillBeSent",
                    json!({"requestId": "9", "frameId": "F1", "type": "Document", "timestamp": 100.5, "wallTime": 1_700_000_000.5,
                "redirectResponse": {"url": "http://127.0.0.1:8000/login", "status": 303, "statusText": "See Other", "headers": {"Location": "/account"}, "mimeType": "text/html"},
                "request": {"url": "http://127.0.0.1:8000/account", "method": "GET", "headers": {}}}),
                ),
                (
                    "Network.responseReceived",
                    json!({"requestId": "9", "timestamp": 100.7, "type": "Document",
                "response": {"url": "http://127.0.0.1:8000/account", "status": 200, "statusText": "OK", "headers": {"Content-Type": "text/html"},
                             "mimeType": "text/html", "protocol": "http/1.1", "remoteIPAddress": "127.0.0.1",
                             "timing": {"requestTime": 100.5, "dnsStart": -1, "dnsEnd": -1, "connectStart": -1, "connectEnd": -1, "sslStart": -1, "sslEnd": -1,
                                        "sendStart": 1.0, "sendEnd": 1.5, "receiveHeadersEnd": 150.0}}}),
                ),
                // The second hop's raw request headers come late, after its response.
                (
                    "Network.requestWillBeSentExtraInfo",
                    json!({"requestId": "9", "headers": {"Cookie": "csrf=abc; sid=1"}}),
                ),
                ("Network.loadingFinished", json!({"requestId": "9", "timestamp": 100.9, "encodedDataLength": 512})),
            ],
        );
        assert_eq!(kinds(&events), ["request", "response", "request", "response", "request_finished"]);
        let EventKind::Request(post) = &events[0].kind else { unreachable!() };
        assert_eq!(header_value(&post.headers, "cookie"), Some("csrf=abc"));
        assert_eq!(post.post_data.as_deref(), Some("user=ann&csrf=abc"));
        assert_eq!(events[0].ts, 1_700_000_000_000.0);
        assert_eq!(events[0].frame_id, None, "main-frame events carry no frame id");
        let EventKind::Response(redirect) = &events[1].kind else { unreachable!() };
        assert_eq!(redirect.status, 303);
        let cookies: Vec<&str> =
            redirect.headers.iter().filter(|h| h.name == "Set-Cookie").map(|h| h.value.as_str()).collect();
        assert_eq!(cookies, ["sid=1; HttpOnly", "lang=en"]);
        let EventKind::Request(account) = &events[2].kind else { unreachable!() };
        assert_eq!(header_value(&account.headers, "cookie"), Some("csrf=abc; sid=1"));
        let EventKind::Response(ok) = &events[3].kind else { unreachable!() };
        assert_eq!(ok.timing.unwrap().receive_headers_end, 150.0);
        assert!((events[3].ts - 1_700_000_000_700.0).abs() < 1e-3, "{}", events[3].ts);
        let EventKind::RequestFinished(finished) = &events[4].kind else { unreachable!() };
        assert_eq!(finished.encoded_data_length, 512);
    }

    #[test]
    fn failures_iframes_and_unfinished_exchanges_are_all_reported() {
        let mut translator = NetworkTranslator::new();
        translator.set_main_frame("F1");
        let events = feed(
            &mut translator,
            &[
                (
                    "Network.requestWillBeSent",
                    json!({"requestId": "1", "frameId": "F2", "timestamp": 1.0, "wallTime": 10.0,
                "request": {"url": "http://127.0.0.1:9/gone", "method": "GET", "headers": {}}}),
                ),
                (
                    "Network.loadingFailed",
                    json!({"requestId": "1", "timestamp": 1.1, "errorText": "net::ERR_CONNECTION_REFUSED"}),
                ),
                (
                    "Network.requestWillBeSent",
                    json!({"requestId": "2", "timestamp": 2.0, "wallTime": 11.0,
                "request": {"url": "data:image/png;base64,AAAA", "method": "GET", "headers": {}}}),
                ),
                (
                    "Network.requestWillBeSent",
                    json!({"requestId": "3", "timestamp": 3.0, "wallTime": 12.0,
                "request": {"url": "http://127.0.0.1:8000/slow", "method": "POST", "headers": {},
                            "hasPostData": true, "postDataEntries": [{"bytes": "cT1tdWcm"}, {"bytes": "bj0x"}]}}),
                ),
            ],
        );
        assert_eq!(kinds(&events), ["request", "request_failed"]);
        assert_eq!(events[0].frame_id.as_deref(), Some("F2"));
        assert!(translator.is_in_flight("3") && !translator.is_in_flight("2"), "data: URLs are not traffic");
        let flushed = translator.flush(Some(7));
        assert_eq!(kinds(&flushed), ["request"]);
        let EventKind::Request(post) = &flushed[0].kind else { unreachable!() };
        assert_eq!(post.post_data.as_deref(), Some("q=mug&n=1"), "postDataEntries are joined");
    }

    #[test]
    fn a_beacon_sent_during_unload_is_recorded_from_its_fetch_pause_alone() {
        let mut translator = NetworkTranslator::new();
        translator.set_main_frame("MAIN");
        // As DevTools pauses a `sendBeacon` from `pagehide`: no `networkId`, and no `Network` event before.
        let paused = json!({
            "requestId": "interception-job-16.0",
            "frameId": "MAIN",
            "resourceType": "Ping",
            "request": {"url": "http://shop.test/collect?e=leave", "method": "POST",
                        "headers": {"Origin": "http://shop.test"},
                        "postDataEntries": [{"bytes": "cD0vY2FydA=="}]},
            "responseStatusCode": 204,
            "responseHeaders": [{"name": "Content-Type", "value": "text/plain; charset=utf-8"}]
        });
        let (id, events) = translator.unreported_exchange(&paused, Some(3)).unwrap();
        assert_eq!(id, "unreported-interception-job-16.0");
        let [request, response, end] = events.as_slice() else { panic!("{events:?}") };
        let EventKind::Request(request_event) = &request.kind else { panic!("{request:?}") };
        assert_eq!(
            (request_event.method.as_str(), request_event.url.as_str(), request_event.post_data.as_deref()),
            ("POST", "http://shop.test/collect?e=leave", Some("p=/cart"))
        );
        assert_eq!(request_event.resource_type.as_deref(), Some("Ping"));
        let EventKind::Response(response_event) = &response.kind else { panic!("{response:?}") };
        assert_eq!((response_event.status, response_event.mime_type.as_str()), (204, "text/plain"));
        assert!(matches!(&end.kind, EventKind::RequestFinished(finished) if finished.request_id == id));
        // The main frame's exchange carries no frame id, like every other of the main frame.
        assert!(events.iter().all(|event| event.frame_id.is_none() && event.tab_id == Some(3)));
        // A pause without a request is nothing to record.
        assert!(translator.unreported_exchange(&json!({"requestId": "x"}), Some(3)).is_none());
    }

    /// A body sent as a stream is only announced, and must be asked for; one carried in the event, or no
    /// body at all, must not be.
    #[test]
    fn a_body_announced_but_not_carried_is_told_apart() {
        let sent = |request: Value| json!({"requestId": "1", "request": request});
        assert!(body_left_out(&sent(json!({"method": "PUT", "hasPostData": true}))));
        assert!(body_left_out(&sent(json!({"method": "PUT", "hasPostData": true, "postDataEntries": []}))));
        assert!(!body_left_out(&sent(json!({"method": "POST", "hasPostData": true, "postData": "a=1"}))));
        let entries = json!({"method": "POST", "hasPostData": true, "postDataEntries": [{"bytes": "YT0x"}]});
        assert!(!body_left_out(&sent(entries)));
        assert!(!body_left_out(&sent(json!({"method": "GET"}))));
    }
}
