//! The WebSockets of a recording as transcripts: each socket the pages opened, in the order they opened
//! them, with its frames both ways in the order they passed. Replay plays a transcript back to the page
//! that opens the same URL (sockets are not requests: `Fetch` never sees them).
//!
//! A server's frame that came after the page wrote over HTTP (a `POST` of its tab sent since the page's
//! last frame on that socket: a deploy, after which the server pushes its notifications) names the latest
//! such write ([`Frame::after_write`]): replay plays it once the page has made that write, not at once,
//! and reads the ids the page wrote in it (the deploy's node ids, which a replayed page draws anew) against
//! the recorded write's body, so that the frame names the page's ids where it named the recorded ones.
//!
//! Replay answers each frame the page sends with the server's frames that followed it in the recording, up
//! to the page's next one. A server that answers requests by their ids (a notebook kernel's `msg_id`, echoed
//! in its replies' `parent_header`) may answer one request after the page has sent another (the kernel's
//! output came after the debugger's next request): such an answer, one that echoes an id the page made in an
//! earlier frame and none of the frame it came after, is transcribed after the request it answers
//! ([`answers_after_their_requests`]), so that it plays when the page sends that request again, whatever
//! the page sends around it.

use std::collections::{HashMap, HashSet};

use base64::Engine as _;

use crate::canonical::Clocks;
use crate::client_ids::id_tokens;

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
    /// For a server's frame: the write it followed in the recording.
    pub after_write: Option<Write>,
}

/// A write the page made over HTTP (a request other than `GET`, `HEAD` and `OPTIONS`).
#[derive(Debug, Clone, PartialEq)]
pub struct Write {
    /// `METHOD /path`.
    pub key: String,
    /// Its body as the recording sent it, when it was text of at most [`WRITE_BODY_CHARS`].
    pub body: Option<String>,
}

/// The longest write body a transcript keeps (a flow editor's deploy, a form), to pair its ids with the
/// replayed page's.
pub const WRITE_BODY_CHARS: usize = 1 << 20;

impl Frame {
    pub fn is_binary(&self) -> bool {
        self.opcode == 2
    }
}

/// What names a frame's kind: a top-level member of these names, or a top-level element of an array
/// (Socket.IO's `42["event", …]`, Phoenix's `[join, ref, topic, event, payload]`). Replay answers a frame
/// the page sends that matches no recorded one with what followed a recorded frame of its kind; the
/// checkpoints leave out frames whose kind is chatter ([`is_chatter_kind`]).
pub const FRAME_KIND_NAMES: [&str; 8] = ["type", "event", "op", "kind", "action", "method", "msg_type", "name"];

/// The words that name a liveness signal: a frame's kind, or a segment of a write's path
/// (`/editing-sessions/ping/…`, `/heartbeat`).
pub const LIVENESS_WORDS: [&str; 5] = ["ping", "heartbeat", "keepalive", "keep-alive", "presence"];

/// Whether a frame's kind says it only keeps the conversation going: a liveness signal, an acknowledgement
/// of what the page received (NiceGUI's `["ack", {"next_message_id": 3}]`), an answer to the server's ping,
/// the opening of the talk. A page sends them on its own clock, counting the server's messages, whatever
/// the person did.
pub fn is_chatter_kind(kind: &str) -> bool {
    chatter_kinds().any(|word| kind.eq_ignore_ascii_case(word))
}

/// The kinds [`is_chatter_kind`] names, in lower case.
pub fn chatter_kinds() -> impl Iterator<Item = &'static str> {
    const TRANSPORT: [&str; 3] = ["ack", "pong", "connection_init"];
    LIVENESS_WORDS.into_iter().chain(TRANSPORT)
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
                        writes.iter().rev().find(|(at, _)| since < *at && *at < ts).map(|(_, write)| (*write).clone())
                    })
                };
                transcripts[*index].frames.push(Frame { sent, opcode, data, after_write });
            }
            WebSocketOp::Closed | WebSocketOp::Error => {}
        }
    }
    for transcript in &mut transcripts {
        answers_after_their_requests(&mut transcript.frames);
    }
    transcripts
}

