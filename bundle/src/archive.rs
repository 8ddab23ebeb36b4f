//! Reading bundles on disk, as a directory or as a zip, without trusting them: every path a bundle names
//! is checked to stay inside it; a directory holding a link or anything but regular files and folders
//! (dot-named ones included), and a zip holding a link, two entries of one name or a size bomb, are refused
//! on opening, before anything is read; and [`validate`] checks a bundle against its own index. Files
//! kept in a snapshot pack ([`crate::pack`]) read as files of their own.
//!
//! Memory stays bounded whatever the input. `events.jsonl` and `recording.har` can be read a piece at a
//! time ([`Bundle::for_each_event`], [`Bundle::for_each_har_entry`]: one line or one HAR entry in memory),
//! which is how [`validate`] reads them. Reading one whole ([`Bundle::events`], [`Bundle::har`]), as replay
//! and post-processing must, is refused before it starts when the file's size times what its parsed form
//! takes per byte ([`EVENTS_MEMORY_FACTOR`], [`HAR_MEMORY_FACTOR`]) passes [`ZipLimits::max_memory_bytes`].
//!
//! The bound on reading what others wrote is here too, written once: a file read whole is never read past
//! the size it was checked at ([`BoundedWriter`]), and [`copy_file_bounded`] refuses a file larger than a
//! limit before reading it and stops one that grows past it, for a bundle's files, a store's
//! (`trace_store::Location`) and an agent's answers (`trace-replay eval`).
//!
//! Used by `trace-host validate` and `import`, and by `trace-replay` to open what it serves.

use std::collections::{BTreeMap, BTreeSet};
use std::fs::File;
use std::io::{self, Read, Seek, SeekFrom, Write};
use std::path::{Path, PathBuf};

use sha2::{Digest, Sha256};

use crate::pack::{self, PackIndex};
use trace_manifest::bundle::{self, BundleManifest, FileEntry};
use trace_manifest::event::EventRecord;
use trace_manifest::har::{Entry, Har, Log};
pub use trace_manifest::report::Problem;

#[derive(Debug, thiserror::Error)]
pub enum ArchiveError {
    #[error("cannot read {path}: {source}")]
    Io { path: PathBuf, source: io::Error },
    #[error("{path} is not a zip file: {source}")]
    NotZip { path: PathBuf, source: zip::result::ZipError },
    #[error("unsafe path {0:?} in bundle: paths must be relative and stay inside the bundle")]
    UnsafePath(String),
    #[error("{0:?} is a symbolic link; bundles may not contain links")]
    Symlink(String),
    #[error("{0:?} is neither a regular file nor a folder; bundles hold only files")]
    NotRegular(String),
    #[error("zip holds two entries named {0:?}; readers would disagree on which is the file")]
    DuplicateEntry(String),
    #[error("zip has {count} entries, more than the limit of {limit}")]
    TooManyEntries { count: usize, limit: usize },
    #[error("zip entry {name:?} expands to {size} bytes, more than the limit of {limit}")]
    EntryTooLarge { name: String, size: u64, limit: u64 },
    #[error(
        "the bundle unpacks to {size} bytes in all (its snapshot pack included), more than the limit of {limit}; \
         set {MAX_UNPACKED_VARIABLE} to a number of bytes to raise it"
    )]
    TooLarge { size: u64, limit: u64 },
    #[error("zip entry {name:?} compresses {ratio}:1, which looks like a zip bomb (limit {limit}:1)")]
    SuspiciousRatio { name: String, ratio: u64, limit: u64 },
    #[error(
        "{name} is {size} bytes, more than the limit of {limit} for a file read whole \
         (it holds metadata; bodies are files of their own)"
    )]
    DocumentTooLarge { name: String, size: u64, limit: u64 },
    #[error("{name} is {size} bytes, more than the limit of {limit} for one file")]
    FileTooLarge { name: String, size: u64, limit: u64 },
    #[error(
        "{name} is {size} bytes, which would take about {needed} bytes of memory to read whole, more than the \
         limit of {limit}; set {MAX_MEMORY_VARIABLE} to a number of bytes to raise it"
    )]
    TooMuchMemory { name: String, size: u64, needed: u64, limit: u64 },
    #[error("zip entry {0:?} holds more data than its header declares")]
    SizeMismatch(String),
    #[error("zip entry {name:?} cannot be read: {source}")]
    BadEntry { name: String, source: zip::result::ZipError },
    #[error("bundle has no {0}")]
    Missing(String),
    #[error("{file} is not valid: {message}")]
    Invalid { file: String, message: String },
    #[error("bundle is format version {found}, newer than this program understands ({supported}); upgrade TRACE")]
    NewerFormat { found: u32, supported: u32 },
}

pub type Result<T, E = ArchiveError> = std::result::Result<T, E>;

/// Is `path` one of the bundle's documents, the files read whole and parsed (the manifest, events, HAR,
/// storage and what post-processing writes, all at the bundle's top level), as opposed to its bodies,
/// screenshots and snapshots, which are data kept in folders or in the snapshot pack?
pub fn is_document(path: &str) -> bool {
    !path.contains('/') && path != pack::PACK_FILE
}

/// Limits applied to every zip before anything in it is read, and to a directory's documents before one
/// is read.
#[derive(Debug, Clone, Copy)]
pub struct ZipLimits {
    pub max_entries: usize,
    /// A file may be at most this large: a body is held in memory whole while it is served or redacted
    /// (a few times over: read, replaced, encoded for DevTools), so this bounds the memory one file takes.
    pub max_entry_bytes: u64,
    /// What a zip may unpack to in all, the files of its snapshot pack included: what `import` writes to
    /// disk, and the most a reader may unpack. The default, 2 GiB, holds recordings of hours with their
    /// bodies; [`MAX_UNPACKED_VARIABLE`] changes it.
    pub max_total_bytes: u64,
    /// Entries larger than 1 MiB may compress at most this well.
    pub max_ratio: u64,
    /// A document ([`is_document`]) may be at most this large. Documents are parsed whole, which
    /// takes a few times their size in memory; they hold metadata only (a HAR of a long recording is a few
    /// tens of MB), so a larger one is an attack or damage, not a recording.
    pub max_document_bytes: u64,
    /// Documents larger than 1 MiB may compress at most this well. Real ones compress 5–20:1 (JSON with
    /// repeated headers); a document at the general [`ZipLimits::max_ratio`] would let a small zip expand
    /// into gigabytes of memory.
    pub max_document_ratio: u64,
    /// The most memory reading a document whole may take, estimated from its size before it is read
    /// ([`EVENTS_MEMORY_FACTOR`], [`HAR_MEMORY_FACTOR`]). The default, 1 GiB, holds the events and HAR of
    /// recordings of hours (tens of MB each); [`MAX_MEMORY_VARIABLE`] changes it.
    pub max_memory_bytes: u64,
}

/// The environment variable that sets [`ZipLimits::max_memory_bytes`], in bytes, for every command.
pub const MAX_MEMORY_VARIABLE: &str = "TRACE_MAX_MEMORY";

/// The environment variable that sets [`ZipLimits::max_total_bytes`], in bytes, for every command.
pub const MAX_UNPACKED_VARIABLE: &str = "TRACE_MAX_UNPACKED";

/// A number of bytes from the environment variable `name`, if it holds one.
fn bytes_from_environment(name: &str) -> Option<u64> {
    std::env::var(name).ok().and_then(|bytes| bytes.trim().parse().ok())
}

/// Memory the events of `events.jsonl` take, held as [`EventRecord`]s, per byte of the file: measured at
/// about 5 for a file of small events, which take the most per byte (a few fields around a struct of
/// every event kind's room); rounded up.
pub const EVENTS_MEMORY_FACTOR: u64 = 6;

/// Memory a HAR takes parsed into [`Har`], per byte of the file: measured at about 4 (replay's own view of
/// each entry included) for a HAR of entries with few, short headers, which take the most per byte;
/// rounded up.
pub const HAR_MEMORY_FACTOR: u64 = 5;

impl Default for ZipLimits {
    fn default() -> ZipLimits {
        ZipLimits {
            max_entries: 1_000_000,
            max_entry_bytes: 1 << 30,
            max_total_bytes: bytes_from_environment(MAX_UNPACKED_VARIABLE).unwrap_or(2 << 30),
            max_ratio: 1000,
            max_document_bytes: 256 << 20,
            max_document_ratio: 100,
            max_memory_bytes: bytes_from_environment(MAX_MEMORY_VARIABLE).unwrap_or(1 << 30),
        }
    }
}

/// An opened bundle: a directory, or a zip whose entries were all checked on opening, with its snapshot
/// pack's index when it has one.
pub struct Bundle {
    source: Source,
    pack: Option<OpenPack>,
    limits: ZipLimits,
}

enum Source {
    Dir(PathBuf),
    Zip { path: PathBuf, archive: zip::ZipArchive<File>, entries: BTreeMap<String, (usize, u64)> },
}

/// A snapshot pack: its index, and a decoder of its stream kept where it stopped, so that reading files in
/// the pack's order (validating, hashing, redacting, reading snapshots in capture order) decodes it once;
/// a file before the last one read is decoded from the start again. Nothing is unpacked but what lies
/// before the file read and the file itself, and nothing of it is kept: no temporary file, and no memory
/// but the decoder's window.
struct OpenPack {
    index: PackIndex,
    /// Where the compressed stream starts in the pack file.
    stream_start: u64,
    cursor: Option<PackCursor>,
}

/// A decoder of a pack's stream and where it stands in the unpacked stream.
struct PackCursor {
    decoder: zstd::stream::read::Decoder<'static, io::BufReader<Box<dyn Read + Send>>>,
    at: u64,
}

