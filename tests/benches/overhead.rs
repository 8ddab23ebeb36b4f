//! Recording overhead benchmark: how much slower pages load in a tab the extension records than in a tab
//! nothing records, and than in a tab ArchiveWeb.page records, in the same Chromium, on the demo shop.
//!
//! One headless Chromium runs the built extension with the real `trace-host`, and beside it ArchiveWeb.page
//! (Webrecorder's recording extension, built by `.ci/install` from its npm package; see
//! [`trace_e2e::archiveweb`]), which records through `chrome.debugger` as TRACE does and stores every
//! response in IndexedDB. A task is started from the popup as a person does ([`trace_e2e::demo::record`]
//! does the same), so the tab the extension opens is recorded: `chrome.debugger` attached, every response's
//! body read after its page has loaded, a screenshot and a DOM snapshot at each load, everything streamed to
//! the host. Two more tabs are opened through DevTools before the task starts (so that no recorded tab is
//! their opener): one is not recorded, the baseline ("off"), and the benchmark checks in the bundle that
//! TRACE recorded one tab only; ArchiveWeb.page records the other, started from its popup page after the
//! task's tab exists (it follows tabs its recorded tabs open, and none opens after), and the benchmark
//! checks in its IndexedDB that it stored every page it loaded, each time it loaded it. Both recorders
//! disable the cache in the tabs they record, so the baseline tab has its cache disabled too
//! (`Network.setCacheDisabled`): every tab fetches everything, and the differences are the recorders' own
//! costs, not the cache's.
//!
//! What is measured is a page load from navigation start to the end of the load event, as the page's own
//! Navigation Timing entry tells it (`loadEventEnd`), for pages of the shop that need no login. Each round
//! loads every page in the three tabs, each tab going first in turn from round to round: these machines are
//! shared and noisy, and interleaving spreads whatever else they do over all sides alike, where a block of
//! baseline loads then a block of recorded ones would compare different moments. Every tab is brought to
//! the front before its loads (hidden tabs load with a lower priority), and the machine is left quiet for
//! a moment between loads, so that a recorder's work after a load event (TRACE's capture, ArchiveWeb.page's
//! writes) does not fall on the next load, in any tab. Warm-up rounds come first and are not counted.
//!
//! Three conditions, each compared on its own: the shop's pages as the demo serves them (a loopback server
//! answers in a millisecond, so a recorder's cost shows at its largest); the same pages from a second demo
//! server that holds every response back 40 ms, as a real network's round trip does; and a large page, the
//! gallery, whose 240 pictures are a request each.
//!
//! Printed: for each condition, per page and over all pages, the median load time off, under TRACE and
//! under ArchiveWeb.page (AWP), and the ratios TRACE/off, AWP/off and TRACE/AWP; over all pages each ratio
//! both as the ratio of the medians of all samples and as the geometric mean of the per-page ratios.
//! Target: TRACE costs at most 10% (TRACE/off ≤ 1.10); and whether TRACE is ahead of ArchiveWeb.page
//! (TRACE/AWP < 1). Then the CPU time all the browser's processes (the host it started among them) used
//! per load, from navigation start to the end of the quiet second after the load, so that a recorder's
//! work after the load event counts: medians per side, and the same ratios.
//!
//! Last, a large download (300 MiB that do not compress, fetched whole by the page, three times in each
//! tab): its throughput per side (target: TRACE at least 0.8× off), how much of each body each recorder
//! kept, and the peak resident memory of `trace-host` and of each extension's process (its service worker
//! and pages; told apart by which one runs a spin in the extension's page) before and after the downloads.
//!
//! Run: `cargo xtask dist && bash .ci/install && cargo bench -p trace-e2e --bench overhead`
//! (`TRACE_BENCH_ROUNDS` sets the number of counted rounds, 15 by default).

use std::collections::BTreeSet;
use std::path::{Path, PathBuf};
use std::time::{Duration, Instant};

