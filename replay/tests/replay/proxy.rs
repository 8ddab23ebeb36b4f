//! `trace-replay serve --proxy-port`: a browser that replay does not launch, its proxy set to replay's,
//! gets an HTTPS site of a bundle offline. Chromium, started with nothing but the proxy and the
//! fingerprint replay prints, shows the recorded page with its clock at the recording's time, the
//! logged-in answer the recording's start cookies choose (the browser never had them), and a request to
//! a host the recording never reached refused and counted; the session holds what crossed. The binary,
//! driven as a user runs it, prints where it listens and what to trust, refuses what it must, and writes
//! the session when stopped.

use std::io::{BufRead, BufReader};
use std::process::{Command, Stdio};
use std::time::Duration;

use serde_json::{Value, json};
use trace_replay::archive::ReplayArchive;
use trace_replay::chromium::{self, Launch};
use trace_replay::proxy::{Proxy, ProxyOptions};
use trace_replay::session::SessionRecorder;

use crate::common::{STARTED_AT, har, har_entry, stored_body, write_bundle};

const SHOP: &str = "https://shop.test/";
const SHOP_HTML: &str = r#"<!doctype html>
<html><head><title>Shop</title></head><body>
<p id="clock"></p><p id="cookies"></p><p id="me">asking</p><p id="tracker">asking</p>
<script>
  document.getElementById("clock").textContent = String(Date.now());
  document.getElementById("cookies").textContent = document.cookie;
  fetch("/api/me").then((r) => r.json()).then(
    (me) => { document.getElementById("me").textContent = me.user; },
    () => { document.getElementById("me").textContent = "failed"; });
  fetch("https://tracker.elsewhere.test/pixel").then(
    () => { document.getElementById("tracker").textContent = "reached"; },
    () => { document.getElementById("tracker").textContent = "refused"; });
</script></body></html>"#;

