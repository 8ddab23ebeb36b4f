//! `tasks.db`: the durable record of every task and event, its schema, migrations and queries; only the
//! task store ([`super`]) runs them. SQLite in WAL mode, so that several host
//! processes (Chrome starts one per port) and the CLI can read and write it at once; writers take the lock
//! with `BEGIN IMMEDIATE` and wait for each other.
//!
//! Durability: a message is acknowledged only after the transaction holding it commits. With
//! `synchronous=NORMAL` a commit survives the host being killed or the browser crashing; it may not survive
//! the operating system losing power, which is the usual trade-off of WAL mode.

use std::path::Path;
use std::time::{Duration, Instant};

use anyhow::{Context, Result};
use rusqlite::{Connection, OpenFlags, OptionalExtension, Row, Transaction, TransactionBehavior, params};
use trace_manifest::event::EventRecord;
use trace_manifest::task::{RecorderInfo, TaskId, TaskStart, TaskStatus, TaskType};

const SCHEMA_VERSION: i64 = 2;

/// The schema of version 1; [`MIGRATIONS`] take it to [`SCHEMA_VERSION`].
const SCHEMA: &str = "
CREATE TABLE tasks (
    id           TEXT PRIMARY KEY,
    source       TEXT NOT NULL,
    task_type    TEXT NOT NULL,
    description  TEXT NOT NULL,
    website      TEXT NOT NULL,
    recorder     TEXT NOT NULL,            -- RecorderInfo as JSON
    status       TEXT NOT NULL,
    answer       TEXT,
    started_at   REAL NOT NULL,            -- ms since the Unix epoch
    ended_at     REAL,
    last_seq     INTEGER NOT NULL,         -- highest committed sequence number
    event_count  INTEGER NOT NULL DEFAULT 0,
    byte_count   INTEGER NOT NULL DEFAULT 0, -- bytes of stored files (bodies once each, blobs)
    imported     INTEGER NOT NULL DEFAULT 0
);
CREATE TABLE events (
    task_id TEXT NOT NULL REFERENCES tasks(id) ON DELETE CASCADE,
    id      INTEGER NOT NULL,              -- 0, 1, 2, ... per task, in commit order
    seq     INTEGER NOT NULL,              -- the message that carried it
    ts      REAL NOT NULL,
    type    TEXT NOT NULL,
    json    TEXT NOT NULL,                 -- the EventRecord
    PRIMARY KEY (task_id, id)
) WITHOUT ROWID;
CREATE TABLE bodies (
    task_id    TEXT NOT NULL REFERENCES tasks(id) ON DELETE CASCADE,
    body_id    TEXT NOT NULL,
    request_id TEXT NOT NULL,
    part       TEXT NOT NULL,
    next_index INTEGER NOT NULL,           -- the chunk expected next
    size       INTEGER NOT NULL,           -- bytes committed so far
    sha256     TEXT,                       -- set once the last chunk is committed
    PRIMARY KEY (task_id, body_id)
) WITHOUT ROWID;
CREATE TABLE files (
    task_id TEXT NOT NULL REFERENCES tasks(id) ON DELETE CASCADE,
    path    TEXT NOT NULL,                 -- relative to the capture directory
    size    INTEGER NOT NULL,
    sha256  TEXT NOT NULL,
    PRIMARY KEY (task_id, path)
) WITHOUT ROWID;
";

/// `MIGRATIONS[i]` takes the schema from version `i + 1` to `i + 2`. Only ever append: a data directory may
/// be opened by an older host again only while the version is one it knows, so each step adds, never
/// changes.
const MIGRATIONS: [&str; 1] = [
    // 2: when `trace-host process` last wrote the task's derived files (ms since the Unix epoch).
    "ALTER TABLE tasks ADD COLUMN processed_at REAL;",
];

/// How long a writer waits for another to let go of the database.
const BUSY_TIMEOUT: Duration = Duration::from_secs(30);

