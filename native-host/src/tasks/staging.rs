//! A capture's staging area (`.parts/`): where a body's chunks and a screenshot or snapshot wait between
//! their arrival and the commit that acknowledges them, the move into their place in the bundle after it,
//! and the recovery of moves a crash interrupted. The writer (`ingest`) stages and moves through the paths
//! and the move the store hands out; taking a task to write it and finalizing it ([`super::finalize`])
//! first complete whatever a crash left staged.

use std::path::{Path, PathBuf};

use rusqlite::Connection;
use trace_manifest::bundle;
use trace_manifest::task::TaskId;

use super::db;
use crate::paths::{DataDir, PARTS_DIR};

/// Where a body's chunks are written until its commit.
pub fn body_part_path(capture: &Path, body_id: &str) -> PathBuf {
    capture.join(PARTS_DIR).join(format!("body-{}", trace_bundle::archive::sha256_hex(body_id.as_bytes())))
}

/// Where a screenshot or snapshot bound for `path` in the bundle waits for its commit.
pub fn staged_path(capture: &Path, path: &str) -> PathBuf {
    capture.join(PARTS_DIR).join(path.replace('/', "-"))
}

/// Moves a committed file to its place; one already there wins (the move was done before a crash).
pub fn move_into_place(from: &Path, to: &Path) -> std::io::Result<()> {
    if to.exists() {
        if from.exists() {
            std::fs::remove_file(from)?;
        }
        return Ok(());
    }
    if let Some(parent) = to.parent() {
        std::fs::create_dir_all(parent)?;
    }
    std::fs::rename(from, to)
}

/// Finishes moves that a crash interrupted between a commit and the move that follows it: every committed
/// body and file whose place is empty is taken from `.parts/`. Idempotent.
pub(super) fn recover_staged_files(conn: &Connection, data: &DataDir, task_id: &TaskId) -> anyhow::Result<()> {
    let capture = data.capture(task_id);
    for (body_id, sha256) in db::completed_bodies(conn, task_id)? {
        let part = body_part_path(&capture, &body_id);
        if part.exists() {
            move_into_place(&part, &capture.join(bundle::resource_path(&sha256)))?;
        }
    }
    for (path, _, _) in db::files(conn, task_id)? {
        let staged = staged_path(&capture, &path);
        if staged.exists() {
            move_into_place(&staged, &capture.join(&path))?;
        }
    }
    Ok(())
}
