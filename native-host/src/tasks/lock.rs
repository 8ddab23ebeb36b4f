//! The lock that says "this process is writing this task": a [`FolderLock`] on `captures/<task_id>/`. A
//! task left `recording` whose lock can be taken has no host any more ([`super::recovery`]); a reader holds
//! it while it reads a bundle, so that no host finalizes or records into it meanwhile.

use std::time::Duration;

use trace_manifest::task::TaskId;

use crate::folder_lock::FolderLock;
use crate::paths::DataDir;

/// How long a reader waits for a host finalizing the task at its stop (or recording it again).
pub(super) const READER_WAIT: Duration = Duration::from_secs(5);

/// A task's lock, held for as long as this value lives.
pub struct TaskLock {
    task_id: TaskId,
    _lock: FolderLock,
}

impl TaskLock {
    /// Takes the lock of `task_id` (creating its capture directory if need be), waiting up to `wait` for
    /// another process to let go of it. `None` if it is still held after that.
    pub(super) fn acquire(data: &DataDir, task_id: &TaskId, wait: Duration) -> std::io::Result<Option<TaskLock>> {
        let lock = FolderLock::acquire(&data.capture(task_id), wait)?;
        Ok(lock.map(|lock| TaskLock { task_id: task_id.clone(), _lock: lock }))
    }

    /// Is some process holding the lock of `task_id` right now?
    pub(super) fn is_held(data: &DataDir, task_id: &TaskId) -> bool {
        FolderLock::is_held(&data.capture(task_id))
    }

    /// The task this lock is of.
    pub fn task_id(&self) -> &TaskId {
        &self.task_id
    }
}
