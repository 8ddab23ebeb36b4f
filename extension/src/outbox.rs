//! The extension's half of the protocol's reliability: every message of a task gets the next sequence
//! number and is kept until the host acknowledges it; after a reconnect, the host's `hello` says how far it
//! committed and everything after that is sent again.
//!
//! The buffer is bounded. When the host is gone for long and the buffer fills, `push` refuses and the
//! caller must say so where the person sees it: nothing is dropped silently.

use std::collections::VecDeque;

use trace_manifest::task::TaskId;
use trace_manifest::wire::{ClientBody, ClientMessage};

/// Default bound of unacknowledged bytes: a minute or two of heavy browsing while the host restarts.
pub const DEFAULT_LIMIT_BYTES: usize = 256 << 20;

#[derive(Debug)]
pub struct Outbox {
    task_id: TaskId,
    next_seq: u64,
    pending: VecDeque<(u64, String)>,
    pending_bytes: usize,
    limit_bytes: usize,
}

/// The message was not queued: the buffer of unacknowledged messages is full.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct OutboxFull {
    pub pending_bytes: usize,
}

impl Outbox {
    /// A new task's outbox: its first message, `start_task`, gets seq 1.
    pub fn new(task_id: TaskId, limit_bytes: usize) -> Outbox {
        Outbox::continuing(task_id, 0, limit_bytes)
    }

    /// The outbox of a task whose messages up to `acked_seq` the host has committed (the extension
    /// restarted and asked with `hello`).
    pub fn continuing(task_id: TaskId, acked_seq: u64, limit_bytes: usize) -> Outbox {
        Outbox { task_id, next_seq: acked_seq + 1, pending: VecDeque::new(), pending_bytes: 0, limit_bytes }
    }

    pub fn task_id(&self) -> &TaskId {
        &self.task_id
    }

    /// Numbers and keeps a message; returns the frame to send now.
    pub fn push(&mut self, body: ClientBody) -> Result<&str, OutboxFull> {
        let message = ClientMessage { seq: self.next_seq, body };
        let json = serde_json::to_string(&message).expect("client messages always serialize");
        if self.pending_bytes + json.len() > self.limit_bytes && !self.pending.is_empty() {
            return Err(OutboxFull { pending_bytes: self.pending_bytes });
        }
        self.next_seq += 1;
        self.pending_bytes += json.len();
        self.pending.push_back((message.seq, json));
        Ok(&self.pending.back().expect("just pushed").1)
    }

    /// The host committed everything up to `seq`.
    pub fn ack(&mut self, seq: u64) {
        while let Some((front, json)) = self.pending.front() {
            if *front > seq {
                break;
            }
            self.pending_bytes -= json.len();
            self.pending.pop_front();
        }
    }

    /// After a reconnect: drops what the host has, and returns every frame to send again, in order.
    pub fn resend_after(&mut self, acked_seq: u64) -> Vec<&str> {
        self.ack(acked_seq);
        self.pending.iter().map(|(_, json)| json.as_str()).collect()
    }

    pub fn pending_messages(&self) -> usize {
        self.pending.len()
    }

    pub fn pending_bytes(&self) -> usize {
        self.pending_bytes
    }

    /// The seq the last queued message got (0 if none yet).
    pub fn last_seq(&self) -> u64 {
        self.next_seq - 1
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn events(task: &str) -> ClientBody {
        ClientBody::Events { task_id: task.parse().unwrap(), events: vec![] }
    }

    #[test]
    fn messages_stay_until_acknowledged_and_are_resent_in_order() {
        let mut outbox = Outbox::new("t".parse().unwrap(), DEFAULT_LIMIT_BYTES);
        for _ in 0..5 {
            outbox.push(events("t")).unwrap();
        }
        assert!(outbox.push(events("t")).unwrap().starts_with(r#"{"seq":6,"#));
        outbox.ack(2);
        assert_eq!(outbox.pending_messages(), 4);
        let resend = outbox.resend_after(4);
        assert_eq!(resend.len(), 2);
        assert!(resend[0].starts_with(r#"{"seq":5,"#) && resend[1].starts_with(r#"{"seq":6,"#));
        outbox.ack(6);
        assert_eq!((outbox.pending_messages(), outbox.pending_bytes()), (0, 0));
    }

    #[test]
    fn a_full_buffer_refuses_instead_of_dropping() {
        let mut outbox = Outbox::new("t".parse().unwrap(), 110); // room for two 51-byte messages
        outbox.push(events("t")).unwrap();
        outbox.push(events("t")).unwrap();
        let refused = outbox.push(events("t")).unwrap_err();
        assert!(refused.pending_bytes > 50);
        assert_eq!(outbox.last_seq(), 2, "a refused message takes no seq, so the stream has no gap");
        outbox.ack(2);
        assert!(outbox.push(events("t")).is_ok());
    }

    #[test]
    fn a_continuing_outbox_numbers_after_what_the_host_committed() {
        let mut outbox = Outbox::continuing("t".parse().unwrap(), 41, DEFAULT_LIMIT_BYTES);
        assert!(outbox.push(events("t")).unwrap().starts_with(r#"{"seq":42,"#));
    }
}
