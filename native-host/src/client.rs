//! The extension's side of the protocol, in Rust: starts `trace-host` as Chrome does and speaks to it.
//! Used by the integration tests, the ingest benchmark and the demo to drive the real binary; it is also
//! the reference for what a well-behaved recorder sends.

use std::io::{BufWriter, Read, Write};
use std::path::Path;
use std::process::{Child, ChildStdin, Command, ExitStatus, Stdio};
use std::sync::mpsc;
use std::time::{Duration, Instant};

use anyhow::{Context, Result, bail};
use base64::Engine as _;
use trace_manifest::event::{BodyPart, Event, ImageFormat};
use trace_manifest::task::{TaskId, TaskStart};
use trace_manifest::wire::{ClientBody, ClientMessage, HostMessage};

/// A running `trace-host` in native messaging mode.
pub struct HostClient {
    child: Child,
    stdin: Option<BufWriter<ChildStdin>>,
    replies: mpsc::Receiver<HostMessage>,
}

impl HostClient {
    /// Starts `executable` as Chrome would, with its data in `data_dir`.
    pub fn spawn(executable: &Path, data_dir: &Path) -> Result<HostClient> {
        let mut child = Command::new(executable)
            .arg(format!("chrome-extension://{}/", trace_manifest::EXTENSION_ID))
            .env("TRACE_DATA", data_dir)
            .stdin(Stdio::piped())
            .stdout(Stdio::piped())
            .stderr(Stdio::inherit())
            .spawn()
            .with_context(|| format!("cannot start {}", executable.display()))?;
        let stdin = BufWriter::with_capacity(1 << 20, child.stdin.take().expect("piped"));
        let mut stdout = child.stdout.take().expect("piped");
        let (sender, replies) = mpsc::channel();
        std::thread::spawn(move || {
            while let Some(frame) = read_frame(&mut stdout) {
                let reply = serde_json::from_slice::<HostMessage>(&frame)
                    .unwrap_or_else(|error| panic!("trace-host sent a frame that is not a host message: {error}"));
                if sender.send(reply).is_err() {
                    return;
                }
            }
        });
        Ok(HostClient { child, stdin: Some(stdin), replies })
    }

    pub fn pid(&self) -> u32 {
        self.child.id()
    }

    pub fn send(&mut self, message: &ClientMessage) -> Result<()> {
        self.send_frame(&serde_json::to_vec(message)?)
    }

    /// Sends `payload` with a correct length prefix.
    pub fn send_frame(&mut self, payload: &[u8]) -> Result<()> {
        let mut frame = Vec::with_capacity(4 + payload.len());
        frame.extend_from_slice(&(payload.len() as u32).to_ne_bytes());
        frame.extend_from_slice(payload);
        self.send_raw(&frame)
    }

    /// Sends bytes as they are, framing included (or not).
    pub fn send_raw(&mut self, bytes: &[u8]) -> Result<()> {
        let stdin = self.stdin.as_mut().context("stdin already closed")?;
        stdin.write_all(bytes)?;
        stdin.flush()?;
        Ok(())
    }

    /// The next reply, or `None` if none comes within `timeout` or the host has exited.
    pub fn recv(&mut self, timeout: Duration) -> Option<HostMessage> {
        self.replies.recv_timeout(timeout).ok()
    }

    /// The next reply that is not an `ack` (acks may come in any number as batches commit).
    pub fn recv_non_ack(&mut self, timeout: Duration) -> Option<HostMessage> {
        let deadline = Instant::now() + timeout;
        loop {
            match self.replies.recv_timeout(deadline.saturating_duration_since(Instant::now())).ok()? {
                HostMessage::Ack { .. } => continue,
                other => return Some(other),
            }
        }
    }

    /// Waits until `task_id` is acknowledged up to `seq`, returning every other reply seen meanwhile.
    pub fn wait_for_ack(&mut self, task_id: &TaskId, seq: u64, timeout: Duration) -> Result<Vec<HostMessage>> {
        let deadline = Instant::now() + timeout;
        let mut others = Vec::new();
        loop {
            let left = deadline.saturating_duration_since(Instant::now());
            match self.replies.recv_timeout(left) {
                Ok(HostMessage::Ack { task_id: acked, seq: acked_seq }) if &acked == task_id && acked_seq >= seq => {
                    return Ok(others);
                }
                Ok(HostMessage::Ack { .. }) => {}
                Ok(other) => others.push(other),
                Err(_) => bail!("no ack of {task_id} seq {seq} within {timeout:?}; other replies: {others:?}"),
            }
        }
    }

    /// Closes stdin, as Chrome does when the port closes, and waits for the host to exit.
    pub fn close(mut self) -> Result<(ExitStatus, Vec<HostMessage>)> {
        drop(self.stdin.take());
        let status = self.child.wait()?;
        Ok((status, self.replies.try_iter().collect()))
    }

    /// Kills the host at once (SIGKILL on Unix), as a crash would.
    pub fn kill(mut self) -> Result<()> {
        self.child.kill()?;
        self.child.wait()?;
        Ok(())
    }

