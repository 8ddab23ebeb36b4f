//! What a recording keeps of a site's storage in the browser besides cookies (local and session storage,
//! and IndexedDB), as a bundle holds it, and the encoding of stored values: JSON, with what JSON cannot hold
//! (a `Date`, binary data, a `Blob`, a `Map`, `NaN`...) as an object tagged `$trace`. The in-page script
//! that reads it in a recorded page and puts it back in a replayed one, and so writes and reads that
//! encoding, is `trace-capture`'s (`storage`, with `capture/page/storage.js`).

use schemars::JsonSchema;
use serde::{Deserialize, Serialize};
use serde_json::Value;

/// One IndexedDB database, whole: what `indexedDB.open(name, version)` finds.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize, JsonSchema)]
pub struct IndexedDatabase {
    pub name: String,
    pub version: u64,
    #[serde(default)]
    pub object_stores: Vec<ObjectStore>,
}

#[derive(Debug, Clone, PartialEq, Serialize, Deserialize, JsonSchema)]
pub struct ObjectStore {
    pub name: String,
    /// Absent when the store's keys are kept apart from its values (out-of-line keys).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub key_path: Option<KeyPath>,
    #[serde(default)]
    pub auto_increment: bool,
    #[serde(default)]
    pub indexes: Vec<StoreIndex>,
    #[serde(default)]
    pub records: Vec<StoredRecord>,
}

/// A key path: one property path (`"id"`, `"author.name"`), or several for a compound key.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize, JsonSchema)]
#[serde(untagged)]
pub enum KeyPath {
    One(String),
    Many(Vec<String>),
}

#[derive(Debug, Clone, PartialEq, Serialize, Deserialize, JsonSchema)]
pub struct StoreIndex {
    pub name: String,
    pub key_path: KeyPath,
    #[serde(default)]
    pub unique: bool,
    #[serde(default)]
    pub multi_entry: bool,
}

/// One record: its key and its value, each in the `$trace` encoding of `page/storage.js`.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize, JsonSchema)]
pub struct StoredRecord {
    pub key: Value,
    pub value: Value,
}

/// The text a stored value holds: every string in it, keys of maps and objects included, but not the
/// base64 of its binary data (an image in a cache is not text anyone typed).
pub fn texts(value: &Value) -> Vec<&str> {
    fn walk<'v>(value: &'v Value, out: &mut Vec<&'v str>) {
        match value {
            Value::String(text) => out.push(text),
            Value::Array(items) => items.iter().for_each(|item| walk(item, out)),
            Value::Object(map) => match map.get("$trace").and_then(Value::as_str) {
                Some("view" | "arraybuffer" | "blob") => {}
                _ => {
                    for (key, item) in map {
                        out.push(key);
                        walk(item, out);
                    }
                }
            },
            _ => {}
        }
    }
    let mut out = Vec::new();
    walk(value, &mut out);
    out
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn binary_data_is_not_text_to_search_for_secrets() {
        let value = serde_json::json!({
            "note": "call me",
            "picture": { "$trace": "blob", "type": "image/png", "v": "iVBORw==" },
            "list": [{ "$trace": "view", "type": "Uint8Array", "v": "AQID" }, "token"],
        });
        let mut texts = texts(&value);
        texts.sort();
        assert_eq!(texts, ["call me", "list", "note", "picture", "token"]);
    }
}
