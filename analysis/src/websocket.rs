//! The WebSockets of a recording as transcripts: each socket the pages opened, in the order they opened
//! them, with its frames both ways in the order they passed. Replay plays a transcript back to the page
//! that opens the same URL (sockets are not requests: `Fetch` never sees them).
//!
//! A server's frame that came after the page wrote over HTTP (a `POST` of its tab sent since the page's
//! last frame on that socket: a deploy, after which the server pushes its notifications) names the latest
//! such write ([`Frame::after_write`]): replay plays it once the page has made that write, not at once.

use std::collections::HashMap;

use trace_manifest::event::{EventKind, EventRecord, WebSocketOp};

/// One socket of the recording.
#[derive(Debug, Clone, PartialEq)]
pub struct Transcript {
    pub url: String,
    pub frames: Vec<Frame>,
}

/// One frame of a socket.
#[derive(Debug, Clone, PartialEq)]
pub struct Frame {
    /// Sent by the page (else by the server).
    pub sent: bool,
    /// 1 for text, 2 for binary (whose `data` is base64).
    pub opcode: u8,
    pub data: String,
    /// For a server's frame: the write it followed in the recording, as `METHOD /path`.
    pub after_write: Option<String>,
}

impl Frame {
    pub fn is_binary(&self) -> bool {
        self.opcode == 2
    }
}

/// The recording's sockets, in the order they opened (events are read by `id`). Frames of a socket whose
/// opening was not recorded are left out: nothing says where they went.
pub fn transcripts(events: &[EventRecord]) -> Vec<Transcript> {
    let mut ordered: Vec<&EventRecord> = events.iter().collect();
    ordered.sort_by_key(|record| record.id);
    let mut transcripts: Vec<Transcript> = Vec::new();
    // Each socket's transcript, and when the page last acted on it (opened it, or sent a frame).
    let mut by_socket: HashMap<(Option<i64>, &str), (usize, f64)> = HashMap::new();
    let writes = writes_by_tab(events);
    for record in ordered {
        let EventKind::WebSocket(socket) = &record.event.kind else { continue };
        let key = (record.event.tab_id, socket.request_id.as_str());
        let ts = record.event.ts;
        match socket.op {
            WebSocketOp::Opened => {
                let Some(url) = &socket.url else { continue };
                by_socket.insert(key, (transcripts.len(), ts));
                transcripts.push(Transcript { url: url.clone(), frames: Vec::new() });
            }
            WebSocketOp::Sent | WebSocketOp::Received => {
                let Some((index, page_acted)) = by_socket.get_mut(&key) else { continue };
                // Control frames (ping, pong, close) are the browser's business, not the page's.
                let opcode = socket.opcode.unwrap_or(1);
                if opcode != 1 && opcode != 2 {
                    continue;
                }
                let data = socket.data.clone().unwrap_or_default();
                let sent = socket.op == WebSocketOp::Sent;
                let after_write = if sent {
                    *page_acted = ts;
                    None
                } else {
                    let since = *page_acted;
                    writes.get(&record.event.tab_id).and_then(|writes| {
                        writes.iter().rev().find(|(at, _)| since < *at && *at < ts).map(|(_, write)| write.clone())
                    })
                };
                transcripts[*index].frames.push(Frame { sent, opcode, data, after_write });
            }
            WebSocketOp::Closed | WebSocketOp::Error => {}
        }
    }
    transcripts
}

/// Each tab's writes (requests other than `GET`, `HEAD` and `OPTIONS`), as `METHOD /path` with the time
/// they were sent, in time order.
fn writes_by_tab(events: &[EventRecord]) -> HashMap<Option<i64>, Vec<(f64, String)>> {
    let mut writes: HashMap<Option<i64>, Vec<(f64, String)>> = HashMap::new();
    for record in events {
        let EventKind::Request(request) = &record.event.kind else { continue };
        let method = request.method.to_ascii_uppercase();
        if matches!(method.as_str(), "GET" | "HEAD" | "OPTIONS") {
            continue;
        }
        let Ok(url) = url::Url::parse(&request.url) else { continue };
        writes.entry(record.event.tab_id).or_default().push((record.event.ts, format!("{method} {}", url.path())));
    }
    for tab in writes.values_mut() {
        tab.sort_by(|a, b| a.0.total_cmp(&b.0));
    }
    writes
}

