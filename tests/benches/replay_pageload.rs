//! Replay page-load benchmark: how fast the demo shop's pages load when `trace-replay` serves a recorded
//! bundle, against Playwright's `routeFromHAR` serving the same capture (the bundle's `recording.har`, or
//! the exported zip), in the same Chromium (`TRACE_CHROMIUM`, else Debian's), both offline.
//!
//! The demonstration of [`trace_e2e::demo`] is recorded first (as `cargo xtask demo` does; the bundle is
//! left in `target/bench-replay-pageload/`), or an existing bundle is taken from `TRACE_BENCH_BUNDLE`. The
//! demo shop is then stopped, and a sentinel listens on its old port and keeps what each connection to it
//! sent first, attributed to the side that was loading: nothing is live, and any connection is one side
//! reaching for the live site (a request, or a connection Chromium opens ahead of one). Two browsers
//! start, both headless with the same extra flags ([`trace_replay::chromium::command_line_flags`]: the
//! offline flags, plus `--no-sandbox` as root): `trace-replay`'s ([`Replay::launch`], with its defaults: the determinism
//! script and the recorded storage included, since that is what its users get), driven from here through
//! chromiumoxide; and Playwright's (npm `playwright-core` with `executablePath`, a context with
//! `routeFromHAR(har, {notFound: 'abort'})`), driven by `replay_pageload/routefromhar.mjs`, which this
//! benchmark starts and commands over JSON lines. `playwright-core` (pinned) is installed into
//! `target/bench-node/` on first use; no browser is ever downloaded.
//!
//! What is measured is a page load from navigation start to the end of the load event, as the page's own
//! Navigation Timing entry tells it (`loadEventEnd`), read from outside the page the same way on both
//! sides, for pages the demonstration visited, at their recorded URLs. Each side keeps one tab and
//! navigates it from page to page, as a user of either tool does. The two sides are interleaved from this
//! one program: each round loads every page on both sides, `trace-replay` first in one round and
//! Playwright first in the next. These machines are shared and noisy (other Chromium tests may be running
//! on the two cores), and interleaving spreads whatever else happens over both sides alike, where a block
//! of one side's loads then a block of the other's would compare two different moments. Each load starts
//! after a short quiet pause. Warm-up rounds come first and are not counted.
//!
//! Printed: per page, the median load time under each side and their ratio (replay/Playwright); over all
//! pages, the ratio of the medians of all samples and the geometric mean of the per-page ratios; what each
//! side failed to serve; the connections to the recorded site's port; pages whose titles differ between
//! the sides (each side should have shown the same page). Target: `trace-replay` at most as slow as `routeFromHAR` (ratio ≤ 1.0).
//!
//! Run: `cargo xtask dist && cargo bench -p trace-e2e --bench replay_pageload` (`TRACE_BENCH_ROUNDS` sets
//! the number of counted rounds, 15 by default; `TRACE_BENCH_BUNDLE=DIR_OR_ZIP`, absolute or relative to the
//! workspace, skips the recording).

use std::collections::{BTreeMap, BTreeSet};
use std::io::Read;
use std::net::TcpListener;
use std::ops::Range;
use std::path::{Path, PathBuf};
use std::sync::atomic::{AtomicBool, Ordering};
use std::sync::{Arc, Mutex};
use std::time::Duration;

use anyhow::{Context, Result, bail, ensure};
use chromiumoxide::Page;
use serde_json::json;
use trace_e2e::browser::{Build, load_event_end};
use trace_e2e::demo;
use trace_e2e::median;
use trace_e2e::playwright::{self, Script};
use trace_e2e::site::DemoSite;
use trace_replay::archive::ReplayArchive;
use trace_replay::chromium;
use trace_replay::serve::{Options, Replay};

