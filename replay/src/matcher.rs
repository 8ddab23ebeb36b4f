//! The replay's request matcher: given the requests recorded in a bundle, decides which recorded response
//! answers each request the replayed browser makes. It is pure (no I/O, no clock, no randomness), so the same
//! recording and the same sequence of requests always get the same answers.
//!
//! A request is tried at three levels, the first that answers wins:
//!
//! 1. **Exact**: same method, URL and body bytes.
//! 2. **Canonical**: same method, [`canonical_url`] and [`canonical_body`] (the canonical forms, which drop
//!    what changes from one page load to the next without changing the answer, are
//!    [`trace_analysis::canonical`]'s).
//! 3. **Fuzzy**: among recorded requests with the same method, host (with port) and path, the one whose query
//!    and body parameters are closest to the request's, scored parameter by parameter ([`fuzzy_score`]); a
//!    best score under [`FUZZY_THRESHOLD`] is a miss.
//!
//! Among the recorded requests a level finds for a request, what the request asks for chooses first: twins
//! that asked for different content types (one URL fetched as JSON and as HTML, told apart by nothing but
//! `Accept` and a cache buster) answer the request that asks for the same type ([`accept_kind`]), from
//! another time (past a write the replay has not seen) rather than of another type. Then
//! the browser's state: when they were sent in different states (a dashboard asked for before the login, answered with a redirect to the
//! login page, and after it, answered with the dashboard), the ones whose state is closest to the
//! request's ([`RequestState`]: cookies and credential headers) answer. Then time: a request recorded after
//! a write (any method but `GET`, `HEAD` and `OPTIONS`) that the browser has not yet made shows a state the
//! replay has not reached (a list polled after a rename lists the new name), and answers only when no
//! request recorded before it can; one recorded before the latest write the browser has made shows a state
//! the replay has left (the list before a note was saved), and answers only when no request recorded since
//! can. Then recorded order: every one answers once before any answers twice, and when all have answered,
//! the last of them keeps answering.
//!
//! A browser that answered an HTTP authentication challenge (Basic) sends its `Authorization` with every
//! later request to that site, but the challenge is not in a recording (the browser answers it before
//! DevTools sees the response), nor does replay send one: once replay has answered a request whose recorded
//! twin carried an `Authorization` the browser's request lacked, the replayed browser is taken for
//! authenticated there as the person's was, and the site's later requests without one carry the recorded
//! value in their state.
//!
//! A credential decides at the fuzzy level ([`Matcher::with_credentials`]): a recorded request that sent
//! one of the values the person typed into a credential field (a password) answers only a request that
//! sends the same value in that parameter. A sign-in with another value is answered as the site answered
//! the person's own failed attempt when the recording holds one (an attempt at that endpoint with another
//! credential than the last), and is otherwise a miss: a wrong password never gets the recorded success.
//!
//! Numbers that read as clocks of the time requests were made ([`Clocks`]) are dropped from canonical forms
//! and fuzzy scores: the recorded requests are read with the recording's times, the browser's with the
//! replay's ([`Matcher::with_clocks`]).
//!
//! Ids the replayed page makes itself (a session id from `Math.random()`) are followed ([`crate::page_ids`]):
//! once a page's value is bound to the recorded one it stands for ([`Matcher::propose_ids`],
//! [`Matcher::bind_ids`]), every request is read with the recorded value in its place.
//!
//! This module owns the levels, the queues and the fuzzy score; what a request's canonical form, endpoint
//! and parameters are is [`trace_analysis::canonical`]'s.
//!
//! Lookups stay fast on large recordings: the exact and canonical levels are hash lookups, and the fuzzy level
//! only scores the recorded requests of the request's (method, host, path), skipping those whose score cannot
//! beat the best so far.

use std::borrow::Cow;
use std::cmp::Ordering;
use std::collections::{HashMap, HashSet};
use std::fmt;

use trace_analysis::canonical::{self, Clocks, Param, Place};
#[cfg(doc)]
use trace_analysis::canonical::{canonical_body, canonical_url};
pub use trace_analysis::request_state::RequestState;
use trace_analysis::{body, request_state};
use trace_bundle::archive::sha256_hex;
use trace_manifest::event::header_value;
use trace_manifest::har::HarRequest;

use crate::page_ids::{PageIds, Proposal, Sent};

/// The lowest [`fuzzy_score`] that still answers a request. At 0.6 most of the request must agree with the
/// recording: `q=mug` is answered by `q=mugs` (0.75), but a request with one parameter of two changed
/// (`q=mug&page=2` against `q=mug&page=1`, 0.5) or one added (`q=mug&sort=price` against `q=mug`, 0.5) is a
/// miss, since serving another page's response would mislead more than a missing one.
pub const FUZZY_THRESHOLD: f64 = 0.6;

/// Values longer than this (in characters) score 1 when equal and 0 otherwise instead of by edit distance,
/// which costs the product of the lengths: long values are tokens and blobs, where near does not mean similar.
pub const FUZZY_MAX_EDIT_CHARS: usize = 64;

/// A request body larger than this is matched by its digest alone ([`large_body_stand_in`]): it is an upload
/// or a blob, which only its exact twin answers, and holding its bytes for each request that sent it would let
/// a small bundle that names one large body many times fill memory.
pub const LARGE_BODY_BYTES: usize = 1 << 20;

/// What a body larger than [`LARGE_BODY_BYTES`] is held and compared as, on both sides: the lowercase hex
/// SHA-256 of its bytes, marked so that no body of the page reads as one by chance.
pub fn large_body_stand_in(sha256_hex: &str) -> Vec<u8> {
    format!("trace-large-body sha256:{sha256_hex}").into_bytes()
}

/// One recorded request, as the matcher needs it. Its position in the `Vec` given to [`Matcher::new`] is the
/// [`Matched::index`] that designates its response.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct RecordedRequest {
    pub method: String,
    pub url: String,
    /// The request body; `None` and an empty body are the same. A body larger than [`LARGE_BODY_BYTES`] is
    /// held as its [`large_body_stand_in`].
    pub body: Option<Vec<u8>>,
    /// The request's `Content-Type`, which says how to canonicalize the body.
    pub content_type: Option<String>,
    /// The browser's state the request was sent in.
    pub state: RequestState,
    /// What it asked for: the [`accept_kind`] of its `Accept` header.
    pub accept: Option<String>,
}

/// The header HTTP authentication sends, by its lower-case name ([`RequestState::header`]).
const AUTHORIZATION: &str = "authorization";

/// `url`'s origin, serialized; `None` for a URL without one (unparsable, or opaque as `data:` is).
pub(crate) fn origin_of(url: &str) -> Option<String> {
    let origin = url::Url::parse(url).ok()?.origin();
    origin.is_tuple().then(|| origin.ascii_serialization())
}

/// The content type a request asks for, as twins that differ by it are told apart: the first media range of
/// its `Accept` header, lowercased, without parameters (`application/json` of `application/json,
/// text/javascript, */*; q=0.01`).
pub fn accept_kind(accept: &str) -> Option<String> {
    let first = accept.split(',').next()?.split(';').next()?.trim().to_ascii_lowercase();
    (!first.is_empty()).then_some(first)
}

impl RecordedRequest {
    /// A HAR request with its `postData.text` as body. A binary body stored in the bundle (`postData._file`)
    /// is not read here: the caller reads it and sets [`RecordedRequest::body`].
    pub fn from_har(request: &HarRequest) -> RecordedRequest {
        let post_data = request.post_data.as_ref();
        let content_type = post_data
            .map(|post| post.mime_type.as_str())
            .filter(|mime| !mime.is_empty())
            .or_else(|| header_value(&request.headers, "content-type"))
            .map(str::to_owned);
        RecordedRequest {
            method: request.method.clone(),
            url: request.url.clone(),
            body: post_data.and_then(|post| post.text.as_deref()).map(recorded_body_bytes),
            content_type,
            state: RequestState::from_headers(request.headers.iter().map(|h| (h.name.as_str(), h.value.as_str()))),
            accept: header_value(&request.headers, "accept").and_then(accept_kind),
        }
    }
}

/// A recorded request body's bytes, as the browser sends them: its text, but for a compressed stream a
/// page sent without saying so, which DevTools gives (and the HAR keeps) as one character per byte.
fn recorded_body_bytes(text: &str) -> Vec<u8> {
    let compressed = body::compressed_text(text, MAX_COMPRESSED_BODY).is_some();
    compressed.then(|| body::latin1_bytes(text)).flatten().unwrap_or_else(|| text.as_bytes().to_vec())
}

/// The most a recorded compressed body is decoded to, to tell it is one.
const MAX_COMPRESSED_BODY: u64 = 16 << 20;

/// A request the browser makes, as the matcher reads it.
#[derive(Debug, Clone, Copy, Default)]
pub struct Request<'a> {
    pub method: &'a str,
    pub url: &'a str,
    pub body: Option<&'a [u8]>,
    pub content_type: Option<&'a str>,
    /// The browser's state when it sent the request; `None` when unknown (every recorded state is as good).
    pub state: Option<&'a RequestState>,
    /// Its `Accept` header.
    pub accept: Option<&'a str>,
    /// Its `Authorization` header.
    pub authorization: Option<&'a str>,
}

