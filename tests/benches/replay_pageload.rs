//! Replay page-load benchmark: how fast the demo shop's pages load when `trace-replay` serves a recorded
//! bundle, in both of its ways (over the DevTools protocol to the browser it launches, and as an HTTP proxy
//! to a browser of someone else's), against Playwright's `routeFromHAR` serving the same capture (the
//! bundle's `recording.har`, or the exported zip), in the same Chromium (`TRACE_CHROMIUM`, else Debian's),
//! all offline.
//!
//! The demonstration of [`trace_e2e::demo`] is recorded first (as `cargo xtask demo` does; the bundle is
//! left in `target/bench-replay-pageload/`), or an existing bundle is taken from `TRACE_BENCH_BUNDLE`. The
//! demo shop is then stopped, and a sentinel listens on its old port and keeps what each connection to it
//! sent first, attributed to the side that was loading: nothing is live, and any connection is one side
//! reaching for the live site (a request, or a connection Chromium opens ahead of one). Three browsers
//! start, all headless with the same extra flags ([`trace_replay::chromium::command_line_flags`]: the
//! offline flags, plus `--no-sandbox` as root), one for each side:
//! - **CDP**: `trace-replay`'s own ([`Replay::launch`], with its defaults: the determinism script and the
//!   recorded storage included, since that is what its users get), every request answered over DevTools;
//!   driven from here through chromiumoxide.
//! - **proxy**: `trace-replay serve BUNDLE --proxy-port 0` (the binary `TRACE_REPLAY` names, else the one
//!   `cargo xtask dist` built; with its defaults, determinism included, but its log of each request's
//!   decision off, as the CDP side's is here), stopped with `SIGTERM` at the end, and a Chromium launched
//!   as an agent launches its own: the same flags, `--proxy-server` set to the proxy and
//!   `--proxy-bypass-list=<-loopback>`, without which Chromium would go around the proxy to the shop on
//!   127.0.0.1. It is driven through chromiumoxide as the CDP side is, so that the two ways of serving
//!   differ in nothing the driver adds, and its viewport is the recorded one, as on the CDP side. Site
//!   isolation stays on, as in any agent's browser (replay's own browser turns it off so that its page
//!   scripts reach cross-site frames, which the proxy writes into every document instead): it shows on
//!   `/embed`, whose partner widget is another site's frame.
//! - **Playwright**: npm `playwright-core` with `executablePath`, a context with `routeFromHAR(har,
//!   {notFound: 'abort'})`, driven by `replay_pageload/routefromhar.mjs`, which this benchmark starts and
//!   commands over JSON lines. `playwright-core` (pinned) is installed into `target/bench-node/` on first
//!   use; no browser is ever downloaded.
//!
//! What is measured is a page load from navigation start to the end of the load event, as the page's own
//! Navigation Timing entry tells it (`loadEventEnd`), read from outside the page the same way on every
//! side, for pages the demonstration visited, at their recorded URLs (for a bundle of another site, every HTML
//! document it recorded on its website's origin). Each side keeps one tab and
//! navigates it from page to page, as a user of each tool does. The sides are interleaved from this one
//! program: each round loads every page on every side, and which side goes first rotates from round to
//! round. These machines are shared and noisy (other Chromium tests may be running on the two cores), and
//! interleaving spreads whatever else happens over all sides alike, where a block of one side's loads then
//! a block of another's would compare different moments. Each load starts after a short quiet pause.
//! Warm-up rounds come first and are not counted.
//!
//! Printed: per page, the median load time under each side and the ratios CDP/Playwright, proxy/CDP and
//! proxy/Playwright; over all pages, for each of them, the ratio of the medians of all samples and the
//! geometric mean of the per-page ratios; what each side failed to serve (Playwright's failed requests,
//! each `trace-replay`'s summary of what it served, missed and refused); the connections to the recorded
//! site's port; pages whose titles differ between the sides (each side should have shown the same page).
//! Target: `trace-replay` over CDP at most as slow as `routeFromHAR` (ratio ≤ 1.0). The proxy against CDP
//! has no target: its ratio is reported only. A proxy side that reached the recorded site's port (its
//! browser went around the proxy) fails the benchmark once the figures are printed.
//!
//! Run: `cargo xtask dist && cargo bench -p trace-e2e --bench replay_pageload` (`TRACE_BENCH_ROUNDS` sets
//! the number of counted rounds, 15 by default; `TRACE_BENCH_BUNDLE=DIR_OR_ZIP`, absolute or relative to the
//! workspace, skips the recording; `TRACE_REPLAY=PATH`, the same, names the `trace-replay` whose proxy runs).

