//! Viewer benchmark: what opening a recording in `trace-host view` costs, on the demo bundle (or the one
//! `TRACE_BENCH_BUNDLE` names) and on a synthetic one 100 MB larger with 5,000 more requests (its zip with
//! 5,000 more HAR entries, each answered by a 20 KiB body of its own, stored in the zip).
//!
//! For each bundle, [`ROUNDS`] times, interleaved and alternating which goes first:
//! - **first timeline paint**: from starting `trace-host view BUNDLE` (it opens the zip in place) to the
//!   first contentful paint of the recording's page in headless Chromium;
//! - **network page**: loading the network panel's first page (500 rows) and its worst frame while it is
//!   scrolled to the bottom half a screen per frame;
//! - **peak memory** of the viewer process (`VmHWM`) after both pages.
//!
//! Printed: medians, and the large bundle's figures as ratios of the demo's. Targets (issue #14): the
//! timeline under 1 s on the large bundle; scrolling without stutter (frames well under 50 ms).
//!
//! Run: `cargo xtask dist && cargo bench -p trace-e2e --bench view` (`TRACE_BENCH_BUNDLE=DIR` skips recording
//! the demonstration).

use std::io::{BufRead, BufReader, Write as _};
use std::path::{Path, PathBuf};
use std::process::{Child, Command, Stdio};
use std::time::Instant;

use anyhow::{Context, Result, ensure};
use chromiumoxide::Page;
use serde_json::json;
use trace_e2e::bench::{BUNDLE_ENV, demo_bundle};
use trace_e2e::browser::Build;
use trace_e2e::median;
use trace_replay::chromium::{self, Launch};

const ROUNDS: usize = 5;
const REQUESTS: usize = 5_000;
const BODY_BYTES: usize = 20 << 10;

#[tokio::main(flavor = "multi_thread", worker_threads = 2)]
async fn main() -> Result<()> {
    let work = Path::new(env!("CARGO_MANIFEST_DIR")).join("../target/bench-view");
    let build = Build::from_workspace()?;
    let bundle = demo_bundle(&build, &work).await?;
    // The zips are made once per recording (its task id names them): a bundle given another time is
    // another recording.
    let task = trace_bundle::archive::Bundle::open(&bundle)?.manifest()?.task.id.as_str().to_owned();
    let demo = zipped(&bundle, &work.join(format!("{task}.zip")), 0)?;
    let large = zipped(&bundle, &work.join(format!("{task}-large.zip")), REQUESTS)?;
    let chromium =
        chromium::launch(&Launch { chromium: Some(build.chromium.clone()), headless: true, ..Launch::default() })
            .await?;
    let page = chromium.browser.new_page("about:blank").await?;

    let name = if std::env::var_os(BUNDLE_ENV).is_some() { "the bundle" } else { "demo" };
    let bundles = [(name, &demo), ("+5,000 requests, 100 MB", &large)];
    let mut samples: Vec<[Vec<f64>; 4]> = vec![Default::default(), Default::default()];
    for round in 0..ROUNDS {
        for turn in 0..2 {
            let which = (round + turn) % 2;
            let figures = measure(&build, bundles[which].1, &page).await?;
            for (series, value) in samples[which].iter_mut().zip(figures) {
                series.push(value);
            }
        }
    }
    chromium.close().await?;

    println!("trace-host view, median of {ROUNDS} interleaved runs");
    println!(
        "{:<26} {:>10} {:>12} {:>14} {:>12} {:>10}",
        "bundle", "zip", "timeline", "network page", "worst frame", "peak RSS"
    );
    let medians: Vec<[f64; 4]> =
        samples.iter().map(|s| [median(&s[0]), median(&s[1]), median(&s[2]), median(&s[3])]).collect();
    for ((name, path), m) in bundles.iter().zip(&medians) {
        let size = std::fs::metadata(path)?.len() as f64 / (1 << 20) as f64;
        println!(
            "{name:<26} {size:>7.1} MB {:>9.0} ms {:>11.0} ms {:>9.1} ms {:>7.1} MB",
            m[0] * 1000.0,
            m[1] * 1000.0,
            m[2],
            m[3]
        );
    }
    let ratio = |i: usize| medians[1][i] / medians[0][i];
    println!(
        "larger / {name}: timeline {:.2}x, network page {:.2}x, worst frame {:.2}x, peak RSS {:.2}x",
        ratio(0),
        ratio(1),
        ratio(2),
        ratio(3)
    );
    println!("target: timeline under 1000 ms on the large bundle (got {:.0} ms)", medians[1][0] * 1000.0);
    Ok(())
}

