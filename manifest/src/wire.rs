//! The native messaging protocol between the extension and `trace-host`.
//!
//! Framing is Chrome's: a 32-bit length in native byte order, then that many bytes of UTF-8 JSON. The
//! browser may send up to [`MAX_INBOUND_BYTES`] per message; the host must never send more than
//! [`MAX_OUTBOUND_BYTES`] (Chrome closes the port past it).
//!
//! Every message about a task carries that task's sequence number. A task's stream starts with
//! `start_task` at seq 1 and continues without gaps. The host answers with [`HostMessage::Ack`] naming the
//! highest sequence number it has committed to disk, so that an extension that lost its port resends
//! everything after it; a message whose seq is already committed is acknowledged again and otherwise
//! ignored. A message that is well formed but cannot be applied (a chunk out of order, a stop without the
//! required answer) is rejected with an [`HostMessage::Error`] and its seq is consumed, so the stream goes on.

use schemars::JsonSchema;
use serde::{Deserialize, Serialize};

use crate::event::{BodyPart, Event, ImageFormat, Viewport};
use crate::task::{TaskId, TaskStart, TaskStatus};

/// Largest message the browser may send to the host (Chrome's limit).
pub const MAX_INBOUND_BYTES: usize = 64 * 1024 * 1024;
/// Largest message the host may send to the browser (Chrome's limit).
pub const MAX_OUTBOUND_BYTES: usize = 1024 * 1024;
/// The size of a body chunk's decoded data that the extension should aim for.
pub const SUGGESTED_CHUNK_BYTES: usize = 1024 * 1024;
/// What the host's [`Answer::Failed`] says of a task it cannot read yet because it is still being recorded,
/// or written at its stop: a page that asked right after Stop asks again in a moment.
pub const TASK_NOT_YET_STOPPED: &str = "is still being recorded";
/// See [`TASK_NOT_YET_STOPPED`].
pub const TASK_BEING_WRITTEN: &str = "is being written by trace-host";

/// A message from the extension.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize, JsonSchema)]
pub struct ClientMessage {
    /// The task's sequence number; ignored (echoed) for `hello`.
    pub seq: u64,
    #[serde(flatten)]
    pub body: ClientBody,
}

#[derive(Debug, Clone, PartialEq, Serialize, Deserialize, JsonSchema)]
#[serde(tag = "type", rename_all = "snake_case")]
pub enum ClientBody {
    /// Asks for the host's version and, for a task, how far it has been committed (to resume after a
    /// reconnect).
    Hello {
        #[serde(default, skip_serializing_if = "Option::is_none")]
        task_id: Option<TaskId>,
    },
    StartTask(TaskStart),
    /// A batch of events, stored in order.
    Events {
        task_id: TaskId,
        events: Vec<Event>,
    },
    /// One piece of a body. Chunks of one body arrive with `index` 0, 1, 2, ... and the last one has
    /// `last: true`; an empty body is a single empty last chunk.
    BodyChunk {
        task_id: TaskId,
        /// The extension's id for this body, unique within the task.
        body_id: String,
        request_id: String,
        part: BodyPart,
        index: u64,
        /// Base64 (standard alphabet, padded).
        data: String,
        last: bool,
    },
    Screenshot {
        task_id: TaskId,
        ts: f64,
        #[serde(default, skip_serializing_if = "Option::is_none")]
        tab_id: Option<i64>,
        format: ImageFormat,
        #[serde(default)]
        reason: String,
        /// The tab's viewport as the screenshot was taken.
        #[serde(default, skip_serializing_if = "Option::is_none")]
        viewport: Option<Viewport>,
        /// See [`crate::event::ScreenshotStored::after_action_ts`].
        #[serde(default, skip_serializing_if = "Option::is_none")]
        after_action_ts: Option<f64>,
        /// Base64 image data.
        data: String,
    },
    DomSnapshot {
        task_id: TaskId,
        ts: f64,
        #[serde(default, skip_serializing_if = "Option::is_none")]
        tab_id: Option<i64>,
        #[serde(default, skip_serializing_if = "Option::is_none")]
        frame_id: Option<String>,
        url: String,
        #[serde(default)]
        reason: String,
        html: String,
        #[serde(default, skip_serializing_if = "Option::is_none")]
        accessibility: Option<serde_json::Value>,
        /// See [`crate::event::ScreenshotStored::after_action_ts`].
        #[serde(default, skip_serializing_if = "Option::is_none")]
        after_action_ts: Option<f64>,
    },
    /// Ends the recording. Information-retrieval tasks need their answer here.
    StopTask {
        task_id: TaskId,
        #[serde(default, skip_serializing_if = "Option::is_none")]
        answer: Option<String>,
        /// Wall-clock end, milliseconds since the Unix epoch.
        ts: f64,
    },
    /// Abandons the recording and deletes what was stored.
    DiscardTask {
        task_id: TaskId,
    },
}

