//! `trace-replay inspect`: what a bundle holds, read from its manifest and HAR without launching a
//! browser: the task, its pages, and each host with its request count and body bytes.

use std::collections::BTreeMap;
use std::path::Path;

use anyhow::{Context, Result};
use serde::Serialize;
use trace_manifest::archive::Bundle;
use trace_manifest::bundle::{self, BundleManifest};
use trace_manifest::har::Har;

#[derive(Debug, Serialize)]
pub struct Summary {
    pub manifest: BundleManifest,
    pub pages: Vec<String>,
    pub hosts: Vec<HostSummary>,
}

#[derive(Debug, Serialize, PartialEq, Eq)]
pub struct HostSummary {
    pub host: String,
    pub requests: u64,
    pub body_bytes: u64,
}

pub fn inspect(path: &Path) -> Result<Summary> {
    let mut bundle = Bundle::open(path).with_context(|| format!("cannot open the bundle {}", path.display()))?;
    let manifest = bundle.manifest()?;
    let har: Har = serde_json::from_slice(&bundle.read(bundle::HAR_FILE)?).context("recording.har does not parse")?;
    let mut hosts: BTreeMap<String, HostSummary> = BTreeMap::new();
    for entry in &har.log.entries {
        let host = url::Url::parse(&entry.request.url)
            .ok()
            .and_then(|url| url.host_str().map(|h| url.port().map_or(h.to_owned(), |p| format!("{h}:{p}"))))
            .unwrap_or_else(|| "(no host)".to_owned());
        let summary = hosts.entry(host.clone()).or_insert(HostSummary { host, requests: 0, body_bytes: 0 });
        summary.requests += 1;
        summary.body_bytes += entry.response.content.size.max(0) as u64;
    }
    let mut hosts: Vec<HostSummary> = hosts.into_values().collect();
    hosts.sort_by(|a, b| b.requests.cmp(&a.requests).then(a.host.cmp(&b.host)));
    let pages = har.log.pages.iter().map(|page| page.title.clone()).collect();
    Ok(Summary { manifest, pages, hosts })
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
        Ok(())
    }
}