/// How a request was matched, for the caller's log.
#[derive(Debug, Clone, Copy, PartialEq)]
pub enum MatchKind {
    Exact,
    Canonical,
    /// `score` is the [`fuzzy_score`], between [`FUZZY_THRESHOLD`] and 1.
    Fuzzy {
        score: f64,
    },
}

impl fmt::Display for MatchKind {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        match self {
            MatchKind::Exact => f.write_str("exact"),
            MatchKind::Canonical => f.write_str("canonical"),
            MatchKind::Fuzzy { score } => write!(f, "fuzzy {score:.3}"),
        }
    }
}

/// The recorded request that answers a request, and how it was found.
#[derive(Debug, Clone, Copy, PartialEq)]
pub struct Matched {
    /// Index into the recorded requests given to [`Matcher::new`].
    pub index: usize,
    pub kind: MatchKind,
}

/// One parameter in which a request differs from the recorded one that answered it.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Difference {
    pub place: Place,
    pub name: String,
    /// The recorded value; `None` when the recorded request had no such parameter.
    pub recorded: Option<String>,
    /// The value sent; `None` when the request has no such parameter.
    pub sent: Option<String>,
}

/// The recorded requests, indexed for lookup, and which of them have answered already.
#[derive(Debug)]
pub struct Matcher {
    /// `"METHOD url"` → the recorded bodies sent to it, each with its requests in recorded order. Bodies are
    /// compared in a short list rather than hashed into the key so that a lookup copies no body.
    exact: HashMap<String, Vec<ExactGroup>>,
    /// The canonical key ([`canonical::request`]) → its requests in recorded order.
    canonical: HashMap<Vec<u8>, Queue>,
    /// [`canonical::endpoint_key`] (method, host, path) → the candidates of the fuzzy level, in recorded order.
    buckets: HashMap<String, Vec<Candidate>>,
    /// Whether each recorded request has answered, shared by all levels so that a response answered at one
    /// level is not answered again at another while others wait.
    answered: Vec<bool>,
    /// Each recorded request's state.
    states: Vec<RequestState>,
    /// Each recorded request's [`accept_kind`], by index.
    accepts: Vec<Option<String>>,
    /// The origins the replayed browser is authenticated at (see the module), with the recorded value.
    authenticated: HashMap<String, String>,
    /// How the browser's requests are read for clocks.
    live_clocks: Clocks,
    /// Whether any recorded twins differ in state: when none do, no request needs the browser's cookies.
    state_chooses: bool,
    /// The recorded requests' ids, and which of the page's values stand for which.
    ids: PageIds,
    /// Per recorded request: how many writes were recorded before it.
    writes_before: Vec<usize>,
    /// Per recorded request that is a write: how many writes were recorded before it.
    write_rank: Vec<Option<usize>>,
    /// How many of the recording's writes the replay has caught up with: one more than the rank of the
    /// latest write that answered.
    writes_reached: usize,
    /// What the person typed into credential fields ([`Matcher::with_credentials`]).
    credentials: HashSet<String>,
}

/// What a queue needs to know of the recorded requests to choose among its own.
struct Recorded<'m> {
    answered: &'m [bool],
    states: &'m [RequestState],
    accepts: &'m [Option<String>],
    writes_before: &'m [usize],
    writes_reached: usize,
}

#[derive(Debug)]
struct ExactGroup {
    body: Vec<u8>,
    queue: Queue,
}

/// Recorded requests that answer the same key, in recorded order.
#[derive(Debug, Default)]
struct Queue {
    indices: Vec<usize>,
    /// Every index before this one has answered or lies in the replay's past; it only moves forward, so
    /// lookups stay O(1) amortized.
    cursor: usize,
    /// The state keys whose values differ among the queue's requests: empty when they were all sent in the
    /// same state, and state does not choose.
    distinguishing: Vec<String>,
    /// Its requests asked for different content types ([`accept_kind`]), which then choose first.
    negotiated: bool,
}

impl Queue {
    fn new(index: usize) -> Queue {
        Queue { indices: vec![index], cursor: 0, distinguishing: Vec::new(), negotiated: false }
    }

    /// The request that answers: among those of the replay's present (recorded between the latest write
    /// the replay has made and the next; else the latest before it; else, when all lie ahead, all), those
    /// that asked for the content type `accept` asks for when the queue's differ by it, whose recorded state
    /// is closest to `state`, the first that has not answered yet, or the last of them when all have.
    fn next(&mut self, recorded: &Recorded<'_>, state: Option<&RequestState>, accept: Option<&str>) -> usize {
        // The queue is in recorded order: the requests of the replay's past come first, then its present
        // (recorded since the latest write the replay has made), then its future.
        let past = self.indices.partition_point(|&index| recorded.writes_before[index] < recorded.writes_reached);
        let present = self.indices.partition_point(|&index| recorded.writes_before[index] <= recorded.writes_reached);
        let now = match (past, present) {
            (past, present) if past < present => past..present,
            (_, 0) => 0..self.indices.len(),
            (_, present) => present - 1..present,
        };
        let asked_for: Vec<usize> = match accept.filter(|_| self.negotiated) {
            Some(accept) => {
                let of_type = |range: std::ops::Range<usize>| -> Vec<usize> {
                    self.indices[range]
                        .iter()
                        .copied()
                        .filter(|&index| recorded.accepts[index].as_deref() == Some(accept))
                        .collect()
                };
                // A twin of the type asked for from another time (recorded after a write the page has
                // not sent yet: the page's requests raced) answers before one of another type from now,
                // which the page cannot read (JSON where it asked for HTML).
                let now_of_type = of_type(now.clone());
                if now_of_type.is_empty() { of_type(0..self.indices.len()) } else { now_of_type }
            }
            None => Vec::new(),
        };
        if !asked_for.is_empty() {
            return match state.filter(|_| !self.distinguishing.is_empty()) {
                Some(state) => self.next_in_state(recorded, state, &asked_for),
                None => asked_for
                    .iter()
                    .copied()
                    .find(|&index| !recorded.answered[index])
                    .unwrap_or(asked_for[asked_for.len() - 1]),
            };
        }
        if let Some(state) = state.filter(|_| !self.distinguishing.is_empty()) {
            return self.next_in_state(recorded, state, &self.indices[now]);
        }
        self.cursor = self.cursor.max(now.start);
        while self.cursor < now.end && recorded.answered[self.indices[self.cursor]] {
            self.cursor += 1;
        }
        self.indices[self.cursor.min(now.end - 1)]
    }

    fn next_in_state(&self, recorded: &Recorded<'_>, state: &RequestState, indices: &[usize]) -> usize {
        let (answered, states) = (recorded.answered, recorded.states);
        let scores: Vec<f64> = indices
            .iter()
            .map(|&index| request_state::similarity(&self.distinguishing, state, &states[index]))
            .collect();
        let best = scores.iter().copied().fold(f64::NEG_INFINITY, f64::max);
        let closest = || indices.iter().zip(&scores).filter(|(_, score)| **score == best).map(|(index, _)| *index);
        closest().find(|&index| !answered[index]).or_else(|| closest().next_back()).expect("a queue is never empty")
    }

    /// Finds the state keys and content types that tell the queue's requests apart.
    fn find_distinguishing(&mut self, states: &[RequestState], accepts: &[Option<String>]) {
        self.distinguishing = request_state::distinguishing_keys(self.indices.iter().map(|&index| &states[index]));
        let first = &accepts[self.indices[0]];
        self.negotiated = self.indices.iter().any(|&index| accepts[index] != *first);
    }
}

#[derive(Debug)]
struct Candidate {
    index: usize,
    params: Vec<Param>,
}

impl Matcher {
    /// Indexes `recorded`, reading no number as a clock; [`Matched::index`] is a position in it.
    pub fn new(recorded: Vec<RecordedRequest>) -> Matcher {
        Matcher::with_clocks(recorded, Clocks::NONE, Clocks::NONE)
    }

    /// Indexes `recorded`, whose clocks are read with `recorded_clocks` (the recording's times); the
    /// browser's requests are read with `live_clocks` (the replay's).
    pub fn with_clocks(recorded: Vec<RecordedRequest>, recorded_clocks: Clocks, live_clocks: Clocks) -> Matcher {
        let mut matcher = Matcher {
            exact: HashMap::new(),
            canonical: HashMap::new(),
            buckets: HashMap::new(),
            answered: vec![false; recorded.len()],
            states: Vec::with_capacity(recorded.len()),
            accepts: Vec::with_capacity(recorded.len()),
            authenticated: HashMap::new(),
            live_clocks,
            state_chooses: false,
            ids: PageIds::default(),
            writes_before: Vec::with_capacity(recorded.len()),
            write_rank: Vec::with_capacity(recorded.len()),
            writes_reached: 0,
            credentials: HashSet::new(),
        };
        for (index, request) in recorded.into_iter().enumerate() {
            let method = request.method.to_ascii_uppercase();
            // Numbered below, once every request is in.
            matcher.writes_before.push(0);
            let is_write = !matches!(method.as_str(), "GET" | "HEAD" | "OPTIONS");
            matcher.write_rank.push(is_write.then_some(0));
            let body = request.body.unwrap_or_default();
            let sent =
                Sent { method: &method, url: &request.url, body: &body, content_type: request.content_type.as_deref() };
            matcher.ids.add(index, &sent, &recorded_clocks);
            let analysis =
                canonical::request(&method, &request.url, &body, request.content_type.as_deref(), &recorded_clocks);
            matcher.canonical.entry(analysis.key).or_default().indices.push(index);
            if let Some(bucket_key) = analysis.endpoint {
                matcher.buckets.entry(bucket_key).or_default().push(Candidate { index, params: analysis.params });
            }
            let groups = matcher.exact.entry(exact_key(&method, &request.url)).or_default();
            match groups.iter_mut().find(|group| group.body == body) {
                Some(group) => group.queue.indices.push(index),
                None => groups.push(ExactGroup { body, queue: Queue::new(index) }),
            }
            matcher.states.push(request.state);
            matcher.accepts.push(request.accept);
        }
        matcher.rank_writes();
        let (states, accepts) = (&matcher.states, &matcher.accepts);
        for queue in matcher.canonical.values_mut() {
            queue.find_distinguishing(states, accepts);
        }
        for group in matcher.exact.values_mut().flatten() {
            group.queue.find_distinguishing(states, accepts);
        }
        matcher.state_chooses = matcher.canonical.values().any(|queue| !queue.distinguishing.is_empty());
        matcher
    }