/// Pages the demonstration visited.
const PAGES: [&str; 7] = ["/", "/login", "/search?q=mug", "/embed", "/strict", "/help", "/clock"];
const DEFAULT_ROUNDS: usize = 15;
const WARM_UP_ROUNDS: usize = 2;
/// `trace-replay` may be this much slower than `routeFromHAR` at most.
const TARGET_RATIO: f64 = 1.0;
/// Before each load, so that each starts on a quiet machine.
const QUIET: Duration = Duration::from_millis(300);
const WAIT: Duration = Duration::from_secs(30);

#[derive(Debug, Clone, Copy, PartialEq, Eq)]
enum Side {
    Replay = 0,
    Playwright = 1,
}

/// Load times in milliseconds per page, and what Playwright failed to serve.
struct Samples {
    replay: Vec<Vec<f64>>,
    playwright: Vec<Vec<f64>>,
    /// URL → how many times a Playwright load saw it fail (`notFound: 'abort'`, or anything else).
    playwright_failed: BTreeMap<String, u64>,
    /// The titles each side showed for each page, `[replay, playwright]`: a check that both loaded the page.
    titles: Vec<[BTreeSet<String>; 2]>,
    /// Connections to the recorded site's port during each side's loads: (side, page, what each sent first).
    live: Vec<(Side, &'static str, Vec<String>)>,
}

#[tokio::main(flavor = "multi_thread", worker_threads = 2)]
async fn main() -> Result<()> {
    let rounds = match std::env::var("TRACE_BENCH_ROUNDS") {
        Ok(value) => value.parse().with_context(|| format!("TRACE_BENCH_ROUNDS={value} is not a number"))?,
        Err(_) => DEFAULT_ROUNDS,
    };
    ensure!(rounds > 0, "TRACE_BENCH_ROUNDS must be at least 1");
    let target = Path::new(env!("CARGO_MANIFEST_DIR")).join("../target");
    let node_modules = playwright::install(&target.join("bench-node"))?;

    let (bundle, chromium) = match std::env::var_os("TRACE_BENCH_BUNDLE") {
        Some(bundle) => {
            let chromium = chromium::find(None)?;
            // `cargo bench` runs benchmarks in the package's directory: a relative path is the workspace's.
            let bundle = Path::new(env!("CARGO_MANIFEST_DIR")).join("..").join(bundle);
            let bundle = bundle.canonicalize().with_context(|| format!("TRACE_BENCH_BUNDLE: {}", bundle.display()))?;
            (bundle, chromium)
        }
        None => {
            let build = Build::from_workspace()?;
            (record(&build, &target.join("bench-replay-pageload")).await?, build.chromium)
        }
    };
    println!("bundle: {}", bundle.display());

    let archive = ReplayArchive::open(&bundle)?;
    let origin = origin(archive.start_url()).context("the bundle's website has no origin")?.to_owned();
    let urls: Vec<String> = PAGES.iter().map(|path| format!("{origin}{path}")).collect();
    let unrecorded: Vec<&String> = urls
        .iter()
        .filter(|url| !archive.exchanges.iter().any(|e| e.request.method == "GET" && &e.request.url == *url))
        .collect();
    ensure!(unrecorded.is_empty(), "the bundle has no recorded GET of {unrecorded:?}");
    let sentinel = Sentinel::start(&origin);

    // Playwright reads a bundle directory's HAR, whose bodies are files beside it, or the exported zip.
    let har = if bundle.is_dir() { bundle.join(trace_manifest::bundle::HAR_FILE) } else { bundle.clone() };
    let args = chromium::command_line_flags();
    let mut playwright = Playwright::start(&node_modules, &har, &chromium, &args).await?;
    let options = Options { chromium: Some(chromium.clone()), ..Options::default() };
    let replay = Replay::launch(archive, &options).await?;
    println!("chromium: {}; flags for both: {}", chromium.display(), args.join(" "));

    let measured = measure(&replay, &mut playwright, &sentinel, &urls, rounds).await;
    let stats = replay.stats();
    // Bounded: a close that hangs must not hang the benchmark (chromiumoxide kills the browser when the
    // close is dropped), but it is said, since it is a bug of `trace-replay`.
    if tokio::time::timeout(Duration::from_secs(30), replay.close()).await.is_err() {
        eprintln!("note: Replay::close did not return in 30 s; its browser was killed");
    }
    playwright.close();
    let samples = measured?;
    report(&samples, rounds);
    for (path, [replay, playwright]) in PAGES.iter().zip(&samples.titles) {
        if replay != playwright || replay.len() != 1 || replay.contains("") {
            println!("note: {path} showed different titles: trace-replay {replay:?}, routeFromHAR {playwright:?}");
        }
    }
    println!();
    print!("trace-replay, over all loads: {stats}");
    report_failed(&samples.playwright_failed);
    report_live(&sentinel, &samples.live);
    Ok(())
}

/// Records the demonstration on a fresh demo shop into `out`, stops the shop, and returns the bundle.
async fn record(build: &Build, out: &Path) -> Result<PathBuf> {
    let data = out.join("data");
    if data.exists() {
        std::fs::remove_dir_all(&data).with_context(|| format!("cannot clear {}", data.display()))?;
    }
    std::fs::create_dir_all(&data)?;
    let data = data.canonicalize()?;
    let site = DemoSite::start(0)?;
    eprintln!("recording the demonstration on {} (TRACE_BENCH_BUNDLE=DIR skips this)", site.url("/"));
    let recorded = demo::record(build, &site, &data).await;
    site.stop();
    Ok(recorded?.bundle)
}

/// Loads every page round after round on both sides, interleaved.
async fn measure(
    replay: &Replay,
    playwright: &mut Playwright,
    sentinel: &Sentinel,
    urls: &[String],
    rounds: usize,
) -> Result<Samples> {
    let page = replay.open("about:blank").await?;
    let mut samples = Samples {
        replay: vec![Vec::new(); urls.len()],
        playwright: vec![Vec::new(); urls.len()],
        playwright_failed: BTreeMap::new(),
        titles: vec![Default::default(); urls.len()],
        live: Vec::new(),
    };
    for round in 0..WARM_UP_ROUNDS + rounds {
        let order =
            if round.is_multiple_of(2) { [Side::Replay, Side::Playwright] } else { [Side::Playwright, Side::Replay] };
        let counted = round >= WARM_UP_ROUNDS;
        for (index, url) in urls.iter().enumerate() {
            for side in order {
                let connections_before = sentinel.count();
                tokio::time::sleep(QUIET).await;
                let (ms, title) = match side {
                    Side::Replay => load_time(&page, url).await.with_context(|| format!("trace-replay: {url}"))?,
                    Side::Playwright => {
                        let load = playwright.load(url).await.with_context(|| format!("routeFromHAR: {url}"))?;
                        if counted {
                            for failed in load.failed {
                                *samples.playwright_failed.entry(failed).or_default() += 1;
                            }
                        }
                        (load.ms, load.title)
                    }
                };
                samples.titles[index][side as usize].insert(title);
                if counted {
                    let times = if side == Side::Replay { &mut samples.replay } else { &mut samples.playwright };
                    times[index].push(ms);
                }
                let connections = connections_before..sentinel.count();
                if !connections.is_empty() {
                    samples.live.push((side, PAGES[index], sentinel.seen(connections)));
                }
            }
        }
        match round.checked_sub(WARM_UP_ROUNDS) {
            None => eprintln!("warm-up round {}/{WARM_UP_ROUNDS} done", round + 1),
            Some(counted) => eprintln!("round {}/{rounds} done", counted + 1),
        }
    }
    Ok(samples)
}

/// Loads `url` in the replayed tab and returns the time from navigation start to the end of the load
/// event, in milliseconds, and the page's title.
async fn load_time(page: &Page, url: &str) -> Result<(f64, String)> {
    let load_event_end = load_event_end(page, url, WAIT).await?;
    let title: String = page.evaluate("document.title").await?.into_value()?;
    Ok((load_event_end, title))
}

/// One Playwright load, as `routefromhar.mjs` reports it.
struct PlaywrightLoad {
    ms: f64,
    title: String,
    failed: Vec<String>,
}

/// `routefromhar.mjs` running under Node.
struct Playwright(Script);

impl Playwright {
    async fn start(node_modules: &Path, har: &Path, chromium: &Path, args: &[String]) -> Result<Playwright> {
        let script = Path::new(env!("CARGO_MANIFEST_DIR")).join("benches/replay_pageload/routefromhar.mjs");
        let config = json!({ "nodeModules": node_modules, "har": har, "chromium": chromium, "args": args });
        let (script, ready) = Script::start(&script, &config, WAIT).await?;
        println!("playwright-core {} driving Chromium {}", ready["playwright"], ready["browser"]);
        Ok(Playwright(script))
    }

