//! Applies the extension's messages to the data directory: the sequence rules of the wire protocol, events
//! into `tasks.db`, bodies streamed chunk by chunk into content-addressed files, screenshots and DOM
//! snapshots into files, and the task's life cycle (start, stop, discard, interrupted).
//!
//! Messages are applied in batches, one SQLite transaction per batch and a savepoint per message, so that
//! one bad message is rejected alone while the batch's acknowledgement costs a single commit. Nothing is
//! acknowledged before its transaction commits.
//!
//! Files are never half-visible. A body's chunks go to `.parts/<hash of body id>` and are written at the
//! committed length (whatever a crash left past it is cut off); screenshots and snapshots are staged in
//! `.parts/` too. Only after the commit are they moved to their place in the bundle, and the task store
//! finishes any move a crash interrupted when the task is taken or finalized.
//!
//! Storage is the task store's ([`crate::tasks`]): this module writes through a [`WriteBatch`] and takes,
//! finalizes and lets go of tasks through the [`TaskStore`], and knows nothing of SQL or lock files.

use std::collections::{BTreeMap, HashMap, HashSet};
use std::fs::{File, OpenOptions};
use std::io::{Read, Seek, SeekFrom, Write};
use std::path::{Path, PathBuf};
use std::time::Duration;

use anyhow::Context;
use sha2::{Digest, Sha256};
use trace_manifest::bundle;
use trace_manifest::event::{
    BodyPart, BodyStored, DomSnapshotStored, Event, EventKind, EventRecord, ImageFormat, ScreenshotStored, Viewport,
};
use trace_manifest::task::{TaskId, TaskStart, TaskStatus, TaskType};
use trace_manifest::time_fmt::now_ms;
use trace_manifest::wire::{CLIENT_MESSAGE_TYPES, ClientBody, ClientMessage, ErrorCode, HostMessage, TaskProgress};

use crate::paths::DataDir;
use crate::tasks::{self, TaskLock, TaskRow, TaskStore, WriteBatch, body_part_path, move_into_place, staged_path};

/// A message decoded and ready to apply: base64 payloads are already bytes.
#[derive(Debug)]
pub struct Incoming {
    pub seq: u64,
    pub body: ClientBody,
    /// The decoded `data` of a body chunk or screenshot; empty otherwise.
    pub payload: Vec<u8>,
}

/// A message that cannot be applied, with what could be read of it.
#[derive(Debug, Clone, PartialEq)]
pub struct Rejected {
    pub seq: Option<u64>,
    pub task_id: Option<TaskId>,
    pub code: ErrorCode,
    pub message: String,
}

impl Rejected {
    fn new(code: ErrorCode, message: impl Into<String>) -> Rejected {
        Rejected { seq: None, task_id: None, code, message: message.into() }
    }

    pub fn into_reply(self) -> HostMessage {
        self.into_reply_expecting(None)
    }

    fn into_reply_expecting(self, expected_seq: Option<u64>) -> HostMessage {
        HostMessage::Error {
            seq: self.seq,
            task_id: self.task_id,
            code: self.code,
            message: self.message,
            expected_seq,
        }
    }
}

/// Parses one frame and decodes its payload. The error says as precisely as possible what is wrong.
pub fn decode(frame: &[u8]) -> Result<Incoming, Rejected> {
    let message = serde_json::from_slice::<ClientMessage>(frame).map_err(|error| classify(frame, error))?;
    let ClientMessage { seq, mut body } = message;
    let task_id = body.task_id().cloned();
    let reject = |code, message: String| Rejected { seq: Some(seq), task_id: task_id.clone(), code, message };
    let payload = match &mut body {
        ClientBody::BodyChunk { data, .. } => decode_base64(data).map_err(|m| reject(ErrorCode::InvalidMessage, m))?,
        ClientBody::Screenshot { data, format, .. } => {
            let bytes = decode_base64(data).map_err(|m| reject(ErrorCode::InvalidMessage, m))?;
            if !image_matches(*format, &bytes) {
                return Err(reject(ErrorCode::InvalidMessage, format!("screenshot data is not a {format:?} image")));
            }
            bytes
        }
        _ => Vec::new(),
    };
    Ok(Incoming { seq, body, payload })
}

