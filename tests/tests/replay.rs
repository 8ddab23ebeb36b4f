//! End to end: the demonstration of [`trace_e2e::demo`] is recorded in Chromium with the extension and the
//! host, the demo shop is stopped, and a sentinel listens on its old port counting every connection. The
//! bundle is then replayed with `trace-replay`'s library in a fresh Chromium: the pages must show what was
//! recorded, the cache-busting API call and the login POST must be answered, both iframes and the new tab
//! must load, two replays must agree to the byte on a page that shows the time and a random number, and
//! the person's demonstration re-run by `trace-replay run --human` must pass every step, and the sentinel
//! must count nothing. Needs `cargo xtask dist`.

use std::time::{Duration, Instant};

use chromiumoxide::Page;
use chromiumoxide::cdp::browser_protocol::page::GetFrameTreeParams;
use trace_e2e::browser::{Build, click, type_into, wait_for_text};
use trace_e2e::demo;
use trace_e2e::sentinel::Sentinel;
use trace_e2e::site::{DEMO_PASSWORD, DEMO_USER, DemoSite};
use trace_replay::archive::ReplayArchive;
use trace_replay::serve::{Options, Replay};

const WAIT: Duration = Duration::from_secs(20);

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_recorded_demonstration_replays_offline_as_it_was() {
    let Some(build) = Build::for_tests("a_recorded_demonstration_replays_offline_as_it_was") else { return };
    let site = DemoSite::start(0).unwrap();
    let url = |path: &str| site.url(path);
    let data = tempfile::tempdir().unwrap();
    let demonstration = demo::record(&build, &site, data.path()).await.unwrap();
    let port = site.port();
    let (home_url, login_url, embed_url, clock_url) = (url("/"), url("/login"), url("/embed"), url("/clock"));
    site.stop();
    let sentinel = Sentinel::start(port);

    let options = Options { chromium: Some(build.chromium.clone()), ..Options::default() };
    let replay = Replay::launch(ReplayArchive::open(&demonstration.bundle).unwrap(), &options).await.unwrap();
    assert!(replay.cdp_endpoint().starts_with("ws://127.0.0.1:"), "{}", replay.cdp_endpoint());

    // The product list comes from `fetch('/api/products?_=' + Date.now())`: a URL never recorded as such.
    let page = replay.open(&home_url).await.unwrap();
    let products = wait_for_text(&page, "#products", WAIT, |t| t.contains("Blue Mug")).await.unwrap();
    assert!(!products.contains("Could not load"), "{products}");

    // The login form posts its CSRF token, the one the replayed login page carries, as recorded.
    page.goto(&login_url).await.unwrap();
    type_into(&page, "#username", DEMO_USER).await.unwrap();
    type_into(&page, "#password", DEMO_PASSWORD).await.unwrap();
    click(&page, "#login-submit").await.unwrap();
    wait_for_text(&page, "#signed-in-as", WAIT, |t| t.contains(DEMO_USER)).await.unwrap();

    // Both widgets: the same-site one is readable from here, the cross-site one only by its frame.
    page.goto(&embed_url).await.unwrap();
    let widget = wait_for(
        &page,
        "document.querySelector('#widget').contentDocument?.getElementById('widget-button')?.textContent",
    )
    .await;
    assert_eq!(widget, "Click me");
    let deadline = Instant::now() + WAIT;
    loop {
        let tree = page.execute(GetFrameTreeParams::default()).await.unwrap();
        let frames = tree.result.frame_tree.child_frames.unwrap_or_default();
        if frames.iter().any(|f| f.frame.url.contains("partner=1")) {
            break;
        }
        assert!(Instant::now() < deadline, "the cross-site widget never loaded");
        tokio::time::sleep(Duration::from_millis(100)).await;
    }

    // The help link opens a new tab, served like the first.
    page.goto(&home_url).await.unwrap();
    click(&page, "#help-link").await.unwrap();
    let help = new_tab_showing(&replay, "/help").await;
    wait_for_text(&help, "#help-text", WAIT, |t| t.contains("blue mug")).await.unwrap();

    let clock = replay.open(&clock_url).await.unwrap();
    let first_clock = clock_reading(&clock).await;
    let stats = replay.close().await.unwrap();
    assert!(stats.canonical >= 1, "the cache-busting API call was matched canonically: {stats}");
    assert!(stats.misses.is_empty(), "every request was answered from the bundle: {stats}");
    assert_eq!(stats.live_attempts, 0);

    // Determinism: a second replay of the bundle shows the clock page as the first did, its random numbers
    // and all, but for the clock's own reading. The replay's clock starts at the recording's start and runs
    // at real speed (a debounce's wait must pass), so it reads how long the replay had run when asked.
    let second_started = Instant::now();
    let replay = Replay::launch(ReplayArchive::open(&demonstration.bundle).unwrap(), &options).await.unwrap();
    let clock = replay.open(&clock_url).await.unwrap();
    let second_clock = clock_reading(&clock).await;
    let second_ran = second_started.elapsed().as_secs_f64() * 1000.0;
    replay.close().await.unwrap();
    let (first_now, first_random, first_page) = &first_clock;
    let (second_now, second_random, second_page) = &second_clock;
    assert_eq!(first_random, second_random, "two replays draw different random numbers");
    assert_eq!(
        first_page.replace(first_now, "{now}"),
        second_page.replace(second_now, "{now}"),
        "two replays disagree on the clock page"
    );
    let manifest: serde_json::Value =
        serde_json::from_slice(&std::fs::read(demonstration.bundle.join("manifest.json")).unwrap()).unwrap();
    let started = trace_manifest::time_fmt::millis_from_rfc3339(manifest["started_at"].as_str().unwrap()).unwrap();
    let now: f64 = second_now.parse().unwrap();
    assert!(
        now >= started && now <= started + second_ran,
        "the replayed clock starts at the recording: {now} vs {started}, {second_ran:.0} ms on"
    );

    // The person's demonstration, re-run step by step by the command a user runs, passes every step.
    let run = std::process::Command::new(build.trace_host.with_file_name("trace-replay"))
        .args(["run", "--human", "--json", "--headless", "--chromium"])
        .arg(&build.chromium)
        .arg(&demonstration.bundle)
        .output()
        .unwrap();
    let report: serde_json::Value =
        serde_json::from_slice(&run.stdout).unwrap_or_else(|e| panic!("{e}: {}", String::from_utf8_lossy(&run.stderr)));
    assert_eq!(report["steps_failed"], 0, "{report:#}");
    assert!(report["steps_total"].as_u64().unwrap() >= 20, "{report:#}");
    assert_eq!(report["steps_passed"], report["steps_total"]);
    assert_eq!(report["live_attempts"], 0);
    assert_eq!(report["misses"], serde_json::json!([]), "{report:#}");
    assert!(report["requests"]["exact"].as_u64().unwrap() > 50, "{}", report["requests"]);
    assert!(run.status.success(), "{}", String::from_utf8_lossy(&run.stderr));

    assert_eq!(sentinel.connections(), 0, "replay reached the site's port");
}

