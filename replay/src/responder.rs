//! What replay answers to each request the browser makes: a recorded response (and how it was matched),
//! an immediate failure for what the ignore list names, or a miss. It also checks, before the matcher binds
//! an id the page made to a recorded one, that the recorded value was the page's own too (no response before
//! its first request carried it), and gives responses with the page's ids in place of the recorded ones.
//!
//! A recorded event stream (`text/event-stream`) plays once: asked for again (an `EventSource`
//! reconnecting when the stream ends), it is answered `204 No Content`, which tells the page to stop
//! reconnecting instead of hearing the same events again. Every decision is counted and logged,
//! so that a user can see why a replayed page differs from the recording. No browser here: the browser
//! side (`serve`) asks and carries out.
//!
//! A miss is also a live attempt when it reaches past the recording: let through to the network (with the
//! fallback), or, offline, asked of an origin the recording never sent a request to. A miss on an origin
//! the person's browser did reach is a gap in the recording of a site it holds; a request to an origin it
//! never reached is the page going somewhere the person's did not (a host of its own choosing, a tracker
//! the ignore list does not name), which an offline replay must refuse and a report must show apart.

use std::collections::{BTreeMap, HashMap, HashSet};
use std::fmt;
use std::sync::{Arc, Mutex};
use std::time::{Duration, Instant};

use anyhow::Result;

use trace_analysis::canonical::Clocks;
use trace_analysis::client_ids;

use crate::archive::ReplayArchive;
use crate::matcher::{Difference, MatchKind, Matcher, Request, origin_of};

/// The decision for one request.
#[derive(Debug, Clone, PartialEq)]
pub enum Decision {
    /// Answer with the recorded exchange `index`.
    Answer { index: usize, kind: MatchKind },
    /// The recording holds this request, but it failed then: fail it the same way.
    RecordedFailure { index: usize, error: String },
    /// A recorded event stream asked for again after it played: answer `204 No Content`.
    StreamOver { index: usize },
    /// The ignore list names it: fail at once.
    Ignored { pattern: String },
    /// Nothing recorded answers it.
    Miss,
}

/// Counts of decisions, for the summary and the fidelity report.
#[derive(Debug, Clone, Default, PartialEq)]
pub struct Stats {
    pub exact: u64,
    pub canonical: u64,
    pub fuzzy: u64,
    pub ignored: u64,
    pub missed: u64,
    /// Attempts to reach past the recording: requests nothing recorded answers that went to an origin
    /// the recording never reached (refused offline) or, with `--allow-network-fallback`, every one (let
    /// through); WebSockets the recording does not hold; WebRTC connections with somewhere to reach.
    pub live_attempts: u64,
    /// Each missed URL, with how many times it was asked for.
    pub misses: BTreeMap<String, u64>,
    /// Requests answered by the fuzzy level that differ from the recording in their parameters, in the
    /// order they came.
    pub divergences: Vec<Divergence>,
}

impl Stats {
    /// How the requests were answered, by level, as reports give it.
    pub fn request_counts(&self) -> trace_manifest::report::RequestCounts {
        trace_manifest::report::RequestCounts {
            exact: self.exact,
            canonical: self.canonical,
            fuzzy: self.fuzzy,
            ignored: self.ignored,
            missed: self.missed,
        }
    }
}

/// A request the fuzzy level answered with a recorded one that differs from it: a page may have sent
/// something else than the person's did (another option chosen, a word typed differently).
#[derive(Debug, Clone, PartialEq)]
pub struct Divergence {
    pub method: String,
    pub url: String,
    /// The recorded request's URL.
    pub recorded_url: String,
    /// A document's request (a form submitted), rather than a script's.
    pub document: bool,
    pub differences: Vec<Difference>,
}