/// Body chunks are base64 in JSON, so decoding is a large share of ingest time: the SIMD decoder is three
/// times faster than a scalar one here.
fn decode_base64(data: &mut String) -> Result<Vec<u8>, String> {
    let text = std::mem::take(data);
    base64_simd::STANDARD.decode_to_vec(text.as_bytes()).map_err(|e| format!("data is not valid base64: {e}"))
}

fn image_matches(format: ImageFormat, bytes: &[u8]) -> bool {
    match format {
        ImageFormat::Png => bytes.starts_with(b"\x89PNG\r\n\x1a\n"),
        ImageFormat::Jpeg => bytes.starts_with(&[0xff, 0xd8, 0xff]),
        ImageFormat::Webp => bytes.len() >= 12 && bytes.starts_with(b"RIFF") && &bytes[8..12] == b"WEBP",
    }
}

/// The viewport a screenshot shows: the page's report of it (`reported`), unless the picture itself is of
/// another size, which is then the truth (a window whose browser bars or an infobar cover part of what the
/// page believes it has). Replay shows each step at its screenshot's viewport, so that the pictures compare.
fn screen_viewport(reported: Option<Viewport>, picture: &[u8]) -> Option<Viewport> {
    let reader = image::ImageReader::new(std::io::Cursor::new(picture)).with_guessed_format().ok()?;
    let Ok((pixel_width, pixel_height)) = reader.into_dimensions() else { return reported };
    let scale = reported.map_or(1.0, |viewport| viewport.device_scale_factor).max(f64::MIN_POSITIVE);
    let shown = Viewport {
        width: (f64::from(pixel_width) / scale).round() as u32,
        height: (f64::from(pixel_height) / scale).round() as u32,
        device_scale_factor: scale,
    };
    if reported.is_some_and(|reported| (reported.width, reported.height) != (shown.width, shown.height)) {
        tracing::debug!("a screenshot shows {shown:?} where its page reported {reported:?}: the screenshot's kept");
    }
    Some(shown)
}

fn classify(frame: &[u8], error: serde_json::Error) -> Rejected {
    let Ok(value) = serde_json::from_slice::<serde_json::Value>(frame) else {
        return Rejected::new(ErrorCode::InvalidJson, format!("message is not valid JSON: {error}"));
    };
    let seq = value.get("seq").and_then(|v| v.as_u64());
    let task_id = value.get("task_id").and_then(|v| v.as_str()).and_then(|s| TaskId::try_from(s.to_owned()).ok());
    let kind = value.get("type").and_then(|v| v.as_str());
    let (code, message) = match kind {
        Some(kind) if CLIENT_MESSAGE_TYPES.contains(&kind) => {
            (ErrorCode::InvalidMessage, format!("invalid {kind} message: {error}"))
        }
        Some(kind) => (
            ErrorCode::UnknownMessageType,
            format!("unknown message type {kind:?}; expected one of {}", CLIENT_MESSAGE_TYPES.join(", ")),
        ),
        None => (ErrorCode::UnknownMessageType, "message has no \"type\"".to_owned()),
    };
    Rejected { seq, task_id, code, message }
}

/// How the ingestor behaves.
#[derive(Debug, Clone)]
pub struct Config {
    /// How long to wait for another host process to let go of a task before answering `task_busy`.
    pub lock_wait: Duration,
}

impl Default for Config {
    fn default() -> Config {
        Config { lock_wait: Duration::from_secs(10) }
    }
}

/// Owns the task store and the files being written for the tasks this process records.
pub struct Ingestor {
    store: TaskStore,
    state: State,
}

struct State {
    data: DataDir,
    config: Config,
    /// Tasks this process writes, with the lock that says so to other processes.
    owned: HashMap<TaskId, TaskLock>,
    /// Tasks of the current batch whose lock another process holds.
    busy: HashSet<TaskId>,
    /// Bodies being streamed, by task and body id.
    open_bodies: HashMap<(TaskId, String), OpenBody>,
}

/// At most this many part files of unfinished bodies are open at once, whatever the number of bodies in
/// flight (a page with thousands of streams, or a peer that starts bodies and never ends them, would
/// otherwise run the process out of file descriptors, and then every write, the bundle's included,
/// fails). A body whose file was closed is reopened, at its length, when its next chunk comes.
const MAX_OPEN_BODY_FILES: usize = 64;

