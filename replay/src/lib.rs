//! `trace-replay`: serves a captured bundle to Chromium offline and re-runs the recorded trajectory.
//!
//! # Layout
//! - [`inspect`]: a bundle's summary (task, pages, hosts with request counts and bytes).
//!
//! Serving and the human-trajectory run (`serve`, `run`) are not built yet.

pub mod inspect;