impl OpenPack {
    /// Reads the pack's header and index, and no further.
    fn open(source: &mut Source) -> Result<OpenPack> {
        let invalid = |message| ArchiveError::Invalid { file: pack::PACK_FILE.to_owned(), message };
        let io_error = |source| ArchiveError::Io { path: PathBuf::from(pack::PACK_FILE), source };
        let mut reader = source.pack_reader()?;
        let mut head = vec![0; pack::MAGIC.len() + 8];
        reader.read_exact(&mut head).map_err(|_| invalid("the pack ends in its header".to_owned()))?;
        let index_length = u64::from_le_bytes(head[pack::MAGIC.len()..].try_into().expect("eight bytes"));
        reader.take(index_length.min(pack::MAX_INDEX_BYTES + 1)).read_to_end(&mut head).map_err(io_error)?;
        // Its total is checked by the caller, with the bundle's other files.
        let (index, stream_start) = pack::read_index(&head, u64::MAX).map_err(invalid)?;
        Ok(OpenPack { index, stream_start: stream_start as u64, cursor: None })
    }

    /// Copies the packed file `name` to `sink`, decoding the pack up to its end (see [`OpenPack`]).
    fn copy_to(&mut self, source: &mut Source, name: &str, sink: &mut dyn Write) -> Result<u64> {
        let range = self.index.range(name).ok_or_else(|| ArchiveError::Missing(name.to_owned()))?;
        let (start, end) = (range.start as u64, range.end as u64);
        let copied = self.copy_range(source, start, end, sink);
        if copied.is_err() {
            // Stopped somewhere in the file: the next read starts again.
            self.cursor = None;
        }
        copied.map(|()| end - start)
    }

    fn copy_range(&mut self, source: &mut Source, start: u64, end: u64, sink: &mut dyn Write) -> Result<()> {
        let damaged = |error: io::Error| ArchiveError::Invalid {
            file: pack::PACK_FILE.to_owned(),
            message: format!("the pack's stream is damaged: {error}"),
        };
        let short = |at: u64| ArchiveError::Invalid {
            file: pack::PACK_FILE.to_owned(),
            message: format!("the pack unpacks to {at} bytes, fewer than its index says"),
        };
        if self.cursor.as_ref().is_none_or(|cursor| cursor.at > start) {
            let mut raw = source.pack_reader()?;
            io::copy(&mut (&mut raw).take(self.stream_start), &mut io::sink()).map_err(damaged)?;
            let decoder = pack::decoder(raw)
                .map_err(|message| ArchiveError::Invalid { file: pack::PACK_FILE.to_owned(), message })?;
            self.cursor = Some(PackCursor { decoder, at: 0 });
        }
        let cursor = self.cursor.as_mut().expect("made above");
        let skip = start - cursor.at;
        let skipped = io::copy(&mut (&mut cursor.decoder).take(skip), &mut io::sink()).map_err(damaged)?;
        cursor.at += skipped;
        if skipped < skip {
            return Err(short(cursor.at));
        }
        // The sink's own failure (a reader that has read enough) is told from the stream's.
        let mut watched = WatchedSink { inner: sink, failed: None };
        let copied = io::copy(&mut (&mut cursor.decoder).take(end - start), &mut watched);
        let copied = match (copied, watched.failed) {
            (_, Some(failure)) => {
                return Err(ArchiveError::Io { path: PathBuf::from(pack::PACK_FILE), source: failure });
            }
            (copied, None) => copied.map_err(damaged)?,
        };
        cursor.at += copied;
        if copied < end - start {
            return Err(short(cursor.at));
        }
        if cursor.at == self.index.total() && cursor.decoder.read(&mut [0]).map_err(damaged)? != 0 {
            return Err(ArchiveError::Invalid {
                file: pack::PACK_FILE.to_owned(),
                message: format!("the pack unpacks to more than the {} bytes its index says", self.index.total()),
            });
        }
        Ok(())
    }
}

/// A sink that keeps its own error apart, so that a copy into it tells a sink that refused from a
/// source that failed.
struct WatchedSink<'s> {
    inner: &'s mut dyn Write,
    failed: Option<io::Error>,
}

impl Write for WatchedSink<'_> {
    fn write(&mut self, buf: &[u8]) -> io::Result<usize> {
        self.inner.write(buf).inspect_err(|error| self.failed = Some(io::Error::new(error.kind(), error.to_string())))
    }

    fn flush(&mut self) -> io::Result<()> {
        self.inner.flush()
    }
}

impl Bundle {
    /// Opens a bundle directory or zip file with the default limits.
    pub fn open(path: &Path) -> Result<Bundle> {
        Bundle::open_with_limits(path, ZipLimits::default())
    }

    pub fn open_with_limits(path: &Path, limits: ZipLimits) -> Result<Bundle> {
        let mut source = Source::open(path, limits)?;
        let pack = if source.contains(pack::PACK_FILE) { Some(OpenPack::open(&mut source)?) } else { None };
        // Each packed file is a file, within a file's limit; what the pack unpacks to counts with a zip's
        // own entries (which `Source::open` checked alone). Both are known from the index, before a byte
        // of the pack is decoded.
        if let Some(pack) = &pack {
            if let Some((name, size)) = pack.index.files().find(|(_, size)| *size > limits.max_entry_bytes) {
                return Err(ArchiveError::EntryTooLarge { name: name.to_owned(), size, limit: limits.max_entry_bytes });
            }
            let entries: u64 = match &source {
                Source::Zip { entries, .. } => entries.values().map(|&(_, size)| size).sum(),
                Source::Dir(_) => 0,
            };
            let total = entries.saturating_add(pack.index.total());
            if total > limits.max_total_bytes {
                return Err(ArchiveError::TooLarge { size: total, limit: limits.max_total_bytes });
            }
        }
        Ok(Bundle { source, pack, limits })
    }

    pub fn path(&self) -> &Path {
        match &self.source {
            Source::Dir(path) | Source::Zip { path, .. } => path,
        }
    }

    /// The limits the bundle was opened with, which whatever reads it further uses too.
    pub fn limits(&self) -> ZipLimits {
        self.limits
    }

    /// Every file in the bundle with its size, sorted by path: packed files too.
    pub fn files(&self) -> Result<BTreeMap<String, u64>> {
        let mut files = self.source.files()?;
        if let Some(pack) = &self.pack {
            for (path, size) in pack.index.files() {
                files.entry(path.to_owned()).or_insert(size);
            }
        }
        Ok(files)
    }

    pub fn contains(&self, name: &str) -> bool {
        self.source.contains(name) || self.pack.as_ref().is_some_and(|pack| pack.index.contains(name))
    }

    /// Streams one file to `sink`, returning the number of bytes copied. A packed file is decoded from the
    /// pack as it is read, from where the last read stopped when it lies after it ([`OpenPack`]).
    pub fn copy_to(&mut self, name: &str, sink: &mut dyn Write) -> Result<u64> {
        if !bundle::is_safe_relative_path(name) {
            return Err(ArchiveError::UnsafePath(name.to_owned()));
        }
        let packed = self.pack.as_mut().filter(|pack| pack.index.contains(name));
        match packed.filter(|_| !self.source.contains(name)) {
            Some(pack) => pack.copy_to(&mut self.source, name, sink),
            None => self.source.copy_to(name, sink),
        }
    }

    /// The size of one file as the bundle holds it (its zip entry's, its pack's or on disk), or 0 when it
    /// is not there (reading it then says so).
    fn size(&self, name: &str) -> u64 {
        match self.pack.as_ref().and_then(|pack| pack.index.range(name)).filter(|_| !self.source.contains(name)) {
            Some(range) => (range.end - range.start) as u64,
            None => self.source.size(name),
        }
    }

    /// The first `len` bytes of one file (all of it when shorter), reading no further than that.
    pub fn read_start(&mut self, name: &str, len: usize) -> Result<Vec<u8>> {
        let mut start = Start { bytes: Vec::new(), len };
        match self.copy_to(name, &mut start) {
            Ok(_) => Ok(start.bytes),
            // The sink's own refusal once it has what it wants.
            Err(ArchiveError::Io { .. }) if start.bytes.len() == len => Ok(start.bytes),
            Err(error) => Err(error),
        }
    }

    /// Reads one file whole. A document larger than [`ZipLimits::max_document_bytes`], or another file
    /// larger than [`ZipLimits::max_entry_bytes`], is refused before it is read (a zip's were refused on
    /// opening; a directory's files may have grown since), and so is a file larger than the memory limit.
    /// Never more than the size checked is read, whatever the file has become since.
    pub fn read(&mut self, name: &str) -> Result<Vec<u8>> {
        self.check_size(name)?;
        self.check_memory(name, 1)?;
        let size = self.size(name);
        let mut sink = BoundedWriter::new(Vec::with_capacity(size as usize), size);
        match self.copy_to(name, &mut sink) {
            Err(ArchiveError::Io { .. }) if sink.refused() => match self.source {
                Source::Zip { .. } => Err(ArchiveError::SizeMismatch(name.to_owned())),
                Source::Dir(_) => Err(ArchiveError::Invalid {
                    file: name.to_owned(),
                    message: format!("it grew past {size} bytes while it was read"),
                }),
            },
            result => result.map(|_| sink.into_inner()),
        }
    }

    /// Refuses to read `name` whole when `factor` times its size would pass the memory limit.
    fn check_memory(&self, name: &str, factor: u64) -> Result<()> {
        let size = self.size(name);
        let needed = size.saturating_mul(factor);
        if needed > self.limits.max_memory_bytes {
            let (name, limit) = (name.to_owned(), self.limits.max_memory_bytes);
            return Err(ArchiveError::TooMuchMemory { name, size, needed, limit });
        }
        Ok(())
    }

    fn check_size(&self, name: &str) -> Result<()> {
        let Source::Dir(_) = &self.source else { return Ok(()) };
        let size = self.source.size(name);
        let name = name.to_owned();
        if is_document(&name) {
            if size > self.limits.max_document_bytes {
                return Err(ArchiveError::DocumentTooLarge { name, size, limit: self.limits.max_document_bytes });
            }
        } else if size > self.limits.max_entry_bytes {
            return Err(ArchiveError::FileTooLarge { name, size, limit: self.limits.max_entry_bytes });
        }
        Ok(())
    }

    /// Reads and checks `manifest.json`, refusing a format newer than this program's.
    pub fn manifest(&mut self) -> Result<BundleManifest> {
        let bytes = self.read(bundle::MANIFEST_FILE)?;
        parse_manifest(&bytes)
    }

