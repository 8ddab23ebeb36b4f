//! Native messaging mode: Chrome starts `trace-host` with the extension's origin as its argument and talks
//! to it over stdin and stdout in length-prefixed JSON frames.
//!
//! Three parts run at once, joined by channels:
//! - the reader parses frames and decodes base64 payloads (CPU work, on the async runtime);
//! - the store thread applies what is queued in batches, one commit per batch ([`crate::ingest`]);
//! - the writer sends replies, acknowledgements included, back to the browser.
//!
//! Memory stays bounded however fast the browser sends: queued messages hold permits of a byte budget,
//! so the reader stops reading while the store is behind. stdout carries protocol frames only.

use std::future::Future;
use std::sync::Arc;

use bytes::{Buf, Bytes, BytesMut};
use futures::{SinkExt, StreamExt};
use tokio::io::{AsyncRead, AsyncWrite};
use tokio::sync::{OwnedSemaphorePermit, Semaphore, mpsc};
use tokio_util::codec::{Decoder, FramedRead, FramedWrite, LengthDelimitedCodec};
use trace_manifest::wire::{ErrorCode, HostMessage, MAX_INBOUND_BYTES, MAX_OUTBOUND_BYTES};

use crate::ingest::{self, Incoming, Ingestor, Rejected};

/// Bytes of undecoded frames that may wait for the store at once.
const QUEUE_BUDGET_BYTES: usize = 48 << 20;
/// A batch ends at this many messages or bytes, whichever comes first.
const BATCH_MAX_MESSAGES: usize = 512;
const BATCH_MAX_BYTES: usize = 16 << 20;

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
/// Everything read before the end is applied and acknowledged before this returns.
pub async fn serve<R, W>(
    input: R,
    output: W,
    mut ingestor: Ingestor,
    shutdown: impl Future<Output = ()>,
) -> anyhow::Result<SessionEnd>
where
    R: AsyncRead + Unpin,
    W: AsyncWrite + Unpin + Send + 'static,
{
    let (queue_tx, mut queue_rx) = mpsc::channel::<Queued>(BATCH_MAX_MESSAGES * 2);
    let (reply_tx, mut reply_rx) = mpsc::unbounded_channel::<HostMessage>();
    let budget = Arc::new(Semaphore::new(QUEUE_BUDGET_BYTES));

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
            let mut bytes = first.len;
            let mut batch = vec![first];
            while batch.len() < BATCH_MAX_MESSAGES && bytes < BATCH_MAX_BYTES {
                match queue_rx.try_recv() {
                    Ok(next) => {
                        bytes += next.len;
                        batch.push(next);
                    }
                    Err(_) => break,
                }
            }
            let (items, permits): (Vec<_>, Vec<_>) = batch.into_iter().map(|q| (q.item, q.permit)).unzip();
            for reply in ingestor.apply(items) {
                let _ = store_replies.send(reply);
            }
            drop(permits);
        }
        ingestor.shutdown()
    });

    let mut frames = FramedRead::new(input, NativeFrames);
    tokio::pin!(shutdown);
    let end = loop {
        let frame = tokio::select! {
            () = &mut shutdown => break SessionEnd::Signalled,
            frame = frames.next() => frame,
        };
        match frame {
            None => break SessionEnd::Closed,
            Some(Ok(frame)) => {
                let len = frame.len();
                let permits = len.clamp(1, QUEUE_BUDGET_BYTES) as u32;
                let permit = budget.clone().acquire_many_owned(permits).await.expect("the budget is never closed");
                let item = ingest::decode(&frame);
                if queue_tx.send(Queued { item, permit, len }).await.is_err() {
                    break SessionEnd::Closed; // the store thread ended (it logged why)
                }
            }
            Some(Err(error)) => {
                let (code, message) = match &error {
                    FrameError::TooLarge(announced) => (
                        ErrorCode::FrameTooLarge,
                        format!("a message announced {announced} bytes, more than the {MAX_INBOUND_BYTES} allowed; closing"),
                    ),
                    FrameError::Truncated { have, want } => (
                        ErrorCode::TruncatedFrame,
                        format!("the input ended {have} bytes into a frame of {want}"),
                    ),
                    FrameError::Io(error) => (ErrorCode::TruncatedFrame, format!("cannot read from the browser: {error}")),
                };
                tracing::error!("{message}");
                let _ = reply_tx.send(Rejected { seq: None, task_id: None, code, message: message.clone() }.into_reply());
                break SessionEnd::BadFrame(message);
            }
        }
    };
    drop(queue_tx);
    let stored = store.await?;
    drop(reply_tx);
    writer.await?;
    stored?;
    Ok(end)
}

struct Queued {
    item: Result<Incoming, Rejected>,
    permit: OwnedSemaphorePermit,
    len: usize,
}

fn encode_reply(reply: &HostMessage) -> Bytes {
    let bytes = serde_json::to_vec(reply).expect("host messages always serialize");
    if bytes.len() <= MAX_OUTBOUND_BYTES {
        return Bytes::from(bytes);
    }
    // Only an error's free text can grow; never let it close the port.
    let HostMessage::Error { seq, task_id, code, .. } = reply.clone() else { unreachable!("only errors grow") };
    let short = HostMessage::Error { seq, task_id, code, message: "error text too long; see the host log".into(), expected_seq: None };
    Bytes::from(serde_json::to_vec(&short).expect("host messages always serialize"))
}

/// Chrome's framing: a 32-bit native-endian length, then the message. Written out rather than configured
/// from `LengthDelimitedCodec` so that an oversized announcement and a frame cut short get errors of their
/// own, each answered precisely.
struct NativeFrames;

#[derive(Debug)]
enum FrameError {
    TooLarge(u32),
    Truncated { have: usize, want: usize },
    Io(std::io::Error),
}

impl From<std::io::Error> for FrameError {
    fn from(error: std::io::Error) -> FrameError {
        FrameError::Io(error)
    }
}

impl Decoder for NativeFrames {
    type Item = BytesMut;
    type Error = FrameError;

    fn decode(&mut self, buf: &mut BytesMut) -> Result<Option<BytesMut>, FrameError> {
        let Some(prefix) = buf.get(..4) else { return Ok(None) };
        let announced = u32::from_ne_bytes(prefix.try_into().expect("four bytes"));
        let len = announced as usize;
        if len > MAX_INBOUND_BYTES {
            return Err(FrameError::TooLarge(announced));
        }
        if buf.len() < 4 + len {
            buf.reserve(4 + len - buf.len());
            return Ok(None);
        }
        buf.advance(4);
        Ok(Some(buf.split_to(len)))
    }

    fn decode_eof(&mut self, buf: &mut BytesMut) -> Result<Option<BytesMut>, FrameError> {
        match self.decode(buf)? {
            Some(frame) => Ok(Some(frame)),
            None if buf.is_empty() => Ok(None),
            None => {
                let want = buf.get(..4).map_or(4, |p| 4 + u32::from_ne_bytes(p.try_into().expect("four bytes")) as usize);
                Err(FrameError::Truncated { have: buf.len(), want })
            }
        }
    }
}
