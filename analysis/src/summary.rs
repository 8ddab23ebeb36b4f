//! A bundle's summary, as `trace-replay inspect` prints it: the task, its pages, each host with its request
//! count and body bytes, and what the ignore list removes from a replay. It counts the recorded exchanges
//! replay serves from (the HAR's entries), each as its URL and its response body's size.

use std::collections::BTreeMap;

use trace_manifest::bundle::BundleManifest;
use trace_manifest::report::{BundleSummary, HostSummary, IgnoredSummary};

use crate::ignore::ignore_pattern;

/// Summarizes a bundle from its manifest, its pages' titles, its recorded requests (URL and response body
/// bytes) and its ignore list.
pub fn summarize(
    manifest: BundleManifest,
    pages: Vec<String>,
    requests: &[(&str, u64)],
    ignored: &[String],
) -> BundleSummary {
    BundleSummary { pages, hosts: hosts(requests), ignored: ignored_summaries(ignored, requests), manifest }
}

/// Each host (with its port, if any) and its requests, the busiest first.
fn hosts(requests: &[(&str, u64)]) -> Vec<HostSummary> {
    let mut hosts: BTreeMap<String, HostSummary> = BTreeMap::new();
    for (url, body_bytes) in requests {
        let host = url::Url::parse(url)
            .ok()
            .and_then(|url| url.host_str().map(|h| url.port().map_or(h.to_owned(), |p| format!("{h}:{p}"))))
            .unwrap_or_else(|| "(no host)".to_owned());
        let summary = hosts.entry(host.clone()).or_insert(HostSummary { host, requests: 0, body_bytes: 0 });
        summary.requests += 1;
        summary.body_bytes += body_bytes;
    }
    let mut hosts: Vec<HostSummary> = hosts.into_values().collect();
    hosts.sort_by(|a, b| b.requests.cmp(&a.requests).then(a.host.cmp(&b.host)));
    hosts
}

/// What each ignore-list entry removes. A request two entries name counts under the first, as replay
/// reports it, so that the counts add up to what the list removes in all. An entry that names nothing
/// recorded is kept, with zero: it may be stale, or meant for requests the recording never made.
fn ignored_summaries(patterns: &[String], requests: &[(&str, u64)]) -> Vec<IgnoredSummary> {
    let mut summaries: Vec<IgnoredSummary> = patterns
        .iter()
        .map(|pattern| IgnoredSummary { pattern: pattern.clone(), requests: 0, body_bytes: 0 })
        .collect();
    for (url, body_bytes) in requests {
        if let Some(pattern) = ignore_pattern(patterns, url)
            && let Some(summary) = summaries.iter_mut().find(|summary| summary.pattern == pattern)
        {
            summary.requests += 1;
            summary.body_bytes += body_bytes;
        }
    }
    summaries
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn each_pattern_counts_the_requests_it_removes_first() {
        let requests = [
            ("https://shop.test/", 1000),
            ("https://tracker.test/beacon?id=1", 2),
            ("http://tracker.test/beacon?id=2", 3),
            ("https://ads.test/tracker.test/beacon", 40),
            ("https://cdn.test/ads.test.js", 500),
        ];
        let patterns = ["tracker.test/beacon", "ads.test", "unused.test"].map(str::to_owned);
        let summary =
            |pattern: &str, requests, body_bytes| IgnoredSummary { pattern: pattern.to_owned(), requests, body_bytes };
        assert_eq!(
            ignored_summaries(&patterns, &requests),
            [
                // Scheme-less, so http and https alike; the ads.test URL that names the beacon counts here.
                summary("tracker.test/beacon", 3, 45),
                summary("ads.test", 1, 500),
                summary("unused.test", 0, 0),
            ]
        );
        // A pattern can only match after the scheme: "https" names nothing.
        assert_eq!(ignored_summaries(&["https".to_owned()], &requests), [summary("https", 0, 0)]);
    }

    #[test]
    fn hosts_keep_their_port_and_the_busiest_comes_first() {
        let requests = [("http://a.test:8000/", 10), ("http://b.test/x", 1), ("http://b.test/y", 2), ("nonsense", 5)];
        let hosts: Vec<(String, u64, u64)> =
            hosts(&requests).into_iter().map(|h| (h.host, h.requests, h.body_bytes)).collect();
        assert_eq!(hosts, [("b.test".into(), 2, 3), ("(no host)".into(), 1, 5), ("a.test:8000".into(), 1, 10)]);
    }
}