struct OpenBody {
    /// `None` while closed to stay within [`MAX_OPEN_BODY_FILES`].
    file: Option<File>,
    path: PathBuf,
    hasher: Sha256,
    size: u64,
}

/// Work that must wait until the batch has committed.
enum AfterCommit {
    /// Move a staged file to its place; if the place is taken (a body seen before), drop the staged copy.
    Move {
        from: PathBuf,
        to: PathBuf,
    },
    Finalize(TaskId),
    Discard(TaskId),
}

/// Why a message was not applied.
enum Failure {
    /// The message is wrong; its seq is consumed so that the stream goes on.
    Content(Rejected),
    /// The message was not stored (storage failed, or the task is busy): nothing is consumed, so the
    /// extension resends it.
    NotApplied(Rejected),
}

impl From<anyhow::Error> for Failure {
    fn from(error: anyhow::Error) -> Failure {
        Failure::NotApplied(Rejected::new(ErrorCode::Storage, format!("{error:#}")))
    }
}

impl From<rusqlite::Error> for Failure {
    fn from(error: rusqlite::Error) -> Failure {
        Failure::from(anyhow::Error::from(error))
    }
}

impl From<std::io::Error> for Failure {
    fn from(error: std::io::Error) -> Failure {
        Failure::from(anyhow::Error::from(error))
    }
}

fn content(code: ErrorCode, message: impl Into<String>) -> Failure {
    Failure::Content(Rejected::new(code, message))
}

impl Ingestor {
    pub fn new(data: DataDir, config: Config) -> anyhow::Result<Ingestor> {
        let store = TaskStore::open_to_write(&data)?;
        Ok(Ingestor {
            store,
            state: State { data, config, owned: HashMap::new(), busy: HashSet::new(), open_bodies: HashMap::new() },
        })
    }

    /// The data directory the ingestor writes.
    pub fn data(&self) -> &DataDir {
        &self.state.data
    }

    /// Applies a batch and returns the replies: errors and answers in message order, then one `ack` per task
    /// touched, then `task_stopped` for tasks finalized.
    pub fn apply(&mut self, batch: Vec<Result<Incoming, Rejected>>) -> Vec<HostMessage> {
        let mut replies = Vec::new();
        let mut acks = BTreeMap::new();
        let mut after = Vec::new();
        self.state.lock_tasks(&self.store, &batch);
        let tx = match self.store.begin_batch() {
            Ok(tx) => tx,
            Err(error) => return storage_failure(&batch, &error.to_string()),
        };
        for item in &batch {
            match item {
                Ok(incoming) => self.state.apply_one(&tx, incoming, &mut replies, &mut acks, &mut after),
                Err(rejected) => self.state.consume_rejected(&tx, rejected.clone(), &mut replies, &mut acks),
            }
        }
        if let Err(error) = tx.commit() {
            // Whatever was written past the committed lengths is cut off when the bodies are reopened.
            self.state.open_bodies.clear();
            tracing::error!(%error, "commit failed; nothing of this batch is acknowledged");
            return storage_failure(&batch, &error.to_string());
        }
        replies.extend(acks.into_iter().map(|(task_id, seq)| HostMessage::Ack { task_id, seq }));
        for action in after {
            if let Some(reply) = self.state.after_commit(&self.store, action) {
                replies.push(reply);
            }
        }
        replies
    }

    /// Marks every task this process was recording as interrupted and lets go of them. Called when the port
    /// closes; a task whose host was killed is found interrupted when a task store next opens instead.
    pub fn shutdown(&mut self) -> anyhow::Result<()> {
        let owned: Vec<TaskId> = self.state.owned.keys().cloned().collect();
        for task_id in owned {
            if let Some(lock) = self.state.owned.get(&task_id)
                && self.store.interrupt(lock)?
            {
                tracing::info!(task = %task_id, "port closed during recording: task interrupted");
            }
            self.state.release(&task_id);
        }
        Ok(())
    }
}

fn storage_failure(batch: &[Result<Incoming, Rejected>], error: &str) -> Vec<HostMessage> {
    batch
        .iter()
        .filter_map(|item| item.as_ref().ok())
        .map(|incoming| HostMessage::Error {
            seq: Some(incoming.seq),
            task_id: incoming.body.task_id().cloned(),
            code: ErrorCode::Storage,
            message: format!("not stored, resend: {error}"),
            expected_seq: None,
        })
        .collect()
}

