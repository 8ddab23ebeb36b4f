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
use trace_bundle::archive::Bundle;
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

    // Issue #47, part 3: a wrong password is no login, though the rest of the form is the person's.
    let wrong = episodes.path().join("wrong-password");
    let served = Served::start(&build, &demonstration.bundle, &wrong);
    let steps = json!([
        { "goto": url("/login") },
        { "fill": ["#username", DEMO_USER] },
        { "fill": ["#password", format!("{DEMO_PASSWORD}x")] },
        { "click": "#login-submit" },
    ]);
    play(&build, &served.proxy, steps);
    let summary = served.stop();
    let result = score(&build, &demonstration.bundle, &wrong);
    assert_eq!(result["success"], 0.0, "{result:#}\n{summary}");
    let login = result["checkpoints"]["items"]
        .as_array()
        .unwrap()
        .iter()
        .find(|item| {
            item["predicate"]["kind"] == "request"
                && item["predicate"]["url_pattern"].as_str().unwrap().ends_with("/login")
        })
        .unwrap_or_else(|| panic!("no login checkpoint: {result:#}"));
    assert_eq!(login["reached"], false, "{result:#}");

    assert_eq!(sentinel.connections(), 0, "the browser reached the shop's port");
}

/// Issue #47, part 3: the person mistyped their password once. A third password is answered as the site
/// answered their slip (its refusal, the form again), never with their sign-in nor a failed request; their
/// own password signs in; and the task's credential is the password that signed in, not the slip.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_wrong_password_gets_the_refusal_the_person_met_through_the_proxy() {
    let test = "a_wrong_password_gets_the_refusal_the_person_met_through_the_proxy";
    let Some(build) = Build::for_tests(test) else { return };
    let site = DemoSite::start(0).unwrap();
    let data = tempfile::tempdir().unwrap();
    let bundle = demo::record_second_try_login(&build, &site, data.path()).await.unwrap();
    let (port, login) = (site.port(), site.url("/login"));
    site.stop();
    let sentinel = Sentinel::start(port);

    let (_, credentials) = trace_analysis::trajectory::of_bundle(&mut Bundle::open(&bundle).unwrap()).unwrap();
    let values: Vec<&str> = credentials.iter().map(|credential| credential.value.as_str()).collect();
    assert!(values.contains(&DEMO_PASSWORD), "{credentials:#?}");

    let episodes = tempfile::tempdir().unwrap();
    let sign_in = |password: &str, then: Value| {
        json!([
            { "goto": login },
            { "fill": ["#username", DEMO_USER] },
            { "fill": ["#password", password] },
            { "click": "#login-submit" },
            then,
        ])
    };
    let third = episodes.path().join("third-password");
    let served = Served::start(&build, &bundle, &third);
    let played =
        play(&build, &served.proxy, sign_in("Red-Mug-7", json!({ "text": ["#login-error", "Wrong username"] })));
    let summary = served.stop();
    assert_eq!(played, json!({ "ok": true }), "the slip's refusal was not shown: {summary}");

    let own = episodes.path().join("own-password");
    let served = Served::start(&build, &bundle, &own);
    let played = play(&build, &served.proxy, sign_in(DEMO_PASSWORD, json!({ "text": ["#signed-in-as", DEMO_USER] })));
    let summary = served.stop();
    assert_eq!(played, json!({ "ok": true }), "{summary}");
    assert!(summary.contains("live: 0"), "{summary}");
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

