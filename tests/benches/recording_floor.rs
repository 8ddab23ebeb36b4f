//! What each way of recording costs the browser itself, below any recorder: page loads in tabs that the
//! benchmark records over DevTools with only the protocol's own work, each design in a tab of its own in one
//! Chromium, interleaved as the overhead benchmark does (`benches/overhead.rs`). It answers whether a
//! recorder built on `Fetch` alone could load pages faster than one built on `Network` (issue #48): no
//! recorder can cost less than the domains it is built on.
//!
//! The sides:
//! - **off**: nothing enabled (chromiumoxide's own `Network.enable` is turned off again).
//! - **Network**: what TRACE's recorder enables for its events and bodies: `Network.enable` with its
//!   buffers, durable messages, and every finished response's body read after the page's load event
//!   (`Network.getResponseBody`), as the recorder reads them.
//! - **TRACE's set**: the same and `Fetch` with the recorder's patterns (beacons and fetches at their start;
//!   documents, fetches, XHR, media, event streams and others at their headers), each paused request
//!   continued at once.
//! - **Fetch only**: no `Network`; every response paused at its headers, its body taken there
//!   (`Fetch.getResponseBody`) and the response continued. The request, its headers and body, and the
//!   response's status and headers come in the pause itself, so this is the whole cost of such a recorder's
//!   reading, without WebSocket frames, timings or the requests a page sends as it unloads (which `Fetch`
//!   sees only as requests).
//!
//! The site marks every response `no-store`, so that every tab fetches everything without a domain enabled
//! to turn the cache off, and each load checks in the page's Resource Timing that nothing of the site's
//! own origin came from a cache (another origin's entries hide their sizes). The bodies each recording
//! side reads are counted per load, and must be at least as many as the responses the load fetched. As in
//! replay, every frame runs in its tab's process, so a cross-site iframe's requests are the tab's. Printed: per condition,
//! the median load (navigation start to the end of the load event) per side and its ratio to off, over all
//! pages the geometric mean of the per-page ratios; and the CPU of all the browser's processes per load
//! and the quiet second after it.
//!
//! Run: `cargo bench -p trace-e2e --bench recording_floor` (`TRACE_BENCH_ROUNDS` sets
//! the counted rounds, 15 by default).

use std::sync::Arc;
use std::sync::atomic::{AtomicUsize, Ordering};
use std::time::{Duration, Instant};

use anyhow::{Context, Result, bail, ensure};
use chromiumoxide::Page;
use chromiumoxide::cdp::browser_protocol::fetch::{self, ContinueRequestParams, EventRequestPaused, RequestPattern};
use chromiumoxide::cdp::browser_protocol::network::{self, EventLoadingFinished, RequestId, ResourceType};
use chromiumoxide::cdp::browser_protocol::page::NavigateParams;
use futures::StreamExt;
use trace_e2e::bench::{self, PerSide, cpu_time_of_tree, geometric_mean, rotated};
use trace_e2e::median;
use trace_e2e::site::{Caching, DemoSite};
use trace_replay::chromium::{self, Launch};

/// The shop's pages that need no login, and the gallery, whose 240 pictures are a request each.
const PAGES: [&str; 6] = ["/", "/login", "/search?q=mug", "/embed", "/strict", "/help"];
const LARGE_PAGE: [&str; 1] = ["/gallery"];
const NETWORK_LATENCY: Duration = Duration::from_millis(40);
const DEFAULT_ROUNDS: usize = 15;
const WARM_UP_ROUNDS: usize = 2;
const QUIET: Duration = Duration::from_millis(1000);
const WAIT: Duration = Duration::from_secs(20);
/// TRACE's recorder's `Network` buffers (`extension/src/recording/body_reading.rs`).
const BODY_BUFFER_BYTES: i64 = 256 << 20;
const TAKE_WHOLE_LIMIT: i64 = 16 << 20;

/// A tab and what records it (the module's list says what each enables).
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
enum Side {
    Off,
    Network,
    TraceSet,
    FetchOnly,
}

