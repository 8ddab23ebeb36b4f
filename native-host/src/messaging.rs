//! Native messaging mode: Chrome starts `trace-host` with the extension's origin as its argument and talks
//! to it over stdin and stdout in length-prefixed JSON frames.
//!
//! Three parts run at once, joined by channels:
//! - the reader thread reads each frame straight into a buffer of its exact size, parses it and decodes
//!   base64 payloads. It is a plain thread doing blocking reads, because handing every pipe read to an
//!   async runtime's blocking pool cost more than half the throughput;
//! - the store thread applies what is queued in batches, one commit per batch ([`crate::ingest`]);
//! - the writer task sends replies, acknowledgements included, back to the browser.
//!
//! A page's request ([`Request`], in a message of its own) is answered beside them, in a task of its own
//! ([`crate::requests`]).
//!
//! Memory stays bounded however fast the browser sends and however slowly it reads: queued messages and
//! page requests being answered hold permits of one byte budget, so the reader stops reading while the store is behind, and replies wait in a
//! bounded queue, so the store stops (and with it the reader) while the writer is behind. stdout carries
//! protocol frames only.

use std::future::Future;
use std::io::Read;
use std::sync::Arc;

use bytes::Bytes;
use futures::SinkExt;
use tokio::io::AsyncWrite;
use tokio::sync::{OwnedSemaphorePermit, Semaphore, mpsc};
use tokio_util::codec::{FramedWrite, LengthDelimitedCodec};
use trace_manifest::wire::{Answer, ErrorCode, HostMessage, MAX_INBOUND_BYTES, MAX_OUTBOUND_BYTES, Request};

use crate::ingest::{self, Incoming, Ingestor, Rejected};
use crate::paths::DataDir;
use crate::requests;

/// Bytes of frames that may wait for the store at once.
const QUEUE_BUDGET_BYTES: usize = 48 << 20;
/// A batch ends at this many messages or bytes, whichever comes first.
const BATCH_MAX_MESSAGES: usize = 512;
const BATCH_MAX_BYTES: usize = 16 << 20;
/// Replies that may wait for the writer at once (each at most [`MAX_OUTBOUND_BYTES`], most a few dozen
/// bytes): a peer that never reads them holds the session up rather than filling memory.
const REPLY_QUEUE_MESSAGES: usize = 4096;

/// How a session ended.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum SessionEnd {
    /// The browser closed the port.
    Closed,
    /// A shutdown signal arrived.
    Signalled,
    /// The input broke the framing; nothing after the break can be trusted.
    BadFrame(String),
}

