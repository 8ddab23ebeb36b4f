//! Response bodies on their way to the host, as a state machine with no browser in it: the recorder feeds
//! it what DevTools says and sends the [`Chunk`]s it returns. It also allocates every body's id, unique
//! within the task as the host requires.
//!
//! A body reaches the host by one of three paths:
//! - **Taken while paused.** Where Chrome refuses to keep bodies for DevTools (durable messages), every
//!   response is paused at its headers (`Fetch.requestPaused`) and has its body taken whole
//!   ([`Bodies::captured`]), sent when its loading finishes.
//! - **Streamed.** A body too large to take whole ([`Bodies::mark_large`], or a `Content-Length` over the
//!   limit in its response) is streamed: the recorder asks Chrome (`Network.streamResourceContent`) after
//!   [`Bodies::stream_requested`]. Chrome answers with what it had buffered, and sends the rest in
//!   `dataReceived` events that may overtake that answer: those are held until the answer comes
//!   ([`Bodies::stream_started`]) and then sent after the buffered data, so chunks leave in order. The end
//!   (an empty last chunk) is sent once, when loading has finished and the stream has started, whichever
//!   comes second. Chunks carry Chrome's base64 as it came, never decoded or held whole.
//! - **Fetched whole.** A body neither taken nor streamed, or whose stream Chrome refused, is fetched
//!   (`Network.getResponseBody`) once loading has finished (and its page has loaded: see
//!   [`crate::load_gate`]), and sent as chunks of [`SUGGESTED_CHUNK_BYTES`]. The usual path.
//!
//! Each body's chunks are numbered from 0 and the last one says so. A failed load forgets its body, unless
//! it was being streamed: a stream cut short (an `EventSource` the page closed, a live feed when the page
//! navigates or the recording stops) keeps what arrived, ended where it was cut.

use std::collections::{BTreeSet, HashMap};

use base64::Engine as _;
use trace_manifest::wire::SUGGESTED_CHUNK_BYTES;

/// An exchange of a tab: a request id with the tab it belongs to. One tab's targets (its iframes in other
/// processes, its workers) share its request ids, and may report one exchange between them: the request
/// of a cross-process iframe's document in the tab, its response in the iframe's target.
pub type ExchangeKey = (i64, String);

/// One piece of a body for the host.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Chunk {
    pub body_id: String,
    pub request_id: String,
    pub index: u64,
    /// Base64, as the host takes it.
    pub data: String,
    pub last: bool,
    /// About how many bytes of body the chunk carries, for the popup's count.
    pub bytes: u64,
}

/// What to do when an exchange's loading finishes.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum Finished {
    /// Send these chunks (a body taken while paused, or a stream's end); possibly none, when the stream's
    /// start is still to come and will end it.
    Send(Vec<Chunk>),
    /// Fetch the body whole from Chrome, then hand it to [`Bodies::whole`].
    Fetch,
}

/// The bodies of a task's exchanges in flight.
#[derive(Debug, Default)]
pub struct Bodies {
    /// Response bodies being streamed.
    streams: HashMap<ExchangeKey, Stream>,
    /// Response bodies taken while their response was paused, waiting for their exchange to complete.
    captured: HashMap<ExchangeKey, Vec<u8>>,
    /// Exchanges whose body is too large to take whole: they are streamed.
    large: BTreeSet<ExchangeKey>,
    next_body: u64,
}

#[derive(Debug)]
struct Stream {
    body_id: String,
    next_index: u64,
    /// Chrome has answered the request to stream.
    started: bool,
    /// Data that came before that answer.
    early: Vec<String>,
    /// Loading has finished.
    finished: bool,
}

impl Bodies {
    /// The id of a new body of this task: unique within it, as the host requires.
    pub fn new_body_id(&mut self, tab_id: i64) -> String {
        self.next_body += 1;
        format!("{tab_id}-{}", self.next_body)
    }

    /// A paused response whose body is too large to take whole: it will be streamed.
    pub fn mark_large(&mut self, key: ExchangeKey) {
        self.large.insert(key);
    }

    /// A body taken whole while its response was paused.
    pub fn captured(&mut self, key: ExchangeKey, bytes: Vec<u8>) {
        self.captured.insert(key, bytes);
    }

