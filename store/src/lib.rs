//! `trace-store` is how TRACE puts files down and reaches where they are shared: every file a writer leaves
//! for others to read (a bundle's derived files, a dataset, an evaluation's results, a chat reply cached,
//! a campaign's collection) is written through [`atomic`], and every directory that may be an object store
//! prefix (runs, datasets, campaign submissions) is a [`Location`]. What the files hold is
//! `trace-manifest`'s; reading what others wrote, a bounded number of bytes at most, is
//! `trace_bundle::archive`'s ([`trace_bundle::archive::copy_file_bounded`]), which this crate calls.
//!
//! # Layout
//! - [`atomic`]: the one way a file others read is written (partial name, synced, renamed).
//! - [`location`]: a directory here or under an object store prefix, with bounded reads from it (the
//!   `location` feature: the object store's client and its cloud SDKs come with it).

pub mod atomic;
#[cfg(feature = "location")]
pub mod location;

#[cfg(feature = "location")]
pub use location::{Location, PutPayload};
