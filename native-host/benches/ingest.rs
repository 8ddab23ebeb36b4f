//! Ingest benchmark: streams a synthetic recording through the real `trace-host` binary, as Chrome would,
//! and compares its body throughput with a plain sequential write of the same bytes to the same disk.
//!
//! The session (1 GiB by default, `TRACE_BENCH_BYTES` to change) has bodies from 1 KB to 50 MB in 1 MiB
//! chunks, three events per body, and a screenshot every 25 bodies. Its frames are encoded to a file
//! first, so that the host, not the encoder, is what is measured. Rounds alternate baseline and host runs
//! on the same disk; the figures printed are per round, then the ratio of medians. The plain write goes to
//! the page cache, as the host's body writes do; the same write with an fsync is printed for context.
//!
//! Run: `cargo bench -p trace-host --bench ingest`. Targets: host ≥ 0.5× plain write, peak RSS ≤ 100 MB.

use std::fs::File;
use std::io::{BufWriter, Read, Write};
use std::path::Path;
use std::time::{Duration, Instant};

use trace_host::client::{HostClient, TaskMessages};
use trace_manifest::event::{BodyPart, Event, EventKind, Header, Request, RequestFinished, Response};
use trace_manifest::task::{RecorderInfo, TaskId, TaskStart, TaskType};
use trace_manifest::wire::SUGGESTED_CHUNK_BYTES;

const ROUNDS: usize = 3;

fn main() {
    let total: u64 = std::env::var("TRACE_BENCH_BYTES").ok().and_then(|v| v.parse().ok()).unwrap_or(1 << 30);
    let scratch =
        tempfile::tempdir_in(std::env::var_os("TRACE_BENCH_DIR").unwrap_or_else(|| std::env::temp_dir().into()))
            .unwrap();
    let sizes = body_sizes(total);
    let body_bytes: u64 = sizes.iter().sum();
    println!(
        "session: {} bodies, {:.2} GiB of bodies, from {} B to {} B",
        sizes.len(),
        gib(body_bytes),
        sizes.iter().min().unwrap(),
        sizes.iter().max().unwrap()
    );

    let frames = scratch.path().join("frames.bin");
    let started = Instant::now();
    let (task_id, last_seq) = encode_session(&frames, &sizes);
    println!(
        "encoded {:.2} GiB of frames in {:.1}s",
        gib(std::fs::metadata(&frames).unwrap().len()),
        started.elapsed().as_secs_f64()
    );

    let (mut plain, mut durable, mut host) = (Vec::new(), Vec::new(), Vec::new());
    let mut peak_rss = 0;
    for round in 1..=ROUNDS {
        let page_cache = rate(body_bytes, plain_write(&scratch.path().join("plain.bin"), &sizes, false));
        let (elapsed, rss) = host_run(&scratch.path().join(format!("data-{round}")), &frames, &task_id, last_seq);
        let synced = rate(body_bytes, plain_write(&scratch.path().join("plain.bin"), &sizes, true));
        let host_rate = rate(body_bytes, elapsed);
        println!(
            "round {round}: plain write {page_cache:7.1} MB/s (with fsync {synced:7.1})  trace-host {host_rate:7.1} MB/s  ratio {:.2}  peak RSS {}",
            host_rate / page_cache,
            rss.map_or("n/a".to_owned(), |kb| format!("{:.1} MB", kb as f64 / 1024.0)),
        );
        plain.push(page_cache);
        durable.push(synced);
        host.push(host_rate);
        peak_rss = peak_rss.max(rss.unwrap_or(0));
    }
    let (plain, durable, host) = (median(plain), median(durable), median(host));
    println!(
        "median MB/s of body bytes: plain write {plain:.1}, plain write + fsync {durable:.1}, trace-host {host:.1}"
    );
    println!(
        "ratio trace-host / plain write: {:.2} (target >= 0.50); / plain write + fsync: {:.2}",
        host / plain,
        host / durable
    );
    println!("peak RSS of trace-host: {:.1} MB (target <= 100 MB)", peak_rss as f64 / 1024.0);
}

/// Body sizes spread evenly in log scale from 1 KB to 50 MB, repeated until `total` is reached.
fn body_sizes(total: u64) -> Vec<u64> {
    let steps = 40;
    let (low, high) = (1_000f64.ln(), 50_000_000f64.ln());
    let ladder: Vec<u64> =
        (0..steps).map(|i| (low + (high - low) * i as f64 / (steps - 1) as f64).exp() as u64).collect();
    let mut sizes = Vec::new();
    let mut sum = 0;
    for size in ladder.iter().cycle() {
        if sum + size > total {
            break;
        }
        sizes.push(*size);
        sum += size;
    }
    sizes
}

/// Deterministic, incompressible bytes, different for every body.
fn fill(buffer: &mut Vec<u8>, size: u64, seed: u64) {
    buffer.clear();
    let mut state = seed.wrapping_mul(0x9e37_79b9_7f4a_7c15) | 1;
    while (buffer.len() as u64) < size {
        state ^= state << 13;
        state ^= state >> 7;
        state ^= state << 17;
        buffer.extend_from_slice(&state.to_le_bytes());
    }
    buffer.truncate(size as usize);
}