impl ClientBody {
    pub fn task_id(&self) -> Option<&TaskId> {
        match self {
            ClientBody::Hello { task_id } => task_id.as_ref(),
            ClientBody::StartTask(start) => Some(&start.task_id),
            ClientBody::Events { task_id, .. }
            | ClientBody::BodyChunk { task_id, .. }
            | ClientBody::Screenshot { task_id, .. }
            | ClientBody::DomSnapshot { task_id, .. }
            | ClientBody::StopTask { task_id, .. }
            | ClientBody::DiscardTask { task_id } => Some(task_id),
        }
    }

    pub fn name(&self) -> &'static str {
        match self {
            ClientBody::Hello { .. } => "hello",
            ClientBody::StartTask(_) => "start_task",
            ClientBody::Events { .. } => "events",
            ClientBody::BodyChunk { .. } => "body_chunk",
            ClientBody::Screenshot { .. } => "screenshot",
            ClientBody::DomSnapshot { .. } => "dom_snapshot",
            ClientBody::StopTask { .. } => "stop_task",
            ClientBody::DiscardTask { .. } => "discard_task",
        }
    }
}

/// The message types a client may send, for error messages.
pub const CLIENT_MESSAGE_TYPES: &[&str] =
    &["hello", "start_task", "events", "body_chunk", "screenshot", "dom_snapshot", "stop_task", "discard_task"];

/// A message from the host.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize, JsonSchema)]
#[serde(tag = "type", rename_all = "snake_case")]
pub enum HostMessage {
    Hello {
        host_version: String,
        format_version: u32,
        #[serde(default, skip_serializing_if = "Option::is_none")]
        task: Option<TaskProgress>,
    },
    /// Everything of `task_id` up to and including `seq` is committed.
    Ack { task_id: TaskId, seq: u64 },
    /// The task is stopped and its bundle finalized at `bundle` (a directory on the host's machine).
    TaskStopped { task_id: TaskId, bundle: String },
    Error {
        /// The rejected message's seq, when it could be read.
        #[serde(default, skip_serializing_if = "Option::is_none")]
        seq: Option<u64>,
        #[serde(default, skip_serializing_if = "Option::is_none")]
        task_id: Option<TaskId>,
        code: ErrorCode,
        message: String,
        /// For `sequence_gap`: the seq the host expects next.
        #[serde(default, skip_serializing_if = "Option::is_none")]
        expected_seq: Option<u64>,
    },
    /// The answer to a [`Request`].
    Answer(Answer),
}

