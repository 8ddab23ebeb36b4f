//! `trace-host export`: a task's bundle as one zip, in the layout of a bundle directory, so that
//! `trace-host validate`, `trace-replay` and Playwright's `routeFromHAR` (which reads the zip's `.har` and
//! the files its `_file` fields name) all read it.
//!
//! The zip is written to a temporary name beside the target and renamed when complete: an interrupted
//! export never leaves a zip that looks whole.

use std::fs::File;
use std::io::{BufWriter, Write};
use std::path::{Path, PathBuf};

use anyhow::{Context, Result};
use indicatif::{ProgressBar, ProgressStyle};
use rusqlite::Connection;
use trace_manifest::archive::{Bundle, HashingWriter};
use trace_manifest::bundle::{self, BundleManifest};
use trace_manifest::har::Har;
use trace_manifest::task::{TaskId, TaskStatus};
use zip::CompressionMethod;
use zip::write::SimpleFileOptions;

use crate::finalize;
use crate::paths::DataDir;

#[derive(Debug, Clone, Default)]
pub struct ExportOptions {
    /// Write the HAR with every body inline, for tools that read a single file.
    pub embed_bodies: bool,
    /// Show a progress bar on a terminal.
    pub progress: bool,
}

/// What was exported.
#[derive(Debug, Clone, serde::Serialize)]
pub struct ExportReport {
    pub task_id: TaskId,
    pub status: TaskStatus,
    pub zip: PathBuf,
    pub files: usize,
    pub bytes: u64,
}

pub fn export(
    conn: &Connection,
    data: &DataDir,
    task_id: &TaskId,
    out: &Path,
    options: &ExportOptions,
) -> Result<ExportReport> {
    let (task, dir, _lock) = finalize::locked_bundle(conn, data, task_id, "export")?;
    let mut source = Bundle::open(&dir)?;
    let mut manifest = source.manifest()?;

    let partial = partial_path(out);
    let result = write_zip(&mut source, &mut manifest, &partial, options);
    if let Err(error) = result {
        let _ = std::fs::remove_file(&partial);
        return Err(error);
    }
    std::fs::rename(&partial, out).with_context(|| format!("cannot write {}", out.display()))?;
    Ok(ExportReport {
        task_id: task_id.clone(),
        status: task.status,
        zip: out.to_owned(),
        files: manifest.files.len() + 1,
        bytes: manifest.files.iter().map(|f| f.size).sum(),
    })
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
