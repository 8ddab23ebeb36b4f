//! `trace-host export`: a task's bundle as one zip, in the layout of a bundle directory, so that
//! `trace-host validate`, `trace-replay` and Playwright's `routeFromHAR` (which reads the zip's `.har` and
//! the files its `_file` fields name) all read it.
//!
//! The zip is written as [`trace_store::atomic`] writes every file (a partial name beside the target, renamed
//! when complete): an interrupted export never leaves a zip that looks whole. A task not yet post-processed is processed first, so that an
//! export carries its trajectory, credentials, checkpoints and ignore list. With `--redact`, the bundle is
//! first redacted into a staging directory beside the target (see [`crate::redact`]), and the written zip
//! is searched for every original secret before it gets its name.
//!
//! `--format wacz` writes the same bundle, redacted the same way, as a WACZ web archive instead (see
//! [`wacz`]); this module chooses the format, and the redacted WACZ is searched with its WARC records
//! decompressed.

pub mod wacz;

use std::cell::RefCell;
use std::fs::File;
use std::io::{BufWriter, Write};
use std::path::Path;

use anyhow::{Context, Result};
use serde::ser::{Error as _, SerializeMap, SerializeSeq};
use serde::{Serialize, Serializer};
use trace_bundle::archive::{Bundle, HashingWriter};
use trace_bundle::pack;
use trace_manifest::bundle::{self, BundleManifest, FileEntry};
use trace_manifest::har::{Entry, Har, Log};
use trace_manifest::report::{ExportFormat, ExportReport, RedactionSummary};
use trace_manifest::task::TaskId;
use zip::CompressionMethod;
use zip::write::SimpleFileOptions;

use crate::tasks::{Purpose, TaskBundle, TaskStore};
use crate::{process, progress, redact};
use trace_store::atomic::AtomicFile;

#[derive(Debug, Clone, Default)]
pub struct ExportOptions {
    /// A bundle zip, or a WACZ.
    pub format: ExportFormat,
    /// Write the HAR with every body inline, for tools that read a single file.
    pub embed_bodies: bool,
    /// Show a progress bar on a terminal.
    pub progress: bool,
    /// Replace every secret by a placeholder, and prove the zip holds none.
    pub redact: bool,
    /// What to do with values that look like secrets but no rule chose (with `redact`).
    pub suspects: redact::SuspectDecisions,
}

/// What [`export_bundle`] wrote.
#[derive(Debug, Clone)]
pub struct Written {
    pub files: usize,
    pub bytes: u64,
    pub redaction: Option<RedactionSummary>,
    /// For a WACZ: the HTTP exchanges its WARC holds.
    pub exchanges: Option<usize>,
    /// For a WACZ: the exchanges left out of it, their URL no URL.
    pub exchanges_left_out: Option<usize>,
}

pub fn export(store: &TaskStore, task_id: &TaskId, out: &Path, options: &ExportOptions) -> Result<ExportReport> {
    let (task_bundle, processed) = processed_task_bundle(store, task_id, Purpose::Export)?;
    let mut source = Bundle::open(task_bundle.dir())?;
    let written = export_bundle(&mut source, out, options)?;
    if !options.redact {
        // Said alike whatever the format: a WACZ holds the secrets in its records and its index as a zip
        // holds them in its files.
        tracing::warn!(
            "{} is not redacted: it holds the passwords, cookies and tokens of the recording as they were; to \
             share it, export with --redact",
            out.display()
        );
    }
    Ok(ExportReport {
        task_id: task_id.clone(),
        status: task_bundle.task().status,
        zip: out.to_owned(),
        format: options.format,
        files: written.files,
        bytes: written.bytes,
        exchanges: written.exchanges,
        exchanges_left_out: written.exchanges_left_out,
        processed,
        redaction: written.redaction,
    })
}