    /// The values the person typed into credential fields: a recorded request that sent one in a parameter
    /// answers only a request that sends the same (see the module).
    pub fn with_credentials(mut self, credentials: impl IntoIterator<Item = String>) -> Matcher {
        self.credentials = credentials.into_iter().filter(|value| !value.is_empty()).collect();
        self
    }

    /// Whether the browser's state would choose this request's answer: its recorded twins were sent in
    /// different states. A caller that must ask the browser for its cookies asks only then.
    pub fn depends_on_state(&self, request: &Request<'_>) -> bool {
        // Exact twins are canonical twins too: when no canonical queue tells states apart, none does.
        if !self.state_chooses {
            return false;
        }
        let method = request.method.to_ascii_uppercase();
        let (url, body) = self.as_recorded(request);
        let (url, body) = (url.as_ref(), body.as_ref());
        if let Some(group) = self.exact_group(&method, url, body) {
            return !group.queue.distinguishing.is_empty();
        }
        let analysis = canonical::request(&method, url, body, request.content_type, &self.live_clocks);
        self.canonical.get(&analysis.key).is_some_and(|queue| !queue.distinguishing.is_empty())
    }

    /// The request's URL and body with each of the page's bound ids read as the recorded value it stands for,
    /// and a large body as its [`large_body_stand_in`], as its recorded twin is held.
    fn as_recorded<'r>(&self, request: &Request<'r>) -> (Cow<'r, str>, Cow<'r, [u8]>) {
        let body = request.body.unwrap_or_default();
        if body.len() > LARGE_BODY_BYTES {
            let url = Cow::Borrowed(request.url);
            return (url, Cow::Owned(large_body_stand_in(&sha256_hex(body))));
        }
        if !self.ids.is_bound() {
            return (Cow::Borrowed(request.url), Cow::Borrowed(body));
        }
        let url = match self.ids.to_recorded(request.url.as_bytes()) {
            Cow::Borrowed(_) => Cow::Borrowed(request.url),
            Cow::Owned(bytes) => Cow::Owned(String::from_utf8(bytes).expect("ids are ASCII tokens")),
        };
        (url, self.ids.to_recorded(body))
    }

    /// A recorded request this request would match exactly once some of the ids it carries for the first
    /// time were bound to recorded ones (see [`crate::page_ids`]); `None` when it matches already, carries
    /// no new id, or no recorded request has its shape.
    pub fn propose_ids(&self, request: &Request<'_>) -> Option<Proposal> {
        let method = request.method.to_ascii_uppercase();
        let (url, body) = self.as_recorded(request);
        if self.exact_group(&method, &url, &body).is_some() {
            return None;
        }
        let sent = Sent { method: &method, url: &url, body: &body, content_type: request.content_type };
        self.ids.propose(&sent, &self.answered, &self.live_clocks)
    }

    /// The first recorded request that sent the id `recorded`.
    pub fn first_sent(&self, recorded: &str) -> Option<usize> {
        self.ids.first_sent(recorded)
    }

    /// Binds the page's values to the recorded ones of a [`Proposal`] the caller has checked.
    pub fn bind_ids(&mut self, pairs: &[(String, String)]) {
        self.ids.bind(pairs);
    }

    /// Takes the recorded requests marked in `never_asked` for no writes: replay answers them without
    /// the matcher (an ignored host's beacons), so the replay would never be seen to make them, and every
    /// request recorded after one would stay in the future.
    pub fn without_writes_never_asked(mut self, never_asked: &[bool]) -> Matcher {
        for (rank, _) in self.write_rank.iter_mut().zip(never_asked).filter(|(_, never)| **never) {
            *rank = None;
        }
        self.rank_writes();
        self
    }

    /// Numbers the writes (the requests whose `write_rank` is `Some`) in recorded order, and counts for
    /// every request the writes recorded before it.
    fn rank_writes(&mut self) {
        let mut writes = 0;
        for (before, rank) in self.writes_before.iter_mut().zip(&mut self.write_rank) {
            *before = writes;
            if let Some(rank) = rank {
                *rank = writes;
                writes += 1;
            }
        }
    }

    /// A recorded text (a response's body or header) as the replayed page expects it: each bound recorded
    /// id replaced by the page's own value; borrowed when none is bound or none occurs.
    pub fn ids_to_live<'t>(&self, text: &'t [u8]) -> Cow<'t, [u8]> {
        self.ids.to_live(text)
    }

    fn exact_group(&self, method: &str, url: &str, body: &[u8]) -> Option<&ExactGroup> {
        self.exact.get(&exact_key(method, url))?.iter().find(|group| group.body == body)
    }

    /// The recorded request that answers this request, or `None` for a miss. Each answer is remembered,
    /// which moves repeated requests along the recording (see the module documentation).
    pub fn lookup(&mut self, request: &Request<'_>) -> Option<Matched> {
        let origin = origin_of(request.url);
        let authenticated = match (request.authorization, request.state, origin.as_ref()) {
            (None, Some(state), Some(origin)) => {
                self.authenticated.get(origin).map(|recorded| state.clone().with_header(AUTHORIZATION, recorded))
            }
            _ => None,
        };
        let matched = self.lookup_in_state(request, authenticated.as_ref().or(request.state))?;
        if request.authorization.is_none()
            && let (Some(origin), Some(recorded)) = (origin, self.states[matched.index].header(AUTHORIZATION))
        {
            self.authenticated.entry(origin).or_insert_with(|| recorded.to_owned());
        }
        Some(matched)
    }

    fn lookup_in_state(&mut self, request: &Request<'_>, state: Option<&RequestState>) -> Option<Matched> {
        let method = request.method.to_ascii_uppercase();
        let accept = request.accept.and_then(accept_kind);
        let (url, body) = self.as_recorded(request);
        let (url, body) = (url.as_ref(), body.as_ref());
        let recorded = Recorded {
            answered: &self.answered,
            states: &self.states,
            accepts: &self.accepts,
            writes_before: &self.writes_before,
            writes_reached: self.writes_reached,
        };
        if let Some(groups) = self.exact.get_mut(&exact_key(&method, url))
            && let Some(group) = groups.iter_mut().find(|group| group.body == body)
        {
            let index = group.queue.next(&recorded, state, accept.as_deref());
            return Some(self.answer(index, MatchKind::Exact));
        }
        let analysis = canonical::request(&method, url, body, request.content_type, &self.live_clocks);
        if let Some(queue) = self.canonical.get_mut(&analysis.key) {
            let index = queue.next(&recorded, state, accept.as_deref());
            return Some(self.answer(index, MatchKind::Canonical));
        }
        let candidates = self.buckets.get(analysis.endpoint.as_deref()?)?;
        let (index, score) = self.fuzzy_candidate(candidates, &analysis.params)?;
        Some(self.answer(index, MatchKind::Fuzzy { score }))
    }

    /// The fuzzy level's answer among `candidates`, a credential deciding (see the module): the best of
    /// those whose credentials the request sends as recorded, else the best of the person's failed
    /// attempts, else none.
    fn fuzzy_candidate(&self, candidates: &[Candidate], params: &[Param]) -> Option<(usize, f64)> {
        if self.credentials.is_empty() {
            return best_candidate(candidates.iter(), params, &self.answered);
        }
        // Each candidate with the credentials it sent, as (name, value), in recorded order.
        let sent: Vec<(&Candidate, Vec<(&str, &str)>)> = candidates
            .iter()
            .map(|candidate| {
                let credentials = candidate.params.iter().filter(|param| self.credentials.contains(&param.value));
                (candidate, credentials.map(|param| (param.name.as_str(), param.value.as_str())).collect())
            })
            .collect();
        let Some((_, accepted)) = sent.iter().rev().find(|(_, credentials)| !credentials.is_empty()) else {
            return best_candidate(candidates.iter(), params, &self.answered);
        };
        let sends = |&(name, value): &(&str, &str)| params.iter().any(|p| p.name == name && p.value == value);
        let agreeing = sent.iter().filter(|(_, credentials)| credentials.iter().all(sends));
        if let Some(best) = best_candidate(agreeing.map(|(candidate, _)| *candidate), params, &self.answered) {
            return Some(best);
        }
        // The person's last attempt is the one that signed in; those before it with other credentials failed.
        let failed = sent.iter().filter(|(_, credentials)| !credentials.is_empty() && credentials != accepted);
        best_candidate(failed.map(|(candidate, _)| *candidate), params, &self.answered)
    }

    /// How a request differs from the recorded request `index`, parameter by parameter (volatile ones and
    /// clocks left out): what a fuzzy answer glossed over.
    pub fn differences(&self, request: &Request<'_>, index: usize) -> Vec<Difference> {
        let method = request.method.to_ascii_uppercase();
        let (url, body) = self.as_recorded(request);
        let asked = canonical::request(&method, &url, &body, request.content_type, &self.live_clocks);
        let Some(recorded) = asked
            .endpoint
            .as_deref()
            .and_then(|endpoint| self.buckets.get(endpoint))
            .and_then(|candidates| candidates.iter().find(|candidate| candidate.index == index))
        else {
            return Vec::new();
        };
        let mut differences = Vec::new();
        for_each_pair(&asked.params, &recorded.params, |sent, recorded| {
            let value = |param: Option<&Param>| param.map(|param| param.value.clone());
            if sent.map(|p| &p.value) != recorded.map(|p| &p.value) {
                let param = sent.or(recorded).expect("each pair has a side");
                differences.push(Difference {
                    place: param.place,
                    name: param.name.clone(),
                    recorded: value(recorded),
                    sent: value(sent),
                });
            }
        });
        differences
    }

    fn answer(&mut self, index: usize, kind: MatchKind) -> Matched {
        self.answered[index] = true;
        if let Some(rank) = self.write_rank[index] {
            self.writes_reached = self.writes_reached.max(rank + 1);
        }
        Matched { index, kind }
    }
}