use std::collections::{BTreeMap, BTreeSet};
use std::io::{BufRead, BufReader, Read};
use std::net::TcpListener;
use std::ops::Range;
use std::path::{Path, PathBuf};
use std::process::{Child, Command, Stdio};
use std::sync::atomic::{AtomicBool, Ordering};
use std::sync::{Arc, Mutex, mpsc};
use std::time::{Duration, Instant};

use anyhow::{Context, Result, bail, ensure};
use chromiumoxide::Page;
use serde_json::json;
use trace_e2e::bench::{self, BUNDLE_ENV, PerSide, geometric_mean, in_workspace, origin, rotated};
use trace_e2e::browser::{Build, load_event_end};
use trace_e2e::demo;
use trace_e2e::median;
use trace_e2e::playwright::{self, Script};
use trace_e2e::site::DemoSite;
use trace_host::process::TRACE_REPLAY_ENV;
use trace_manifest::event::Viewport;
use trace_replay::archive::ReplayArchive;
use trace_replay::chromium::{self, Chromium, Launch};
use trace_replay::serve::{Options, Replay};

/// Pages the demo's demonstration visited. Another bundle's pages are the HTML documents it recorded on
/// its website's origin ([`pages_of`]).
const DEMO_PAGES: [&str; 7] = ["/", "/login", "/search?q=mug", "/embed", "/strict", "/help", "/clock"];
const DEFAULT_ROUNDS: usize = 15;
const WARM_UP_ROUNDS: usize = 2;
/// `trace-replay` over CDP may be this much slower than `routeFromHAR` at most.
const TARGET_RATIO: f64 = 1.0;
/// Before each load, so that each starts on a quiet machine.
const QUIET: Duration = Duration::from_millis(300);
const WAIT: Duration = Duration::from_secs(30);
/// How long a browser, or the proxy, may take to close before it is killed.
const CLOSE_WAIT: Duration = Duration::from_secs(30);

#[derive(Debug, Clone, Copy, PartialEq, Eq)]
enum Side {
    /// `trace-replay`'s own browser, answered over DevTools.
    Cdp = 0,
    /// A browser of the benchmark's, through `trace-replay serve --proxy-port`.
    Proxy = 1,
    /// Playwright's `routeFromHAR`.
    Playwright = 2,
}

impl Side {
    const ALL: [Side; 3] = [Side::Cdp, Side::Proxy, Side::Playwright];

    /// What messages call it.
    fn name(self) -> &'static str {
        match self {
            Side::Cdp => "trace-replay over CDP",
            Side::Proxy => "trace-replay's proxy",
            Side::Playwright => "routeFromHAR",
        }
    }

    /// What the table's columns call it.
    fn short_name(self) -> &'static str {
        match self {
            Side::Cdp => "cdp",
            Side::Proxy => "proxy",
            Side::Playwright => "playwright",
        }
    }
}

impl From<Side> for usize {
    fn from(side: Side) -> usize {
        side as usize
    }
}

/// The side-to-side ratios printed, numerator first.
const COMPARED: [(Side, Side); 3] =
    [(Side::Cdp, Side::Playwright), (Side::Proxy, Side::Cdp), (Side::Proxy, Side::Playwright)];

/// One page load on one side.
struct Load {
    ms: f64,
    title: String,
    /// The URLs its requests failed to get, as Playwright reports them (`notFound: 'abort'`, or anything
    /// else); `trace-replay`'s two sides say theirs in their summaries instead.
    failed: Vec<String>,
}