/// A bundle of the shop over HTTPS, where `/api/me` was recorded twice: logged out, then with the session
/// cookie the recording started with.
fn shop_bundle(dir: &std::path::Path) {
    let with_cookie = |mut entry: Value, cookie: &str| {
        entry["request"]["headers"] = json!([{ "name": "Cookie", "value": cookie }]);
        entry
    };
    let entries = vec![
        har_entry(SHOP, stored_body(dir, SHOP_HTML.as_bytes(), "text/html")),
        har_entry("https://shop.test/api/me", stored_body(dir, br#"{"user":"nobody"}"#, "application/json")),
        with_cookie(
            har_entry("https://shop.test/api/me", stored_body(dir, br#"{"user":"ada"}"#, "application/json")),
            "session=abc123; theme=dark",
        ),
    ];
    let storage = json!({ "snapshots": [{
        "time": STARTED_AT,
        "phase": "start",
        "cookies": [
            { "name": "session", "value": "abc123", "domain": "shop.test", "path": "/", "http_only": true, "secure": true },
            { "name": "theme", "value": "dark", "domain": "shop.test", "path": "/" },
        ],
    }]});
    write_bundle(dir, "proxied", &har(entries), &storage);
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_browser_of_its_own_gets_an_https_site_offline_through_the_proxy() {
    let scratch = tempfile::tempdir().unwrap();
    let bundle = scratch.path().join("bundle");
    shop_bundle(&bundle);
    let session = SessionRecorder::create(&scratch.path().join("session")).unwrap();
    let options = ProxyOptions { determinism: true, ..ProxyOptions::default() };
    let replay_started = std::time::Instant::now();
    let proxy = Proxy::start(ReplayArchive::open(&bundle).unwrap(), &options, Some(session.clone())).await.unwrap();

    // The browser knows only the proxy and which certificate key to take: the one an agent would launch.
    let launch = Launch {
        args: vec![
            ("proxy-server".to_owned(), Some(proxy.url())),
            ("ignore-certificate-errors-spki-list".to_owned(), Some(proxy.authority().spki_fingerprint())),
        ],
        headless: true,
        ..Launch::default()
    };
    // Every part is held to the end: the process is killed when its handle goes.
    let chromium::Chromium { browser, handler: _handler, profile: _profile, process: _process, .. } =
        chromium::launch(&launch).await.unwrap();
    let page = browser.new_page(SHOP).await.unwrap();
    let text = |id: &'static str| {
        let page = page.clone();
        async move {
            let script = format!("document.getElementById('{id}')?.textContent ?? ''");
            page.evaluate(script).await.unwrap().into_value::<String>().unwrap()
        }
    };
    let deadline = std::time::Instant::now() + Duration::from_secs(20);
    while (text("me").await == "asking" || text("tracker").await == "asking") && std::time::Instant::now() < deadline {
        tokio::time::sleep(Duration::from_millis(100)).await;
    }

    assert_eq!(text("me").await, "ada", "the start cookies chose the logged-in answer");
    assert_eq!(
        text("cookies").await,
        "theme=dark",
        "the readable start cookie reached the page, the other stayed httpOnly"
    );
    assert_eq!(text("tracker").await, "refused");
    let clock: f64 = text("clock").await.parse().unwrap();
    // The replay's clock starts at the recording's start and runs at real speed: the page read it no
    // later than now.
    let started = trace_manifest::time_fmt::millis_from_rfc3339(STARTED_AT).unwrap();
    let elapsed = replay_started.elapsed().as_secs_f64() * 1000.0;
    assert!(
        clock >= started && clock <= started + elapsed,
        "the page's clock starts at the recording's: {clock} vs {started}, {elapsed:.0} ms on"
    );
    drop(browser);

    let stats = proxy.close();
    assert_eq!(stats.live_attempts, 1, "the tracker was a live attempt: {stats}");
    assert!(stats.exact >= 2, "{stats}");
    let task = trace_replay::eval::Reference::read(&bundle, Default::default()).unwrap().task;
    let events = session.finish(task, None).unwrap();
    let urls: Vec<String> = events
        .iter()
        .filter_map(|record| match &record.event.kind {
            trace_manifest::event::EventKind::Request(request) => Some(request.url.clone()),
            _ => None,
        })
        .collect();
    assert!(urls.contains(&SHOP.to_owned()) && urls.contains(&"https://shop.test/api/me".to_owned()), "{urls:?}");
}

#[test]
fn serve_with_a_proxy_port_says_where_it_listens_and_writes_the_session_when_stopped() {
    let scratch = tempfile::tempdir().unwrap();
    let bundle = scratch.path().join("bundle");
    shop_bundle(&bundle);
    let ca_dir = scratch.path().join("ca");
    let episode = scratch.path().join("episode");
    let mut serve = Command::new(env!("CARGO_BIN_EXE_trace-replay"))
        .arg("serve")
        .arg(&bundle)
        .args(["--proxy-port", "0", "--ca-dir"])
        .arg(&ca_dir)
        .arg("--episode")
        .arg(&episode)
        .stdout(Stdio::piped())
        .spawn()
        .unwrap();
    let mut lines = BufReader::new(serve.stdout.take().unwrap()).lines();
    let mut said = Vec::new();
    while !said.iter().any(|line: &String| line.starts_with("press Ctrl+C")) {
        said.push(lines.next().expect("serve printed its addresses").unwrap());
    }
    let proxy = said.iter().find_map(|line| line.strip_prefix("proxy: ")).expect("the proxy's URL").to_owned();
    assert!(proxy.starts_with("http://127.0.0.1:"), "{said:?}");
    assert!(ca_dir.join("trace-replay-ca.pem").is_file() && ca_dir.join("trace-replay-ca.key.pem").is_file());
    use std::os::unix::fs::PermissionsExt as _;
    let key_mode = std::fs::metadata(ca_dir.join("trace-replay-ca.key.pem")).unwrap().permissions().mode();
    assert_eq!(key_mode & 0o077, 0, "the authority's key is its owner's alone");

    let runtime = tokio::runtime::Runtime::new().unwrap();
    runtime.block_on(async {
        let client = reqwest::Client::builder()
            .proxy(reqwest::Proxy::all(&proxy).unwrap())
            .tls_danger_accept_invalid_certs(true)
            .build()
            .unwrap();
        let page = client.get(SHOP).header("Accept", "text/html").send().await.unwrap();
        assert_eq!(page.status(), 200);
        let html = page.text().await.unwrap();
        assert!(html.starts_with("<!doctype html><script>"), "the page scripts lead the document: {}", &html[..80]);
        assert!(html.contains(r#"<p id="me">asking</p>"#));
        let api = client.get("https://shop.test/api/me").send().await.unwrap().text().await.unwrap();
        assert!(!api.contains("<script>"), "a script's request gets the recorded body as it was: {api}");
        // A page reaching a host the recording never did is a live attempt; the browser's own service
        // (no page's headers) is refused without being counted against the agent.
        let from_page = client.get("https://elsewhere.test/").header("Referer", SHOP).send().await;
        assert!(from_page.is_err(), "nothing recorded there");
        assert!(client.post("https://updates.browser.test/check").body("{}").send().await.is_err());
        assert!(client.get("https://shop.test/never-recorded").send().await.is_err(), "a miss fails");
        assert_eq!(
            reqwest::get(format!("{proxy}/")).await.unwrap().status(),
            400,
            "asked as a server, it says what it is"
        );
    });

    rustix::process::kill_process(
        rustix::process::Pid::from_raw(serve.id() as i32).unwrap(),
        rustix::process::Signal::TERM,
    )
    .unwrap();
    let rest: Vec<String> = lines.map(Result::unwrap).collect();
    assert!(serve.wait().unwrap().success());
    let summary = rest.join("\n");
    assert!(summary.contains("missed: 2; live: 1"), "{summary}");
    let events = std::fs::read_to_string(episode.join("session/events.jsonl")).unwrap();
    assert!(events.contains("https://shop.test/api/me") && events.contains("never-recorded"), "{events}");
    assert!(!events.contains("updates.browser.test"), "the browser's own request is no part of the session");

    // Scored as `eval` scores an episode, with what the proxy served.
    let score = Command::new(env!("CARGO_BIN_EXE_trace-replay"))
        .arg("score")
        .arg(&bundle)
        .arg("--episode")
        .arg(&episode)
        .arg("--json")
        .output()
        .unwrap();
    assert!(score.status.success(), "{}", String::from_utf8_lossy(&score.stderr));
    let result: Value = serde_json::from_slice(&score.stdout).unwrap();
    assert_eq!(result["ended"]["kind"], "proxied", "{result:#}");
    assert_eq!(result["live_attempts"], 1, "{result:#}");
    assert_eq!(result["requests"]["missed"], 2, "{result:#}");
    let written: Value = serde_json::from_slice(&std::fs::read(episode.join("result.json")).unwrap()).unwrap();
    assert_eq!(written, result);

    // The authority is kept: a second run takes the same one, which a browser was told to trust once.
    let certificate = std::fs::read(ca_dir.join("trace-replay-ca.pem")).unwrap();
    let again = trace_replay::proxy::Authority::load_or_create(Some(&ca_dir)).unwrap();
    assert_eq!(std::fs::read(again.certificate_path()).unwrap(), certificate);
}