/// Moves each of the server's frames that answers an earlier frame of the page than the one it followed to
/// the end of that frame's answers (see the module documentation).
///
/// A frame answers the page's frame P when it holds an id born in P: an id-shaped token
/// ([`id_tokens`]) that no frame before P held and no other frame of the page holds (a request's own id,
/// not the session's, which every request carries, nor one the server handed out). It is moved only when
/// the frame it followed had ids born in it too, none of which it holds: that frame was a request of its
/// own, which it does not answer. Frames keep their order otherwise.
fn answers_after_their_requests(frames: &mut Vec<Frame>) {
    let ids: Vec<HashSet<String>> = frames.iter().map(frame_ids).collect();
    // Where each id first appeared, and in how many of the page's frames.
    let mut first_seen: HashMap<&str, usize> = HashMap::new();
    let mut sent_in: HashMap<&str, usize> = HashMap::new();
    for (at, (frame, ids)) in frames.iter().zip(&ids).enumerate() {
        for id in ids {
            first_seen.entry(id).or_insert(at);
            if frame.sent {
                *sent_in.entry(id).or_default() += 1;
            }
        }
    }
    // Each id born in a frame of the page, with that frame.
    let born: HashMap<&str, usize> =
        first_seen.into_iter().filter(|(id, at)| frames[*at].sent && sent_in.get(id) == Some(&1)).collect();
    let has_born_ids: HashSet<usize> = born.values().copied().collect();
    // Each frame's place: the page's frame it is played after (none before the first), then its own index.
    let mut owner: Option<usize> = None;
    let mut places: Vec<(Option<usize>, usize)> = Vec::with_capacity(frames.len());
    for (at, frame) in frames.iter().enumerate() {
        if frame.sent {
            owner = Some(at);
            places.push((owner, at));
            continue;
        }
        // The requests whose born ids this frame holds.
        let answers = || ids[at].iter().filter_map(|id| born.get(id.as_str()).copied());
        let followed = owner.filter(|followed| has_born_ids.contains(followed) && !answers().any(|r| r == *followed));
        let answered = followed.and_then(|followed| answers().filter(|request| *request < followed).max());
        places.push((answered.or(owner), at));
    }
    if places.windows(2).all(|pair| pair[0] <= pair[1]) {
        return;
    }
    // A page's frame sorts as its own first answer would: before them, since its index is lower.
    places.sort();
    let mut taken: Vec<Option<Frame>> = std::mem::take(frames).into_iter().map(Some).collect();
    frames.extend(places.into_iter().map(|(_, at)| taken[at].take().expect("each frame is placed once")));
}

/// The id-shaped tokens of a frame with a digit in them (a binary frame's bytes decoded), less the dates
/// written in it: a long word (a JSON key such as `next_message_id`) names no request, and an ISO time's
/// `2026-11-29T06` is the page's clock, shared by whatever it sent that hour.
fn frame_ids(frame: &Frame) -> HashSet<String> {
    let bytes = if frame.is_binary() {
        base64::engine::general_purpose::STANDARD.decode(&frame.data).unwrap_or_default()
    } else {
        frame.data.as_bytes().to_vec()
    };
    let is_date = |token: &[u8]| {
        token.len() >= 10
            && token[..10]
                .iter()
                .enumerate()
                .all(|(k, b)| if k == 4 || k == 7 { *b == b'-' } else { b.is_ascii_digit() })
    };
    id_tokens(&bytes, &Clocks::NONE)
        .map(|range| &bytes[range])
        .filter(|token| token.iter().any(u8::is_ascii_digit) && !is_date(token))
        .map(|token| String::from_utf8_lossy(token).into_owned())
        .collect()
}

