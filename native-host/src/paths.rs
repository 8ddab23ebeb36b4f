//! Where the host keeps its data: one data directory holding `tasks.db`, `captures/<task_id>/` and `logs/`.
//! Chosen by `--data DIR`, else `TRACE_DATA`, else `$XDG_DATA_HOME/trace` (`~/.local/share/trace`), or the
//! platform's equivalent.

use std::path::{Path, PathBuf};

use anyhow::{Context, Result};
use trace_manifest::task::TaskId;

#[derive(Debug, Clone)]
pub struct DataDir {
    root: PathBuf,
}

impl DataDir {
    /// Resolves the data directory from an explicit choice or the environment, and creates it.
    pub fn resolve(explicit: Option<&Path>) -> Result<DataDir> {
        let root = match explicit {
            Some(path) => path.to_owned(),
            None => match std::env::var_os("TRACE_DATA").filter(|v| !v.is_empty()) {
                Some(path) => PathBuf::from(path),
                None => dirs::data_dir()
                    .context("cannot find a data directory for this user; pass --data DIR or set TRACE_DATA")?
                    .join("trace"),
            },
        };
        DataDir::at(root)
    }

    pub fn at(root: PathBuf) -> Result<DataDir> {
        std::fs::create_dir_all(root.join("captures"))
            .with_context(|| format!("cannot create the data directory {}", root.display()))?;
        Ok(DataDir { root })
    }

    pub fn root(&self) -> &Path {
        &self.root
    }

    pub fn database(&self) -> PathBuf {
        self.root.join("tasks.db")
    }

    pub fn capture(&self, task_id: &TaskId) -> PathBuf {
        self.root.join("captures").join(task_id.as_str())
    }

    pub fn logs(&self) -> PathBuf {
        self.root.join("logs")
    }
}

/// A capture directory's working files, hidden from bundle listings by their leading dot.
pub const LOCK_FILE: &str = ".lock";
pub const PARTS_DIR: &str = ".parts";
