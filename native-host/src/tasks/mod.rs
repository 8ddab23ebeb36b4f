//! The task store: the one owner of `tasks.db`, of each task's status and lock, of finalizing a task's
//! bundle, and of recovering recordings whose host is gone. [`TaskStore::open`] opens the database and
//! recovers once. Readers (`export`, `process`, `dataset`, `view`, `requests`, `import`, `submit`) ask it for
//! a task's bundle for a [`Purpose`] and get a [`TaskBundle`]: the task's row and finished bundle directory,
//! with the task's lock held for as long as they read. The writer (`ingest`) takes tasks to record
//! ([`TaskStore::take_for_writing`]), applies each batch of messages in a [`WriteBatch`], and finalizes a
//! task when it stops. Nothing above this module runs SQL on the tasks tables or takes a task's lock by
//! hand, so the rules live here once: a task is read only when stopped or interrupted, under its lock, and
//! finalized before it is read.
//!
//! - [`db`]: `tasks.db`'s schema, migrations and queries (rows of tasks, events, bodies, files).
//! - [`lock`]: the lock that says which process writes a task.
//! - [`staging`]: `.parts/`, where files wait for their commit, and the moves a crash interrupted.
//! - [`finalize`]: a task's rows and files written as a bundle directory.
//! - [`recovery`]: tasks left `recording` by a host that is gone, marked interrupted.
//! - [`writes`]: the writer's batch, one transaction.

mod db;
mod finalize;
mod lock;
mod recovery;
mod staging;
mod writes;

use std::path::{Path, PathBuf};
use std::time::Duration;

use anyhow::{Context, Result, bail};
use rusqlite::{Connection, Transaction, TransactionBehavior};
use trace_manifest::bundle::FileEntry;
use trace_manifest::event::EventRecord;
use trace_manifest::task::{TaskId, TaskStart, TaskStatus};
use trace_manifest::wire::{TASK_BEING_WRITTEN, TASK_NOT_YET_STOPPED};

use crate::paths::{DataDir, PARTS_DIR};

pub use db::{BodyRow, TaskRow};
pub use lock::TaskLock;
pub use staging::{body_part_path, move_into_place, staged_path};
pub use writes::WriteBatch;

/// What a reader wants a task's bundle for; it words the refusals ("nothing is left to export").
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Purpose {
    Export,
    Process,
    /// The extension's review page, which shows it.
    Review,
    /// The person's description and answer, saved.
    Annotate,
    /// A credential the person says is no secret, recorded as plain typing.
    Correct,
    Map,
    AddToDataset,
}

impl Purpose {
    fn verb(self) -> &'static str {
        match self {
            Purpose::Export => "export",
            Purpose::Process => "process",
            Purpose::Review => "review",
            Purpose::Annotate => "annotate",
            Purpose::Correct => "change",
            Purpose::Map => "map",
            Purpose::AddToDataset => "add to a dataset",
        }
    }
}

/// Why a store opened to read cannot set anything right.
#[derive(Debug)]
pub enum CannotWrite {
    /// The database could be opened only read-only (a full disk, say).
    ReadOnly,
    /// Marking recordings whose host is gone interrupted failed.
    RecoveryFailed(anyhow::Error),
}

/// The data directory's tasks: `tasks.db` and the capture directories, opened by one process.
pub struct TaskStore {
    conn: Connection,
    data: DataDir,
}

impl TaskStore {
    /// Opens (creating if need be) the data directory's database, and marks the recordings whose host is
    /// gone interrupted, once, so that what the store says of a task's status is true from then on.
    pub fn open(data: &DataDir) -> Result<TaskStore> {
        let store = TaskStore { conn: db::open(&data.database())?, data: data.clone() };
        recovery::mark_interrupted(&store.conn, &store.data)?;
        Ok(store)
    }

    /// Opens the store for the writer, the native host, as [`TaskStore::open`] does, but a recovery that
    /// fails (a full disk) is logged rather than fatal: a host that does not start records nothing, and
    /// the tasks it would have marked are marked by the next store that opens.
    pub fn open_to_write(data: &DataDir) -> Result<TaskStore> {
        let store = TaskStore { conn: db::open(&data.database())?, data: data.clone() };
        if let Err(error) = recovery::mark_interrupted(&store.conn, &store.data) {
            tracing::error!("cannot mark the recordings whose host is gone interrupted: {error:#}");
        }
        Ok(store)
    }

