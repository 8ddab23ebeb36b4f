//! End to end: `trace-host view` on the demonstration of [`trace_e2e::demo`], recorded with the extension and
//! exported redacted, looked at in headless Chromium as a person would: the steps with their screenshots and
//! the target's box and the accessibility tree, checkpoints with their evidence, the network panel with its
//! filters, a JSON body and how replay answers a request, a DOM snapshot with its stylesheet whose script
//! must not run; and what it must refuse: requests without the token in their path (the token is never a
//! cookie), paths out of the bundle and its top-level documents, a corrupt zip. Needs `cargo xtask dist`.

use std::io::{BufRead, BufReader, Read, Write};
use std::path::Path;
use std::process::{Child, Command, Stdio};

use chromiumoxide::Page;
use trace_bundle::archive::Bundle;
use trace_e2e::browser::Build;
use trace_e2e::demo::{self, Recorded, recorded_once as recorded};
use trace_e2e::run;
use trace_manifest::bundle::{STORAGE_FILE, StorageFile};
use trace_manifest::event::EventKind;
use trace_manifest::har::Har;
use trace_manifest::postprocess::{CHECKPOINTS_FILE, Checkpoint, Predicate};
use trace_replay::chromium::{self, Chromium, Launch};

/// `trace-host view WHAT` running, and the URL it printed.
struct Viewer {
    child: Child,
    url: String,
}

impl Viewer {
    fn start(recorded: &Recorded, what: Option<&Path>) -> Viewer {
        let mut command = Command::new(&recorded.build.trace_host);
        command.args(["--data", recorded.exported.data.path().to_str().unwrap(), "view"]);
        if let Some(what) = what {
            command.arg(what);
        }
        let mut child = command.stdout(Stdio::piped()).stderr(Stdio::null()).spawn().unwrap();
        let mut line = String::new();
        BufReader::new(child.stdout.as_mut().unwrap()).read_line(&mut line).unwrap();
        let url = line.split_whitespace().find(|word| word.starts_with("http://127.0.0.1:")).expect(&line).to_owned();
        Viewer { child, url }
    }

    /// `http://127.0.0.1:PORT`.
    fn origin(&self) -> &str {
        let after_scheme = &self.url["http://".len()..];
        &self.url[..("http://".len() + after_scheme.find('/').unwrap())]
    }

    /// The token, the first segment of every path the viewer answers.
    fn token(&self) -> &str {
        self.url[self.origin().len() + 1..].split('/').next().unwrap()
    }

    /// `http://127.0.0.1:PORT/TOKEN`, which every URL of the app continues.
    fn root(&self) -> String {
        format!("{}/{}", self.origin(), self.token())
    }

    /// A raw HTTP GET of `path` with `cookie`, and the status code it got.
    fn status_of(&self, path: &str, cookie: Option<&str>) -> u16 {
        let address = &self.origin()["http://".len()..];
        let mut stream = std::net::TcpStream::connect(address).unwrap();
        let cookie = cookie.map(|cookie| format!("Cookie: {cookie}\r\n")).unwrap_or_default();
        write!(stream, "GET {path} HTTP/1.1\r\nHost: {address}\r\n{cookie}Connection: close\r\n\r\n").unwrap();
        // Bytes, not text: a screenshot's body is no UTF-8.
        let mut response = Vec::new();
        let _ = stream.read_to_end(&mut response);
        String::from_utf8_lossy(&response).split_whitespace().nth(1).and_then(|code| code.parse().ok()).unwrap_or(0)
    }
}

impl Drop for Viewer {
    fn drop(&mut self) {
        let _ = self.child.kill();
        let _ = self.child.wait();
    }
}

async fn browser(build: &Build) -> Chromium {
    chromium::launch(&Launch { chromium: Some(build.chromium.clone()), headless: true, ..Launch::default() })
        .await
        .unwrap()
}

async fn text(page: &Page, script: &str) -> String {
    page.evaluate(script).await.unwrap().into_value::<String>().unwrap()
}

async fn number(page: &Page, script: &str) -> f64 {
    page.evaluate(script).await.unwrap().into_value::<f64>().unwrap()
}

/// Waits (10 s at most) until the page's URL ends with `suffix`: a link followed; `what` says which.
async fn wait_until_at(page: &Page, suffix: &str, what: &str) {
    let deadline = std::time::Instant::now() + std::time::Duration::from_secs(10);
    while !page.url().await.unwrap().unwrap_or_default().ends_with(suffix) {
        assert!(std::time::Instant::now() < deadline, "{what}");
        tokio::time::sleep(std::time::Duration::from_millis(100)).await;
    }
}

