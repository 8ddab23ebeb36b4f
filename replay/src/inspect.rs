//! `trace-replay inspect`: what a bundle holds, without launching a browser: the task, its pages, each host
//! with its request count and body bytes, and what the bundle's ignore list (`ignored.json`) removes from
//! the replay.
//!
//! The bundle is opened exactly as `serve` opens it ([`ReplayArchive::open`]), so that `inspect` refuses
//! the same damaged bundles with the same reasons, and a bundle it summarizes is one `serve` can replay.

use std::collections::BTreeMap;
use std::path::Path;

use anyhow::Result;
use serde::Serialize;
use trace_manifest::bundle::BundleManifest;

use crate::archive::{IGNORED_FILE, RecordedExchange, ReplayArchive, ignore_pattern};

#[derive(Debug, Serialize)]
pub struct Summary {
    pub manifest: BundleManifest,
    pub pages: Vec<String>,
    pub hosts: Vec<HostSummary>,
    /// Each entry of the ignore list, in its order, with the recorded requests replay fails because of it.
    pub ignored: Vec<IgnoredSummary>,
}

#[derive(Debug, Serialize, PartialEq, Eq)]
pub struct HostSummary {
    pub host: String,
    pub requests: u64,
    pub body_bytes: u64,
}

/// One ignore-list entry and the recorded requests it removes.
#[derive(Debug, Serialize, PartialEq, Eq)]
pub struct IgnoredSummary {
    pub pattern: String,
    pub requests: u64,
    pub body_bytes: u64,
}

pub fn inspect(path: &Path) -> Result<Summary> {
    let archive = ReplayArchive::open(path)?;
    Ok(Summary {
        hosts: hosts(&archive.exchanges),
        ignored: ignored(&archive.ignored, &archive.exchanges),
        pages: archive.page_titles,
        manifest: archive.manifest,
    })
}

/// Each host (with its port, if any) and its requests, the busiest first.
fn hosts(exchanges: &[RecordedExchange]) -> Vec<HostSummary> {
    let mut hosts: BTreeMap<String, HostSummary> = BTreeMap::new();
    for exchange in exchanges {
        let host = url::Url::parse(&exchange.request.url)
            .ok()
            .and_then(|url| url.host_str().map(|h| url.port().map_or(h.to_owned(), |p| format!("{h}:{p}"))))
            .unwrap_or_else(|| "(no host)".to_owned());
        let summary = hosts.entry(host.clone()).or_insert(HostSummary { host, requests: 0, body_bytes: 0 });
        summary.requests += 1;
        summary.body_bytes += exchange.body_size;
    }
    let mut hosts: Vec<HostSummary> = hosts.into_values().collect();
    hosts.sort_by(|a, b| b.requests.cmp(&a.requests).then(a.host.cmp(&b.host)));
    hosts
}

/// What each ignore-list entry removes. A request two entries name counts under the first, as replay
/// reports it, so that the counts add up to what the list removes in all. An entry that names nothing
/// recorded is kept, with zero: it may be stale, or meant for requests the recording never made.
fn ignored(patterns: &[String], exchanges: &[RecordedExchange]) -> Vec<IgnoredSummary> {
    let mut summaries: Vec<IgnoredSummary> = patterns
        .iter()
        .map(|pattern| IgnoredSummary { pattern: pattern.clone(), requests: 0, body_bytes: 0 })
        .collect();
    for exchange in exchanges {
        if let Some(pattern) = ignore_pattern(patterns, &exchange.request.url)
            && let Some(summary) = summaries.iter_mut().find(|summary| summary.pattern == pattern)
        {
            summary.requests += 1;
            summary.body_bytes += exchange.body_size;
        }
    }
    summaries
}

