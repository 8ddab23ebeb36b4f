//! `trace-host export`: a task's bundle as one zip, in the layout of a bundle directory, so that
//! `trace-host validate`, `trace-replay` and Playwright's `routeFromHAR` (which reads the zip's `.har` and
//! the files its `_file` fields name) all read it.
//!
//! The zip is written to a temporary name beside the target and renamed when complete: an interrupted
//! export never leaves a zip that looks whole. A task not yet post-processed is processed first, so that an
//! export carries its trajectory, credentials, checkpoints and ignore list. With `--redact`, the bundle is
//! first redacted into a staging directory beside the target (see [`crate::redact`]), and the written zip
//! is searched for every original secret before it gets its name.

use std::fs::File;
use std::io::{BufWriter, Write};
use std::path::{Path, PathBuf};

use anyhow::{Context, Result};
use indicatif::{ProgressBar, ProgressStyle};
use rusqlite::Connection;
use trace_manifest::archive::{Bundle, HashingWriter};
use trace_manifest::bundle::{self, BundleManifest};
use trace_manifest::har::Har;
use trace_manifest::task::TaskId;
use zip::CompressionMethod;
use zip::write::SimpleFileOptions;

use crate::db::TaskRow;
use crate::paths::DataDir;
use trace_manifest::report::{ExportReport, RedactionSummary};

use crate::redact;
use crate::task_lock::TaskLock;
use crate::{db, finalize, process};

#[derive(Debug, Clone, Default)]
pub struct ExportOptions {
    /// Write the HAR with every body inline, for tools that read a single file.
    pub embed_bodies: bool,
    /// Show a progress bar on a terminal.
    pub progress: bool,
    /// Replace every secret by a placeholder, and prove the zip holds none.
    pub redact: bool,
}

/// What [`export_bundle`] wrote.
#[derive(Debug, Clone)]
pub struct Written {
    pub files: usize,
    pub bytes: u64,
    pub redaction: Option<RedactionSummary>,
}

pub fn export(
    conn: &Connection,
    data: &DataDir,
    task_id: &TaskId,
    out: &Path,
    options: &ExportOptions,
) -> Result<ExportReport> {
    let (task, dir, _lock, processed) = processed_task_bundle(conn, data, task_id, "export")?;
    let mut source = Bundle::open(&dir)?;
    let written = export_bundle(&mut source, out, options)?;
    Ok(ExportReport {
        task_id: task_id.clone(),
        status: task.status,
        zip: out.to_owned(),
        files: written.files,
        bytes: written.bytes,
        processed,
        redaction: written.redaction,
    })
}

/// A stopped task's finalized bundle under its lock (see [`finalize::locked_bundle`]), post-processed first
/// if it never was; the flag says whether it was just now. Processing is derived data: if it fails, the
/// recording is still worth exporting as it is, and the failure is logged.
pub fn processed_task_bundle(
    conn: &Connection,
    data: &DataDir,
    task_id: &TaskId,
    purpose: &str,
) -> Result<(TaskRow, PathBuf, TaskLock, bool)> {
    let (task, dir, lock) = finalize::locked_bundle(conn, data, task_id, purpose)?;
    let processed = db::processed_at(conn, task_id)?.is_none()
        && process::process_locked(conn, task_id, &dir)
            .inspect_err(|error| tracing::warn!("{task_id} left unprocessed: {error:#}"))
            .is_ok();
    Ok((task, dir, lock, processed))
}

/// Writes a bundle (directory or zip) as a zip at `out`, redacted when asked. Nothing appears at `out`
/// unless the whole zip was written (and, redacted, searched).
pub fn export_bundle(source: &mut Bundle, out: &Path, options: &ExportOptions) -> Result<Written> {
    let partial = partial_path(out);
    let result = if options.redact {
        write_redacted_zip(source, &partial, options)
    } else {
        source.manifest().map_err(anyhow::Error::from).and_then(|mut manifest| {
            write_zip(source, &mut manifest, &partial, options)?;
            Ok((manifest, None))
        })
    };
    let (manifest, redaction) = match result {
        Ok(written) => written,
        Err(error) => {
            let _ = std::fs::remove_file(&partial);
            return Err(error);
        }
    };
    std::fs::rename(&partial, out).with_context(|| format!("cannot write {}", out.display()))?;
    Ok(Written { files: manifest.files.len() + 1, bytes: manifest.files.iter().map(|f| f.size).sum(), redaction })
}

