//! Submissions to a campaign (`trace-host submit`, `trace-host outbox`): a recording exported redacted
//! (the export's own search for secrets must pass), with its annotation, put into the campaign's store
//! under keys that do not change however often they are sent, and read back to check what landed.
//!
//! Everything goes through an outbox on disk, `<data>/outbox/<campaign>--<pseudonym>--<task>/`: the zip,
//! the annotation and `outbox.json` (each file's key, size and SHA-256, whether it landed, the attempts and
//! the last error). A submission enters the outbox whole (made under a partial name, then renamed), so a
//! crash leaves all of it or none. Sending puts each file not yet landed, reads it back, and marks it
//! landed only when size and hash agree, retrying with backoff; what still fails stays in the outbox with
//! its error and goes with the next send (offline now, after a restart, a killed host mid-upload: a put
//! under the same key replaces what a cut one left). A sent submission's folder moves to `outbox/sent/`,
//! its zip removed and its `outbox.json` kept as the receipt. Chrome starts a host per page request, so
//! several may work on the outbox at once: each submission is locked while it is replaced or sent.

use std::path::{Path, PathBuf};
use std::time::Duration;

use anyhow::{Context, Result, bail};
use trace_bundle::archive::sha256_hex;
use trace_manifest::campaign::{
    Campaign, JOURNEYS_FILE, JOURNEYS_SUBMISSION, JourneyAnnotation, JourneySubmission, OutboxEntry, OutboxFile,
    TaskAnnotation, check_id,
};
use trace_manifest::task::TaskId;
use trace_manifest::time_fmt::{now_ms, rfc3339_from_millis};
use trace_manifest::wire::AnnotatedJourney;
use trace_store::{Location, PutPayload};

use crate::export::{self, ExportOptions};
use crate::folder_lock::FolderLock;
use crate::paths::DataDir;
use crate::redact::SuspectDecisions;
use crate::tasks::TaskStore;
use trace_store::atomic;

const OUTBOX_DIR: &str = "outbox";
const SENT_DIR: &str = "sent";
const ENTRY_FILE: &str = "outbox.json";
/// Each submission's lock, `.locks/<folder>/` (see [`lock_submission`]).
const LOCKS_DIR: &str = ".locks";
/// What the outbox says of a submission another process holds.
const BEING_SENT_ELSEWHERE: &str = "being sent by another trace-host";
/// How long submitting waits for another process that is sending the same submission.
const QUEUE_WAIT: Duration = Duration::from_secs(60);
/// Where submissions go when the campaign names no destination: under the data directory.
const DEFAULT_DESTINATION_DIR: &str = "submissions";
const PSEUDONYM_FILE: &str = "pseudonym";
/// The journeys submitted so far, one file per campaign and pseudonym.
const JOURNEYS_DIR: &str = "journeys";

/// The waits between attempts to put a file: three tries in all within one send.
pub const BACKOFF: [Duration; 2] = [Duration::from_secs(1), Duration::from_secs(4)];

/// This data directory's pseudonym, made once at random: the only name a campaign knows its person by.
pub fn pseudonym(data: &DataDir) -> Result<String> {
    let path = data.root().join(PSEUDONYM_FILE);
    if let Ok(existing) = std::fs::read_to_string(&path) {
        let existing = existing.trim().to_owned();
        check_id("the pseudonym", &existing).map_err(|error| anyhow::anyhow!("{}: {error}", path.display()))?;
        return Ok(existing);
    }
    let mut bytes = [0u8; 8];
    getrandom::fill(&mut bytes).map_err(|error| anyhow::anyhow!("no randomness for a pseudonym: {error}"))?;
    let made = format!("p-{}", hex::encode(bytes));
    atomic::write(&path, |out| Ok(out.write_all(made.as_bytes())?))?;
    Ok(made)
}

