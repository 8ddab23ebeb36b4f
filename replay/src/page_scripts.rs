//! The scripts replay runs in every page before the page's own: determinism (clock and random numbers,
//! `page/determinism.js`) and the restoring of local and session storage (`page/storage.js`). This module
//! fills in their constants; the scripts say why they are JavaScript.

use std::collections::BTreeMap;

use trace_manifest::event::StorageSnapshot;

const DETERMINISM: &str = include_str!("../page/determinism.js");
const STORAGE: &str = include_str!("../page/storage.js");

/// The clock starts at `start_ms` (milliseconds since the Unix epoch); random numbers follow `seed`.
pub fn determinism(start_ms: f64, seed: u64) -> String {
    DETERMINISM
        .replace("__TRACE_START_MS__", &format!("{}", start_ms.round()))
        // The generator keeps 32 bits of state: fold the seed's two halves together.
        .replace("__TRACE_SEED__", &((seed ^ (seed >> 32)) as u32).to_string())
}

/// Restores the snapshot's local and session storage; `None` when it holds none.
pub fn storage(snapshot: &StorageSnapshot) -> Option<String> {
    if snapshot.local_storage.is_empty() && snapshot.session_storage.is_empty() {
        return None;
    }
    let json = |map: &BTreeMap<String, BTreeMap<String, String>>| {
        serde_json::to_string(map).expect("string maps always serialize")
    };
    Some(
        STORAGE
            .replace("__TRACE_LOCAL_STORAGE__", &json(&snapshot.local_storage))
            .replace("__TRACE_SESSION_STORAGE__", &json(&snapshot.session_storage)),
    )
}

#[cfg(test)]
mod tests {
    use super::*;
    use std::process::Command;

    /// Runs `script` then `probe` in Node (which has `Date`, `Math` and `crypto` as browsers do) and returns
    /// what `probe` printed.
    fn run_in_node(script: &str, probe: &str) -> String {
        let output = Command::new("node")
            .arg("-e")
            .arg(format!("{script}\n{probe}"))
            .output()
            .expect("Node runs the page scripts' tests");
        assert!(output.status.success(), "{}", String::from_utf8_lossy(&output.stderr));
        String::from_utf8(output.stdout).unwrap()
    }

    const PROBE: &str = "console.log(JSON.stringify([Date.now(), new Date().getTime(), Math.random(), \
        Math.random(), Array.from(globalThis.crypto.getRandomValues(new Uint8Array(4))), globalThis.crypto.randomUUID(), \
        new Date(0).getTime(), typeof Date(), new Date() instanceof Date]))";

    #[test]
    fn two_runs_with_one_seed_read_the_same_clock_and_numbers() {
        let start = 1_795_327_471_784.0;
        let first = run_in_node(&determinism(start, 42), PROBE);
        let second = run_in_node(&determinism(start, 42), PROBE);
        assert_eq!(first, second);
        let values: serde_json::Value = serde_json::from_str(&first).unwrap();
        assert_eq!(values[0], 1_795_327_471_785_u64, "the clock starts at the recording and ticks");
        assert_eq!(values[1], 1_795_327_471_786_u64);
        assert_ne!(values[2], values[3]);
        assert_eq!(values[6], 0, "an explicit date is left alone");
        assert_eq!(values[7], "string");
        assert_eq!(values[8], true, "instanceof still works");
        let other_seed = run_in_node(&determinism(start, 7), PROBE);
        assert_ne!(first, other_seed, "the seed decides the numbers");
    }

    #[test]
    fn storage_is_restored_for_its_origin_only() {
        let mut snapshot = StorageSnapshot {
            phase: trace_manifest::event::StoragePhase::Start,
            cookies: Vec::new(),
            local_storage: BTreeMap::new(),
            session_storage: BTreeMap::new(),
        };
        assert!(storage(&snapshot).is_none());
        snapshot.local_storage.insert("https://shop.test".into(), [("theme".into(), "dark\"'".into())].into());
        snapshot.local_storage.insert("https://other.test".into(), [("x".into(), "1".into())].into());
        let script = storage(&snapshot).unwrap();
        // A minimal stand-in for the browser's storage, enough to run the script.
        let fake = "class S { constructor() { this.m = new Map(); } getItem(k) { return this.m.has(k) ? this.m.get(k) : null; } \
            setItem(k, v) { this.m.set(k, String(v)); } }\n\
            globalThis.localStorage = new S(); globalThis.sessionStorage = new S(); \
            globalThis.location = { origin: 'https://shop.test' };";
        let probe = "localStorage.setItem('theme', 'changed by the page');\n(() => {\n".to_owned()
            + &script
            + "\n})();\nconsole.log(JSON.stringify([...localStorage.m]))";
        let restored =
            run_in_node(fake, &format!("{script}\nconsole.log(JSON.stringify([...localStorage.m]));\n{probe}"));
        let lines: Vec<&str> = restored.lines().collect();
        assert_eq!(
            lines[0], r#"[["theme","dark\"'"],["__trace_replay_restored__","1"]]"#,
            "restored, quotes and all, and only this origin's"
        );
        assert_eq!(
            lines[1], r#"[["theme","changed by the page"],["__trace_replay_restored__","1"]]"#,
            "restored once, then left to the page"
        );
    }
}