    /// The size and sha256 of one file, streamed.
    pub fn hash(&mut self, name: &str) -> Result<(u64, String)> {
        let mut hasher = HashingWriter::new(io::sink());
        self.copy_to(name, &mut hasher)?;
        let (_, size, sha256) = hasher.finish();
        Ok((size, sha256))
    }

    /// Every event of `events.jsonl`, in order, held in memory: refused before it is read when that would
    /// take more than [`ZipLimits::max_memory_bytes`]; otherwise as [`Bundle::for_each_event`].
    pub fn events(&mut self) -> Result<Vec<EventRecord>> {
        self.check_size(bundle::EVENTS_FILE)?;
        self.check_memory(bundle::EVENTS_FILE, EVENTS_MEMORY_FACTOR)?;
        let mut events = Vec::new();
        self.for_each_event(|record| {
            events.push(record);
            Ok::<_, ArchiveError>(())
        })?;
        Ok(events)
    }

    /// Gives `visit` every event of `events.jsonl`, in order, read line by line: memory holds one line and
    /// one event, never the whole file, and a line longer than [`MAX_EVENT_LINE_BYTES`] is refused as it
    /// comes. The first error, the file's or `visit`'s, ends the reading.
    pub fn for_each_event<E: From<ArchiveError>>(
        &mut self,
        mut visit: impl FnMut(EventRecord) -> Result<(), E>,
    ) -> Result<(), E> {
        self.check_size(bundle::EVENTS_FILE)?;
        let mut lines = EventLines { line: Vec::new(), line_no: 0, visit: &mut visit, failure: None };
        match self.copy_to(bundle::EVENTS_FILE, &mut lines) {
            Ok(_) => {}
            // The sink's own refusal, carried through `io::Error`.
            Err(ArchiveError::Io { source, .. }) if lines.failure.is_some() => {
                drop(source);
                return Err(lines.failure.take().expect("checked"));
            }
            Err(error) => return Err(error.into()),
        }
        lines.finish()
    }

    /// `recording.har` parsed whole: refused before it is read when that would take more than
    /// [`ZipLimits::max_memory_bytes`]. Parsed as it streams in, so the file's bytes are never held too.
    pub fn har(&mut self) -> Result<Har> {
        self.check_size(bundle::HAR_FILE)?;
        self.check_memory(bundle::HAR_FILE, HAR_MEMORY_FACTOR)?;
        let invalid = |error: serde_json::Error| ArchiveError::Invalid {
            file: bundle::HAR_FILE.to_owned(),
            message: error.to_string(),
        };
        let reader = io::BufReader::new(self.reader(bundle::HAR_FILE)?);
        serde_json::from_reader(reader).map_err(invalid)
    }

    /// Gives `visit` each entry of `recording.har` in turn, parsed as the file streams in (memory holds
    /// one entry, and the pages), and returns the rest of its `log` with no entries. The first error, the
    /// file's or `visit`'s, ends the reading.
    pub fn for_each_har_entry<E: From<ArchiveError>>(
        &mut self,
        mut visit: impl FnMut(Entry) -> Result<(), E>,
    ) -> Result<Log, E> {
        self.check_size(bundle::HAR_FILE)?;
        let reader = io::BufReader::new(self.reader(bundle::HAR_FILE)?);
        let mut failure = None;
        let mut deserializer = serde_json::Deserializer::from_reader(reader);
        let parsed = serde::de::DeserializeSeed::deserialize(
            har_stream::HarSeed { visit: &mut visit, failure: &mut failure },
            &mut deserializer,
        )
        .and_then(|log| deserializer.end().map(|()| log));
        match (parsed, failure) {
            (_, Some(error)) => Err(error),
            (Ok(log), None) => Ok(log),
            (Err(error), None) => Err(ArchiveError::Invalid {
                file: bundle::HAR_FILE.to_owned(),
                message: format!("not a valid HAR 1.2 file: {error}"),
            }
            .into()),
        }
    }

    /// One file as a reader, for parsing as it streams in; never reads past a zip entry's declared size.
    fn reader(&mut self, name: &str) -> Result<Box<dyn Read + '_>> {
        if !bundle::is_safe_relative_path(name) {
            return Err(ArchiveError::UnsafePath(name.to_owned()));
        }
        let packed = self.pack.as_ref().is_some_and(|pack| pack.index.contains(name));
        if !packed || self.source.contains(name) {
            return self.source.reader(name);
        }
        // A packed file (documents never are, but any file reads the same way): through the sink.
        let mut bytes = Vec::new();
        self.copy_to(name, &mut bytes)?;
        Ok(Box::new(io::Cursor::new(bytes)))
    }
}

impl Source {
    fn open(path: &Path, limits: ZipLimits) -> Result<Source> {
        let io_error = |source| ArchiveError::Io { path: path.to_owned(), source };
        let metadata = std::fs::metadata(path).map_err(io_error)?;
        if metadata.is_dir() {
            check_dir(path, path)?;
            return Ok(Source::Dir(path.to_owned()));
        }
        // A FIFO named as a bundle would hold the open until a writer comes: refused without waiting.
        let mut file = open_regular(path).map_err(|error| match error.kind() {
            io::ErrorKind::InvalidInput => ArchiveError::NotRegular(path.display().to_string()),
            _ => io_error(error),
        })?;
        // The zip crate keeps one entry per name, so two entries of one name are looked for in the central
        // directory itself.
        if let Some(name) = duplicate_entry_name(&mut file).map_err(io_error)? {
            return Err(ArchiveError::DuplicateEntry(name));
        }
        let mut archive =
            zip::ZipArchive::new(file).map_err(|source| ArchiveError::NotZip { path: path.to_owned(), source })?;
        let entries = check_zip_entries(&mut archive, limits)?;
        Ok(Source::Zip { path: path.to_owned(), archive, entries })
    }

    fn files(&self) -> Result<BTreeMap<String, u64>> {
        match self {
            Source::Dir(root) => {
                let mut files = BTreeMap::new();
                walk_dir(root, root, &mut files)?;
                Ok(files)
            }
            Source::Zip { entries, .. } => Ok(entries.iter().map(|(name, (_, size))| (name.clone(), *size)).collect()),
        }
    }

    fn contains(&self, name: &str) -> bool {
        match self {
            Source::Dir(root) => bundle::is_safe_relative_path(name) && root.join(name).is_file(),
            Source::Zip { entries, .. } => entries.contains_key(name),
        }
    }

    fn copy_to(&mut self, name: &str, sink: &mut dyn Write) -> Result<u64> {
        match self {
            Source::Dir(root) => {
                let mut file = open_in_dir(root, name)?;
                io::copy(&mut file, sink).map_err(|source| ArchiveError::Io { path: root.join(name), source })
            }
            Source::Zip { path, archive, entries } => {
                let &(index, declared) = entries.get(name).ok_or_else(|| ArchiveError::Missing(name.to_owned()))?;
                let entry = archive
                    .by_index(index)
                    .map_err(|source| ArchiveError::BadEntry { name: name.to_owned(), source })?;
                // The declared size was checked against the limits; never read past it.
                let mut limited = entry.take(declared + 1);
                let copied =
                    io::copy(&mut limited, sink).map_err(|source| ArchiveError::Io { path: path.clone(), source })?;
                if copied > declared {
                    return Err(ArchiveError::SizeMismatch(name.to_owned()));
                }
                Ok(copied)
            }
        }
    }

    fn reader(&mut self, name: &str) -> Result<Box<dyn Read + '_>> {
        match self {
            Source::Dir(root) => Ok(Box::new(open_in_dir(root, name)?)),
            Source::Zip { archive, entries, .. } => {
                let &(index, declared) = entries.get(name).ok_or_else(|| ArchiveError::Missing(name.to_owned()))?;
                let entry = archive
                    .by_index(index)
                    .map_err(|source| ArchiveError::BadEntry { name: name.to_owned(), source })?;
                // The declared size was checked against the limits; never read past it.
                Ok(Box::new(entry.take(declared)))
            }
        }
    }

    /// The snapshot pack's bytes as a reader of its own, from its first byte: a file opened apart from
    /// the zip's, so that its decoder can be kept between reads. A zip must hold the pack stored (TRACE's
    /// export stores it: it is compressed already).
    fn pack_reader(&mut self) -> Result<Box<dyn Read + Send>> {
        match self {
            Source::Dir(root) => Ok(Box::new(open_in_dir(root, pack::PACK_FILE)?)),
            Source::Zip { path, archive, entries } => {
                let &(index, size) =
                    entries.get(pack::PACK_FILE).ok_or_else(|| ArchiveError::Missing(pack::PACK_FILE.to_owned()))?;
                let entry = archive
                    .by_index_raw(index)
                    .map_err(|source| ArchiveError::BadEntry { name: pack::PACK_FILE.to_owned(), source })?;
                if entry.compression() != zip::CompressionMethod::Stored || entry.compressed_size() != size {
                    return Err(ArchiveError::Invalid {
                        file: pack::PACK_FILE.to_owned(),
                        message: "it is compressed inside the zip; a pack is compressed already and is stored"
                            .to_owned(),
                    });
                }
                let start = entry.data_start();
                drop(entry);
                let io_error = |source| ArchiveError::Io { path: path.clone(), source };
                let mut file = open_regular(path).map_err(io_error)?;
                file.seek(SeekFrom::Start(start)).map_err(io_error)?;
                Ok(Box::new(file.take(size)))
            }
        }
    }

    /// The size of one file, or 0 when it is not there (reading it then says so).
    fn size(&self, name: &str) -> u64 {
        match self {
            Source::Dir(root) => std::fs::metadata(root.join(name)).map_or(0, |metadata| metadata.len()),
            Source::Zip { entries, .. } => entries.get(name).map_or(0, |&(_, size)| size),
        }
    }
}

/// Opens the regular file at `path` for reading, without waiting (a FIFO opens at once, and is refused
/// as [`check_regular`] refuses anything but a regular file, with [`io::ErrorKind::InvalidInput`]).
fn open_regular(path: &Path) -> io::Result<File> {
    let mut options = std::fs::OpenOptions::new();
    options.read(true);
    #[cfg(unix)]
    {
        use std::os::unix::fs::OpenOptionsExt as _;
        options.custom_flags(rustix::fs::OFlags::NONBLOCK.bits() as i32);
    }
    check_regular(options.open(path)?)
}