/// The clock page's time, random number, and whole document.
/// Issue #10: a person who resizes their window mid-task is replayed at each step's own viewport: the
/// screenshots after the resize are taken at the recorded size in the re-run too, so they compare (with a
/// tab kept at the first viewport they would differ entirely), and every step passes offline.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_window_resized_mid_task_is_replayed_at_each_steps_viewport() {
    let Some(build) = Build::for_tests("a_window_resized_mid_task_is_replayed_at_each_steps_viewport") else {
        return;
    };
    let site = DemoSite::start(0).unwrap();
    let data = tempfile::tempdir().unwrap();
    let bundle = demo::record_resized(&build, &site, data.path()).await.unwrap();
    site.stop();

    // The recording says so: its last screenshot is at the new size, its first is not.
    let mut recorded = trace_bundle::archive::Bundle::open(&bundle).unwrap();
    let viewports: Vec<(u32, u32)> = recorded
        .events()
        .unwrap()
        .into_iter()
        .filter_map(|record| match record.event.kind {
            trace_manifest::event::EventKind::Screenshot(shot) => shot.viewport.map(|v| (v.width, v.height)),
            _ => None,
        })
        .collect();
    assert_ne!(viewports.first(), Some(&demo::RESIZED), "{viewports:?}");
    assert_eq!(viewports.last(), Some(&demo::RESIZED), "{viewports:?}");

    let (report, faithful) = build.replay_human(&bundle).unwrap();
    let text = trace_replay::run::text(&report);
    assert!(faithful && report.steps_failed == 0, "{text}");
    let click = report.steps.iter().find(|step| step.name == "click").expect("the sign-in link's click");
    assert!(click.screenshot_difference.is_some_and(|difference| difference < 0.2), "{text}");
}

async fn clock_reading(page: &Page) -> (String, String, String) {
    let now = wait_for_text(page, "#now", WAIT, |t| !t.is_empty()).await.unwrap();
    let random = wait_for_text(page, "#random", WAIT, |t| !t.is_empty()).await.unwrap();
    (now, random, page.content().await.unwrap())
}

/// Evaluates `expression` until it yields a string.
async fn wait_for(page: &Page, expression: &str) -> String {
    let deadline = Instant::now() + WAIT;
    loop {
        let value = page.evaluate(expression).await.ok().and_then(|v| v.into_value::<String>().ok());
        if let Some(value) = value {
            return value;
        }
        assert!(Instant::now() < deadline, "{expression} never had a value");
        tokio::time::sleep(Duration::from_millis(100)).await;
    }
}

async fn new_tab_showing(replay: &Replay, path: &str) -> Page {
    let deadline = Instant::now() + WAIT;
    loop {
        for page in replay.browser().pages().await.unwrap() {
            if page.url().await.ok().flatten().is_some_and(|url| url.ends_with(path)) {
                return page;
            }
        }
        assert!(Instant::now() < deadline, "no tab showed {path}");
        tokio::time::sleep(Duration::from_millis(100)).await;
    }
}