/// Opens (and if need be creates) the database.
pub(super) fn open(path: &Path) -> Result<Connection> {
    let conn = Connection::open(path).with_context(|| format!("cannot open the database {}", path.display()))?;
    conn.busy_timeout(BUSY_TIMEOUT)?;
    // Switching a new database to WAL, or reading a WAL another process is recovering, can answer "busy"
    // at once without calling the busy handler (SQLite does so to avoid deadlocks). Two hosts starting
    // together on a fresh data directory hit this, so setting up retries for as long as a writer would wait.
    let deadline = Instant::now() + BUSY_TIMEOUT;
    loop {
        match set_up(&conn) {
            Ok(()) => return Ok(conn),
            Err(error) if is_busy(&error) && Instant::now() < deadline => {
                std::thread::sleep(Duration::from_millis(20));
            }
            Err(error) => return Err(error.context(format!("cannot set up the database {}", path.display()))),
        }
    }
}

/// Opens the database to read it, as [`open`] does; when the disk is full (or otherwise refuses the
/// writes setting up takes), opens it read-only instead, and then as it stands in its main file (what the
/// write-ahead log holds beyond the last checkpoint is then not seen). The flag says whether it came to
/// that: such a connection can only read.
pub(super) fn open_to_read(path: &Path) -> Result<(Connection, bool)> {
    let error = match open(path) {
        Ok(conn) => return Ok((conn, false)),
        Err(error) => error,
    };
    let cannot_write = matches!(
        error
            .chain()
            .find_map(|cause| cause.downcast_ref::<rusqlite::Error>())
            .and_then(rusqlite::Error::sqlite_error_code),
        Some(
            rusqlite::ErrorCode::DiskFull
                | rusqlite::ErrorCode::SystemIoFailure
                | rusqlite::ErrorCode::ReadOnly
                | rusqlite::ErrorCode::CannotOpen
        )
    );
    if !cannot_write || !path.exists() {
        return Err(error);
    }
    let read_only = OpenFlags::SQLITE_OPEN_READ_ONLY | OpenFlags::SQLITE_OPEN_URI | OpenFlags::SQLITE_OPEN_NO_MUTEX;
    let readable = |conn: Connection| -> Result<Connection> {
        conn.pragma_query_value(None, "user_version", |row| row.get::<_, i64>(0))?;
        Ok(conn)
    };
    if let Ok(conn) = Connection::open_with_flags(path, read_only).map_err(anyhow::Error::from).and_then(readable) {
        return Ok((conn, true));
    }
    let uri = format!("file:{}?immutable=1", path.display());
    let conn = Connection::open_with_flags(uri, read_only).map_err(anyhow::Error::from).and_then(readable);
    Ok((conn.map_err(|_| error)?, true))
}

fn set_up(conn: &Connection) -> Result<()> {
    conn.pragma_update(None, "journal_mode", "WAL")?;
    conn.pragma_update(None, "synchronous", "NORMAL")?;
    conn.pragma_update(None, "foreign_keys", "ON")?;
    migrate(conn)
}

fn is_busy(error: &anyhow::Error) -> bool {
    matches!(
        error.downcast_ref::<rusqlite::Error>().and_then(rusqlite::Error::sqlite_error_code),
        Some(rusqlite::ErrorCode::DatabaseBusy | rusqlite::ErrorCode::DatabaseLocked)
    )
}