impl State {
    fn apply_one(
        &mut self,
        batch: &WriteBatch<'_>,
        incoming: &Incoming,
        replies: &mut Vec<HostMessage>,
        acks: &mut BTreeMap<TaskId, u64>,
        after: &mut Vec<AfterCommit>,
    ) {
        let seq = incoming.seq;
        let task_id = incoming.body.task_id().cloned();
        let result = match &incoming.body {
            ClientBody::Hello { task_id } => self.hello(batch, task_id.as_ref()).map(|reply| replies.push(reply)),
            ClientBody::StartTask(start) => self.start(batch, seq, start, acks),
            _ => self.apply_to_task(batch, incoming, acks, after),
        };
        let failure = match result {
            Ok(()) => return,
            Err(failure) => failure,
        };
        let (rejected, consumed) = match failure {
            Failure::Content(rejected) => (rejected, true),
            Failure::NotApplied(rejected) => (rejected, false),
        };
        let rejected = Rejected { seq: Some(seq), task_id: task_id.clone(), ..rejected };
        tracing::warn!(seq, task = ?task_id.as_ref().map(TaskId::as_str), code = ?rejected.code, "{}", rejected.message);
        let expected = (rejected.code == ErrorCode::SequenceGap)
            .then(|| task_id.as_ref().and_then(|id| batch.task(id).ok().flatten()).map_or(1, |task| task.last_seq + 1));
        if consumed && let Some(id) = &task_id {
            if let Err(error) = batch.set_last_seq(id, seq) {
                tracing::error!(%error, "cannot consume rejected message");
            } else {
                acks.insert(id.clone(), seq);
            }
        }
        replies.push(rejected.into_reply_expecting(expected));
    }

    fn hello(&self, batch: &WriteBatch<'_>, task_id: Option<&TaskId>) -> Result<HostMessage, Failure> {
        let task = match task_id {
            Some(id) => batch.task(id)?.map(|task| TaskProgress {
                task_id: task.id,
                status: task.status,
                acked_seq: task.last_seq,
            }),
            None => None,
        };
        Ok(HostMessage::Hello {
            host_version: env!("CARGO_PKG_VERSION").to_owned(),
            format_version: trace_manifest::FORMAT_VERSION,
            task,
        })
    }

    fn start(
        &mut self,
        batch: &WriteBatch<'_>,
        seq: u64,
        start: &TaskStart,
        acks: &mut BTreeMap<TaskId, u64>,
    ) -> Result<(), Failure> {
        if let Some(existing) = batch.task(&start.task_id)? {
            if seq <= existing.last_seq {
                acks.insert(existing.id, existing.last_seq);
                return Ok(());
            }
            return Err(Failure::NotApplied(Rejected::new(
                ErrorCode::TaskExists,
                format!("task {} already exists; choose a new task id", start.task_id),
            )));
        }
        if seq != 1 {
            return Err(Failure::NotApplied(Rejected::new(
                ErrorCode::SequenceGap,
                format!("a task's first message, start_task, must have seq 1, not {seq}"),
            )));
        }
        if !start.started_at.is_finite() {
            return Err(content(ErrorCode::InvalidMessage, "started_at must be a finite number"));
        }
        self.own(&start.task_id)?;
        batch.start_task(start, seq)?;
        tracing::info!(task = %start.task_id, website = %start.website, "task started");
        acks.insert(start.task_id.clone(), seq);
        Ok(())
    }