/// Serves one native messaging session until the input ends, the framing breaks, or `shutdown` resolves.
/// Everything read before the end is applied and acknowledged before this returns (on a signal, the
/// frame being read when it came may be lost: it was never acknowledged, so the extension resends it).
pub async fn serve<R, W>(
    input: R,
    output: W,
    mut ingestor: Ingestor,
    shutdown: impl Future<Output = ()>,
) -> anyhow::Result<SessionEnd>
where
    R: Read + Send + 'static,
    W: AsyncWrite + Unpin + Send + 'static,
{
    let data = ingestor.data().clone();
    let (queue_tx, mut queue_rx) = mpsc::channel::<Queued>(BATCH_MAX_MESSAGES * 2);
    let (reply_tx, mut reply_rx) = mpsc::channel::<HostMessage>(REPLY_QUEUE_MESSAGES);

    let writer = tokio::spawn(async move {
        let codec = LengthDelimitedCodec::builder()
            .length_field_length(4)
            .native_endian()
            .max_frame_length(MAX_OUTBOUND_BYTES)
            .new_codec();
        let mut sink = FramedWrite::new(output, codec);
        while let Some(reply) = reply_rx.recv().await {
            if let Err(error) = sink.send(encode_reply(&reply)).await {
                // The browser is gone; what was committed stays committed.
                tracing::warn!(%error, "cannot write to the browser");
                break;
            }
        }
    });

    let store_replies = reply_tx.clone();
    let store = tokio::task::spawn_blocking(move || {
        while let Some(first) = queue_rx.blocking_recv() {
            let Queued::Message { len, .. } = &first else { break };
            let mut bytes = *len;
            let mut batch = vec![first];
            while batch.len() < BATCH_MAX_MESSAGES && bytes < BATCH_MAX_BYTES {
                match queue_rx.try_recv() {
                    Ok(Queued::Message { item, permit, len }) => {
                        bytes += len;
                        batch.push(Queued::Message { item, permit, len });
                    }
                    Ok(Queued::Stop) => {
                        queue_rx.close();
                        break;
                    }
                    Err(_) => break,
                }
            }
            let (items, permits): (Vec<_>, Vec<_>) = batch
                .into_iter()
                .filter_map(|queued| match queued {
                    Queued::Message { item, permit, .. } => Some((*item, permit)),
                    Queued::Stop => None,
                })
                .unzip();
            for reply in ingestor.apply(items) {
                // Waits while the writer is behind; fails only once the writer is gone.
                let _ = store_replies.blocking_send(reply);
            }
            drop(permits);
        }
        ingestor.shutdown()
    });

    let (ended_tx, ended_rx) = tokio::sync::oneshot::channel();
    let runtime = tokio::runtime::Handle::current();
    let reader_queue = queue_tx.clone();
    let reader_replies = reply_tx.clone();
    std::thread::Builder::new().name("stdin-reader".into()).spawn(move || {
        let end = read_frames(input, &runtime, &reader_queue, &reader_replies, &data);
        let _ = ended_tx.send(end);
    })?;

    tokio::pin!(shutdown);
    let end = tokio::select! {
        () = &mut shutdown => SessionEnd::Signalled,
        end = ended_rx => end.unwrap_or(SessionEnd::Closed),
    };
    // The reader may still be blocked on stdin; stop the store after what is already queued.
    let _ = queue_tx.send(Queued::Stop).await;
    drop(queue_tx);
    let stored = store.await?;
    drop(reply_tx);
    writer.await?;
    stored?;
    Ok(end)
}

/// Asks for a larger pipe buffer on stdin when it is a pipe, as it is under Chrome: with the default 64 KiB
/// a 1 MiB body chunk needs some twenty hand-offs between the browser and this reader, which halves the
/// throughput. Best effort: the system may cap the size (`/proc/sys/fs/pipe-max-size`).
pub fn enlarge_stdin_pipe() {
    #[cfg(target_os = "linux")]
    {
        const WANTED: usize = 1 << 20;
        let stdin = std::io::stdin();
        match rustix::pipe::fcntl_setpipe_size(&stdin, WANTED) {
            Ok(size) => tracing::debug!(size, "stdin pipe buffer enlarged"),
            Err(error) => tracing::debug!(%error, "stdin pipe buffer left as it is"),
        }
    }
}

/// Reads frames until the input ends or breaks, queueing each decoded message for the store. A page's
/// [`Request`] is answered beside the store, in a task of its own: a submission's upload may take minutes.
fn read_frames(
    mut input: impl Read,
    runtime: &tokio::runtime::Handle,
    queue: &mpsc::Sender<Queued>,
    replies: &mpsc::Sender<HostMessage>,
    data: &DataDir,
) -> SessionEnd {
    let budget = Arc::new(Semaphore::new(QUEUE_BUDGET_BYTES));
    loop {
        let frame = match read_frame(&mut input) {
            Ok(Some(frame)) => frame,
            Ok(None) => return SessionEnd::Closed,
            Err(error) => {
                let (code, message) = match &error {
                    FrameError::TooLarge(announced) => (
                        ErrorCode::FrameTooLarge,
                        format!(
                            "a message announced {announced} bytes, more than the {MAX_INBOUND_BYTES} allowed; closing"
                        ),
                    ),
                    FrameError::Truncated { have, want } => {
                        (ErrorCode::TruncatedFrame, format!("the input ended {have} bytes into a frame of {want}"))
                    }
                    FrameError::Io(error) => {
                        (ErrorCode::TruncatedFrame, format!("cannot read from the browser: {error}"))
                    }
                };
                tracing::error!("{message}");
                let _ = replies
                    .blocking_send(Rejected { seq: None, task_id: None, code, message: message.clone() }.into_reply());
                return SessionEnd::BadFrame(message);
            }
        };
        let len = frame.len();
        let permits = len.clamp(1, QUEUE_BUDGET_BYTES) as u32;
        let permit = runtime.block_on(budget.clone().acquire_many_owned(permits)).expect("the budget is never closed");
        let item = Box::new(ingest::decode(&frame));
        if item.is_err()
            && let Ok(request) = serde_json::from_slice::<Request>(&frame)
        {
            drop(frame);
            let (data, replies) = (data.clone(), replies.clone());
            // The request holds its permits until it is answered: requests count against the one budget
            // as task messages do, so that many large ones wait for each other instead of filling memory.
            runtime.spawn(async move {
                let answer = requests::answer(data, request).await;
                drop(permit);
                let _ = replies.send(HostMessage::Answer(answer)).await;
            });
            continue;
        }
        drop(frame);
        if queue.blocking_send(Queued::Message { item, permit, len }).is_err() {
            return SessionEnd::Closed; // the store stopped (it logged why)
        }
    }
}

