//! An exclusive advisory lock on a folder: a `.lock` file inside it, locked by the process that works on
//! what the folder holds. The operating system releases it when its holder dies, however it dies, so a
//! lock that can be taken means nobody is working there. The task store locks each capture directory with
//! it ([`crate::tasks`]); the outbox locks each submission while it replaces or sends it (`submit.rs`).
//!
//! Never wait for a folder's lock inside a database transaction: the holder may need the database to finish
//! what it is doing before it lets go.

use std::fs::{File, OpenOptions};
use std::path::Path;
use std::time::{Duration, Instant};

use crate::paths::LOCK_FILE;

pub struct FolderLock {
    _file: File,
}

impl FolderLock {
    /// Takes the lock of the folder `dir` (creating both if need be), waiting up to `wait` for another
    /// process to let go of it. `None` if it is still held after that.
    pub fn acquire(dir: &Path, wait: Duration) -> std::io::Result<Option<FolderLock>> {
        std::fs::create_dir_all(dir)?;
        let file = OpenOptions::new().create(true).truncate(false).write(true).open(dir.join(LOCK_FILE))?;
        let deadline = Instant::now() + wait;
        loop {
            match file.try_lock() {
                Ok(()) => return Ok(Some(FolderLock { _file: file })),
                Err(std::fs::TryLockError::WouldBlock) if Instant::now() < deadline => {
                    std::thread::sleep(Duration::from_millis(50));
                }
                Err(std::fs::TryLockError::WouldBlock) => return Ok(None),
                Err(std::fs::TryLockError::Error(error)) => return Err(error),
            }
        }
    }

    /// Is some process holding the lock of `dir` right now? False when there is no lock file.
    pub fn is_held(dir: &Path) -> bool {
        match File::open(dir.join(LOCK_FILE)) {
            Ok(file) => matches!(file.try_lock(), Err(std::fs::TryLockError::WouldBlock)),
            Err(_) => false,
        }
    }
}