/// Puts the recording `task_id`, as `campaign_task` of `campaign`, into the outbox: exported redacted,
/// annotated. Returns its folder. A submission of the same task waiting already is replaced.
pub fn enqueue(
    store: &TaskStore,
    campaign: &Campaign,
    campaign_task: &str,
    task_id: &TaskId,
    pseudonym: &str,
    suspects: &SuspectDecisions,
) -> Result<PathBuf> {
    check_id("the pseudonym", pseudonym)?;
    let Some(wanted) = campaign.task(campaign_task) else {
        bail!("the campaign {} has no task {campaign_task:?}", campaign.id);
    };
    let data = store.data();
    let task = store.task(task_id)?.with_context(|| format!("no task {task_id}"))?;
    if task.task_type != wanted.task_type {
        bail!(
            "{task_id} is a {} task; the campaign's {campaign_task} is {}",
            task.task_type.as_str(),
            wanted.task_type.as_str()
        );
    }
    let zip_file = format!("{campaign_task}.zip");
    let annotation_file = format!("{campaign_task}.annotation.json");
    // The annotation goes last: a coordinator who sees it can count on the zip being there.
    let files = [zip_file.as_str(), annotation_file.as_str()];
    queue(data, campaign, pseudonym, campaign_task, &files, |folder| {
        let zip = folder.join(&zip_file);
        let options = ExportOptions { redact: true, suspects: suspects.clone(), ..ExportOptions::default() };
        export::export(store, task_id, &zip, &options).context("the recording cannot be exported redacted")?;
        let bytes = std::fs::read(&zip)?;
        let annotation = TaskAnnotation {
            campaign: campaign.id.clone(),
            campaign_task: campaign_task.to_owned(),
            pseudonym: pseudonym.to_owned(),
            task_id: task_id.clone(),
            description: task.description.clone(),
            task_type: task.task_type,
            answer: task.answer.clone(),
            bundle_size: bytes.len() as u64,
            bundle_sha256: sha256_hex(&bytes),
            submitted_at: rfc3339_from_millis(now_ms()),
        };
        atomic::write_json(&folder.join(&annotation_file), &annotation)?;
        Ok(())
    })
}

/// Puts the person's annotated journeys for `campaign` into the outbox, with those they submitted before:
/// one `journeys.jsonl` per campaign and pseudonym, a journey submitted again replacing its earlier line.
/// Each annotation is checked against its journey, and every URL cleaned again by the redaction's rules.
pub fn enqueue_journeys(
    data: &DataDir,
    campaign: &Campaign,
    pseudonym: &str,
    journeys: &[AnnotatedJourney],
) -> Result<PathBuf> {
    check_id("the pseudonym", pseudonym)?;
    if !campaign.journeys {
        bail!("the campaign {} does not ask for journeys", campaign.id);
    }
    let kept = data.root().join(JOURNEYS_DIR).join(format!("{}--{pseudonym}.jsonl", campaign.id));
    let mut lines: Vec<JourneySubmission> = match std::fs::read_to_string(&kept) {
        Ok(text) => text
            .lines()
            .filter(|line| !line.trim().is_empty())
            .map(serde_json::from_str)
            .collect::<Result<_, _>>()
            .with_context(|| format!("{} does not parse", kept.display()))?,
        Err(error) if error.kind() == std::io::ErrorKind::NotFound => Vec::new(),
        // The store's file is replaced whole by this one: never send it without the earlier journeys.
        Err(error) => return Err(error).with_context(|| format!("cannot read {}", kept.display())),
    };
    for AnnotatedJourney { journey, annotation } in journeys {
        annotation.check(journey).map_err(|error| anyhow::anyhow!("journey {}: {error}", journey.id))?;
        let mut journey = journey.clone();
        journey.steps.retain(|step| !annotation.dropped.contains(&step.visit_id));
        for step in &mut journey.steps {
            step.url = trace_analysis::journeys::clean_url(&step.url);
        }
        let annotation = JourneyAnnotation {
            key_url: trace_analysis::journeys::clean_url(&annotation.key_url),
            dropped: Vec::new(),
            ..annotation.clone()
        };
        lines.retain(|line| line.journey.id != journey.id);
        lines.push(JourneySubmission {
            campaign: campaign.id.clone(),
            pseudonym: pseudonym.to_owned(),
            journey,
            annotation,
            submitted_at: rfc3339_from_millis(now_ms()),
        });
    }
    let mut text = String::new();
    for line in &lines {
        text.push_str(&serde_json::to_string(line)?);
        text.push('\n');
    }
    std::fs::create_dir_all(kept.parent().expect("in a folder"))?;
    atomic::write(&kept, |out| Ok(out.write_all(text.as_bytes())?))?;
    queue(data, campaign, pseudonym, JOURNEYS_SUBMISSION, &[JOURNEYS_FILE], |folder| {
        std::fs::copy(&kept, folder.join(JOURNEYS_FILE))?;
        Ok(())
    })
}