/// A stopped task's finalized bundle under its lock (see [`TaskStore::bundle_for`]), post-processed first
/// if it never was; the flag says whether it was just now. Processing is derived data: if it fails, the
/// recording is still worth exporting as it is, and the failure is logged.
pub fn processed_task_bundle<'s>(
    store: &'s TaskStore,
    task_id: &TaskId,
    purpose: Purpose,
) -> Result<(TaskBundle<'s>, bool)> {
    let task_bundle = store.bundle_for(task_id, purpose)?;
    let processed = task_bundle.processed_at().is_none()
        && process::process_task_bundle(&task_bundle, &process::ProcessOptions::without_audit())
            .inspect_err(|error| tracing::warn!("{task_id} left unprocessed: {error:#}"))
            .is_ok();
    Ok((task_bundle, processed))
}

/// Writes a bundle (directory or zip) at `out` in the format asked, redacted when asked. Nothing appears
/// at `out` unless the whole file was written (and, redacted, searched).
pub fn export_bundle(source: &mut Bundle, out: &Path, options: &ExportOptions) -> Result<Written> {
    let mut file = AtomicFile::create(out)?;
    let written = if options.redact {
        write_redacted(source, &mut file, options)?
    } else {
        write_format(source, file.file(), options)?
    };
    file.commit()?;
    Ok(written)
}

/// Writes `source` into `file` as `options.format` says.
fn write_format(source: &mut Bundle, file: &mut File, options: &ExportOptions) -> Result<Written> {
    match options.format {
        ExportFormat::Zip => {
            let mut manifest = source.manifest()?;
            write_zip(source, &mut manifest, file, options)?;
            Ok(Written {
                files: manifest.files.len() + 1,
                bytes: manifest.files.iter().map(|f| f.size).sum(),
                redaction: None,
                exchanges: None,
                exchanges_left_out: None,
            })
        }
        ExportFormat::Wacz => {
            let written = wacz::write_wacz(source, file)?;
            Ok(Written {
                files: written.files,
                bytes: written.bytes,
                redaction: None,
                exchanges: Some(written.exchanges),
                exchanges_left_out: (written.left_out > 0).then_some(written.left_out),
            })
        }
    }
}

/// Redacts `source` into a staging directory beside `path` (removed afterwards), writes that in the
/// format asked, and searches what was written for the originals.
fn write_redacted(source: &mut Bundle, out: &mut AtomicFile, options: &ExportOptions) -> Result<Written> {
    let path = out.partial_path().to_owned();
    let beside = path.parent().filter(|parent| !parent.as_os_str().is_empty()).unwrap_or(Path::new("."));
    let staging = tempfile::Builder::new()
        .prefix(".trace-redacting-")
        .tempdir_in(beside)
        .with_context(|| format!("cannot create a staging directory in {}", beside.display()))?;
    let redacted = redact::redact_bundle(source, staging.path(), &options.suspects)?;
    let mut bundle = Bundle::open(staging.path())?;
    let mut written = write_format(&mut bundle, out.file(), options)?;
    match options.format {
        ExportFormat::Zip => redacted.verify_zip(&path)?,
        ExportFormat::Wacz => redacted.verify_wacz(&path)?,
    }
    written.redaction = Some(redacted.summary);
    Ok(written)
}