    fn apply_to_task(
        &mut self,
        batch: &WriteBatch<'_>,
        incoming: &Incoming,
        acks: &mut BTreeMap<TaskId, u64>,
        after: &mut Vec<AfterCommit>,
    ) -> Result<(), Failure> {
        let task_id = incoming.body.task_id().expect("every message but hello names its task");
        let seq = incoming.seq;
        let task = batch.task(task_id)?.ok_or_else(|| {
            Failure::NotApplied(Rejected::new(
                ErrorCode::UnknownTask,
                format!("no task {task_id}; send start_task first"),
            ))
        })?;
        if seq <= task.last_seq {
            acks.insert(task.id, task.last_seq); // a resend of something already committed
            return Ok(());
        }
        if seq > task.last_seq + 1 {
            return Err(Failure::NotApplied(Rejected::new(
                ErrorCode::SequenceGap,
                format!(
                    "expected seq {} for task {task_id}, got {seq}; resend from {}",
                    task.last_seq + 1,
                    task.last_seq + 1
                ),
            )));
        }
        if matches!(task.status, TaskStatus::Stopped | TaskStatus::Discarded) {
            return Err(Failure::NotApplied(Rejected::new(
                ErrorCode::TaskClosed,
                format!("task {task_id} is {} and takes no more data", task.status.as_str()),
            )));
        }
        self.own(task_id)?;
        if task.status == TaskStatus::Interrupted {
            batch.set_status(task_id, TaskStatus::Recording)?;
            tracing::info!(task = %task_id, "recording resumed");
        }
        // A savepoint per message: a rejected message leaves no trace, the rest of the batch stands.
        let mut staged = Vec::new();
        let result = batch.within_savepoint(|| {
            self.apply_content(batch, &task, incoming, &mut staged)
                .and_then(|()| batch.set_last_seq(task_id, seq).map_err(Failure::from))
        });
        match result {
            Ok(()) => {
                after.extend(staged);
                acks.insert(task_id.clone(), seq);
                Ok(())
            }
            Err(failure) => {
                if let ClientBody::BodyChunk { body_id, .. } = &incoming.body {
                    // Its file may hold bytes past the committed length: reopen (and cut) on the next chunk.
                    self.open_bodies.remove(&(task_id.clone(), body_id.clone()));
                }
                Err(failure)
            }
        }
    }

    fn apply_content(
        &mut self,
        batch: &WriteBatch<'_>,
        task: &TaskRow,
        incoming: &Incoming,
        after: &mut Vec<AfterCommit>,
    ) -> Result<(), Failure> {
        let task_id = &task.id;
        let seq = incoming.seq;
        match &incoming.body {
            ClientBody::Hello { .. } | ClientBody::StartTask(_) => unreachable!("handled before"),
            ClientBody::Events { events, .. } => {
                if let Some(event) = events.iter().find(|e| e.kind.is_host_written()) {
                    return Err(content(
                        ErrorCode::InvalidMessage,
                        format!(
                            "{} events are written by the host; send the data as its own message",
                            event.kind.name()
                        ),
                    ));
                }
                if events.iter().any(|e| !e.ts.is_finite()) {
                    return Err(content(ErrorCode::InvalidMessage, "event ts must be a finite number"));
                }
                for event in events {
                    let mut record = EventRecord { id: 0, event: event.clone() };
                    batch.append_event(task_id, seq, &mut record)?;
                }
            }
            ClientBody::BodyChunk { body_id, request_id, part, index, last, .. } => {
                self.body_chunk(
                    batch,
                    task_id,
                    seq,
                    body_id,
                    request_id,
                    *part,
                    *index,
                    *last,
                    &incoming.payload,
                    after,
                )?;
            }
            ClientBody::Screenshot { ts, tab_id, format, reason, viewport, after_action_ts, .. } => {
                let event_id = batch.next_event_id(task_id)?;
                let path = bundle::screenshot_path(event_id, format.extension());
                after.push(self.stage_file(batch, task_id, &path, &incoming.payload)?);
                let kind = EventKind::Screenshot(ScreenshotStored {
                    file: path,
                    format: *format,
                    reason: reason.clone(),
                    viewport: screen_viewport(*viewport, &incoming.payload),
                    after_action_ts: *after_action_ts,
                });
                let mut record = EventRecord { id: 0, event: Event { ts: *ts, tab_id: *tab_id, frame_id: None, kind } };
                batch.append_event(task_id, seq, &mut record)?;
            }
            ClientBody::DomSnapshot {
                ts, tab_id, frame_id, url, reason, html, accessibility, after_action_ts, ..
            } => {
                let event_id = batch.next_event_id(task_id)?;
                let file = bundle::dom_snapshot_path(event_id);
                after.push(self.stage_file(batch, task_id, &file, html.as_bytes())?);
                let accessibility_file = match accessibility {
                    Some(tree) => {
                        let path = bundle::accessibility_path(event_id);
                        let bytes = serde_json::to_vec(tree).context("cannot serialize the accessibility tree")?;
                        after.push(self.stage_file(batch, task_id, &path, &bytes)?);
                        Some(path)
                    }
                    None => None,
                };
                let kind = EventKind::DomSnapshot(DomSnapshotStored {
                    url: url.clone(),
                    reason: reason.clone(),
                    file,
                    accessibility_file,
                    after_action_ts: *after_action_ts,
                });
                let event = Event { ts: *ts, tab_id: *tab_id, frame_id: frame_id.clone(), kind };
                batch.append_event(task_id, seq, &mut EventRecord { id: 0, event })?;
            }
            ClientBody::StopTask { answer, ts, .. } => {
                let answer = answer.as_deref().map(str::trim).filter(|a| !a.is_empty());
                if task.task_type == TaskType::InformationRetrieval && answer.is_none() {
                    return Err(content(
                        ErrorCode::AnswerRequired,
                        "an information_retrieval task needs its answer to stop",
                    ));
                }
                let ended_at = if ts.is_finite() { *ts } else { now_ms() };
                batch.stop_task(task_id, answer, ended_at)?;
                tracing::info!(task = %task_id, "task stopped");
                after.push(AfterCommit::Finalize(task_id.clone()));
            }
            ClientBody::DiscardTask { .. } => {
                batch.discard_task(task_id)?;
                tracing::info!(task = %task_id, "task discarded");
                after.push(AfterCommit::Discard(task_id.clone()));
            }
        }
        Ok(())
    }

