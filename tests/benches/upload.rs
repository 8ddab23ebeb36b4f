//! Upload benchmark: a 100 MB bundle (incompressible random bytes, named like a zip) submitted to a campaign
//! whose destination is an S3 bucket, against a plain `object_store` put of the same bytes to the same
//! server (moto's, on loopback: [`trace_e2e::s3`]), through the same store configuration.
//!
//! Three ways of uploading the file, each sample in a process of its own (this program run again with the
//! server's environment: `object_store` is configured from the environment, which a running program cannot
//! change safely), so that each one's peak memory (`VmHWM`) is its own:
//! - **plain put**: the file read and put with `Location::put_bytes`;
//! - **put + read back**: the same, then `Location::read_back` (a get and its SHA-256): the least that an
//!   upload checked by reading it back costs, so about twice a plain put;
//! - **TRACE**: `trace_host::submit::send` on an outbox folder holding the file and its `outbox.json`, made
//!   here as `trace-host submit` makes it: the file read and checked against its size and SHA-256, put,
//!   read back and compared, the folder moved to `outbox/sent/`.
//!
//! Each is timed from reading the file to its upload done. [`ROUNDS`] rounds, interleaved, the order
//! rotated from one round to the next. Printed: each sample's throughput, then the medians, and TRACE's
//! time and peak memory as ratios of the plain put's and of the put + read back's.
//!
//! Run: `cargo bench -p trace-e2e --bench upload` (needs `.ci/install` for the S3 server).

use std::path::{Path, PathBuf};
use std::process::Command;
use std::time::Instant;

use anyhow::{Context, Result, bail, ensure};
use trace_e2e::median;
use trace_e2e::s3::S3Server;
use trace_host::paths::DataDir;
use trace_manifest::campaign::{OutboxEntry, OutboxFile};
use trace_store::Location;

const ROUNDS: usize = 7;
const BUNDLE_BYTES: usize = 100 << 20;
const BUCKET: &str = "submissions";
const DESTINATION: &str = "s3://submissions/campaigns";
/// Asks this program for one sample: `--sample KIND PATH`.
const SAMPLE: &str = "--sample";
const KINDS: [&str; 3] = ["plain put", "put + read back", "TRACE submit"];

fn main() -> Result<()> {
    let args: Vec<String> = std::env::args().collect();
    if args.get(1).map(String::as_str) == Some(SAMPLE) {
        let (kind, path) = (args.get(2).context("a kind")?, Path::new(args.get(3).context("a path")?));
        let runtime = tokio::runtime::Builder::new_multi_thread().worker_threads(2).enable_all().build()?;
        let seconds = runtime.block_on(sample(kind, path))?;
        println!("{seconds} {}", peak_rss_mb()?);
        return Ok(());
    }

    let work = Path::new(env!("CARGO_MANIFEST_DIR")).join("../target/bench-upload");
    std::fs::create_dir_all(&work)?;
    let bundle = work.join("bundle.zip");
    if std::fs::metadata(&bundle).map(|meta| meta.len() as usize).ok() != Some(BUNDLE_BYTES) {
        let mut bytes = vec![0u8; BUNDLE_BYTES];
        getrandom::fill(&mut bytes).map_err(|error| anyhow::anyhow!("no random bytes: {error}"))?;
        std::fs::write(&bundle, &bytes)?;
    }
    let sha256 = trace_bundle::archive::sha256_hex(&std::fs::read(&bundle)?);
    let s3 = S3Server::start()?;
    s3.create_bucket(BUCKET);
    let megabytes = BUNDLE_BYTES as f64 / (1 << 20) as f64;

    println!("upload of a {megabytes:.0} MB bundle to {DESTINATION} (moto's S3 server on loopback)");
    let mut samples: Vec<[Vec<f64>; 2]> = vec![Default::default(); KINDS.len()];
    for round in 0..ROUNDS {
        let mut line = format!("round {}:", round + 1);
        for turn in 0..KINDS.len() {
            let which = (round + turn) % KINDS.len();
            let kind = KINDS[which];
            // TRACE's outbox folder is moved to `sent/` and its zip removed: a new data directory each time.
            let data = tempfile::tempdir_in(&work)?;
            let path = if kind == "TRACE submit" { outbox(data.path(), &bundle, &sha256)? } else { bundle.clone() };
            let output = Command::new(std::env::current_exe()?)
                .args([SAMPLE, kind])
                .arg(&path)
                .envs(s3.env())
                .output()
                .context("cannot run a sample")?;
            ensure!(output.status.success(), "{kind}: {}", String::from_utf8_lossy(&output.stderr));
            let said = String::from_utf8(output.stdout)?;
            let figures: Vec<f64> = said.split_whitespace().map(str::parse).collect::<Result<_, _>>()?;
            ensure!(figures.len() == 2, "{kind} said {said:?}");
            samples[which][0].push(figures[0]);
            samples[which][1].push(figures[1]);
            line += &format!("  {kind} {:.1} MB/s ({:.0} MB)", megabytes / figures[0], figures[1]);
        }
        println!("{line}");
    }
    let landed = s3.list(BUCKET, "campaigns");
    ensure!(landed.len() == KINDS.len(), "each way put its own key: {landed:?}");

    println!("median of {ROUNDS} interleaved runs");
    println!("{:<16} {:>10} {:>12} {:>10}", "upload", "time", "throughput", "peak RSS");
    let medians: Vec<[f64; 2]> = samples.iter().map(|s| [median(&s[0]), median(&s[1])]).collect();
    for (kind, [seconds, peak]) in KINDS.iter().zip(&medians) {
        println!("{kind:<16} {:>7.0} ms {:>7.1} MB/s {peak:>7.1} MB", seconds * 1000.0, megabytes / seconds);
    }
    let [plain, checked, trace] = [&medians[0], &medians[1], &medians[2]];
    println!(
        "TRACE / plain put: time {:.2}x, peak RSS {:.2}x; TRACE / put + read back: time {:.2}x, peak RSS {:.2}x",
        trace[0] / plain[0],
        trace[1] / plain[1],
        trace[0] / checked[0],
        trace[1] / checked[1]
    );
    println!("TRACE's peak RSS is {:.2}x the bundle's size", trace[1] / megabytes);
    Ok(())
}

