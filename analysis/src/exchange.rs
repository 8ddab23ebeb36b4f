//! The one pairing of a recording's requests with what came back. Every derivation that speaks of HTTP
//! traffic (the HAR, the evidence checkpoints are checked against, the ignore list, the summary) starts
//! from [`hops`], so they all agree on which response, body or failure belongs to which request.
//!
//! The rules:
//! - A **hop** is one `request` event. A redirect reuses its request id, so a chain is several hops with
//!   one id.
//! - A `response`, `request_finished`, `request_failed` or `body` event belongs to the **latest hop of its
//!   request id** committed before it; when several of one kind do, the last one counts.
//! - A body recorded **before any request** of its id (a recorder emits an exchange once it has all of it,
//!   so a body may be committed first) belongs to the first hop of that id that comes later.
//! - Events of a request id never requested belong to nothing.
//!
//! Hops come in the order of their request events. [`Exchange`] is a hop's owned summary, for derivations
//! that keep it past the events' lifetime.

use std::collections::HashMap;

use trace_manifest::bundle::body_file;
use trace_manifest::event::{
    BodyPart, BodyStored, EventKind, EventRecord, Request, RequestFailed, RequestFinished, Response, header_value,
};

/// One request hop and what the recording has of its answer, borrowed from the events.
#[derive(Debug, Clone)]
pub struct Hop<'e> {
    pub request: Timed<'e, Request>,
    pub tab_id: Option<i64>,
    pub response: Option<Timed<'e, Response>>,
    pub finished: Option<Timed<'e, RequestFinished>>,
    pub failed: Option<Timed<'e, RequestFailed>>,
    /// The request body stored as a file (one the recorder could not give as text in `post_data`).
    pub request_body: Option<&'e BodyStored>,
    pub response_body: Option<&'e BodyStored>,
}

/// An event's payload with its id and time.
#[derive(Debug)]
pub struct Timed<'e, T> {
    pub event_id: u64,
    pub ts: f64,
    pub value: &'e T,
}

// By hand: `derive` would ask `T: Clone`, and a borrowed payload is copied whatever `T` is.
impl<T> Clone for Timed<'_, T> {
    fn clone(&self) -> Self {
        *self
    }
}

impl<T> Copy for Timed<'_, T> {}

impl<'e, T> Timed<'e, T> {
    fn of(record: &EventRecord, value: &'e T) -> Timed<'e, T> {
        Timed { event_id: record.id, ts: record.event.ts, value }
    }
}

impl<'e> Hop<'e> {
    /// The failure that ended the hop: one recorded after its response (a download cancelled halfway), or
    /// with no response at all. A failure the response came after did not end it.
    pub fn failure(&self) -> Option<Timed<'e, RequestFailed>> {
        let failed = self.failed?;
        match self.response {
            Some(response) if response.event_id > failed.event_id => None,
            _ => Some(failed),
        }
    }
}

/// The hops of `events` (in the order given, which should be `id` order), each with its answer.
pub fn hops(events: &[EventRecord]) -> Vec<Hop<'_>> {
    let mut hops: Vec<Hop<'_>> = Vec::new();
    let mut latest: HashMap<&str, usize> = HashMap::new();
    let mut early_bodies: HashMap<&str, Vec<&BodyStored>> = HashMap::new();
    for record in events {
        match &record.event.kind {
            EventKind::Request(request) => {
                latest.insert(&request.request_id, hops.len());
                let mut hop = Hop {
                    request: Timed::of(record, request),
                    tab_id: record.event.tab_id,
                    response: None,
                    finished: None,
                    failed: None,
                    request_body: None,
                    response_body: None,
                };
                for body in early_bodies.remove(request.request_id.as_str()).unwrap_or_default() {
                    attach_body(&mut hop, body);
                }
                hops.push(hop);
            }
            EventKind::Response(response) => {
                if let Some(&index) = latest.get(response.request_id.as_str()) {
                    hops[index].response = Some(Timed::of(record, response));
                }
            }
            EventKind::RequestFinished(finished) => {
                if let Some(&index) = latest.get(finished.request_id.as_str()) {
                    hops[index].finished = Some(Timed::of(record, finished));
                }
            }
            EventKind::RequestFailed(failed) => {
                if let Some(&index) = latest.get(failed.request_id.as_str()) {
                    hops[index].failed = Some(Timed::of(record, failed));
                }
            }
            EventKind::Body(body) => match latest.get(body.request_id.as_str()) {
                Some(&index) => attach_body(&mut hops[index], body),
                None => early_bodies.entry(&body.request_id).or_default().push(body),
            },
            _ => {}
        }
    }
    hops
}

fn attach_body<'e>(hop: &mut Hop<'e>, body: &'e BodyStored) {
    match body.part {
        BodyPart::Request => hop.request_body = Some(body),
        BodyPart::Response => hop.response_body = Some(body),
    }
}