    #[allow(clippy::too_many_arguments)]
    fn body_chunk(
        &mut self,
        batch: &WriteBatch<'_>,
        task_id: &TaskId,
        seq: u64,
        body_id: &str,
        request_id: &str,
        part: BodyPart,
        index: u64,
        last: bool,
        payload: &[u8],
        after: &mut Vec<AfterCommit>,
    ) -> Result<(), Failure> {
        let mut row = match batch.body(task_id, body_id)? {
            None if index == 0 => tasks::BodyRow {
                request_id: request_id.to_owned(),
                part: part.as_str().to_owned(),
                next_index: 0,
                size: 0,
                sha256: None,
            },
            None => {
                return Err(content(
                    ErrorCode::ChunkOutOfOrder,
                    format!("body {body_id:?} must start with chunk 0, got chunk {index}"),
                ));
            }
            Some(row) if row.sha256.is_some() => {
                return Err(content(ErrorCode::ChunkOutOfOrder, format!("body {body_id:?} is already complete")));
            }
            Some(row) if row.next_index != index => {
                return Err(content(
                    ErrorCode::ChunkOutOfOrder,
                    format!("body {body_id:?} expects chunk {}, got chunk {index}", row.next_index),
                ));
            }
            Some(row) if row.request_id != request_id || row.part != part.as_str() => {
                return Err(content(
                    ErrorCode::InvalidMessage,
                    format!("body {body_id:?} belongs to request {} ({})", row.request_id, row.part),
                ));
            }
            Some(row) => row,
        };
        let capture = self.data.capture(task_id);
        let part_path = body_part_path(&capture, body_id);
        let key = (task_id.clone(), body_id.to_owned());
        let needs_a_file = self.open_bodies.get(&key).is_none_or(|open| open.file.is_none());
        if needs_a_file && self.open_bodies.values().filter(|open| open.file.is_some()).count() >= MAX_OPEN_BODY_FILES {
            for open in self.open_bodies.values_mut() {
                open.file = None;
            }
        }
        let open = match self.open_bodies.entry(key.clone()) {
            std::collections::hash_map::Entry::Occupied(entry) => entry.into_mut(),
            std::collections::hash_map::Entry::Vacant(entry) => entry.insert(OpenBody::resume(&part_path, row.size)?),
        };
        debug_assert_eq!(open.size, row.size);
        open.write(payload)?;
        row.next_index += 1;
        row.size = open.size;
        if last {
            let open = self.open_bodies.remove(&key).expect("opened above");
            let sha256 = hex::encode(open.hasher.finalize());
            let resource = bundle::resource_path(&sha256);
            batch.record_file(task_id, &resource, row.size, &sha256)?;
            let kind = EventKind::Body(BodyStored {
                request_id: request_id.to_owned(),
                part,
                sha256: sha256.clone(),
                size: row.size,
                omitted: false,
            });
            let event = Event { ts: now_ms(), tab_id: None, frame_id: None, kind };
            batch.append_event(task_id, seq, &mut EventRecord { id: 0, event })?;
            row.sha256 = Some(sha256);
            after.push(AfterCommit::Move { from: part_path, to: capture.join(resource) });
        }
        batch.put_body(task_id, body_id, &row)?;
        Ok(())
    }

