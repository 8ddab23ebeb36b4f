//! `trace-host`: TRACE's native messaging host. It makes every event the extension records durable, and
//! turns finished recordings into self-contained bundles that can be validated, exported and imported.
//!
//! # Layout
//! - [`native`]: the native messaging entry point (logging to a file, since stdout is the protocol).
//! - [`messaging`]: framing and the reader → store → writer pipeline of one session.
//! - [`ingest`]: the protocol's rules applied to storage: sequence numbers, streamed bodies, files, task
//!   life cycle. The writer.
//! - [`tasks`]: the task store, the one owner of `tasks.db` (tasks, events, bodies, files), of each task's
//!   status and lock, of finalizing its bundle (events, HAR, storage, manifest) and of recovering
//!   recordings whose host is gone. The writer and every reader go through it.
//! - [`folder_lock`]: the lock file that marks the process working in a folder (a task, a submission).
//! - [`process`]: derives the trajectory, credentials, checkpoints and ignore list into a bundle.
//! - [`export`], [`import`]: bundles as zip files, out and in; out as a WACZ web archive too.
//! - [`redact`]: a bundle's secrets found and replaced for sharing, and the exported zip searched for them.
//! - [`dataset`]: many bundles made into a dataset folder (TRACE's or WebArena-Infinity's layout).
//! - [`install`]: registers the host with Chrome and Chromium.
//! - [`collect`]: a campaign's submissions checked and made into a dataset.
//! - [`submit`]: a recording submitted to a campaign's store through an outbox on disk.
//! - [`journeys`]: a Chrome profile's history (a copy of it) grouped into journeys for annotation.
//! - [`requests`]: what the extension's pages ask in messages of their own: review, submit, journeys.
//! - [`view`]: the local, read-only viewer of recordings and runs.
//! - [`cli`]: the commands people run; [`paths`]: where the data lives; [`progress`]: their progress bars.
//! - [`client`]: the extension's side of the protocol, for tests, the benchmark and the demo.

pub mod browser_dirs;
pub mod cli;
pub mod client;
pub mod collect;
pub mod dataset;
pub mod export;
pub mod folder_lock;
pub mod import;
pub mod ingest;
pub mod install;
pub mod journeys;
pub mod map;
pub mod messaging;
pub mod native;
pub mod paths;
pub mod process;
pub mod progress;
pub mod redact;
pub mod requests;
pub mod submit;
pub mod tasks;
pub mod view;