fn migrate(conn: &Connection) -> Result<()> {
    let version: i64 = conn.pragma_query_value(None, "user_version", |row| row.get(0))?;
    if version > SCHEMA_VERSION {
        anyhow::bail!("the database was written by a newer trace-host (schema {version}); upgrade trace-host");
    }
    if version < SCHEMA_VERSION {
        // Two hosts may start at once on a new data dir: the immediate transaction makes one wait, and
        // rolls back if anything fails so that a retry starts clean.
        let transaction = Transaction::new_unchecked(conn, TransactionBehavior::Immediate)?;
        let mut version: i64 = transaction.pragma_query_value(None, "user_version", |row| row.get(0))?;
        if version == 0 {
            transaction.execute_batch(SCHEMA)?;
            version = 1;
        }
        // Another process may have migrated while this one waited for the lock: start from what is there.
        for migration in MIGRATIONS.iter().skip((version - 1).max(0) as usize) {
            transaction.execute_batch(migration)?;
        }
        transaction.pragma_update(None, "user_version", SCHEMA_VERSION)?;
        transaction.commit()?;
    }
    Ok(())
}

/// One row of `tasks`.
#[derive(Debug, Clone, PartialEq)]
pub struct TaskRow {
    pub id: TaskId,
    pub source: String,
    pub task_type: TaskType,
    pub description: String,
    pub website: String,
    pub recorder: RecorderInfo,
    pub status: TaskStatus,
    pub answer: Option<String>,
    pub started_at: f64,
    pub ended_at: Option<f64>,
    pub last_seq: u64,
    pub event_count: u64,
    pub byte_count: u64,
    pub imported: bool,
}

const TASK_COLUMNS: &str = "id, source, task_type, description, website, recorder, status, answer, \
     started_at, ended_at, last_seq, event_count, byte_count, imported";

fn task_from_row(row: &Row<'_>) -> rusqlite::Result<TaskRow> {
    let bad = |index: usize, message: String| {
        rusqlite::Error::FromSqlConversionFailure(index, rusqlite::types::Type::Text, message.into())
    };
    let id: String = row.get(0)?;
    let task_type: String = row.get(2)?;
    let recorder: String = row.get(5)?;
    let status: String = row.get(6)?;
    Ok(TaskRow {
        id: TaskId::try_from(id).map_err(|e| bad(0, e))?,
        source: row.get(1)?,
        task_type: TaskType::parse(&task_type).ok_or_else(|| bad(2, format!("unknown task type {task_type}")))?,
        description: row.get(3)?,
        website: row.get(4)?,
        recorder: serde_json::from_str(&recorder).map_err(|e| bad(5, e.to_string()))?,
        status: TaskStatus::parse(&status).ok_or_else(|| bad(6, format!("unknown status {status}")))?,
        answer: row.get(7)?,
        started_at: row.get(8)?,
        ended_at: row.get(9)?,
        last_seq: row.get::<_, i64>(10)? as u64,
        event_count: row.get::<_, i64>(11)? as u64,
        byte_count: row.get::<_, i64>(12)? as u64,
        imported: row.get(13)?,
    })
}

pub(super) fn task(conn: &Connection, id: &TaskId) -> Result<Option<TaskRow>> {
    let sql = format!("SELECT {TASK_COLUMNS} FROM tasks WHERE id = ?1");
    Ok(conn.query_row(&sql, [id.as_str()], task_from_row).optional()?)
}

/// Every task, oldest first.
pub(super) fn tasks(conn: &Connection) -> Result<Vec<TaskRow>> {
    let sql = format!("SELECT {TASK_COLUMNS} FROM tasks ORDER BY started_at, id");
    let mut statement = conn.prepare(&sql)?;
    let rows = statement.query_map([], task_from_row)?.collect::<rusqlite::Result<Vec<_>>>()?;
    Ok(rows)
}

pub(super) fn insert_task(
    conn: &Connection,
    start: &TaskStart,
    seq: u64,
    status: TaskStatus,
    imported: bool,
) -> Result<()> {
    conn.execute(
        "INSERT INTO tasks (id, source, task_type, description, website, recorder, status, started_at, last_seq, imported)
         VALUES (?1, ?2, ?3, ?4, ?5, ?6, ?7, ?8, ?9, ?10)",
        params![
            start.task_id.as_str(),
            start.source,
            start.task_type.as_str(),
            start.description,
            start.website,
            serde_json::to_string(&start.recorder)?,
            status.as_str(),
            start.started_at,
            seq as i64,
            imported,
        ],
    )?;
    Ok(())
}

