//! `trace-analysis` owns every derivation over a recorded bundle: pure functions from what the recorder
//! wrote (events, bodies, DOM snapshots, storage) to what TRACE says about it (the trajectory, the HAR, the
//! exchanges, checkpoints and whether they hold, the ignore list, the secrets, canonical forms, the bundle's
//! summary). Post-processing, export, replay and every later tool call these functions and never derive the
//! same thing another way, so that the same bundle gives the same answers wherever it is asked.
//!
//! It does no I/O beyond reading a bundle through `trace-manifest`'s reader (feature `native`), keeps no
//! clock and no randomness (a summary's bootstrap draws from a fixed seed), and without `native` builds for `wasm32-unknown-unknown` so that the extension
//! can use it too. The types it produces that cross a process or file boundary are `trace-manifest`'s.
//!
//! # Layout
//! - [`accessibility`]: a page's accessibility tree as a screen reader presents it.
//! - [`answering`]: how replay will answer each recorded request (keys, twins, state), in words.
//! - [`exchange`]: the one pairing of requests with their responses, failures and bodies.
//! - [`har`]: the HAR 1.2 log of a recording.
//! - [`trajectory`]: the demonstration as browser-use-style tool calls, and the credentials typed in it.
//! - [`evidence`]: what a recording shows (exchanges, page text) and whether a checkpoint predicate holds.
//! - [`fidelity`]: how much of a recorded page's text a replayed page shows.
//! - [`checkpoints`]: which states mark progress, by fixed rules chosen to discriminate.
//! - [`audit`]: whether checkpoints tell the demonstration from doing nothing, judged from replayed runs.
//! - [`score`]: an agent's episode scored against the recording (checkpoints, success, rubric, SPL), and a
//!   run's summary.
//! - [`journeys`]: a person's browsing history grouped into journeys by TRACE's rule, URLs cleaned.
//! - [`map`]: environment maps of a site from many recordings: contexts, actions, workflows, procedures.
//! - [`judge`]: the questions a judge model is asked about an episode, and how its replies are read.
//! - [`ignore`]: which requests replay may fail at once, and reading and applying an ignore list.
//! - [`postprocess`]: the four files `trace-host process` writes, derived together.
//! - [`proposals`]: the question a model is asked for checkpoints, and how its reply is read.
//! - [`request_state`]: the browser's state a request carries, which chooses among recorded twins.
//! - [`secrets`]: which names and values are secret, and the forms a secret takes.
//! - [`suspects`]: values no rule chose but whose shape suggests a secret, for a person to decide.
//! - [`storage`]: the storage a replay starts from, each origin's as the recording first found it.
//! - [`urls`]: the URL rule patterns are written in (scheme-less substrings).
//! - [`body`]: the one parser of form, JSON and multipart bodies.
//! - [`html`]: the one reader of serialized HTML: tags, attributes, entities.
//! - [`canonical`]: canonical URLs, bodies and endpoint keys, which replay matches on.
//! - [`client_ids`]: values the page makes itself (session ids), which replay follows.
//! - [`summary`]: a bundle's summary (task, pages, hosts, what the ignore list removes).
//! - [`webarena_infinity`]: a trajectory as a task of WebArena-Infinity's trajectory layout.
//! - [`websocket`]: the recording's WebSockets as transcripts, which replay plays back.

pub mod accessibility;
pub mod answering;
pub mod audit;
pub mod body;
pub mod canonical;
pub mod checkpoints;
pub mod client_ids;
pub mod evidence;
pub mod exchange;
pub mod fidelity;
pub mod har;
pub mod html;
pub mod http;
pub mod ignore;
pub mod journeys;
pub mod judge;
pub mod map;
pub mod postprocess;
pub mod proposals;
pub mod request_state;
pub mod score;
pub mod secrets;
pub mod storage;
pub mod summary;
pub mod suspects;
#[cfg(test)]
mod testing;
pub mod trajectory;
pub mod urls;
pub mod webarena_infinity;
pub mod websocket;