/// One cold run of the viewer on `bundle`: seconds to the timeline's first paint, seconds to load the
/// network page, its worst frame in milliseconds while scrolled, and the viewer's peak memory in MB.
async fn measure(build: &Build, bundle: &Path, page: &Page) -> Result<[f64; 4]> {
    let started = Instant::now();
    let mut viewer = Viewer::start(build, bundle)?;
    let navigating = started.elapsed().as_secs_f64();
    page.goto(&viewer.url).await?;
    page.wait_for_navigation().await?;
    let paint: f64 = page
        .evaluate("new Promise(done => { const look = () => { const p = performance.getEntriesByName('first-contentful-paint')[0]; p ? done(p.startTime) : setTimeout(look, 10); }; look(); })")
        .await?
        .into_value()?;
    let timeline = navigating + paint / 1000.0;
    ensure!(page.url().await?.unwrap_or_default().contains("/r/bundle/"), "the viewer showed the recording");

    let origin = viewer.url.split("/r/").next().context("the viewer's URL")?.to_owned();
    let loading = Instant::now();
    page.goto(format!("{origin}/r/bundle/network")).await?;
    page.wait_for_navigation().await?;
    let network = loading.elapsed().as_secs_f64();
    let worst_frame: f64 = page
        .evaluate(
            "new Promise(done => { let last = performance.now(), worst = 0, frames = 0; \
             const step = now => { worst = Math.max(worst, now - last); last = now; scrollBy(0, innerHeight / 2); \
             if (++frames < 60) requestAnimationFrame(step); else done(worst); }; requestAnimationFrame(step); })",
        )
        .await?
        .into_value()?;
    let peak = viewer.peak_rss_mb()?;
    viewer.stop();
    Ok([timeline, network, worst_frame, peak])
}

struct Viewer {
    child: Child,
    url: String,
}

impl Viewer {
    fn start(build: &Build, bundle: &Path) -> Result<Viewer> {
        let data = tempfile::tempdir()?;
        let mut child = Command::new(&build.trace_host)
            .arg("--data")
            .arg(data.path())
            .arg("view")
            .arg(bundle)
            .stdout(Stdio::piped())
            .stderr(Stdio::null())
            .spawn()
            .context("cannot start trace-host view")?;
        let mut line = String::new();
        BufReader::new(child.stdout.as_mut().context("its output")?).read_line(&mut line)?;
        let url = line.split_whitespace().find(|word| word.starts_with("http://127.0.0.1:")).context(line.clone())?;
        Ok(Viewer { child, url: url.to_owned() })
    }

    /// The process's peak resident memory, in MB.
    fn peak_rss_mb(&self) -> Result<f64> {
        let status = std::fs::read_to_string(format!("/proc/{}/status", self.child.id()))?;
        let line = status.lines().find(|line| line.starts_with("VmHWM:")).context("VmHWM")?;
        let kb: f64 = line.split_whitespace().nth(1).context("VmHWM's value")?.parse()?;
        Ok(kb / 1024.0)
    }

    fn stop(&mut self) {
        let _ = self.child.kill();
        let _ = self.child.wait();
    }
}

impl Drop for Viewer {
    fn drop(&mut self) {
        self.stop();
    }
}