/// The best-scoring candidate at or above [`FUZZY_THRESHOLD`]. Equal scores go to a request that has not
/// answered yet, then to the earliest recorded, so that repeated fuzzy requests also move along the recording.
fn best_candidate<'c>(
    candidates: impl Iterator<Item = &'c Candidate>,
    params: &[Param],
    answered: &[bool],
) -> Option<(usize, f64)> {
    // Rounding can put a score a hair above its bound; the margin keeps the bound a true bound.
    const BOUND_MARGIN: f64 = 1e-9;
    let mut best: Option<(usize, f64)> = None;
    for candidate in candidates {
        let floor = best.map_or(FUZZY_THRESHOLD, |(_, score)| score);
        if score_upper_bound(params, &candidate.params) + BOUND_MARGIN < floor {
            continue;
        }
        let score = fuzzy_score_of(params, &candidate.params);
        let better = match best {
            None => score >= FUZZY_THRESHOLD,
            Some((best_index, best_score)) => {
                score > best_score || (score == best_score && answered[best_index] && !answered[candidate.index])
            }
        };
        if better {
            best = Some((candidate.index, score));
        }
    }
    best
}

/// How close a request is to a recorded one of the same method, host and path, from 0 to 1: the mean, over
/// the union of their non-volatile query and body parameters, of each parameter's similarity. A parameter in
/// both scores the normalized Levenshtein similarity of its values (see [`FUZZY_MAX_EDIT_CHARS`]); a
/// parameter missing from either scores 0. Two requests without parameters score 1. Repeated names are paired
/// in order.
pub fn fuzzy_score(
    request_url: &str,
    request_body: Option<&[u8]>,
    request_content_type: Option<&str>,
    recorded: &RecordedRequest,
) -> f64 {
    let request =
        canonical::request("", request_url, request_body.unwrap_or_default(), request_content_type, &Clocks::NONE);
    let recorded = canonical::request(
        "",
        &recorded.url,
        recorded.body.as_deref().unwrap_or_default(),
        recorded.content_type.as_deref(),
        &Clocks::NONE,
    );
    fuzzy_score_of(&request.params, &recorded.params)
}

fn fuzzy_score_of(request: &[Param], recorded: &[Param]) -> f64 {
    mean_over_union(request, recorded, value_similarity)
}

/// A cheap bound on [`fuzzy_score_of`]: the edit distance is at least the difference of the lengths.
fn score_upper_bound(request: &[Param], recorded: &[Param]) -> f64 {
    mean_over_union(request, recorded, value_similarity_bound)
}

fn mean_over_union(a: &[Param], b: &[Param], similarity: fn(&Param, &Param) -> f64) -> f64 {
    let (mut union, mut total) = (0usize, 0.0);
    for_each_pair(a, b, |x, y| {
        union += 1;
        if let (Some(x), Some(y)) = (x, y) {
            total += similarity(x, y);
        }
    });
    if union == 0 { 1.0 } else { total / union as f64 }
}

/// Walks the union of two parameter lists sorted by (place, name): `visit` gets each parameter of either
/// side with its counterpart on the other, when there is one. Repeated names pair in order.
fn for_each_pair<'p>(a: &'p [Param], b: &'p [Param], mut visit: impl FnMut(Option<&'p Param>, Option<&'p Param>)) {
    let (mut i, mut j) = (0, 0);
    while i < a.len() || j < b.len() {
        let order = match (a.get(i), b.get(j)) {
            (Some(x), Some(y)) => x.order(y),
            (Some(_), None) => Ordering::Less,
            _ => Ordering::Greater,
        };
        match order {
            Ordering::Less => {
                visit(Some(&a[i]), None);
                i += 1;
            }
            Ordering::Greater => {
                visit(None, Some(&b[j]));
                j += 1;
            }
            Ordering::Equal => {
                visit(Some(&a[i]), Some(&b[j]));
                i += 1;
                j += 1;
            }
        }
    }
}

fn value_similarity(a: &Param, b: &Param) -> f64 {
    if a.value == b.value {
        1.0
    } else if a.chars > FUZZY_MAX_EDIT_CHARS || b.chars > FUZZY_MAX_EDIT_CHARS {
        0.0
    } else {
        strsim::normalized_levenshtein(&a.value, &b.value)
    }
}

fn value_similarity_bound(a: &Param, b: &Param) -> f64 {
    let longest = a.chars.max(b.chars);
    if longest == 0 || a.value == b.value {
        1.0
    } else if longest > FUZZY_MAX_EDIT_CHARS {
        0.0
    } else {
        a.chars.min(b.chars) as f64 / longest as f64
    }
}

fn exact_key(method: &str, url: &str) -> String {
    let mut key = String::with_capacity(method.len() + 1 + url.len());
    key.push_str(method);
    key.push(' ');
    key.push_str(url);
    key
}

#[cfg(test)]
mod tests {
    use trace_analysis::canonical::{canonical_body, canonical_url};

    use super::*;

    fn get(url: &str) -> RecordedRequest {
        RecordedRequest {
            method: "GET".into(),
            url: url.into(),
            body: None,
            content_type: None,
            state: RequestState::default(),
            accept: None,
        }
    }

    fn post(url: &str, content_type: &str, body: &str) -> RecordedRequest {
        RecordedRequest {
            method: "POST".into(),
            url: url.into(),
            body: Some(body.as_bytes().to_vec()),
            content_type: Some(content_type.into()),
            state: RequestState::default(),
            accept: None,
        }
    }

    fn with_cookie(mut request: RecordedRequest, cookie: &str) -> RecordedRequest {
        request.state = RequestState::from_headers([("Cookie", cookie)]);
        request
    }

    fn lookup_get(matcher: &mut Matcher, url: &str) -> Option<Matched> {
        matcher.lookup(&Request { method: "GET", url, ..Request::default() })
    }

    fn lookup_post(matcher: &mut Matcher, url: &str, content_type: &str, body: &str) -> Option<Matched> {
        matcher.lookup(&Request {
            method: "POST",
            url,
            body: Some(body.as_bytes()),
            content_type: Some(content_type),
            state: None,
            accept: None,
            authorization: None,
        })
    }

    fn lookup_with_cookie(matcher: &mut Matcher, url: &str, cookie: &str) -> Option<usize> {
        let state = RequestState::from_headers([("cookie", cookie)]);
        matcher.lookup(&Request { method: "GET", url, state: Some(&state), ..Request::default() }).map(|m| m.index)
    }

    fn asking(url: &str, accept: &str) -> RecordedRequest {
        RecordedRequest { accept: accept_kind(accept), ..get(url) }
    }

    fn lookup_accepting(matcher: &mut Matcher, url: &str, accept: &str) -> Option<usize> {
        matcher.lookup(&Request { method: "GET", url, accept: Some(accept), ..Request::default() }).map(|m| m.index)
    }

