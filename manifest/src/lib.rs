//! `trace-manifest` is the one place where TRACE's capture format is defined: the events a recording is made
//! of, the messages the extension and the native host exchange, the layout of a bundle and its
//! `manifest.json`, the HAR 1.2 model that a bundle's network log is written in, the files post-processing
//! adds, datasets, and every `--json` report. Types, constants and schemas only: what is derived from a
//! bundle is derived by `trace-analysis`.
//!
//! It knows nothing of Chrome, tokio, SQLite or object stores, and builds for `wasm32-unknown-unknown` so
//! that the extension speaks exactly the types the host stores. It does no I/O: reading bundles from disk
//! or zip files and validating them is `trace-bundle`'s, how files are written and where they are shared
//! is `trace-store`'s, and the in-page scripts that record a page are `trace-capture`'s.
//!
//! # Layout
//! - [`event`]: the recorded events (network, actions, navigation, tabs, snapshots, storage).
//! - [`wire`]: extension ↔ host messages and their limits.
//! - [`site_storage`]: local and session storage and IndexedDB as a bundle keeps them, and the encoding of
//!   stored values.
//! - [`task`]: task identity and metadata (id, type, status, recorder).
//! - [`bundle`]: the bundle's file layout and `manifest.json`.
//! - [`har`]: the HAR 1.2 model.
//! - [`time_fmt`]: the one conversion between recorded timestamps and RFC 3339.
//! - [`trajectory`]: `trajectory.json`, the demonstration as browser-use-style tool calls, and credentials.
//! - [`postprocess`]: the files `trace-host process` adds: credentials, checkpoints, ignore list.
//! - [`audit`]: `audit.json`, the proof that a bundle's checkpoints discriminate.
//! - [`dataset`]: the dataset layouts `trace-host dataset` writes (TRACE's and WebArena-Infinity's).
//! - [`campaign`]: crowdsourced annotation: a campaign, the journeys of a person's history, annotations.
//! - [`map`]: environment maps: contexts, parameterized actions, workflows and procedures of a site.
//! - [`eval`]: the files of an evaluation: a task's rubric, the agent's answer, results and summary.
//! - [`report`]: what the command-line tools print with `--json`.
//! - [`schema`]: JSON Schemas generated from these types, committed under `docs/schema/`.
//! - [`testing`] (feature `testing`, for tests only): recorded network events built by hand.

pub mod audit;
pub mod bundle;
pub mod campaign;
pub mod dataset;
pub mod eval;
pub mod event;
pub mod har;
pub mod map;
pub mod postprocess;
pub mod report;
pub mod schema;
pub mod site_storage;
pub mod task;
pub mod time_fmt;
pub mod trajectory;
pub mod wire;

#[cfg(feature = "testing")]
pub mod testing;

/// The version of the bundle format and of the wire protocol that this crate writes. Readers accept any
/// version up to this one and refuse newer ones with a clear error. Version 2 added the snapshot pack
/// (`trace_bundle::pack`): a reader of version 1 would find an exported bundle's DOM snapshots missing. Version 3 packs
/// the screenshots too: a reader of version 2 would take their paths in the pack for damage.
pub const FORMAT_VERSION: u32 = 3;

/// The extension's fixed ID, derived from the public `key` in `extension/static/manifest.json` (a test
/// checks that the two agree). The host's `allowed_origins` names it.
pub const EXTENSION_ID: &str = "hfbgehanceghfpehjjghjgkhgabneiem";

/// The name under which `trace-host` registers as a native messaging host.
pub const HOST_NAME: &str = "dev.trace.host";

#[cfg(test)]
mod tests {
    use base64::Engine as _;
    use sha2::Digest as _;

    /// Chrome derives an extension's ID from its public key: the first 128 bits of its SHA-256, written
    /// with the letters a to p for the hex digits 0 to f.
    #[test]
    fn extension_id_is_derived_from_the_key_in_the_extension_manifest() {
        let path = concat!(env!("CARGO_MANIFEST_DIR"), "/../extension/static/manifest.json");
        let manifest: serde_json::Value = serde_json::from_slice(&std::fs::read(path).unwrap()).unwrap();
        let key = base64::engine::general_purpose::STANDARD.decode(manifest["key"].as_str().unwrap()).unwrap();
        let digest = sha2::Sha256::digest(&key);
        let id: String =
            hex::encode(&digest[..16]).chars().map(|c| (b'a' + c.to_digit(16).unwrap() as u8) as char).collect();
        assert_eq!(id, super::EXTENSION_ID);
    }
}
