//! The recovery of recordings whose host is gone (killed, or its machine restarted): their tasks, left
//! `recording`, are marked `interrupted`. A live host holds its task's lock, so a lock that can be taken
//! means nobody records. It runs when the store opens ([`super::TaskStore::open`]), once; the files such a
//! host left staged are moved into place by whoever takes or finalizes the task next
//! ([`super::staging::recover_staged_files`]).

use rusqlite::Connection;
use trace_manifest::task::{TaskId, TaskStatus};

use super::db;
use super::lock::TaskLock;
use crate::paths::DataDir;

/// Marks every task left `recording` by a host that is gone `interrupted`; returns them.
pub(super) fn mark_interrupted(conn: &Connection, data: &DataDir) -> anyhow::Result<Vec<TaskId>> {
    let mut interrupted = Vec::new();
    for task in db::tasks(conn)? {
        if task.status != TaskStatus::Recording {
            continue;
        }
        let abandoned = !TaskLock::is_held(data, &task.id);
        if abandoned {
            db::set_status(conn, &task.id, TaskStatus::Interrupted)?;
            tracing::info!(task = %task.id, "no host is recording this task: interrupted");
            interrupted.push(task.id);
        }
    }
    Ok(interrupted)
}