    /// Issue #47, part 3: a sign-in whose password differs from the person's was answered with the
    /// recorded success. A credential now decides: the person's own failed attempt answers a wrong one, or
    /// nothing does.
    #[test]
    fn a_wrong_password_gets_the_failed_sign_in_or_nothing_never_the_recorded_success() {
        const FORM: &str = "application/x-www-form-urlencoded";
        let login = "https://shop.test/login";
        let sign_in = |password: &str| post(login, FORM, &format!("username=alice&password={password}"));
        let credentials = || ["Blue-Mug-42".to_owned(), "Blue-Mug-24".to_owned()];

        // Only the successful sign-in recorded: a wrong password is a miss; the right one, and the right
        // one with the user name typed otherwise (which the checkpoint, not the matcher, judges), answer.
        let mut matcher =
            Matcher::new(vec![get("https://shop.test/"), sign_in("Blue-Mug-42")]).with_credentials(credentials());
        let lookup = |matcher: &mut Matcher, body: &str| lookup_post(matcher, login, FORM, body).map(|m| m.index);
        assert_eq!(lookup(&mut matcher, "username=alice&password=Blue-Mug-43"), None);
        assert_eq!(lookup(&mut matcher, "username=alicE&password=Blue-Mug-42"), Some(1));
        assert_eq!(lookup(&mut matcher, "username=alice&password=Blue-Mug-42"), Some(1));
        // Without the person's credentials the matcher cannot tell, and answers with the success (as before).
        let mut blind = Matcher::new(vec![sign_in("Blue-Mug-42")]);
        assert_eq!(lookup(&mut blind, "username=alice&password=Blue-Mug-43"), Some(0));

        // The person mistyped first: that attempt answers any wrong password, the last one the right one,
        // whichever has answered before.
        let recorded = vec![sign_in("Blue-Mug-24"), sign_in("Blue-Mug-42")];
        let mut matcher = Matcher::new(recorded).with_credentials(credentials());
        assert_eq!(lookup(&mut matcher, "username=alice&password=Blue-Mug-42"), Some(1));
        assert_eq!(lookup(&mut matcher, "username=alice&password=Blue-Mug-43"), Some(0));
        assert_eq!(lookup(&mut matcher, "username=alice&password=Blue-Mug-44"), Some(0));
        assert_eq!(lookup(&mut matcher, "username=alice&password=Blue-Mug-24"), Some(0));
        assert_eq!(lookup(&mut matcher, "username=alice&password=Blue-Mug-42"), Some(1));
    }

    /// Issue #44: a site behind HTTP Basic authentication. The person's browser answered the challenge the
    /// recording does not hold, and sent its credentials with every later request; the replayed browser,
    /// never challenged, sends none.
    #[test]
    fn after_the_request_that_authenticated_the_browser_the_site_is_asked_for_as_authenticated() {
        let basic = "Basic trace-redacted-header-authorization-1";
        let authorized =
            |url: &str| RecordedRequest { state: RequestState::from_headers([("Authorization", basic)]), ..get(url) };
        let recorded =
            vec![get("https://trac.test/"), authorized("https://trac.test/login"), authorized("https://trac.test/")];
        let mut matcher = Matcher::new(recorded.clone());
        let lookup = |matcher: &mut Matcher, url| {
            let state = RequestState::default();
            matcher.lookup(&Request { method: "GET", url, state: Some(&state), ..Request::default() }).map(|m| m.index)
        };
        // Before the login, as an agent doing nothing sees it: the site as nobody.
        assert_eq!(lookup(&mut matcher, "https://trac.test/"), Some(0));
        assert_eq!(lookup(&mut matcher, "https://trac.test/"), Some(0));
        assert_eq!(lookup(&mut matcher, "https://trac.test/login"), Some(1));
        assert_eq!(lookup(&mut matcher, "https://trac.test/"), Some(2), "logged in after the login");
        assert_eq!(lookup(&mut matcher, "https://trac.test/"), Some(2));
        // Another site is not authenticated by it.
        let others = vec![get("https://trac.test/login"), get("https://wiki.test/"), authorized("https://wiki.test/")];
        let mut matcher = Matcher::new(
            others
                .into_iter()
                .map(|request| if request.url.contains("trac") { authorized(&request.url) } else { request })
                .collect(),
        );
        assert_eq!(lookup(&mut matcher, "https://trac.test/login"), Some(0));
        assert_eq!(lookup(&mut matcher, "https://wiki.test/"), Some(1));
        assert_eq!(lookup(&mut matcher, "https://wiki.test/"), Some(1));

        // A site without authentication: as before, state alone chooses.
        let cookie = |url: &str| with_cookie(get(url), "session=1");
        let mut matcher = Matcher::new(vec![
            get("https://shop.test/"),
            cookie("https://shop.test/login"),
            cookie("https://shop.test/"),
        ]);
        assert_eq!(lookup(&mut matcher, "https://shop.test/login"), Some(1));
        assert_eq!(lookup(&mut matcher, "https://shop.test/"), Some(0), "no session cookie: logged out");
    }

    /// Issue #44: a page asks one URL for JSON, then for HTML, with jQuery's cache buster; its requests may
    /// reach replay in either order, and each must get the type it asked for.
    #[test]
    fn twins_told_apart_by_accept_answer_what_each_asks_for() {
        const JSON: &str = "application/json";
        const HTML: &str = "text/html";
        let recorded = vec![
            asking("https://red.test/nodes?_=1795893598357", JSON),
            asking("https://red.test/nodes?_=1795893598362", HTML),
        ];
        let mut matcher = Matcher::new(recorded.clone());
        assert_eq!(lookup_accepting(&mut matcher, "https://red.test/nodes?_=1", "text/html, */*; q=0.01"), Some(1));
        assert_eq!(lookup_accepting(&mut matcher, "https://red.test/nodes?_=2", "application/json"), Some(0));
        // Asked again, each still gets its own type.
        assert_eq!(lookup_accepting(&mut matcher, "https://red.test/nodes?_=3", "Application/JSON"), Some(0));
        // A type neither asked for: recorded order, as before.
        let mut matcher = Matcher::new(recorded);
        assert_eq!(lookup_accepting(&mut matcher, "https://red.test/nodes?_=4", "*/*"), Some(0));
        assert_eq!(lookup_accepting(&mut matcher, "https://red.test/nodes?_=5", "*/*"), Some(1));

        // Twins that asked for one type are answered in recorded order whatever the request asks for; twins
        // that differ in more than what they ask for are not twins.
        let mut matcher =
            Matcher::new(vec![asking("https://red.test/a?_=1", JSON), asking("https://red.test/a?_=2", JSON)]);
        assert_eq!(lookup_accepting(&mut matcher, "https://red.test/a?_=3", HTML), Some(0));
        assert_eq!(lookup_accepting(&mut matcher, "https://red.test/a?_=4", HTML), Some(1));
        let mut matcher =
            Matcher::new(vec![asking("https://red.test/b?page=1", JSON), asking("https://red.test/b?page=2", HTML)]);
        assert_eq!(lookup_accepting(&mut matcher, "https://red.test/b?page=1", HTML), Some(0));
    }

    /// Node-RED's editor, seen in the real-application bench: the person's page saved a setting between
    /// asking `/plugins` for JSON and for HTML; the replayed page asked for the HTML before its save
    /// reached replay, and was answered with the JSON, which stopped the editor from drawing its palette.
    #[test]
    fn a_twin_of_the_type_asked_for_answers_even_when_recorded_after_a_write_not_yet_made() {
        const JSON: &str = "application/json";
        const HTML: &str = "text/html";
        let recorded = vec![
            asking("https://red.test/plugins?_=1385", JSON),
            post("https://red.test/settings/user", JSON, "{}"),
            asking("https://red.test/plugins?_=1389", HTML),
        ];
        let mut matcher = Matcher::new(recorded);
        assert_eq!(lookup_accepting(&mut matcher, "https://red.test/plugins?_=1765", JSON), Some(0));
        assert_eq!(lookup_accepting(&mut matcher, "https://red.test/plugins?_=1769", HTML), Some(2));
        assert_eq!(lookup_post(&mut matcher, "https://red.test/settings/user", JSON, "{}").map(|m| m.index), Some(1));
        assert_eq!(lookup_accepting(&mut matcher, "https://red.test/plugins?_=1770", HTML), Some(2));

        // Twins of one type still follow the writes: before the save the earlier answer, after it the later.
        let recorded = vec![
            asking("https://shop.test/cart?_=1", JSON),
            post("https://shop.test/cart", JSON, "{}"),
            asking("https://shop.test/cart?_=2", JSON),
            asking("https://shop.test/cart?_=3", HTML),
        ];
        let mut matcher = Matcher::new(recorded);
        assert_eq!(lookup_accepting(&mut matcher, "https://shop.test/cart?_=7", JSON), Some(0));
        assert_eq!(lookup_accepting(&mut matcher, "https://shop.test/cart?_=8", JSON), Some(0));
        assert_eq!(lookup_post(&mut matcher, "https://shop.test/cart", JSON, "{}").map(|m| m.index), Some(1));
        assert_eq!(lookup_accepting(&mut matcher, "https://shop.test/cart?_=9", JSON), Some(2));
    }

    fn fuzzy_score_of_match(matched: Option<Matched>) -> f64 {
        match matched {
            Some(Matched { kind: MatchKind::Fuzzy { score }, .. }) => score,
            other => panic!("expected a fuzzy match, got {other:?}"),
        }
    }

