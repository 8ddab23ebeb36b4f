//! A recording as the viewer shows it, read once when first opened and kept: the manifest, the steps (the
//! trajectory the bundle was processed into, else derived from its events, by `trace_analysis`), the
//! network entries (the bundle's HAR, else built from its events), the viewport of each screenshot, the
//! checkpoints, the credentials, the console messages, the storage snapshots and the ignore list. Files (screenshots, bodies, DOM snapshots) stay in the bundle, a zip
//! read in place or a directory, and are read when a page asks for one.

use std::collections::HashMap;
use std::path::Path;
use std::sync::Mutex;

use anyhow::{Context, Result};
use trace_analysis::{har, ignore, trajectory};
use trace_manifest::archive::{Bundle, ZipLimits};
use trace_manifest::bundle::{BundleManifest, HAR_FILE, STORAGE_FILE, StorageFile, is_safe_relative_path};
use trace_manifest::event::{ConsoleMessage, EventKind, Viewport};
use trace_manifest::har::{Creator, Entry, Har};
use trace_manifest::postprocess::{CHECKPOINTS_FILE, Checkpoint};
use trace_manifest::time_fmt::millis_from_rfc3339;
use trace_manifest::trajectory::{Credential, ToolCall};

pub struct Recording {
    pub manifest: BundleManifest,
    pub steps: Vec<ToolCall>,
    /// Network entries in time order, each with its start in milliseconds since the Unix epoch.
    pub entries: Vec<(f64, Entry)>,
    /// Screenshot file → the viewport it was taken at.
    pub viewports: HashMap<String, Viewport>,
    /// The processed checkpoints, when the bundle was processed.
    pub checkpoints: Option<Vec<Checkpoint>>,
    pub credentials: Vec<Credential>,
    /// The pages' console messages, each with its time in milliseconds since the Unix epoch.
    pub console: Vec<(f64, ConsoleMessage)>,
    /// Cookies and web storage at the start and the end, when the bundle has them.
    pub storage: Option<StorageFile>,
    /// The ignore list replay applies: URL patterns it fails at once instead of answering.
    pub ignored: Vec<String>,
    bundle: Mutex<Bundle>,
}

impl Recording {
    pub fn open(path: &Path) -> Result<Recording> {
        let mut bundle = Bundle::open_with_limits(path, ZipLimits::default())
            .with_context(|| format!("cannot open the bundle {}", path.display()))?;
        let manifest = bundle.manifest()?;
        let events = bundle.events().context("the bundle's events")?;
        let (steps, credentials) = trajectory::of_bundle(&mut bundle)?;
        let har: Har = if bundle.contains(HAR_FILE) {
            serde_json::from_slice(&bundle.read(HAR_FILE)?).with_context(|| format!("{HAR_FILE} does not parse"))?
        } else {
            let creator = Creator { name: "trace-host".to_owned(), version: env!("CARGO_PKG_VERSION").to_owned() };
            har::build(creator, None, &events)
        };
        let mut entries: Vec<(f64, Entry)> = har
            .log
            .entries
            .into_iter()
            .map(|entry| (millis_from_rfc3339(&entry.started_date_time).unwrap_or(0.0), entry))
            .collect();
        entries.sort_by(|a, b| a.0.total_cmp(&b.0));
        let viewports = events
            .iter()
            .filter_map(|record| match &record.event.kind {
                EventKind::Screenshot(shot) => Some((shot.file.clone(), shot.viewport?)),
                _ => None,
            })
            .collect();
        let console = events
            .iter()
            .filter_map(|record| match &record.event.kind {
                EventKind::Console(message) => Some((record.event.ts, message.clone())),
                _ => None,
            })
            .collect();
        let storage = if bundle.contains(STORAGE_FILE) {
            Some(
                serde_json::from_slice(&bundle.read(STORAGE_FILE)?)
                    .with_context(|| format!("{STORAGE_FILE} does not parse"))?,
            )
        } else {
            None
        };
        let ignored = ignore::of_bundle(&mut bundle, &events)?;
        let checkpoints = if bundle.contains(CHECKPOINTS_FILE) {
            serde_json::from_slice(&bundle.read(CHECKPOINTS_FILE)?).ok()
        } else {
            None
        };
        Ok(Recording {
            manifest,
            steps,
            entries,
            viewports,
            checkpoints,
            credentials,
            console,
            storage,
            ignored,
            bundle: Mutex::new(bundle),
        })
    }

    /// A file of the bundle, when `name` is one of its files (never a path that leaves it).
    pub fn file(&self, name: &str) -> Result<Option<Vec<u8>>> {
        if !is_safe_relative_path(name) {
            return Ok(None);
        }
        let mut bundle = self.bundle.lock().unwrap_or_else(|poisoned| poisoned.into_inner());
        if !bundle.contains(name) {
            return Ok(None);
        }
        Ok(Some(bundle.read(name)?))
    }

    /// The network entries that started while step `index` was the latest: from its start (the very first
    /// for the first step, whose navigation is timed once it commits) to the next step's.
    pub fn entries_of_step(&self, index: usize) -> std::ops::Range<usize> {
        let start = match index {
            0 => f64::NEG_INFINITY,
            _ => self.steps.get(index).map_or(f64::INFINITY, |step| step.ts),
        };
        let end = self.steps.get(index + 1).map_or(f64::INFINITY, |step| step.ts);
        let first = self.entries.partition_point(|(ts, _)| *ts < start);
        let last = self.entries.partition_point(|(ts, _)| *ts < end);
        first..last.max(first)
    }

    /// The ignore list's pattern that makes replay fail network entry `index` at once, if one does.
    pub fn ignored_by(&self, index: usize) -> Option<&str> {
        ignore::ignore_pattern(&self.ignored, &self.entries.get(index)?.1.request.url)
    }

    /// The step during which network entry `index` started (the first, for what came before any step).
    pub fn step_of_entry(&self, index: usize) -> Option<usize> {
        let ts = self.entries.get(index)?.0;
        if self.steps.is_empty() {
            return None;
        }
        Some(self.steps.iter().rposition(|step| step.ts <= ts).unwrap_or(0))
    }
}
