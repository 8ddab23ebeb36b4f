//! The storage a replay starts from: for each origin, what the recording found when it first reached it.
//! A recording's first `start` snapshot holds the cookies and the origins open when it started; each
//! origin reached later has a `start` snapshot of its own (see [`StoragePhase`]).

use std::collections::BTreeSet;

use trace_manifest::bundle::StorageFile;
use trace_manifest::event::{StoragePhase, StorageSnapshot};

/// Every `start` snapshot merged into one: each cookie and each origin's local storage, session storage and
/// databases as the earliest snapshot that has them. `None` when the recording kept no `start` snapshot.
pub fn at_start(file: &StorageFile) -> Option<StorageSnapshot> {
    let mut starts = file.snapshots.iter().map(|timed| &timed.snapshot).filter(|s| s.phase == StoragePhase::Start);
    let mut merged = starts.next()?.clone();
    let mut cookies: BTreeSet<(String, String, String)> =
        merged.cookies.iter().map(|c| (c.name.clone(), c.domain.clone(), c.path.clone())).collect();
    for later in starts {
        for cookie in &later.cookies {
            if cookies.insert((cookie.name.clone(), cookie.domain.clone(), cookie.path.clone())) {
                merged.cookies.push(cookie.clone());
            }
        }
        for (origin, entries) in &later.local_storage {
            merged.local_storage.entry(origin.clone()).or_insert_with(|| entries.clone());
        }
        for (origin, entries) in &later.session_storage {
            merged.session_storage.entry(origin.clone()).or_insert_with(|| entries.clone());
        }
        for (origin, databases) in &later.indexed_db {
            merged.indexed_db.entry(origin.clone()).or_insert_with(|| databases.clone());
        }
    }
    Some(merged)
}

#[cfg(test)]
mod tests {
    use super::*;
    use trace_manifest::bundle::TimedStorageSnapshot;
    use trace_manifest::event::Cookie;
    use trace_manifest::site_storage::IndexedDatabase;

    fn snapshot(phase: StoragePhase, origin: &str, theme: &str, cookie: Option<&str>) -> TimedStorageSnapshot {
        let database = IndexedDatabase { name: format!("db of {theme}"), version: 1, object_stores: vec![] };
        TimedStorageSnapshot {
            time: "2026-01-01T00:00:00Z".into(),
            snapshot: StorageSnapshot {
                phase,
                cookies: cookie
                    .map(|value| Cookie {
                        name: "session".into(),
                        value: value.into(),
                        domain: "shop.test".into(),
                        path: "/".into(),
                        expires: None,
                        http_only: true,
                        secure: false,
                        same_site: None,
                    })
                    .into_iter()
                    .collect(),
                local_storage: [(origin.to_owned(), [("theme".to_owned(), theme.to_owned())].into())].into(),
                session_storage: Default::default(),
                indexed_db: [(origin.to_owned(), vec![database])].into(),
            },
        }
    }

    #[test]
    fn each_origin_starts_as_the_recording_first_found_it_and_the_end_never_counts() {
        let file = StorageFile {
            snapshots: vec![
                snapshot(StoragePhase::Start, "https://shop.test", "dark", Some("first")),
                snapshot(StoragePhase::Start, "https://pay.test", "blue", None),
                // The shop reached again later, and the end: neither is where a replay starts.
                snapshot(StoragePhase::Start, "https://shop.test", "light", Some("second")),
                snapshot(StoragePhase::Stop, "https://other.test", "red", Some("stop")),
            ],
        };
        let start = at_start(&file).unwrap();
        let themes: Vec<(&str, &str)> =
            start.local_storage.iter().map(|(origin, entries)| (origin.as_str(), entries["theme"].as_str())).collect();
        assert_eq!(themes, [("https://pay.test", "blue"), ("https://shop.test", "dark")]);
        let databases: Vec<&str> = start.indexed_db.values().flatten().map(|db| db.name.as_str()).collect();
        assert_eq!(databases, ["db of blue", "db of dark"]);
        let cookies: Vec<&str> = start.cookies.iter().map(|c| c.value.as_str()).collect();
        assert_eq!(cookies, ["first"]);
        assert!(at_start(&StorageFile { snapshots: vec![file.snapshots[3].clone()] }).is_none());
    }
}
