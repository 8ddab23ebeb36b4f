//! Requests of the extension's pages, each in a native message of its own ([`Request`]): what was stored of
//! a recording just stopped, and the viewer opened on it ([`start_viewer`]), the review of a
//! stopped recording (its steps, thumbnails, credentials and checkpoints), the person's corrections (a
//! description, an answer, a credential that is no secret), discarding it, submitting it or their
//! journeys to a campaign, the outbox's state, and Chrome's own journeys of the profile. Every answer fits
//! in one message to the browser ([`MAX_OUTBOUND_BYTES`]): a review leaves out its last steps rather than
//! grow past it, thumbnails come as many as fit, with where to ask on.
//!
//! Submissions made here go through the same outbox as `trace-host submit`, redacted with every suspect
//! replaced too (a person in a crowd cannot be asked about each one), and are sent at once; what cannot
//! be sent stays queued and goes with the next request that sends.

use anyhow::{Context, Result, bail};
use base64::Engine;
use std::collections::BTreeSet;
use std::io::Cursor;
use trace_analysis::judge::{predicate_in_words, step_in_words};
use trace_analysis::trajectory;
use trace_manifest::campaign::{Campaign, Journey};
use trace_manifest::event::{EventKind, EventRecord};
use trace_manifest::task::{TaskId, TaskType};
use trace_manifest::trajectory::ToolAction;
use trace_manifest::wire::{
    Answer, MAX_OUTBOUND_BYTES, RecordedSummary, Request, ReviewCredential, ReviewSheet, ReviewStep, Thumbnail,
};

use crate::export;
use crate::journeys;
use crate::paths::DataDir;
use crate::process;
use crate::redact::{SuspectDecisions, SuspectPolicy};
use crate::submit;
use crate::tasks::{Purpose, TaskStore};
use crate::view::recording::Recording;

/// What an answer may take of a message, leaving room for its envelope.
const ANSWER_BUDGET_BYTES: usize = MAX_OUTBOUND_BYTES - 16 * 1024;
/// A thumbnail's largest size, in pixels: enough to recognize the page.
const THUMBNAIL_WIDTH: u32 = 320;
const THUMBNAIL_HEIGHT: u32 = 240;
const THUMBNAIL_QUALITY: u8 = 70;

/// Answers `request` for the data directory `data`; a failure is answered in words.
pub async fn answer(data: DataDir, request: Request) -> Answer {
    let name = request_name(&request);
    match answer_or_fail(data, request).await {
        Ok(answer) => answer,
        Err(error) => {
            tracing::warn!(request = name, "{error:#}");
            Answer::Failed { message: format!("{error:#}") }
        }
    }
}

async fn answer_or_fail(data: DataDir, request: Request) -> Result<Answer> {
    match request {
        Request::Review { task_id } => {
            on_blocking_pool(&data, move |data| Ok(Answer::Review(review(data, &task_id)?))).await
        }
        Request::Thumbnails { task_id, from } => {
            on_blocking_pool(&data, move |data| thumbnails(data, &task_id, from)).await
        }
        Request::Annotate { task_id, description, answer } => {
            on_blocking_pool(&data, move |data| annotate(data, &task_id, &description, answer.as_deref())).await
        }
        Request::NotASecret { task_id, placeholder } => {
            on_blocking_pool(&data, move |data| not_a_secret(data, &task_id, &placeholder)).await
        }
        Request::Discard { task_id } => on_blocking_pool(&data, move |data| discard(data, &task_id)).await,
        Request::Submit { task_id, campaign, campaign_task, pseudonym } => {
            let campaign = Campaign::parse(campaign.as_bytes())?;
            on_blocking_pool(&data, move |data| {
                let store = TaskStore::open(data)?;
                let suspects = SuspectDecisions { otherwise: SuspectPolicy::Redact, ..SuspectDecisions::default() };
                submit::enqueue(&store, &campaign, &campaign_task, &task_id, &pseudonym, &suspects)?;
                Ok(Answer::Done)
            })
            .await?;
            send_and_list(&data).await
        }
        Request::SubmitJourneys { campaign, pseudonym, journeys } => {
            let campaign = Campaign::parse(campaign.as_bytes())?;
            on_blocking_pool(&data, move |data| {
                submit::enqueue_journeys(data, &campaign, &pseudonym, &journeys)?;
                Ok(Answer::Done)
            })
            .await?;
            send_and_list(&data).await
        }
        Request::Recorded { task_id } => {
            on_blocking_pool(&data, move |data| Ok(Answer::Recorded(recorded(data, &task_id)?))).await
        }
        Request::View { task_id } => on_blocking_pool(&data, move |data| start_viewer(data, &task_id)).await,
        Request::Outbox { send: true } => send_and_list(&data).await,
        Request::Outbox { send: false } => outbox(&data),
        Request::Journeys { days, excluded } => {
            on_blocking_pool(&data, move |_| {
                let since_ms = trace_manifest::time_fmt::now_ms() - f64::from(days) * 86_400_000.0;
                let options = journeys::Options { since_ms, excluded };
                let found = match journeys::browser_history() {
                    Some(history) => journeys::chrome_journeys(&history, &options)?,
                    None => None,
                };
                let (journeys, older_left_out) = match found {
                    Some(found) => {
                        let (kept, left_out) = newest_within_budget(found);
                        (Some(kept), left_out)
                    }
                    None => (None, 0),
                };
                Ok(Answer::Journeys { journeys, older_left_out })
            })
            .await
        }
    }
}

