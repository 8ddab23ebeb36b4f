//! The writer's batch: one transaction in which `ingest` applies a batch of the extension's messages, a
//! savepoint per message, so that one bad message is rejected alone while the batch's acknowledgement costs
//! a single commit. Nothing written here is seen, nor acknowledged, before [`WriteBatch::commit`].

use anyhow::Result;
use rusqlite::Transaction;
use trace_manifest::event::EventRecord;
use trace_manifest::task::{TaskId, TaskStart, TaskStatus};

use super::db::{self, BodyRow, TaskRow};

pub struct WriteBatch<'s> {
    transaction: Transaction<'s>,
}

impl<'s> WriteBatch<'s> {
    pub(super) fn new(transaction: Transaction<'s>) -> WriteBatch<'s> {
        WriteBatch { transaction }
    }

    pub fn commit(self) -> rusqlite::Result<()> {
        self.transaction.commit()
    }

    /// Runs `work` within a savepoint: if it fails, nothing it wrote stays, and the rest of the batch stands.
    pub fn within_savepoint<T, E: From<rusqlite::Error>>(&self, work: impl FnOnce() -> Result<T, E>) -> Result<T, E> {
        self.transaction.execute_batch("SAVEPOINT message")?;
        match work() {
            Ok(value) => {
                self.transaction.execute_batch("RELEASE message")?;
                Ok(value)
            }
            Err(error) => {
                self.transaction.execute_batch("ROLLBACK TO message; RELEASE message")?;
                Err(error)
            }
        }
    }

    pub fn task(&self, task_id: &TaskId) -> Result<Option<TaskRow>> {
        db::task(&self.transaction, task_id)
    }

    /// Starts recording the task `start` describes, its first message being `seq`.
    pub fn start_task(&self, start: &TaskStart, seq: u64) -> Result<()> {
        db::insert_task(&self.transaction, start, seq, TaskStatus::Recording, false)
    }

    pub fn set_status(&self, task_id: &TaskId, status: TaskStatus) -> Result<()> {
        db::set_status(&self.transaction, task_id, status)
    }

    /// Consumes the task's messages up to `seq`.
    pub fn set_last_seq(&self, task_id: &TaskId, seq: u64) -> Result<()> {
        db::set_last_seq(&self.transaction, task_id, seq)
    }

    /// Stops the task with the person's answer.
    pub fn stop_task(&self, task_id: &TaskId, answer: Option<&str>, ended_at: f64) -> Result<()> {
        db::finish_task(&self.transaction, task_id, answer, ended_at)
    }

    /// Forgets everything recorded for a task and marks it discarded; its row stays as a tombstone, so that
    /// a late resend of its messages is refused rather than starting the task again.
    pub fn discard_task(&self, task_id: &TaskId) -> Result<()> {
        db::clear_task_data(&self.transaction, task_id)?;
        db::set_status(&self.transaction, task_id, TaskStatus::Discarded)
    }

    /// Appends an event, numbering it after the task's last one; returns its id.
    pub fn append_event(&self, task_id: &TaskId, seq: u64, record: &mut EventRecord) -> Result<u64> {
        db::append_event(&self.transaction, task_id, seq, record)
    }

    /// The id the next event of `task_id` will get.
    pub fn next_event_id(&self, task_id: &TaskId) -> Result<u64> {
        db::next_event_id(&self.transaction, task_id)
    }

    /// Records a file of the capture directory; returns false if it was already recorded (a repeated body).
    pub fn record_file(&self, task_id: &TaskId, path: &str, size: u64, sha256: &str) -> Result<bool> {
        db::record_file(&self.transaction, task_id, path, size, sha256)
    }

    /// A body being streamed, as committed so far.
    pub fn body(&self, task_id: &TaskId, body_id: &str) -> Result<Option<BodyRow>> {
        db::body(&self.transaction, task_id, body_id)
    }

    pub fn put_body(&self, task_id: &TaskId, body_id: &str, body: &BodyRow) -> Result<()> {
        db::put_body(&self.transaction, task_id, body_id, body)
    }
}