    pub fn wait(&mut self) -> Result<ExitStatus> {
        Ok(self.child.wait()?)
    }
}

impl Drop for HostClient {
    fn drop(&mut self) {
        if let Ok(None) = self.child.try_wait() {
            let _ = self.child.kill();
            let _ = self.child.wait();
        }
    }
}

fn read_frame(input: &mut impl Read) -> Option<Vec<u8>> {
    let mut prefix = [0u8; 4];
    input.read_exact(&mut prefix).ok()?;
    let mut frame = vec![0; u32::from_ne_bytes(prefix) as usize];
    input.read_exact(&mut frame).ok()?;
    Some(frame)
}

/// Builds one task's messages with consecutive sequence numbers, as the extension does.
pub struct TaskMessages {
    pub task_id: TaskId,
    next_seq: u64,
    next_body: u64,
}

impl TaskMessages {
    pub fn new(task_id: TaskId) -> TaskMessages {
        TaskMessages { task_id, next_seq: 1, next_body: 0 }
    }

    /// The seq the next message will carry.
    pub fn next_seq(&self) -> u64 {
        self.next_seq
    }

    /// The seq of the last message built.
    pub fn last_seq(&self) -> u64 {
        self.next_seq - 1
    }

    fn message(&mut self, body: ClientBody) -> ClientMessage {
        let seq = self.next_seq;
        self.next_seq += 1;
        ClientMessage { seq, body }
    }

    pub fn start(&mut self, start: TaskStart) -> ClientMessage {
        assert_eq!(start.task_id, self.task_id);
        self.message(ClientBody::StartTask(start))
    }

    pub fn events(&mut self, events: Vec<Event>) -> ClientMessage {
        self.message(ClientBody::Events { task_id: self.task_id.clone(), events })
    }

    /// A body as chunks of at most `chunk_bytes`.
    pub fn body(&mut self, request_id: &str, part: BodyPart, bytes: &[u8], chunk_bytes: usize) -> Vec<ClientMessage> {
        let body_id = format!("body-{}", self.next_body);
        self.next_body += 1;
        let chunks: Vec<&[u8]> =
            if bytes.is_empty() { vec![&[][..]] } else { bytes.chunks(chunk_bytes.max(1)).collect() };
        let count = chunks.len();
        chunks
            .into_iter()
            .enumerate()
            .map(|(index, chunk)| {
                self.message(ClientBody::BodyChunk {
                    task_id: self.task_id.clone(),
                    body_id: body_id.clone(),
                    request_id: request_id.to_owned(),
                    part,
                    index: index as u64,
                    data: base64::engine::general_purpose::STANDARD.encode(chunk),
                    last: index + 1 == count,
                })
            })
            .collect()
    }

    pub fn screenshot(&mut self, ts: f64, tab_id: i64, png: &[u8], reason: &str) -> ClientMessage {
        self.message(ClientBody::Screenshot {
            task_id: self.task_id.clone(),
            ts,
            tab_id: Some(tab_id),
            format: ImageFormat::Png,
            reason: reason.to_owned(),
            viewport: None,
            after_action_ts: None,
            data: base64::engine::general_purpose::STANDARD.encode(png),
        })
    }

    pub fn dom_snapshot(
        &mut self,
        ts: f64,
        tab_id: i64,
        url: &str,
        html: &str,
        accessibility: Option<serde_json::Value>,
    ) -> ClientMessage {
        self.message(ClientBody::DomSnapshot {
            task_id: self.task_id.clone(),
            ts,
            tab_id: Some(tab_id),
            frame_id: None,
            url: url.to_owned(),
            reason: "load".to_owned(),
            html: html.to_owned(),
            accessibility,
            after_action_ts: None,
        })
    }

    pub fn stop(&mut self, ts: f64, answer: Option<&str>) -> ClientMessage {
        self.message(ClientBody::StopTask { task_id: self.task_id.clone(), answer: answer.map(str::to_owned), ts })
    }

    pub fn discard(&mut self) -> ClientMessage {
        self.message(ClientBody::DiscardTask { task_id: self.task_id.clone() })
    }
}

/// The smallest valid PNG (1×1, transparent), for tests and demos that need a real image.
pub const TINY_PNG: &[u8] = &[
    0x89, 0x50, 0x4e, 0x47, 0x0d, 0x0a, 0x1a, 0x0a, 0x00, 0x00, 0x00, 0x0d, 0x49, 0x48, 0x44, 0x52, 0x00, 0x00, 0x00,
    0x01, 0x00, 0x00, 0x00, 0x01, 0x08, 0x06, 0x00, 0x00, 0x00, 0x1f, 0x15, 0xc4, 0x89, 0x00, 0x00, 0x00, 0x0d, 0x49,
    0x44, 0x41, 0x54, 0x78, 0x9c, 0x63, 0x00, 0x01, 0x00, 0x00, 0x05, 0x00, 0x01, 0x0d, 0x0a, 0x2d, 0xb4, 0x00, 0x00,
    0x00, 0x00, 0x49, 0x45, 0x4e, 0x44, 0xae, 0x42, 0x60, 0x82,
];