/// The bundle directory `bundle` as a zip at `out`, with `extra` more requests in its HAR, each answered by
/// a body of [`BODY_BYTES`] random bytes stored in the zip (indexed in its manifest). Made once.
fn zipped(bundle: &Path, out: &Path, extra: usize) -> Result<PathBuf> {
    if out.exists() {
        return Ok(out.to_owned());
    }
    std::fs::create_dir_all(out.parent().context("a parent")?)?;
    let mut files: Vec<(String, Vec<u8>)> = Vec::new();
    collect(bundle, bundle, &mut files)?;
    let mut har: serde_json::Value = serde_json::from_slice(&take(&mut files, "recording.har")?)?;
    let mut manifest: serde_json::Value = serde_json::from_slice(&take(&mut files, "manifest.json")?)?;
    let entries = har["log"]["entries"].as_array_mut().context("the HAR's entries")?;
    let template = entries.first().context("a recorded request")?.clone();
    let origin =
        url::Url::parse(template["request"]["url"].as_str().context("its URL")?)?.origin().ascii_serialization();
    let mut state = 0x2545_f491_4f6c_dd1d_u64;
    for index in 0..extra {
        let mut body = Vec::with_capacity(BODY_BYTES);
        while body.len() < BODY_BYTES {
            state ^= state << 13;
            state ^= state >> 7;
            state ^= state << 17;
            body.extend_from_slice(&state.to_le_bytes());
        }
        let path = format!("resources/{}", trace_bundle::archive::sha256_hex(&body));
        let mut entry = template.clone();
        entry["request"]["url"] = json!(format!("{origin}/api/items/{index}?page={}", index % 7));
        entry["request"]["method"] = json!("GET");
        entry["response"]["status"] = json!(200);
        entry["response"]["content"] = json!({"size": body.len(), "mimeType": "image/png", "_file": path});
        entries.push(entry);
        files.push((path, body));
    }
    let mut har_bytes = serde_json::to_vec(&har)?;
    let index: Vec<serde_json::Value> = {
        let mut all: Vec<(&str, &[u8])> = files.iter().map(|(p, b)| (p.as_str(), b.as_slice())).collect();
        all.push(("recording.har", &har_bytes));
        all.sort_by_key(|(path, _)| *path);
        all.iter()
            .map(|(path, bytes)| json!({"path": path, "size": bytes.len(), "sha256": trace_bundle::archive::sha256_hex(bytes)}))
            .collect()
    };
    manifest["files"] = json!(index);
    let partial = out.with_extension("partial");
    let mut zip = zip::ZipWriter::new(std::fs::File::create(&partial)?);
    let stored = zip::write::SimpleFileOptions::default().compression_method(zip::CompressionMethod::Stored);
    let deflated = zip::write::SimpleFileOptions::default();
    zip.start_file("manifest.json", deflated)?;
    zip.write_all(&serde_json::to_vec_pretty(&manifest)?)?;
    zip.start_file("recording.har", deflated)?;
    zip.write_all(&std::mem::take(&mut har_bytes))?;
    for (path, bytes) in &files {
        zip.start_file(path.as_str(), if path.starts_with("resources/") { stored } else { deflated })?;
        zip.write_all(bytes)?;
    }
    zip.finish()?;
    std::fs::rename(&partial, out)?;
    Ok(out.to_owned())
}

/// Every file under `dir`, with its path relative to `root`.
fn collect(root: &Path, dir: &Path, files: &mut Vec<(String, Vec<u8>)>) -> Result<()> {
    for entry in std::fs::read_dir(dir)? {
        let path = entry?.path();
        if path.is_dir() {
            collect(root, &path, files)?;
        } else {
            let relative = path.strip_prefix(root)?.to_string_lossy().replace('\\', "/");
            files.push((relative, std::fs::read(&path)?));
        }
    }
    Ok(())
}

/// Removes the file `name` from `files` and returns its bytes.
fn take(files: &mut Vec<(String, Vec<u8>)>, name: &str) -> Result<Vec<u8>> {
    let at = files.iter().position(|(path, _)| path == name).with_context(|| format!("the bundle has no {name}"))?;
    Ok(files.remove(at).1)
}