/// One request hop and what came back, owned: what checkpoints and the ignore list are decided on.
#[derive(Debug, Clone, Default, PartialEq)]
pub struct Exchange {
    pub request_id: String,
    pub request_event: u64,
    /// When the request was sent (its event's time).
    pub request_ts: f64,
    pub response_event: Option<u64>,
    /// When the response came.
    pub response_ts: Option<f64>,
    pub method: String,
    pub url: String,
    pub resource_type: Option<String>,
    /// The request's body as text, when it had one (`Evidence::load` reads bodies stored as files too).
    pub post_data: Option<String>,
    /// The request's `Content-Type`, which says how to read its body.
    pub content_type: Option<String>,
    /// The request body stored as a file, when there is one: `resources/<sha256>` and its size.
    pub request_body_file: Option<(String, u64)>,
    pub status: Option<u16>,
    /// The size of the recorded response body; `None` when no body was recorded.
    pub response_body_size: Option<u64>,
    /// The recorded response body, `resources/<sha256>`.
    pub response_body_file: Option<String>,
    /// The response's MIME type, as the browser reported it.
    pub response_mime: Option<String>,
    /// Whether the response set a cookie.
    pub sets_cookie: bool,
}

impl Exchange {
    pub fn succeeded(&self) -> bool {
        self.status.is_some_and(|status| (200..400).contains(&status))
    }
}

impl From<&Hop<'_>> for Exchange {
    fn from(hop: &Hop<'_>) -> Exchange {
        let request = hop.request.value;
        Exchange {
            request_id: request.request_id.clone(),
            request_event: hop.request.event_id,
            request_ts: hop.request.ts,
            response_event: hop.response.map(|response| response.event_id),
            response_ts: hop.response.map(|response| response.ts),
            method: request.method.clone(),
            url: request.url.clone(),
            resource_type: request.resource_type.clone(),
            post_data: request.post_data.clone(),
            content_type: header_value(&request.headers, "content-type").map(str::to_owned),
            request_body_file: hop.request_body.and_then(|body| Some((body_file(body)?, body.size))),
            status: hop.response.map(|response| response.value.status),
            response_body_size: hop.response_body.map(|body| body.size),
            response_body_file: hop.response_body.and_then(body_file),
            response_mime: hop
                .response
                .map(|response| response.value.mime_type.clone())
                .filter(|mime| !mime.is_empty()),
            sets_cookie: hop.response.is_some_and(|response| {
                response.value.headers.iter().any(|header| header.name.eq_ignore_ascii_case("set-cookie"))
            }),
        }
    }
}

/// The exchanges of `events`: [`hops`], owned.
pub fn exchanges(events: &[EventRecord]) -> Vec<Exchange> {
    hops(events).iter().map(Exchange::from).collect()
}

#[cfg(test)]
mod tests {
    use trace_manifest::event::Event;
    use trace_manifest::testing;

    use super::*;

    fn record(id: u64, kind: EventKind) -> EventRecord {
        EventRecord { id, event: Event { ts: id as f64, tab_id: Some(1), frame_id: None, kind } }
    }

    fn request(id: &str, url: &str) -> EventKind {
        testing::request(id, "GET", url, &[("Accept", "*/*")], None)
    }

    fn response(id: &str, status: u16) -> EventKind {
        testing::response(id, "http://shop.test/", status, "text/html", &[])
    }

    fn body(id: &str, part: BodyPart, size: u64) -> EventKind {
        EventKind::Body(BodyStored { request_id: id.into(), part, sha256: format!("{size:064}"), size, omitted: false })
    }

    #[test]
    fn a_redirect_chain_is_one_hop_per_request_and_answers_go_to_the_latest() {
        let events = [
            record(1, request("r", "http://shop.test/old")),
            record(2, response("r", 302)),
            record(3, request("r", "http://shop.test/new")),
            record(4, response("r", 200)),
            record(5, body("r", BodyPart::Response, 12)),
            record(6, response("nobody-asked", 200)),
        ];
        let exchanges = exchanges(&events);
        let summary: Vec<_> =
            exchanges.iter().map(|e| (e.url.as_str(), e.status, e.response_body_size, e.response_event)).collect();
        assert_eq!(
            summary,
            [
                ("http://shop.test/old", Some(302), None, Some(2)),
                ("http://shop.test/new", Some(200), Some(12), Some(4))
            ]
        );
    }

    #[test]
    fn a_body_committed_before_its_request_waits_for_it() {
        let events = [
            record(1, body("r", BodyPart::Response, 7)),
            record(2, body("r", BodyPart::Request, 3)),
            record(3, request("r", "http://shop.test/upload")),
            record(4, response("r", 201)),
        ];
        let exchanges = exchanges(&events);
        assert_eq!(exchanges.len(), 1);
        assert_eq!(exchanges[0].response_body_size, Some(7));
        assert_eq!(exchanges[0].request_body_file.as_ref().map(|(_, size)| *size), Some(3));
    }

    #[test]
    fn a_failure_ends_a_hop_only_when_no_response_came_after_it() {
        let failed = |id: &str| {
            EventKind::RequestFailed(RequestFailed {
                request_id: id.into(),
                error_text: "net::ERR".into(),
                canceled: true,
            })
        };
        let events = [
            record(1, request("a", "http://shop.test/a")),
            record(2, failed("a")),
            record(3, response("a", 200)),
            record(4, request("b", "http://shop.test/b")),
            record(5, response("b", 200)),
            record(6, failed("b")),
            record(7, request("c", "http://shop.test/c")),
            record(8, failed("c")),
        ];
        let ended: Vec<bool> = hops(&events).iter().map(|hop| hop.failure().is_some()).collect();
        assert_eq!(ended, [false, true, true]);
    }
}