impl fmt::Display for Stats {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        let served = self.exact + self.canonical + self.fuzzy;
        writeln!(
            f,
            "requests served: {served} ({} exact, {} canonical, {} fuzzy); ignored: {}; missed: {}; live: {}",
            self.exact, self.canonical, self.fuzzy, self.ignored, self.missed, self.live_attempts
        )?;
        for (url, times) in &self.misses {
            writeln!(f, "  missed {url}{}", if *times > 1 { format!(" ({times} times)") } else { String::new() })?;
        }
        for divergence in &self.divergences {
            let fields: Vec<&str> = divergence.differences.iter().map(|d| d.name.as_str()).collect();
            writeln!(
                f,
                "  answered though it differs in {}: {} {}",
                fields.join(", "),
                divergence.method,
                divergence.url
            )?;
        }
        Ok(())
    }
}

/// A response ready to hand to the browser.
#[derive(Debug, Clone)]
pub struct Response {
    pub status: u16,
    pub status_text: String,
    pub headers: Vec<(String, String)>,
    pub body: Arc<Vec<u8>>,
}

pub struct Responder {
    archive: Arc<ReplayArchive>,
    /// The origins the recording sent requests to, serialized (`http://shop.test:8080`).
    recorded_origins: HashSet<String>,
    matcher: Mutex<Matcher>,
    stats: Mutex<Stats>,
    /// When the browser last asked for something: how the re-run tells that the network is idle.
    last_request: Mutex<Instant>,
    /// How many times each recorded exchange has answered.
    answered: Mutex<Vec<u32>>,
    /// Recorded ids checked for having been the page's own, with the answer.
    made_by_page: Mutex<HashMap<String, bool>>,
}

impl Responder {
    /// Answers from `archive`. `now_ms` is when the replay starts: the browser's requests carry clock
    /// readings of the replayed pages' time, which starts at the recording's (or, with determinism off, is
    /// the real time from now on).
    pub fn new(archive: Arc<ReplayArchive>, now_ms: f64) -> Responder {
        let recorded = archive.recorded_clocks();
        let replayed = replayed_clocks(&archive, now_ms);
        let requests = archive.exchanges.iter().map(|e| e.request.clone()).collect();
        let ignored: Vec<bool> =
            archive.exchanges.iter().map(|e| archive.ignore_pattern(&e.request.url).is_some()).collect();
        let matcher = Matcher::with_clocks(requests, recorded, replayed)
            .without_writes_never_asked(&ignored)
            .with_credentials(archive.credentials.iter().cloned());
        let recorded_origins = archive.exchanges.iter().filter_map(|e| origin_of(&e.request.url)).collect();
        Responder {
            recorded_origins,
            answered: Mutex::new(vec![0; archive.exchanges.len()]),
            archive,
            matcher: Mutex::new(matcher),
            stats: Mutex::new(Stats::default()),
            last_request: Mutex::new(Instant::now()),
            made_by_page: Mutex::new(HashMap::new()),
        }
    }

    pub fn archive(&self) -> &ReplayArchive {
        &self.archive
    }

    /// The origins (scheme, host and port) the recording sent requests to: all a replayed page can
    /// load from, unless misses may go to the network.
    pub fn recorded_origins(&self) -> impl Iterator<Item = &str> {
        self.recorded_origins.iter().map(String::as_str)
    }

    /// Whether the browser's cookies choose this request's answer (see [`Matcher::depends_on_state`]): only
    /// then need they be asked for.
    pub fn depends_on_state(&self, request: &Request<'_>) -> bool {
        self.archive.ignore_pattern(request.url).is_none()
            && self.matcher.lock().expect("no panics while locked").depends_on_state(request)
    }

    /// How long since the browser last asked for anything: the network as replay sees it has been idle
    /// that long.
    pub fn quiet_for(&self) -> Duration {
        self.last_request.lock().expect("no panics while locked").elapsed()
    }