    /// Opens the store as [`TaskStore::open`] does, but for listing, which must work when nothing else does
    /// (a full disk): the database is opened read-only when it must be, and what could not be set right is
    /// said rather than failing.
    pub fn open_to_read(data: &DataDir) -> Result<(TaskStore, Option<CannotWrite>)> {
        let (conn, read_only) = db::open_to_read(&data.database())?;
        let store = TaskStore { conn, data: data.clone() };
        let cannot_write = if read_only {
            Some(CannotWrite::ReadOnly)
        } else {
            recovery::mark_interrupted(&store.conn, &store.data).err().map(CannotWrite::RecoveryFailed)
        };
        Ok((store, cannot_write))
    }

    /// The data directory the store keeps.
    pub fn data(&self) -> &DataDir {
        &self.data
    }

    pub fn task(&self, task_id: &TaskId) -> Result<Option<TaskRow>> {
        db::task(&self.conn, task_id)
    }

    /// Every task, oldest first.
    pub fn tasks(&self) -> Result<Vec<TaskRow>> {
        db::tasks(&self.conn)
    }

    /// When `trace-host process` last wrote the task's derived files, if it ever did.
    pub fn processed_at(&self, task_id: &TaskId) -> Result<Option<f64>> {
        db::processed_at(&self.conn, task_id)
    }