fn encode_session(path: &Path, sizes: &[u64]) -> (TaskId, u64) {
    let task_id: TaskId = "bench".parse().unwrap();
    let mut task = TaskMessages::new(task_id.clone());
    let mut out = BufWriter::with_capacity(4 << 20, File::create(path).unwrap());
    let mut frame = |message: &trace_manifest::wire::ClientMessage| {
        let bytes = serde_json::to_vec(message).unwrap();
        out.write_all(&(bytes.len() as u32).to_ne_bytes()).unwrap();
        out.write_all(&bytes).unwrap();
    };
    frame(&task.start(TaskStart {
        task_id: task_id.clone(),
        source: "bench".into(),
        task_type: TaskType::Action,
        description: "ingest benchmark".into(),
        website: "http://127.0.0.1/".into(),
        recorder: RecorderInfo { name: "bench".into(), version: "0".into(), ..RecorderInfo::default() },
        started_at: 0.0,
    }));
    let screenshot: Vec<u8> = b"\x89PNG\r\n\x1a\n".iter().copied().chain(std::iter::repeat_n(7u8, 200_000)).collect();
    let mut body = Vec::new();
    for (index, size) in sizes.iter().enumerate() {
        let request_id = index.to_string();
        let url = format!("http://127.0.0.1/resource/{index}");
        let ts = index as f64;
        let event = |kind| Event { ts, tab_id: Some(1), frame_id: None, kind };
        frame(&task.events(vec![
            event(EventKind::Request(Request {
                request_id: request_id.clone(),
                url: url.clone(),
                method: "GET".into(),
                headers: vec![Header::new("Accept", "*/*")],
                post_data: None,
                resource_type: Some("Fetch".into()),
            })),
            event(EventKind::Response(Response {
                request_id: request_id.clone(),
                url,
                status: 200,
                status_text: "OK".into(),
                protocol: Some("http/1.1".into()),
                headers: vec![Header::new("Content-Type", "application/octet-stream")],
                mime_type: "application/octet-stream".into(),
                remote_ip_address: None,
                from_cache: false,
                timing: None,
            })),
            event(EventKind::RequestFinished(RequestFinished {
                request_id: request_id.clone(),
                encoded_data_length: *size,
            })),
        ]));
        fill(&mut body, *size, index as u64);
        for message in task.body(&request_id, BodyPart::Response, &body, SUGGESTED_CHUNK_BYTES) {
            frame(&message);
        }
        if index % 25 == 0 {
            frame(&task.screenshot(ts, 1, &screenshot, "load"));
        }
    }
    frame(&task.stop(sizes.len() as f64, None));
    out.flush().unwrap();
    (task_id, task.last_seq())
}

/// Writes the same body bytes in one sequential file, into the page cache or (`sync`) through to the disk;
/// only the writes are timed.
fn plain_write(path: &Path, sizes: &[u64], sync: bool) -> Duration {
    let mut file = File::create(path).unwrap();
    let mut body = Vec::new();
    let mut elapsed = Duration::ZERO;
    for (index, size) in sizes.iter().enumerate() {
        fill(&mut body, *size, index as u64);
        let started = Instant::now();
        for chunk in body.chunks(SUGGESTED_CHUNK_BYTES) {
            file.write_all(chunk).unwrap();
        }
        elapsed += started.elapsed();
    }
    let started = Instant::now();
    if sync {
        file.sync_all().unwrap();
    }
    drop(file);
    let elapsed = elapsed + started.elapsed();
    std::fs::remove_file(path).unwrap();
    elapsed
}

/// Streams the encoded session into a fresh host; returns the time to the last acknowledgement and the
/// host's peak resident memory in KiB.
fn host_run(data: &Path, frames: &Path, task_id: &TaskId, last_seq: u64) -> (Duration, Option<u64>) {
    let mut input = File::open(frames).unwrap();
    let mut buffer = vec![0; 1 << 20];
    let started = Instant::now();
    let mut host = HostClient::spawn(Path::new(env!("CARGO_BIN_EXE_trace-host")), data).unwrap();
    loop {
        let read = input.read(&mut buffer).unwrap();
        if read == 0 {
            break;
        }
        host.send_raw(&buffer[..read]).unwrap();
    }
    host.wait_for_ack(task_id, last_seq, Duration::from_secs(600)).unwrap();
    let elapsed = started.elapsed();
    let rss = peak_rss_kib(host.pid());
    let (status, _) = host.close().unwrap();
    assert!(status.success());
    std::fs::remove_dir_all(data).unwrap();
    (elapsed, rss)
}

/// `VmHWM` of a live process (Linux).
fn peak_rss_kib(pid: u32) -> Option<u64> {
    let status = std::fs::read_to_string(format!("/proc/{pid}/status")).ok()?;
    let line = status.lines().find(|l| l.starts_with("VmHWM:"))?;
    line.split_whitespace().nth(1)?.parse().ok()
}

fn rate(bytes: u64, elapsed: Duration) -> f64 {
    bytes as f64 / 1e6 / elapsed.as_secs_f64()
}

fn gib(bytes: u64) -> f64 {
    bytes as f64 / (1u64 << 30) as f64
}

fn median(mut values: Vec<f64>) -> f64 {
    values.sort_by(f64::total_cmp);
    values[values.len() / 2]
}