    /// Writes a file to `.parts/`, records it, and returns the move that puts it in place after the commit.
    fn stage_file(
        &self,
        batch: &WriteBatch<'_>,
        task_id: &TaskId,
        path: &str,
        bytes: &[u8],
    ) -> Result<AfterCommit, Failure> {
        let capture = self.data.capture(task_id);
        let staged = staged_path(&capture, path);
        std::fs::write(&staged, bytes).with_context(|| format!("cannot write {}", staged.display()))?;
        let sha256 = trace_bundle::archive::sha256_hex(bytes);
        batch.record_file(task_id, path, bytes.len() as u64, &sha256)?;
        Ok(AfterCommit::Move { from: staged, to: capture.join(path) })
    }

    /// Takes the locks of the tasks a batch writes, before its transaction begins (see [`TaskLock`]): a
    /// lock held by another process is waited for a while, then the task's messages get `task_busy`.
    fn lock_tasks(&mut self, store: &TaskStore, batch: &[Result<Incoming, Rejected>]) {
        self.busy.clear();
        for incoming in batch.iter().flatten() {
            let Some(task_id) = incoming.body.task_id() else { continue };
            let writes = !matches!(incoming.body, ClientBody::Hello { .. });
            if !writes || self.owned.contains_key(task_id) || self.busy.contains(task_id) {
                continue;
            }
            let writable = match store.task(task_id).ok().flatten() {
                Some(task) => matches!(task.status, TaskStatus::Recording | TaskStatus::Interrupted),
                None => matches!(incoming.body, ClientBody::StartTask(_)),
            };
            if !writable {
                continue; // the message is refused inside the transaction, with the reason
            }
            match store.take_for_writing(task_id, self.config.lock_wait) {
                Ok(Some(lock)) => {
                    self.owned.insert(task_id.clone(), lock);
                }
                Ok(None) => {
                    self.busy.insert(task_id.clone());
                }
                Err(error) => tracing::error!(task = %task_id, "{error:#}"),
            }
        }
    }

    /// Checks that this process holds the task's lock (taken by [`State::lock_tasks`]).
    fn own(&mut self, task_id: &TaskId) -> Result<(), Failure> {
        if self.owned.contains_key(task_id) {
            return Ok(());
        }
        let message = if self.busy.contains(task_id) {
            format!("task {task_id} is being written by another trace-host process; resend later")
        } else {
            format!("cannot take the lock of task {task_id}; see the host log")
        };
        Err(Failure::NotApplied(Rejected::new(ErrorCode::TaskBusy, message)))
    }

    fn release(&mut self, task_id: &TaskId) {
        self.owned.remove(task_id);
        self.open_bodies.retain(|(task, _), _| task != task_id);
    }

    /// A message that could not be decoded still consumes its seq when it was the next one expected, so that
    /// one bad message does not stall the task's stream.
    fn consume_rejected(
        &mut self,
        batch: &WriteBatch<'_>,
        rejected: Rejected,
        replies: &mut Vec<HostMessage>,
        acks: &mut BTreeMap<TaskId, u64>,
    ) {
        tracing::warn!(seq = ?rejected.seq, code = ?rejected.code, "{}", rejected.message);
        if let (Some(seq), Some(task_id)) = (rejected.seq, &rejected.task_id)
            && let Ok(Some(task)) = batch.task(task_id)
            && matches!(task.status, TaskStatus::Recording | TaskStatus::Interrupted)
            && seq == task.last_seq + 1
            && batch.set_last_seq(task_id, seq).is_ok()
        {
            acks.insert(task_id.clone(), seq);
        }
        replies.push(rejected.into_reply());
    }