    /// A stopped (or interrupted) task's bundle, finalized if it is not yet, held under the task's lock so
    /// that no host writes it while the caller reads it.
    pub fn bundle_for(&self, task_id: &TaskId, purpose: Purpose) -> Result<TaskBundle<'_>> {
        let task = self.task(task_id)?.with_context(|| format!("no task {task_id}; `trace-host tasks` lists them"))?;
        match task.status {
            TaskStatus::Recording => bail!("task {task_id} {TASK_NOT_YET_STOPPED}; stop it in the extension first"),
            TaskStatus::Discarded => bail!("task {task_id} was discarded; nothing is left to {}", purpose.verb()),
            TaskStatus::Stopped | TaskStatus::Interrupted => {}
        }
        let dir = self.data.capture(task_id);
        // A host finalizing the task at its stop, or recording it again, holds its lock.
        let lock = TaskLock::acquire(&self.data, task_id, lock::READER_WAIT)?
            .with_context(|| format!("task {task_id} {TASK_BEING_WRITTEN}; try again when it stops"))?;
        if finalize::needs_finalizing(&task, &dir) {
            finalize::finalize(&self.conn, &self.data, task_id)?;
        }
        let processed_at = db::processed_at(&self.conn, task_id)?;
        Ok(TaskBundle { store: self, task, dir, processed_at, _lock: lock })
    }

    /// Deletes a stopped recording, leaving its row as the tombstone a discarded recording leaves (a late
    /// resend of its messages is then refused rather than starting it again).
    pub fn discard(&self, task_id: &TaskId) -> Result<()> {
        let task = self.task(task_id)?.with_context(|| format!("no task {task_id}"))?;
        match task.status {
            TaskStatus::Recording => bail!("{task_id} is still being recorded; discard it in the popup"),
            TaskStatus::Discarded => return Ok(()),
            TaskStatus::Stopped | TaskStatus::Interrupted => {}
        }
        let dir = self.data.capture(task_id);
        let lock = TaskLock::acquire(&self.data, task_id, lock::READER_WAIT)?
            .with_context(|| format!("{task_id} is being written by trace-host; try again in a moment"))?;
        let transaction = self.conn.unchecked_transaction()?;
        db::clear_task_data(&transaction, task_id)?;
        db::set_status(&transaction, task_id, TaskStatus::Discarded)?;
        transaction.commit()?;
        drop(lock);
        match std::fs::remove_dir_all(&dir) {
            Err(error) if error.kind() != std::io::ErrorKind::NotFound => {
                Err(error).with_context(|| format!("cannot delete {}", dir.display()))
            }
            _ => Ok(()),
        }
    }

    /// Begins registering a bundle made elsewhere as the task `start` describes, with its `status` and, when
    /// it has one, its answer and end. Nothing of it is seen until [`Import::commit`].
    pub fn begin_import(
        &self,
        start: &TaskStart,
        status: TaskStatus,
        answer: Option<(&str, f64)>,
    ) -> Result<Import<'_>> {
        let transaction = self.conn.unchecked_transaction()?;
        db::insert_task(&transaction, start, 0, status, true)?;
        if let Some((answer, ended_at)) = answer {
            db::finish_task(&transaction, &start.task_id, Some(answer), ended_at)?;
            db::set_status(&transaction, &start.task_id, status)?;
        }
        Ok(Import { transaction, task_id: start.task_id.clone() })
    }

    /// Takes `task_id` for this process to record: its lock (waiting up to `wait` for another process), its
    /// staging folder, and the moves a crash left unfinished there. `None` while another process holds it.
    /// Never call it inside a [`WriteBatch`]: the holder may need the database to let go.
    pub fn take_for_writing(&self, task_id: &TaskId, wait: Duration) -> Result<Option<TaskLock>> {
        let Some(lock) = TaskLock::acquire(&self.data, task_id, wait).context("cannot take the task's lock")? else {
            return Ok(None);
        };
        let parts = self.data.capture(task_id).join(PARTS_DIR);
        std::fs::create_dir_all(&parts).context("cannot create the task's working directory")?;
        // The task is taken even so: its staged files are moved again when it is finalized.
        if let Err(error) = staging::recover_staged_files(&self.conn, &self.data, task_id) {
            tracing::error!(task = %task_id, "cannot recover staged files: {error:#}");
        }
        Ok(Some(lock))
    }

    /// Begins the transaction of one batch of the writer's messages (`BEGIN IMMEDIATE`: writers wait for
    /// each other here rather than failing at their first write).
    pub fn begin_batch(&mut self) -> rusqlite::Result<WriteBatch<'_>> {
        Ok(WriteBatch::new(self.conn.transaction_with_behavior(TransactionBehavior::Immediate)?))
    }

    /// Writes the bundle of the task whose lock the writer holds (it has just stopped) and returns its
    /// directory.
    pub fn finalize(&self, lock: &TaskLock) -> Result<PathBuf> {
        finalize::finalize(&self.conn, &self.data, lock.task_id())
    }

    /// Marks the task whose lock the writer holds interrupted, if it is still recording (its port closed);
    /// says whether it was.
    pub fn interrupt(&self, lock: &TaskLock) -> Result<bool> {
        let task_id = lock.task_id();
        let recording = self.task(task_id)?.is_some_and(|task| task.status == TaskStatus::Recording);
        if recording {
            db::set_status(&self.conn, task_id, TaskStatus::Interrupted)?;
        }
        Ok(recording)
    }
}

/// Every task as last recorded, for the viewer, which writes nothing: no recovery runs (a recording whose
/// host is gone may still show as recording), and the database is opened read-only where it must be. Empty
/// when there is no database to read.
pub fn tasks_as_recorded(data: &DataDir) -> Result<Vec<TaskRow>> {
    match db::open_to_read(&data.database()) {
        Ok((conn, _)) => db::tasks(&conn),
        Err(_) => Ok(Vec::new()),
    }
}

/// A task's finished bundle, held under the task's lock for as long as this value lives (see
/// [`TaskStore::bundle_for`]). The changes a reader may make to a stopped task go through it, so that
/// they are made under the lock.
pub struct TaskBundle<'s> {
    store: &'s TaskStore,
    task: TaskRow,
    dir: PathBuf,
    processed_at: Option<f64>,
    _lock: TaskLock,
}