enum Queued {
    Message {
        item: Box<Result<Incoming, Rejected>>,
        permit: OwnedSemaphorePermit,
        len: usize,
    },
    /// Finish what is queued and stop (a shutdown signal arrived).
    Stop,
}

fn encode_reply(reply: &HostMessage) -> Bytes {
    let bytes = serde_json::to_vec(reply).expect("host messages always serialize");
    if bytes.len() <= MAX_OUTBOUND_BYTES {
        return Bytes::from(bytes);
    }
    // Only an error's free text and an answer can grow (answers are built to fit); never close the port.
    if let HostMessage::Answer(answer) = reply {
        tracing::error!(size = bytes.len(), answer = ?std::mem::discriminant(answer), "an answer was too large");
        let failed =
            HostMessage::Answer(Answer::Failed { message: "the answer was too large; see the host log".into() });
        return Bytes::from(serde_json::to_vec(&failed).expect("host messages always serialize"));
    }
    let HostMessage::Error { seq, task_id, code, .. } = reply.clone() else { unreachable!("only errors grow") };
    let short = HostMessage::Error {
        seq,
        task_id,
        code,
        message: "error text too long; see the host log".into(),
        expected_seq: None,
    };
    Bytes::from(serde_json::to_vec(&short).expect("host messages always serialize"))
}

/// Why the input stream cannot be read on.
#[derive(Debug)]
enum FrameError {
    TooLarge(u32),
    Truncated { have: usize, want: usize },
    Io(std::io::Error),
}

/// Reads one frame of Chrome's framing: a 32-bit native-endian length, then the message. `None` at a clean
/// end of input; an oversized announcement and a frame cut short get errors of their own.
fn read_frame(input: &mut impl Read) -> Result<Option<Vec<u8>>, FrameError> {
    let mut prefix = [0u8; 4];
    let got = read_full(input, &mut prefix)?;
    if got == 0 {
        return Ok(None);
    }
    if got < 4 {
        return Err(FrameError::Truncated { have: got, want: 4 });
    }
    let announced = u32::from_ne_bytes(prefix);
    let len = announced as usize;
    if len > MAX_INBOUND_BYTES {
        return Err(FrameError::TooLarge(announced));
    }
    let mut frame = Vec::with_capacity(len);
    let got = input.take(len as u64).read_to_end(&mut frame).map_err(FrameError::Io)?;
    if got < len {
        return Err(FrameError::Truncated { have: 4 + got, want: 4 + len });
    }
    Ok(Some(frame))
}

/// Fills `buffer` unless the input ends first; returns how much was read.
fn read_full(input: &mut impl Read, buffer: &mut [u8]) -> Result<usize, FrameError> {
    let mut filled = 0;
    while filled < buffer.len() {
        match input.read(&mut buffer[filled..]) {
            Ok(0) => break,
            Ok(n) => filled += n,
            Err(error) if error.kind() == std::io::ErrorKind::Interrupted => {}
            Err(error) => return Err(FrameError::Io(error)),
        }
    }
    Ok(filled)
}