/// Opens the file `name` of the directory bundle at `root` as it is at this moment. The bundle was checked
/// for links and special files when it was opened, but a file or folder may be swapped for a link (to
/// `/etc`) or a FIFO since: [`open_beneath`] follows none.
fn open_in_dir(root: &Path, name: &str) -> Result<File> {
    open_beneath(root, name).map_err(|source| match source.kind() {
        io::ErrorKind::NotFound => ArchiveError::Missing(name.to_owned()),
        io::ErrorKind::InvalidInput => ArchiveError::NotRegular(name.to_owned()),
        _ if is_link_refused(&source) => ArchiveError::Symlink(name.to_owned()),
        _ => ArchiveError::Io { path: root.join(name), source },
    })
}

/// Opens the regular file at `relative` (`/`-separated) under `root` for reading, as it is at this moment:
/// each folder on the way opened from the one before without following a symbolic link, the file without
/// following one and without waiting (a FIFO opens at once), then checked as opened, so that what is read
/// is what was checked even if the path changes in between. A link on the way fails as
/// [`is_link_refused`] tells; anything but a regular file fails with [`io::ErrorKind::InvalidInput`] and
/// what it is in words.
#[cfg(unix)]
pub fn open_beneath(root: &Path, relative: &str) -> io::Result<File> {
    use rustix::fs::{Mode, OFlags};
    let root = rustix::fs::open(root, OFlags::RDONLY | OFlags::DIRECTORY | OFlags::CLOEXEC, Mode::empty())?;
    open_beneath_folder(&root, relative)
}

/// [`open_beneath`] from a folder already open: what was read from it is what was there when it was
/// opened, whatever its path leads to since.
#[cfg(unix)]
pub fn open_beneath_folder(root: impl std::os::fd::AsFd, relative: &str) -> io::Result<File> {
    use rustix::fs::{Mode, OFlags, openat};
    let folder = OFlags::RDONLY | OFlags::DIRECTORY | OFlags::NOFOLLOW | OFlags::CLOEXEC;
    let parts: Vec<&str> = relative.split('/').filter(|part| !part.is_empty()).collect();
    let Some((name, folders)) = parts.split_last() else {
        return Err(io::Error::new(io::ErrorKind::InvalidInput, format!("{relative:?} names no file")));
    };
    // A handle of its own on `root`, which each folder on the way replaces.
    let mut dir = openat(&root, ".", folder, Mode::empty())?;
    for part in folders {
        dir = openat(&dir, *part, folder, Mode::empty())?;
    }
    let flags = OFlags::RDONLY | OFlags::NOFOLLOW | OFlags::NONBLOCK | OFlags::NOCTTY | OFlags::CLOEXEC;
    check_regular(File::from(openat(&dir, *name, flags, Mode::empty())?))
}

/// As above, where there is no `openat`: the path is checked, then opened and the open file checked.
#[cfg(not(unix))]
pub fn open_beneath(root: &Path, relative: &str) -> io::Result<File> {
    let path = root.join(relative);
    let file_type = std::fs::symlink_metadata(&path)?.file_type();
    if file_type.is_symlink() {
        return Err(io::Error::other(format!("{relative:?} is a symbolic link")));
    }
    check_regular(File::open(&path)?)
}

fn check_regular(file: File) -> io::Result<File> {
    let file_type = file.metadata()?.file_type();
    if !file_type.is_file() {
        let message = format!("it is {}, not a regular file", kind_of(file_type));
        return Err(io::Error::new(io::ErrorKind::InvalidInput, message));
    }
    Ok(file)
}

/// Whether [`open_beneath`] failed because a symbolic link stood on the path: `O_NOFOLLOW` refuses one as
/// the file (`ELOOP`, `EMLINK` on some systems) and, with `O_DIRECTORY`, as a folder (`ENOTDIR`).
pub fn is_link_refused(error: &io::Error) -> bool {
    #[cfg(unix)]
    {
        use rustix::io::Errno;
        [Errno::LOOP, Errno::MLINK, Errno::NOTDIR]
            .iter()
            .any(|errno| error.raw_os_error() == Some(errno.raw_os_error()))
    }
    #[cfg(not(unix))]
    {
        error.kind() == io::ErrorKind::Other
    }
}

/// What a file that is not a regular one is, in words.
fn kind_of(file_type: std::fs::FileType) -> &'static str {
    #[cfg(unix)]
    {
        use std::os::unix::fs::FileTypeExt;
        if file_type.is_fifo() {
            return "a FIFO";
        } else if file_type.is_socket() {
            return "a socket";
        } else if file_type.is_char_device() || file_type.is_block_device() {
            return "a device";
        }
    }
    if file_type.is_symlink() {
        "a symbolic link"
    } else if file_type.is_dir() {
        "a folder"
    } else {
        "not a regular file"
    }
}

/// An event line longer than this is refused: events hold metadata (bodies are files of their own), and
/// a reader must not be made to hold a file's worth of one line.
pub const MAX_EVENT_LINE_BYTES: usize = 64 << 20;

/// Parses `events.jsonl` as it streams through, a line at a time, giving each event to `visit`.
struct EventLines<'v, E> {
    line: Vec<u8>,
    line_no: usize,
    visit: &'v mut dyn FnMut(EventRecord) -> Result<(), E>,
    failure: Option<E>,
}

impl<E: From<ArchiveError>> EventLines<'_, E> {
    fn end_line(&mut self) -> Result<(), E> {
        self.line_no += 1;
        let line = std::mem::take(&mut self.line);
        if !line.iter().all(u8::is_ascii_whitespace) {
            (self.visit)(parse_event_line(&line, self.line_no)?)?;
        }
        Ok(())
    }

    fn finish(mut self) -> Result<(), E> {
        if !self.line.is_empty() {
            self.end_line()?;
        }
        Ok(())
    }
}

impl<E: From<ArchiveError>> Write for EventLines<'_, E> {
    fn write(&mut self, buf: &[u8]) -> io::Result<usize> {
        let mut rest = buf;
        while !rest.is_empty() {
            let (piece, ends_line) = match rest.iter().position(|b| *b == b'\n') {
                Some(at) => (&rest[..at], true),
                None => (rest, false),
            };
            if self.line.len() + piece.len() > MAX_EVENT_LINE_BYTES {
                self.failure = Some(
                    ArchiveError::Invalid {
                        file: bundle::EVENTS_FILE.to_owned(),
                        message: format!("line {} is longer than {MAX_EVENT_LINE_BYTES} bytes", self.line_no + 1),
                    }
                    .into(),
                );
                return Err(io::Error::other("an event line is too long"));
            }
            self.line.extend_from_slice(piece);
            rest = &rest[piece.len()..];
            if ends_line {
                rest = &rest[1..];
                if let Err(error) = self.end_line() {
                    self.failure = Some(error);
                    return Err(io::Error::other("an event line is not valid"));
                }
            }
        }
        Ok(buf.len())
    }

    fn flush(&mut self) -> io::Result<()> {
        Ok(())
    }
}

fn parse_event_line(line: &[u8], line_no: usize) -> Result<EventRecord> {
    serde_json::from_slice(line).map_err(|e| ArchiveError::Invalid {
        file: bundle::EVENTS_FILE.to_owned(),
        message: format!("line {line_no}: {e}"),
    })
}

pub fn parse_manifest(bytes: &[u8]) -> Result<BundleManifest> {
    let invalid = |message: String| ArchiveError::Invalid { file: bundle::MANIFEST_FILE.to_owned(), message };
    let value: serde_json::Value = serde_json::from_slice(bytes).map_err(|e| invalid(e.to_string()))?;
    if value.get("format").and_then(|f| f.as_str()) != Some(bundle::FORMAT_NAME) {
        return Err(invalid(format!("\"format\" must be {:?}", bundle::FORMAT_NAME)));
    }
    let version = value.get("format_version").and_then(|v| v.as_u64()).unwrap_or(0) as u32;
    if version > trace_manifest::FORMAT_VERSION {
        return Err(ArchiveError::NewerFormat { found: version, supported: trace_manifest::FORMAT_VERSION });
    }
    serde_json::from_value(value).map_err(|e| invalid(e.to_string()))
}

/// The events of an `events.jsonl` already in memory (see [`Bundle::events`] to read one from a bundle).
pub fn parse_events(bytes: &[u8]) -> Result<Vec<EventRecord>> {
    let mut events = Vec::new();
    let mut visit = |record| {
        events.push(record);
        Ok(())
    };
    let mut lines = EventLines { line: Vec::new(), line_no: 0, visit: &mut visit, failure: None };
    if lines.write_all(bytes).is_err() {
        return Err(lines.failure.take().expect("the sink says why it refused"));
    }
    lines.finish()?;
    Ok(events)
}

fn check_zip_entries(archive: &mut zip::ZipArchive<File>, limits: ZipLimits) -> Result<BTreeMap<String, (usize, u64)>> {
    if archive.len() > limits.max_entries {
        return Err(ArchiveError::TooManyEntries { count: archive.len(), limit: limits.max_entries });
    }
    let mut entries = BTreeMap::new();
    let mut total: u64 = 0;
    for index in 0..archive.len() {
        let entry = archive
            .by_index_raw(index)
            .map_err(|source| ArchiveError::BadEntry { name: format!("#{index}"), source })?;
        let name = entry.name().to_owned();
        let trimmed = name.strip_suffix('/').unwrap_or(&name);
        if !bundle::is_safe_relative_path(trimmed) {
            return Err(ArchiveError::UnsafePath(name));
        }
        if entry.is_symlink() {
            return Err(ArchiveError::Symlink(name));
        }
        if entry.is_dir() {
            continue;
        }
        let size = entry.size();
        if size > limits.max_entry_bytes {
            return Err(ArchiveError::EntryTooLarge { name, size, limit: limits.max_entry_bytes });
        }
        let ratio = size / entry.compressed_size().max(1);
        let document = is_document(&name);
        let max_ratio = if document { limits.max_document_ratio } else { limits.max_ratio };
        if size > (1 << 20) && ratio > max_ratio {
            return Err(ArchiveError::SuspiciousRatio { name, ratio, limit: max_ratio });
        }
        if document && size > limits.max_document_bytes {
            return Err(ArchiveError::DocumentTooLarge { name, size, limit: limits.max_document_bytes });
        }
        total = total.saturating_add(size);
        if total > limits.max_total_bytes {
            return Err(ArchiveError::TooLarge { size: total, limit: limits.max_total_bytes });
        }
        entries.insert(name, (index, size));
    }
    Ok(entries)
}

