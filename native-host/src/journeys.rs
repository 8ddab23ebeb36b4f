//! Journeys from a Chrome profile's browsing history (`trace-host journeys`), for crowdsourced annotation.
//!
//! The profile's `History` database is copied first (with its write-ahead log, where a running Chrome
//! keeps its latest visits) and only the copy is opened: Chrome holds the original locked while it runs,
//! and nothing is ever written to it. Chrome's own Journeys clusters (the `clusters_and_visits` table)
//! are used when the profile has them for the period asked; otherwise the visits are grouped by TRACE's
//! rule ([`trace_analysis::journeys`]). Either way the URLs are cleaned of secret-looking parameters and
//! the excluded domains left out before anything is returned.

use std::collections::BTreeMap;
use std::path::{Path, PathBuf};

use anyhow::{Context, Result};
use rusqlite::{Connection, OpenFlags, OptionalExtension};
use trace_analysis::journeys::{self, Transition, Visit};
use trace_manifest::campaign::{Journey, JourneySource};

use crate::browser_dirs::{ChromeVariant, DEFAULT_PROFILE};

/// Milliseconds from Chrome's epoch (1601-01-01 UTC) to the Unix epoch.
const CHROME_EPOCH_OFFSET_MS: f64 = 11_644_473_600_000.0;

/// What to read of the history.
#[derive(Debug, Clone, Default)]
pub struct Options {
    /// Visits before this (milliseconds since the Unix epoch) are not read.
    pub since_ms: f64,
    /// Domains whose visits are left out (the domain and its subdomains).
    pub excluded: Vec<String>,
}

/// The `History` database of Chrome's default profile, or Chromium's, when one exists.
pub fn default_history() -> Option<PathBuf> {
    ChromeVariant::ALL
        .into_iter()
        .filter_map(ChromeVariant::user_data_dir)
        .map(|user_data| user_data.join(DEFAULT_PROFILE).join("History"))
        .find(|path| path.exists())
}

/// The `History` database of the browser profile that started this process, as Chrome starts a native
/// messaging host: its command line names the profile's folder (`--user-data-dir`, `--profile-directory`).
/// Without those (or where a process's command line cannot be read), the default profile's.
pub fn browser_history() -> Option<PathBuf> {
    #[cfg(target_os = "linux")]
    {
        let parent = rustix::process::getppid()?;
        let command_line = std::fs::read(format!("/proc/{}/cmdline", parent.as_raw_nonzero())).ok()?;
        let arguments: Vec<String> =
            command_line.split(|byte| *byte == 0).map(|arg| String::from_utf8_lossy(arg).into_owned()).collect();
        let flag = |name: &str| arguments.iter().find_map(|arg| arg.strip_prefix(name)).map(str::to_owned);
        if let Some(user_data) = flag("--user-data-dir=") {
            let profile = flag("--profile-directory=").unwrap_or_else(|| DEFAULT_PROFILE.to_owned());
            return Some(PathBuf::from(user_data).join(profile).join("History")).filter(|path| path.exists());
        }
    }
    default_history()
}

/// The journeys of the history at `history`, oldest first: Chrome's own, else grouped by TRACE's rule.
pub fn from_history(history: &Path, options: &Options) -> Result<Vec<Journey>> {
    let conn = open_copy(history)?;
    if let Some(journeys) = chrome_clusters(&conn.1, options)? {
        return Ok(journeys);
    }
    let visits = visits(&conn.1, chrome_time(options.since_ms))?;
    Ok(journeys::group(&visits, &options.excluded))
}

/// Chrome's own journeys of the history at `history`, or `None` when it has none for the period.
pub fn chrome_journeys(history: &Path, options: &Options) -> Result<Option<Vec<Journey>>> {
    chrome_clusters(&open_copy(history)?.1, options)
}

/// Opens a copy of the history at `history`, made in a temporary folder that lives as long as the
/// connection is kept with it.
fn open_copy(history: &Path) -> Result<(tempfile::TempDir, Connection)> {
    let copy = tempfile::tempdir().context("cannot make a folder for the history's copy")?;
    let copied = copy.path().join("History");
    std::fs::copy(history, &copied).with_context(|| format!("cannot copy {}", history.display()))?;
    // The log holds what Chrome has not yet written into the database; the copy reads it as its own.
    let log = history.with_file_name("History-wal");
    if log.exists() {
        std::fs::copy(&log, copy.path().join("History-wal"))
            .with_context(|| format!("cannot copy {}", log.display()))?;
    }
    let conn =
        Connection::open_with_flags(&copied, OpenFlags::SQLITE_OPEN_READ_WRITE | OpenFlags::SQLITE_OPEN_NO_MUTEX)
            .with_context(|| format!("{} is not a history database", history.display()))?;
    Ok((copy, conn))
}