/// An outbox folder in the data directory `data` holding `bundle` (linked) as `trace-host submit` leaves
/// it, bound for [`DESTINATION`]. Returns the data directory.
fn outbox(data: &Path, bundle: &Path, sha256: &str) -> Result<PathBuf> {
    let folder = DataDir::at(data.to_owned())?.root().join("outbox/bench--p-upload--upload");
    std::fs::create_dir_all(&folder)?;
    std::fs::hard_link(bundle, folder.join("upload.zip"))
        .or_else(|_| std::fs::copy(bundle, folder.join("upload.zip")).map(drop))?;
    let entry = OutboxEntry {
        name: "bench/p-upload/upload".to_owned(),
        destination: Some(DESTINATION.to_owned()),
        files: vec![OutboxFile {
            key: "trace/p-upload/upload.zip".to_owned(),
            file: "upload.zip".to_owned(),
            size: BUNDLE_BYTES as u64,
            sha256: sha256.to_owned(),
            landed: false,
        }],
        attempts: 0,
        last_error: None,
        queued_at: "2026-01-01T00:00:00Z".to_owned(),
    };
    std::fs::write(folder.join("outbox.json"), serde_json::to_vec_pretty(&entry)?)?;
    Ok(data.to_owned())
}

/// One upload of the kind `kind`, of the file or the data directory at `path`: its seconds.
async fn sample(kind: &str, path: &Path) -> Result<f64> {
    let started = Instant::now();
    match kind {
        "TRACE submit" => {
            let data = DataDir::at(path.to_owned())?;
            let reports = trace_host::submit::send(&data, &trace_host::submit::BACKOFF).await?;
            let seconds = started.elapsed().as_secs_f64();
            ensure!(reports.len() == 1 && reports[0].is_sent(), "the submission was not sent: {reports:?}");
            ensure!(reports[0].attempts == 1, "sent at the first attempt");
            Ok(seconds)
        }
        "plain put" | "put + read back" => {
            let location = Location::parse_impatient(DESTINATION)?;
            let bytes = std::fs::read(path)?;
            let key = if kind == "plain put" { "plain/upload.zip" } else { "checked/upload.zip" };
            location.put_bytes(key, bytes).await?;
            if kind == "put + read back" {
                let (size, _) = location.read_back(key).await?.context("nothing landed")?;
                ensure!(size == BUNDLE_BYTES as u64, "{size} bytes landed");
            }
            Ok(started.elapsed().as_secs_f64())
        }
        _ => bail!("no kind of upload {kind:?}"),
    }
}

/// This process's peak resident memory, in MB.
fn peak_rss_mb() -> Result<f64> {
    let status = std::fs::read_to_string("/proc/self/status")?;
    let line = status.lines().find(|line| line.starts_with("VmHWM:")).context("VmHWM")?;
    let kb: f64 = line.split_whitespace().nth(1).context("VmHWM's value")?.parse()?;
    Ok(kb / 1024.0)
}
