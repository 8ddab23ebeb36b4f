//! What a session keeps of the bodies that cross it: the request bodies a page or an agent sends, and the
//! answers replay gives. Both are the agent's to choose (a page can POST sixty megabytes forty times), so
//! what is kept has one budget for the whole episode ([`Budget`]), on disk and in memory together.
//!
//! A body streams through a [`BodySink`] as it arrives: hashed as it goes, held in memory only while it
//! is small enough to be kept inline (a text request body of at most [`MAX_INLINE_TEXT_BYTES`], as the
//! extension records one in its request event), written to a partial file past that, and moved to its
//! content-addressed name (`resources/<sha256>`) once whole, where a body seen before costs nothing more.
//! A body that would take the episode past its budget is kept by its SHA-256 and size alone
//! ([`Kept::LeftOut`]): its event says so (`omitted`), the session counts it ([`Bodies::left_out`]), and the
//! episode's result says how many were left out. Nothing is lost but the bytes past the budget.

use std::collections::BTreeMap;
use std::io::Write as _;
use std::path::{Path, PathBuf};
use std::sync::Mutex;
use std::sync::atomic::{AtomicU64, Ordering};

use anyhow::{Context, Result};
use sha2::{Digest, Sha256};
use trace_manifest::bundle::{self, FileEntry};
use trace_manifest::eval::BodiesLeftOut;

/// What an episode keeps of bodies by default: a real upload of tens of megabytes is kept whole, a page
/// that posts gigabytes is not.
pub const DEFAULT_BUDGET_BYTES: u64 = 512 << 20;

/// Text request bodies up to this size are kept in their request event, as the extension records them;
/// larger ones, and every binary one, are files of their own.
pub const MAX_INLINE_TEXT_BYTES: usize = 64 << 10;

/// How much of the bodies that cross it one session keeps, in bytes: files and inline text together.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct Budget(pub u64);

impl Default for Budget {
    fn default() -> Budget {
        Budget(DEFAULT_BUDGET_BYTES)
    }
}

/// What was kept of one body.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum Kept {
    /// There was none.
    Empty,
    /// Text small enough to travel inline, in its event.
    Text(String),
    /// A file of the session, `resources/<sha256>`.
    File { sha256: String, size: u64 },
    /// Past the budget: only what identifies it.
    LeftOut { sha256: String, size: u64 },
}

/// The bodies of one session: where they go, what they cost so far, and what was left out.
pub struct Bodies {
    dir: PathBuf,
    budget: Budget,
    state: Mutex<State>,
    /// Names the partial files of bodies being written.
    next_part: AtomicU64,
}

#[derive(Default)]
struct State {
    /// Bytes kept so far (reserved by bodies being written too).
    spent: u64,
    files: BTreeMap<String, FileEntry>,
    left_out: u64,
    left_out_bytes: u64,
}

/// Where bodies are written while they arrive: a dot-named folder, which a bundle's readers pass over.
const PARTS_DIR: &str = ".parts";

impl Bodies {
    /// The bodies of the session in `dir`.
    pub fn new(dir: &Path, budget: Budget) -> Bodies {
        Bodies { dir: dir.to_owned(), budget, state: Mutex::default(), next_part: AtomicU64::new(0) }
    }

    fn lock(&self) -> std::sync::MutexGuard<'_, State> {
        self.state.lock().unwrap_or_else(std::sync::PoisonError::into_inner)
    }

    /// A sink for one body as it arrives.
    pub fn sink(&self) -> BodySink<'_> {
        BodySink {
            bodies: self,
            hasher: Sha256::new(),
            size: 0,
            head: Vec::new(),
            part: None,
            reserved: 0,
            left_out: false,
        }
    }

    /// `bytes`, kept as one body: text inline when `inline_text` allows it and it is small, else a file.
    pub fn keep(&self, bytes: &[u8], inline_text: bool) -> Result<Kept> {
        let mut sink = self.sink();
        sink.write(bytes)?;
        sink.finish(inline_text)
    }

    /// The files the bodies are in, for the bundle's index.
    pub fn files(&self) -> Vec<FileEntry> {
        self.lock().files.values().cloned().collect()
    }

    /// What was left out, if anything was.
    pub fn left_out(&self) -> Option<BodiesLeftOut> {
        let state = self.lock();
        (state.left_out > 0).then(|| BodiesLeftOut {
            bodies: state.left_out,
            bytes: state.left_out_bytes,
            budget_bytes: self.budget.0,
        })
    }

    /// Takes `bytes` from the budget, if it has them.
    fn reserve(&self, bytes: u64) -> bool {
        let mut state = self.lock();
        if state.spent.saturating_add(bytes) > self.budget.0 {
            return false;
        }
        state.spent += bytes;
        true
    }

    fn release(&self, bytes: u64) {
        let mut state = self.lock();
        state.spent = state.spent.saturating_sub(bytes);
    }

    fn part_path(&self) -> Result<PathBuf> {
        let parts = self.dir.join(PARTS_DIR);
        std::fs::create_dir_all(&parts).with_context(|| format!("cannot create {}", parts.display()))?;
        Ok(parts.join(self.next_part.fetch_add(1, Ordering::Relaxed).to_string()))
    }

    /// Removes the folder of partial files, once no body is being written.
    pub fn clear_parts(&self) {
        let _ = std::fs::remove_dir_all(self.dir.join(PARTS_DIR));
    }
}