/// Puts `pseudonym`'s submission `what` (a campaign task, or their journeys) into the outbox whole, as
/// `<campaign>/<pseudonym>/<what>`: `write` makes `files` in a partial folder, each sent under the
/// campaign's key for it, in the order given. A waiting submission of the same name is replaced.
fn queue(
    data: &DataDir,
    campaign: &Campaign,
    pseudonym: &str,
    what: &str,
    files: &[&str],
    write: impl FnOnce(&Path) -> Result<()>,
) -> Result<PathBuf> {
    let name = format!("{}/{pseudonym}/{what}", campaign.id);
    let folder_name = format!("{}--{pseudonym}--{what}", campaign.id);
    let outbox = data.root().join(OUTBOX_DIR);
    std::fs::create_dir_all(&outbox).with_context(|| format!("cannot create {}", outbox.display()))?;
    let _lock = lock_submission(&outbox, &folder_name, QUEUE_WAIT)?
        .with_context(|| format!("another trace-host is sending {name} now: submit it again once that is done"))?;
    let partial = outbox.join(format!(".{folder_name}.partial"));
    let _ = std::fs::remove_dir_all(&partial);
    std::fs::create_dir(&partial).with_context(|| format!("cannot create {}", partial.display()))?;
    write(&partial)?;
    let mut outbox_files = Vec::new();
    for file in files {
        let bytes = std::fs::read(partial.join(file)).with_context(|| format!("{file} was not written"))?;
        outbox_files.push(OutboxFile {
            key: campaign.submission_key(pseudonym, file),
            file: (*file).to_owned(),
            size: bytes.len() as u64,
            sha256: sha256_hex(&bytes),
            landed: false,
        });
    }
    let entry = OutboxEntry {
        name: name.clone(),
        destination: campaign.destination.clone(),
        files: outbox_files,
        attempts: 0,
        last_error: None,
        queued_at: rfc3339_from_millis(now_ms()),
    };
    atomic::write_json(&partial.join(ENTRY_FILE), &entry)?;
    let folder = outbox.join(&folder_name);
    let _ = std::fs::remove_dir_all(&folder);
    std::fs::rename(&partial, &folder).with_context(|| format!("cannot put {name} into the outbox"))?;
    Ok(folder)
}

/// Takes the lock of the submission in `outbox`'s folder `folder_name`, waiting up to `wait` for another
/// process to let go of it: several trace-hosts may work on one outbox at once (the popup's Send beside a
/// page's Submit), and a submission must have one writer, or a send could move a newer submission to
/// `sent/` as if it had landed. The lock files live apart (`.locks/`), since the folder itself is replaced
/// and moved.
fn lock_submission(outbox: &Path, folder_name: &str, wait: Duration) -> Result<Option<FolderLock>> {
    let dir = outbox.join(LOCKS_DIR).join(folder_name);
    FolderLock::acquire(&dir, wait).with_context(|| format!("cannot lock {}", dir.display()))
}

/// The submissions in the outbox: waiting ones, then sent ones, each in name order.
pub fn outbox(data: &DataDir) -> Result<Vec<(PathBuf, OutboxEntry)>> {
    let root = data.root().join(OUTBOX_DIR);
    let mut found = entries_in(&root)?;
    for (folder, entry) in &mut found {
        if folder.file_name().is_some_and(|name| FolderLock::is_held(&root.join(LOCKS_DIR).join(name))) {
            entry.last_error = Some(BEING_SENT_ELSEWHERE.to_owned());
        }
    }
    found.extend(entries_in(&root.join(SENT_DIR))?);
    Ok(found)
}

fn entries_in(dir: &Path) -> Result<Vec<(PathBuf, OutboxEntry)>> {
    let Ok(listing) = std::fs::read_dir(dir) else { return Ok(Vec::new()) };
    let mut found = Vec::new();
    for item in listing {
        let folder = item?.path();
        let name = folder.file_name().map(|name| name.to_string_lossy().into_owned()).unwrap_or_default();
        if name.starts_with('.') || name == SENT_DIR {
            continue;
        }
        if let Some(entry) = read_entry(&folder)? {
            found.push((folder, entry));
        }
    }
    found.sort_by(|a, b| a.1.name.cmp(&b.1.name));
    Ok(found)
}

