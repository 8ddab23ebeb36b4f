//! End to end, issue #33: an agent's harness that launches its own browser plays a recorded site through
//! `trace-replay serve --proxy-port`. The demonstration of [`trace_e2e::demo`] is recorded with the
//! extension and the host, the shop is stopped and a sentinel takes its port; then Playwright launches
//! Debian's Chromium itself, its `proxy` set to replay's, and logs in, puts the mug in the cart and
//! searches, offline; and a real application, Django's admin, is logged in to the same way. Every page shows
//! what it showed the person, replay counts no live attempt, and the sentinel sees no connection. Needs
//! `cargo xtask dist` (and npm, for `playwright-core`).

use std::io::{BufRead, BufReader};
use std::path::Path;
use std::process::{Child, Command, Stdio};

use serde_json::{Value, json};
use trace_e2e::apps::{self, django_admin, django_admin::DjangoAdmin};
use trace_e2e::browser::Build;
use trace_e2e::demo;
use trace_e2e::playwright;
use trace_e2e::sentinel::Sentinel;
use trace_e2e::site::{DEMO_PASSWORD, DEMO_USER, DemoSite};

/// `trace-replay serve BUNDLE --proxy-port 0 --episode EPISODE` running, and the proxy URL it printed.
struct Served {
    serve: Child,
    proxy: String,
    lines: std::io::Lines<BufReader<std::process::ChildStdout>>,
}

impl Served {
    fn start(build: &Build, bundle: &Path, episode: &Path) -> Served {
        let mut serve = Command::new(&build.trace_replay)
            .arg("serve")
            .arg(bundle)
            .args(["--proxy-port", "0", "--episode"])
            .arg(episode)
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
        Served { serve, proxy: proxy.expect("serve printed its proxy's URL"), lines }
    }

    /// Stops it as Ctrl+C does; what it printed then.
    fn stop(mut self) -> String {
        let status = Command::new("kill").args(["-INT", &self.serve.id().to_string()]).status().unwrap();
        assert!(status.success());
        let summary: Vec<String> = self.lines.map(Result::unwrap).collect();
        assert!(self.serve.wait().unwrap().success(), "{summary:?}");
        summary.join("\n")
    }
}

/// `trace-replay score BUNDLE --episode EPISODE --json`: the episode's result.
fn score(build: &Build, bundle: &Path, episode: &Path) -> Value {
    let output = Command::new(&build.trace_replay)
        .arg("score")
        .arg(bundle)
        .arg("--episode")
        .arg(episode)
        .arg("--json")
        .output()
        .unwrap();
    assert!(output.status.success(), "{}", String::from_utf8_lossy(&output.stderr));
    serde_json::from_slice(&output.stdout).unwrap()
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

    let episodes = tempfile::tempdir().unwrap();
    let (demonstrated, idle) = (episodes.path().join("demonstration"), episodes.path().join("nothing"));

    // The person's task, done again in a browser of Playwright's own: the state it changes (the login, the
    // cart with express shipping and gift wrap), the pages it reaches, the search.
    let served = Served::start(&build, &demonstration.bundle, &demonstrated);
    let steps = json!([
        { "goto": url("/") },
        { "text": ["#products", "Blue Mug"] },
        { "goto": url("/login") },
        { "fill": ["#username", DEMO_USER] },
        { "fill": ["#password", DEMO_PASSWORD] },
        { "click": "#login-submit" },
        { "url": "/account" },
        { "text": ["#signed-in-as", DEMO_USER] },
        { "select": ["#shipping", "express"] },
        { "check": "#gift-wrap" },
        { "click": "#add-to-cart" },
        { "url": "/cart" },
        { "text": ["#cart-items", "Blue Mug"] },
        { "goto": url("/") },
        { "fill": ["#search-input", "mug"] },
        { "press": ["#search-input", "Enter"] },
        { "url": "/search?q=mug" },
    ]);
    let played = play(&build, &served.proxy, steps);
    let summary = served.stop();
    assert_eq!(played, json!({ "ok": true }), "{summary}");
    assert!(summary.contains("live: 0"), "{summary}");

    // Scored from what crossed the proxy: the demonstration earns full marks, doing nothing earns none.
    let result = score(&build, &demonstration.bundle, &demonstrated);
    let checkpoints = &result["checkpoints"];
    assert_eq!(result["success"], 1.0, "{result:#}");
    assert_eq!(checkpoints["reached_in_order"], checkpoints["items"].as_array().unwrap().len(), "{result:#}");
    assert!(checkpoints["items"].as_array().unwrap().len() >= 3, "{result:#}");
    assert_eq!(result["live_attempts"], 0);

    let served = Served::start(&build, &demonstration.bundle, &idle);
    let played = play(&build, &served.proxy, json!([{ "goto": url("/") }, { "text": ["#products", "Blue Mug"] }]));
    let summary = served.stop();
    assert_eq!(played, json!({ "ok": true }), "{summary}");
    let result = score(&build, &demonstration.bundle, &idle);
    assert_eq!(result["success"], 0.0, "{result:#}");
    assert_eq!(result["checkpoints"]["reached_any_order"], 0, "{result:#}");

    assert_eq!(sentinel.connections(), 0, "the browser reached the shop's port");
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn playwrights_own_chromium_logs_in_to_a_recorded_django_admin_through_the_proxy() {
    let test = "playwrights_own_chromium_logs_in_to_a_recorded_django_admin_through_the_proxy";
    let Some(build) = Build::for_tests(test) else { return };
    let Some(python) = apps::python_for_tests(test) else { return };
    let mut app = DjangoAdmin::start(&python).unwrap();
    let data = tempfile::tempdir().unwrap();
    let bundle = app.record(&build, data.path()).await.unwrap();
    let login = app.server.url("/admin/login/?next=/admin/");
    let port = app.server.port();
    app.server.stop();
    let sentinel = Sentinel::start(port);

    let episode = tempfile::tempdir().unwrap();
    let served = Served::start(&build, &bundle, episode.path());
    // Logged in from the login page, the dashboard comes with the session cookie the login set: the
    // logged-in one, not the redirect to the login page the same URL answered before the login.
    let steps = json!([
        { "goto": login },
        { "fill": ["#id_username", django_admin::USER] },
        { "fill": ["#id_password", django_admin::PASSWORD] },
        { "click": "input[type=submit]" },
        { "text": ["#content h1", "Site administration"] },
    ]);
    let played = play(&build, &served.proxy, steps);
    let summary = served.stop();
    assert_eq!(played, json!({ "ok": true }), "{summary}");
    assert!(summary.contains("live: 0"), "{summary}");
    assert_eq!(sentinel.connections(), 0, "the browser reached the application's port");
}