impl Side {
    const ALL: [Side; 4] = [Side::Off, Side::Network, Side::TraceSet, Side::FetchOnly];

    fn name(self) -> &'static str {
        match self {
            Side::Off => "off",
            Side::Network => "Network",
            Side::TraceSet => "TRACE's set",
            Side::FetchOnly => "Fetch only",
        }
    }
}

impl From<Side> for usize {
    fn from(side: Side) -> usize {
        side as usize
    }
}

/// A tab and what records it: the bodies it read, and for the `Network` sides the finished responses whose
/// bodies are still to read once the page has loaded.
struct Tab {
    page: Page,
    bodies_read: Arc<AtomicUsize>,
    finished: Arc<std::sync::Mutex<Vec<RequestId>>>,
}

/// Pages loaded from one site, compared on their own.
struct Condition<'a> {
    name: &'static str,
    site: &'a DemoSite,
    pages: &'static [&'static str],
}

#[tokio::main(flavor = "multi_thread", worker_threads = 2)]
async fn main() -> Result<()> {
    let rounds = bench::rounds(DEFAULT_ROUNDS)?;
    let site = DemoSite::start_with(0, Duration::ZERO, Caching::NoStore)?;
    let distant_site = DemoSite::start_with(0, NETWORK_LATENCY, Caching::NoStore)?;
    let conditions = [
        Condition { name: "demo shop", site: &site, pages: &PAGES },
        Condition { name: "demo shop, 40 ms added to every response", site: &distant_site, pages: &PAGES },
        Condition { name: "large page (240 pictures)", site: &site, pages: &LARGE_PAGE },
    ];
    // Every frame in its tab's process, as in replay: a cross-site iframe (the shop's `/embed`) is then seen
    // by each tab's domains, as TRACE's recorder sees it by attaching to the frame's own process.
    let launch = Launch {
        headless: true,
        args: vec![("disable-site-isolation-trials".to_owned(), None)],
        disabled_features: vec!["IsolateOrigins".to_owned(), "site-per-process".to_owned()],
        ..Launch::default()
    };
    let chromium = chromium::launch(&launch).await?;
    let measured = measure(&chromium, &conditions, rounds).await;
    chromium.close().await?;
    for (condition, (ms, cpu)) in conditions.iter().zip(measured?) {
        report(condition, &ms, &cpu);
    }
    Ok(())
}

type LoadTimes = PerSide<Vec<Vec<f64>>, 4>;
type CpuTimes = PerSide<Vec<f64>, 4>;