/// The first name that two entries of a zip's central directory share, if any. Reads only the end of
/// central directory record (and its zip64 form) and the central directory; a file that is not a zip, or
/// whose records do not parse, has none here (opening it as a zip then says what is wrong).
fn duplicate_entry_name(file: &mut File) -> io::Result<Option<String>> {
    use std::io::{Seek, SeekFrom};
    let u16_at = |b: &[u8], at: usize| b.get(at..at + 2).map(|s| u16::from_le_bytes([s[0], s[1]]) as u64);
    let u32_at = |b: &[u8], at: usize| b.get(at..at + 4).map(|s| u32::from_le_bytes(s.try_into().unwrap()) as u64);
    let u64_at = |b: &[u8], at: usize| b.get(at..at + 8).map(|s| u64::from_le_bytes(s.try_into().unwrap()));

    let length = file.seek(SeekFrom::End(0))?;
    // The record is 22 bytes, followed by a comment of at most 65,535.
    let tail_length = length.min(22 + 65_535);
    let mut tail = vec![0; tail_length as usize];
    file.seek(SeekFrom::Start(length - tail_length))?;
    file.read_exact(&mut tail)?;
    let Some(end) = (0..tail.len().saturating_sub(21)).rev().find(|&at| tail[at..].starts_with(b"PK\x05\x06")) else {
        return Ok(None);
    };
    let (mut count, mut offset) = (u16_at(&tail, end + 10), u32_at(&tail, end + 16));
    // Zip64: the locator just before the record points at the zip64 record with the real numbers.
    if (count == Some(0xFFFF) || offset == Some(0xFFFF_FFFF))
        && end >= 20
        && tail[end - 20..].starts_with(b"PK\x06\x07")
    {
        let mut record = [0u8; 56];
        file.seek(SeekFrom::Start(u64_at(&tail, end - 20 + 8).unwrap_or(0)))?;
        if file.read_exact(&mut record).is_ok() && record.starts_with(b"PK\x06\x06") {
            (count, offset) = (u64_at(&record, 32), u64_at(&record, 48));
        }
    }
    let (Some(count), Some(offset)) = (count, offset) else { return Ok(None) };
    if offset >= length {
        return Ok(None);
    }
    let mut directory = Vec::new();
    file.seek(SeekFrom::Start(offset))?;
    file.take(length - offset).read_to_end(&mut directory)?;
    let mut names = BTreeSet::new();
    let mut at = 0;
    for _ in 0..count {
        if !directory[at.min(directory.len())..].starts_with(b"PK\x01\x02") {
            return Ok(None);
        }
        let lengths = (u16_at(&directory, at + 28), u16_at(&directory, at + 30), u16_at(&directory, at + 32));
        let (Some(name_length), Some(extra), Some(comment)) = lengths else { return Ok(None) };
        let Some(name) = directory.get(at + 46..at + 46 + name_length as usize) else { return Ok(None) };
        let name = String::from_utf8_lossy(name).into_owned();
        if !names.insert(name.clone()) {
            return Ok(Some(name));
        }
        at += 46 + (name_length + extra + comment) as usize;
    }
    Ok(None)
}

/// Refuses a directory bundle holding a link or anything but regular files and folders, anywhere in it:
/// a link would let a reader (replay serving a body) or a writer (processing) reach outside the bundle.
fn check_dir(root: &Path, dir: &Path) -> Result<()> {
    let io_error = |source| ArchiveError::Io { path: dir.to_owned(), source };
    for entry in std::fs::read_dir(dir).map_err(io_error)? {
        let entry = entry.map_err(io_error)?;
        let path = entry.path();
        let relative = || path.strip_prefix(root).unwrap_or(&path).to_string_lossy().replace('\\', "/");
        let file_type = entry.file_type().map_err(io_error)?;
        if file_type.is_symlink() {
            return Err(ArchiveError::Symlink(relative()));
        } else if file_type.is_dir() {
            check_dir(root, &path)?;
        } else if !file_type.is_file() {
            return Err(ArchiveError::NotRegular(relative()));
        }
    }
    Ok(())
}

fn walk_dir(root: &Path, dir: &Path, files: &mut BTreeMap<String, u64>) -> Result<()> {
    let io_error = |source| ArchiveError::Io { path: dir.to_owned(), source };
    for entry in std::fs::read_dir(dir).map_err(io_error)? {
        let entry = entry.map_err(io_error)?;
        let path = entry.path();
        let file_type = entry.file_type().map_err(io_error)?;
        let relative = path.strip_prefix(root).unwrap_or(&path).to_string_lossy().replace('\\', "/");
        if relative.split('/').any(|part| part.starts_with('.')) {
            continue; // the host's working files (.lock, .parts)
        }
        if file_type.is_symlink() {
            return Err(ArchiveError::Symlink(relative));
        } else if file_type.is_dir() {
            walk_dir(root, &path, files)?;
        } else {
            files.insert(relative, entry.metadata().map_err(io_error)?.len());
        }
    }
    Ok(())
}

/// A writer that passes on at most `limit` bytes and refuses a write that would pass them, which stops the
/// copy writing into it: the one bound on everything TRACE reads of what others wrote (a bundle's file read
/// whole, a file in a store, an agent's answer). A write refused whole leaves [`BoundedWriter::refused`]
/// set, so that the copy's error is told from the sink's own.
pub struct BoundedWriter<W> {
    inner: W,
    written: u64,
    limit: u64,
    refused: bool,
}

impl<W: Write> BoundedWriter<W> {
    pub fn new(inner: W, limit: u64) -> BoundedWriter<W> {
        BoundedWriter { inner, written: 0, limit, refused: false }
    }

    /// Whether a write was refused for passing the limit.
    pub fn refused(&self) -> bool {
        self.refused
    }

    /// The bytes passed on so far.
    pub fn written(&self) -> u64 {
        self.written
    }

    pub fn into_inner(self) -> W {
        self.inner
    }
}

impl<W: Write> Write for BoundedWriter<W> {
    fn write(&mut self, buf: &[u8]) -> io::Result<usize> {
        if self.written + buf.len() as u64 > self.limit {
            self.refused = true;
            return Err(io::Error::other(format!("more than the limit of {} bytes", self.limit)));
        }
        self.inner.write_all(buf)?;
        self.written += buf.len() as u64;
        Ok(buf.len())
    }

    fn flush(&mut self) -> io::Result<()> {
        self.inner.flush()
    }
}

/// Why [`copy_file_bounded`] stopped.
#[derive(Debug, thiserror::Error)]
pub enum BoundedCopyError {
    /// The file's size passed the limit: refused before a byte of it was read.
    #[error("it is {size} bytes, more than the limit of {limit}")]
    TooLarge { size: u64, limit: u64 },
    /// The file gave more than the limit while it was read, whatever its size said (it grew, or it is one of
    /// the kernel's files that say 0 bytes).
    #[error("it grew past the limit of {limit} bytes while it was read")]
    Grew { limit: u64 },
    /// Reading it or writing to the sink failed.
    #[error("{0}")]
    Io(io::Error),
}

/// Copies an open file into `sink`, at most `limit` bytes, and returns how many: a file whose size passes
/// the limit is refused before a byte of it is read, and the copy stops past the limit whatever the size
/// said. What was read of others' files is never more than the reader allowed.
pub fn copy_file_bounded(file: &mut File, limit: u64, sink: &mut dyn Write) -> Result<u64, BoundedCopyError> {
    let size = file.metadata().map_err(BoundedCopyError::Io)?.len();
    if size > limit {
        return Err(BoundedCopyError::TooLarge { size, limit });
    }
    let mut bounded = BoundedWriter::new(sink, limit);
    match io::copy(file, &mut bounded) {
        Ok(copied) => Ok(copied),
        Err(_) if bounded.refused() => Err(BoundedCopyError::Grew { limit }),
        Err(error) => Err(BoundedCopyError::Io(error)),
    }
}

/// A sink that takes the first `len` bytes written to it and refuses the rest, which stops the copy.
struct Start {
    bytes: Vec<u8>,
    len: usize,
}

impl Write for Start {
    fn write(&mut self, buf: &[u8]) -> io::Result<usize> {
        let room = self.len - self.bytes.len();
        if room == 0 {
            return Err(io::Error::other("read enough"));
        }
        let taken = room.min(buf.len());
        self.bytes.extend_from_slice(&buf[..taken]);
        Ok(taken)
    }

    fn flush(&mut self) -> io::Result<()> {
        Ok(())
    }
}

/// A writer that hashes and counts what passes through it.
pub struct HashingWriter<W> {
    inner: W,
    hasher: Sha256,
    size: u64,
}

impl<W: Write> HashingWriter<W> {
    pub fn new(inner: W) -> HashingWriter<W> {
        HashingWriter { inner, hasher: Sha256::new(), size: 0 }
    }

    /// The inner writer, the byte count and the lowercase hex sha256.
    pub fn finish(self) -> (W, u64, String) {
        (self.inner, self.size, hex::encode(self.hasher.finalize()))
    }
}

impl<W: Write> Write for HashingWriter<W> {
    fn write(&mut self, buf: &[u8]) -> io::Result<usize> {
        let written = self.inner.write(buf)?;
        self.hasher.update(&buf[..written]);
        self.size += written as u64;
        Ok(written)
    }

    fn flush(&mut self) -> io::Result<()> {
        self.inner.flush()
    }
}

pub fn sha256_hex(bytes: &[u8]) -> String {
    hex::encode(Sha256::digest(bytes))
}