fn write_zip(
    source: &mut Bundle,
    manifest: &mut BundleManifest,
    file: &mut File,
    options: &ExportOptions,
) -> Result<()> {
    let mut zip = zip::ZipWriter::new(BufWriter::new(file));
    // A pack an earlier export made is made anew from the snapshots it holds.
    manifest.files.retain(|entry| entry.path != pack::PACK_FILE);
    let total: u64 = manifest.files.iter().map(|f| f.size).sum();
    let progress = progress::bar(
        total,
        options.progress,
        "{spinner} exporting [{bar:30}] {bytes}/{total_bytes} ({bytes_per_sec}, {eta})",
    );

    let mut packed = Vec::new();
    for entry in manifest.files.iter_mut() {
        if pack::is_packed(&entry.path) {
            packed.push((entry.path.clone(), entry.size));
            continue;
        }
        let start = source.read_start(&entry.path, COMPRESSIBILITY_SAMPLE)?;
        zip.start_file(entry.path.as_str(), file_options(&entry.path, &start))?;
        if options.embed_bodies && entry.path == bundle::HAR_FILE {
            let har = source.har().context("recording.har cannot be read")?;
            let mut hashing = HashingWriter::new(&mut zip);
            write_har_with_bodies(source, &har, &mut hashing)?;
            let (_, size, sha256) = hashing.finish();
            entry.size = size;
            entry.sha256 = sha256;
        } else {
            source.copy_to(&entry.path, &mut zip)?;
        }
        progress.inc(entry.size);
    }
    if !packed.is_empty() {
        // Already compressed: stored, so that the zip's own deflate does not run over it again.
        zip.start_file(pack::PACK_FILE, file_options(pack::PACK_FILE, &[]))?;
        let mut hashing = HashingWriter::new(&mut zip);
        pack::write_pack(&mut hashing, &packed, |path, sink| {
            let copied = source.copy_to(path, sink).map_err(std::io::Error::other)?;
            progress.inc(copied);
            Ok(copied)
        })
        .context("cannot pack the DOM snapshots")?;
        let (_, size, sha256) = hashing.finish();
        // Readers older than the pack must refuse the bundle by its version rather than miss its snapshots.
        manifest.format_version = manifest.format_version.max(trace_manifest::FORMAT_VERSION);
        let at = manifest.files.partition_point(|entry| entry.path.as_str() < pack::PACK_FILE);
        manifest.files.insert(at, FileEntry { path: pack::PACK_FILE.to_owned(), size, sha256 });
    }
    zip.start_file(bundle::MANIFEST_FILE, file_options(bundle::MANIFEST_FILE, b"{}"))?;
    serde_json::to_writer_pretty(&mut zip, &manifest)?;
    zip.finish()?.flush()?;
    progress.finish_and_clear();
    Ok(())
}

/// How much of a file's start tells whether it compresses.
const COMPRESSIBILITY_SAMPLE: usize = 64 << 10;

/// Entropy of a file's bytes, in bits per byte, past which deflate gains nothing worth its time: what is
/// already compressed (images, fonts, archives, gzip) sits at 7.9–8.0, text and JSON at 4.5–6.
const COMPRESSED_BITS_PER_BYTE: f64 = 7.5;

/// Images, the snapshot pack and whatever else is already compressed (told by the entropy of its
/// `start`) are stored; the rest is deflated at level 6. Level 6 against level 1 makes the benchmark's
/// applications' zips 15–20% smaller; it was slow only on incompressible bodies, which are stored instead.
fn file_options(path: &str, start: &[u8]) -> SimpleFileOptions {
    let method = compression(path, start);
    let options = SimpleFileOptions::default().large_file(true).compression_method(method);
    if method == CompressionMethod::Deflated { options.compression_level(Some(6)) } else { options }
}

fn compression(path: &str, start: &[u8]) -> CompressionMethod {
    let compressed = [".png", ".jpg", ".webp"].iter().any(|image| path.ends_with(image)) || path == pack::PACK_FILE;
    if compressed || bits_per_byte(start) > COMPRESSED_BITS_PER_BYTE {
        CompressionMethod::Stored
    } else {
        CompressionMethod::Deflated
    }
}

/// The Shannon entropy of `bytes`, in bits per byte (0 for none).
fn bits_per_byte(bytes: &[u8]) -> f64 {
    let mut counts = [0usize; 256];
    for &byte in bytes {
        counts[usize::from(byte)] += 1;
    }
    let total = bytes.len() as f64;
    counts.iter().filter(|&&n| n > 0).map(|&n| n as f64 / total).map(|p| -p * p.log2()).sum()
}