/// One body as it arrives ([`Bodies::sink`]).
pub struct BodySink<'b> {
    bodies: &'b Bodies,
    hasher: Sha256,
    size: u64,
    /// What arrived, while it may still be kept inline.
    head: Vec<u8>,
    /// The partial file, once it is too large to hold.
    part: Option<(std::fs::File, PathBuf)>,
    /// What it took from the budget so far.
    reserved: u64,
    /// It passed the budget: it is only hashed from then on.
    left_out: bool,
}

impl BodySink<'_> {
    /// Takes the next piece of the body.
    pub fn write(&mut self, chunk: &[u8]) -> Result<()> {
        self.hasher.update(chunk);
        self.size += chunk.len() as u64;
        if self.left_out {
            return Ok(());
        }
        if self.part.is_none() && self.head.len() + chunk.len() <= MAX_INLINE_TEXT_BYTES {
            self.head.extend_from_slice(chunk);
            return Ok(());
        }
        if self.part.is_none() {
            let held = std::mem::take(&mut self.head);
            if !self.take(held.len() as u64) {
                return Ok(());
            }
            let path = self.bodies.part_path()?;
            let mut file = std::fs::File::create(&path).with_context(|| format!("cannot create {}", path.display()))?;
            file.write_all(&held).with_context(|| format!("cannot write {}", path.display()))?;
            self.part = Some((file, path));
        }
        if !self.take(chunk.len() as u64) {
            return Ok(());
        }
        let (file, path) = self.part.as_mut().expect("opened above");
        file.write_all(chunk).with_context(|| format!("cannot write {}", path.display()))
    }

    /// Takes `bytes` from the budget; when it has not got them, the body is left out from here on and
    /// what it had taken is given back.
    fn take(&mut self, bytes: u64) -> bool {
        if self.bodies.reserve(bytes) {
            self.reserved += bytes;
            return true;
        }
        self.left_out = true;
        self.head = Vec::new();
        if let Some((file, path)) = self.part.take() {
            drop(file);
            let _ = std::fs::remove_file(path);
        }
        self.bodies.release(std::mem::take(&mut self.reserved));
        false
    }

    /// The body is whole: what is kept of it. Text of at most [`MAX_INLINE_TEXT_BYTES`] stays inline when
    /// `inline_text` allows it; the rest is a file, unless it passed the budget.
    pub fn finish(mut self, inline_text: bool) -> Result<Kept> {
        if self.size == 0 {
            return Ok(Kept::Empty);
        }
        let sha256 = format!("{:x}", self.hasher.clone().finalize());
        let size = self.size;
        let name = bundle::resource_path(&sha256);
        // A body past the budget may be one kept before, whose file is there already.
        let left_out = |bodies: &Bodies| {
            let mut state = bodies.lock();
            if state.files.contains_key(&name) {
                return Kept::File { sha256: sha256.clone(), size };
            }
            state.left_out += 1;
            state.left_out_bytes += size;
            Kept::LeftOut { sha256: sha256.clone(), size }
        };
        if self.left_out {
            return Ok(left_out(self.bodies));
        }
        if self.part.is_none() {
            let head = std::mem::take(&mut self.head);
            if !self.take(size) {
                return Ok(left_out(self.bodies));
            }
            if inline_text && let Ok(text) = String::from_utf8(head.clone()) {
                return Ok(Kept::Text(text));
            }
            let path = self.bodies.part_path()?;
            std::fs::write(&path, &head).with_context(|| format!("cannot write {}", path.display()))?;
            self.part = Some((std::fs::File::open(&path)?, path));
        }
        let (file, part) = self.part.take().expect("written above");
        drop(file);
        let mut state = self.bodies.lock();
        if state.files.contains_key(&name) {
            // The same body again: the file is there already, and costs nothing more.
            state.spent = state.spent.saturating_sub(self.reserved);
            drop(state);
            let _ = std::fs::remove_file(&part);
            return Ok(Kept::File { sha256, size });
        }
        let target = self.bodies.dir.join(&name);
        std::fs::rename(&part, &target).with_context(|| format!("cannot write {}", target.display()))?;
        state.files.insert(name.clone(), FileEntry { path: name, size, sha256: sha256.clone() });
        Ok(Kept::File { sha256, size })
    }
}