/// What one side's loads of one page gave.
#[derive(Default, Clone)]
struct PageLoads {
    /// Load times in milliseconds, of the counted rounds.
    ms: Vec<f64>,
    /// The titles shown, in every round: a check that each side loaded the same page.
    titles: BTreeSet<String>,
}

/// Everything the rounds gave.
struct Samples {
    /// The pages loaded, as paths of the website's origin.
    pages: Vec<String>,
    /// For each side, per page (in the order of `pages`).
    loads: PerSide<Vec<PageLoads>, 3>,
    /// URL → how many counted loads saw it fail (only Playwright's side reports them).
    failed: BTreeMap<String, u64>,
    /// Connections to the recorded site's port during each side's loads: (side, page, what each sent first).
    live: Vec<(Side, String, Vec<String>)>,
}

impl Samples {
    fn new(pages: Vec<String>) -> Samples {
        Samples {
            loads: PerSide(Side::ALL.map(|_| vec![PageLoads::default(); pages.len()])),
            pages,
            failed: BTreeMap::new(),
            live: Vec::new(),
        }
    }

    /// Keeps `load` of page `page` on `side`; its time and failures only when the round is `counted`.
    fn add(&mut self, side: Side, page: usize, load: Load, counted: bool) {
        let loads = &mut self.loads[side][page];
        loads.titles.insert(load.title);
        if counted {
            loads.ms.push(load.ms);
            for url in load.failed {
                *self.failed.entry(url).or_default() += 1;
            }
        }
    }

    /// The median load time of `page` on `side`.
    fn median(&self, side: Side, page: usize) -> f64 {
        median(&self.loads[side][page].ms)
    }

    /// The median of all of `side`'s load times, every page's together.
    fn overall_median(&self, side: Side) -> f64 {
        let all: Vec<f64> = self.loads[side].iter().flat_map(|loads| loads.ms.iter().copied()).collect();
        median(&all)
    }
}

/// How much slower one side is than another: per page (ratio of the medians), and over all pages.
struct Ratio {
    per_page: Vec<f64>,
    /// The ratio of the medians of all samples.
    of_medians: f64,
    /// The geometric mean of the per-page ratios.
    geometric_mean: f64,
}

impl Ratio {
    /// `side`'s load times over `baseline`'s.
    fn of(samples: &Samples, side: Side, baseline: Side) -> Ratio {
        let per_page: Vec<f64> =
            (0..samples.pages.len()).map(|page| samples.median(side, page) / samples.median(baseline, page)).collect();
        let geometric_mean = geometric_mean(&per_page);
        let of_medians = samples.overall_median(side) / samples.overall_median(baseline);
        Ratio { per_page, of_medians, geometric_mean }
    }
}

