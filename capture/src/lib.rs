//! `trace-capture` is the in-page half of every TRACE recorder: the JavaScript it injects into recorded
//! pages (`page/`), the Rust that builds those scripts' text and reads what they report, and the rules that
//! turn reports into the events a bundle holds. Both recorders use it, so that an action or a site's
//! storage means the same wherever it was recorded: the extension in a person's browser (built for
//! wasm32), and `trace-replay eval` in the replayed browser an agent drives. The events themselves, and the
//! storage records a bundle keeps, are `trace-manifest`'s; this crate says how a page is asked for them.
//!
//! # Layout
//! - [`actions`]: the capture script (`page/capture.js`) and its helper in the page's world
//!   (`page/scripted.js`), their reports, and typing coalesced into one action per field.
//! - [`storage`]: the script (`page/storage.js`) that reads a site's storage in a recorded page and puts
//!   it back in a replayed one.

pub mod actions;
pub mod storage;