#[cfg(test)]
mod tests {
    use trace_manifest::event::{Event, WebSocketEvent};

    use super::*;

    fn socket(
        id: u64,
        tab: i64,
        request_id: &str,
        op: WebSocketOp,
        url: Option<&str>,
        data: Option<&str>,
    ) -> EventRecord {
        let kind = EventKind::WebSocket(WebSocketEvent {
            request_id: request_id.into(),
            op,
            url: url.map(Into::into),
            opcode: data.map(|_| 1),
            data: data.map(Into::into),
        });
        EventRecord { id, event: Event { ts: id as f64, tab_id: Some(tab), frame_id: None, kind } }
    }

    #[test]
    fn sockets_are_transcribed_in_the_order_they_opened_with_their_frames_in_order() {
        use WebSocketOp::*;
        let events = vec![
            socket(5, 1, "B", Opened, Some("ws://s.test/feed"), None),
            socket(1, 1, "A", Opened, Some("ws://s.test/chat"), None),
            socket(2, 1, "A", Received, None, Some("hello")),
            socket(3, 1, "A", Sent, None, Some("question")),
            socket(6, 1, "B", Received, None, Some("tick")),
            socket(4, 1, "A", Received, None, Some("answer")),
            // Another tab's socket with the same DevTools id is another socket.
            socket(7, 2, "A", Received, None, Some("elsewhere")),
            socket(8, 1, "A", Closed, None, None),
        ];
        let transcripts = transcripts(&events);
        let summary: Vec<(&str, Vec<(bool, &str)>)> = transcripts
            .iter()
            .map(|t| (t.url.as_str(), t.frames.iter().map(|f| (f.sent, f.data.as_str())).collect()))
            .collect();
        assert_eq!(
            summary,
            [
                ("ws://s.test/chat", vec![(false, "hello"), (true, "question"), (false, "answer")]),
                ("ws://s.test/feed", vec![(false, "tick")]),
            ]
        );
        assert!(transcripts.iter().flat_map(|t| &t.frames).all(|frame| frame.after_write.is_none()));
    }

    /// Issue #44: a server pushes notifications over its socket after the page deployed over HTTP.
    #[test]
    fn a_frame_the_server_pushed_after_a_write_names_it() {
        use WebSocketOp::*;
        let request = |id: u64, method: &str, url: &str| EventRecord {
            id,
            event: Event {
                ts: id as f64,
                tab_id: Some(1),
                frame_id: None,
                kind: trace_manifest::testing::request(&id.to_string(), method, url, &[], None),
            },
        };
        let events = vec![
            socket(1, 1, "A", Opened, Some("ws://red.test/comms"), None),
            socket(2, 1, "A", Sent, None, Some(r#"{"subscribe":"notification/#"}"#)),
            // Answered at once: its answer, as before.
            socket(3, 1, "A", Received, None, Some("subscribed")),
            request(4, "GET", "http://red.test/flows?_=1795893598357"),
            request(5, "POST", "http://red.test/flows?x=1"),
            socket(6, 1, "A", Received, None, Some(r#"[{"topic":"notification/runtime-deploy"}]"#)),
            socket(7, 1, "A", Sent, None, Some("ping")),
            socket(8, 1, "A", Received, None, Some("pong")),
        ];
        let transcribed = transcripts(&events);
        let frames: Vec<(&str, Option<&str>)> =
            transcribed[0].frames.iter().map(|frame| (frame.data.as_str(), frame.after_write.as_deref())).collect();
        assert_eq!(
            frames,
            [
                (r#"{"subscribe":"notification/#"}"#, None),
                ("subscribed", None),
                (r#"[{"topic":"notification/runtime-deploy"}]"#, Some("POST /flows")),
                ("ping", None),
                ("pong", None),
            ]
        );
    }
}