impl TaskBundle<'_> {
    /// The task's row as it was when the bundle was taken.
    pub fn task(&self) -> &TaskRow {
        &self.task
    }

    /// The bundle directory.
    pub fn dir(&self) -> &Path {
        &self.dir
    }

    /// When `trace-host process` last wrote the task's derived files, if it ever did (as of when the bundle
    /// was taken: nobody else processes it while this view holds the lock).
    pub fn processed_at(&self) -> Option<f64> {
        self.processed_at
    }

    /// Records the derived files `written` into the bundle (so that a later finalize indexes them too),
    /// forgets the files `forgotten` it no longer holds, and notes the time of processing; in one
    /// transaction.
    pub fn record_processed(&self, written: &[FileEntry], forgotten: &[&str]) -> Result<()> {
        let task_id = &self.task.id;
        let transaction = self.store.conn.unchecked_transaction()?;
        for entry in written {
            db::record_derived_file(&transaction, task_id, &entry.path, entry.size, &entry.sha256)?;
        }
        for path in forgotten {
            db::forget_derived_file(&transaction, task_id, path)?;
        }
        db::set_processed(&transaction, task_id, trace_manifest::time_fmt::now_ms())?;
        transaction.commit()?;
        Ok(())
    }

    /// Every stored event of the task, in order, as its JSON, one at a time.
    pub fn for_each_event(&self, each: impl FnMut(&str) -> Result<()>) -> Result<()> {
        db::for_each_event(&self.store.conn, &self.task.id, each)
    }

    /// Rewrites stored events in place (their ids, times and types unchanged), in one transaction: only
    /// for a decision of the person's about what the events already hold.
    pub fn rewrite_events(&self, records: &[EventRecord]) -> Result<()> {
        let transaction = self.store.conn.unchecked_transaction()?;
        for record in records {
            db::rewrite_event(&transaction, &self.task.id, record)?;
        }
        transaction.commit()?;
        Ok(())
    }

    /// The person's corrections of the task's description and answer, made when reviewing it.
    pub fn set_description_and_answer(&self, description: &str, answer: Option<&str>) -> Result<()> {
        db::set_description_and_answer(&self.store.conn, &self.task.id, description, answer)
    }

    /// Writes the bundle again from the database, after a change made through this view.
    pub fn finalize_again(&self) -> Result<()> {
        finalize::finalize(&self.store.conn, &self.store.data, &self.task.id).map(drop)
    }
}

/// A bundle being registered by [`TaskStore::begin_import`]: its rows are written in one transaction.
pub struct Import<'s> {
    transaction: Transaction<'s>,
    task_id: TaskId,
}

impl Import<'_> {
    /// Adds the next event of the bundle, in order.
    pub fn add_event(&self, record: &mut EventRecord) -> Result<()> {
        db::append_event(&self.transaction, &self.task_id, 0, record).map(drop)
    }

    /// Records a file of the bundle (content; the generated files are written anew when it is finalized).
    pub fn record_file(&self, entry: &FileEntry) -> Result<()> {
        db::record_file(&self.transaction, &self.task_id, &entry.path, entry.size, &entry.sha256).map(drop)
    }

    pub fn commit(self) -> rusqlite::Result<()> {
        self.transaction.commit()
    }
}

#[cfg(test)]
mod tests {
    use trace_manifest::task::{RecorderInfo, TaskType};

    use super::*;

    fn start(id: &str) -> TaskStart {
        TaskStart {
            task_id: id.parse().unwrap(),
            source: "self".to_owned(),
            task_type: TaskType::Action,
            description: "buy a mug".to_owned(),
            website: "http://127.0.0.1:8000/".to_owned(),
            recorder: RecorderInfo { name: "test".to_owned(), version: "0".to_owned(), ..RecorderInfo::default() },
            started_at: 1_000.0,
        }
    }

    /// A task started as a host would start it, but with no host holding its lock: what a killed host leaves.
    fn abandoned_recording(store: &mut TaskStore, id: &str) -> TaskId {
        let batch = store.begin_batch().unwrap();
        batch.start_task(&start(id), 1).unwrap();
        batch.commit().unwrap();
        id.parse().unwrap()
    }

    fn stopped_task(store: &mut TaskStore, id: &str) -> TaskId {
        let task_id = abandoned_recording(store, id);
        let batch = store.begin_batch().unwrap();
        batch.stop_task(&task_id, None, 2_000.0).unwrap();
        batch.commit().unwrap();
        task_id
    }