    /// Issue #31: a large upload is held as its digest ([`large_body_stand_in`]), as the archive reads it from
    /// the bundle; the page's same bytes still find it exactly, and a different upload of the same size does not.
    #[test]
    fn a_large_body_held_as_its_digest_answers_its_exact_twin_only() {
        let upload: Vec<u8> = (0..LARGE_BODY_BYTES as u32 + 10).map(|i| (i % 251) as u8).collect();
        let mut other = upload.clone();
        other[5] ^= 1;
        let recorded = |body: &[u8]| RecordedRequest {
            body: Some(large_body_stand_in(&sha256_hex(body))),
            ..post("https://drive.test/upload", "application/octet-stream", "")
        };
        let mut matcher = Matcher::new(vec![recorded(&upload), recorded(&other)]);
        fn sent(body: &[u8]) -> Request<'_> {
            Request {
                method: "POST",
                url: "https://drive.test/upload",
                body: Some(body),
                content_type: Some("application/octet-stream"),
                state: None,
                accept: None,
                authorization: None,
            }
        }
        let matched = matcher.lookup(&sent(&other)).unwrap();
        assert_eq!((matched.index, matched.kind), (1, MatchKind::Exact));
        let matched = matcher.lookup(&sent(&upload)).unwrap();
        assert_eq!((matched.index, matched.kind), (0, MatchKind::Exact));
    }

    /// A list polled before and after a rename: polled again and again before the replay renames, it keeps
    /// the name it had (an agent doing nothing must not see the rename); once renamed, the new name.
    #[test]
    fn a_request_recorded_after_a_write_answers_only_once_the_replay_has_made_it() {
        let json = "application/json";
        let mut matcher = Matcher::new(vec![
            get("https://lab.test/api/sessions"),
            get("https://lab.test/api/sessions"),
            post("https://lab.test/api/rename", json, r#"{"path":"answer"}"#),
            get("https://lab.test/api/sessions"),
            get("https://lab.test/api/sessions"),
        ]);
        let polled: Vec<usize> =
            (0..4).map(|_| lookup_get(&mut matcher, "https://lab.test/api/sessions").unwrap().index).collect();
        assert_eq!(polled, [0, 1, 1, 1], "the polls stay before the rename");
        assert_eq!(
            lookup_post(&mut matcher, "https://lab.test/api/rename", json, r#"{"path":"answer"}"#).unwrap().index,
            2
        );
        let polled: Vec<usize> =
            (0..3).map(|_| lookup_get(&mut matcher, "https://lab.test/api/sessions").unwrap().index).collect();
        assert_eq!(polled, [3, 4, 4], "after it, the recording's order again");
        // A request recorded only after a write the replay never makes still answers: nothing else can.
        let mut matcher = Matcher::new(vec![
            post("https://lab.test/api/rename", json, "{}"),
            get("https://lab.test/api/contents/answer"),
        ]);
        assert_eq!(lookup_get(&mut matcher, "https://lab.test/api/contents/answer").unwrap().index, 1);
    }

    /// A list asked for twice before a save (the recorder reloads the page it starts on) and once after:
    /// a replay that asked once before saving sees the saved note, not the second list of the past.
    #[test]
    fn a_request_recorded_before_the_latest_write_made_answers_only_when_none_since_can() {
        let json = "application/json";
        let mut matcher = Matcher::new(vec![
            get("https://notes.test/api/list"),
            get("https://notes.test/api/list"),
            post("https://notes.test/api/draft", json, r#"{"title":"Mug care"}"#),
            get("https://notes.test/api/list"),
            post("https://notes.test/api/draft", json, r#"{"title":"Tea"}"#),
        ]);
        assert_eq!(lookup_get(&mut matcher, "https://notes.test/api/list").unwrap().index, 0);
        assert_eq!(
            lookup_post(&mut matcher, "https://notes.test/api/draft", json, r#"{"title":"Mug care"}"#).unwrap().index,
            2
        );
        let listed: Vec<usize> =
            (0..2).map(|_| lookup_get(&mut matcher, "https://notes.test/api/list").unwrap().index).collect();
        assert_eq!(listed, [3, 3], "the list since the save, never the one before it");
        // After a write with no list recorded since, the latest list before it is the closest state.
        assert_eq!(
            lookup_post(&mut matcher, "https://notes.test/api/draft", json, r#"{"title":"Tea"}"#).unwrap().index,
            4
        );
        assert_eq!(lookup_get(&mut matcher, "https://notes.test/api/list").unwrap().index, 3);
    }

    #[test]
    fn a_write_replay_never_asks_about_keeps_no_request_in_the_future() {
        let json = "application/json";
        let recorded = || {
            vec![
                get("https://notes.test/api/list"),
                post("https://notes.test/api/draft", json, "{}"),
                post("https://tracker.test/collect", json, "{}"),
                get("https://notes.test/api/list"),
            ]
        };
        let mut matcher = Matcher::new(recorded()).without_writes_never_asked(&[false, false, true, false]);
        lookup_get(&mut matcher, "https://notes.test/api/list");
        lookup_post(&mut matcher, "https://notes.test/api/draft", json, "{}");
        assert_eq!(lookup_get(&mut matcher, "https://notes.test/api/list").unwrap().index, 3);
        // Counted, the beacon the replay never sends would hold the list in the past.
        let mut matcher = Matcher::new(recorded());
        lookup_get(&mut matcher, "https://notes.test/api/list");
        lookup_post(&mut matcher, "https://notes.test/api/draft", json, "{}");
        assert_eq!(lookup_get(&mut matcher, "https://notes.test/api/list").unwrap().index, 0);
    }

    #[test]
    fn exact_request_matches_exactly() {
        let mut matcher = Matcher::new(vec![
            get("https://shop.example/"),
            get("https://shop.example/api/products?_=123"),
            get("https://shop.example/api/products?_=456"),
        ]);
        assert_eq!(
            lookup_get(&mut matcher, "https://shop.example/api/products?_=456"),
            Some(Matched { index: 2, kind: MatchKind::Exact })
        );
        assert_eq!(
            lookup_get(&mut matcher, "https://shop.example/"),
            Some(Matched { index: 0, kind: MatchKind::Exact })
        );
    }

    #[test]
    fn cache_buster_is_ignored() {
        let mut matcher =
            Matcher::new(vec![get("https://shop.example/"), get("https://shop.example/api/products?_=123")]);
        assert_eq!(
            lookup_get(&mut matcher, "https://shop.example/api/products?_=456"),
            Some(Matched { index: 1, kind: MatchKind::Canonical })
        );
        for buster in ["t", "ts", "cb", "cachebuster", "timestamp", "rand", "nocache", "TS"] {
            assert_eq!(
                canonical_url(&format!("https://shop.example/a?{buster}=1&id=7")),
                "https://shop.example/a?id=7",
                "{buster} is volatile"
            );
        }
    }

    #[test]
    fn parameter_order_is_ignored() {
        let mut matcher = Matcher::new(vec![
            get("https://shop.example/search?q=mug&page=2&sort=price"),
            get("https://shop.example/search?q=mug&page=3&sort=price"),
        ]);
        assert_eq!(
            lookup_get(&mut matcher, "https://shop.example/search?sort=price&page=3&q=mug"),
            Some(Matched { index: 1, kind: MatchKind::Canonical })
        );
    }

    #[test]
    fn utm_parameters_are_ignored() {
        let mut matcher = Matcher::new(vec![get("https://shop.example/product/7?utm_source=mail&utm_medium=x")]);
        assert_eq!(
            lookup_get(&mut matcher, "https://shop.example/product/7?UTM_Campaign=spring"),
            Some(Matched { index: 0, kind: MatchKind::Canonical })
        );
        // `utm` alone is not a campaign parameter.
        assert_eq!(canonical_url("https://shop.example/?utm=1"), "https://shop.example/?utm=1");
    }

    #[test]
    fn jsonp_callback_is_ignored() {
        let mut matcher = Matcher::new(vec![
            get("https://api.example/v1/stock?id=7&callback=jQuery3410_1700000000001&_=1700000000002"),
            get("https://api.example/v1/stock?id=8&jsonp=cb_1"),
        ]);
        assert_eq!(
            lookup_get(&mut matcher, "https://api.example/v1/stock?callback=jQuery3410_1800000000001&id=7&_=18"),
            Some(Matched { index: 0, kind: MatchKind::Canonical })
        );
        assert_eq!(
            lookup_get(&mut matcher, "https://api.example/v1/stock?id=8&jsonp=cb_2"),
            Some(Matched { index: 1, kind: MatchKind::Canonical })
        );
    }

    #[test]
    fn fragment_is_dropped_and_encoding_normalized() {
        assert_eq!(
            canonical_url("https://Shop.Example:443/search?q=blue+mug&a=%41#reviews"),
            "https://shop.example/search?a=A&q=blue+mug"
        );
        assert_eq!(canonical_url("https://shop.example/search?q=blue%20mug"), "https://shop.example/search?q=blue+mug");
        // Repeated names keep their relative order: `sort=price&sort=name` is not `sort=name&sort=price`.
        assert_eq!(
            canonical_url("https://s.example/?sort=price&b=1&sort=name"),
            "https://s.example/?b=1&sort=price&sort=name"
        );
        assert_eq!(canonical_url("not a url#frag"), "not a url");
        let mut matcher = Matcher::new(vec![get("https://shop.example/docs#intro")]);
        assert_eq!(
            lookup_get(&mut matcher, "https://shop.example/docs#usage"),
            Some(Matched { index: 0, kind: MatchKind::Canonical })
        );
    }

    #[test]
    fn form_body_is_canonical() {
        let form = "application/x-www-form-urlencoded";
        let mut matcher = Matcher::new(vec![
            post("https://shop.example/login", form, "user=ann&pass=s%21&csrf=abc&ts=1"),
            post("https://shop.example/login", form, "user=bob&pass=x&csrf=abc&ts=1"),
        ]);
        assert_eq!(
            lookup_post(
                &mut matcher,
                "https://shop.example/login",
                &format!("{form}; charset=UTF-8"),
                "csrf=abc&pass=s!&ts=2&user=ann"
            ),
            Some(Matched { index: 0, kind: MatchKind::Canonical })
        );
        assert_eq!(
            lookup_post(&mut matcher, "https://shop.example/login", form, "pass=x&user=bob&csrf=abc"),
            Some(Matched { index: 1, kind: MatchKind::Canonical })
        );
        assert_eq!(canonical_body(b"b=2&a=1+1&_=9", Some(form)), b"a=1+1&b=2".to_vec());
    }

    #[test]
    fn json_body_key_order_and_volatile_keys_are_ignored() {
        let json = "application/json";
        let mut matcher = Matcher::new(vec![post(
            "https://shop.example/api/cart",
            json,
            r#"{"item": 7, "options": {"size": "L", "color": "red", "timestamp": 1700000000}, "qty": 2, "ts": 1}"#,
        )]);
        assert_eq!(
            lookup_post(
                &mut matcher,
                "https://shop.example/api/cart",
                json,
                r#"{"qty":2,"ts":99,"options":{"timestamp":1800000000,"color":"red","size":"L"},"item":7}"#
            ),
            Some(Matched { index: 0, kind: MatchKind::Canonical })
        );
        assert_eq!(
            canonical_body(br#"{"b": [ {"z": 1, "a": null} ], "a": "x", "cb": 3}"#, Some(json)),
            br#"{"a":"x","b":[{"a":null,"z":1}]}"#.to_vec()
        );
        // `fetch` sends a string body as text/plain: still JSON.
        assert_eq!(canonical_body(br#"{"b":1,"a":2}"#, Some("text/plain;charset=UTF-8")), br#"{"a":2,"b":1}"#.to_vec());
        // Not JSON after all: kept as it is.
        assert_eq!(canonical_body(b"{not json", Some(json)), b"{not json".to_vec());
    }

    #[test]
    fn multipart_boundary_and_part_order_are_ignored() {
        fn multipart(boundary: &str, parts: &[(&str, &str)]) -> (String, String) {
            let mut body = String::new();
            for (name, value) in parts {
                body.push_str(&format!(
                    "--{boundary}\r\nContent-Disposition: form-data; name=\"{name}\"\r\n\r\n{value}\r\n"
                ));
            }
            body.push_str(&format!("--{boundary}--\r\n"));
            (format!("multipart/form-data; boundary={boundary}"), body)
        }
        let (recorded_type, recorded_body) =
            multipart("----WebKitFormBoundaryAAAA", &[("title", "Blue mug"), ("price", "12"), ("_", "1")]);
        let (other_type, other_body) =
            multipart("----WebKitFormBoundaryAAAB", &[("title", "Red mug"), ("price", "12")]);
        let mut matcher = Matcher::new(vec![
            post("https://shop.example/admin/product", &recorded_type, &recorded_body),
            post("https://shop.example/admin/product", &other_type, &other_body),
        ]);
        let (request_type, request_body) =
            multipart("----WebKitFormBoundaryZZZZ", &[("price", "12"), ("_", "2"), ("title", "Blue mug")]);
        assert_ne!(request_body, recorded_body);
        assert_eq!(
            lookup_post(&mut matcher, "https://shop.example/admin/product", &request_type, &request_body),
            Some(Matched { index: 0, kind: MatchKind::Canonical })
        );
        // Without the boundary in the content type, it is read from the body.
        assert_eq!(
            canonical_body(request_body.as_bytes(), Some("multipart/form-data")),
            canonical_body(recorded_body.as_bytes(), Some(&recorded_type))
        );
        // Content matters.
        assert_ne!(
            canonical_body(other_body.as_bytes(), Some(&other_type)),
            canonical_body(recorded_body.as_bytes(), Some(&recorded_type))
        );
    }

    #[test]
    fn fuzzy_picks_the_closest_and_reports_its_score() {
        let mut matcher = Matcher::new(vec![
            get("https://shop.example/search?q=teapot"),
            get("https://shop.example/search?q=mugs"),
            get("https://shop.example/search?q=mugs+set"),
        ]);
        let matched = lookup_get(&mut matcher, "https://shop.example/search?q=mug&_=5");
        assert_eq!(matched.map(|m| m.index), Some(1));
        // "mug" → "mugs" is one edit in four characters.
        assert!((fuzzy_score_of_match(matched) - 0.75).abs() < 1e-12);
        assert!(
            (fuzzy_score("https://shop.example/search?q=mug", None, None, &get("https://x.example/search?q=mugs"))
                - 0.75)
                .abs()
                < 1e-12
        );
    }

    #[test]
    fn fuzzy_scores_missing_and_extra_parameters_and_body_fields() {
        // One parameter of three missing: (1 + 1 + 0) / 3.
        let score = fuzzy_score(
            "https://s.example/list?cat=mugs&page=2&sort=price",
            None,
            None,
            &get("https://s.example/list?cat=mugs&page=2"),
        );
        assert!((score - 2.0 / 3.0).abs() < 1e-12, "{score}");
        // JSON leaves are parameters too: qty differs ("2" vs "3"), item and note agree.
        let json = "application/json";
        let mut matcher = Matcher::new(vec![
            post("https://s.example/api/cart", json, r#"{"item":7,"qty":2,"note":"gift"}"#),
            post("https://s.example/api/cart", json, r#"{"item":9,"qty":3,"note":"none"}"#),
        ]);
        let matched =
            lookup_post(&mut matcher, "https://s.example/api/cart", json, r#"{"item":7,"qty":3,"note":"gift"}"#);
        assert_eq!(matched.map(|m| m.index), Some(0));
        assert!((fuzzy_score_of_match(matched) - 2.0 / 3.0).abs() < 1e-12);
    }

    #[test]
    fn below_threshold_is_a_miss() {
        let mut matcher = Matcher::new(vec![
            get("https://shop.example/search?q=teapot"),
            get("https://shop.example/list?cat=mugs&page=1"),
        ]);
        assert_eq!(lookup_get(&mut matcher, "https://shop.example/search?q=xyz"), None);
        // Half the parameters agree: 0.5 is under the threshold.
        let half = fuzzy_score(
            "https://shop.example/list?cat=mugs&page=2",
            None,
            None,
            &get("https://shop.example/list?cat=mugs&page=1"),
        );
        assert!((half - 0.5).abs() < 1e-12 && half < FUZZY_THRESHOLD, "{half}");
        assert_eq!(lookup_get(&mut matcher, "https://shop.example/list?cat=mugs&page=2"), None);
        assert_eq!(lookup_get(&mut matcher, "https://shop.example/search?q=teapot&sort=price"), None);
        // Two of three agree: 0.67 answers.
        assert_eq!(
            lookup_get(&mut matcher, "https://shop.example/list?cat=mugs&page=1&sort=price").map(|m| m.index),
            Some(1)
        );
    }

    #[test]
    fn different_path_or_host_never_fuzzy_matches() {
        let mut matcher = Matcher::new(vec![get("https://shop.example/search?q=mug")]);
        assert_eq!(lookup_get(&mut matcher, "https://shop.example/search/?q=mug"), None);
        assert_eq!(lookup_get(&mut matcher, "https://shop.example/find?q=mug"), None);
        assert_eq!(lookup_get(&mut matcher, "https://other.example/search?q=mug"), None);
        assert_eq!(lookup_get(&mut matcher, "https://shop.example:8443/search?q=mug"), None);
        // Same host and path over http: the scheme does not separate fuzzy candidates.
        assert_eq!(
            lookup_get(&mut matcher, "http://shop.example/search?q=mug"),
            Some(Matched { index: 0, kind: MatchKind::Fuzzy { score: 1.0 } })
        );
    }

    #[test]
    fn two_posts_to_one_url_with_different_json_bodies_get_their_own_responses() {
        let json = "application/json";
        let url = "https://shop.example/api/cart";
        let mut matcher = Matcher::new(vec![
            post(url, json, r#"{"action":"add","item":7}"#),
            post(url, json, r#"{"action":"remove","item":7}"#),
        ]);
        // Asked in the other order than recorded, and each asked twice.
        for _ in 0..2 {
            assert_eq!(
                lookup_post(&mut matcher, url, json, r#"{"action":"remove","item":7}"#),
                Some(Matched { index: 1, kind: MatchKind::Exact })
            );
            assert_eq!(
                lookup_post(&mut matcher, url, json, r#"{"item":7,"action":"add"}"#),
                Some(Matched { index: 0, kind: MatchKind::Canonical })
            );
        }
    }

    #[test]
    fn repeated_identical_gets_are_answered_in_recorded_order_then_the_last_repeats() {
        let mut matcher = Matcher::new(vec![
            get("https://shop.example/api/x"),
            get("https://shop.example/other"),
            get("https://shop.example/api/x"),
            get("https://shop.example/api/x"),
        ]);
        let answers: Vec<usize> =
            (0..5).map(|_| lookup_get(&mut matcher, "https://shop.example/api/x").unwrap().index).collect();
        assert_eq!(answers, [0, 2, 3, 3, 3]);
    }

    #[test]
    fn repeated_canonical_requests_are_answered_in_recorded_order_across_levels() {
        let mut matcher = Matcher::new(vec![
            get("https://shop.example/api/poll?_=1"),
            get("https://shop.example/api/poll?_=2"),
            get("https://shop.example/api/poll?_=3"),
        ]);
        // The second recorded one is asked exactly first; the canonical queue then skips it.
        assert_eq!(
            lookup_get(&mut matcher, "https://shop.example/api/poll?_=2"),
            Some(Matched { index: 1, kind: MatchKind::Exact })
        );
        let answers: Vec<(usize, MatchKind)> = (10..14)
            .map(|buster| {
                let matched = lookup_get(&mut matcher, &format!("https://shop.example/api/poll?_={buster}")).unwrap();
                (matched.index, matched.kind)
            })
            .collect();
        assert_eq!(
            answers,
            [
                (0, MatchKind::Canonical),
                (2, MatchKind::Canonical),
                (2, MatchKind::Canonical),
                (2, MatchKind::Canonical)
            ]
        );
    }

    #[test]
    fn repeated_fuzzy_requests_move_along_equally_close_recordings() {
        let mut matcher =
            Matcher::new(vec![get("https://shop.example/search?q=mugs"), get("https://shop.example/search?q=mugz")]);
        let answers: Vec<usize> =
            (0..3).map(|_| lookup_get(&mut matcher, "https://shop.example/search?q=mug").unwrap().index).collect();
        assert_eq!(answers, [0, 1, 0]);
    }

    #[test]
    fn method_matters() {
        let json = "application/json";
        let mut matcher = Matcher::new(vec![
            get("https://shop.example/api/cart"),
            post("https://shop.example/api/cart", json, r#"{"item":7}"#),
        ]);
        assert_eq!(
            matcher.lookup(&Request {
                method: "post",
                url: "https://shop.example/api/cart",
                body: Some(br#"{"item":7}"#),
                content_type: Some(json),
                state: None,
                accept: None,
                authorization: None,
            }),
            Some(Matched { index: 1, kind: MatchKind::Exact })
        );
        assert_eq!(
            lookup_get(&mut matcher, "https://shop.example/api/cart"),
            Some(Matched { index: 0, kind: MatchKind::Exact })
        );
        assert_eq!(
            matcher.lookup(&Request { method: "DELETE", url: "https://shop.example/api/cart", ..Request::default() }),
            None
        );
        assert_eq!(
            lookup_post(&mut matcher, "https://shop.example/api/cart", json, r#"{"item":7}"#).map(|m| m.index),
            Some(1)
        );
        assert_eq!(
            matcher.lookup(&Request {
                method: "PUT",
                url: "https://shop.example/api/cart",
                body: Some(br#"{"item":7}"#),
                content_type: Some(json),
                state: None,
                accept: None,
                authorization: None,
            }),
            None
        );
    }

    #[test]
    fn body_matters_for_exact_and_empty_is_none() {
        let form = "application/x-www-form-urlencoded";
        let mut matcher = Matcher::new(vec![
            post("https://shop.example/login", form, "user=ann"),
            post("https://shop.example/ping", form, ""),
        ]);
        assert_eq!(
            matcher.lookup(&Request { method: "POST", url: "https://shop.example/ping", ..Request::default() }),
            Some(Matched { index: 1, kind: MatchKind::Exact })
        );
        assert_eq!(
            lookup_post(&mut matcher, "https://shop.example/login", form, "user=anne").map(|m| m.index),
            Some(0)
        );
        assert!(matches!(
            lookup_post(&mut matcher, "https://shop.example/login", form, "user=anne").unwrap().kind,
            MatchKind::Fuzzy { .. }
        ));
    }

    #[test]
    fn recorded_request_from_har() {
        let har: trace_manifest::har::HarRequest = serde_json::from_value(serde_json::json!({
            "method": "POST",
            "url": "https://shop.example/login",
            "httpVersion": "HTTP/1.1",
            "cookies": [],
            "headers": [{"name": "Content-Type", "value": "application/x-www-form-urlencoded"}],
            "queryString": [],
            "postData": {"mimeType": "", "text": "user=ann"},
            "headersSize": -1,
            "bodySize": 8
        }))
        .unwrap();
        assert_eq!(
            RecordedRequest::from_har(&har),
            post("https://shop.example/login", "application/x-www-form-urlencoded", "user=ann")
        );
    }

    #[test]
    fn a_fuzzy_answer_says_how_the_request_differs() {
        let form = "application/x-www-form-urlencoded";
        let url = "https://admin.example/group/add/";
        let mut matcher = Matcher::new(vec![post(url, form, "name=Editors&perm=1&perm=2&csrf=t")]);
        let request = Request {
            method: "POST",
            url,
            body: Some(b"name=Editors&perm=1&perm=3&csrf=t"),
            content_type: Some(form),
            state: None,
            accept: None,
            authorization: None,
        };
        let matched = matcher.lookup(&request).unwrap();
        assert!(matches!(matched.kind, MatchKind::Fuzzy { .. }), "{matched:?}");
        let differences = matcher.differences(&request, matched.index);
        let field = |name: &str, recorded: Option<&str>, sent: Option<&str>| Difference {
            place: Place::Body,
            name: name.into(),
            recorded: recorded.map(Into::into),
            sent: sent.map(Into::into),
        };
        // Repeated names pair in order: the second permission chosen differs.
        assert_eq!(differences, [field("perm", Some("2"), Some("3"))]);
        let request = Request { body: Some(b"name=Editors&perm=1&perm=2&csrf=t&note=x"), ..request };
        assert_eq!(matcher.differences(&request, 0), [field("note", None, Some("x"))]);
    }

    #[test]
    fn the_browsers_state_chooses_among_twins_before_recorded_order() {
        // An admin page asked for before the login (a redirect to it) and after (the dashboard); the
        // re-run goes to the login page first, so the redirect is never used up.
        let dashboard = "https://admin.example/admin/";
        let mut matcher = Matcher::new(vec![
            with_cookie(get(dashboard), "csrftoken=a1"),
            with_cookie(get("https://admin.example/admin/login/"), "csrftoken=a1"),
            with_cookie(get(dashboard), "csrftoken=b2; sessionid=s3"),
            with_cookie(get(dashboard), "csrftoken=b2; sessionid=s3; theme=dark"),
        ]);
        let logged_in = "sessionid=s3; csrftoken=b2";
        assert!(matcher.depends_on_state(&Request { method: "GET", url: dashboard, ..Request::default() }));
        assert_eq!(lookup_with_cookie(&mut matcher, dashboard, logged_in), Some(2));
        // The closest state, then recorded order, then the last of the closest keeps answering.
        assert_eq!(lookup_with_cookie(&mut matcher, dashboard, logged_in), Some(2));
        assert_eq!(lookup_with_cookie(&mut matcher, dashboard, "csrftoken=b2; sessionid=s3; theme=dark"), Some(3));
        assert_eq!(lookup_with_cookie(&mut matcher, dashboard, "csrftoken=a1"), Some(0));
        // Without a known state, recorded order alone.
        let mut matcher = Matcher::new(vec![with_cookie(get(dashboard), "a=1"), with_cookie(get(dashboard), "a=2")]);
        assert_eq!(lookup_get(&mut matcher, dashboard).map(|m| m.index), Some(0));
        assert_eq!(lookup_get(&mut matcher, dashboard).map(|m| m.index), Some(1));
    }

    #[test]
    fn state_chooses_at_the_canonical_level_too_and_only_where_twins_differ() {
        let mut matcher = Matcher::new(vec![
            with_cookie(get("https://app.example/api/me?_=1"), "other=1"),
            with_cookie(get("https://app.example/api/me?_=2"), "other=1; session=abc"),
            with_cookie(get("https://app.example/static/app.js"), "other=1"),
            with_cookie(get("https://app.example/static/app.js"), "other=1; session=abc"),
            with_cookie(get("https://app.example/logo.png"), "session=abc"),
        ]);
        assert_eq!(lookup_with_cookie(&mut matcher, "https://app.example/api/me?_=9", "session=abc; other=1"), Some(1));
        let logo = Request { method: "GET", url: "https://app.example/logo.png", ..Request::default() };
        assert!(!matcher.depends_on_state(&logo), "one recording: nothing to choose");
        assert_eq!(
            lookup_with_cookie(&mut matcher, "https://app.example/api/me?_=10", "other=1"),
            Some(0),
            "a different value of the same cookie scores half, a missing one nothing"
        );
    }

    #[test]
    fn nameless_cache_busters_and_clocks_in_paths_match_canonically() {
        let start = 1_795_521_600_000.0;
        let recorded = Clocks::around(start, start + 60_000.0);
        let mut matcher = Matcher::with_clocks(
            vec![
                get("https://app.example/api/resource?1795521600043"),
                get("https://app.example/api/other?1795521600050"),
                get("https://app.example/api/feed/1795521601/items"),
            ],
            recorded,
            recorded,
        );
        assert_eq!(
            lookup_get(&mut matcher, "https://app.example/api/resource?1795521612345"),
            Some(Matched { index: 0, kind: MatchKind::Canonical })
        );
        assert_eq!(
            lookup_get(&mut matcher, "https://app.example/api/feed/1795521633/items"),
            Some(Matched { index: 2, kind: MatchKind::Canonical })
        );
        // Not a clock of these times: an id, which must match as it was.
        assert_eq!(lookup_get(&mut matcher, "https://app.example/api/resource?1234567890123"), None);
    }
}