    async fn load(&mut self, url: &str) -> Result<PlaywrightLoad> {
        let answer = self.0.ask(&json!({ "load": url }), WAIT).await?;
        if let Some(error) = answer.get("error") {
            bail!("{}", error.as_str().unwrap_or_default());
        }
        let ms = answer["ms"].as_f64().with_context(|| format!("no load time in {answer}"))?;
        let failed = answer["failed"].as_array().into_iter().flatten().filter_map(|u| u.as_str().map(str::to_owned));
        let title = answer["title"].as_str().unwrap_or_default().to_owned();
        Ok(PlaywrightLoad { ms, title, failed: failed.collect() })
    }

    fn close(self) {
        self.0.close();
    }
}

/// Listens on the recorded site's port, now that the site is stopped, and keeps what each connection
/// made to it sent first (its request line, or nothing for a connection opened ahead of any request), then
/// closes it: any connection is one side or the other reaching for the live site.
struct Sentinel {
    /// Per connection, in the order they came.
    seen: Arc<Mutex<Vec<String>>>,
    listening: bool,
    stop: Arc<AtomicBool>,
}

impl Sentinel {
    /// Listens on the port of `origin` (`http://127.0.0.1:PORT`); counts nothing if it is taken or not local.
    fn start(origin: &str) -> Sentinel {
        let seen = Arc::new(Mutex::new(Vec::new()));
        let stop = Arc::new(AtomicBool::new(false));
        let listener = origin
            .strip_prefix("http://127.0.0.1:")
            .and_then(|port| port.parse::<u16>().ok())
            .and_then(|port| TcpListener::bind(("127.0.0.1", port)).ok())
            .filter(|listener| listener.set_nonblocking(true).is_ok());
        let listening = listener.is_some();
        if let Some(listener) = listener {
            let (seen, done) = (seen.clone(), stop.clone());
            std::thread::spawn(move || {
                while !done.load(Ordering::Relaxed) {
                    let Ok((mut stream, _)) = listener.accept() else {
                        std::thread::sleep(Duration::from_millis(5));
                        continue;
                    };
                    let index = {
                        let mut seen = seen.lock().expect("no panics while locked");
                        seen.push("(nothing sent)".to_owned());
                        seen.len() - 1
                    };
                    let seen = seen.clone();
                    std::thread::spawn(move || {
                        let _ = stream.set_nonblocking(false);
                        let _ = stream.set_read_timeout(Some(Duration::from_millis(500)));
                        let mut first = [0_u8; 512];
                        let read = stream.read(&mut first).unwrap_or(0);
                        let text = String::from_utf8_lossy(&first[..read]);
                        if let Some(line) = text.lines().next().filter(|line| !line.is_empty()) {
                            seen.lock().expect("no panics while locked")[index] = line.to_owned();
                        }
                    });
                }
            });
        }
        Sentinel { seen, listening, stop }
    }

