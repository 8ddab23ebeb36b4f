//! `trace-bundle` reads bundles: a bundle directory or an exported zip opened without trusting it, its
//! files hashed and checked against its own index, what others wrote read up to a bound, and the snapshot
//! pack that keeps an exported bundle's DOM snapshots and screenshots as one compressed file. What the
//! files are (their types, names, schemas and the format's version) is `trace-manifest`'s; this crate is
//! the one that touches them on disk, so that the format crate stays pure data and builds for the
//! extension's WebAssembly. How files are written and where they are shared is `trace-store`'s.
//!
//! # Layout
//! - [`archive`]: open a bundle directory or zip safely, hash files, validate, read what others wrote up
//!   to a bound.
//! - [`pack`]: an exported bundle's DOM snapshots and screenshots as one compressed pack.

pub mod archive;
pub mod pack;