/// Issue #47, part 1: a final state that the page's own scripts draw (the expert's answer, streamed after
/// the question's POST and written into the page) was scored 1 by `eval`, whose DevTools session takes
/// DOM snapshots, and 0 through the proxy, which saw only the network. The proxy's page script now
/// reports what each page shows: the oracle earns full marks on both paths, doing nothing none on either.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn text_the_pages_scripts_draw_is_judged_through_the_proxy_as_through_devtools() {
    let test = "text_the_pages_scripts_draw_is_judged_through_the_proxy_as_through_devtools";
    let Some(build) = Build::for_tests(test) else { return };
    let site = DemoSite::start(0).unwrap();
    let data = tempfile::tempdir().unwrap();
    let bundle = demo::record_ask(&build, &site, data.path()).await.unwrap();
    let answer = trace_e2e::site::ask::answer(demo::EXPERT_QUESTION);
    let ask = site.url("/ask");
    let port = site.port();
    site.stop();
    let sentinel = Sentinel::start(port);

    // Processed as a person's recording is, its checkpoints proven on the DevTools path by the audit: the
    // demonstration earns 1 there, doing nothing 0.
    let output = Command::new(&build.trace_host)
        .args(["--data", data.path().to_str().unwrap(), "process"])
        .arg(&bundle)
        .output()
        .unwrap();
    assert!(output.status.success(), "{}", String::from_utf8_lossy(&output.stderr));
    let audit: Value = serde_json::from_slice(&std::fs::read(bundle.join("audit.json")).unwrap()).unwrap();
    assert_eq!(audit["valid"], true, "{audit:#}");
    let checkpoints: Value = serde_json::from_slice(&std::fs::read(bundle.join("checkpoints.json")).unwrap()).unwrap();
    let drawn = |predicate: &Value| predicate["kind"] == "text" && answer.contains(predicate["text"].as_str().unwrap());
    assert!(
        checkpoints.as_array().unwrap().iter().any(|checkpoint| drawn(&checkpoint["predicate"])),
        "no checkpoint on the drawn answer: {checkpoints:#}"
    );

    let episodes = tempfile::tempdir().unwrap();
    let (oracle, idle) = (episodes.path().join("oracle"), episodes.path().join("nothing"));
    let served = Served::start(&build, &bundle, &oracle);
    let steps = json!([
        { "goto": ask },
        { "fill": ["#question", demo::EXPERT_QUESTION] },
        { "click": "#ask" },
        { "text": ["#answer", answer] },
        { "text": ["#status", "Answered"] },
    ]);
    let played = play(&build, &served.proxy, steps);
    let summary = served.stop();
    assert_eq!(played, json!({ "ok": true }), "{summary}");
    let result = score(&build, &bundle, &oracle);
    let items = result["checkpoints"]["items"].as_array().unwrap();
    assert_eq!(result["success"], 1.0, "{result:#}");
    assert_eq!(result["checkpoints"]["reached_in_order"], items.len(), "{result:#}");
    assert!(items.iter().any(|item| drawn(&item["predicate"]) && item["reached"] == true), "{result:#}");

    let served = Served::start(&build, &bundle, &idle);
    let played = play(&build, &served.proxy, json!([{ "goto": ask }, { "text": ["h1", "Ask"] }]));
    let summary = served.stop();
    assert_eq!(played, json!({ "ok": true }), "{summary}");
    let result = score(&build, &bundle, &idle);
    assert_eq!(result["success"], 0.0, "{result:#}");
    assert_eq!(result["checkpoints"]["reached_any_order"], 0, "{result:#}");
    // What the pages reported is the episode's, never a request of the recorded site's.
    let requests: Value = serde_json::from_slice(&std::fs::read(idle.join("session/recording.har")).unwrap()).unwrap();
    let report_requests = requests["log"]["entries"]
        .as_array()
        .unwrap()
        .iter()
        .filter(|entry| entry["request"]["url"].as_str().unwrap().contains("__trace_replay__"))
        .count();
    assert_eq!(report_requests, 0, "{requests:#}");
    assert_eq!(sentinel.connections(), 0, "the browser reached the shop's port");
}