use anyhow::{Context, Result, ensure};
use chromiumoxide::Page;
use chromiumoxide::cdp::browser_protocol::network::{EnableParams, SetCacheDisabledParams};
use trace_e2e::archiveweb::{self, ArchiveWebPage};
use trace_e2e::bench::{
    self, PerSide, cpu_time_of_tree, geometric_mean, peak_memory_below, peak_memory_of, process_running, rotated,
};
use trace_e2e::browser::{Build, RecordingBrowser, click, load_event_end, type_into, wait_for_text};
use trace_e2e::demo;
use trace_e2e::median;
use trace_e2e::site::DemoSite;

/// The shop's pages that need no login.
const PAGES: [&str; 6] = ["/", "/login", "/search?q=mug", "/embed", "/strict", "/help"];
/// A large page: the gallery's 240 pictures, each a request.
const LARGE_PAGE: [&str; 1] = ["/gallery"];
/// What a realistic network adds to every response, in the second condition.
const NETWORK_LATENCY: Duration = Duration::from_millis(40);
/// The large download, fetched whole by the page in each tab [`DOWNLOADS`] times.
const DOWNLOAD_MIB: u64 = 300;
const DOWNLOADS: usize = 3;
/// TRACE may slow a download this much at most (throughput recorded / not recorded).
const DOWNLOAD_TARGET: f64 = 0.8;
const DEFAULT_ROUNDS: usize = 15;
const WARM_UP_ROUNDS: usize = 2;
/// TRACE may make page loads this much slower at most.
const TARGET_RATIO: f64 = 1.10;
/// Between two loads, so that each starts on a quiet machine.
const QUIET: Duration = Duration::from_millis(1000);
const WAIT: Duration = Duration::from_secs(20);

/// A tab and who records it.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
enum Side {
    /// The baseline: nothing records it.
    Off,
    Trace,
    ArchiveWeb,
}

impl Side {
    const ALL: [Side; 3] = [Side::Off, Side::Trace, Side::ArchiveWeb];

    fn name(self) -> &'static str {
        match self {
            Side::Off => "off",
            Side::Trace => "TRACE",
            Side::ArchiveWeb => "AWP",
        }
    }
}

impl From<Side> for usize {
    fn from(side: Side) -> usize {
        side as usize
    }
}

/// The ratios printed, numerator first.
const COMPARED: [(Side, Side); 3] =
    [(Side::Trace, Side::Off), (Side::ArchiveWeb, Side::Off), (Side::Trace, Side::ArchiveWeb)];

/// Pages loaded from one site, compared on their own.
struct Condition<'a> {
    name: &'static str,
    site: &'a DemoSite,
    pages: &'static [&'static str],
}

/// Per side: load times in milliseconds, per page; and the CPU time all the browser's processes used for
/// each load and the quiet moment after it, in milliseconds.
struct Samples {
    ms: PerSide<Vec<Vec<f64>>, 3>,
    cpu: PerSide<Vec<f64>, 3>,
}