/// A question an extension page asks the host in a message of its own (`chrome.runtime.sendNativeMessage`:
/// Chrome starts a host for it, the host answers once with [`HostMessage::Answer`], and Chrome closes it).
/// Tagged by `request`, not `type`, so that it is never taken for a task's message; it has no seq.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize, JsonSchema)]
#[serde(tag = "request", rename_all = "snake_case", deny_unknown_fields)]
pub enum Request {
    /// A stopped recording as the person reviews it before submitting it.
    Review { task_id: TaskId },
    /// Thumbnails of the review's steps from step `from` on, as many as fit in one message.
    Thumbnails { task_id: TaskId, from: usize },
    /// The person corrected the description or the answer of a stopped recording.
    Annotate {
        task_id: TaskId,
        description: String,
        #[serde(default, skip_serializing_if = "Option::is_none")]
        answer: Option<String>,
    },
    /// The person says a credential of a stopped recording is no secret (a word a page put into a password
    /// field, a search typed into a field the recorder took for one): the inputs behind its placeholder
    /// are plain typing from now on, in the trajectory and in every export. Answered with the review.
    NotASecret { task_id: TaskId, placeholder: String },
    /// The person does not want a stopped recording: it is deleted.
    Discard { task_id: TaskId },
    /// Submits a stopped recording to a campaign (its `campaign.json` as loaded) as one of its tasks.
    Submit { task_id: TaskId, campaign: String, campaign_task: String, pseudonym: String },
    /// The submissions in the outbox; with `send`, the waiting ones are tried again first.
    Outbox {
        #[serde(default)]
        send: bool,
    },
    /// The journeys Chrome itself grouped in the profile's history over the last `days`, if it has any.
    Journeys {
        days: u32,
        #[serde(default)]
        excluded: Vec<String>,
    },
    /// Journeys the person annotated, submitted to a campaign.
    SubmitJourneys { campaign: String, pseudonym: String, journeys: Vec<AnnotatedJourney> },
    /// What the host stored of a stopped recording, as the popup shows it once the person stops.
    Recorded { task_id: TaskId },
    /// Opens the local viewer (`trace-host view`) on a recording: answered with its URL once it listens.
    View { task_id: TaskId },
}

/// A journey as the person submits it: the journey as shown, and what they said of it.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize, JsonSchema)]
#[serde(deny_unknown_fields)]
pub struct AnnotatedJourney {
    pub journey: crate::campaign::Journey,
    pub annotation: crate::campaign::JourneyAnnotation,
}

/// The host's answer to a [`Request`]. Always within [`MAX_OUTBOUND_BYTES`]. Tagged by `kind`, a name no
/// variant's field takes (a review's `answer` is the person's answer).
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize, JsonSchema)]
#[serde(tag = "kind", rename_all = "snake_case")]
pub enum Answer {
    Review(ReviewSheet),
    Thumbnails {
        task_id: TaskId,
        thumbnails: Vec<Thumbnail>,
        /// The first step not answered, when the message had no room for more: ask again from it.
        #[serde(default, skip_serializing_if = "Option::is_none")]
        next: Option<usize>,
    },
    /// Done as asked (an annotation saved, a recording discarded).
    Done,
    /// The submissions, waiting first, then sent, each as its outbox entry says.
    Outbox {
        submissions: Vec<crate::campaign::OutboxEntry>,
    },
    /// Chrome's own journeys, or `None` when the profile's history has none (or cannot be found): the page
    /// then groups `chrome.history` by TRACE's rule.
    Journeys {
        #[serde(default, skip_serializing_if = "Option::is_none")]
        journeys: Option<Vec<crate::campaign::Journey>>,
        /// How many older journeys were left out, the answer having no room for them.
        #[serde(default, skip_serializing_if = "is_zero")]
        older_left_out: usize,
    },
    Recorded(RecordedSummary),
    /// The viewer listens at `url`, its token in the path: open it, and give it to no one else.
    Viewer {
        url: String,
    },
    /// The request could not be done, in words for the person.
    Failed {
        message: String,
    },
}

/// A stopped recording as the host stored it: what the popup says was saved.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize, JsonSchema)]
pub struct RecordedSummary {
    pub task_id: TaskId,
    pub status: crate::task::TaskStatus,
    pub duration_seconds: f64,
    /// The steps of its trajectory, as the viewer and the review count them.
    pub steps: usize,
    /// The network requests of its HAR.
    pub requests: usize,
    /// The bytes of the bundle's files.
    pub bytes: u64,
    /// The bundle's directory on the host's machine.
    pub bundle: String,
}

/// A stopped recording as the review page shows it.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize, JsonSchema)]
pub struct ReviewSheet {
    pub task_id: TaskId,
    pub source: String,
    pub task_type: crate::task::TaskType,
    pub description: String,
    pub website: String,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub answer: Option<String>,
    /// The steps, in words; a long recording's last ones may be left out (`steps_left_out`).
    pub steps: Vec<ReviewStep>,
    #[serde(default)]
    pub steps_left_out: usize,
    /// The secrets typed, which the submission replaces by placeholders (never their values).
    pub credentials: Vec<ReviewCredential>,
    /// The checkpoints chosen, in words.
    pub checkpoints: Vec<String>,
}