/// Issue #45: forty 60 MiB POSTs through `serve --proxy-port --episode` (what BrowserGym runs) kept 2.4 GB
/// resident for good, peaked at 12 GB as the episode was written, and wrote 4.8 GB (each body as text in
/// `events.jsonl` and again in `recording.har`). Each body goes to the session as it arrives, within the
/// episode's budget, and memory holds only the bodies being answered: the proxy stays under 512 MiB,
/// the episode under its budget, `served.json` says what was left out, and the score still comes. The
/// first, a real 10 MiB upload, is kept whole.
#[test]
fn an_episode_of_huge_posts_through_the_proxy_is_kept_within_its_budget() {
    use trace_e2e::handmade::{Exchange, posted_body, write_bundle};
    let Some(build) = Build::for_tests("an_episode_of_huge_posts_through_the_proxy") else { return };
    let scratch = tempfile::tempdir().unwrap();
    let bundle = scratch.path().join("bundle");
    write_bundle(
        &bundle,
        "posting",
        &[
            Exchange { method: "GET", url: "http://shop.test/", mime_type: "text/html", body: b"<p>shop</p>" },
            Exchange { method: "POST", url: "http://shop.test/upload", mime_type: "application/json", body: b"{}" },
        ],
    );
    let episode = scratch.path().join("episode");
    let served = Served::start(&build, &bundle, &episode);
    let pid = served.serve.id();
    let peak = || {
        let status = std::fs::read_to_string(format!("/proc/{pid}/status")).unwrap_or_default();
        status
            .lines()
            .find_map(|line| line.strip_prefix("VmHWM:"))
            .map_or(0, |rest| rest.trim().trim_end_matches("kB").trim().parse::<u64>().unwrap_or(0) << 10)
    };
    let address = served.proxy.trim_start_matches("http://").to_owned();
    for (i, mib) in std::iter::once(10).chain(std::iter::repeat_n(60, 40)).enumerate() {
        post_through(&address, "http://shop.test/upload", &posted_body(i, mib));
    }
    let peak_serving = peak();
    let summary = served.stop();
    let session = episode.join("session");
    let upload = session.join(format!("resources/{}", trace_bundle::archive::sha256_hex(&posted_body(0, 10))));
    assert!(upload.is_file(), "the 10 MiB upload is kept whole: {summary}");
    let served_file: Value = serde_json::from_slice(&std::fs::read(episode.join("served.json")).unwrap()).unwrap();
    let left_out = &served_file["bodies_left_out"];
    assert!(left_out["bodies"].as_u64().unwrap_or(0) >= 30, "{served_file:#}");
    let kept: u64 = walk_sizes(&episode);
    let budget = left_out["budget_bytes"].as_u64().unwrap();
    assert!(kept < budget + (8 << 20), "the episode holds {kept} bytes, its budget {budget}");
    let result = score(&build, &bundle, &episode);
    assert_eq!(result["bodies_left_out"], *left_out, "{result:#}");
    eprintln!(
        "41 posts (2.4 GB): the proxy peaked at {} MiB; the episode holds {} MiB",
        peak_serving >> 20,
        kept >> 20
    );
    assert!(peak_serving < 512 << 20, "the proxy peaked at {peak_serving} bytes");
}

/// POSTs `body` to `url` through the proxy at `address`, as a page's `fetch` sends it, and reads the answer
/// (or the refusal, a closed connection) to its end.
fn post_through(address: &str, url: &str, body: &[u8]) {
    use std::io::{Read as _, Write as _};
    let mut stream = std::net::TcpStream::connect(address).unwrap();
    let head = format!(
        "POST {url} HTTP/1.1\r\nHost: shop.test\r\nContent-Type: text/plain\r\nOrigin: http://shop.test\r\n\
         Content-Length: {}\r\nConnection: close\r\n\r\n",
        body.len()
    );
    stream.write_all(head.as_bytes()).unwrap();
    let _ = stream.write_all(body);
    let _ = stream.read_to_end(&mut Vec::new());
}

fn walk_sizes(dir: &Path) -> u64 {
    std::fs::read_dir(dir).map_or(0, |entries| {
        entries
            .flatten()
            .map(|entry| match entry.file_type() {
                Ok(kind) if kind.is_dir() => walk_sizes(&entry.path()),
                _ => entry.metadata().map_or(0, |metadata| metadata.len()),
            })
            .sum()
    })
}