async fn goto(page: &Page, url: &str) {
    page.goto(url).await.unwrap();
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_recording_is_shown_step_by_step_with_its_network_and_snapshots() {
    let Some(recorded) = recorded("a_recording_is_shown_step_by_step_with_its_network_and_snapshots").await else {
        return;
    };
    let mut bundle = Bundle::open(&recorded.exported.bundle).unwrap();
    let (steps, _) = trace_analysis::trajectory::of_bundle(&mut bundle).unwrap();
    let har: Har = serde_json::from_slice(&bundle.read(trace_manifest::bundle::HAR_FILE).unwrap()).unwrap();
    let events = bundle.events().unwrap();
    let viewer = Viewer::start(recorded, Some(&recorded.exported.bundle));
    let chromium = browser(&recorded.build).await;
    let page = chromium.browser.new_page("about:blank").await.unwrap();

    // The printed URL, its token in its path, shows the recording: every step, in order. No cookie is set.
    goto(&page, &viewer.url).await;
    assert!(page.url().await.unwrap().unwrap().starts_with(&viewer.root()));
    assert!(page.get_cookies().await.unwrap().is_empty(), "the token is never a cookie");
    let listed = number(&page, "document.querySelectorAll('.steps ol li').length").await;
    assert_eq!(listed as usize, steps.len());
    assert!(text(&page, "document.querySelector('h1').textContent").await.contains(demo::DESCRIPTION));

    // A click with a target: its screenshot before (with the target's box) and after, both loaded. The
    // add-to-cart click's, unless the recorder's capture after it was cut short by the next page (under
    // load it can be): then another click that has its captures.
    let captured = |step: &trace_manifest::trajectory::ToolCall| {
        step.dom_snapshot.is_some()
            && step.screenshot.is_some()
            && matches!(step.action, trace_manifest::trajectory::ToolAction::Click { .. })
    };
    let clicked = steps
        .iter()
        .position(|step| step.target.as_ref().is_some_and(|t| t.selector.contains("add-to-cart")) && captured(step))
        .or_else(|| steps.iter().position(|step| step.target.is_some() && captured(step)))
        .expect("the demonstration has a click with its captures");
    let links = page.find_elements(".steps ol li a").await.unwrap();
    links[clicked].click().await.unwrap();
    let wanted = format!("?step={clicked}");
    wait_until_at(&page, &wanted, &format!("the step's link leads to {wanted}")).await;
    page.wait_for_navigation().await.unwrap();
    tokio::time::sleep(std::time::Duration::from_millis(500)).await;
    let loaded = "[...document.querySelectorAll('.shot img')].filter(i => i.complete && i.naturalWidth > 0).length";
    assert_eq!(number(&page, loaded).await, 2.0, "before and after, both loaded");
    let target_box = "(() => { const r = document.querySelector('.shot .box').getBoundingClientRect(); \
         const s = document.querySelector('.shot img').getBoundingClientRect(); \
         return r.width > 4 && r.height > 4 && r.left >= s.left && r.bottom <= s.bottom + 1 ? 'inside' : 'outside'; })()";
    assert_eq!(text(&page, target_box).await, "inside", "the target's box is drawn on the screenshot");
    let screenshot = page.screenshot(chromiumoxide::page::ScreenshotParams::builder().build()).await.unwrap();
    assert!(screenshot.len() > 20_000, "a view with screenshots in it, not a blank page ({} bytes)", screenshot.len());

    // The step's DOM snapshot has its accessibility tree, every node the outline reads, the shop's home
    // link among them.
    let snapshot_file = steps[clicked].dom_snapshot.clone().expect("the click's snapshot");
    let accessibility = events
        .iter()
        .find_map(|record| match &record.event.kind {
            EventKind::DomSnapshot(dom) if dom.file == snapshot_file => dom.accessibility_file.clone(),
            _ => None,
        })
        .expect("the recorder captured the accessibility tree");
    let nodes: serde_json::Value = serde_json::from_slice(&bundle.read(&accessibility).unwrap()).unwrap();
    let outline = trace_analysis::accessibility::outline(&nodes);
    assert_eq!(number(&page, "document.querySelectorAll('details.ax li').length").await as usize, outline.walk().len());
    let home_link = "[...document.querySelectorAll('details.ax li')].some(li =>          li.querySelector('.role').textContent === 'link' && li.querySelector('q')?.textContent === 'TRACE Demo Shop')";
    assert!(page.evaluate(home_link).await.unwrap().into_value::<bool>().unwrap());

    // Each checkpoint with the recording's evidence for it; a request's links to its network entry.
    let checkpoints: Vec<Checkpoint> = serde_json::from_slice(&bundle.read(CHECKPOINTS_FILE).unwrap()).unwrap();
    assert_eq!(number(&page, "document.querySelectorAll('tr.checkpoint').length").await as usize, checkpoints.len());
    assert_eq!(number(&page, "document.querySelectorAll('td.evidence .failed').length").await, 0.0);
    let requests = checkpoints.iter().filter(|c| matches!(c.predicate, Predicate::Request { .. })).count();
    let linked = "[...document.querySelectorAll('tr.checkpoint')].filter(tr => tr.querySelector('td.evidence a[href*=\"/network/\"]')).length";
    assert_eq!(number(&page, linked).await as usize, requests);

    // The network panel: every request, a host filter, and the products API's JSON pretty-printed.
    goto(&page, &format!("{}/r/bundle/network", viewer.root())).await;
    let rows = number(&page, "document.querySelectorAll('tbody tr').length").await as usize;
    assert_eq!(rows, har.log.entries.len().min(500));
    // What replay's ignore list fails at once is marked (the shop's analytics beacons).
    let ignored = trace_analysis::ignore::of_bundle(&mut bundle, &events).unwrap();
    let beacons = har
        .log
        .entries
        .iter()
        .filter(|e| trace_analysis::ignore::ignore_pattern(&ignored, &e.request.url).is_some())
        .count();
    assert!(beacons > 0, "{ignored:?}");
    // Each request's bar in the waterfall, placed by its start over the whole recording.
    let lefts = "JSON.stringify([...document.querySelectorAll('.wf div')].map(bar => parseFloat(bar.style.left)))";
    let lefts: Vec<f64> = serde_json::from_str(&text(&page, lefts).await).unwrap();
    assert_eq!(lefts.len(), rows);
    assert!(lefts.windows(2).all(|pair| pair[0] <= pair[1]) && lefts[lefts.len() - 1] > 50.0, "{lefts:?}");
    let marked = "[...document.querySelectorAll('tbody tr td:last-child')].filter(td => td.textContent.trim() === 'ignored').length";
    assert_eq!(number(&page, marked).await as usize, beacons);
    let host = url::Url::parse(&har.log.entries[0].request.url).unwrap().host_str().unwrap().to_owned();
    let of_host = har.log.entries.iter().filter(|e| e.request.url.contains(&format!("//{host}"))).count();
    goto(&page, &format!("{}/r/bundle/network?host={host}", viewer.root())).await;
    assert_eq!(number(&page, "document.querySelectorAll('tbody tr').length").await as usize, of_host.min(500));
    let api = har.log.entries.iter().position(|e| e.request.url.contains("/api/products")).unwrap();
    goto(&page, &format!("{}/r/bundle/network/{api}", viewer.root())).await;
    let body = text(&page, "document.querySelector('pre').textContent").await;
    assert!(body.contains("\n  ") && body.contains("\"Blue Mug\""), "pretty-printed JSON: {body}");
    // The shop stamps its API calls with `_=<time>`: replay matches them canonically, and says so.
    let replay = text(&page, "document.querySelector('dd.replay').textContent").await;
    assert!(replay.contains("leaves out _="), "{replay}");
    goto(&page, &format!("{}/r/bundle/network", viewer.root())).await;
    let api_row = format!("document.querySelectorAll('tbody tr')[{api}].lastElementChild.textContent");
    assert!(text(&page, &api_row).await.starts_with("canonical"));
    // An HTML document pretty-printed, one element a line, indented by nesting.
    let document = har.log.entries.iter().position(|e| e.response.content.mime_type.contains("html")).unwrap();
    goto(&page, &format!("{}/r/bundle/network/{document}", viewer.root())).await;
    let html = text(&page, "document.querySelector('pre').textContent").await;
    assert!(
        html.contains("\n  <head>") && html.contains("\n    <title>"),
        "indented HTML: {}",
        &html[..html.len().min(300)]
    );

    // The console messages, each once, and the cookies and storage at the start and the end.
    let console = events.iter().filter(|r| matches!(r.event.kind, EventKind::Console(_))).count();
    let storage: StorageFile = serde_json::from_slice(&bundle.read(STORAGE_FILE).unwrap()).unwrap();
    goto(&page, &format!("{}/r/bundle/state", viewer.root())).await;
    assert_eq!(number(&page, "document.querySelectorAll('#console tbody tr').length").await as usize, console);
    let cookies: usize = storage.snapshots.iter().map(|timed| timed.snapshot.cookies.len()).sum();
    assert!(cookies > 0, "the shop's session cookie is in the recording");
    assert_eq!(number(&page, "document.querySelectorAll('table.cookies tbody tr').length").await as usize, cookies);

    // A DOM snapshot is rendered as the page looked, offline: the stylesheet with the font and the
    // background image it loads, and the logo, all from the recording.
    let snapshot = steps.iter().find_map(|step| step.dom_snapshot.clone()).unwrap();
    goto(&page, &format!("{}/r/bundle/snapshot/{snapshot}", viewer.root())).await;
    let background = text(&page, "getComputedStyle(document.body).backgroundImage").await;
    assert!(background.starts_with("url(\"data:image/png;base64,"), "{}", &background[..background.len().min(80)]);
    let font = "document.fonts.ready.then(fonts => [...fonts].some(f => f.family.includes('TRACE Shop Display') && f.status === 'loaded'))";
    assert!(page.evaluate(font).await.unwrap().into_value::<bool>().unwrap(), "the stylesheet's font loaded");
    let images = "[...document.images].filter(i => i.complete && i.naturalWidth > 0).length";
    assert!(number(&page, images).await >= 1.0, "the logo shows");

    // A DOM snapshot is rendered with scripts off: one that would retitle itself does not.
    goto(&page, &format!("{}/r/bundle/file/{snapshot}", viewer.root())).await;
    let title = text(&page, "document.title").await;
    drop(viewer);
    let tampered = tempfile::tempdir().unwrap();
    let dir = tampered.path().join("bundle");
    zip::ZipArchive::new(std::fs::File::open(&recorded.exported.bundle).unwrap()).unwrap().extract(&dir).unwrap();
    // Snapshots may be packed (`dom.pack`); a file of the same name beside the pack is read first.
    let html = String::from_utf8(bundle.read(&snapshot).unwrap()).unwrap();
    let script = "<script>document.title = 'changed by the snapshot'</script>";
    assert!(html.contains("</head>"));
    std::fs::create_dir_all(dir.join(&snapshot).parent().unwrap()).unwrap();
    std::fs::write(dir.join(&snapshot), html.replacen("</head>", &format!("{script}</head>"), 1)).unwrap();
    let viewer = Viewer::start(recorded, Some(&dir));
    goto(&page, &viewer.url).await;
    for route in ["file", "snapshot"] {
        goto(&page, &format!("{}/r/bundle/{route}/{snapshot}", viewer.root())).await;
        assert_eq!(text(&page, "document.title").await, title, "the snapshot's script did not run ({route})");
    }
    chromium.close().await.unwrap();
}

// #47: the add-to-cart click's "before" picture predated the two form changes before it, and its target's
// box landed on the link below the button it names.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn each_steps_picture_before_shows_the_page_it_acted_on() {
    let Some(recorded) = recorded("each_steps_picture_before_shows_the_page_it_acted_on").await else { return };
    let mut bundle = Bundle::open(&recorded.exported.bundle).unwrap();
    let (steps, _) = trace_analysis::trajectory::of_bundle(&mut bundle).unwrap();
    let events = bundle.events().unwrap();
    let shots: Vec<(f64, Option<i64>, String)> = events
        .iter()
        .filter_map(|record| match &record.event.kind {
            EventKind::Screenshot(shot) => Some((record.event.ts, record.event.tab_id, shot.file.clone())),
            _ => None,
        })
        .collect();
    let tab_of =
        |file: &Option<String>| shots.iter().find(|shot| Some(&shot.2) == file.as_ref()).and_then(|shot| shot.1);
    let step_named = |selector: &str| {
        steps.iter().position(|step| step.target.as_ref().is_some_and(|target| target.selector.contains(selector)))
    };

    // The demonstration acts at a person's pace: every step after the first was taken on a picture of its
    // tab taken after the step before had ended, so it shows what the step acted on.
    let mut checked = Vec::new();
    for index in 1..steps.len() {
        let (previous, step) = (&steps[index - 1], &steps[index]);
        let previous_end = previous.end_ts.unwrap_or(previous.ts);
        // A step in another tab than the step before (the switch to a tab a click opened) has nothing
        // of its tab before it to compare with.
        if previous.tab != step.tab {
            continue;
        }
        // The tab of the step before: a click that opens a tab has its picture after in the new one.
        let tab = tab_of(&previous.screenshot).or_else(|| tab_of(&step.screenshot));
        let tab = tab.unwrap_or_else(|| panic!("step {index} ({:?}) has no picture after", previous.action));
        let before = shots.iter().filter(|shot| shot.1 == Some(tab) && shot.0 < step.ts).map(|shot| shot.0);
        let latest = before.fold(f64::NEG_INFINITY, f64::max);
        assert!(
            latest > previous_end,
            "step {} ({:?}) is shown on a picture taken {:.0} ms before step {} ({:?}) ended",
            index + 1,
            step.action,
            previous_end - latest,
            index,
            previous.action
        );
        checked.push(index);
    }
    // Among them the clicks after filling a form (the login, its fields typed; the cart, its shipping chosen
    // and gift wrap ticked) and the click that opens the help in a new tab.
    let login = step_named("login-submit").expect("the login's click");
    let add_to_cart = step_named("add-to-cart").expect("the add-to-cart click");
    let help = step_named("help-link").expect("the click that opens the help");
    for step in [login, add_to_cart, help] {
        assert!(checked.contains(&step), "step {step} unchecked: checked {checked:?} of {}", steps.len());
    }

    // The viewer says so, and boxes the button on that picture.
    let viewer = Viewer::start(recorded, Some(&recorded.exported.bundle));
    let chromium = browser(&recorded.build).await;
    let page = chromium.browser.new_page("about:blank").await.unwrap();
    goto(&page, &format!("{}/r/bundle/?step={add_to_cart}", viewer.root())).await;
    let caption = text(&page, "document.querySelector('.shot .muted').textContent").await;
    assert!(caption.starts_with("Before: the page the step acted on"), "{caption}");
    let target_box = "(() => { const r = document.querySelector('.shot .box').getBoundingClientRect(); \
         const s = document.querySelector('.shot img').getBoundingClientRect(); \
         return r.width > 4 && r.height > 4 && r.left >= s.left && r.bottom <= s.bottom + 1 ? 'inside' : 'outside'; })()";
    assert_eq!(text(&page, target_box).await, "inside", "the target's box is drawn on the picture");
    // The click that opened a tab is shown on the page it clicked in, not the tab it opened.
    goto(&page, &format!("{}/r/bundle/?step={help}", viewer.root())).await;
    let caption = text(&page, "document.querySelector('.shot .muted').textContent").await;
    assert!(caption.starts_with("Before: the page the step acted on"), "{caption}");
    chromium.close().await.unwrap();
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn the_viewer_refuses_strangers_paths_out_of_the_bundle_and_explains_a_corrupt_zip() {
    let Some(recorded) =
        recorded("the_viewer_refuses_strangers_paths_out_of_the_bundle_and_explains_a_corrupt_zip").await
    else {
        return;
    };
    // The data directory's recordings, listed.
    let viewer = Viewer::start(recorded, None);
    let chromium = browser(&recorded.build).await;
    let page = chromium.browser.new_page("about:blank").await.unwrap();
    goto(&page, &viewer.url).await;
    let rows = number(&page, "document.querySelectorAll('tbody tr').length").await;
    assert_eq!(rows, 1.0, "the one recording of the data directory");
    assert!(page.get_cookies().await.unwrap().is_empty(), "the token is never a cookie");

    // Without the token in the path, nothing: not in a query, not as the cookie it once was, not a wrong one.
    let token = viewer.token().to_owned();
    let root = format!("/{token}");
    assert_eq!(viewer.status_of("/", None), 404);
    assert_eq!(viewer.status_of(&format!("/?token={token}"), None), 404);
    assert_eq!(viewer.status_of("/", Some(&format!("trace_view={token}"))), 404);
    assert_eq!(viewer.status_of("/0123456789abcdef0123456789abcdef/", None), 404);
    assert_eq!(viewer.status_of(&format!("{root}/"), None), 200);
    drop(viewer);

    // Out of the bundle: refused, however it is spelled; and its top-level documents, which hold what was
    // typed and sent (credentials.json the credentials' values), are never served.
    let viewer = Viewer::start(recorded, Some(&recorded.exported.bundle));
    let root = format!("/{}", viewer.token());
    for path in [
        "/r/bundle/file/../manifest.json",
        "/r/bundle/file/..%2F..%2Fetc%2Fpasswd",
        "/r/bundle/file//etc/passwd",
        "/r/other/",
        "/r/bundle/file/manifest.json",
        "/r/bundle/file/credentials.json",
        "/r/bundle/file/events.jsonl",
        "/r/bundle/file/recording.har",
    ] {
        assert_eq!(viewer.status_of(&format!("{root}{path}"), None), 404, "{path}");
    }
    let bundle = Bundle::open(&recorded.exported.bundle).unwrap();
    let screenshot = bundle.files().unwrap().into_keys().find(|file| file.starts_with("screenshots/")).unwrap();
    assert_eq!(viewer.status_of(&format!("{root}/r/bundle/file/{screenshot}"), None), 200);
    drop(viewer);

    // A corrupt zip: a page that says so.
    let corrupt = tempfile::tempdir().unwrap();
    let zip = corrupt.path().join("broken.zip");
    std::fs::write(&zip, b"PK\x03\x04 this is not a zip").unwrap();
    let viewer = Viewer::start(recorded, Some(&zip));
    goto(&page, &viewer.url).await;
    let said = text(&page, "document.body.innerText").await;
    assert!(said.contains("Cannot show this") && said.contains("cannot open the bundle"), "{said}");
    chromium.close().await.unwrap();
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn an_agents_run_is_shown_beside_the_persons_demonstration() {
    let Some(recorded) = recorded("an_agents_run_is_shown_beside_the_persons_demonstration").await else {
        return;
    };
    let runs = tempfile::tempdir().unwrap();
    let out = runs.path().join("human");
    run(
        &recorded.build.trace_replay,
        &["eval", recorded.exported.bundle.to_str().unwrap(), "--agent", "human", "--out", out.to_str().unwrap()],
    );
    let result: trace_manifest::eval::EvalResult =
        serde_json::from_str(std::fs::read_to_string(out.join("results.jsonl")).unwrap().lines().next().unwrap())
            .unwrap();
    let mut bundle = Bundle::open(&recorded.exported.bundle).unwrap();
    let (person, _) = trace_analysis::trajectory::of_bundle(&mut bundle).unwrap();

    let viewer = Viewer::start(recorded, Some(&out));
    let chromium = browser(&recorded.build).await;
    let page = chromium.browser.new_page("about:blank").await.unwrap();
    goto(&page, &viewer.url).await;
    assert_eq!(number(&page, "document.querySelectorAll('tbody tr').length").await, 1.0, "the run's one task");
    let links = page.find_elements("tbody tr td a").await.unwrap();
    links[0].click().await.unwrap();
    let compare = format!("/r/{}/compare", result.task_id);
    wait_until_at(&page, &compare, "the task leads to its comparison").await;
    page.wait_for_navigation().await.unwrap();
    // The person's steps and the agent's, side by side; the checkpoints with what reached them.
    let columns = "[...document.querySelectorAll('.steps.even ol')].map(o => o.children.length).join(',')";
    let counts: Vec<usize> = text(&page, columns).await.split(',').map(|n| n.parse().unwrap()).collect();
    assert_eq!(counts.len(), 2);
    assert_eq!(counts[0], person.len(), "every step of the person");
    assert!(counts[1] >= result.steps && counts[1] > 0, "the agent's steps: {counts:?}");
    let checkpoints = number(&page, "document.querySelectorAll('table tbody tr').length").await as usize;
    assert_eq!(checkpoints, result.checkpoints.total);
    let said = text(&page, "document.body.innerText").await;
    assert!(said.contains(&result.success_basis), "{said}");
    // An agent's step opens in its session, as a recording's does.
    let agent_step = page.find_elements(".steps.even div:nth-child(2) ol li a").await.unwrap();
    agent_step[1].click().await.unwrap();
    wait_until_at(&page, "?step=1", "the agent's step opens").await;
    page.wait_for_navigation().await.unwrap();
    assert!(
        text(&page, "document.querySelector('.steps > div:nth-child(2) h2').textContent").await.starts_with("Step 2")
    );
    chromium.close().await.unwrap();
}