/// Runs database and file work off the runtime's threads.
async fn on_blocking_pool(
    data: &DataDir,
    work: impl FnOnce(&DataDir) -> Result<Answer> + Send + 'static,
) -> Result<Answer> {
    let data = data.clone();
    tokio::task::spawn_blocking(move || work(&data)).await?
}

fn request_name(request: &Request) -> &'static str {
    match request {
        Request::Review { .. } => "review",
        Request::Thumbnails { .. } => "thumbnails",
        Request::Annotate { .. } => "annotate",
        Request::NotASecret { .. } => "not_a_secret",
        Request::Discard { .. } => "discard",
        Request::Submit { .. } => "submit",
        Request::Outbox { .. } => "outbox",
        Request::Journeys { .. } => "journeys",
        Request::SubmitJourneys { .. } => "submit_journeys",
        Request::Recorded { .. } => "recorded",
        Request::View { .. } => "view",
    }
}

/// Sends what waits in the outbox (each file retried with [`submit::BACKOFF`]), then lists it.
async fn send_and_list(data: &DataDir) -> Result<Answer> {
    submit::send(data, &submit::BACKOFF).await?;
    outbox(data)
}

fn outbox(data: &DataDir) -> Result<Answer> {
    let mut submissions: Vec<_> = submit::outbox(data)?.into_iter().map(|(_, entry)| entry).collect();
    // Sent ones left out from the end when there are too many to tell: the waiting ones come first and all stay.
    while answer_size(&Answer::Outbox { submissions: submissions.clone() }) > ANSWER_BUDGET_BYTES {
        submissions.pop();
    }
    Ok(Answer::Outbox { submissions })
}

/// The newest of `journeys` that fit in one answer, in their order, and how many older ones did not: a
/// heavy browser's clusters over weeks can pass the message limit.
fn newest_within_budget(mut journeys: Vec<Journey>) -> (Vec<Journey>, usize) {
    let cost = |journey: &Journey| serde_json::to_vec(journey).map_or(usize::MAX, |bytes| bytes.len() + 1);
    fn started(journey: &Journey) -> &str {
        journey.steps.first().map_or("", |step| step.time.as_str())
    }
    let mut total: usize = journeys.iter().map(cost).sum();
    let mut left_out = 0;
    while total > ANSWER_BUDGET_BYTES
        && let Some(oldest) = (0..journeys.len()).min_by_key(|&index| started(&journeys[index]))
    {
        total -= cost(&journeys[oldest]);
        journeys.remove(oldest);
        left_out += 1;
    }
    (journeys, left_out)
}

/// A stopped recording's bundle, processed, opened as the viewer reads it.
fn open_recording(data: &DataDir, task_id: &TaskId) -> Result<Recording> {
    let store = TaskStore::open(data)?;
    let (task_bundle, _) = export::processed_task_bundle(&store, task_id, Purpose::Review)?;
    Recording::open(task_bundle.dir())
}