    fn status(store: &TaskStore, task_id: &TaskId) -> TaskStatus {
        store.task(task_id).unwrap().unwrap().status
    }

    #[test]
    fn opening_the_store_marks_recordings_whose_host_is_gone_interrupted_once() {
        let dir = tempfile::tempdir().unwrap();
        let data = DataDir::at(dir.path().to_owned()).unwrap();
        let mut store = TaskStore::open(&data).unwrap();
        let gone = abandoned_recording(&mut store, "gone");
        assert_eq!(status(&store, &gone), TaskStatus::Recording);
        drop(store);

        let mut store = TaskStore::open(&data).unwrap();
        assert_eq!(status(&store, &gone), TaskStatus::Interrupted);
        // Recovery ran when the store opened, not on every read: a recording cut off since is left as it is
        // until a store opens again.
        let later = abandoned_recording(&mut store, "later");
        let stopped = stopped_task(&mut store, "stopped");
        drop(store.bundle_for(&stopped, Purpose::Export).unwrap());
        assert_eq!(store.tasks().unwrap().len(), 3);
        assert_eq!(status(&store, &later), TaskStatus::Recording);
        drop(store);
        assert_eq!(status(&TaskStore::open(&data).unwrap(), &later), TaskStatus::Interrupted);
    }

    #[test]
    fn a_recording_whose_host_holds_its_lock_is_left_recording() {
        let dir = tempfile::tempdir().unwrap();
        let data = DataDir::at(dir.path().to_owned()).unwrap();
        let mut store = TaskStore::open(&data).unwrap();
        let live = abandoned_recording(&mut store, "live");
        let _host = store.take_for_writing(&live, Duration::ZERO).unwrap().unwrap();
        assert_eq!(status(&TaskStore::open(&data).unwrap(), &live), TaskStatus::Recording);
    }

    #[test]
    fn a_readers_bundle_holds_the_tasks_lock_until_it_is_dropped() {
        let dir = tempfile::tempdir().unwrap();
        let data = DataDir::at(dir.path().to_owned()).unwrap();
        let mut store = TaskStore::open(&data).unwrap();
        let task_id = stopped_task(&mut store, "held");
        let bundle = store.bundle_for(&task_id, Purpose::Export).unwrap();
        assert_eq!(bundle.task().status, TaskStatus::Stopped);
        assert!(bundle.dir().join(trace_manifest::bundle::MANIFEST_FILE).is_file(), "finalized before it is read");

        // Another process (a second store on the same directory) can take it neither to write nor to read.
        let other = TaskStore::open(&data).unwrap();
        assert!(other.take_for_writing(&task_id, Duration::ZERO).unwrap().is_none());
        let error = other.bundle_for(&task_id, Purpose::Process).err().unwrap().to_string();
        assert!(error.contains(TASK_BEING_WRITTEN), "{error}");
        drop(bundle);
        assert!(other.take_for_writing(&task_id, Duration::ZERO).unwrap().is_some());
    }

    #[test]
    fn a_task_that_cannot_be_read_says_why() {
        let dir = tempfile::tempdir().unwrap();
        let data = DataDir::at(dir.path().to_owned()).unwrap();
        let mut store = TaskStore::open(&data).unwrap();
        let unknown: TaskId = "nowhere".parse().unwrap();
        let error = store.bundle_for(&unknown, Purpose::Export).err().unwrap().to_string();
        assert_eq!(error, "no task nowhere; `trace-host tasks` lists them");

        let recording = abandoned_recording(&mut store, "recording");
        let _host = store.take_for_writing(&recording, Duration::ZERO).unwrap().unwrap();
        let error = store.bundle_for(&recording, Purpose::Export).err().unwrap().to_string();
        assert!(error.contains(TASK_NOT_YET_STOPPED), "{error}");

        let discarded = stopped_task(&mut store, "discarded");
        store.discard(&discarded).unwrap();
        assert!(!data.capture(&discarded).exists());
        let error = store.bundle_for(&discarded, Purpose::AddToDataset).err().unwrap().to_string();
        assert_eq!(error, "task discarded was discarded; nothing is left to add to a dataset");
    }
}