/// What [`validate`] found.
#[derive(Debug, Clone, Default, serde::Serialize)]
pub struct ValidationReport {
    pub files_checked: usize,
    pub bytes_checked: u64,
    pub problems: Vec<Problem>,
}

impl ValidationReport {
    pub fn is_valid(&self) -> bool {
        self.problems.is_empty()
    }

    fn problem(&mut self, file: &str, message: impl Into<String>) {
        self.problems.push(Problem { file: file.to_owned(), message: message.into() });
    }
}

/// Checks a bundle against its own index: every indexed file present with the right size and sha256, no
/// file left out of the index, `events.jsonl` and `recording.har` parse, and every body the HAR references
/// is in the bundle. `on_file` is called with the bytes of each file as it is checked (for progress).
pub fn validate(bundle: &mut Bundle, on_file: &mut dyn FnMut(u64)) -> Result<ValidationReport> {
    let mut report = ValidationReport::default();
    let manifest = match bundle.manifest() {
        Ok(manifest) => manifest,
        Err(error @ ArchiveError::NewerFormat { .. }) => return Err(error),
        Err(error) => {
            report.problem(bundle::MANIFEST_FILE, error.to_string());
            return Ok(report);
        }
    };
    let present = bundle.files()?;
    let mut indexed = BTreeSet::new();
    for FileEntry { path, size, sha256 } in &manifest.files {
        if !bundle::is_safe_relative_path(path) {
            report.problem(path, "indexed path is not a safe relative path");
            continue;
        }
        if !indexed.insert(path.as_str()) {
            report.problem(path, "indexed twice");
        }
        if !present.contains_key(path) {
            report.problem(path, "indexed in manifest.json but missing");
            continue;
        }
        let (actual_size, actual_sha256) = bundle.hash(path)?;
        report.files_checked += 1;
        report.bytes_checked += actual_size;
        on_file(actual_size);
        if actual_size != *size {
            report.problem(path, format!("size is {actual_size} bytes, manifest.json says {size}"));
        }
        if actual_sha256 != *sha256 {
            report.problem(path, format!("sha256 is {actual_sha256}, manifest.json says {sha256}"));
        }
        if let Some(name) = path.strip_prefix(&format!("{}/", bundle::RESOURCES_DIR))
            && name != sha256
        {
            report.problem(path, "a resource must be named by its sha256, as indexed");
        }
    }
    for path in present.keys() {
        if path != bundle::MANIFEST_FILE && !indexed.contains(path.as_str()) {
            report.problem(path, "present but not indexed in manifest.json");
        }
    }
    for required in [bundle::EVENTS_FILE, bundle::HAR_FILE, bundle::STORAGE_FILE] {
        if !indexed.contains(required) {
            report.problem(required, "required file is not in the bundle");
        }
    }
    // Both documents are read a piece at a time: validating holds no more of them than one line or entry.
    if present.contains_key(bundle::EVENTS_FILE) {
        let mut count = 0u64;
        let mut first_misnumbered = None;
        let read = bundle.for_each_event(|record| {
            if record.id != count && first_misnumbered.is_none() {
                first_misnumbered = Some((count, record.id));
            }
            count += 1;
            Ok::<_, ArchiveError>(())
        });
        match read {
            Ok(()) => {
                if let Some((position, id)) = first_misnumbered {
                    report.problem(bundle::EVENTS_FILE, format!("event at line {} has id {id}", position + 1));
                }
                if count != manifest.counts.events {
                    report.problem(
                        bundle::EVENTS_FILE,
                        format!("{count} events, manifest.json counts {}", manifest.counts.events),
                    );
                }
            }
            Err(error) => report.problem(bundle::EVENTS_FILE, error.to_string()),
        }
    }
    if present.contains_key(bundle::HAR_FILE) {
        let mut references = Vec::new();
        let mut index = 0;
        let read = bundle.for_each_har_entry(|entry| {
            missing_har_files(index, &entry, &indexed, &mut references);
            index += 1;
            Ok::<_, ArchiveError>(())
        });
        match read {
            Ok(log) => {
                if log.version != "1.2" {
                    report.problem(bundle::HAR_FILE, format!("log.version is {:?}, expected \"1.2\"", log.version));
                }
                for message in references {
                    report.problem(bundle::HAR_FILE, message);
                }
            }
            Err(ArchiveError::Invalid { message, .. }) => report.problem(bundle::HAR_FILE, message),
            Err(error) => return Err(error),
        }
    }
    Ok(report)
}

/// What entry `index` of the HAR references that the bundle does not hold, added to `problems`.
fn missing_har_files(index: usize, entry: &Entry, indexed: &BTreeSet<&str>, problems: &mut Vec<String>) {
    let files =
        [entry.response.content.file.as_deref(), entry.request.post_data.as_ref().and_then(|p| p.file.as_deref())];
    for file in files.into_iter().flatten() {
        if !indexed.contains(file) {
            problems.push(format!(
                "entry {index} ({} {}) references {file}, which is not in the bundle",
                entry.request.method, entry.request.url
            ));
        }
    }
}

/// A HAR read as it streams in: `log.entries` given one at a time to a visitor, the rest of `log` parsed as
/// [`Log`] parses it (the same fields required), other members skipped.
mod har_stream {
    use std::fmt;

    use serde::de::{self, DeserializeSeed, IgnoredAny, MapAccess, SeqAccess, Visitor};

    use super::ArchiveError;
    use trace_manifest::har::{Creator, Entry, Log, Page};

    pub(super) struct HarSeed<'v, E> {
        pub visit: &'v mut dyn FnMut(Entry) -> Result<(), E>,
        /// The visitor's error, which serde's errors cannot carry.
        pub failure: &'v mut Option<E>,
    }

    impl<'de, E: From<ArchiveError>> DeserializeSeed<'de> for HarSeed<'_, E> {
        type Value = Log;

        fn deserialize<D: de::Deserializer<'de>>(self, deserializer: D) -> Result<Log, D::Error> {
            deserializer.deserialize_map(self)
        }
    }

    impl<'de, E: From<ArchiveError>> Visitor<'de> for HarSeed<'_, E> {
        type Value = Log;

        fn expecting(&self, f: &mut fmt::Formatter) -> fmt::Result {
            f.write_str("a HAR: an object with a log")
        }

        fn visit_map<A: MapAccess<'de>>(self, mut map: A) -> Result<Log, A::Error> {
            let mut log = None;
            let mut seed = Some(LogSeed { visit: self.visit, failure: self.failure });
            while let Some(key) = map.next_key::<String>()? {
                match (key.as_str(), seed.take()) {
                    ("log", Some(seed)) => log = Some(map.next_value_seed(seed)?),
                    ("log", None) => return Err(de::Error::duplicate_field("log")),
                    (_, unused) => {
                        seed = unused;
                        map.next_value::<IgnoredAny>()?;
                    }
                }
            }
            log.ok_or_else(|| de::Error::missing_field("log"))
        }
    }

    struct LogSeed<'v, E> {
        visit: &'v mut dyn FnMut(Entry) -> Result<(), E>,
        failure: &'v mut Option<E>,
    }

    impl<'de, E: From<ArchiveError>> DeserializeSeed<'de> for LogSeed<'_, E> {
        type Value = Log;

        fn deserialize<D: de::Deserializer<'de>>(self, deserializer: D) -> Result<Log, D::Error> {
            deserializer.deserialize_map(self)
        }
    }

    impl<'de, E: From<ArchiveError>> Visitor<'de> for LogSeed<'_, E> {
        type Value = Log;

        fn expecting(&self, f: &mut fmt::Formatter) -> fmt::Result {
            f.write_str("a HAR log")
        }

        fn visit_map<A: MapAccess<'de>>(self, mut map: A) -> Result<Log, A::Error> {
            let (mut version, mut creator, mut browser, mut pages, mut entries_seen) = (None, None, None, None, false);
            while let Some(key) = map.next_key::<String>()? {
                match key.as_str() {
                    "version" => version = Some(map.next_value::<String>()?),
                    "creator" => creator = Some(map.next_value::<Creator>()?),
                    "browser" => browser = map.next_value::<Option<Creator>>()?,
                    "pages" => pages = Some(map.next_value::<Vec<Page>>()?),
                    "entries" if !entries_seen => {
                        entries_seen = true;
                        map.next_value_seed(EntriesSeed { visit: &mut *self.visit, failure: &mut *self.failure })?;
                    }
                    "entries" => return Err(de::Error::duplicate_field("entries")),
                    _ => {
                        map.next_value::<IgnoredAny>()?;
                    }
                }
            }
            if !entries_seen {
                return Err(de::Error::missing_field("entries"));
            }
            Ok(Log {
                version: version.ok_or_else(|| de::Error::missing_field("version"))?,
                creator: creator.ok_or_else(|| de::Error::missing_field("creator"))?,
                browser,
                pages: pages.unwrap_or_default(),
                entries: Vec::new(),
            })
        }
    }

    struct EntriesSeed<'v, E> {
        visit: &'v mut dyn FnMut(Entry) -> Result<(), E>,
        failure: &'v mut Option<E>,
    }

    impl<'de, E: From<ArchiveError>> DeserializeSeed<'de> for EntriesSeed<'_, E> {
        type Value = ();

        fn deserialize<D: de::Deserializer<'de>>(self, deserializer: D) -> Result<(), D::Error> {
            deserializer.deserialize_seq(self)
        }
    }

    impl<'de, E: From<ArchiveError>> Visitor<'de> for EntriesSeed<'_, E> {
        type Value = ();

        fn expecting(&self, f: &mut fmt::Formatter) -> fmt::Result {
            f.write_str("a list of HAR entries")
        }

        fn visit_seq<A: SeqAccess<'de>>(self, mut seq: A) -> Result<(), A::Error> {
            while let Some(entry) = seq.next_element::<Entry>()? {
                if let Err(error) = (self.visit)(entry) {
                    *self.failure = Some(error);
                    return Err(de::Error::custom("the visitor stopped the reading"));
                }
            }
            Ok(())
        }
    }
}

#[cfg(test)]
mod tests {
    use std::io::Write;

    use zip::write::SimpleFileOptions;

    use super::*;

