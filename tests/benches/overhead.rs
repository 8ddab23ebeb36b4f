//! Recording overhead benchmark: how much slower pages load in a tab the extension records than in a tab
//! it does not, in the same Chromium, on the demo shop.
//!
//! One headless Chromium runs the built extension with the real `trace-host`. A task is started from the
//! popup as a person does ([`trace_e2e::demo::record`] does the same), so the tab the extension opens is
//! recorded: `chrome.debugger` attached, every response's body read after its page has loaded, a screenshot
//! and a DOM snapshot at each load, everything streamed to the host. A second tab, opened through DevTools
//! before the task starts (so that no recorded tab is its opener), is not recorded: it is the baseline,
//! and the benchmark checks in the bundle that only one tab was recorded. The recorder disables the cache
//! in the tabs it records, so the baseline tab has its cache disabled too (`Network.setCacheDisabled`):
//! both tabs fetch everything, and the difference is the recorder's own cost, not the cache's.
//!
//! What is measured is a page load from navigation start to the end of the load event, as the page's own
//! Navigation Timing entry tells it (`loadEventEnd`), for pages of the shop that need no login. Each round
//! loads every page in both tabs, the baseline first in one round and the recorded tab first in the next:
//! these machines are shared and noisy, and interleaving spreads whatever else they do over both sides
//! alike, where a block of baseline loads then a block of recorded ones would compare two different
//! moments. Both tabs are brought to the front before their loads (hidden tabs load with a lower
//! priority), and the machine is left quiet for a moment between loads, so that the recorder's work after
//! a load event (its capture) does not fall on the next load, in either tab. Warm-up rounds come first and
//! are not counted.
//!
//! Three conditions, each compared on its own: the shop's pages as the demo serves them (a loopback server
//! answers in a millisecond, so the recorder's cost shows at its largest); the same pages from a second
//! demo server that holds every response back 40 ms, as a real network's round trip does; and a large page,
//! the gallery, whose 240 pictures are a request each.
//!
//! Printed: for each condition, per page and over all pages, the median load time without and with
//! recording and their ratio; over all pages both the ratio of the medians of all samples and the geometric
//! mean of the per-page ratios. Target: recording costs at most 10% (ratio ≤ 1.10). Then the CPU time all
//! the browser's processes (the host it started among them) used per load, from navigation start to the end
//! of the quiet second after the load, so that the recorder's work after the load event counts: medians
//! without and with recording, and their ratio.
//!
//! Last, a large download (300 MiB that do not compress, fetched whole by the page, three times in each
//! tab): its throughput without and with recording (target: at least 0.8×), how much of each body the
//! recording kept, and the peak resident memory of `trace-host` and of the extension's process (its service
//! worker) before and after the downloads.
//!
//! Run: `cargo xtask dist && cargo bench -p trace-e2e --bench overhead` (`TRACE_BENCH_ROUNDS` sets the
//! number of counted rounds, 15 by default).

use std::collections::BTreeSet;
use std::path::{Path, PathBuf};
use std::time::{Duration, Instant};

use anyhow::{Context, Result, ensure};
use chromiumoxide::Page;
use chromiumoxide::cdp::browser_protocol::network::{EnableParams, SetCacheDisabledParams};
use trace_e2e::bench::{cpu_time_of_tree, peak_memory_below};
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
/// Recording may slow a download this much at most (throughput recorded / not recorded).
const DOWNLOAD_TARGET: f64 = 0.8;
const DEFAULT_ROUNDS: usize = 15;
const WARM_UP_ROUNDS: usize = 2;
/// Recording may make page loads this much slower at most.
const TARGET_RATIO: f64 = 1.10;
/// Between two loads, so that each starts on a quiet machine.
const QUIET: Duration = Duration::from_millis(1000);
const WAIT: Duration = Duration::from_secs(20);

#[derive(Debug, Clone, Copy, PartialEq, Eq)]
enum Tab {
    Baseline,
    Recorded,
}

/// Pages loaded from one site, compared on their own.
struct Condition<'a> {
    name: &'static str,
    site: &'a DemoSite,
    pages: &'static [&'static str],
}

/// Load times in milliseconds, per page, without and with recording; and the CPU time all the browser's
/// processes used for each load and the quiet moment after it, in milliseconds.
struct Samples {
    off: Vec<Vec<f64>>,
    on: Vec<Vec<f64>>,
    cpu_off: Vec<f64>,
    cpu_on: Vec<f64>,
}

/// The large download: its throughput in MiB/s without and with recording, the peak resident memory of
/// the host and of the extension's process before and after it, and how much of it the recording kept.
struct Download {
    off: Vec<f64>,
    on: Vec<f64>,
    host_peak: (u64, u64),
    extension_peak: (u64, u64),
    recorded_bytes: Vec<u64>,
}