/// The large download: its throughput in MiB/s per side (an error where the page's fetch failed), how much
/// of it each recorder kept, and the peak resident memory of the processes watched, before and after.
struct Download {
    throughput: PerSide<Vec<Result<f64, String>>, 3>,
    trace_kept: Vec<u64>,
    archiveweb_kept: Vec<u64>,
    peaks: Vec<(&'static str, Option<(u64, u64)>)>,
}

/// The tabs of the three sides, and the pages that drive the two recorders.
struct Tabs {
    pages: PerSide<Page, 3>,
    trace_popup: Page,
    archiveweb: ArchiveWebPage,
}

impl Tabs {
    fn of(&self, side: Side) -> &Page {
        &self.pages[side]
    }
}

#[tokio::main(flavor = "multi_thread", worker_threads = 2)]
async fn main() -> Result<()> {
    let rounds = bench::rounds(DEFAULT_ROUNDS)?;
    let build = Build::from_workspace()?;
    let archiveweb_extension = archiveweb::built_extension()?;
    let site = DemoSite::start(0)?;
    let distant_site = DemoSite::start_with_latency(0, NETWORK_LATENCY)?;
    let conditions = [
        Condition { name: "demo shop", site: &site, pages: &PAGES },
        Condition { name: "demo shop, 40 ms added to every response", site: &distant_site, pages: &PAGES },
        Condition { name: "large page (240 pictures)", site: &site, pages: &LARGE_PAGE },
    ];
    let data = tempfile::tempdir()?;
    let browser = RecordingBrowser::launch_with_extra_extension(&build, data.path(), &archiveweb_extension).await?;
    let measured = measure(&browser, &site, &conditions, rounds).await;
    browser.close().await?;
    let (loads, download) = measured?;
    for (condition, samples) in conditions.iter().zip(&loads) {
        report(condition, samples, rounds);
    }
    report_download(&download);
    site.stop();
    distant_site.stop();
    Ok(())
}

/// Starts a TRACE task and ArchiveWeb.page, loads every condition's pages round after round in the three
/// tabs, checks what each recorder recorded, and stops the task.
async fn measure(
    browser: &RecordingBrowser,
    site: &DemoSite,
    conditions: &[Condition<'_>],
    rounds: usize,
) -> Result<(Vec<Samples>, Download)> {
    let tabs = open_tabs(browser, site).await?;
    let mut samples: Vec<Samples> = conditions
        .iter()
        .map(|c| Samples { ms: PerSide(Side::ALL.map(|_| vec![Vec::new(); c.pages.len()])), cpu: PerSide::default() })
        .collect();
    let browser_process = browser.process_id();
    for round in 0..WARM_UP_ROUNDS + rounds {
        for (condition, samples) in conditions.iter().zip(&mut samples) {
            for (index, path) in condition.pages.iter().enumerate() {
                for side in rotated(Side::ALL, round) {
                    let url = condition.site.url(path);
                    let cpu_before = cpu_time_of_tree(browser_process)?;
                    let ms = load_event_end(tabs.of(side), &url, WAIT)
                        .await
                        .with_context(|| format!("loading {url} ({})", side.name()))?;
                    // A recorder's work after the load (bodies, captures, writes) counts against the load.
                    tokio::time::sleep(QUIET).await;
                    let cpu_ms = (cpu_time_of_tree(browser_process)? - cpu_before).as_secs_f64() * 1000.0;
                    if round >= WARM_UP_ROUNDS {
                        samples.ms[side][index].push(ms);
                        samples.cpu[side].push(cpu_ms);
                    }
                }
            }
        }
        match round.checked_sub(WARM_UP_ROUNDS) {
            None => eprintln!("warm-up round {}/{WARM_UP_ROUNDS} done", round + 1),
            Some(counted) => eprintln!("round {}/{rounds} done", counted + 1),
        }
    }
    check_archiveweb_recorded(&tabs.archiveweb, conditions, WARM_UP_ROUNDS + rounds).await?;

    // Each extension's process, told apart by the spin of one of its pages.
    let trace_process = process_running(&tabs.trace_popup, browser_process, "--extension-process").await?;
    let archiveweb_process = process_running(tabs.archiveweb.page(), browser_process, "--extension-process").await?;
    let memory = || -> Result<Vec<Option<u64>>> {
        let host = peak_memory_below(browser_process, "trace-host")?.first().copied();
        Ok(vec![host, trace_process.and_then(peak_memory_of), archiveweb_process.and_then(peak_memory_of)])
    };
    let before = memory()?;
    let mut throughput: PerSide<Vec<Result<f64, String>>, 3> = PerSide::default();
    let download_url = site.url(&format!("/download?mb={DOWNLOAD_MIB}"));
    for round in 0..DOWNLOADS {
        for side in rotated(Side::ALL, round) {
            let fetched = fetch_whole(tabs.of(side), &download_url).await;
            throughput[side].push(fetched.map(|seconds| DOWNLOAD_MIB as f64 / seconds).map_err(|e| format!("{e:#}")));
            tokio::time::sleep(QUIET).await;
        }
        eprintln!("download round {}/{DOWNLOADS} done", round + 1);
    }
    let archiveweb_kept = tabs.archiveweb.recorded("/download?").await?.body_lengths;

    tabs.trace_popup.bring_to_front().await?;
    let counts = wait_for_text(&tabs.trace_popup, "#counts", WAIT, |_| true).await?;
    eprintln!("TRACE's recorder says: {counts}");
    click(&tabs.trace_popup, "#stop").await?;
    // The host may still be writing the last download's body.
    wait_for_text(&tabs.trace_popup, "#status", Duration::from_secs(300), |t| t.starts_with("Host connected")).await?;
    let after = memory()?;
    let bundle = finished_bundle(&browser.data_dir).await?;
    let recorded = recorded_tabs(&bundle)?;
    ensure!(recorded.len() == 1, "the bundle has events of tabs {recorded:?}: TRACE recorded another tab too");
    let names = ["trace-host", "TRACE's extension process", "ArchiveWeb.page's extension process"];
    let peaks = names
        .into_iter()
        .zip(before.into_iter().zip(after))
        .map(|(name, (before, after))| (name, before.zip(after)))
        .collect();
    let download =
        Download { throughput, trace_kept: recorded_body_sizes(&bundle, "/download?")?, archiveweb_kept, peaks };
    Ok((samples, download))
}

/// Opens the three tabs: the baseline and ArchiveWeb.page's through DevTools before the task starts
/// (Chrome gives a tab opened through DevTools the active tab as its opener, and TRACE's recorder follows
/// tabs that a recorded tab opens); then TRACE's task, whose tab the extension opens; then ArchiveWeb.page
/// starts on its tab.
async fn open_tabs(browser: &RecordingBrowser, site: &DemoSite) -> Result<Tabs> {
    let trace_popup = browser.popup().await?;
    let archiveweb = ArchiveWebPage::open(browser).await?;
    let baseline = browser.browser().new_page("about:blank").await.context("cannot open the baseline tab")?;
    baseline.execute(EnableParams::default()).await?;
    baseline.execute(SetCacheDisabledParams::new(true)).await?;
    let archiveweb_tab =
        browser.browser().new_page("about:blank").await.context("cannot open ArchiveWeb.page's tab")?;
    trace_popup.bring_to_front().await?;
    wait_for_text(&trace_popup, "#status", WAIT, |t| t.contains("Host connected")).await?;
    type_into(&trace_popup, "#description", "Benchmark: load the shop's pages").await?;
    type_into(&trace_popup, "#website", &site.url("/")).await?;
    click(&trace_popup, "#start").await?;
    wait_for_text(&trace_popup, "#status", WAIT, |t| t.starts_with("Recording")).await?;
    let trace_tab = demo::recorded_tab(browser, site.url("").trim_end_matches('/')).await?;
    archiveweb.record(&archiveweb_tab).await?;
    Ok(Tabs { pages: PerSide([baseline, trace_tab, archiveweb_tab]), trace_popup, archiveweb })
}

/// ArchiveWeb.page must have stored every page each time its tab loaded it (`loads` times), and only
/// then, or its column would measure a recorder that did not record, or recorded the other tabs too.
async fn check_archiveweb_recorded(
    archiveweb: &ArchiveWebPage,
    conditions: &[Condition<'_>],
    loads: usize,
) -> Result<()> {
    let recorded = archiveweb.recorded("").await?;
    for condition in conditions {
        for path in condition.pages {
            let url = condition.site.url(path);
            let stored = recorded.count_of(&url);
            // As many times as its tab loaded it: fewer is a load not recorded, twice as many or more the
            // other tabs' loads recorded too.
            ensure!(
                (loads..2 * loads).contains(&stored),
                "ArchiveWeb.page stored {url} {stored} times, but its tab loaded it {loads} times"
            );
        }
    }
    eprintln!("ArchiveWeb.page stored {} responses of {} pages", recorded.resources, recorded.pages);
    Ok(())
}

/// Has the page fetch `url` and read its body to the end; returns the seconds it took, as the page timed it.
async fn fetch_whole(page: &Page, url: &str) -> Result<f64> {
    page.bring_to_front().await?;
    let expression = format!(
        "(async () => {{ const start = performance.now(); const response = await fetch({url}); \
         const reader = response.body.getReader(); let bytes = 0; \
         for (;;) {{ const {{ done, value }} = await reader.read(); if (done) break; bytes += value.length; }} \
         return [bytes, performance.now() - start]; }})()",
        url = serde_json::to_string(url)?
    );
    let (bytes, ms): (u64, f64) = page.evaluate(expression.as_str()).await?.into_value()?;
    ensure!(bytes == DOWNLOAD_MIB << 20, "the page read {bytes} bytes of {url}");
    Ok(ms / 1000.0)
}

/// The bundle the host finished in the data directory.
async fn finished_bundle(data_dir: &Path) -> Result<PathBuf> {
    let deadline = Instant::now() + WAIT;
    loop {
        let captures = std::fs::read_dir(data_dir.join("captures")).context("the host stored nothing")?;
        if let Some(dir) = captures.flatten().map(|d| d.path()).find(|d| d.join("manifest.json").exists()) {
            return Ok(dir);
        }
        ensure!(Instant::now() < deadline, "the host did not finish a bundle in {}", data_dir.display());
        tokio::time::sleep(Duration::from_millis(100)).await;
    }
}

/// The tabs the bundle has events of: the benchmark's task must have recorded one tab only, or the
/// comparison means nothing.
fn recorded_tabs(bundle: &Path) -> Result<BTreeSet<i64>> {
    let events = std::fs::read_to_string(bundle.join("events.jsonl"))?;
    let mut tabs = BTreeSet::new();
    for line in events.lines() {
        let event: serde_json::Value = serde_json::from_str(line)?;
        tabs.extend(event["tab_id"].as_i64());
    }
    Ok(tabs)
}

/// The size of the body the bundle kept for each exchange whose URL contains `url_part` (0 where none).
fn recorded_body_sizes(bundle: &Path, url_part: &str) -> Result<Vec<u64>> {
    let har: serde_json::Value = serde_json::from_slice(&std::fs::read(bundle.join("recording.har"))?)?;
    let entries = har["log"]["entries"].as_array().context("the HAR has no entries")?;
    Ok(entries
        .iter()
        .filter(|entry| entry["request"]["url"].as_str().is_some_and(|url| url.contains(url_part)))
        .map(|entry| {
            let file = entry["response"]["content"]["_file"].as_str();
            file.and_then(|file| std::fs::metadata(bundle.join(file)).ok()).map_or(0, |meta| meta.len())
        })
        .collect())
}

fn report(condition: &Condition, samples: &Samples, rounds: usize) {
    println!();
    println!("{}: page load, navigation start to load event end", condition.name);
    println!(
        "medians of {rounds} rounds (+{WARM_UP_ROUNDS} warm-up); off: a tab not recorded; TRACE, AWP: a tab TRACE, \
         ArchiveWeb.page records"
    );
    print!("{:<16}", "page");
    for side in Side::ALL {
        print!(" {:>10}", format!("{} (ms)", side.name()));
    }
    for (side, baseline) in COMPARED {
        print!(" {:>10}", format!("{}/{}", side.name(), baseline.name()));
    }
    println!();
    for (index, path) in condition.pages.iter().enumerate() {
        let medians = PerSide(Side::ALL.map(|side| median(&samples.ms[side][index])));
        print!("{path:<16}");
        for side in Side::ALL {
            print!(" {:>10.1}", medians[side]);
        }
        for (side, baseline) in COMPARED {
            print!(" {:>9.2}×", medians[side] / medians[baseline]);
        }
        println!();
    }
    let all = PerSide(Side::ALL.map(|side| median(&samples.ms[side].concat())));
    print!("{:<16}", "all pages");
    for side in Side::ALL {
        print!(" {:>10.1}", all[side]);
    }
    println!();
    for (side, baseline) in COMPARED {
        let of_medians = all[side] / all[baseline];
        let per_page: Vec<f64> = (0..condition.pages.len())
            .map(|page| median(&samples.ms[side][page]) / median(&samples.ms[baseline][page]))
            .collect();
        let geometric_mean = geometric_mean(&per_page);
        let name = format!("{}/{}", side.name(), baseline.name());
        let verdict = match (side, baseline) {
            (Side::Trace, Side::Off) => {
                let met = |ratio: f64| if ratio <= TARGET_RATIO { "met" } else { "NOT met" };
                format!("target ≤ {TARGET_RATIO:.2}×: {} / {}", met(of_medians), met(geometric_mean))
            }
            (Side::Trace, Side::ArchiveWeb) => {
                let ahead = |ratio: f64| if ratio < 1.0 { "yes" } else { "no" };
                format!("TRACE ahead of ArchiveWeb.page (< 1×): {} / {}", ahead(of_medians), ahead(geometric_mean))
            }
            _ => String::new(),
        };
        println!(
            "{name:<10} {of_medians:>5.2}× ratio of medians / {geometric_mean:>5.2}× geometric mean of per-page ratios   {verdict}"
        );
    }
    let cpu = PerSide(Side::ALL.map(|side| median(&samples.cpu[side])));
    let sides: Vec<String> = Side::ALL.iter().map(|&side| format!("{:.0} ms {}", cpu[side], side.name())).collect();
    let ratios: Vec<String> = COMPARED
        .iter()
        .map(|&(side, baseline)| format!("{}/{} {:.2}×", side.name(), baseline.name(), cpu[side] / cpu[baseline]))
        .collect();
    println!("browser CPU per load (median): {}; {}", sides.join(", "), ratios.join(", "));
}

fn report_download(download: &Download) {
    let mib = |bytes: u64| bytes as f64 / (1u64 << 20) as f64;
    println!();
    println!(
        "a {DOWNLOAD_MIB} MiB download fetched whole by the page, {DOWNLOADS} times in each tab: median throughput"
    );
    let throughput = PerSide(Side::ALL.map(|side| {
        let done: Vec<f64> = download.throughput[side].iter().filter_map(|t| t.as_ref().ok().copied()).collect();
        (!done.is_empty()).then(|| median(&done))
    }));
    for side in Side::ALL {
        let failures: Vec<&String> = download.throughput[side].iter().filter_map(|t| t.as_ref().err()).collect();
        let median = throughput[side].map_or_else(|| "-".to_owned(), |t| format!("{t:.0} MiB/s"));
        print!("{:<6} {median}", side.name());
        if !failures.is_empty() {
            print!(" ({} of {DOWNLOADS} failed: {})", failures.len(), failures[0]);
        }
        println!();
    }
    for (side, baseline) in COMPARED {
        let (Some(numerator), Some(denominator)) = (throughput[side], throughput[baseline]) else { continue };
        let ratio = numerator / denominator;
        let verdict = match (side, baseline) {
            (Side::Trace, Side::Off) => {
                format!(
                    "   target ≥ {DOWNLOAD_TARGET:.2}×: {}",
                    if ratio >= DOWNLOAD_TARGET { "met" } else { "NOT met" }
                )
            }
            _ => String::new(),
        };
        println!("{}/{} {ratio:.2}×{verdict}", side.name(), baseline.name());
    }
    for (name, kept) in [("TRACE", &download.trace_kept), ("ArchiveWeb.page", &download.archiveweb_kept)] {
        let kept: Vec<String> = kept.iter().map(|&bytes| format!("{:.0}", mib(bytes))).collect();
        println!("bodies {name} kept, MiB: {}", if kept.is_empty() { "none".to_owned() } else { kept.join(", ") });
    }
    for (name, peaks) in &download.peaks {
        match peaks {
            Some((before, after)) => println!(
                "peak memory of {name}: {:.0} MiB before the downloads, {:.0} MiB after",
                mib(*before),
                mib(*after)
            ),
            None => println!("peak memory of {name}: not measured (its process was not found)"),
        }
    }
}