    fn zip_with(entries: &[(&str, &[u8])]) -> tempfile::NamedTempFile {
        let file = tempfile::NamedTempFile::new().unwrap();
        let mut zip = zip::ZipWriter::new(file.reopen().unwrap());
        for (name, bytes) in entries {
            // As the export writes it: a pack is stored, being compressed already.
            let options = match *name {
                pack::PACK_FILE => SimpleFileOptions::default().compression_method(zip::CompressionMethod::Stored),
                _ => SimpleFileOptions::default(),
            };
            zip.start_file(*name, options).unwrap();
            zip.write_all(bytes).unwrap();
        }
        zip.finish().unwrap();
        file
    }

    fn open_error(file: &tempfile::NamedTempFile, limits: ZipLimits) -> String {
        match Bundle::open_with_limits(file.path(), limits) {
            Ok(_) => panic!("the zip was accepted"),
            Err(error) => error.to_string(),
        }
    }

    #[test]
    fn zip_bombs_are_refused_before_anything_is_read() {
        let zeros = vec![0u8; 4 << 20];
        let bomb = zip_with(&[("resources/zeros", &zeros)]);
        let error = open_error(&bomb, ZipLimits { max_ratio: 100, ..ZipLimits::default() });
        assert!(error.contains("looks like a zip bomb"), "{error}");
        let error = open_error(&bomb, ZipLimits { max_entry_bytes: 1 << 20, ..ZipLimits::default() });
        assert!(error.contains("expands to 4194304 bytes"), "{error}");
        let many = zip_with(&[("a", b"1"), ("b", b"2"), ("c", b"3")]);
        let error = open_error(&many, ZipLimits { max_entries: 2, ..ZipLimits::default() });
        assert!(error.contains("3 entries"), "{error}");
    }

    #[test]
    fn a_document_that_expands_into_memory_is_refused_where_a_body_may() {
        // 4 MiB of one repeated run of bytes compress about 250:1: fine for a body, which is streamed, but
        // a HAR is parsed whole, and a small zip of such documents would take gigabytes of memory to read.
        let padding: Vec<u8> = (0..4u32 << 20).map(|i| i as u8).collect();
        let har = zip_with(&[("recording.har", &padding)]);
        let error = open_error(&har, ZipLimits::default());
        assert!(error.contains("\"recording.har\" compresses") && error.contains("limit 100:1"), "{error}");
        let body = zip_with(&[("resources/spaces", &padding)]);
        assert!(Bundle::open_with_limits(body.path(), ZipLimits::default()).is_ok());
        let limits = ZipLimits { max_document_bytes: 1 << 20, max_document_ratio: 1000, ..ZipLimits::default() };
        let error = open_error(&har, limits);
        assert!(error.contains("recording.har is 4194304 bytes, more than the limit of 1048576"), "{error}");
    }

    #[test]
    fn a_directory_document_over_the_limit_is_refused_before_it_is_read() {
        let dir = tempfile::tempdir().unwrap();
        std::fs::write(dir.path().join("events.jsonl"), vec![b'\n'; 2 << 20]).unwrap();
        std::fs::write(dir.path().join("storage.json"), b"{}").unwrap();
        let limits = ZipLimits { max_document_bytes: 1 << 20, ..ZipLimits::default() };
        let mut bundle = Bundle::open_with_limits(dir.path(), limits).unwrap();
        let error = bundle.events().unwrap_err().to_string();
        assert!(error.contains("events.jsonl is 2097152 bytes, more than the limit"), "{error}");
        assert!(bundle.read("events.jsonl").is_err());
        assert_eq!(bundle.read("storage.json").unwrap(), b"{}");
    }

    #[test]
    fn a_document_that_would_take_more_memory_than_the_limit_is_refused_before_it_is_read_whole() {
        // Sparse files: under the document limit, over the memory limit by the estimate, and no disk taken.
        let dir = tempfile::tempdir().unwrap();
        let limits = ZipLimits { max_memory_bytes: 1 << 30, ..ZipLimits::default() };
        File::create(dir.path().join("events.jsonl")).unwrap().set_len(200 << 20).unwrap();
        File::create(dir.path().join("recording.har")).unwrap().set_len(210 << 20).unwrap();
        let mut bundle = Bundle::open_with_limits(dir.path(), limits).unwrap();
        let error = bundle.events().unwrap_err().to_string();
        assert!(error.contains("events.jsonl is 209715200 bytes, which would take about 1258291200"), "{error}");
        assert!(error.contains("set TRACE_MAX_MEMORY"), "{error}");
        let error = bundle.har().unwrap_err().to_string();
        assert!(error.contains("recording.har is 220200960 bytes, which would take about"), "{error}");
    }

    /// Issue #45: a pack of a few KB declaring one snapshot of 1,900 MiB was unpacked whole into a
    /// temporary file on every open that read it (validate, collect) and took 3.8 GB of disk to import. A
    /// packed file is a file, within a file's limit, refused on opening from the index alone; and a pack
    /// is decoded as its files are read, never into a file of its own.
    #[test]
    fn a_packed_snapshot_past_a_files_limit_is_refused_before_a_byte_is_decoded() {
        let files = [("dom/000001.html", vec![0u8; 64 << 20]), ("screenshots/000002.webp", b"RIFF-image".to_vec())];
        let packed = pack::tests::pack_of(&files);
        assert!(packed.len() < 64 << 10, "{} bytes", packed.len());
        let zip = zip_with(&[(pack::PACK_FILE, &packed)]);
        let limits = ZipLimits { max_entry_bytes: 32 << 20, ..ZipLimits::default() };
        let error = Bundle::open_with_limits(zip.path(), limits).err().unwrap().to_string();
        assert!(error.contains("dom/000001.html") && error.contains("more than the limit of 33554432"), "{error}");
        // What the pack unpacks to counts against what the bundle may unpack to.
        let limits = ZipLimits { max_total_bytes: 32 << 20, ..ZipLimits::default() };
        let error = Bundle::open_with_limits(zip.path(), limits).err().unwrap().to_string();
        assert!(error.contains("more than the limit of 33554432") && error.contains("TRACE_MAX_UNPACKED"), "{error}");
    }

    /// The other side: a real pack's files read whole, in its order and out of it, again, and by their
    /// first bytes; a snapshot too large to read whole is refused by name and still streams; a pack cut
    /// short or stored compressed inside its zip says so.
    #[test]
    fn a_pack_is_decoded_as_its_files_are_read_in_any_order() {
        let files: Vec<(String, Vec<u8>)> = (1..=6)
            .map(|n| (format!("dom/{n:06}.html"), format!("<p>page {n}</p>{}", "x".repeat(n * 1000)).into_bytes()))
            .chain([("screenshots/000007.webp".to_owned(), b"RIFF-image".to_vec())])
            .collect();
        let borrowed: Vec<(&str, Vec<u8>)> = files.iter().map(|(p, b)| (p.as_str(), b.clone())).collect();
        let packed = pack::tests::pack_of(&borrowed);
        let zip = zip_with(&[(pack::PACK_FILE, &packed)]);
        let mut bundle = Bundle::open(zip.path()).unwrap();
        for order in [vec![0, 1, 2, 3, 4, 5, 6], vec![6, 2, 0, 5, 5, 1, 3, 4]] {
            for at in order {
                let (path, bytes) = &files[at];
                assert_eq!(&bundle.read(path).unwrap(), bytes, "{path}");
            }
        }
        assert_eq!(bundle.read_start("dom/000004.html", 4).unwrap(), b"<p>p");
        assert_eq!(bundle.read("dom/000005.html").unwrap(), files[4].1, "read after reading the start of another");

        let huge = [("dom/000001.html", vec![0u8; 24 << 20]), ("screenshots/000002.webp", b"RIFF-image".to_vec())];
        let zip = zip_with(&[(pack::PACK_FILE, &pack::tests::pack_of(&huge))]);
        let small = ZipLimits { max_memory_bytes: 16 << 20, ..ZipLimits::default() };
        let mut bundle = Bundle::open_with_limits(zip.path(), small).unwrap();
        let error = bundle.read("dom/000001.html").unwrap_err().to_string();
        assert!(error.contains("dom/000001.html is 25165824 bytes") && error.contains("TRACE_MAX_MEMORY"), "{error}");
        assert_eq!(bundle.hash("dom/000001.html").unwrap().0, 24 << 20, "streamed, it reads whole");
        assert_eq!(bundle.read("screenshots/000002.webp").unwrap(), b"RIFF-image");

        let mut cut = packed.clone();
        cut.truncate(cut.len() - 8);
        let zip = zip_with(&[(pack::PACK_FILE, &cut)]);
        let error = Bundle::open(zip.path()).unwrap().read("screenshots/000007.webp").unwrap_err().to_string();
        assert!(error.contains("dom.pack is not valid"), "{error}");
        let file = tempfile::NamedTempFile::new().unwrap();
        let mut writer = zip::ZipWriter::new(file.reopen().unwrap());
        writer.start_file(pack::PACK_FILE, zip::write::SimpleFileOptions::default()).unwrap();
        writer.write_all(&packed).unwrap();
        writer.finish().unwrap();
        let error = Bundle::open(file.path()).err().unwrap().to_string();
        assert!(error.contains("compressed inside the zip"), "{error}");
    }

