//! `trace-replay`: serves a captured bundle to Chromium offline and re-runs the recorded trajectory.
//!
//! # Layout
//! - [`chromium`]: the one Chromium launcher (path, offline flags, sandbox, profile, connection).
//! - [`archive`]: a bundle opened for replay: exchanges, bodies, storage, ignore list, seed.
//! - [`matcher`]: which recorded request answers a replayed request (exact, canonical, fuzzy). Pure.
//! - [`page_ids`]: the ids replayed pages make themselves, bound to the recorded ones they stand for. Pure.
//! - [`responder`]: the decision for each request (answer, ignored, miss), counted and logged. No browser.
//! - [`page_scripts`]: determinism and storage restoring, run in pages before their own scripts.
//! - [`serve`]: the replayed Chromium, answering every target's requests from the bundle.
//! - [`proxy`]: the bundle served to a browser the agent launched, as an HTTP proxy on loopback;
//!   [`proxy_episodes`]: one proxy kept for episode after episode, asked for on standard input.
//! - [`browsers`]: the browsers a run of episodes keeps warm, each episode in a browser context of its own.
//! - [`session`]: the session of whoever drives a replay, recorded as a person's is, into a bundle.
//! - [`run`]: the recorded trajectory re-run in the replayed site, and its fidelity report.
//! - [`processes`]: what trace-replay starts, and the orphans an agent leaves, ended with its episode.
//! - [`eval`]: an agent's episode on a bundle: run, recorded, scored, written out.
//! - [`audit`]: the proof that a bundle's checkpoints discriminate: the demonstration, an agent doing
//!   nothing and perturbed demonstrations run, judged by `trace_analysis::audit`.
//! - [`proposals`]: checkpoints a model proposes (`--llm`), placed and judged as the rules' own.
//! - [`tasks`]: the tasks a run is given: a dataset's, or a bundle's one.
//! - [`batch`]: a run of episodes over a bundle or a dataset: shards, parallel episodes, resuming, the
//!   summary, and merging the runs of shards.
//! - [`inspect`]: a bundle's summary (task, pages, hosts with request counts and bytes).
//! - [`judge`]: the optional judge of an episode, asking `trace_chat`'s model.
//! - [`stop`]: a command's work run until it ends or the process is asked to stop.
//! - [`error`]: how a command ends when it does not succeed, and the exit code of each ending.

pub mod archive;
pub mod audit;
pub mod batch;
pub mod browsers;
pub mod chromium;
pub mod error;
pub mod eval;
pub mod inspect;
pub mod judge;
pub mod matcher;
pub mod page_ids;
pub mod page_scripts;
pub mod processes;
pub mod proposals;
pub mod proxied_rerun;
pub mod proxy;
pub mod proxy_episodes;
pub mod responder;
pub mod run;
pub mod serve;
pub mod session;
pub mod stop;
pub mod tasks;

pub use error::Error;