    /// How many connections have come so far.
    fn count(&self) -> usize {
        self.seen.lock().expect("no panics while locked").len()
    }

    /// What the connections `range` sent first.
    fn seen(&self, range: Range<usize>) -> Vec<String> {
        self.seen.lock().expect("no panics while locked")[range].to_vec()
    }
}

impl Drop for Sentinel {
    fn drop(&mut self) {
        self.stop.store(true, Ordering::Relaxed);
    }
}

/// `scheme://host[:port]` of a URL.
fn origin(url: &str) -> Option<&str> {
    let after_scheme = url.find("://")? + 3;
    let end = url[after_scheme..].find('/').map_or(url.len(), |i| after_scheme + i);
    Some(&url[..end])
}

fn report(samples: &Samples, rounds: usize) {
    println!();
    println!("page load, navigation start to load event end: medians of {rounds} rounds (+{WARM_UP_ROUNDS} warm-up)");
    println!("replay: trace-replay; playwright: routeFromHAR on the same capture; same Chromium, interleaved");
    println!("{:<16} {:>12} {:>15} {:>8}", "page", "replay (ms)", "playwright (ms)", "ratio");
    let mut ratios = Vec::new();
    for (index, path) in PAGES.iter().enumerate() {
        let (replay, playwright) = (median(&samples.replay[index]), median(&samples.playwright[index]));
        ratios.push(replay / playwright);
        println!("{path:<16} {replay:>12.1} {playwright:>15.1} {:>7.2}×", replay / playwright);
    }
    let (replay, playwright) = (median(&samples.replay.concat()), median(&samples.playwright.concat()));
    let of_medians = replay / playwright;
    let geometric_mean = (ratios.iter().map(|r| r.ln()).sum::<f64>() / ratios.len() as f64).exp();
    println!("{:<16} {replay:>12.1} {playwright:>15.1} {of_medians:>7.2}×  ratio of medians, all samples", "all pages");
    println!("{:<16} {:>12} {:>15} {geometric_mean:>7.2}×  geometric mean of the per-page ratios", "", "", "");
    println!();
    for (name, ratio) in [("ratio of medians", of_medians), ("geometric mean of ratios", geometric_mean)] {
        let verdict = if ratio <= TARGET_RATIO { "met" } else { "NOT met" };
        println!("{name:<25} {ratio:.2}×   target ≤ {TARGET_RATIO:.1}×: {verdict}");
    }
}

/// What routeFromHAR failed to serve, URLs that differ in their query only (cache busters) taken together.
fn report_failed(failed: &BTreeMap<String, u64>) {
    if failed.is_empty() {
        println!("routeFromHAR, over all counted loads: no request failed");
        return;
    }
    println!("routeFromHAR, over all counted loads: requests that failed (not in the HAR as asked for: aborted):");
    let mut by_path: BTreeMap<&str, (u64, Vec<&str>)> = BTreeMap::new();
    for (url, times) in failed {
        let path = url.split_once('?').map_or(url.as_str(), |(path, _)| path);
        let entry = by_path.entry(path).or_default();
        entry.0 += times;
        entry.1.push(url);
    }
    for (path, (times, urls)) in by_path {
        match urls.as_slice() {
            [url] => println!("  {times:>3} × {url}"),
            _ => println!("  {times:>3} × {path}?… ({} different queries, e.g. {})", urls.len(), urls[0]),
        }
    }
}

/// The connections to the recorded site's port, by the side that was loading (warm-up rounds included).
fn report_live(sentinel: &Sentinel, live: &[(Side, &str, Vec<String>)]) {
    if !sentinel.listening {
        println!("the recorded site's port is in use by something else: connections to it were not counted");
        return;
    }
    for (side, name) in [(Side::Replay, "trace-replay"), (Side::Playwright, "routeFromHAR")] {
        let mut by_page: BTreeMap<&str, BTreeMap<&str, usize>> = BTreeMap::new();
        for (_, page, seen) in live.iter().filter(|(s, _, _)| *s == side) {
            for first in seen {
                *by_page.entry(page).or_default().entry(first.as_str()).or_default() += 1;
            }
        }
        let total: usize = by_page.values().flat_map(BTreeMap::values).sum();
        println!("connections to the recorded site's port during {name} loads (all rounds): {total}");
        for (page, seen) in by_page {
            for (first, times) in seen {
                println!("  loading {page:<14} {times:>3} × {first}");
            }
        }
    }
}