    /// A response arrived; true when its body is to be streamed and its stream is still to be asked for
    /// (the recorder then asks Chrome, after [`Bodies::stream_requested`]); it may have been asked for at
    /// the response's pause already. `announced_large`: its `Content-Length` is over the limit.
    pub fn response_received(&mut self, key: &ExchangeKey, announced_large: bool) -> bool {
        if announced_large {
            self.large.insert(key.clone());
        }
        self.large.contains(key) && !self.streams.contains_key(key)
    }

    /// The recorder is about to ask Chrome to stream the body.
    pub fn stream_requested(&mut self, key: ExchangeKey) {
        let body_id = self.new_body_id(key.0);
        self.streams.insert(key, Stream { body_id, next_index: 0, started: false, early: Vec::new(), finished: false });
    }

    /// Chrome streams the body, and gave what it had `buffered`: that, the data that came meanwhile, and the
    /// end if loading finished meanwhile.
    pub fn stream_started(&mut self, key: &ExchangeKey, buffered: String) -> Vec<Chunk> {
        let Some(stream) = self.streams.get_mut(key) else { return Vec::new() };
        stream.started = true;
        let early = std::mem::take(&mut stream.early);
        let finished = stream.finished;
        let mut chunks: Vec<Chunk> =
            std::iter::once(buffered).chain(early).filter_map(|data| self.next_chunk(key, data, false)).collect();
        if finished {
            chunks.extend(self.next_chunk(key, String::new(), true));
        }
        chunks
    }

    /// Chrome refused to stream the body; true when loading has finished already, so that the recorder
    /// fetches it whole now (otherwise it does when loading finishes).
    pub fn stream_refused(&mut self, key: &ExchangeKey) -> bool {
        self.streams.remove(key).is_some_and(|stream| stream.finished)
    }

    /// Data of a streamed body (`Network.dataReceived`): a chunk to send, or held until the stream starts.
    pub fn data_received(&mut self, key: &ExchangeKey, data: String) -> Option<Chunk> {
        let stream = self.streams.get_mut(key)?;
        if !stream.started {
            stream.early.push(data);
            return None;
        }
        self.next_chunk(key, data, false)
    }

    /// The exchange's loading finished.
    pub fn loading_finished(&mut self, key: &ExchangeKey) -> Finished {
        self.large.remove(key);
        if let Some(bytes) = self.captured.remove(key) {
            return Finished::Send(self.whole(key, &bytes));
        }
        self.end_stream(key).map_or(Finished::Fetch, Finished::Send)
    }

    /// The exchange's loading failed: a streamed body ends with what arrived (the chunks to send), any
    /// other is forgotten.
    pub fn loading_failed(&mut self, key: &ExchangeKey) -> Vec<Chunk> {
        self.captured.remove(key);
        self.large.remove(key);
        self.end_stream(key).unwrap_or_default()
    }

    /// The recording stops, or `tab_id`'s tab is gone: every stream of it (of every tab when `None`) ends
    /// with what arrived.
    pub fn end_streams(&mut self, tab_id: Option<i64>) -> Vec<Chunk> {
        let keys: Vec<ExchangeKey> =
            self.streams.keys().filter(|key| tab_id.is_none_or(|tab| key.0 == tab)).cloned().collect();
        keys.iter().flat_map(|key| self.end_stream(key).unwrap_or_default()).collect()
    }

    /// Ends a streamed body: its last chunk when the stream has started; when it has not, the start sends
    /// the end (or the refusal fetches the body whole). `None` when the body is not streamed.
    fn end_stream(&mut self, key: &ExchangeKey) -> Option<Vec<Chunk>> {
        let stream = self.streams.get_mut(key)?;
        stream.finished = true;
        let started = stream.started;
        Some(if started { self.next_chunk(key, String::new(), true).into_iter().collect() } else { Vec::new() })
    }