/// What the host holds of a stopped recording, read from its finalized bundle as it is (not processed:
/// the person is waiting for the popup, and the counts do not depend on it).
fn recorded(data: &DataDir, task_id: &TaskId) -> Result<RecordedSummary> {
    let store = TaskStore::open(data)?;
    let task_bundle = store.bundle_for(task_id, Purpose::Review)?;
    let recording = Recording::open(task_bundle.dir())?;
    Ok(RecordedSummary {
        task_id: task_id.clone(),
        status: recording.manifest.task.status,
        duration_seconds: recording.manifest.duration_seconds,
        steps: recording.steps.len(),
        requests: recording.entries.len(),
        bytes: recording.bytes(),
        bundle: task_bundle.dir().display().to_string(),
    })
}

/// How long a viewer started for the extension serves without being asked anything before it stops: the
/// person who clicked "View" has long gone by then, and nobody is left to stop it.
const VIEWER_IDLE_SECONDS: u64 = 15 * 60;

/// Starts `trace-host view` on the task in a process of its own, and answers with the URL it prints. The
/// host Chrome started for this request ends once it has answered (Chrome ends it), so the viewer runs in
/// a process group of its own, which outlives it, and stops once idle ([`VIEWER_IDLE_SECONDS`]). Its URL,
/// which holds the token, travels on the pipe, never on a command line.
fn start_viewer(data: &DataDir, task_id: &TaskId) -> Result<Answer> {
    use std::io::BufRead;
    anyhow::ensure!(data.capture(task_id).exists(), "no recording {task_id} in {}", data.root().display());
    let program = std::env::current_exe().context("where trace-host is")?;
    let mut command = std::process::Command::new(program);
    command
        .arg("--data")
        .arg(data.root())
        .args(["view", task_id.as_str(), "--stop-when-idle", &VIEWER_IDLE_SECONDS.to_string()])
        .stdin(std::process::Stdio::null())
        .stdout(std::process::Stdio::piped())
        .stderr(std::process::Stdio::null());
    #[cfg(unix)]
    std::os::unix::process::CommandExt::process_group(&mut command, 0);
    let mut viewer = command.spawn().context("cannot start trace-host view")?;
    let mut line = String::new();
    let stdout = viewer.stdout.take().context("the viewer's output")?;
    std::io::BufReader::new(stdout).read_line(&mut line).context("the viewer's first line")?;
    let url = line.split_whitespace().find(|word| word.starts_with("http://"));
    let Some(url) = url else {
        let ended = viewer.try_wait().ok().flatten();
        bail!(
            "the viewer did not start (it said {:?}{})",
            line.trim(),
            ended.map_or(String::new(), |s| format!(", {s}"))
        )
    };
    // Not waited for: it serves on after this host has answered, and its parent's end hands it to init.
    drop(viewer);
    Ok(Answer::Viewer { url: url.to_owned() })
}

fn review(data: &DataDir, task_id: &TaskId) -> Result<ReviewSheet> {
    Ok(review_sheet(task_id, &open_recording(data, task_id)?))
}

fn review_sheet(task_id: &TaskId, recording: &Recording) -> ReviewSheet {
    let task = &recording.manifest.task;
    let mut sheet = ReviewSheet {
        task_id: task_id.clone(),
        source: task.source.clone(),
        task_type: task.task_type,
        description: task.description.clone(),
        website: task.website.clone(),
        answer: task.answer.clone(),
        steps: (0..recording.steps.len())
            .map(|index| ReviewStep {
                index,
                text: step_in_words(&recording.steps[index]),
                has_thumbnail: step_screenshot(recording, index).is_some(),
            })
            .collect(),
        steps_left_out: 0,
        credentials: recording
            .credentials
            .iter()
            .map(|credential| ReviewCredential {
                placeholder: credential.placeholder(),
                site: credential.site.clone(),
                field: credential.field.clone(),
                characters: credential.value.chars().count(),
            })
            .collect(),
        checkpoints: recording
            .checkpoints
            .iter()
            .flatten()
            .map(|(checkpoint, _)| format!("{}: {}", checkpoint.reason, predicate_in_words(&checkpoint.predicate)))
            .collect(),
    };
    while sheet.steps.len() > 1 && answer_size(&Answer::Review(sheet.clone())) > ANSWER_BUDGET_BYTES {
        let keep = sheet.steps.len() / 2;
        sheet.steps_left_out += sheet.steps.len() - keep;
        sheet.steps.truncate(keep);
    }
    sheet
}

