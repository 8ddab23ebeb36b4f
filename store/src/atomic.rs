//! The one way TRACE writes a file that others may read (the host's bundle files, datasets and submissions,
//! `trace-replay`'s results and summaries, a store's local directory, the chat model's reply cache): into
//! `.<name>.partial` beside it, synced to disk, then renamed over the name. A reader sees the old file or
//! the whole new one, never half of one; a crash leaves at most a dot-named partial file, which bundle
//! validation and a store's listing pass over and the next write replaces. A file that several processes
//! may write at once (a cache shared by parallel episodes) is staged under a partial name of its own
//! instead ([`write_shared`]). (Bodies and files streamed from the extension have their own staging,
//! `trace-host`'s `ingest` and its `.parts/`.)

use std::fs::File;
use std::io::{BufWriter, Write};
use std::path::{Path, PathBuf};

use anyhow::{Context, Result};
use trace_bundle::archive::HashingWriter;

/// A file being written under its partial name; [`AtomicFile::commit`] puts it in place, dropping it
/// uncommitted removes it.
pub struct AtomicFile {
    file: Option<File>,
    partial: PathBuf,
    path: PathBuf,
}

impl AtomicFile {
    /// A file to be put at `path`, written under `.<name>.partial` beside it.
    pub fn create(path: &Path) -> Result<AtomicFile> {
        let partial = partial_path(path);
        // Never through what is there already: a partial file a crash left, or a link planted in a bundle to
        // make the write land outside it, is removed (a link itself, not what it points at), and the new
        // file is created only if nothing took its place meanwhile.
        match std::fs::remove_file(&partial) {
            Err(error) if error.kind() != std::io::ErrorKind::NotFound => {
                return Err(error).with_context(|| format!("cannot replace {}", partial.display()));
            }
            _ => {}
        }
        let file = File::options()
            .write(true)
            .create_new(true)
            .open(&partial)
            .with_context(|| format!("cannot create {}", partial.display()))?;
        Ok(AtomicFile { file: Some(file), partial, path: path.to_owned() })
    }

    /// A file to be put at `path`, written under a partial name no other writer has (`.<name>.<random>.partial`
    /// beside it): for a file that more than one process may write at once, where the one partial name of
    /// [`AtomicFile::create`] would have one writer rename another's half-written file.
    pub fn create_unique(path: &Path) -> Result<AtomicFile> {
        let dir = path.parent().filter(|dir| !dir.as_os_str().is_empty()).unwrap_or(Path::new("."));
        let mut prefix = std::ffi::OsString::from(".");
        prefix.push(path.file_name().unwrap_or_default());
        prefix.push(".");
        let (file, partial) = tempfile::Builder::new()
            .prefix(&prefix)
            .suffix(".partial")
            .tempfile_in(dir)
            .with_context(|| format!("cannot create a partial file for {}", path.display()))?
            .keep()
            .with_context(|| format!("cannot create a partial file for {}", path.display()))?;
        Ok(AtomicFile { file: Some(file), partial, path: path.to_owned() })
    }

    /// Where the file is until it is committed.
    pub fn partial_path(&self) -> &Path {
        &self.partial
    }

    pub fn file(&mut self) -> &mut File {
        self.file.as_mut().expect("the file is open until commit")
    }

    /// Syncs the file and renames it to its name.
    pub fn commit(self) -> Result<()> {
        self.put_in_place(Sync::ToDisk)
    }

    fn put_in_place(mut self, sync: Sync) -> Result<()> {
        let file = self.file.take().expect("the file is open until commit");
        if sync == Sync::ToDisk {
            file.sync_all().with_context(|| format!("cannot write {}", self.path.display()))?;
        }
        drop(file);
        std::fs::rename(&self.partial, &self.path).with_context(|| format!("cannot write {}", self.path.display()))
    }
}

impl Drop for AtomicFile {
    fn drop(&mut self) {
        if self.file.take().is_some() {
            let _ = std::fs::remove_file(&self.partial);
        }
    }
}

/// Whether a file is synced to disk before it is renamed into place.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
enum Sync {
    ToDisk,
    No,
}

/// Writes `path` atomically with what `write` writes, and returns its size and lowercase hex sha256.
pub fn write(path: &Path, write: impl FnOnce(&mut dyn Write) -> Result<()>) -> Result<(u64, String)> {
    write_through(AtomicFile::create(path)?, path, write, Sync::ToDisk)
}