pub(super) fn set_status(conn: &Connection, id: &TaskId, status: TaskStatus) -> Result<()> {
    conn.execute("UPDATE tasks SET status = ?2 WHERE id = ?1", params![id.as_str(), status.as_str()])?;
    Ok(())
}

pub(super) fn set_last_seq(conn: &Connection, id: &TaskId, seq: u64) -> Result<()> {
    conn.execute("UPDATE tasks SET last_seq = ?2 WHERE id = ?1", params![id.as_str(), seq as i64])?;
    Ok(())
}

pub(super) fn finish_task(conn: &Connection, id: &TaskId, answer: Option<&str>, ended_at: f64) -> Result<()> {
    conn.execute(
        "UPDATE tasks SET status = 'stopped', answer = ?2, ended_at = ?3 WHERE id = ?1",
        params![id.as_str(), answer, ended_at],
    )?;
    Ok(())
}

/// The person's corrections of a stopped task, made when reviewing it.
pub(super) fn set_description_and_answer(
    conn: &Connection,
    id: &TaskId,
    description: &str,
    answer: Option<&str>,
) -> Result<()> {
    conn.execute(
        "UPDATE tasks SET description = ?2, answer = ?3 WHERE id = ?1",
        params![id.as_str(), description, answer],
    )?;
    Ok(())
}

/// Appends an event, numbering it after the task's last one; returns its id.
pub(super) fn append_event(conn: &Connection, task: &TaskId, seq: u64, record: &mut EventRecord) -> Result<u64> {
    let id: i64 = conn.query_row(
        "UPDATE tasks SET event_count = event_count + 1 WHERE id = ?1 RETURNING event_count - 1",
        [task.as_str()],
        |row| row.get(0),
    )?;
    record.id = id as u64;
    conn.execute(
        "INSERT INTO events (task_id, id, seq, ts, type, json) VALUES (?1, ?2, ?3, ?4, ?5, ?6)",
        params![
            task.as_str(),
            id,
            seq as i64,
            record.event.ts,
            record.event.kind.name(),
            serde_json::to_string(record)?
        ],
    )?;
    Ok(id as u64)
}

/// Rewrites a stored event in place (its id, time and type unchanged): only for a decision of the person's
/// about what the event already holds, such as a field they say is no credential.
pub(super) fn rewrite_event(conn: &Connection, task: &TaskId, record: &EventRecord) -> Result<()> {
    let changed = conn.execute(
        "UPDATE events SET json = ?3 WHERE task_id = ?1 AND id = ?2",
        params![task.as_str(), record.id as i64, serde_json::to_string(record)?],
    )?;
    anyhow::ensure!(changed == 1, "task {task} has no event {}", record.id);
    Ok(())
}

/// The id the next event of `task` will get.
pub(super) fn next_event_id(conn: &Connection, task: &TaskId) -> Result<u64> {
    let count: i64 =
        conn.query_row("SELECT event_count FROM tasks WHERE id = ?1", [task.as_str()], |row| row.get(0))?;
    Ok(count as u64)
}

/// Every event of a task, in order, calling `each` on them one at a time.
pub(super) fn for_each_event(conn: &Connection, task: &TaskId, mut each: impl FnMut(&str) -> Result<()>) -> Result<()> {
    let mut statement = conn.prepare("SELECT json FROM events WHERE task_id = ?1 ORDER BY id")?;
    let mut rows = statement.query([task.as_str()])?;
    while let Some(row) = rows.next()? {
        each(row.get_ref(0)?.as_str()?)?;
    }
    Ok(())
}