    /// A body held whole, as chunks of the suggested size (one empty last chunk for an empty body).
    pub fn whole(&mut self, key: &ExchangeKey, bytes: &[u8]) -> Vec<Chunk> {
        let body_id = self.new_body_id(key.0);
        let pieces: Vec<&[u8]> =
            if bytes.is_empty() { vec![&[]] } else { bytes.chunks(SUGGESTED_CHUNK_BYTES).collect() };
        let count = pieces.len();
        pieces
            .into_iter()
            .enumerate()
            .map(|(index, piece)| Chunk {
                body_id: body_id.clone(),
                request_id: key.1.clone(),
                index: index as u64,
                data: base64::engine::general_purpose::STANDARD.encode(piece),
                last: index + 1 == count,
                bytes: piece.len() as u64,
            })
            .collect()
    }

    /// The next chunk of a streamed body; the last one ends the stream.
    fn next_chunk(&mut self, key: &ExchangeKey, data: String, last: bool) -> Option<Chunk> {
        let stream = self.streams.get_mut(key)?;
        let index = stream.next_index;
        stream.next_index += 1;
        let body_id = stream.body_id.clone();
        if last {
            self.streams.remove(key);
        }
        let bytes = (data.len() as u64) * 3 / 4;
        Some(Chunk { body_id, request_id: key.1.clone(), index, data, last, bytes })
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn key(request: &str) -> ExchangeKey {
        (7, request.to_owned())
    }

    /// Each chunk as "body index data last".
    fn shown(chunks: &[Chunk]) -> Vec<String> {
        chunks.iter().map(|c| format!("{} {} {:?} {}", c.body_id, c.index, c.data, c.last)).collect()
    }

    #[test]
    fn data_that_overtakes_the_streams_start_follows_the_buffered_data_in_order() {
        let mut bodies = Bodies::default();
        assert!(bodies.response_received(&key("r"), true));
        bodies.stream_requested(key("r"));
        assert_eq!(bodies.data_received(&key("r"), "Qg==".into()), None);
        assert_eq!(bodies.data_received(&key("r"), "Qw==".into()), None);
        let started = bodies.stream_started(&key("r"), "QQ==".into());
        assert_eq!(shown(&started), [r#"7-1 0 "QQ==" false"#, r#"7-1 1 "Qg==" false"#, r#"7-1 2 "Qw==" false"#]);
        let later = bodies.data_received(&key("r"), "RA==".into()).unwrap();
        assert_eq!((later.index, later.last), (3, false));
        assert_eq!(
            bodies.loading_finished(&key("r")),
            Finished::Send(vec![Chunk {
                body_id: "7-1".into(),
                request_id: "r".into(),
                index: 4,
                data: String::new(),
                last: true,
                bytes: 0,
            }])
        );
        // The end was sent once: the stream is gone.
        assert_eq!(bodies.data_received(&key("r"), "RQ==".into()), None);
        assert_eq!(bodies.loading_finished(&key("r")), Finished::Fetch);
    }

    #[test]
    fn a_stream_started_at_the_responses_pause_is_not_asked_for_again_when_the_response_arrives() {
        let mut bodies = Bodies::default();
        bodies.mark_large(key("r"));
        bodies.stream_requested(key("r"));
        let started = bodies.stream_started(&key("r"), "QQ==".into());
        assert_eq!(shown(&started), [r#"7-1 0 "QQ==" false"#]);
        assert!(!bodies.response_received(&key("r"), true), "a second stream would start the body again");
        let next = bodies.data_received(&key("r"), "Qg==".into()).unwrap();
        assert_eq!((next.body_id.as_str(), next.index), ("7-1", 1));
    }

    #[test]
    fn loading_that_finishes_before_the_stream_starts_is_ended_by_the_start() {
        let mut bodies = Bodies::default();
        bodies.mark_large(key("r"));
        assert!(bodies.response_received(&key("r"), false));
        bodies.stream_requested(key("r"));
        bodies.data_received(&key("r"), "Qg==".into());
        assert_eq!(bodies.loading_finished(&key("r")), Finished::Send(Vec::new()));
        let started = bodies.stream_started(&key("r"), "QQ==".into());
        assert_eq!(shown(&started), [r#"7-1 0 "QQ==" false"#, r#"7-1 1 "Qg==" false"#, r#"7-1 2 "" true"#]);
    }

    #[test]
    fn a_refused_stream_is_fetched_whole_when_loading_finishes() {
        let mut bodies = Bodies::default();
        // Refused before loading finished: the finish fetches it.
        bodies.stream_requested(key("early"));
        assert!(!bodies.stream_refused(&key("early")));
        assert_eq!(bodies.loading_finished(&key("early")), Finished::Fetch);
        // Refused after: the refusal says to fetch it now.
        bodies.stream_requested(key("late"));
        assert_eq!(bodies.loading_finished(&key("late")), Finished::Send(Vec::new()));
        assert!(bodies.stream_refused(&key("late")));
        // A stream that started after a refusal has nothing to send.
        assert!(bodies.stream_started(&key("late"), "QQ==".into()).is_empty());
    }

    #[test]
    fn a_body_taken_while_paused_is_sent_whole_in_chunks_of_the_suggested_size() {
        let mut bodies = Bodies::default();
        let body = vec![b'x'; SUGGESTED_CHUNK_BYTES * 2 + 5];
        bodies.captured(key("r"), body.clone());
        let Finished::Send(chunks) = bodies.loading_finished(&key("r")) else { panic!("a captured body is sent") };
        assert_eq!(
            chunks.iter().map(|c| (c.index, c.last, c.bytes as usize)).collect::<Vec<_>>(),
            [(0, false, SUGGESTED_CHUNK_BYTES), (1, false, SUGGESTED_CHUNK_BYTES), (2, true, 5)]
        );
        let sent: Vec<u8> =
            chunks.iter().flat_map(|c| base64::engine::general_purpose::STANDARD.decode(&c.data).unwrap()).collect();
        assert_eq!(sent, body);
        assert!(chunks.iter().all(|c| c.body_id == "7-1" && c.request_id == "r"));
        // Taken once: a second finish would fetch.
        assert_eq!(bodies.loading_finished(&key("r")), Finished::Fetch);
    }

    #[test]
    fn an_empty_body_is_one_empty_last_chunk_and_ids_never_repeat() {
        let mut bodies = Bodies::default();
        let empty = bodies.whole(&key("a"), b"");
        assert_eq!(shown(&empty), [r#"7-1 0 "" true"#]);
        let next = bodies.whole(&(9, "b".to_owned()), b"hi");
        assert_eq!(shown(&next), [r#"9-2 0 "aGk=" true"#]);
    }

    #[test]
    fn a_stream_cut_short_keeps_what_arrived_and_ends_once() {
        let mut bodies = Bodies::default();
        bodies.mark_large(key("feed"));
        bodies.stream_requested(key("feed"));
        bodies.stream_started(&key("feed"), "ZGF0YTogMQ==".into());
        bodies.data_received(&key("feed"), "ZGF0YTogMg==".into());
        // The page closes its EventSource: the load fails, canceled.
        assert_eq!(shown(&bodies.loading_failed(&key("feed"))), [r#"7-1 2 "" true"#]);
        assert!(bodies.end_streams(None).is_empty());

        // Still streaming when the recording stops: ended there, one tab at a time when asked.
        bodies.mark_large((8, "live".into()));
        bodies.stream_requested((8, "live".into()));
        bodies.stream_started(&(8, "live".into()), "ZGF0YTogMQ==".into());
        assert!(bodies.end_streams(Some(7)).is_empty());
        assert_eq!(bodies.end_streams(None).len(), 1);
    }

    #[test]
    fn a_failed_load_forgets_a_body_taken_whole_but_not_a_stream_about_to_start() {
        let mut bodies = Bodies::default();
        bodies.captured(key("taken"), b"body".to_vec());
        bodies.mark_large(key("streamed"));
        bodies.stream_requested(key("streamed"));
        assert!(bodies.loading_failed(&key("taken")).is_empty());
        assert!(bodies.loading_failed(&key("streamed")).is_empty());
        assert_eq!(bodies.loading_finished(&key("taken")), Finished::Fetch);
        // What Chrome had buffered arrives with the stream's start, and ends it.
        let started = bodies.stream_started(&key("streamed"), "QQ==".into());
        assert_eq!(shown(&started), [r#"7-1 0 "QQ==" false"#, r#"7-1 1 "" true"#]);
        assert!(!bodies.response_received(&key("streamed"), false));
    }
}
