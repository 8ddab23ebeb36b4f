//! End to end, issue #33: an agent's harness that launches its own browser plays a recorded site through
//! `trace-replay serve --proxy-port`. The demonstration of [`trace_e2e::demo`] is recorded with the
//! extension and the host, the shop is stopped and a sentinel takes its port; then Playwright launches
//! Debian's Chromium itself, its `proxy` set to replay's, and logs in, puts the mug in the cart and
//! searches, offline. Every page shows what it showed the person, replay counts no live attempt, and the
//! sentinel sees no connection. Needs `cargo xtask dist` (and npm, for `playwright-core`).

use std::io::{BufRead, BufReader};
use std::path::Path;
use std::process::{Child, Command, Stdio};

use serde_json::{Value, json};
use trace_e2e::browser::Build;
use trace_e2e::demo;
use trace_e2e::playwright;
use trace_e2e::sentinel::Sentinel;
use trace_e2e::site::{DEMO_PASSWORD, DEMO_USER, DemoSite};

/// `trace-replay serve BUNDLE --proxy-port 0`, and the proxy URL it printed.
fn serve_proxy(build: &Build, bundle: &Path) -> (Child, String, std::io::Lines<BufReader<std::process::ChildStdout>>) {
    let mut serve = Command::new(&build.trace_replay)
        .arg("serve")
        .arg(bundle)
        .args(["--proxy-port", "0"])
        .stdout(Stdio::piped())
        .spawn()
        .unwrap();
    let mut lines = BufReader::new(serve.stdout.take().unwrap()).lines();
    let mut proxy = None;
    for line in lines.by_ref() {
        let line = line.unwrap();
        if let Some(url) = line.strip_prefix("proxy: ") {
            proxy = Some(url.to_owned());
        }
        if line.starts_with("press Ctrl+C") {
            break;
        }
    }
    (serve, proxy.expect("serve printed its proxy's URL"), lines)
}

/// Runs `tests/proxy_browser.mjs` with `steps` through `proxy`; its one line of JSON.
fn play(build: &Build, proxy: &str, steps: Value) -> Value {
    let target = Path::new(env!("CARGO_MANIFEST_DIR")).join("../target");
    let node_modules = playwright::install(&target.join("bench-node")).unwrap();
    let config = json!({
        "nodeModules": node_modules,
        "chromium": build.chromium,
        "args": trace_replay::chromium::command_line_flags(),
        "proxy": proxy,
        "steps": steps,
    });
    let script = Path::new(env!("CARGO_MANIFEST_DIR")).join("tests/proxy_browser.mjs");
    let output = Command::new("node").arg(script).arg(config.to_string()).output().unwrap();
    serde_json::from_slice(&output.stdout)
        .unwrap_or_else(|error| panic!("{error}: {}", String::from_utf8_lossy(&output.stderr)))
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn playwrights_own_chromium_plays_the_demo_shop_offline_through_the_proxy() {
    let Some(build) = Build::for_tests("playwrights_own_chromium_plays_the_demo_shop_offline_through_the_proxy") else {
        return;
    };
    let site = DemoSite::start(0).unwrap();
    let data = tempfile::tempdir().unwrap();
    let demonstration = demo::record(&build, &site, data.path()).await.unwrap();
    let (port, url) = (site.port(), site.url("/"));
    let url = |path: &str| format!("{}{path}", url.trim_end_matches('/'));
    site.stop();
    let sentinel = Sentinel::start(port);

    let (mut serve, proxy, lines) = serve_proxy(&build, &demonstration.bundle);
    let steps = json!([
        { "goto": url("/") },
        { "text": ["#products", "Blue Mug"] },
        { "goto": url("/login") },
        { "fill": ["#username", DEMO_USER] },
        { "fill": ["#password", DEMO_PASSWORD] },
        { "click": "#login-submit" },
        { "url": "/account" },
        { "text": ["#signed-in-as", DEMO_USER] },
        { "click": "#add-to-cart" },
        { "url": "/cart" },
        { "text": ["#cart-items", "Blue Mug"] },
        { "goto": url("/") },
        { "fill": ["#search-input", "mug"] },
        { "press": ["#search-input", "Enter"] },
        { "url": "/search?q=mug" },
    ]);
    let played = play(&build, &proxy, steps);

    interrupt(&serve);
    let summary: Vec<String> = lines.map(Result::unwrap).collect();
    assert!(serve.wait().unwrap().success());
    let summary = summary.join("\n");
    assert_eq!(played, json!({ "ok": true }), "{summary}");
    assert!(summary.contains("live: 0"), "{summary}");
    assert_eq!(sentinel.connections(), 0, "the browser reached the shop's port");
}

/// Asks `serve` to stop as Ctrl+C would.
fn interrupt(child: &Child) {
    let status = Command::new("kill").args(["-INT", &child.id().to_string()]).status().unwrap();
    assert!(status.success());
}