    fn after_commit(&mut self, store: &TaskStore, action: AfterCommit) -> Option<HostMessage> {
        match action {
            AfterCommit::Move { from, to } => {
                if let Err(error) = move_into_place(&from, &to) {
                    // The data is committed and staged; the next owner or the finalizer moves it.
                    tracing::error!(%error, from = %from.display(), "cannot move a staged file into place");
                }
                None
            }
            AfterCommit::Finalize(task_id) => {
                let result = match self.owned.get(&task_id) {
                    Some(lock) => store.finalize(lock),
                    None => Err(anyhow::anyhow!("this process does not hold task {task_id}")),
                };
                self.release(&task_id);
                Some(match result {
                    Ok(dir) => HostMessage::TaskStopped { task_id, bundle: dir.display().to_string() },
                    Err(error) => {
                        tracing::error!(task = %task_id, "bundle not written: {error:#}");
                        HostMessage::Error {
                            seq: None,
                            task_id: Some(task_id.clone()),
                            code: ErrorCode::Storage,
                            message: format!(
                                "the recording is saved but its bundle could not be written ({error:#}); \
                                 run `trace-host export {task_id} --out FILE.zip` to retry"
                            ),
                            expected_seq: None,
                        }
                    }
                })
            }
            AfterCommit::Discard(task_id) => {
                self.release(&task_id);
                let dir = self.data.capture(&task_id);
                if let Err(error) = std::fs::remove_dir_all(&dir) {
                    tracing::error!(%error, dir = %dir.display(), "cannot delete a discarded capture");
                }
                None
            }
        }
    }
}

impl OpenBody {
    /// Reopens a body's part file at its committed length, cutting off anything an earlier process wrote
    /// past it, and rebuilds the hash of the committed prefix.
    fn resume(path: &Path, committed: u64) -> std::io::Result<OpenBody> {
        let mut file = OpenOptions::new().create(true).truncate(false).read(true).write(true).open(path)?;
        let mut hasher = Sha256::new();
        if committed > 0 {
            let mut prefix = (&mut file).take(committed);
            let copied = std::io::copy(&mut prefix, &mut HashSink(&mut hasher))?;
            if copied != committed {
                return Err(std::io::Error::other(format!(
                    "{} holds {copied} bytes but {committed} were committed",
                    path.display()
                )));
            }
        }
        file.set_len(committed)?;
        file.seek(SeekFrom::Start(committed))?;
        Ok(OpenBody { file: Some(file), path: path.to_owned(), hasher, size: committed })
    }

    /// Appends `payload`, reopening the file at its length if it was closed.
    fn write(&mut self, payload: &[u8]) -> std::io::Result<()> {
        let file = match &mut self.file {
            Some(file) => file,
            None => {
                let mut file = OpenOptions::new().write(true).open(&self.path)?;
                file.seek(SeekFrom::Start(self.size))?;
                self.file.insert(file)
            }
        };
        file.write_all(payload)?;
        self.hasher.update(payload);
        self.size += payload.len() as u64;
        Ok(())
    }
}

struct HashSink<'a>(&'a mut Sha256);

impl Write for HashSink<'_> {
    fn write(&mut self, buf: &[u8]) -> std::io::Result<usize> {
        self.0.update(buf);
        Ok(buf.len())
    }
    fn flush(&mut self) -> std::io::Result<()> {
        Ok(())
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn png(width: u32, height: u32) -> Vec<u8> {
        let mut png = std::io::Cursor::new(Vec::new());
        image::DynamicImage::new_rgb8(width, height).write_to(&mut png, image::ImageFormat::Png).unwrap();
        png.into_inner()
    }

    /// Issue #43: every step of a re-run said "screen differs by 100%" where the page reported a viewport of
    /// 1280 × 800 and its screenshots were 1280 × 657.
    #[test]
    fn a_screenshot_records_the_viewport_it_shows() {
        let reported = |width, height, device_scale_factor| Some(Viewport { width, height, device_scale_factor });
        assert_eq!(screen_viewport(reported(1280, 800, 1.0), &png(1280, 657)), reported(1280, 657, 1.0));
        // A page's own report that agrees is kept, in CSS pixels at its scale.
        assert_eq!(screen_viewport(reported(640, 400, 2.0), &png(1280, 800)), reported(640, 400, 2.0));
        assert_eq!(screen_viewport(None, &png(800, 600)), reported(800, 600, 1.0));
        assert_eq!(screen_viewport(reported(640, 400, 1.0), b"not a picture"), reported(640, 400, 1.0));
    }
}