    #[test]
    fn a_file_swapped_for_a_link_or_a_fifo_after_opening_is_not_followed() {
        let dir = tempfile::tempdir().unwrap();
        std::fs::create_dir_all(dir.path().join("resources")).unwrap();
        std::fs::write(dir.path().join("resources/ab"), b"body").unwrap();
        std::fs::write(dir.path().join("storage.json"), b"{}").unwrap();
        let mut bundle = Bundle::open(dir.path()).unwrap();
        assert_eq!(bundle.read("resources/ab").unwrap(), b"body");

        let secret = dir.path().join("secret");
        std::fs::write(&secret, b"outside").unwrap();
        std::fs::remove_file(dir.path().join("storage.json")).unwrap();
        std::os::unix::fs::symlink(&secret, dir.path().join("storage.json")).unwrap();
        let error = bundle.read("storage.json").unwrap_err().to_string();
        assert!(error.contains("\"storage.json\" is a symbolic link"), "{error}");
        // A folder swapped for a link to another folder.
        let elsewhere = tempfile::tempdir().unwrap();
        std::fs::write(elsewhere.path().join("ab"), b"outside").unwrap();
        std::fs::remove_dir_all(dir.path().join("resources")).unwrap();
        std::os::unix::fs::symlink(elsewhere.path(), dir.path().join("resources")).unwrap();
        assert!(bundle.read("resources/ab").is_err());
        assert!(bundle.hash("resources/ab").is_err());
        // A FIFO is refused at once, not waited on.
        std::fs::remove_file(dir.path().join("resources")).unwrap();
        std::fs::create_dir(dir.path().join("resources")).unwrap();
        let fifo = dir.path().join("resources/ab");
        assert!(std::process::Command::new("mkfifo").arg(&fifo).status().unwrap().success());
        let error = bundle.read("resources/ab").unwrap_err().to_string();
        assert!(error.contains("neither a regular file"), "{error}");
    }

    /// Issue #45: a bundle that is a FIFO held `eval` and `audit` in its open, deaf to SIGTERM. It is
    /// refused at once, saying what it is; a zip bundle opens as before.
    #[test]
    fn a_bundle_that_is_a_fifo_is_refused_without_waiting() {
        let dir = tempfile::tempdir().unwrap();
        let fifo = dir.path().join("task.zip");
        assert!(std::process::Command::new("mkfifo").arg(&fifo).status().unwrap().success());
        let started = std::time::Instant::now();
        let error = Bundle::open(&fifo).err().unwrap().to_string();
        assert!(error.contains("neither a regular file"), "{error}");
        assert!(started.elapsed() < std::time::Duration::from_secs(5));
        let zip = zip_with(&[("storage.json", b"{}")]);
        assert_eq!(Bundle::open(zip.path()).unwrap().read("storage.json").unwrap(), b"{}");
    }

    #[test]
    fn a_har_is_read_an_entry_at_a_time_with_the_rest_of_its_log() {
        let dir = tempfile::tempdir().unwrap();
        let entry = |url: &str| {
            format!(
                r#"{{"startedDateTime":"2025-11-22T10:00:00.000Z","time":1,"request":{{"method":"GET","url":"{url}","httpVersion":"HTTP/1.1","cookies":[],"headers":[],"queryString":[],"headersSize":-1,"bodySize":0}},"response":{{"status":200,"statusText":"OK","httpVersion":"HTTP/1.1","cookies":[],"headers":[],"content":{{"size":0,"mimeType":"text/plain"}},"redirectURL":"","headersSize":-1,"bodySize":0}},"cache":{{}},"timings":{{"blocked":-1,"dns":-1,"connect":-1,"send":0,"wait":0,"receive":0,"ssl":-1}}}}"#
            )
        };
        let har = format!(
            r#"{{"log":{{"entries":[{},{}],"version":"1.2","comment":"x","creator":{{"name":"x","version":"0"}}}}}}"#,
            entry("http://a.test/"),
            entry("http://b.test/")
        );
        std::fs::write(dir.path().join("recording.har"), &har).unwrap();
        let mut bundle = Bundle::open(dir.path()).unwrap();
        let mut urls = Vec::new();
        let log = bundle
            .for_each_har_entry(|entry| {
                urls.push(entry.request.url);
                Ok::<_, ArchiveError>(())
            })
            .unwrap();
        assert_eq!(urls, ["http://a.test/", "http://b.test/"]);
        assert_eq!((log.version.as_str(), log.creator.name.as_str()), ("1.2", "x"));
        assert_eq!(bundle.har().unwrap().log.entries.len(), 2);

        // The same fields required as when parsed whole, and the visitor's own error carried out.
        std::fs::write(dir.path().join("recording.har"), r#"{"log":{"version":"1.2","entries":[]}}"#).unwrap();
        let error = bundle.for_each_har_entry(|_| Ok::<_, ArchiveError>(())).unwrap_err().to_string();
        assert!(error.contains("missing field `creator`"), "{error}");
        std::fs::write(dir.path().join("recording.har"), &har).unwrap();
        let error =
            bundle.for_each_har_entry(|_| Err(ArchiveError::Missing("stopped".to_owned()))).unwrap_err().to_string();
        assert_eq!(error, "bundle has no stopped");
    }

    #[test]
    fn the_start_of_a_file_is_read_without_the_rest() {
        let long: Vec<u8> = (0..100_000u32).map(|i| i as u8).collect();
        let zip = zip_with(&[("resources/long", &long), ("resources/short", b"abc")]);
        let mut bundle = Bundle::open(zip.path()).unwrap();
        assert_eq!(bundle.read_start("resources/long", 10).unwrap(), &long[..10]);
        assert_eq!(bundle.read_start("resources/short", 10).unwrap(), b"abc");
        assert!(matches!(bundle.read_start("resources/none", 10), Err(ArchiveError::Missing(_))));
    }

    #[test]
    fn a_zip_with_two_entries_of_one_name_is_refused() {
        let file = tempfile::NamedTempFile::new().unwrap();
        let mut zip = zip::ZipWriter::new(file.reopen().unwrap());
        // The zip crate writes no duplicate name, so the second entry gets one of the same length, which is
        // then made the same in the bytes.
        for (name, bytes) in [("manifest.json", b"first".as_slice()), ("manifest.jsoN", b"second")] {
            zip.start_file(name, SimpleFileOptions::default().large_file(true)).unwrap();
            zip.write_all(bytes).unwrap();
        }
        zip.finish().unwrap();
        let mut bytes = std::fs::read(file.path()).unwrap();
        // Both local headers and both central directory entries: make the second name equal the first.
        let mut renamed = 0;
        for at in 0..bytes.len().saturating_sub(13) {
            if &bytes[at..at + 13] == b"manifest.jsoN" {
                bytes[at + 12] = b'n';
                renamed += 1;
            }
        }
        assert_eq!(renamed, 2, "the second entry's local and central names");
        std::fs::write(file.path(), &bytes).unwrap();
        let error = open_error(&file, ZipLimits::default());
        assert!(error.contains("two entries named \"manifest.json\""), "{error}");
    }

    #[test]
    fn a_directory_holding_a_link_anywhere_is_refused() {
        let outside = tempfile::tempdir().unwrap();
        std::fs::write(outside.path().join("secret"), b"outside the bundle").unwrap();
        for link in ["resources/abc", ".hidden-link", "dom/.x"] {
            let bundle = tempfile::tempdir().unwrap();
            std::fs::create_dir_all(bundle.path().join("resources")).unwrap();
            std::fs::create_dir_all(bundle.path().join("dom")).unwrap();
            std::fs::write(bundle.path().join("manifest.json"), b"{}").unwrap();
            std::os::unix::fs::symlink(outside.path().join("secret"), bundle.path().join(link)).unwrap();
            let error = Bundle::open(bundle.path()).err().map(|e| e.to_string()).unwrap_or_default();
            assert!(error.contains(&format!("{link:?} is a symbolic link")), "{link}: {error}");
        }
        let fifo = tempfile::tempdir().unwrap();
        let status = std::process::Command::new("mkfifo").arg(fifo.path().join("events.jsonl")).status().unwrap();
        assert!(status.success());
        let error = Bundle::open(fifo.path()).err().map(|e| e.to_string()).unwrap_or_default();
        assert!(error.contains("neither a regular file nor a folder"), "{error}");
    }

    #[test]
    fn events_are_read_a_line_at_a_time_and_an_overlong_line_is_refused() {
        let dir = tempfile::tempdir().unwrap();
        let event =
            r#"{"id":0,"ts":1.0,"type":"navigation","url":"http://shop.test/","cause":"typed","main_frame":true}"#;
        std::fs::write(
            dir.path().join("events.jsonl"),
            format!("{event}\n\n{}\n", event.replace("\"id\":0", "\"id\":1")),
        )
        .unwrap();
        let events = Bundle::open(dir.path()).unwrap().events().unwrap();
        assert_eq!(events.iter().map(|e| e.id).collect::<Vec<_>>(), [0, 1]);

        // One line of a file's worth: refused when the limit is passed, not read whole first.
        let mut file = File::create(dir.path().join("events.jsonl")).unwrap();
        file.write_all(format!("{event}\n{{\"id\":1,\"note\":\"").as_bytes()).unwrap();
        let chunk = vec![b'x'; 1 << 20];
        for _ in 0..(MAX_EVENT_LINE_BYTES >> 20) + 1 {
            file.write_all(&chunk).unwrap();
        }
        drop(file);
        let error = Bundle::open(dir.path()).unwrap().events().unwrap_err().to_string();
        assert!(error.contains("line 2 is longer than"), "{error}");
    }

    #[test]
    fn reading_stops_at_the_declared_size() {
        let file = zip_with(&[("manifest.json", b"{}"), ("events.jsonl", b"")]);
        let mut bundle = Bundle::open(file.path()).unwrap();
        assert_eq!(bundle.read("manifest.json").unwrap(), b"{}");
        assert!(matches!(bundle.read("../manifest.json"), Err(ArchiveError::UnsafePath(_))));
        assert!(matches!(bundle.read("missing"), Err(ArchiveError::Missing(_))));
        let error = bundle.manifest().unwrap_err().to_string();
        assert!(error.contains("\"format\" must be \"trace-bundle\""), "{error}");
    }

    #[test]
    fn a_newer_format_is_refused_by_name() {
        let manifest = br#"{"format":"trace-bundle","format_version":999}"#;
        let error = parse_manifest(manifest).unwrap_err().to_string();
        let expected =
            format!("format version 999, newer than this program understands ({})", trace_manifest::FORMAT_VERSION);
        assert!(error.contains(&expected), "{error}");
    }

    #[test]
    fn hashing_writer_counts_and_hashes() {
        let mut writer = HashingWriter::new(Vec::new());
        writer.write_all(b"abc").unwrap();
        let (inner, size, sha256) = writer.finish();
        assert_eq!((inner, size), (b"abc".to_vec(), 3));
        assert_eq!(sha256, "ba7816bf8f01cfea414140de5dae2223b00361a396177a9cb410ff61f20015ad");
    }
}