/// The screenshot that shows step `index`: the one taken for its result, else the page before it.
fn step_screenshot(recording: &Recording, index: usize) -> Option<&str> {
    recording.steps[index]
        .screenshot
        .as_deref()
        .or_else(|| recording.screenshot_before(index).map(|before| before.shot.file.as_str()))
}

fn thumbnails(data: &DataDir, task_id: &TaskId, from: usize) -> Result<Answer> {
    let recording = open_recording(data, task_id)?;
    let mut thumbnails = Vec::new();
    let mut used = 0;
    for index in from..recording.steps.len() {
        let Some(file) = step_screenshot(&recording, index) else { continue };
        let Some(bytes) = recording.file(file)? else { continue };
        let thumbnail = match thumbnail(index, &bytes) {
            Ok(thumbnail) => thumbnail,
            Err(error) => {
                tracing::warn!(file, "no thumbnail: {error:#}");
                continue;
            }
        };
        // Each thumbnail costs its base64 and a few dozen bytes of JSON.
        let cost = thumbnail.jpeg.len() + 64;
        if used + cost > ANSWER_BUDGET_BYTES && !thumbnails.is_empty() {
            return Ok(Answer::Thumbnails { task_id: task_id.clone(), thumbnails, next: Some(index) });
        }
        used += cost;
        thumbnails.push(thumbnail);
    }
    Ok(Answer::Thumbnails { task_id: task_id.clone(), thumbnails, next: None })
}

fn thumbnail(step: usize, screenshot: &[u8]) -> Result<Thumbnail> {
    let image = image::load_from_memory(screenshot).context("the screenshot is not an image")?;
    let small = image.thumbnail(THUMBNAIL_WIDTH, THUMBNAIL_HEIGHT).to_rgb8();
    let mut jpeg = Cursor::new(Vec::new());
    image::codecs::jpeg::JpegEncoder::new_with_quality(&mut jpeg, THUMBNAIL_QUALITY).encode_image(&small)?;
    Ok(Thumbnail {
        step,
        width: small.width(),
        height: small.height(),
        jpeg: base64::engine::general_purpose::STANDARD.encode(jpeg.into_inner()),
    })
}

/// Saves the person's description and answer, then writes the bundle and its derived files again so
/// that everything made from it says the same.
fn annotate(data: &DataDir, task_id: &TaskId, description: &str, answer: Option<&str>) -> Result<Answer> {
    let description = description.trim();
    let answer = answer.map(str::trim).filter(|answer| !answer.is_empty());
    if description.is_empty() {
        bail!("the description cannot be empty");
    }
    let store = TaskStore::open(data)?;
    let task_bundle = store.bundle_for(task_id, Purpose::Annotate)?;
    if task_bundle.task().task_type == TaskType::InformationRetrieval && answer.is_none() {
        bail!("an information retrieval task needs its answer");
    }
    task_bundle.set_description_and_answer(description, answer)?;
    task_bundle.finalize_again()?;
    process::process_task_bundle(&task_bundle, &process::ProcessOptions::without_audit())?;
    Ok(Answer::Done)
}