fn chrome_clusters(conn: &Connection, options: &Options) -> Result<Option<Vec<Journey>>> {
    if !has_table(conn, "clusters_and_visits")? {
        return Ok(None);
    }
    let clusters = cluster_visits(conn, chrome_time(options.since_ms))?;
    Ok((!clusters.is_empty()).then(|| journeys::from_groups(&clusters, &options.excluded, JourneySource::Chrome)))
}

fn has_table(conn: &Connection, name: &str) -> Result<bool> {
    let found: Option<String> = conn
        .query_row("SELECT name FROM sqlite_master WHERE type = 'table' AND name = ?1", [name], |row| row.get(0))
        .optional()
        .context("the history database cannot be read")?;
    Ok(found.is_some())
}

const VISIT_COLUMNS: &str = "v.id, v.visit_time, v.from_visit, v.transition, u.url, u.title";

/// The visits since `since` (Chrome's time), with their URL and title.
fn visits(conn: &Connection, since: i64) -> Result<Vec<Visit>> {
    let sql = format!("SELECT {VISIT_COLUMNS} FROM visits v JOIN urls u ON u.id = v.url WHERE v.visit_time >= ?1");
    let mut statement = conn.prepare(&sql).context("the history has no visits table as Chrome writes it")?;
    let rows = statement.query_map([since], visit)?;
    rows.collect::<rusqlite::Result<_>>().context("a visit of the history cannot be read")
}

/// Chrome's clusters of the visits since `since`, each in time order, by cluster id.
fn cluster_visits(conn: &Connection, since: i64) -> Result<Vec<Vec<Visit>>> {
    let sql = format!(
        "SELECT cv.cluster_id, {VISIT_COLUMNS} FROM clusters_and_visits cv JOIN visits v ON v.id = cv.visit_id \
         JOIN urls u ON u.id = v.url WHERE v.visit_time >= ?1 ORDER BY cv.cluster_id, v.visit_time"
    );
    let mut statement = conn.prepare(&sql).context("the history's clusters are not as Chrome writes them")?;
    let mut clusters: BTreeMap<i64, Vec<Visit>> = BTreeMap::new();
    let mut rows = statement.query([since])?;
    while let Some(row) = rows.next()? {
        let cluster: i64 = row.get(0)?;
        clusters.entry(cluster).or_default().push(visit_at(row, 1)?);
    }
    Ok(clusters.into_values().collect())
}

fn visit(row: &rusqlite::Row<'_>) -> rusqlite::Result<Visit> {
    visit_at(row, 0)
}

/// A visit from [`VISIT_COLUMNS`] starting at column `first`.
fn visit_at(row: &rusqlite::Row<'_>, first: usize) -> rusqlite::Result<Visit> {
    let id: i64 = row.get(first)?;
    let time: i64 = row.get(first + 1)?;
    let from: i64 = row.get(first + 2)?;
    let transition: i64 = row.get(first + 3)?;
    Ok(Visit {
        id: id as u64,
        time_ms: unix_ms(time),
        referrer: (from > 0).then_some(from as u64),
        transition: Transition::from_core(transition),
        url: row.get(first + 4)?,
        title: row.get::<_, Option<String>>(first + 5)?.unwrap_or_default(),
    })
}

/// Chrome's time (microseconds since 1601) as milliseconds since the Unix epoch.
fn unix_ms(chrome: i64) -> f64 {
    chrome as f64 / 1000.0 - CHROME_EPOCH_OFFSET_MS
}

fn chrome_time(unix_ms: f64) -> i64 {
    ((unix_ms.max(0.0) + CHROME_EPOCH_OFFSET_MS) * 1000.0) as i64
}

#[cfg(test)]
mod tests {
    use super::*;