impl std::fmt::Display for Summary {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        let task = &self.manifest.task;
        writeln!(f, "task {} ({}, {})", task.id, task.task_type.as_str(), task.status.as_str())?;
        writeln!(f, "  {}", task.description)?;
        writeln!(f, "  website {}", task.website)?;
        if let Some(answer) = &task.answer {
            writeln!(f, "  answer  {answer}")?;
        }
        let counts = &self.manifest.counts;
        writeln!(
            f,
            "recorded {} for {:.0}s: {} events, {} requests, {} actions, {} screenshots, {} DOM snapshots",
            self.manifest.started_at,
            self.manifest.duration_seconds,
            counts.events,
            counts.requests,
            counts.actions,
            counts.screenshots,
            counts.dom_snapshots
        )?;
        writeln!(f, "pages ({}):", self.pages.len())?;
        for page in &self.pages {
            writeln!(f, "  {page}")?;
        }
        writeln!(f, "hosts ({}):", self.hosts.len())?;
        for host in &self.hosts {
            writeln!(f, "  {:>5} requests  {:>10} bytes  {}", host.requests, host.body_bytes, host.host)?;
        }
        if self.ignored.is_empty() {
            writeln!(f, "ignore list: none ({IGNORED_FILE} absent or empty)")?;
        } else {
            let requests: u64 = self.ignored.iter().map(|ignored| ignored.requests).sum();
            let bytes: u64 = self.ignored.iter().map(|ignored| ignored.body_bytes).sum();
            writeln!(f, "ignore list ({} patterns) removes {requests} requests, {bytes} bytes:", self.ignored.len())?;
            for ignored in &self.ignored {
                writeln!(
                    f,
                    "  {:>5} requests  {:>10} bytes  {}",
                    ignored.requests, ignored.body_bytes, ignored.pattern
                )?;
            }
        }
        Ok(())
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::matcher::RecordedRequest;

    fn recorded(url: &str, body_size: u64) -> RecordedExchange {
        RecordedExchange {
            request: RecordedRequest { method: "GET".to_owned(), url: url.to_owned(), body: None, content_type: None },
            status: 200,
            status_text: "OK".to_owned(),
            headers: Vec::new(),
            body_file: None,
            body_text: None,
            body_size,
            error: None,
        }
    }

    #[test]
    fn each_pattern_counts_the_requests_it_removes_first() {
        let exchanges = [
            recorded("https://shop.test/", 1000),
            recorded("https://tracker.test/beacon?id=1", 2),
            recorded("http://tracker.test/beacon?id=2", 3),
            recorded("https://ads.test/tracker.test/beacon", 40),
            recorded("https://cdn.test/ads.test.js", 500),
        ];
        let patterns = ["tracker.test/beacon", "ads.test", "unused.test"].map(str::to_owned);
        let summary =
            |pattern: &str, requests, body_bytes| IgnoredSummary { pattern: pattern.to_owned(), requests, body_bytes };
        assert_eq!(
            ignored(&patterns, &exchanges),
            [
                // Scheme-less, so http and https alike; the ads.test URL that names the beacon counts here.
                summary("tracker.test/beacon", 3, 45),
                summary("ads.test", 1, 500),
                summary("unused.test", 0, 0),
            ]
        );
        // A pattern can only match after the scheme: "https" names nothing.
        assert_eq!(ignored(&["https".to_owned()], &exchanges), [summary("https", 0, 0)]);
    }

    #[test]
    fn the_text_summary_totals_what_the_ignore_list_removes() {
        let exchanges = [recorded("https://shop.test/", 1000), recorded("https://tracker.test/b", 7)];
        let patterns = ["tracker.test".to_owned()];
        let summary = Summary {
            manifest: serde_json::from_value(serde_json::json!({
                "format": "trace-bundle", "format_version": 1,
                "task": { "id": "t", "source": "self", "task_type": "action", "description": "d",
                          "website": "https://shop.test/", "status": "stopped" },
                "recorder": { "name": "r", "version": "0" }, "producer": { "name": "p", "version": "0" },
                "started_at": "2025-11-22T10:00:00.000Z", "duration_seconds": 1.0,
                "counts": { "events": 0, "pages": 0, "requests": 2, "actions": 0, "bodies": 0, "body_bytes": 0,
                            "screenshots": 0, "dom_snapshots": 0 },
                "files": []
            }))
            .unwrap(),
            pages: Vec::new(),
            hosts: hosts(&exchanges),
            ignored: ignored(&patterns, &exchanges),
        };
        let text = summary.to_string();
        assert!(text.contains("ignore list (1 patterns) removes 1 requests, 7 bytes:\n"), "{text}");
        assert!(text.contains("      1 requests           7 bytes  tracker.test\n"), "{text}");
        let none = Summary { ignored: Vec::new(), ..summary };
        assert!(none.to_string().contains("ignore list: none (ignored.json absent or empty)"), "{none}");
    }
}