/// The person says the credential `placeholder` stands for is no secret: every input the trajectory
/// replaced by it is recorded as plain typing from now on (its action no longer flagged a credential),
/// then the bundle is written again and processed. Answers the review as it now is.
fn not_a_secret(data: &DataDir, task_id: &TaskId, placeholder: &str) -> Result<Answer> {
    let store = TaskStore::open(data)?;
    let task_bundle = store.bundle_for(task_id, Purpose::Correct)?;
    let mut events = Vec::new();
    task_bundle.for_each_event(|json| {
        events.push(serde_json::from_str::<EventRecord>(json)?);
        Ok(())
    })?;
    let derived = trajectory::derive(task_id.clone(), &events, task_bundle.task().answer.as_deref());
    // Only a credential's whole placeholder: any text contains an empty one, and every credential's
    // contains `{{credentials.`, which would unflag them all.
    if !derived.credentials.iter().any(|credential| credential.placeholder() == placeholder) {
        bail!("{task_id} has no credential {placeholder:?}");
    }
    let replaced: BTreeSet<u64> = derived
        .trajectory
        .tool_calls
        .iter()
        .filter(|call| matches!(&call.action, ToolAction::Input { text } if text.contains(placeholder)))
        .flat_map(|call| call.event_ids.iter().copied())
        .collect();
    let mut unflagged = Vec::new();
    for mut record in events.into_iter().filter(|record| replaced.contains(&record.id)) {
        if let EventKind::Action(action) = &mut record.event.kind
            && action.credential
        {
            action.credential = false;
            unflagged.push(record);
        }
    }
    if unflagged.is_empty() {
        bail!("{task_id} has no credential {placeholder}");
    }
    task_bundle.rewrite_events(&unflagged)?;
    tracing::info!(task = %task_id, placeholder, unflagged = unflagged.len(), "a credential the person says is no secret");
    task_bundle.finalize_again()?;
    process::process_task_bundle(&task_bundle, &process::ProcessOptions::without_audit())?;
    Ok(Answer::Review(review_sheet(task_id, &Recording::open(task_bundle.dir())?)))
}

/// Deletes a stopped recording, leaving its row as the tombstone a discarded recording leaves.
fn discard(data: &DataDir, task_id: &TaskId) -> Result<Answer> {
    TaskStore::open(data)?.discard(task_id)?;
    Ok(Answer::Done)
}

/// The bytes `answer` takes in its message.
pub fn answer_size(answer: &Answer) -> usize {
    serde_json::to_vec(answer).map_or(usize::MAX, |bytes| bytes.len())
}

#[cfg(test)]
mod tests {
    use trace_manifest::campaign::{JourneySource, JourneyStep};

    use super::*;

    #[test]
    fn a_heavy_browsers_journeys_answer_with_the_newest_that_fit() {
        // 3,000 journeys of three long-URL visits, about 4 MB, shuffled in time: the answer keeps the newest.
        let journey = |index: u64| {
            let minute = (index * 7919) % 3000;
            let step = |visit: u64| JourneyStep {
                visit_id: index * 3 + visit,
                url: format!("https://docs.example/{index}/{visit}?q={}", "long-query-".repeat(30)),
                title: format!("Page {visit} of journey {index}"),
                time: format!("2026-11-{:02}T{:02}:{:02}:00Z", 1 + minute / 1440, minute / 60 % 24, minute % 60),
            };
            Journey { id: format!("j{index}"), grouped_by: JourneySource::Chrome, steps: (0..3).map(step).collect() }
        };
        let all: Vec<Journey> = (0..3000).map(journey).collect();
        let (kept, left_out) = newest_within_budget(all.clone());
        assert!(left_out > 0 && kept.len() + left_out == all.len());
        let answer = Answer::Journeys { journeys: Some(kept.clone()), older_left_out: left_out };
        assert!(answer_size(&answer) <= MAX_OUTBOUND_BYTES, "{} bytes", answer_size(&answer));
        let started = |journey: &Journey| journey.steps[0].time.clone();
        let oldest_kept = kept.iter().map(started).min().unwrap();
        let left: Vec<&Journey> = all.iter().filter(|journey| !kept.contains(journey)).collect();
        assert!(left.iter().all(|journey| started(journey) <= oldest_kept), "only older ones are left out");
        let order: Vec<usize> = kept.iter().map(|journey| all.iter().position(|j| j == journey).unwrap()).collect();
        assert!(order.windows(2).all(|pair| pair[0] < pair[1]), "the journeys keep their order");

        let few: Vec<Journey> = all[..10].to_vec();
        assert_eq!(newest_within_budget(few.clone()), (few, 0));
    }
}
