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
//! Run: `cargo xtask dist && cargo bench -p trace-e2e --bench overhead` (`TRACE_BENCH_ROUNDS` sets the
//! number of counted rounds, 15 by default).

use std::collections::BTreeSet;
use std::path::Path;
use std::time::{Duration, Instant};

use anyhow::{Context, Result, ensure};
use chromiumoxide::cdp::browser_protocol::network::{EnableParams, SetCacheDisabledParams};
use trace_e2e::bench::cpu_time_of_tree;
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
    for (condition, samples) in conditions.iter().zip(&measured?) {
        report(condition, samples, rounds);
    }
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
) -> Result<Vec<Samples>> {
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

    popup.bring_to_front().await?;
    let counts = wait_for_text(&popup, "#counts", WAIT, |_| true).await?;
    eprintln!("the recorder says: {counts}");
    click(&popup, "#stop").await?;
    wait_for_text(&popup, "#status", WAIT, |t| t.starts_with("Host connected")).await?;
    let tabs = recorded_tabs(&browser.data_dir).await?;
    ensure!(tabs.len() == 1, "the bundle has events of tabs {tabs:?}: the baseline tab was recorded too");
    Ok(samples)
}

/// The tabs the finished bundle of the data directory has events of: the benchmark's task must have
/// recorded one tab only, or the comparison means nothing.
async fn recorded_tabs(data_dir: &Path) -> Result<BTreeSet<i64>> {
    let deadline = Instant::now() + WAIT;
    let bundle = loop {
        let captures = std::fs::read_dir(data_dir.join("captures")).context("the host stored nothing")?;
        if let Some(dir) = captures.flatten().map(|d| d.path()).find(|d| d.join("manifest.json").exists()) {
            break dir;
        }
        ensure!(Instant::now() < deadline, "the host did not finish a bundle in {}", data_dir.display());
        tokio::time::sleep(Duration::from_millis(100)).await;
    };
    let events = std::fs::read_to_string(bundle.join("events.jsonl"))?;
    let mut tabs = BTreeSet::new();
    for line in events.lines() {
        let event: serde_json::Value = serde_json::from_str(line)?;
        tabs.extend(event["tab_id"].as_i64());
    }
    Ok(tabs)
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