/// Loads every condition's pages round after round in the four tabs, each going first in turn; per
/// condition, the load times per side and page and the browser's CPU per load. Fails when a recording side
/// read fewer bodies in a load than the load fetched.
async fn measure(
    chromium: &chromium::Chromium,
    conditions: &[Condition<'_>],
    rounds: usize,
) -> Result<Vec<(LoadTimes, CpuTimes)>> {
    let mut tabs = Vec::new();
    for side in Side::ALL {
        tabs.push(open_tab(chromium, side).await?);
    }
    let browser_process = chromium.process.id();
    let mut samples: Vec<(LoadTimes, CpuTimes)> = conditions
        .iter()
        .map(|c| (PerSide(Side::ALL.map(|_| vec![Vec::new(); c.pages.len()])), PerSide::default()))
        .collect();
    for round in 0..WARM_UP_ROUNDS + rounds {
        for (condition, (ms, cpu)) in conditions.iter().zip(&mut samples) {
            for (index, path) in condition.pages.iter().enumerate() {
                for side in rotated(Side::ALL, round) {
                    let tab = &tabs[usize::from(side)];
                    let url = condition.site.url(path);
                    let cpu_before = cpu_time_of_tree(browser_process)?;
                    let read_before = tab.bodies_read.load(Ordering::SeqCst);
                    let (load_ms, fetched) =
                        load(&tab.page, &url).await.with_context(|| format!("loading {url} ({})", side.name()))?;
                    read_finished_bodies(tab).await;
                    tokio::time::sleep(QUIET).await;
                    // What finished during the quiet moment is this load's too.
                    read_finished_bodies(tab).await;
                    // A body left unread would make a side cheap.
                    let read = tab.bodies_read.load(Ordering::SeqCst) - read_before;
                    ensure!(
                        side == Side::Off || read >= fetched,
                        "{url} ({}): {read} bodies read of the {fetched} responses the load fetched",
                        side.name()
                    );
                    let cpu_ms = (cpu_time_of_tree(browser_process)? - cpu_before).as_secs_f64() * 1000.0;
                    if round >= WARM_UP_ROUNDS {
                        ms[side][index].push(load_ms);
                        cpu[side].push(cpu_ms);
                    }
                }
            }
        }
        eprintln!("round {}/{} done", round + 1, WARM_UP_ROUNDS + rounds);
    }
    Ok(samples)
}

/// A tab recorded as `side` says.
async fn open_tab(chromium: &chromium::Chromium, side: Side) -> Result<Tab> {
    let page = chromium.browser.new_page("about:blank").await.context("cannot open a tab")?;
    let tab = Tab {
        page: page.clone(),
        bodies_read: Arc::new(AtomicUsize::new(0)),
        finished: Arc::new(std::sync::Mutex::new(Vec::new())),
    };
    // chromiumoxide enables `Network` in every page it attaches to.
    page.execute(network::DisableParams::default()).await?;
    if matches!(side, Side::Network | Side::TraceSet) {
        let enable = network::EnableParams::builder()
            .max_post_data_size(1 << 20)
            .max_total_buffer_size(BODY_BUFFER_BYTES)
            .max_resource_buffer_size(TAKE_WHOLE_LIMIT)
            .build();
        page.execute(enable).await?;
        page.execute(network::ConfigureDurableMessagesParams {
            max_total_buffer_size: Some(BODY_BUFFER_BYTES),
            max_resource_buffer_size: Some(TAKE_WHOLE_LIMIT),
        })
        .await?;
        let mut finished = page.event_listener::<EventLoadingFinished>().await?;
        let list = tab.finished.clone();
        tokio::spawn(async move {
            while let Some(event) = finished.next().await {
                list.lock().unwrap().push(event.request_id.clone());
            }
        });
    }
    let patterns = match side {
        Side::Off | Side::Network => return Ok(tab),
        Side::TraceSet => {
            let at = |stage: fetch::RequestStage, types: &[ResourceType]| -> Vec<RequestPattern> {
                types
                    .iter()
                    .map(|kind| {
                        RequestPattern::builder()
                            .url_pattern("*")
                            .resource_type(kind.clone())
                            .request_stage(stage.clone())
                            .build()
                    })
                    .collect()
            };
            let mut patterns = at(fetch::RequestStage::Request, &[ResourceType::Ping, ResourceType::Fetch]);
            patterns.extend(at(
                fetch::RequestStage::Response,
                &[
                    ResourceType::Document,
                    ResourceType::Fetch,
                    ResourceType::Xhr,
                    ResourceType::Media,
                    ResourceType::EventSource,
                    ResourceType::Other,
                ],
            ));
            patterns
        }
        Side::FetchOnly => {
            vec![RequestPattern::builder().url_pattern("*").request_stage(fetch::RequestStage::Response).build()]
        }
    };
    let mut paused = page.event_listener::<EventRequestPaused>().await?;
    page.execute(fetch::EnableParams::builder().patterns(patterns).build()).await?;
    let takes_bodies = side == Side::FetchOnly;
    let (read, page_for_pauses) = (tab.bodies_read.clone(), page.clone());
    tokio::spawn(async move {
        while let Some(event) = paused.next().await {
            let (page, read) = (page_for_pauses.clone(), read.clone());
            tokio::spawn(async move {
                // A pause at the response has its status; a redirect's has no body to take.
                let has_body = event.response_status_code.is_some_and(|status| !(300..400).contains(&status));
                if takes_bodies
                    && has_body
                    && page.execute(fetch::GetResponseBodyParams::new(event.request_id.clone())).await.is_ok()
                {
                    read.fetch_add(1, Ordering::SeqCst);
                }
                let _ = page.execute(ContinueRequestParams::new(event.request_id.clone())).await;
            });
        }
    });
    Ok(tab)
}

/// Reads the bodies of the responses that finished in `tab` (none for the sides that take them paused).
async fn read_finished_bodies(tab: &Tab) {
    let finished = std::mem::take(&mut *tab.finished.lock().unwrap());
    for request_id in finished {
        if tab.page.execute(network::GetResponseBodyParams::new(request_id)).await.is_ok() {
            tab.bodies_read.fetch_add(1, Ordering::SeqCst);
        }
    }
}

/// Loads `url` in `page`, brought to the front, by `Page.navigate` (chromiumoxide's `goto` waits on
/// `Network` events, which some sides turn off): the time from navigation start to the end of the load
/// event, and how many responses the load fetched (the document and its resources), none from a cache.
async fn load(page: &Page, url: &str) -> Result<(f64, usize)> {
    page.bring_to_front().await?;
    page.execute(NavigateParams::new(url)).await?;
    let expression = format!(
        "(() => {{ const entry = performance.getEntriesByType('navigation')[0]; \
         if (!entry || entry.name !== {url} || entry.loadEventEnd === 0) return null; \
         const resources = performance.getEntriesByType('resource'); \
         const cached = resources.filter(r => new URL(r.name).origin === location.origin && r.transferSize === 0); \
         return [entry.loadEventEnd, resources.length, cached.length]; }})()",
        url = serde_json::to_string(url)?
    );
    let deadline = Instant::now() + WAIT;
    while Instant::now() < deadline {
        // Just after the navigation the page may still be the one before, or have no context to evaluate in.
        let loaded: Option<Option<(f64, usize, usize)>> =
            page.evaluate(expression.as_str()).await.ok().and_then(|value| value.into_value().ok());
        if let Some(Some((load_ms, resources, cached))) = loaded {
            ensure!(cached == 0, "{cached} of {url}'s {resources} resources came from a cache");
            return Ok((load_ms, resources + 1));
        }
        tokio::time::sleep(Duration::from_millis(10)).await;
    }
    bail!("{url} did not finish loading in {WAIT:?}")
}

/// Prints a condition's table: the median load per page and side with its ratio to off, their geometric
/// means, and the median CPU per load.
fn report(condition: &Condition<'_>, ms: &LoadTimes, cpu: &CpuTimes) {
    println!("\n{}: median page load in ms (× off)", condition.name);
    let header: Vec<String> = Side::ALL.iter().map(|side| format!("{:>18}", side.name())).collect();
    println!("{:<16}{}", "page", header.join(""));
    let mut ratios = PerSide::<Vec<f64>, 4>::default();
    for (index, path) in condition.pages.iter().enumerate() {
        let off = median(&ms[Side::Off][index]);
        let cells: Vec<String> = Side::ALL
            .iter()
            .map(|&side| {
                let value = median(&ms[side][index]);
                ratios[side].push(value / off);
                format!("{:>18}", format!("{value:.1} ({:.2}×)", value / off))
            })
            .collect();
        println!("{path:<16}{}", cells.join(""));
    }
    let means: Vec<String> =
        Side::ALL.iter().map(|&side| format!("{:>18}", format!("{:.2}×", geometric_mean(&ratios[side])))).collect();
    println!("{:<16}{}", "geometric mean", means.join(""));
    let off_cpu = median(&cpu[Side::Off]);
    let cpu_cells: Vec<String> = Side::ALL
        .iter()
        .map(|&side| {
            let value = median(&cpu[side]);
            format!("{:>18}", format!("{value:.0} ({:.2}×)", value / off_cpu))
        })
        .collect();
    println!("{:<16}{}", "CPU ms a load", cpu_cells.join(""));
}
