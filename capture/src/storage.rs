//! The one in-page script (`page/storage.js`) that reads a site's storage besides cookies (local and session
//! storage, and IndexedDB) in a recorded page and puts it back in a replayed one, and what it reports. The
//! reading and the putting back share the script because they share its encoding of stored values: JSON,
//! with what JSON cannot hold (a `Date`, binary data, a `Blob`, a `Map`, `NaN`...) as an object tagged
//! `$trace`. What a bundle keeps of it is `trace_manifest::site_storage`'s.

use std::collections::BTreeMap;

use serde::Deserialize;
use trace_manifest::site_storage::IndexedDatabase;

const SCRIPT: &str = include_str!("../page/storage.js");

/// The most one read of an origin's databases keeps, encoded: a site's offline cache can run to gigabytes.
/// Records past it are counted in [`OriginStorage::records_left_out`], not kept.
pub const READ_LIMIT_BYTES: usize = 16 << 20;

/// What [`read_expression`] gives back for the page's origin.
#[derive(Debug, Clone, Default, PartialEq, Deserialize)]
pub struct OriginStorage {
    pub origin: String,
    #[serde(default)]
    pub local: Option<BTreeMap<String, String>>,
    #[serde(default)]
    pub session: Option<BTreeMap<String, String>>,
    #[serde(default)]
    pub indexed_db: Vec<IndexedDatabase>,
    /// Records not kept: over [`READ_LIMIT_BYTES`], holding a value that contains itself, or in a database
    /// the page changed while it was read.
    #[serde(default)]
    pub records_left_out: u64,
}

/// Run in a document before its own scripts (in the recorder's isolated world): copies its origin's local
/// and session storage as the document found them, for a [`read_expression`] with `at_start` to give back.
/// The copy is a few microseconds for the usual few dozen keys, and the only way to know what the page's
/// first scripts found, since they may change it before any DevTools event reaches the recorder.
pub fn copy_at_document_start() -> String {
    format!("globalThis.__traceStorageAtStart = ({SCRIPT}).copyWebStorage();")
}

/// An expression whose promise gives the document's origin's [`OriginStorage`]: its web storage as the
/// document found it (`at_start`) or as it is now, and every IndexedDB database of the origin as it is now.
pub fn read_expression(at_start: bool) -> String {
    format!("({SCRIPT}).read({READ_LIMIT_BYTES}, {at_start})")
}

/// An expression whose promise creates each database in the document's origin, with its stores, indexes
/// and records, unless the origin already has one of that name; it gives the number created.
pub fn restore_expression(databases: &[IndexedDatabase]) -> String {
    let databases = serde_json::to_string(databases).expect("plain data serializes");
    format!("({SCRIPT}).restoreDatabases({databases})")
}

#[cfg(test)]
mod tests {
    use super::*;
    use serde_json::Value;

    /// Runs `probe` in Node with the script's functions as `lib`.
    fn run_in_node(probe: &str) -> String {
        let output = std::process::Command::new("node")
            .arg("-e")
            .arg(format!("const lib = ({SCRIPT});\n{probe}"))
            .output()
            .expect("Node runs the page scripts' tests");
        assert!(output.status.success(), "{}", String::from_utf8_lossy(&output.stderr));
        String::from_utf8(output.stdout).unwrap()
    }

    #[test]
    fn every_kind_of_stored_value_comes_back_as_it_was_and_platform_objects_are_refused() {
        let probe = r#"
            const value = {
              n: 1.5, nan: NaN, inf: -Infinity, zero: -0, big: 12345678901234567890n, nothing: undefined,
              when: new Date(1700000000000), pattern: /mug/gi, buffer: new Uint8Array([0, 255]).buffer,
              words: new Uint16Array([1, 65535]), map: new Map([[1, "one"]]), set: new Set(["a"]),
              error: new RangeError("too far"), boxed: Object("text"), list: [1, [2, "3"]],
              page: { "$trace": "the page's own key" }, proto: JSON.parse('{"__proto__": 1}'),
            };
            const blobs = { reads: [], bytes: 0 };
            const stored = JSON.parse(JSON.stringify(lib.encode(value, blobs)));
            const back = lib.decode(stored);
            const refused = (make) => { try { lib.encode(make(), blobs); return false; } catch { return true; } };
            const loop = {}; loop.self = loop;
            console.log(JSON.stringify({
              plain: stored.n === 1.5 && stored.list[1][1] === "3",
              nan: Number.isNaN(back.nan), inf: back.inf === -Infinity, zero: Object.is(back.zero, -0),
              big: back.big === 12345678901234567890n, nothing: "nothing" in back && back.nothing === undefined,
              when: back.when instanceof Date && back.when.getTime() === 1700000000000,
              pattern: back.pattern instanceof RegExp && back.pattern.flags === "gi",
              buffer: back.buffer instanceof ArrayBuffer && [...new Uint8Array(back.buffer)].join() === "0,255",
              words: back.words instanceof Uint16Array && [...back.words].join() === "1,65535",
              map: back.map instanceof Map && back.map.get(1) === "one", set: back.set.has("a"),
              error: back.error instanceof RangeError && back.error.message === "too far",
              boxed: typeof back.boxed === "object" && back.boxed.valueOf() === "text",
              page: back.page["$trace"] === "the page's own key",
              proto: Object.getPrototypeOf(back.proto) === Object.prototype && back.proto["__proto__"] === 1,
              platform: refused(() => new URL("https://shop.test/")), loop: refused(() => loop),
            }));
        "#;
        let checks: serde_json::Map<String, Value> = serde_json::from_str(run_in_node(probe).trim()).unwrap();
        let failed: Vec<&String> = checks.iter().filter(|(_, ok)| **ok != Value::Bool(true)).map(|(k, _)| k).collect();
        assert!(failed.is_empty(), "not as stored: {failed:?}");
        assert_eq!(checks.len(), 18);
    }
}