    /// A `History` database with the tables and columns Chrome's has that are read here.
    fn history(dir: &Path, clusters: bool) -> PathBuf {
        let path = dir.join("History");
        let conn = Connection::open(&path).unwrap();
        conn.execute_batch(
            "CREATE TABLE urls (id INTEGER PRIMARY KEY, url LONGVARCHAR, title LONGVARCHAR, visit_count INTEGER,
                                typed_count INTEGER, last_visit_time INTEGER, hidden INTEGER);
             CREATE TABLE visits (id INTEGER PRIMARY KEY, url INTEGER NOT NULL, visit_time INTEGER NOT NULL,
                                  from_visit INTEGER, transition INTEGER DEFAULT 0 NOT NULL, segment_id INTEGER,
                                  visit_duration INTEGER DEFAULT 0 NOT NULL);",
        )
        .unwrap();
        let base = chrome_time(1.8e12);
        let minute = 60_000_000;
        // (visit id, url id, url, title, minute, from_visit, transition core type)
        let rows = [
            (1, 1, "https://www.google.com/search?q=blue+mug", "blue mug - Google Search", 0, 0, 5),
            (2, 2, "https://shop.example/mugs/blue?sessionid=8fJ2kq9ZxL3mN7vR", "Blue mug", 1, 0, 0),
            (3, 3, "https://shop.example/cart", "Cart", 2, 2, 0),
            (4, 4, "https://news.example/", "News", 3, 0, 1),
            (5, 5, "https://news.example/story", "A story", 4, 4, 0),
            (6, 6, "https://mail.bank.example/inbox", "Bank", 5, 5, 0),
        ];
        for (visit, url, address, title, at, from, transition) in rows {
            conn.execute(
                "INSERT INTO urls (id, url, title) VALUES (?1, ?2, ?3)",
                rusqlite::params![url, address, title],
            )
            .unwrap();
            conn.execute(
                "INSERT INTO visits (id, url, visit_time, from_visit, transition) VALUES (?1, ?2, ?3, ?4, ?5)",
                rusqlite::params![visit, url, base + at * minute, from, transition],
            )
            .unwrap();
        }
        if clusters {
            conn.execute_batch(
                "CREATE TABLE clusters_and_visits (cluster_id INTEGER NOT NULL, visit_id INTEGER NOT NULL,
                     score NUMERIC DEFAULT 0 NOT NULL, engagement_score NUMERIC DEFAULT 0 NOT NULL,
                     url_for_deduping LONGVARCHAR NOT NULL DEFAULT '', normalized_url LONGVARCHAR NOT NULL DEFAULT '',
                     url_for_display LONGVARCHAR NOT NULL DEFAULT '', interaction_state INTEGER DEFAULT 0 NOT NULL,
                     PRIMARY KEY (cluster_id, visit_id));
                 INSERT INTO clusters_and_visits (cluster_id, visit_id) VALUES (7, 3), (7, 2), (9, 4), (9, 5), (9, 6);",
            )
            .unwrap();
        }
        path
    }

    fn urls(journeys: &[Journey]) -> Vec<Vec<&str>> {
        journeys.iter().map(|journey| journey.steps.iter().map(|step| step.url.as_str()).collect()).collect()
    }

    #[test]
    fn chromes_own_clusters_are_read_when_the_profile_has_them() {
        let dir = tempfile::tempdir().unwrap();
        let path = history(dir.path(), true);
        let before = std::fs::read(&path).unwrap();
        let options = Options { since_ms: 0.0, excluded: vec!["bank.example".into()] };
        let journeys = from_history(&path, &options).unwrap();
        assert_eq!(
            urls(&journeys),
            [
                vec!["https://shop.example/mugs/blue?sessionid=REDACTED", "https://shop.example/cart"],
                vec!["https://news.example/", "https://news.example/story"],
            ]
        );
        assert!(journeys.iter().all(|journey| journey.grouped_by == JourneySource::Chrome));
        assert_eq!(journeys[1].steps[1].title, "A story");
        assert_eq!(std::fs::read(&path).unwrap(), before, "the profile's database is never written");
    }

    #[test]
    fn without_clusters_the_visits_are_grouped_by_traces_rule() {
        let dir = tempfile::tempdir().unwrap();
        let path = history(dir.path(), false);
        let options = Options { since_ms: 0.0, excluded: vec!["bank.example".into()] };
        let journeys = from_history(&path, &options).unwrap();
        assert_eq!(
            urls(&journeys),
            [
                vec![
                    "https://www.google.com/search?q=blue+mug",
                    "https://shop.example/mugs/blue?sessionid=REDACTED",
                    "https://shop.example/cart"
                ],
                vec!["https://news.example/", "https://news.example/story"],
            ]
        );
        assert!(journeys.iter().all(|journey| journey.grouped_by == JourneySource::Trace));
        // Only the period asked for.
        let later = Options { since_ms: 1.8e12 + 3.0 * 60_000.0, ..options };
        assert_eq!(
            urls(&from_history(&path, &later).unwrap()),
            [["https://news.example/", "https://news.example/story"]]
        );
        let not_history = dir.path().join("other");
        std::fs::write(&not_history, b"not a database").unwrap();
        assert!(from_history(&not_history, &Options::default()).is_err());
    }
}