/// Records a file of the capture directory; returns false if it was already recorded (a repeated body).
pub(super) fn record_file(conn: &Connection, task: &TaskId, path: &str, size: u64, sha256: &str) -> Result<bool> {
    let inserted = conn.execute(
        "INSERT OR IGNORE INTO files (task_id, path, size, sha256) VALUES (?1, ?2, ?3, ?4)",
        params![task.as_str(), path, size as i64, sha256],
    )?;
    if inserted > 0 {
        conn.execute(
            "UPDATE tasks SET byte_count = byte_count + ?2 WHERE id = ?1",
            params![task.as_str(), size as i64],
        )?;
    }
    Ok(inserted > 0)
}

/// Every recorded file of a task: (path, size, sha256), sorted by path.
pub(super) fn files(conn: &Connection, task: &TaskId) -> Result<Vec<(String, u64, String)>> {
    let mut statement = conn.prepare("SELECT path, size, sha256 FROM files WHERE task_id = ?1 ORDER BY path")?;
    let rows = statement
        .query_map([task.as_str()], |row| Ok((row.get(0)?, row.get::<_, i64>(1)? as u64, row.get(2)?)))?
        .collect::<rusqlite::Result<Vec<_>>>()?;
    Ok(rows)
}

/// Records (or updates) a file the host derived from the recording after it was finalized, such as
/// `trajectory.json`: unlike a body, its content changes when it is derived again.
pub(super) fn record_derived_file(conn: &Connection, task: &TaskId, path: &str, size: u64, sha256: &str) -> Result<()> {
    let previous: Option<i64> = conn
        .query_row("SELECT size FROM files WHERE task_id = ?1 AND path = ?2", params![task.as_str(), path], |row| {
            row.get(0)
        })
        .optional()?;
    conn.execute(
        "INSERT INTO files (task_id, path, size, sha256) VALUES (?1, ?2, ?3, ?4)
         ON CONFLICT (task_id, path) DO UPDATE SET size = ?3, sha256 = ?4",
        params![task.as_str(), path, size as i64, sha256],
    )?;
    conn.execute(
        "UPDATE tasks SET byte_count = byte_count + ?2 - ?3 WHERE id = ?1",
        params![task.as_str(), size as i64, previous.unwrap_or(0)],
    )?;
    Ok(())
}

/// Forgets a derived file the bundle no longer holds (an audit that spoke of other checkpoints).
pub(super) fn forget_derived_file(conn: &Connection, task: &TaskId, path: &str) -> Result<()> {
    let size: Option<i64> = conn
        .query_row("SELECT size FROM files WHERE task_id = ?1 AND path = ?2", params![task.as_str(), path], |row| {
            row.get(0)
        })
        .optional()?;
    if let Some(size) = size {
        conn.execute("DELETE FROM files WHERE task_id = ?1 AND path = ?2", params![task.as_str(), path])?;
        conn.execute("UPDATE tasks SET byte_count = byte_count - ?2 WHERE id = ?1", params![task.as_str(), size])?;
    }
    Ok(())
}

/// Notes that `trace-host process` wrote the task's derived files at `at` (ms since the Unix epoch).
pub(super) fn set_processed(conn: &Connection, task: &TaskId, at: f64) -> Result<()> {
    conn.execute("UPDATE tasks SET processed_at = ?2 WHERE id = ?1", params![task.as_str(), at])?;
    Ok(())
}

/// When `trace-host process` last wrote the task's derived files, if it ever did.
pub(super) fn processed_at(conn: &Connection, task: &TaskId) -> Result<Option<f64>> {
    Ok(conn
        .query_row("SELECT processed_at FROM tasks WHERE id = ?1", [task.as_str()], |row| row.get(0))
        .optional()?
        .flatten())
}

/// A body being streamed, as committed so far.
#[derive(Debug, Clone, PartialEq)]
pub struct BodyRow {
    pub request_id: String,
    pub part: String,
    pub next_index: u64,
    pub size: u64,
    pub sha256: Option<String>,
}