impl Drop for BodySink<'_> {
    /// A body never finished (its request failed as it arrived) gives its place in the budget back.
    fn drop(&mut self) {
        if let Some((file, path)) = self.part.take() {
            drop(file);
            let _ = std::fs::remove_file(path);
            self.bodies.release(std::mem::take(&mut self.reserved));
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn text(bytes: usize) -> Vec<u8> {
        (0..bytes).map(|at| b'a' + (at % 26) as u8).collect()
    }

    fn file_bytes(dir: &Path, kept: &Kept) -> Vec<u8> {
        let Kept::File { sha256, .. } = kept else { panic!("not a file: {kept:?}") };
        std::fs::read(dir.join(bundle::resource_path(sha256))).unwrap()
    }

    /// Issue #45: a page's forty 60 MiB bodies were all held as text until the episode's end, then written
    /// twice. Small text stays inline, as the extension records it; a larger body is a file, once however
    /// often it comes; past the budget a body is its digest and size, counted, and nothing of it is left
    /// on disk.
    #[test]
    fn bodies_are_kept_inline_as_files_or_by_their_digest_within_the_budget() {
        let dir = tempfile::tempdir().unwrap();
        std::fs::create_dir_all(dir.path().join(bundle::RESOURCES_DIR)).unwrap();
        let bodies = Bodies::new(dir.path(), Budget(3 << 20));

        assert_eq!(bodies.keep(b"user=ann", true).unwrap(), Kept::Text("user=ann".to_owned()));
        assert_eq!(bodies.keep(b"", true).unwrap(), Kept::Empty);
        let binary = [0xff, 0xfe, 0x00, 0x01];
        assert!(matches!(bodies.keep(&binary, true).unwrap(), Kept::File { size: 4, .. }), "binary is a file");
        assert!(matches!(bodies.keep(b"{}", false).unwrap(), Kept::File { .. }), "a response is a file");

        // A real upload of 2 MiB, in pieces, kept whole; the same again costs nothing more.
        let upload = text(2 << 20);
        let mut sink = bodies.sink();
        for piece in upload.chunks(100_000) {
            sink.write(piece).unwrap();
        }
        let kept = sink.finish(true).unwrap();
        assert_eq!(file_bytes(dir.path(), &kept), upload);
        assert_eq!(bodies.keep(&upload, true).unwrap(), kept);

        // Another 2 MiB passes the 3 MiB budget: its digest and size alone.
        let other = text((2 << 20) + 1);
        let kept = bodies.keep(&other, true).unwrap();
        let sha256 = trace_bundle::archive::sha256_hex(&other);
        assert_eq!(kept, Kept::LeftOut { sha256: sha256.clone(), size: other.len() as u64 });
        assert!(!dir.path().join(bundle::resource_path(&sha256)).exists());
        assert_eq!(
            bodies.left_out(),
            Some(BodiesLeftOut { bodies: 1, bytes: other.len() as u64, budget_bytes: 3 << 20 })
        );
        // What still fits is kept.
        assert!(matches!(bodies.keep(&text(100_000), true).unwrap(), Kept::File { .. }));
        let written: u64 = bodies.files().iter().map(|file| file.size).sum();
        assert!(written <= 3 << 20, "{written} bytes kept");
        bodies.clear_parts();
        let parts = dir.path().join(PARTS_DIR);
        assert!(!parts.exists(), "no partial file is left");
    }

    /// A body whose request failed as it arrived gives its place in the budget back.
    #[test]
    fn a_body_never_finished_gives_its_place_back() {
        let dir = tempfile::tempdir().unwrap();
        std::fs::create_dir_all(dir.path().join(bundle::RESOURCES_DIR)).unwrap();
        let bodies = Bodies::new(dir.path(), Budget(1 << 20));
        let mut sink = bodies.sink();
        sink.write(&text(900_000)).unwrap();
        drop(sink);
        assert!(matches!(bodies.keep(&text(900_001), true).unwrap(), Kept::File { .. }));
        assert_eq!(bodies.left_out(), None);
    }
}