#[tokio::main(flavor = "multi_thread", worker_threads = 2)]
async fn main() -> Result<()> {
    let rounds = match std::env::var("TRACE_BENCH_ROUNDS") {
        Ok(value) => value.parse().with_context(|| format!("TRACE_BENCH_ROUNDS={value} is not a number"))?,
        Err(_) => DEFAULT_ROUNDS,
    };
    ensure!(rounds > 0, "TRACE_BENCH_ROUNDS must be at least 1");
    let build = Build::from_workspace()?;
    let site = DemoSite::start(0)?;
    let distant_site = DemoSite::start_with_latency(0, NETWORK_LATENCY)?;
    let conditions = [
        Condition { name: "demo shop", site: &site, pages: &PAGES },
        Condition { name: "demo shop, 40 ms added to every response", site: &distant_site, pages: &PAGES },
        Condition { name: "large page (240 pictures)", site: &site, pages: &LARGE_PAGE },
    ];
    let data = tempfile::tempdir()?;
    let browser = RecordingBrowser::launch(&build, data.path(), true).await?;
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

/// Starts a task, loads every condition's pages round after round in both tabs, and stops the task.
async fn measure(
    browser: &RecordingBrowser,
    site: &DemoSite,
    conditions: &[Condition<'_>],
    rounds: usize,
) -> Result<(Vec<Samples>, Download)> {
    let popup = browser.popup().await?;
    // Before the task starts: Chrome gives a tab opened through DevTools the active tab as its opener, and
    // the recorder follows tabs that a recorded tab opens.
    let baseline = browser.browser().new_page("about:blank").await.context("cannot open the baseline tab")?;
    baseline.execute(EnableParams::default()).await?;
    baseline.execute(SetCacheDisabledParams::new(true)).await?;
    popup.bring_to_front().await?;
    wait_for_text(&popup, "#status", WAIT, |t| t.contains("Host connected")).await?;
    type_into(&popup, "#description", "Benchmark: load the shop's pages").await?;
    type_into(&popup, "#website", &site.url("/")).await?;
    click(&popup, "#start").await?;
    wait_for_text(&popup, "#status", WAIT, |t| t.starts_with("Recording")).await?;
    let recorded = demo::recorded_tab(browser, site.url("").trim_end_matches('/')).await?;

    let mut samples: Vec<Samples> = conditions
        .iter()
        .map(|c| Samples {
            off: vec![Vec::new(); c.pages.len()],
            on: vec![Vec::new(); c.pages.len()],
            cpu_off: Vec::new(),
            cpu_on: Vec::new(),
        })
        .collect();
    let browser_process = browser.process_id().context("the browser's process is not known")?;
    for round in 0..WARM_UP_ROUNDS + rounds {
        let order =
            if round.is_multiple_of(2) { [Tab::Baseline, Tab::Recorded] } else { [Tab::Recorded, Tab::Baseline] };
        for (condition, samples) in conditions.iter().zip(&mut samples) {
            for (index, path) in condition.pages.iter().enumerate() {
                for tab in order {
                    let page = if tab == Tab::Baseline { &baseline } else { &recorded };
                    let url = condition.site.url(path);
                    let cpu_before = cpu_time_of_tree(browser_process)?;
                    let ms = load_event_end(page, &url, WAIT).await.with_context(|| format!("loading {url}"))?;
                    // The recorder's work after the load (bodies, captures) counts against the load.
                    tokio::time::sleep(QUIET).await;
                    let cpu_ms = (cpu_time_of_tree(browser_process)? - cpu_before).as_secs_f64() * 1000.0;
                    if round >= WARM_UP_ROUNDS {
                        let (side, cpu) = match tab {
                            Tab::Baseline => (&mut samples.off, &mut samples.cpu_off),
                            Tab::Recorded => (&mut samples.on, &mut samples.cpu_on),
                        };
                        side[index].push(ms);
                        cpu.push(cpu_ms);
                    }
                }
            }
        }
        match round.checked_sub(WARM_UP_ROUNDS) {
            None => eprintln!("warm-up round {}/{WARM_UP_ROUNDS} done", round + 1),
            Some(counted) => eprintln!("round {}/{rounds} done", counted + 1),
        }
    }

    let memory = || -> Result<(u64, u64)> {
        let peak = |marker| peak_memory_below(browser_process, marker).map(|peaks| peaks.first().copied());
        Ok((peak("trace-host")?.unwrap_or(0), peak("--extension-process")?.unwrap_or(0)))
    };
    let before = memory()?;
    let (mut off, mut on) = (Vec::new(), Vec::new());
    let download_url = site.url(&format!("/download?mb={DOWNLOAD_MIB}"));
    for round in 0..DOWNLOADS {
        let order =
            if round.is_multiple_of(2) { [Tab::Baseline, Tab::Recorded] } else { [Tab::Recorded, Tab::Baseline] };
        for tab in order {
            let page = if tab == Tab::Baseline { &baseline } else { &recorded };
            let seconds = fetch_whole(page, &download_url).await?;
            let side = if tab == Tab::Baseline { &mut off } else { &mut on };
            side.push(DOWNLOAD_MIB as f64 / seconds);
            tokio::time::sleep(QUIET).await;
        }
        eprintln!("download round {}/{DOWNLOADS} done", round + 1);
    }

    popup.bring_to_front().await?;
    let counts = wait_for_text(&popup, "#counts", WAIT, |_| true).await?;
    eprintln!("the recorder says: {counts}");
    click(&popup, "#stop").await?;
    // The host may still be writing the last download's body.
    wait_for_text(&popup, "#status", Duration::from_secs(300), |t| t.starts_with("Host connected")).await?;
    let after = memory()?;
    let bundle = finished_bundle(&browser.data_dir).await?;
    let tabs = recorded_tabs(&bundle)?;
    ensure!(tabs.len() == 1, "the bundle has events of tabs {tabs:?}: the baseline tab was recorded too");
    let download = Download {
        off,
        on,
        host_peak: (before.0, after.0),
        extension_peak: (before.1, after.1),
        recorded_bytes: recorded_body_sizes(&bundle, "/download?")?,
    };
    Ok((samples, download))
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
        "medians of {rounds} rounds (+{WARM_UP_ROUNDS} warm-up); off: the baseline tab, not recorded; on: the recorded tab"
    );
    println!("{:<16} {:>10} {:>10} {:>8}", "page", "off (ms)", "on (ms)", "on/off");
    let mut ratios = Vec::new();
    for (index, path) in condition.pages.iter().enumerate() {
        let (off, on) = (median(&samples.off[index]), median(&samples.on[index]));
        ratios.push(on / off);
        println!("{path:<16} {off:>10.1} {on:>10.1} {:>7.2}×", on / off);
    }
    let all_off: Vec<f64> = samples.off.concat();
    let all_on: Vec<f64> = samples.on.concat();
    let (off, on) = (median(&all_off), median(&all_on));
    let of_medians = on / off;
    let geometric_mean = (ratios.iter().map(|r| r.ln()).sum::<f64>() / ratios.len() as f64).exp();
    println!("{:<16} {off:>10.1} {on:>10.1} {of_medians:>7.2}×  ratio of medians, all samples", "all pages");
    println!("{:<16} {:>10} {:>10} {geometric_mean:>7.2}×  geometric mean of the per-page ratios", "", "", "");
    for (name, ratio) in [("ratio of medians", of_medians), ("geometric mean of ratios", geometric_mean)] {
        let verdict = if ratio <= TARGET_RATIO { "met" } else { "NOT met" };
        println!("{name:<25} {ratio:.2}×   target ≤ {TARGET_RATIO:.2}×: {verdict}");
    }
    let (cpu_off, cpu_on) = (median(&samples.cpu_off), median(&samples.cpu_on));
    println!("{:<25} {cpu_off:.0} ms off, {cpu_on:.0} ms on: {:.2}×", "browser CPU per load", cpu_on / cpu_off);
}

fn report_download(download: &Download) {
    let mib = |bytes: u64| bytes as f64 / (1u64 << 20) as f64;
    println!();
    println!(
        "a {DOWNLOAD_MIB} MiB download fetched whole by the page, {DOWNLOADS} times in each tab: median throughput"
    );
    let (off, on) = (median(&download.off), median(&download.on));
    let verdict = if on / off >= DOWNLOAD_TARGET { "met" } else { "NOT met" };
    println!("{off:.0} MiB/s off, {on:.0} MiB/s on: {:.2}×   target ≥ {DOWNLOAD_TARGET:.2}×: {verdict}", on / off);
    let kept: Vec<String> = download.recorded_bytes.iter().map(|&bytes| format!("{:.0}", mib(bytes))).collect();
    println!("bodies the recording kept, MiB: {}", kept.join(", "));
    for (name, (before, after)) in
        [("trace-host", download.host_peak), ("the extension's process", download.extension_peak)]
    {
        println!("peak memory of {name}: {:.0} MiB before the downloads, {:.0} MiB after", mib(before), mib(after));
    }
}