    /// Decides how to answer a request, counts the decision and logs it.
    pub fn decide(&self, request: &Request<'_>) -> Decision {
        *self.last_request.lock().expect("no panics while locked") = Instant::now();
        let (method, url) = (request.method, request.url);
        let decision = self.decide_quietly(request);
        let mut stats = self.stats.lock().expect("no panics while locked");
        match &decision {
            Decision::Answer { index, kind } => {
                match kind {
                    MatchKind::Exact => stats.exact += 1,
                    MatchKind::Canonical => stats.canonical += 1,
                    MatchKind::Fuzzy { .. } => stats.fuzzy += 1,
                }
                let recorded = &self.archive.exchanges[*index].request.url;
                if recorded == url {
                    tracing::info!(target: "trace_replay::decision", "{kind} {method} {url}");
                } else {
                    tracing::info!(target: "trace_replay::decision", "{kind} {method} {url} ← {recorded}");
                }
            }
            Decision::RecordedFailure { error, .. } => {
                stats.exact += 1;
                tracing::info!(target: "trace_replay::decision", "failed as recorded ({error}) {method} {url}");
            }
            Decision::StreamOver { .. } => {
                stats.exact += 1;
                tracing::info!(target: "trace_replay::decision", "event stream played already (204) {method} {url}");
            }
            Decision::Ignored { pattern } => {
                stats.ignored += 1;
                tracing::info!(target: "trace_replay::decision", "ignored ({pattern}) {method} {url}");
            }
            Decision::Miss => {
                stats.missed += 1;
                *stats.misses.entry(format!("{method} {url}")).or_default() += 1;
                tracing::warn!(target: "trace_replay::decision", "missed {method} {url}");
            }
        }
        decision
    }

    fn decide_quietly(&self, request: &Request<'_>) -> Decision {
        if let Some(pattern) = self.archive.ignore_pattern(request.url) {
            return Decision::Ignored { pattern: pattern.to_owned() };
        }
        self.follow_page_ids(request);
        let matched = self.matcher.lock().expect("no panics while locked").lookup(request);
        let Some(found) = matched else { return Decision::Miss };
        let exchange = &self.archive.exchanges[found.index];
        let times = {
            let mut answered = self.answered.lock().expect("no panics while locked");
            answered[found.index] += 1;
            answered[found.index]
        };
        match &exchange.error {
            Some(error) => Decision::RecordedFailure { index: found.index, error: error.clone() },
            None if times > 1 && is_event_stream(&exchange.headers) => Decision::StreamOver { index: found.index },
            None => Decision::Answer { index: found.index, kind: found.kind },
        }
    }

    /// Binds the new ids this request carries to recorded ones when the matcher proposes it and each
    /// recorded value was the page's own (see [`crate::page_ids`]).
    fn follow_page_ids(&self, request: &Request<'_>) {
        let (proposal, first_sent) = {
            let matcher = self.matcher.lock().expect("no panics while locked");
            let Some(proposal) = matcher.propose_ids(request) else { return };
            let first_sent: Vec<Option<usize>> =
                proposal.pairs.iter().map(|(recorded, _)| matcher.first_sent(recorded)).collect();
            (proposal, first_sent)
        };
        let all_made_by_page = proposal
            .pairs
            .iter()
            .zip(first_sent)
            .all(|((recorded, _), first)| first.is_some_and(|first| self.was_made_by_page(recorded, first)));
        if !all_made_by_page {
            return;
        }
        for (recorded, live) in &proposal.pairs {
            tracing::info!(target: "trace_replay::decision", "the page's id {live} stands for the recorded {recorded}");
        }
        self.matcher.lock().expect("no panics while locked").bind_ids(&proposal.pairs);
    }

    /// Whether the recorded id `value`, first sent by exchange `first_sent`, was the page's own
    /// ([`client_ids::Origin`]). A response before it whose body cannot be read counts as carrying it.
    fn was_made_by_page(&self, value: &str, first_sent: usize) -> bool {
        if let Some(&known) = self.made_by_page.lock().expect("no panics while locked").get(value) {
            return known;
        }
        let made = client_ids::Origin::of(value, &self.archive.typed).is_some_and(|origin| {
            let carried = |index: usize, headers: &[(String, String)]| {
                let in_headers = headers
                    .iter()
                    .any(|(name, value)| origin.carried_by(name.as_bytes()) || origin.carried_by(value.as_bytes()));
                in_headers || self.archive.peek_body(index).map_or(true, |body| origin.carried_by(&body))
            };
            let earlier = &self.archive.exchanges[..first_sent];
            !earlier.iter().enumerate().any(|(index, exchange)| carried(index, &exchange.headers))
        });
        self.made_by_page.lock().expect("no panics while locked").insert(value.to_owned(), made);
        made
    }