/// Writes the HAR with each entry's body inline, serialized from the HAR model (so that no field of it is
/// ever left out), one entry at a time, so that memory holds one body at most rather than all of them.
fn write_har_with_bodies(source: &mut Bundle, har: &Har, out: &mut dyn Write) -> Result<()> {
    let bundle = RefCell::new(source);
    let embedded = EmbeddedHar { har, bundle: &bundle };
    serde_json::to_writer(out, &embedded)?;
    Ok(())
}

/// A HAR whose entries read their bodies from the bundle as they are serialized.
struct EmbeddedHar<'a, 'b> {
    har: &'a Har,
    bundle: &'a RefCell<&'b mut Bundle>,
}

struct EmbeddedLog<'a, 'b>(&'a EmbeddedHar<'a, 'b>);

struct EmbeddedEntries<'a, 'b>(&'a EmbeddedHar<'a, 'b>);

impl Serialize for EmbeddedHar<'_, '_> {
    fn serialize<S: Serializer>(&self, serializer: S) -> Result<S::Ok, S::Error> {
        let mut har = serializer.serialize_map(Some(1))?;
        har.serialize_entry("log", &EmbeddedLog(self))?;
        har.end()
    }
}

impl Serialize for EmbeddedLog<'_, '_> {
    fn serialize<S: Serializer>(&self, serializer: S) -> Result<S::Ok, S::Error> {
        // Every field of the log as its type serializes it, but the entries, which come with their bodies.
        let log = Log { entries: Vec::new(), ..self.0.har.log.clone() };
        let serde_json::Value::Object(fields) = serde_json::to_value(&log).map_err(S::Error::custom)? else {
            return Err(S::Error::custom("a HAR log serializes as an object"));
        };
        let mut map = serializer.serialize_map(Some(fields.len()))?;
        for (name, value) in fields.iter().filter(|(name, _)| name.as_str() != "entries") {
            map.serialize_entry(name, value)?;
        }
        map.serialize_entry("entries", &EmbeddedEntries(self.0))?;
        map.end()
    }
}

impl Serialize for EmbeddedEntries<'_, '_> {
    fn serialize<S: Serializer>(&self, serializer: S) -> Result<S::Ok, S::Error> {
        let entries = &self.0.har.log.entries;
        let mut seq = serializer.serialize_seq(Some(entries.len()))?;
        for entry in entries {
            let entry = with_body(&mut self.0.bundle.borrow_mut(), entry).map_err(S::Error::custom)?;
            seq.serialize_element(&entry)?;
        }
        seq.end()
    }
}

/// `entry` with its response body inline, and its request body too when that is text.
fn with_body(source: &mut Bundle, entry: &Entry) -> Result<Entry> {
    let mut entry = entry.clone();
    if let Some(file) = entry.response.content.file.clone() {
        entry.response.content.set_inline(&source.read(&file)?);
    }
    if let Some(post_data) = entry.request.post_data.as_mut()
        && let Some(file) = post_data.file.clone()
    {
        post_data.set_inline_if_text(source.read(&file)?);
    }
    Ok(entry)
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn text_is_deflated_and_what_is_already_compressed_is_stored() {
        let text = "function add(a, b) { return a + b; }\n".repeat(1000);
        assert_eq!(compression("resources/text", text.as_bytes()), CompressionMethod::Deflated);
        // Bytes as random as a compressed stream's.
        let mut state = 0x9e37_79b9_u32;
        let random: Vec<u8> = (0..65536)
            .map(|_| {
                state ^= state << 13;
                state ^= state >> 17;
                state ^= state << 5;
                state as u8
            })
            .collect();
        assert!(bits_per_byte(&random) > 7.9);
        assert_eq!(compression("resources/video", &random), CompressionMethod::Stored);
        assert_eq!(compression("screenshots/000001.png", b""), CompressionMethod::Stored);
    }
}