/// Redacts `source` into a staging directory beside `path` (removed afterwards), zips that, and searches
/// the zip for the originals.
fn write_redacted_zip(
    source: &mut Bundle,
    path: &Path,
    options: &ExportOptions,
) -> Result<(BundleManifest, Option<RedactionSummary>)> {
    let beside = path.parent().filter(|parent| !parent.as_os_str().is_empty()).unwrap_or(Path::new("."));
    let staging = tempfile::Builder::new()
        .prefix(".trace-redacting-")
        .tempdir_in(beside)
        .with_context(|| format!("cannot create a staging directory in {}", beside.display()))?;
    let redacted = redact::redact_bundle(source, staging.path())?;
    let mut bundle = Bundle::open(staging.path())?;
    let mut manifest = bundle.manifest()?;
    write_zip(&mut bundle, &mut manifest, path, options)?;
    redacted.verify_zip(path)?;
    Ok((manifest, Some(redacted.summary)))
}

fn partial_path(out: &Path) -> PathBuf {
    let mut name = out.file_name().map(|n| n.to_os_string()).unwrap_or_default();
    name.push(".partial");
    out.with_file_name(name)
}

fn write_zip(source: &mut Bundle, manifest: &mut BundleManifest, path: &Path, options: &ExportOptions) -> Result<()> {
    let file = File::create(path).with_context(|| format!("cannot create {}", path.display()))?;
    let mut zip = zip::ZipWriter::new(BufWriter::new(file));
    let total: u64 = manifest.files.iter().map(|f| f.size).sum();
    let progress = progress_bar(total, options.progress);

    for entry in manifest.files.iter_mut() {
        zip.start_file(entry.path.as_str(), file_options(&entry.path))?;
        if options.embed_bodies && entry.path == bundle::HAR_FILE {
            let har: Har =
                serde_json::from_slice(&source.read(bundle::HAR_FILE)?).context("recording.har does not parse")?;
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
    zip.start_file(bundle::MANIFEST_FILE, file_options(bundle::MANIFEST_FILE))?;
    serde_json::to_writer_pretty(&mut zip, &manifest)?;
    let out = zip.finish()?;
    out.into_inner().map_err(|e| e.into_error())?.sync_all()?;
    progress.finish_and_clear();
    Ok(())
}

/// Images gain nothing from deflate and are stored. Everything else is deflated at level 1: bodies are
/// often already compressed, and on those level 6 ran at under 30 MB/s for a 5% gain, level 1 at several
/// times that.
fn file_options(path: &str) -> SimpleFileOptions {
    let options = SimpleFileOptions::default().large_file(true);
    if path.ends_with(".png") || path.ends_with(".jpg") {
        options.compression_method(CompressionMethod::Stored)
    } else {
        options.compression_method(CompressionMethod::Deflated).compression_level(Some(1))
    }
}

fn progress_bar(total: u64, visible: bool) -> ProgressBar {
    if !visible {
        return ProgressBar::hidden();
    }
    let bar = ProgressBar::new(total);
    bar.set_style(
        ProgressStyle::with_template("{spinner} exporting [{bar:30}] {bytes}/{total_bytes} ({bytes_per_sec}, {eta})")
            .expect("the template is valid")
            .progress_chars("=> "),
    );
    bar
}

/// Writes the HAR with each entry's body inline, one entry at a time, so that memory holds one body at
/// most rather than all of them.
fn write_har_with_bodies(source: &mut Bundle, har: &Har, out: &mut dyn Write) -> Result<()> {
    let log = &har.log;
    write!(out, "{{\"log\":{{\"version\":{},\"creator\":", serde_json::to_string(&log.version)?)?;
    serde_json::to_writer(&mut *out, &log.creator)?;
    if let Some(browser) = &log.browser {
        out.write_all(b",\"browser\":")?;
        serde_json::to_writer(&mut *out, browser)?;
    }
    out.write_all(b",\"pages\":")?;
    serde_json::to_writer(&mut *out, &log.pages)?;
    out.write_all(b",\"entries\":[")?;
    for (index, entry) in log.entries.iter().enumerate() {
        let mut entry = entry.clone();
        if let Some(file) = entry.response.content.file.clone() {
            entry.response.content.set_inline(&source.read(&file)?);
        }
        if let Some(post_data) = entry.request.post_data.as_mut()
            && let Some(file) = post_data.file.clone()
        {
            // HAR's postData has no encoding field: inline a text body, keep a binary one as `_file`.
            if let Ok(text) = String::from_utf8(source.read(&file)?) {
                post_data.text = Some(text);
                post_data.file = None;
            }
        }
        if index > 0 {
            out.write_all(b",")?;
        }
        serde_json::to_writer(&mut *out, &entry)?;
    }
    out.write_all(b"]}}")?;
    Ok(())
}