/// The entry of the submission in `folder`; `None` when there is none (the folder is not a submission, or
/// it was moved on meanwhile).
fn read_entry(folder: &Path) -> Result<Option<OutboxEntry>> {
    let path = folder.join(ENTRY_FILE);
    match std::fs::read(&path) {
        Ok(bytes) => {
            serde_json::from_slice(&bytes).map(Some).with_context(|| format!("{} does not parse", path.display()))
        }
        Err(error) if matches!(error.kind(), std::io::ErrorKind::NotFound | std::io::ErrorKind::NotADirectory) => {
            Ok(None)
        }
        Err(error) => Err(error).with_context(|| format!("cannot read {}", path.display())),
    }
}

/// Sends every waiting submission, waiting `backoff` between a file's attempts. Returns each one's entry
/// after the attempt, sent or still waiting with its error.
pub async fn send(data: &DataDir, backoff: &[Duration]) -> Result<Vec<OutboxEntry>> {
    let mut reports = Vec::new();
    let outbox = data.root().join(OUTBOX_DIR);
    for (folder, listed) in entries_in(&outbox)? {
        let folder_name = folder.file_name().context("a folder name")?.to_string_lossy().into_owned();
        let Some(_lock) = lock_submission(&outbox, &folder_name, Duration::ZERO)? else {
            reports.push(OutboxEntry { last_error: Some(BEING_SENT_ELSEWHERE.to_owned()), ..listed });
            continue;
        };
        // Read again under the lock: another process may have sent it, or queued a newer one, meanwhile.
        let Some(mut entry) = read_entry(&folder)? else { continue };
        entry.attempts += 1;
        entry.last_error = match send_one(data, &folder, &mut entry, backoff).await {
            Ok(()) => None,
            Err(error) => Some(format!("{error:#}")),
        };
        atomic::write_json(&folder.join(ENTRY_FILE), &entry)?;
        if entry.is_sent() {
            let sent = data.root().join(OUTBOX_DIR).join(SENT_DIR);
            std::fs::create_dir_all(&sent)?;
            for file in &entry.files {
                if file.file.ends_with(".zip") {
                    let _ = std::fs::remove_file(folder.join(&file.file));
                }
            }
            let receipt = sent.join(folder.file_name().context("a folder name")?);
            let _ = std::fs::remove_dir_all(&receipt);
            std::fs::rename(&folder, &receipt)?;
        }
        reports.push(entry);
    }
    Ok(reports)
}

/// Puts the files of one submission that have not landed, in order, each read back before the next.
async fn send_one(data: &DataDir, folder: &Path, entry: &mut OutboxEntry, backoff: &[Duration]) -> Result<()> {
    let destination = match &entry.destination {
        Some(destination) => destination.clone(),
        None => data.root().join(DEFAULT_DESTINATION_DIR).to_string_lossy().into_owned(),
    };
    let location = Location::parse_impatient(destination.strip_prefix("file://").unwrap_or(&destination))?;
    for index in 0..entry.files.len() {
        if entry.files[index].landed {
            continue;
        }
        let file = entry.files[index].clone();
        let bytes = std::fs::read(folder.join(&file.file)).with_context(|| format!("{} is missing", file.file))?;
        anyhow::ensure!(
            bytes.len() as u64 == file.size && sha256_hex(&bytes) == file.sha256,
            "{} changed in the outbox since it was queued",
            file.file
        );
        // Shared by every attempt, not copied.
        let payload = PutPayload::from(bytes);
        let mut attempt = 0;
        loop {
            match put_and_check(&location, &file, payload.clone()).await {
                Ok(()) => break,
                Err(error) if attempt < backoff.len() => {
                    tracing::info!("sending {} failed, trying again: {error:#}", file.key);
                    tokio::time::sleep(backoff[attempt]).await;
                    attempt += 1;
                }
                Err(error) => return Err(error),
            }
        }
        entry.files[index].landed = true;
        atomic::write_json(&folder.join(ENTRY_FILE), &*entry)?;
    }
    Ok(())
}

async fn put_and_check(location: &Location, file: &OutboxFile, payload: PutPayload) -> Result<()> {
    location.put_bytes(&file.key, payload).await?;
    match location.read_back(&file.key).await? {
        Some((size, sha256)) if size == file.size && sha256 == file.sha256 => Ok(()),
        Some((size, _)) => bail!("{} landed as {size} bytes that differ from the {} sent", file.key, file.size),
        None => bail!("{} is not where it was put", file.key),
    }
}
