//! End-to-end tests of TRACE and the demo the README runs.
//!
//! # Layout
//! - [`demo`]: a scripted demonstration of a small shop, streamed through the real `trace-host` exactly as
//!   the extension would stream a recording, then exported, validated and inspected. Recording in a real
//!   browser replaces the script once the extension records.
//! - `src/bin/trace-demo.rs`: the demo's command line (`cargo xtask demo` runs it).

pub mod demo;