    /// Notes how a request answered by the fuzzy level (`index`) differs from the recorded one, when it
    /// does in its parameters; `document` says it was a document's request.
    pub fn note_fuzzy_answer(&self, request: &Request<'_>, index: usize, document: bool) {
        let differences = self.matcher.lock().expect("no panics while locked").differences(request, index);
        if differences.is_empty() {
            return;
        }
        let recorded_url = self.archive.exchanges[index].request.url.clone();
        tracing::warn!(
            target: "trace_replay::decision",
            "{} {} differs from the recorded {recorded_url} in {}",
            request.method,
            request.url,
            differences.iter().map(|d| d.name.as_str()).collect::<Vec<_>>().join(", ")
        );
        self.stats.lock().expect("no panics while locked").divergences.push(Divergence {
            method: request.method.to_owned(),
            url: request.url.to_owned(),
            recorded_url,
            document,
            differences,
        });
    }

    /// Whether the recording sent any request to `url`'s origin (scheme, host and port). A miss there is
    /// a gap in the recording; a miss anywhere else is an attempt to leave it (see the module's doc).
    pub fn recording_reached_origin_of(&self, url: &str) -> bool {
        origin_of(url).is_some_and(|origin| self.recorded_origins.contains(&origin))
    }

    /// Counts an attempt to reach the live network, whether or not it was let through.
    pub fn count_live_attempt(&self, method: &str, url: &str) {
        self.stats.lock().expect("no panics while locked").live_attempts += 1;
        tracing::warn!(target: "trace_replay::decision", "live attempt {method} {url}");
    }

    /// The recorded response of exchange `index`, with the headers a browser can take from a fulfilled
    /// request: bodies are stored decoded, so the encoding and length headers of the wire are dropped.
    pub fn response(&self, index: usize) -> Result<Response> {
        let exchange = &self.archive.exchanges[index];
        let headers: Vec<(String, String)> = exchange
            .headers
            .iter()
            .filter(|(name, _)| {
                !name.starts_with(':')
                    && !["content-encoding", "content-length", "transfer-encoding"]
                        .iter()
                        .any(|dropped| name.eq_ignore_ascii_case(dropped))
            })
            .cloned()
            .collect();
        let body = self.archive.body(index)?;
        let matcher = self.matcher.lock().expect("no panics while locked");
        let headers = headers
            .into_iter()
            .map(|(name, value)| {
                let value = match matcher.ids_to_live(value.as_bytes()) {
                    std::borrow::Cow::Owned(bytes) => String::from_utf8(bytes).expect("ids are ASCII tokens"),
                    std::borrow::Cow::Borrowed(_) => value,
                };
                (name, value)
            })
            .collect();
        let body = match is_text(&exchange.headers).then(|| matcher.ids_to_live(&body)) {
            Some(std::borrow::Cow::Owned(bytes)) => Arc::new(bytes),
            _ => body,
        };
        Ok(Response { status: exchange.status, status_text: exchange.status_text.clone(), headers, body })
    }

    pub fn stats(&self) -> Stats {
        self.stats.lock().expect("no panics while locked").clone()
    }
}

fn content_type(headers: &[(String, String)]) -> String {
    let found = headers.iter().find(|(name, _)| name.eq_ignore_ascii_case("content-type"));
    found.map(|(_, value)| value.to_ascii_lowercase()).unwrap_or_default()
}

fn is_event_stream(headers: &[(String, String)]) -> bool {
    content_type(headers).starts_with("text/event-stream")
}

/// Whether a response's body is text a page reads (where its ids may be echoed), rather than media.
fn is_text(headers: &[(String, String)]) -> bool {
    let kind = content_type(headers);
    ["text/", "json", "javascript", "xml", "x-www-form-urlencoded"].iter().any(|marker| kind.contains(marker))
}

/// The clock readings the replayed pages' requests carry when the replay starts at `now_ms`: the
/// recording's time from its start (determinism), or the real time from now (without it).
fn replayed_clocks(archive: &ReplayArchive, now_ms: f64) -> Clocks {
    Clocks::around(archive.started_at_ms.min(now_ms), archive.ended_at_ms.max(now_ms))
}
