//! `trace-host collect`: a campaign's submissions brought together into a TRACE dataset.
//!
//! From the store (or directory) the campaign sent to, every `<campaign>/<pseudonym>/<task>.zip` with its
//! `<task>.annotation.json` is fetched and checked: the zip must be what its annotation says (size and
//! SHA-256), and then a valid bundle (as `dataset` checks every bundle); the same bundle submitted twice is
//! kept once; the coordinator's review file may reject a submission, with a reason. What passes becomes a
//! dataset as `trace-host dataset` writes one (`tasks.jsonl` and `bundles/`, redacted again); every
//! `<pseudonym>/journeys.jsonl` is joined into `journeys.jsonl`, each journey checked as the extension
//! checked it; and `collected.json` says which submissions were taken, per campaign task and per pseudonym,
//! the journeys per pseudonym with their labels' lengths, feasibility and wish for automation, and which
//! were not taken and why.

use std::collections::{BTreeMap, HashSet};
use std::path::Path;

use anyhow::{Context, Result};
use serde::Deserialize;
use trace_manifest::archive::sha256_hex;
use trace_manifest::campaign::{
    CollectReport, CollectSkipped, JOURNEYS_FILE, JourneySubmission, Spread, TaskAnnotation,
};
use trace_manifest::store::Location;

use crate::dataset::{self, DatasetOptions, Source};
use crate::redact::{SuspectDecisions, SuspectPolicy};

/// What `collected.json` is called in the dataset.
pub const REPORT_FILE: &str = "collected.json";

/// The coordinator's review: by submission (`<campaign>/<pseudonym>/<task>`), a decision.
#[derive(Debug, Default, Deserialize)]
pub struct Review(BTreeMap<String, Decision>);

#[derive(Debug, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct Decision {
    pub accept: bool,
    #[serde(default)]
    pub reason: String,
}

impl Review {
    pub fn read(path: &Path) -> Result<Review> {
        let bytes = std::fs::read(path).with_context(|| format!("cannot read {}", path.display()))?;
        serde_json::from_slice(&bytes).with_context(|| {
            format!(
                "{} is not a review file ({{\"campaign/pseudonym/task\": {{\"accept\": false, \"reason\": \"...\"}}}})",
                path.display()
            )
        })
    }
}

/// Collects the submissions at `store` into the dataset folder `out` (new or empty).
pub async fn collect(store: &str, out: &Path, review: &Review) -> Result<CollectReport> {
    let location = Location::parse(store)?;
    let keys = location.list().await?;
    let staging = tempfile::tempdir().context("cannot make a staging folder")?;
    let mut report = CollectReport::default();
    let mut taken: Vec<(String, TaskAnnotation, std::path::PathBuf)> = Vec::new();
    let mut seen_bundles = HashSet::new();
    for key in keys.iter().filter(|key| key.ends_with(".annotation.json")) {
        let name = key.trim_end_matches(".annotation.json").to_owned();
        let skip = |reason: String| CollectSkipped { submission: name.clone(), reason };
        if let Some(decision) = review.0.get(&name).filter(|decision| !decision.accept) {
            report.skipped.push(skip(format!("rejected in review: {}", decision.reason)));
            continue;
        }
        let annotation: TaskAnnotation = match location.get(key).await?.map(|bytes| serde_json::from_slice(&bytes)) {
            Some(Ok(annotation)) => annotation,
            Some(Err(error)) => {
                report.skipped.push(skip(format!("its annotation does not parse: {error}")));
                continue;
            }
            None => continue,
        };
        let Some(zip) = location.get(&format!("{name}.zip")).await? else {
            report.skipped.push(skip("its zip is missing".to_owned()));
            continue;
        };
        if zip.len() as u64 != annotation.bundle_size || sha256_hex(&zip) != annotation.bundle_sha256 {
            report.skipped.push(skip("its zip is not the one its annotation describes".to_owned()));
            continue;
        }
        if !seen_bundles.insert(annotation.bundle_sha256.clone()) {
            report.skipped.push(skip("the same bundle was submitted already".to_owned()));
            continue;
        }
        let path = staging.path().join(format!("{}.zip", taken.len()));
        std::fs::write(&path, &zip)?;
        taken.push((name, annotation, path));
    }

    // The dataset validates each bundle (an invalid one is skipped, with why) and redacts it again, though
    // it was redacted before it left the person's machine.
    let options = DatasetOptions {
        format: trace_manifest::report::DatasetFormat::Trace,
        redact: true,
        suspects: SuspectDecisions { otherwise: SuspectPolicy::Allow, ..SuspectDecisions::default() },
        progress: false,
        allow_invalid: false,
    };
    let sources: Vec<Source> = taken.iter().map(|(_, _, path)| Source::Bundle(path.clone())).collect();
    let built = dataset::build(&sources, None, out, &options)?;
    for skipped in built.skipped {
        let submission = taken
            .iter()
            .find(|(_, _, path)| path.display().to_string() == skipped.source)
            .map_or(skipped.source.clone(), |(name, _, _)| name.clone());
        report.skipped.push(CollectSkipped { submission, reason: skipped.reason });
    }
    for (name, annotation, _) in &taken {
        if built.tasks.contains(&annotation.task_id) {
            report.submissions.push(name.clone());
            *report.per_task.entry(annotation.campaign_task.clone()).or_default() += 1;
            *report.per_pseudonym.entry(annotation.pseudonym.clone()).or_default() += 1;
        }
    }

    // Each journey is checked as the person's extension checked it: a line that does not parse, is not
    // of the pseudonym whose file holds it, or whose annotation does not hold for its journey is skipped.
    let mut journeys = Vec::new();
    let mut labels = Vec::new();
    for key in keys.iter().filter(|key| key.ends_with(&format!("/{JOURNEYS_FILE}"))) {
        let Some(bytes) = location.get(key).await? else { continue };
        let pseudonym = key.rsplit('/').nth(1).unwrap_or_default();
        for (number, line) in String::from_utf8_lossy(&bytes).lines().enumerate() {
            if line.trim().is_empty() {
                continue;
            }
            let skip = |reason: String| CollectSkipped { submission: format!("{key} line {}", number + 1), reason };
            let submission = match serde_json::from_str::<JourneySubmission>(line) {
                Ok(submission) => submission,
                Err(error) => {
                    report.skipped.push(skip(format!("it does not parse: {error}")));
                    continue;
                }
            };
            if submission.pseudonym != pseudonym {
                report.skipped.push(skip(format!("it names {}, not {pseudonym}", submission.pseudonym)));
                continue;
            }
            if let Err(error) = submission.annotation.check(&submission.journey) {
                report.skipped.push(skip(error.to_string()));
                continue;
            }
            let annotation = &submission.annotation;
            labels.push(annotation.label.trim().chars().count());
            *report.feasibility.entry(annotation.feasibility.as_str().to_owned()).or_default() += 1;
            match annotation.automate {
                true => report.automate.yes += 1,
                false => report.automate.no += 1,
            }
            *report.journeys_per_pseudonym.entry(submission.pseudonym.clone()).or_default() += 1;
            journeys.push(line.to_owned());
        }
    }
    report.journeys = journeys.len();
    report.label_chars = Spread::of(labels);
    if !journeys.is_empty() {
        std::fs::write(out.join(JOURNEYS_FILE), journeys.join("\n") + "\n")?;
    }
    crate::atomic::write_json(&out.join(REPORT_FILE), &report)?;
    Ok(report)
}
