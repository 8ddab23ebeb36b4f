//! The one way `trace-host` writes a file that others may read: into `.<name>.partial` beside it, synced to
//! disk, then renamed over the name. A reader sees the old file or the whole new one, never half of one; a
//! crash leaves at most a dot-named partial file, which bundle validation passes over and the next write
//! replaces. (Bodies and files streamed from the extension have their own staging, `ingest`'s `.parts/`.)

use std::fs::File;
use std::io::{BufWriter, Write};
use std::path::{Path, PathBuf};

use anyhow::{Context, Result};
use trace_manifest::archive::HashingWriter;

/// A file being written under its partial name; [`AtomicFile::commit`] puts it in place, dropping it
/// uncommitted removes it.
pub struct AtomicFile {
    file: Option<File>,
    partial: PathBuf,
    path: PathBuf,
}

impl AtomicFile {
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

    /// Where the file is until it is committed.
    pub fn partial_path(&self) -> &Path {
        &self.partial
    }

    pub fn file(&mut self) -> &mut File {
        self.file.as_mut().expect("the file is open until commit")
    }

    /// Syncs the file and renames it to its name.
    pub fn commit(mut self) -> Result<()> {
        let file = self.file.take().expect("the file is open until commit");
        file.sync_all().with_context(|| format!("cannot write {}", self.path.display()))?;
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

/// Writes `path` atomically with what `write` writes, and returns its size and lowercase hex sha256.
pub fn write(path: &Path, write: impl FnOnce(&mut dyn Write) -> Result<()>) -> Result<(u64, String)> {
    let mut atomic = AtomicFile::create(path)?;
    let mut out = HashingWriter::new(BufWriter::new(atomic.file()));
    write(&mut out).with_context(|| format!("cannot write {}", path.display()))?;
    let (buffered, size, sha256) = out.finish();
    buffered.into_inner().map_err(|e| e.into_error()).with_context(|| format!("cannot write {}", path.display()))?;
    atomic.commit()?;
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
        assert_eq!(sha256, trace_manifest::archive::sha256_hex(&std::fs::read(&path).unwrap()));
        assert_eq!(partial_path(&path), dir.path().join(".index.json.partial"));
    }

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