pub(super) fn body(conn: &Connection, task: &TaskId, body_id: &str) -> Result<Option<BodyRow>> {
    Ok(conn
        .query_row(
            "SELECT request_id, part, next_index, size, sha256 FROM bodies WHERE task_id = ?1 AND body_id = ?2",
            params![task.as_str(), body_id],
            |row| {
                Ok(BodyRow {
                    request_id: row.get(0)?,
                    part: row.get(1)?,
                    next_index: row.get::<_, i64>(2)? as u64,
                    size: row.get::<_, i64>(3)? as u64,
                    sha256: row.get(4)?,
                })
            },
        )
        .optional()?)
}

pub(super) fn put_body(conn: &Connection, task: &TaskId, body_id: &str, body: &BodyRow) -> Result<()> {
    conn.execute(
        "INSERT INTO bodies (task_id, body_id, request_id, part, next_index, size, sha256)
         VALUES (?1, ?2, ?3, ?4, ?5, ?6, ?7)
         ON CONFLICT (task_id, body_id) DO UPDATE SET next_index = ?5, size = ?6, sha256 = ?7",
        params![
            task.as_str(),
            body_id,
            body.request_id,
            body.part,
            body.next_index as i64,
            body.size as i64,
            body.sha256
        ],
    )?;
    Ok(())
}

/// Bodies whose last chunk is committed, as (body_id, sha256): their part files may still await a move
/// into `resources/` if the host stopped between the commit and the move.
pub(super) fn completed_bodies(conn: &Connection, task: &TaskId) -> Result<Vec<(String, String)>> {
    let mut statement = conn.prepare("SELECT body_id, sha256 FROM bodies WHERE task_id = ?1 AND sha256 IS NOT NULL")?;
    let rows = statement
        .query_map([task.as_str()], |row| Ok((row.get(0)?, row.get(1)?)))?
        .collect::<rusqlite::Result<Vec<_>>>()?;
    Ok(rows)
}

/// Forgets everything recorded for a task but the task row itself, which stays as a tombstone so that a
/// late resend of its messages is refused rather than starting the task again.
pub(super) fn clear_task_data(conn: &Connection, task: &TaskId) -> Result<()> {
    for table in ["events", "bodies", "files"] {
        conn.execute(&format!("DELETE FROM {table} WHERE task_id = ?1"), [task.as_str()])?;
    }
    conn.execute("UPDATE tasks SET event_count = 0, byte_count = 0 WHERE id = ?1", [task.as_str()])?;
    Ok(())
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn a_version_1_database_is_migrated_and_keeps_its_tasks() {
        let dir = tempfile::tempdir().unwrap();
        let path = dir.path().join("tasks.db");
        {
            let conn = Connection::open(&path).unwrap();
            conn.execute_batch(SCHEMA).unwrap();
            conn.pragma_update(None, "user_version", 1).unwrap();
            conn.execute(
                "INSERT INTO tasks (id, source, task_type, description, website, recorder, status, started_at, last_seq)
                 VALUES ('old', 'self', 'action', 'd', 'http://x/', '{\"name\":\"r\",\"version\":\"0\"}', 'stopped', 1.0, 3)",
                [],
            )
            .unwrap();
        }
        let conn = open(&path).unwrap();
        let version: i64 = conn.pragma_query_value(None, "user_version", |row| row.get(0)).unwrap();
        assert_eq!(version, SCHEMA_VERSION);
        let id: TaskId = "old".parse().unwrap();
        assert_eq!(task(&conn, &id).unwrap().unwrap().last_seq, 3);
        assert_eq!(processed_at(&conn, &id).unwrap(), None);
        set_processed(&conn, &id, 5.0).unwrap();
        assert_eq!(processed_at(&conn, &id).unwrap(), Some(5.0));
        drop(conn);
        // Opening again migrates nothing twice.
        let conn = open(&path).unwrap();
        assert_eq!(processed_at(&conn, &id).unwrap(), Some(5.0));
    }
}