/// As [`write`], renamed into place without a sync to disk first: whole against a process stopped
/// mid-write (a reader finds no file or all of it), not against a power cut. For files written while
/// someone waits on them, many a second: a replay session's bodies, stored as its page loads, where a
/// sync each would slow the page the agent is being timed on.
pub fn write_unsynced(path: &Path, write: impl FnOnce(&mut dyn Write) -> Result<()>) -> Result<(u64, String)> {
    write_through(AtomicFile::create(path)?, path, write, Sync::No)
}

/// As [`write`], for a file other processes may be writing at the same moment ([`AtomicFile::create_unique`]):
/// the last one renamed is the file, whole.
pub fn write_shared(path: &Path, write: impl FnOnce(&mut dyn Write) -> Result<()>) -> Result<(u64, String)> {
    write_through(AtomicFile::create_unique(path)?, path, write, Sync::ToDisk)
}

fn write_through(
    mut atomic: AtomicFile,
    path: &Path,
    write: impl FnOnce(&mut dyn Write) -> Result<()>,
    sync: Sync,
) -> Result<(u64, String)> {
    let mut out = HashingWriter::new(BufWriter::new(atomic.file()));
    write(&mut out).with_context(|| format!("cannot write {}", path.display()))?;
    let (buffered, size, sha256) = out.finish();
    buffered.into_inner().map_err(|e| e.into_error()).with_context(|| format!("cannot write {}", path.display()))?;
    atomic.put_in_place(sync)?;
    Ok((size, sha256))
}

/// Writes `value` as pretty JSON with a final newline, atomically.
pub fn write_json(path: &Path, value: &impl serde::Serialize) -> Result<(u64, String)> {
    write(path, |out| {
        serde_json::to_writer_pretty(&mut *out, value)?;
        out.write_all(b"\n")?;
        Ok(())
    })
}

/// `.<name>.partial`, beside `path`.
pub fn partial_path(path: &Path) -> PathBuf {
    let mut name = std::ffi::OsString::from(".");
    name.push(path.file_name().unwrap_or_default());
    name.push(".partial");
    path.with_file_name(name)
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn a_write_that_fails_leaves_the_old_file_and_no_partial_one() {
        let dir = tempfile::tempdir().unwrap();
        let path = dir.path().join("index.json");
        write_json(&path, &["old"]).unwrap();
        let failed = write(&path, |out| {
            out.write_all(b"[\"half")?;
            anyhow::bail!("the disk is full")
        });
        assert!(failed.is_err());
        assert_eq!(std::fs::read_to_string(&path).unwrap(), "[\n  \"old\"\n]\n");
        assert!(!partial_path(&path).exists());
        let (size, sha256) = write_json(&path, &["new"]).unwrap();
        assert_eq!(size, std::fs::metadata(&path).unwrap().len());
        assert_eq!(sha256, trace_bundle::archive::sha256_hex(&std::fs::read(&path).unwrap()));
        assert_eq!(partial_path(&path), dir.path().join(".index.json.partial"));
    }

    #[test]
    fn writers_of_one_shared_file_never_rename_each_others_partial_file() {
        let dir = tempfile::tempdir().unwrap();
        let path = dir.path().join("reply.json");
        let first = AtomicFile::create_unique(&path).unwrap();
        let second = AtomicFile::create_unique(&path).unwrap();
        assert_ne!(first.partial_path(), second.partial_path());
        let name = first.partial_path().file_name().unwrap().to_string_lossy().into_owned();
        assert!(name.starts_with(".reply.json.") && name.ends_with(".partial"), "{name}");
        drop(second);
        first.commit().unwrap();
        write_shared(&path, |out| Ok(out.write_all(b"whole")?)).unwrap();
        assert_eq!(std::fs::read(&path).unwrap(), b"whole");
        assert_eq!(std::fs::read_dir(dir.path()).unwrap().count(), 1, "no partial file is left");
    }

    #[cfg(unix)]
    #[test]
    fn a_link_planted_where_the_partial_file_goes_is_not_written_through() {
        let dir = tempfile::tempdir().unwrap();
        let outside = tempfile::tempdir().unwrap();
        let victim = outside.path().join("victim");
        std::fs::write(&victim, b"untouched").unwrap();
        let path = dir.path().join("trajectory.json");
        std::os::unix::fs::symlink(&victim, partial_path(&path)).unwrap();
        write_json(&path, &["derived"]).unwrap();
        assert_eq!(std::fs::read(&victim).unwrap(), b"untouched");
        assert_eq!(std::fs::read_to_string(&path).unwrap(), "[\n  \"derived\"\n]\n");
        assert!(!std::fs::symlink_metadata(&path).unwrap().file_type().is_symlink());
    }
}