#[tokio::main(flavor = "multi_thread", worker_threads = 2)]
async fn main() -> Result<()> {
    let rounds = bench::rounds(DEFAULT_ROUNDS)?;
    let target = Path::new(env!("CARGO_MANIFEST_DIR")).join("../target");
    let node_modules = playwright::install(&target.join("bench-node"))?;
    let trace_replay = trace_replay_binary(&target)?;

    let (bundle, chromium) = match std::env::var_os(BUNDLE_ENV) {
        Some(bundle) => {
            let chromium = chromium::find(None)?;
            let bundle = in_workspace(&bundle);
            let bundle = bundle.canonicalize().with_context(|| format!("{BUNDLE_ENV}: {}", bundle.display()))?;
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
    let pages = pages_of(&archive, &origin);
    let urls: Vec<String> = pages.iter().map(|path| format!("{origin}{path}")).collect();
    let unrecorded: Vec<&String> = urls
        .iter()
        .filter(|url| !archive.exchanges.iter().any(|e| e.request.method == "GET" && &e.request.url == *url))
        .collect();
    ensure!(unrecorded.is_empty(), "the bundle has no recorded GET of {unrecorded:?}");
    ensure!(!pages.is_empty(), "the bundle recorded no HTML page on {origin}");
    let sentinel = Sentinel::start(&origin);

    // Playwright reads a bundle directory's HAR, whose bodies are files beside it, or the exported zip.
    let har = if bundle.is_dir() { bundle.join(trace_manifest::bundle::HAR_FILE) } else { bundle.clone() };
    let args = chromium::command_line_flags();
    let playwright = Playwright::start(&node_modules, &har, &chromium, &args).await?;
    let proxy = ServedProxy::start(&trace_replay, &bundle)?;
    let proxied_browser = launch_proxied_browser(&chromium, &proxy.url, archive.viewport).await?;
    let options = Options { chromium: Some(chromium.clone()), ..Options::default() };
    let replay = Replay::launch(archive, &options).await?;
    println!("chromium: {}; flags for all sides: {}", chromium.display(), args.join(" "));
    println!(
        "proxy: {} serve --proxy-port 0 at {url}; its browser adds --proxy-server={url} --proxy-bypass-list=<-loopback>",
        trace_replay.display(),
        url = proxy.url
    );

    let mut tabs = Tabs {
        cdp: replay.open("about:blank").await?,
        proxy: proxied_browser.browser.new_page("about:blank").await?,
        playwright,
    };
    let measured = measure(&mut tabs, &sentinel, &pages, &urls, rounds).await;
    let cdp_stats = replay.stats();
    // Bounded: a close that hangs must not hang the benchmark (chromiumoxide kills the browser when the
    // close is dropped), but it is said, since it is a bug of `trace-replay`.
    if tokio::time::timeout(CLOSE_WAIT, replay.close()).await.is_err() {
        eprintln!("note: Replay::close did not return in {CLOSE_WAIT:?}; its browser was killed");
    }
    // The browser goes before its proxy, so that the proxy's summary holds all it was asked.
    if tokio::time::timeout(CLOSE_WAIT, proxied_browser.close()).await.is_err() {
        eprintln!("note: the proxy side's browser did not close in {CLOSE_WAIT:?}; it was killed");
    }
    tabs.playwright.close();
    let proxy_summary = proxy.stop();
    let samples = measured?;

    report(&samples, rounds);
    report_titles(&samples);
    println!();
    print!("{}, over all loads: {cdp_stats}", Side::Cdp.name());
    println!("{}, over all loads: {}", Side::Proxy.name(), proxy_summary?);
    report_failed(&samples.failed);
    report_live(&sentinel, &samples.live);
    let proxy_went_live = samples.live.iter().any(|(side, _, _)| *side == Side::Proxy);
    ensure!(!proxy_went_live, "the proxy side's browser reached the recorded site's port: it went around the proxy");
    Ok(())
}

/// The `trace-replay` whose proxy is measured: the one `TRACE_REPLAY` names (as for `trace-host` and the
/// BrowserGym integration), else the one `cargo xtask dist` built under `target`.
fn trace_replay_binary(target: &Path) -> Result<PathBuf> {
    let binary = match std::env::var_os(TRACE_REPLAY_ENV).filter(|value| !value.is_empty()) {
        Some(value) => in_workspace(&value),
        None => target.join("release/trace-replay"),
    };
    ensure!(
        binary.is_file(),
        "no trace-replay at {}: run `cargo xtask dist`, or name one with {TRACE_REPLAY_ENV}",
        binary.display()
    );
    Ok(binary)
}

/// The pages to load, as paths of `origin`: the demo's when the bundle recorded them all (it is the demo's
/// demonstration), else every HTML document the bundle recorded on its website's origin, in the order first
/// recorded (a bundle of another site, as the scale benchmark's).
fn pages_of(archive: &ReplayArchive, origin: &str) -> Vec<String> {
    let recorded_get = |url: &str| archive.exchanges.iter().any(|e| e.request.method == "GET" && e.request.url == url);
    if DEMO_PAGES.iter().all(|path| recorded_get(&format!("{origin}{path}"))) {
        return DEMO_PAGES.iter().map(|path| path.to_string()).collect();
    }
    let mut pages: Vec<String> = Vec::new();
    for exchange in &archive.exchanges {
        let html = exchange.headers.iter().any(|(name, value)| {
            name.eq_ignore_ascii_case("content-type") && value.to_ascii_lowercase().starts_with("text/html")
        });
        let path = exchange.request.url.strip_prefix(origin).filter(|path| path.starts_with('/'));
        if let Some(path) = path.filter(|_| html && exchange.request.method == "GET" && exchange.status == 200)
            && !pages.iter().any(|known| known == path)
        {
            pages.push(path.to_owned());
        }
    }
    pages
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

/// Launches the proxy side's Chromium as an agent launches its own browser: told of the proxy and of
/// nothing else of replay's (see the module's header).
async fn launch_proxied_browser(chromium: &Path, proxy: &str, viewport: Option<Viewport>) -> Result<Chromium> {
    let flag = |name: &str, value: &str| (name.to_owned(), Some(value.to_owned()));
    let launch = Launch {
        chromium: Some(chromium.to_owned()),
        headless: true,
        // Chromium sends loopback hosts around any proxy unless told otherwise, and the demo shop is one.
        args: vec![flag("proxy-server", proxy), flag("proxy-bypass-list", "<-loopback>")],
        viewport,
        ..Launch::default()
    };
    chromium::launch(&launch).await.context("cannot launch the proxy side's Chromium")
}

/// Each side's one tab, which it navigates from page to page as a user of that tool does.
struct Tabs {
    cdp: Page,
    proxy: Page,
    playwright: Playwright,
}

impl Tabs {
    async fn load(&mut self, side: Side, url: &str) -> Result<Load> {
        match side {
            Side::Cdp => load(&self.cdp, url).await,
            Side::Proxy => load(&self.proxy, url).await,
            Side::Playwright => self.playwright.load(url).await,
        }
    }
}

/// Loads every page round after round on every side, interleaved.
async fn measure(
    tabs: &mut Tabs,
    sentinel: &Sentinel,
    pages: &[String],
    urls: &[String],
    rounds: usize,
) -> Result<Samples> {
    let mut samples = Samples::new(pages.to_vec());
    for round in 0..WARM_UP_ROUNDS + rounds {
        // Each side goes first in one round of three, second in the next, last in the third.
        let order = rotated(Side::ALL, round);
        let counted = round >= WARM_UP_ROUNDS;
        for (page, url) in urls.iter().enumerate() {
            for side in order {
                let connections_before = sentinel.count();
                tokio::time::sleep(QUIET).await;
                let load = tabs.load(side, url).await.with_context(|| format!("{}: {url}", side.name()))?;
                samples.add(side, page, load, counted);
                let connections = connections_before..sentinel.count();
                if !connections.is_empty() {
                    samples.live.push((side, pages[page].clone(), sentinel.seen(connections)));
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

/// Loads `url` in a tab driven through chromiumoxide: the time from navigation start to the end of the
/// load event, in milliseconds, and the page's title.
async fn load(page: &Page, url: &str) -> Result<Load> {
    let ms = load_event_end(page, url, WAIT).await?;
    let title: String = page.evaluate("document.title").await?.into_value()?;
    Ok(Load { ms, title, failed: Vec::new() })
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

    async fn load(&mut self, url: &str) -> Result<Load> {
        let answer = self.0.ask(&json!({ "load": url }), WAIT).await?;
        if let Some(error) = answer.get("error") {
            bail!("{}", error.as_str().unwrap_or_default());
        }
        let ms = answer["ms"].as_f64().with_context(|| format!("no load time in {answer}"))?;
        let failed = answer["failed"].as_array().into_iter().flatten().filter_map(|u| u.as_str().map(str::to_owned));
        let title = answer["title"].as_str().unwrap_or_default().to_owned();
        Ok(Load { ms, title, failed: failed.collect() })
    }

    fn close(self) {
        self.0.close();
    }
}

/// `trace-replay serve BUNDLE --proxy-port 0` running: the proxy the proxy side's browser goes through.
/// Killed when dropped, unless it has exited.
struct ServedProxy {
    process: Child,
    /// What it prints, line by line, read on a thread of their own so that waiting for one has a deadline.
    lines: mpsc::Receiver<String>,
    /// Where it listens, as a browser's proxy setting takes it (`http://127.0.0.1:PORT`).
    url: String,
}

impl ServedProxy {
    /// Starts it and waits until it says it listens: `proxy: URL`, then a line `press Ctrl+C to stop`.
    fn start(trace_replay: &Path, bundle: &Path) -> Result<ServedProxy> {
        let mut process = Command::new(trace_replay)
            .arg("serve")
            .arg(bundle)
            .args(["--proxy-port", "0"])
            // Its decisions, one line a request at info, are a cost the CDP side, which logs nothing here,
            // does not pay; what it served and refused is in its summary anyway.
            .env("TRACE_LOG", "warn")
            .stdin(Stdio::null())
            .stdout(Stdio::piped())
            .spawn()
            .with_context(|| format!("cannot run {}", trace_replay.display()))?;
        let stdout = process.stdout.take().context("trace-replay's stdout")?;
        let (sender, lines) = mpsc::channel();
        std::thread::spawn(move || {
            for line in BufReader::new(stdout).lines().map_while(Result::ok) {
                if sender.send(line).is_err() {
                    break;
                }
            }
        });
        // Held from here, so that a start that fails kills it.
        let mut served = ServedProxy { process, lines, url: String::new() };
        let deadline = Instant::now() + WAIT;
        loop {
            let line = served
                .lines
                .recv_timeout(deadline.saturating_duration_since(Instant::now()))
                .context("trace-replay serve --proxy-port 0 did not say where it listens")?;
            if let Some(url) = line.strip_prefix("proxy: ") {
                served.url = url.to_owned();
            }
            if line.starts_with("press Ctrl+C") {
                break;
            }
        }
        ensure!(!served.url.is_empty(), "trace-replay serve --proxy-port 0 did not print its proxy's URL");
        Ok(served)
    }

    /// Stops it with `SIGTERM`, as a job runner does, and returns what it printed then: its summary of
    /// what it served, missed and refused. An error when it does not exit in time (it is killed then).
    fn stop(mut self) -> Result<String> {
        let pid = self.process.id().to_string();
        let signalled = Command::new("kill").args(["-TERM", &pid]).status().context("cannot run kill")?;
        ensure!(signalled.success(), "kill -TERM {pid} failed");
        let deadline = Instant::now() + CLOSE_WAIT;
        // The reading thread ends, and the channel with it, when the process closes its output as it exits.
        let mut summary = Vec::new();
        while let Ok(line) = self.lines.recv_timeout(deadline.saturating_duration_since(Instant::now())) {
            summary.push(line);
        }
        loop {
            if let Some(status) = self.process.try_wait()? {
                ensure!(status.success(), "trace-replay serve --proxy-port exited with {status} on SIGTERM");
                return Ok(summary.join("\n"));
            }
            if Instant::now() >= deadline {
                bail!("trace-replay serve --proxy-port did not exit within {CLOSE_WAIT:?} of SIGTERM; killed");
            }
            std::thread::sleep(Duration::from_millis(50));
        }
    }
}

impl Drop for ServedProxy {
    fn drop(&mut self) {
        if let Ok(None) = self.process.try_wait() {
            let _ = self.process.kill();
            let _ = self.process.wait();
        }
    }
}

/// Listens on the recorded site's port, now that the site is stopped, and keeps what each connection
/// made to it sent first (its request line, or nothing for a connection opened ahead of any request), then
/// closes it: any connection is one side or another reaching for the live site.
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

fn report(samples: &Samples, rounds: usize) {
    let ratios = COMPARED.map(|(side, baseline)| Ratio::of(samples, side, baseline));
    let ratio_names = COMPARED.map(|(side, baseline)| format!("{}/{}", side.short_name(), baseline.short_name()));
    println!();
    println!("page load, navigation start to load event end: medians of {rounds} rounds (+{WARM_UP_ROUNDS} warm-up)");
    println!(
        "cdp: trace-replay over DevTools; proxy: trace-replay serve --proxy-port; playwright: routeFromHAR; \
         the same capture, the same Chromium, interleaved"
    );
    print!("{:<16}", "page");
    for side in Side::ALL {
        print!(" {:>15}", format!("{} (ms)", side.short_name()));
    }
    for name in &ratio_names {
        print!(" {name:>16}");
    }
    println!();
    for (page, path) in samples.pages.iter().enumerate() {
        print!("{path:<16}");
        for side in Side::ALL {
            print!(" {:>15.1}", samples.median(side, page));
        }
        for ratio in &ratios {
            print!(" {:>15.2}×", ratio.per_page[page]);
        }
        println!();
    }
    print!("{:<16}", "all pages");
    for side in Side::ALL {
        print!(" {:>15.1}", samples.overall_median(side));
    }
    for ratio in &ratios {
        print!(" {:>15.2}×", ratio.of_medians);
    }
    println!("  ratio of medians, all samples");
    print!("{:<16}{:>48}", "", "");
    for ratio in &ratios {
        print!(" {:>15.2}×", ratio.geometric_mean);
    }
    println!("  geometric mean of the per-page ratios");
    println!();

    // In the order of `COMPARED`.
    let [cdp_to_playwright, proxy_to_cdp, _] = &ratios;
    println!("{} against {}:", Side::Cdp.name(), Side::Playwright.name());
    for (name, ratio) in [
        ("ratio of medians", cdp_to_playwright.of_medians),
        ("geometric mean of ratios", cdp_to_playwright.geometric_mean),
    ] {
        let verdict = if ratio <= TARGET_RATIO { "met" } else { "NOT met" };
        println!("  {name:<25} {ratio:.2}×   target ≤ {TARGET_RATIO:.1}×: {verdict}");
    }
    println!("{} against {} (no target, reported only):", Side::Proxy.name(), Side::Cdp.name());
    println!("  {:<25} {:.2}×", "ratio of medians", proxy_to_cdp.of_medians);
    println!("  {:<25} {:.2}×", "geometric mean of ratios", proxy_to_cdp.geometric_mean);
}

/// Pages whose titles were not one and the same on every side: some side did not show the recorded page.
fn report_titles(samples: &Samples) {
    for (page, path) in samples.pages.iter().enumerate() {
        let titles = Side::ALL.map(|side| &samples.loads[side][page].titles);
        let first = titles[0];
        if titles.iter().any(|shown| *shown != first) || first.len() != 1 || first.contains("") {
            let by_side: Vec<String> =
                Side::ALL.iter().zip(titles).map(|(side, shown)| format!("{} {shown:?}", side.name())).collect();
            println!("note: {path} showed different titles: {}", by_side.join(", "));
        }
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
fn report_live(sentinel: &Sentinel, live: &[(Side, String, Vec<String>)]) {
    if !sentinel.listening {
        println!("the recorded site's port is in use by something else: connections to it were not counted");
        return;
    }
    for side in Side::ALL {
        let mut by_page: BTreeMap<&str, BTreeMap<&str, usize>> = BTreeMap::new();
        for (_, page, seen) in live.iter().filter(|(s, _, _)| *s == side) {
            for first in seen {
                *by_page.entry(page.as_str()).or_default().entry(first.as_str()).or_default() += 1;
            }
        }
        let total: usize = by_page.values().flat_map(BTreeMap::values).sum();
        println!("connections to the recorded site's port during {} loads (all rounds): {total}", side.name());
        for (page, seen) in by_page {
            for (first, times) in seen {
                println!("  loading {page:<14} {times:>3} × {first}");
            }
        }
    }
}
