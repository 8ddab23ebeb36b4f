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
