//! `trace-replay inspect`: what a bundle holds, without launching a browser: the task, its pages, each host
//! with its request count and body bytes, and what the bundle's ignore list (`ignored.json`) removes from
//! the replay. The summary is [`trace_analysis::summary`]'s; this module opens the bundle and writes the
//! summary as text.
//!
//! The bundle is opened exactly as `serve` opens it ([`ReplayArchive::open`]), so that `inspect` refuses
//! the same damaged bundles with the same reasons, and a bundle it summarizes is one `serve` can replay.

use std::fmt::Write as _;
use std::path::Path;

use anyhow::Result;
use trace_bundle::archive::ZipLimits;
use trace_manifest::postprocess::IGNORED_FILE;
use trace_manifest::report::BundleSummary;

use crate::archive::ReplayArchive;

pub fn inspect(path: &Path, limits: ZipLimits) -> Result<BundleSummary> {
    let archive = ReplayArchive::open_with_limits(path, limits)?;
    let requests: Vec<(&str, u64)> =
        archive.exchanges.iter().map(|exchange| (exchange.request.url.as_str(), exchange.body_size)).collect();
    Ok(trace_analysis::summary::summarize(
        archive.manifest.clone(),
        archive.page_titles.clone(),
        &requests,
        &archive.ignored,
    ))
}

/// The summary as people read it.
pub fn text(summary: &BundleSummary) -> String {
    let mut f = String::new();
    // Writing to a `String` cannot fail.
    let _ = write_text(&mut f, summary);
    f
}

fn write_text(f: &mut String, summary: &BundleSummary) -> std::fmt::Result {
    let task = &summary.manifest.task;
    writeln!(f, "task {} ({}, {})", task.id, task.task_type.as_str(), task.status.as_str())?;
    writeln!(f, "  {}", task.description)?;
    writeln!(f, "  website {}", task.website)?;
    if let Some(answer) = &task.answer {
        writeln!(f, "  answer  {answer}")?;
    }
    let counts = &summary.manifest.counts;
    writeln!(
        f,
        "recorded {} for {:.0}s: {} events, {} requests, {} actions, {} screenshots, {} DOM snapshots",
        summary.manifest.started_at,
        summary.manifest.duration_seconds,
        counts.events,
        counts.requests,
        counts.actions,
        counts.screenshots,
        counts.dom_snapshots
    )?;
    writeln!(f, "pages ({}):", summary.pages.len())?;
    for page in &summary.pages {
        writeln!(f, "  {page}")?;
    }
    writeln!(f, "hosts ({}):", summary.hosts.len())?;
    for host in &summary.hosts {
        writeln!(f, "  {:>5} requests  {:>10} bytes  {}", host.requests, host.body_bytes, host.host)?;
    }
    if summary.ignored.is_empty() {
        writeln!(f, "ignore list: none ({IGNORED_FILE} absent or empty)")?;
    } else {
        let requests: u64 = summary.ignored.iter().map(|ignored| ignored.requests).sum();
        let bytes: u64 = summary.ignored.iter().map(|ignored| ignored.body_bytes).sum();
        writeln!(f, "ignore list ({} patterns) removes {requests} requests, {bytes} bytes:", summary.ignored.len())?;
        for ignored in &summary.ignored {
            writeln!(f, "  {:>5} requests  {:>10} bytes  {}", ignored.requests, ignored.body_bytes, ignored.pattern)?;
        }
    }
    Ok(())
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn the_text_summary_totals_what_the_ignore_list_removes() {
        let requests = [("https://shop.test/", 1000), ("https://tracker.test/b", 7)];
        let patterns = ["tracker.test".to_owned()];
        let manifest = serde_json::from_value(serde_json::json!({
            "format": "trace-bundle", "format_version": 1,
            "task": { "id": "t", "source": "self", "task_type": "action", "description": "d",
                      "website": "https://shop.test/", "status": "stopped" },
            "recorder": { "name": "r", "version": "0" }, "producer": { "name": "p", "version": "0" },
            "started_at": "2025-11-22T10:00:00.000Z", "duration_seconds": 1.0,
            "counts": { "events": 0, "pages": 0, "requests": 2, "actions": 0, "bodies": 0, "body_bytes": 0,
                        "screenshots": 0, "dom_snapshots": 0 },
            "files": []
        }))
        .unwrap();
        let summary = trace_analysis::summary::summarize(manifest, Vec::new(), &requests, &patterns);
        let shown = text(&summary);
        assert!(shown.contains("ignore list (1 patterns) removes 1 requests, 7 bytes:\n"), "{shown}");
        assert!(shown.contains("      1 requests           7 bytes  tracker.test\n"), "{shown}");
        let none = BundleSummary { ignored: Vec::new(), ..summary };
        assert!(text(&none).contains("ignore list: none (ignored.json absent or empty)"), "{}", text(&none));
    }
}
