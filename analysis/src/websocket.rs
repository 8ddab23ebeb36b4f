//! The WebSockets of a recording as transcripts: each socket the pages opened, in the order they opened
//! them, with its frames both ways in the order they passed. Replay plays a transcript back to the page
//! that opens the same URL (sockets are not requests: `Fetch` never sees them).

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
    let mut by_socket: HashMap<(Option<i64>, &str), usize> = HashMap::new();
    for record in ordered {
        let EventKind::WebSocket(socket) = &record.event.kind else { continue };
        let key = (record.event.tab_id, socket.request_id.as_str());
        match socket.op {
            WebSocketOp::Opened => {
                let Some(url) = &socket.url else { continue };
                by_socket.insert(key, transcripts.len());
                transcripts.push(Transcript { url: url.clone(), frames: Vec::new() });
            }
            WebSocketOp::Sent | WebSocketOp::Received => {
                let Some(&index) = by_socket.get(&key) else { continue };
                // Control frames (ping, pong, close) are the browser's business, not the page's.
                let opcode = socket.opcode.unwrap_or(1);
                if opcode != 1 && opcode != 2 {
                    continue;
                }
                let data = socket.data.clone().unwrap_or_default();
                transcripts[index].frames.push(Frame { sent: socket.op == WebSocketOp::Sent, opcode, data });
            }
            WebSocketOp::Closed | WebSocketOp::Error => {}
        }
    }
    transcripts
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
    }
}