#[derive(Debug, Clone, PartialEq, Serialize, Deserialize, JsonSchema)]
pub struct ReviewStep {
    pub index: usize,
    pub text: String,
    /// Whether a screenshot shows the page at this step (see [`Request::Thumbnails`]).
    pub has_thumbnail: bool,
}

#[derive(Debug, Clone, PartialEq, Serialize, Deserialize, JsonSchema)]
pub struct ReviewCredential {
    pub placeholder: String,
    pub site: String,
    pub field: String,
    pub characters: usize,
}

/// A step's screenshot, scaled down.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize, JsonSchema)]
pub struct Thumbnail {
    pub step: usize,
    pub width: u32,
    pub height: u32,
    /// A JPEG, base64.
    pub jpeg: String,
}

#[derive(Debug, Clone, PartialEq, Serialize, Deserialize, JsonSchema)]
pub struct TaskProgress {
    pub task_id: TaskId,
    pub status: TaskStatus,
    /// The highest committed seq; resend from the one after it.
    pub acked_seq: u64,
}

#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize, Deserialize, JsonSchema)]
#[serde(rename_all = "snake_case")]
pub enum ErrorCode {
    /// The length prefix announced more than [`MAX_INBOUND_BYTES`]; the host stops reading.
    FrameTooLarge,
    /// The input ended inside a frame.
    TruncatedFrame,
    InvalidJson,
    UnknownMessageType,
    /// Valid JSON of a known type with missing or wrong fields.
    InvalidMessage,
    UnknownTask,
    TaskExists,
    /// The task is stopped or discarded and takes no more data.
    TaskClosed,
    /// Another host process is writing this task.
    TaskBusy,
    SequenceGap,
    ChunkOutOfOrder,
    AnswerRequired,
    /// The host could not store the message (disk full, database error); nothing of it was acknowledged.
    Storage,
}

fn is_zero(count: &usize) -> bool {
    *count == 0
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn client_messages_are_flat_json_objects() {
        let json = r#"{"seq":3,"type":"body_chunk","task_id":"t1","body_id":"b","request_id":"r",
            "part":"response","index":0,"data":"aGk=","last":true}"#;
        let message: ClientMessage = serde_json::from_str(json).unwrap();
        assert_eq!(message.seq, 3);
        assert_eq!(message.body.name(), "body_chunk");
        assert_eq!(message.body.task_id().map(TaskId::as_str), Some("t1"));
        assert!(CLIENT_MESSAGE_TYPES.contains(&message.body.name()));
    }

    /// The review of an information-retrieval task carries the person's answer beside the answer's kind:
    /// each must keep its own key, or the page reads neither.
    #[test]
    fn a_review_with_the_persons_answer_reads_back_whole() {
        let review = HostMessage::Answer(Answer::Review(ReviewSheet {
            task_id: "t1".parse().unwrap(),
            source: "price".into(),
            task_type: crate::task::TaskType::InformationRetrieval,
            description: "What does the cheapest mug cost?".into(),
            website: "https://shop.example/".into(),
            answer: Some("$12.50".into()),
            steps: Vec::new(),
            steps_left_out: 0,
            credentials: Vec::new(),
            checkpoints: Vec::new(),
        }));
        let text = serde_json::to_string(&review).unwrap();
        assert_eq!(text.matches("\"answer\":").count(), 1, "one key per name: {text}");
        assert_eq!(serde_json::from_str::<HostMessage>(&text).unwrap(), review);
    }

    #[test]
    fn host_errors_serialize_without_empty_fields() {
        let error = HostMessage::Error {
            seq: None,
            task_id: None,
            code: ErrorCode::InvalidJson,
            message: "expected value".into(),
            expected_seq: None,
        };
        assert_eq!(
            serde_json::to_string(&error).unwrap(),
            r#"{"type":"error","code":"invalid_json","message":"expected value"}"#
        );
    }
}
