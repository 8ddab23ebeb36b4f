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
//!
//! Submissions come from strangers, some careless, some hostile, so nothing in the store is trusted:
//! - every file is read with a limit ([`MAX_ANNOTATION_BYTES`], [`MAX_SUBMISSION_BYTES`],
//!   [`MAX_JOURNEYS_BYTES`]) checked against its size before it is read and again as it is read; a zip is
//!   streamed to a staging file as it is hashed, never held in memory;
//! - in a directory only regular files are read: a link, a FIFO or a device is refused
//!   ([`Location::copy_bounded`]);
//! - an annotation must be of the key it was sent under (its campaign, pseudonym and task), and of the
//!   recording its zip holds;
//! - a bundle or a journey sent twice is taken once and the second reported as a duplicate, so that a
//!   pseudonym is credited with what the dataset holds;
//! - one bad entry is reported in `collected.json`'s `skipped`, with why, and the collection goes on.

use std::collections::{BTreeMap, HashMap, HashSet};
use std::path::{Path, PathBuf};

use anyhow::{Context, Result};
use serde::Deserialize;
use trace_bundle::archive::{Bundle, HashingWriter};
use trace_manifest::campaign::{
    CollectReport, CollectSkipped, JOURNEYS_FILE, JourneySubmission, MAX_ANNOTATION_BYTES, MAX_JOURNEY_LINE_BYTES,
    MAX_JOURNEYS_BYTES, MAX_SUBMISSION_BYTES, Spread, TaskAnnotation,
};
use trace_manifest::task::TaskId;
use trace_store::Location;

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
    // A `file://` URL is the directory it names, read as one (no link followed), as `submit` writes to it.
    let location = Location::parse(store.strip_prefix("file://").unwrap_or(store))?;
    let keys = location.list().await?;
    let staging = tempfile::tempdir().context("cannot make a staging folder")?;
    let mut report = CollectReport::default();
    let mut taken: Vec<Staged> = Vec::new();
    // The first submission of each bundle and of each recording, by SHA-256 and by task id.
    let mut first_of_bundle: HashMap<String, String> = HashMap::new();
    let mut first_of_task: HashMap<TaskId, String> = HashMap::new();
    for key in keys.iter().filter(|key| key.ends_with(ANNOTATION_SUFFIX)) {
        let name = key.trim_end_matches(ANNOTATION_SUFFIX).to_owned();
        let mut skip = |reason: String| report.skipped.push(CollectSkipped { submission: name.clone(), reason });
        if let Some(decision) = review.0.get(&name).filter(|decision| !decision.accept) {
            skip(format!("rejected in review: {}", decision.reason));
            continue;
        }
        let zip = staging.path().join(format!("{}.zip", taken.len()));
        let staged = match stage(&location, &name, &zip).await {
            Ok(staged) => staged,
            Err(reason) => {
                let _ = std::fs::remove_file(&zip);
                skip(reason);
                continue;
            }
        };
        let duplicate = match first_of_bundle.get(&staged.annotation.bundle_sha256) {
            Some(first) => Some(format!("a duplicate: the same bundle was submitted already, as {first}")),
            None => first_of_task.get(&staged.annotation.task_id).map(|first| {
                format!("a duplicate: the recording {} was submitted already, as {first}", staged.annotation.task_id)
            }),
        };
        if let Some(reason) = duplicate {
            let _ = std::fs::remove_file(&zip);
            skip(reason);
            continue;
        }
        first_of_bundle.insert(staged.annotation.bundle_sha256.clone(), name.clone());
        first_of_task.insert(staged.annotation.task_id.clone(), name.clone());
        taken.push(staged);
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
    let sources: Vec<Source> = taken.iter().map(|staged| Source::Bundle(staged.zip.clone())).collect();
    let built = dataset::build(&sources, None, out, &options)?;
    // A submission is credited only when the dataset holds its bundle: every source is either added or
    // skipped, and the task ids of those taken are distinct, so none is counted twice.
    for staged in &taken {
        let source = Source::Bundle(staged.zip.clone()).to_string();
        if let Some(skipped) = built.skipped.iter().find(|skipped| skipped.source == source) {
            report.skipped.push(CollectSkipped { submission: staged.name.clone(), reason: skipped.reason.clone() });
        } else if built.tasks.contains(&staged.annotation.task_id) {
            report.submissions.push(staged.name.clone());
            *report.per_task.entry(staged.annotation.campaign_task.clone()).or_default() += 1;
            *report.per_pseudonym.entry(staged.annotation.pseudonym.clone()).or_default() += 1;
        }
    }

    // Each journey is checked as the person's extension checked it: a line that does not parse, is not
    // of the pseudonym and campaign whose file holds it, is longer than a journey can be, repeats a
    // journey, or whose annotation does not hold for its journey (its label too short or too long) is
    // skipped.
    let mut journeys = Vec::new();
    let mut labels = Vec::new();
    let mut seen_journeys = HashSet::new();
    for key in keys.iter().filter(|key| key.ends_with(&format!("/{JOURNEYS_FILE}"))) {
        let bytes = match location.get(key, MAX_JOURNEYS_BYTES).await {
            Ok(Some(bytes)) => bytes,
            Ok(None) => continue,
            Err(error) => {
                let reason = format!("its journeys cannot be taken: {error:#}");
                report.skipped.push(CollectSkipped { submission: key.clone(), reason });
                continue;
            }
        };
        let mut folders = key.rsplit('/').skip(1);
        let (pseudonym, campaign) = (folders.next().unwrap_or_default(), folders.next());
        for (number, line) in String::from_utf8_lossy(&bytes).lines().enumerate() {
            if line.trim().is_empty() {
                continue;
            }
            let skip = |reason: String| CollectSkipped { submission: format!("{key} line {}", number + 1), reason };
            if line.len() > MAX_JOURNEY_LINE_BYTES {
                let reason =
                    format!("it is {} bytes, more than the {MAX_JOURNEY_LINE_BYTES} a journey takes", line.len());
                report.skipped.push(skip(reason));
                continue;
            }
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
            if let Some(campaign) = campaign.filter(|campaign| *campaign != submission.campaign) {
                report.skipped.push(skip(format!("it names the campaign {}, not {campaign}", submission.campaign)));
                continue;
            }
            if let Err(error) = submission.annotation.check(&submission.journey) {
                report.skipped.push(skip(error.to_string()));
                continue;
            }
            if !seen_journeys.insert((submission.pseudonym.clone(), submission.journey.id.clone())) {
                report
                    .skipped
                    .push(skip(format!("a duplicate: the journey {} is in the file already", submission.journey.id)));
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
        let journeys = journeys.join("\n") + "\n";
        trace_store::atomic::write(&out.join(JOURNEYS_FILE), |file| {
            Ok(std::io::Write::write_all(file, journeys.as_bytes())?)
        })?;
    }
    trace_store::atomic::write_json(&out.join(REPORT_FILE), &report)?;
    Ok(report)
}

/// How a submission's annotation is named beside its zip.
const ANNOTATION_SUFFIX: &str = ".annotation.json";

/// A submission checked and its zip in the staging folder, for the dataset to validate.
struct Staged {
    /// `<campaign>/<pseudonym>/<task>`.
    name: String,
    annotation: TaskAnnotation,
    zip: PathBuf,
}

/// Fetches the submission `name` (its annotation, then its zip into `zip`) and checks it: the annotation
/// of its own key, the zip the one it describes and of the recording it names. Else why not.
async fn stage(location: &Location, name: &str, zip: &Path) -> Result<Staged, String> {
    let annotation = match location.get(&format!("{name}{ANNOTATION_SUFFIX}"), MAX_ANNOTATION_BYTES).await {
        Ok(Some(bytes)) => bytes,
        Ok(None) => return Err("its annotation went away while it was collected".to_owned()),
        Err(error) => return Err(format!("its annotation cannot be taken: {error:#}")),
    };
    let annotation: TaskAnnotation =
        serde_json::from_slice(&annotation).map_err(|error| format!("its annotation does not parse: {error}"))?;
    check_key(name, &annotation)?;

    let file = std::fs::File::create(zip).map_err(|error| format!("cannot stage its zip: {error}"))?;
    let mut hashed = HashingWriter::new(std::io::BufWriter::new(file));
    match location.copy_bounded(&format!("{name}.zip"), MAX_SUBMISSION_BYTES, &mut hashed).await {
        Ok(Some(_)) => {}
        Ok(None) => return Err("its zip is missing".to_owned()),
        Err(error) => return Err(format!("its zip cannot be taken: {error:#}")),
    }
    let (file, size, sha256) = hashed.finish();
    file.into_inner().map_err(|error| format!("cannot stage its zip: {}", error.error()))?;
    if size != annotation.bundle_size || sha256 != annotation.bundle_sha256 {
        return Err("its zip is not the one its annotation describes".to_owned());
    }
    let holds = Bundle::open(zip)
        .and_then(|mut bundle| bundle.manifest())
        .map_err(|error| format!("its zip is not a valid bundle: {error:#}"))?
        .task
        .id;
    if holds != annotation.task_id {
        return Err(format!("its annotation names the recording {}, but its zip holds {holds}", annotation.task_id));
    }
    Ok(Staged { name: name.to_owned(), annotation, zip: zip.to_owned() })
}

/// An annotation must be of the key it was sent under, `<campaign>/<pseudonym>/<task>`: whoever may write
/// under one pseudonym must not be able to speak for another, or for another task. (A store given as a
/// campaign's own folder has no campaign in its keys.)
fn check_key(name: &str, annotation: &TaskAnnotation) -> Result<(), String> {
    let mut parts = name.rsplit('/');
    let claims = [
        ("campaign task", &annotation.campaign_task, parts.next()),
        ("pseudonym", &annotation.pseudonym, parts.next()),
        ("campaign", &annotation.campaign, parts.next()),
    ];
    for (what, claimed, under) in claims {
        match under {
            Some(under) if under == claimed => {}
            Some(under) => {
                return Err(format!("its annotation claims the {what} {claimed:?}, but it was sent under {under:?}"));
            }
            None if what == "campaign" => {}
            None => return Err("it is not under <campaign>/<pseudonym>/, where submissions are sent".to_owned()),
        }
    }
    Ok(())
}