/// Each tab's writes with the time they were sent, in time order.
fn writes_by_tab(events: &[EventRecord]) -> HashMap<Option<i64>, Vec<(f64, Write)>> {
    let mut writes: HashMap<Option<i64>, Vec<(f64, Write)>> = HashMap::new();
    for record in events {
        let EventKind::Request(request) = &record.event.kind else { continue };
        let method = request.method.to_ascii_uppercase();
        if matches!(method.as_str(), "GET" | "HEAD" | "OPTIONS") {
            continue;
        }
        let Ok(url) = url::Url::parse(&request.url) else { continue };
        let key = format!("{method} {}", url.path());
        let body = request.post_data.clone().filter(|body| body.len() <= WRITE_BODY_CHARS);
        writes.entry(record.event.tab_id).or_default().push((record.event.ts, Write { key, body }));
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
        let request = |id: u64, method: &str, url: &str, body: Option<&str>| EventRecord {
            id,
            event: Event {
                ts: id as f64,
                tab_id: Some(1),
                frame_id: None,
                kind: trace_manifest::testing::request(&id.to_string(), method, url, &[], body),
            },
        };
        let deploy = r#"{"flows":[{"id":"dad0c6e3e5309984","type":"inject"}]}"#;
        let events = vec![
            socket(1, 1, "A", Opened, Some("ws://red.test/comms"), None),
            socket(2, 1, "A", Sent, None, Some(r#"{"subscribe":"notification/#"}"#)),
            // Answered at once: its answer, as before.
            socket(3, 1, "A", Received, None, Some("subscribed")),
            request(4, "GET", "http://red.test/flows?_=1795893598357", None),
            request(5, "POST", "http://red.test/flows?x=1", Some(deploy)),
            socket(6, 1, "A", Received, None, Some(r#"[{"topic":"notification/runtime-deploy"}]"#)),
            socket(7, 1, "A", Sent, None, Some("ping")),
            socket(8, 1, "A", Received, None, Some("pong")),
        ];
        let transcribed = transcripts(&events);
        let frames: Vec<(&str, Option<&Write>)> =
            transcribed[0].frames.iter().map(|frame| (frame.data.as_str(), frame.after_write.as_ref())).collect();
        let deployed = Write { key: "POST /flows".to_owned(), body: Some(deploy.to_owned()) };
        assert_eq!(
            frames,
            [
                (r#"{"subscribe":"notification/#"}"#, None),
                ("subscribed", None),
                (r#"[{"topic":"notification/runtime-deploy"}]"#, Some(&deployed)),
                ("ping", None),
                ("pong", None),
            ]
        );
    }

    /// A notebook's kernel answers the debugger's requests and the cell's run by their `msg_id`s, and
    /// answered the run after the debugger's next request: the run's answers go with the run.
    #[test]
    fn an_answer_that_came_after_another_request_goes_with_the_request_it_answers() {
        use WebSocketOp::*;
        let request = |msg_id: &str, kind: &str| {
            format!(
                r#"{{"header":{{"msg_id":"{msg_id}","session":"5e55-10n-abcdef12","date":"2026-11-29T06:07:18.123Z","msg_type":"{kind}"}},"parent_header":{{}}}}"#
            )
        };
        let answer = |parent: &str, kind: &str| {
            format!(
                r#"{{"header":{{"msg_id":"k3rn-{parent}","session":"kern-5e55-99","date":"2026-11-29T06:07:18.150Z","msg_type":"{kind}"}},"parent_header":{{"msg_id":"{parent}","session":"5e55-10n-abcdef12"}}}}"#
            )
        };
        let frames = [
            (Sent, request("debug-0001", "debug_request")),
            (Sent, request("exec-0001", "execute_request")),
            (Received, answer("debug-0001", "debug_reply")),
            (Sent, request("debug-0002", "debug_request")),
            (Received, answer("exec-0001", "execute_reply")),
            (Received, answer("exec-0001", "stream")),
            (Received, answer("debug-0002", "debug_reply")),
            // The session's own message, which names no request: where it came.
            (Received, r#"{"header":{"msg_type":"status","session":"kern-5e55-99"},"parent_header":{}}"#.to_owned()),
        ];
        let mut events = vec![socket(0, 1, "K", Opened, Some("ws://lab.test/api/kernels/1/channels"), None)];
        events.extend(
            frames.iter().enumerate().map(|(at, (op, data))| socket(at as u64 + 1, 1, "K", *op, None, Some(data))),
        );
        let transcribed = transcripts(&events);
        let order: Vec<String> = transcribed[0]
            .frames
            .iter()
            .map(|frame| {
                let value: serde_json::Value = serde_json::from_str(&frame.data).unwrap();
                let kind = value["header"]["msg_type"].as_str().unwrap().to_owned();
                match value["parent_header"]["msg_id"].as_str() {
                    Some(parent) => format!("{kind} to {parent}"),
                    None => kind,
                }
            })
            .collect();
        assert_eq!(
            order,
            [
                "debug_request",
                "debug_reply to debug-0001",
                "execute_request",
                "execute_reply to exec-0001",
                "stream to exec-0001",
                "debug_request",
                "debug_reply to debug-0002",
                "status",
            ]
        );
    }

    /// What must stay where it came: a room's message, which names the room the server handed out and the
    /// page joined, after the page's next frame; an answer after a frame of the page that made no id of its
    /// own (a ping); frames that name only the session every request carries.
    #[test]
    fn frames_that_answer_no_earlier_request_keep_their_place() {
        use WebSocketOp::*;
        let frames = [
            (Received, r#"{"rooms":["room-000042"]}"#),
            (Sent, r#"{"join":"room-000042","session":"sess-1234567"}"#),
            (Received, r#"{"joined":"room-000042"}"#),
            (Sent, r#"{"say":"hi","id":"msg-7777777","session":"sess-1234567"}"#),
            (Received, r#"{"room":"room-000042","said":"hi"}"#),
            (Sent, r#"{"ask":"q-00000001","session":"sess-1234567"}"#),
            (Sent, "ping"),
            (Received, r#"{"answer":"q-00000001"}"#),
            (Sent, r#"{"ask":"q-00000002","session":"sess-1234567"}"#),
            (Received, r#"{"session":"sess-1234567","state":"idle"}"#),
        ];
        let mut events = vec![socket(0, 1, "C", Opened, Some("ws://chat.test/socket"), None)];
        events.extend(
            frames.iter().enumerate().map(|(at, (op, data))| socket(at as u64 + 1, 1, "C", *op, None, Some(data))),
        );
        let transcribed = transcripts(&events);
        let order: Vec<&str> = transcribed[0].frames.iter().map(|frame| frame.data.as_str()).collect();
        assert_eq!(order, frames.map(|(_, data)| data));
    }
}
