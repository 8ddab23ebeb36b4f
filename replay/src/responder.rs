//! What replay answers to each request the browser makes: a recorded response (and how it was matched),
//! an immediate failure for what the ignore list names, or a miss. Every decision is counted and logged,
//! so that a user can see why a replayed page differs from the recording. No browser here: the browser
//! side (`serve`) asks and carries out.

use std::collections::BTreeMap;
use std::fmt;
use std::sync::{Arc, Mutex};
use std::time::{Duration, Instant};

use anyhow::Result;

use trace_analysis::canonical::Clocks;

use crate::archive::ReplayArchive;
use crate::matcher::{Difference, MatchKind, Matcher, Request};

/// The decision for one request.
#[derive(Debug, Clone, PartialEq)]
pub enum Decision {
    /// Answer with the recorded exchange `index`.
    Answer { index: usize, kind: MatchKind },
    /// The recording holds this request, but it failed then: fail it the same way.
    RecordedFailure { index: usize, error: String },
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
    /// Requests let through to the live network (only with `--allow-network-fallback`).
    pub live_attempts: u64,
    /// Each missed URL, with how many times it was asked for.
    pub misses: BTreeMap<String, u64>,
    /// Requests answered by the fuzzy level that differ from the recording in their parameters, in the
    /// order they came.
    pub divergences: Vec<Divergence>,
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
    matcher: Mutex<Matcher>,
    stats: Mutex<Stats>,
    /// When the browser last asked for something: how the re-run tells that the network is idle.
    last_request: Mutex<Instant>,
}

impl Responder {
    /// Answers from `archive`. `now_ms` is when the replay starts: the browser's requests carry clock
    /// readings of the replayed pages' time, which starts at the recording's (or, with determinism off, is
    /// the real time from now on).
    pub fn new(archive: Arc<ReplayArchive>, now_ms: f64) -> Responder {
        let recorded = archive.recorded_clocks();
        let replayed = Clocks::around(archive.started_at_ms.min(now_ms), archive.ended_at_ms.max(now_ms));
        let requests = archive.exchanges.iter().map(|e| e.request.clone()).collect();
        let matcher = Matcher::with_clocks(requests, recorded, replayed);
        Responder {
            archive,
            matcher: Mutex::new(matcher),
            stats: Mutex::new(Stats::default()),
            last_request: Mutex::new(Instant::now()),
        }
    }

    pub fn archive(&self) -> &ReplayArchive {
        &self.archive
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
        let matched = self.matcher.lock().expect("no panics while locked").lookup(request);
        match matched {
            Some(found) => match &self.archive.exchanges[found.index].error {
                Some(error) => Decision::RecordedFailure { index: found.index, error: error.clone() },
                None => Decision::Answer { index: found.index, kind: found.kind },
            },
            None => Decision::Miss,
        }
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

    /// Counts a request let through to the live network.
    pub fn count_live_attempt(&self, method: &str, url: &str) {
        self.stats.lock().expect("no panics while locked").live_attempts += 1;
        tracing::warn!(target: "trace_replay::decision", "live network {method} {url}");
    }

    /// The recorded response of exchange `index`, with the headers a browser can take from a fulfilled
    /// request: bodies are stored decoded, so the encoding and length headers of the wire are dropped.
    pub fn response(&self, index: usize) -> Result<Response> {
        let exchange = &self.archive.exchanges[index];
        let headers = exchange
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
        Ok(Response {
            status: exchange.status,
            status_text: exchange.status_text.clone(),
            headers,
            body: self.archive.body(index)?,
        })
    }

    pub fn stats(&self) -> Stats {
        self.stats.lock().expect("no panics while locked").clone()
    }
}
