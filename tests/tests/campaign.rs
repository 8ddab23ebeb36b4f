//! End to end, crowdsourced annotation with the real extension, host and Chromium:
//! - the demonstration recorded into a data directory, then submitted to a campaign whose destination is
//!   an S3 bucket (moto's server on loopback, reached through `object_store` as a real store is): with the
//!   store stopped, the submission waits in the outbox; a host killed while the store hangs mid-upload loses
//!   nothing, and the next send resumes it; the zip and its
//!   annotation land under the campaign's key with the checksum the annotation gives, without the typed
//!   password; `trace-host collect` makes the bucket a dataset whose bundle replays every step offline;
//! - the person's side: a campaign loaded in the popup (an invalid one refused), its task recorded from its
//!   button, reviewed on the page that opens at Stop (steps, thumbnails, the password named but not shown),
//!   corrected, submitted to the bucket, and shown submitted in the popup;
//! - journeys: pages visited in the browser (so the profile's history has them) grouped on the journeys
//!   page as TRACE's rule says, an excluded site left out, a secret URL parameter replaced; one annotated
//!   (a label too short refused), submitted, and collected into `journeys.jsonl`.
//!
//! Needs `cargo xtask dist` and `.ci/install`.

use std::process::Command;

use std::time::Duration;

use trace_bundle::archive::sha256_hex;
use trace_e2e::browser::{Build, RecordingBrowser, click, click_and_wait, settle, type_into, visit, wait_for_text};
use trace_e2e::demo;
use trace_e2e::s3::S3Server;
use trace_e2e::site::DemoSite;
use trace_e2e::site::{DEMO_PASSWORD, DEMO_USER};
use trace_manifest::campaign::TaskAnnotation;

const WAIT: Duration = Duration::from_secs(20);

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_recording_is_submitted_to_a_campaigns_bucket_and_resumes_after_the_store_or_the_host_fails() {
    let Some(build) = Build::for_tests(
        "a_recording_is_submitted_to_a_campaigns_bucket_and_resumes_after_the_store_or_the_host_fails",
    ) else {
        return;
    };
    let exported = demo::record_and_export(&build).await.unwrap();
    let data = exported.data.path().to_str().unwrap().to_owned();
    let task = exported.bundle.file_stem().unwrap().to_str().unwrap().to_owned();
    let campaign = exported.data.path().join("campaign.json");
    let write_campaign = |endpoint_bucket: &str| {
        let json = serde_json::json!({
            "id": "shop-2026", "title": "The demo shop",
            "tasks": [{"id": "cart", "description": demo::DESCRIPTION, "website": exported.origin, "task_type": "action"}],
            "destination": format!("s3://{endpoint_bucket}/campaigns/")
        });
        std::fs::write(&campaign, serde_json::to_vec(&json).unwrap()).unwrap();
    };
    write_campaign("submissions");
    let host = |args: &[&str], s3: &S3Server| {
        Command::new(&build.trace_host).args(["--data", &data]).args(args).envs(s3.env()).output().unwrap()
    };

    // The store is down: the submission waits in the outbox, whole.
    let s3 = S3Server::start().expect("an S3 server for campaign submissions");
    let down = S3Server::start().expect("a second S3 server, stopped to play a store out of reach");
    let env_of_down = down.env();
    drop(down);
    let output = Command::new(&build.trace_host)
        .args(["--data", &data, "submit", &task, "--campaign", campaign.to_str().unwrap(), "--as", "cart"])
        .envs(env_of_down)
        .output()
        .unwrap();
    assert_eq!(output.status.code(), Some(1), "{}", String::from_utf8_lossy(&output.stderr));
    assert!(String::from_utf8_lossy(&output.stdout).contains("waiting  shop-2026/"));

    // The store answers no more in the middle of the upload, and the host sending it is killed there.
    s3.create_bucket("submissions");
    s3.pause();
    let mut sending = Command::new(&build.trace_host)
        .args(["--data", &data, "outbox", "--send"])
        .envs(s3.env())
        .stdout(std::process::Stdio::null())
        .spawn()
        .unwrap();
    tokio::time::sleep(Duration::from_secs(2)).await;
    assert!(sending.try_wait().unwrap().is_none(), "the upload should be hanging on the paused store");
    sending.kill().unwrap();
    sending.wait().unwrap();
    s3.resume();
    let waiting = host(&["outbox", "--json"], &s3);
    assert_eq!(waiting.status.code(), Some(1), "still waiting after the kill");
    let entries: serde_json::Value = serde_json::from_slice(&waiting.stdout).unwrap();
    assert_eq!(entries[0]["files"][0]["landed"], false, "{entries}");

    // The next send resumes it: it goes, and lands as the annotation says.
    let output = host(&["outbox", "--send", "--json"], &s3);
    let said = format!("{}{}", String::from_utf8_lossy(&output.stdout), String::from_utf8_lossy(&output.stderr));
    assert!(output.status.success(), "{said}");
    let keys: Vec<String> =
        s3.list("submissions", "campaigns").into_iter().map(|key| format!("campaigns/{key}")).collect();
    assert_eq!(keys.len(), 2, "{keys:?} after {said}");
    let zip_key = keys.iter().find(|key| key.ends_with("/cart.zip")).unwrap();
    let annotation_key = keys.iter().find(|key| key.ends_with("/cart.annotation.json")).unwrap();
    let zip = s3.get("submissions", zip_key);
    let annotation: TaskAnnotation = serde_json::from_slice(&s3.get("submissions", annotation_key)).unwrap();
    assert_eq!(
        (annotation.bundle_size, annotation.bundle_sha256.as_str()),
        (zip.len() as u64, sha256_hex(&zip).as_str())
    );
    assert_eq!(annotation.campaign_task, "cart");
    assert!(zip_key.starts_with(&format!("campaigns/shop-2026/{}/", annotation.pseudonym)));
    assert_password_absent(zip);

    // The coordinator collects the bucket into a dataset whose bundle replays every step offline.
    let dataset = exported.data.path().join("collected");
    let output = host(&["collect", "s3://submissions/campaigns", "--out", dataset.to_str().unwrap(), "--json"], &s3);
    assert!(output.status.success(), "{}", String::from_utf8_lossy(&output.stderr));
    let collected: serde_json::Value = serde_json::from_slice(&output.stdout).unwrap();
    assert_eq!(collected["per_task"], serde_json::json!({"cart": 1}), "{collected}");
    let line: serde_json::Value =
        serde_json::from_str(std::fs::read_to_string(dataset.join("tasks.jsonl")).unwrap().lines().next().unwrap())
            .unwrap();
    let bundle = dataset.join(line["bundle"].as_str().unwrap());
    let replay = Command::new(&build.trace_replay)
        .args(["run", "--human", "--json", "--headless", "--chromium"])
        .arg(&build.chromium)
        .arg(&bundle)
        .output()
        .unwrap();
    let replayed: serde_json::Value = serde_json::from_slice(&replay.stdout).unwrap();
    assert_eq!(replayed["steps_failed"], 0, "{replayed:#}");
    assert_eq!(replayed["steps_passed"], replayed["steps_total"], "{replayed:#}");
}

/// A coordinator's web server on loopback serving `files` by path, readable by the extension's popup
/// (`Access-Control-Allow-Origin: *`, as an object store or a raw file host can be set to send). Returns
/// its origin; it serves until the test ends.
async fn coordinator(files: Vec<(&'static str, String)>) -> String {
    let listener = tokio::net::TcpListener::bind("127.0.0.1:0").await.unwrap();
    let origin = format!("http://{}", listener.local_addr().unwrap());
    let mut router = axum::Router::new();
    for (path, body) in files {
        router = router.route(
            path,
            axum::routing::get(move || {
                let body = body.clone();
                async move { ([("content-type", "application/json"), ("access-control-allow-origin", "*")], body) }
            }),
        );
    }
    tokio::spawn(async move { axum::serve(listener, router).await.unwrap() });
    origin
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_campaign_task_is_recorded_from_the_popup_reviewed_and_submitted_to_the_campaigns_bucket() {
    let Some(build) =
        Build::for_tests("a_campaign_task_is_recorded_from_the_popup_reviewed_and_submitted_to_the_campaigns_bucket")
    else {
        return;
    };
    let site = DemoSite::start(0).unwrap();
    let website = site.url("/");
    let s3 = S3Server::start().expect("an S3 server for campaign submissions");
    s3.create_bucket("submissions");
    let campaign = serde_json::json!({
        "id": "shop-2026", "title": "The demo shop", "instructions": "Use the demo account.",
        "tasks": [
            {"id": "sign-in", "description": "Sign in to the shop", "website": website, "task_type": "action"},
            {"id": "help", "description": "Find the help page", "website": website, "task_type": "action"}
        ],
        "destination": "s3://submissions/campaigns/"
    });
    let invalid = r#"{"id": "shop 2026", "title": "Spaces in the id", "tasks": []}"#.to_owned();
    let server = coordinator(vec![("/campaign.json", campaign.to_string()), ("/invalid.json", invalid)]).await;

    let data = tempfile::tempdir().unwrap();
    let env = s3.env().into_iter().map(|(key, value)| (key.to_owned(), value)).collect();
    let browser = RecordingBrowser::launch_with_env(&build, data.path(), true, env).await.unwrap();
    let popup = browser.popup().await.unwrap();
    wait_for_text(&popup, "#status", WAIT, |text| text.contains("Host connected")).await.unwrap();
    let load = |url: String| {
        let popup = popup.clone();
        async move {
            popup.evaluate("document.querySelector('#campaign-url').value = ''").await.unwrap();
            type_into(&popup, "#campaign-url", &url).await.unwrap();
            click(&popup, "#campaign-fetch").await.unwrap();
        }
    };

    // Not a valid campaign: said so, nothing kept.
    load(format!("{server}/invalid.json")).await;
    let said = wait_for_text(&popup, "#campaign-message", WAIT, |text| text.contains("cannot be used")).await.unwrap();
    assert!(said.contains("its id \"shop 2026\"") && said.contains("Nothing was changed"), "{said}");
    let view_hidden = popup.evaluate("document.querySelector('#campaign-view').hidden").await.unwrap();
    assert!(view_hidden.into_value::<bool>().unwrap(), "nothing of it is shown");

    // The campaign: its tasks listed, the person known by a pseudonym.
    load(format!("{server}/campaign.json")).await;
    wait_for_text(&popup, "#campaign-message", WAIT, |text| text.contains("Loaded")).await.unwrap();
    let tasks = popup.evaluate("document.querySelectorAll('#campaign-tasks li').length").await.unwrap();
    assert_eq!(tasks.into_value::<u32>().unwrap(), 2);
    let pseudonym = wait_for_text(&popup, "#campaign-pseudonym", WAIT, |text| text.starts_with("you are p-"))
        .await
        .unwrap()
        .trim_start_matches("you are ")
        .to_owned();

    // Record its first task from its button, signing in (a password to keep out of the submission).
    click(&popup, "#campaign-tasks li[data-task='sign-in'] button").await.unwrap();
    wait_for_text(&popup, "#status", WAIT, |text| text.starts_with("Recording")).await.unwrap();
    let origin = website.trim_end_matches('/').to_owned();
    let tab = demo::recorded_tab(&browser, &origin).await.unwrap();
    tab.wait_for_navigation().await.unwrap();
    settle().await;
    visit(&tab, &site.url("/login")).await.unwrap();
    type_into(&tab, "#username", DEMO_USER).await.unwrap();
    type_into(&tab, "#password", DEMO_PASSWORD).await.unwrap();
    click_and_wait(&tab, "#login-submit").await.unwrap();
    demo::wait_for_url(&tab, "/account").await.unwrap();
    settle().await;
    popup.bring_to_front().await.unwrap();
    click(&popup, "#stop").await.unwrap();
    wait_for_text(&popup, "#status", WAIT, |text| text.starts_with("Host connected")).await.unwrap();
    wait_for_text(&popup, "#campaign-tasks li[data-task='sign-in']", WAIT, |text| text.starts_with("✓")).await.unwrap();

    // Its review opens: the steps with thumbnails, the password named but not shown.
    let review_prefix = format!("chrome-extension://{}/review.html", trace_manifest::EXTENSION_ID);
    let review = browser.tab_at(&review_prefix, WAIT).await.unwrap();
    wait_for_text(&review, "#review-steps", WAIT, |text| text.contains("navigate to")).await.unwrap();
    let credentials = wait_for_text(&review, "#review-credentials", WAIT, |text| !text.is_empty()).await.unwrap();
    assert!(credentials.contains("password") && credentials.contains("{{credentials."), "{credentials}");
    let page_text: String = review.evaluate("document.body.innerText").await.unwrap().into_value().unwrap();
    assert!(!page_text.contains(DEMO_PASSWORD), "the review shows the typed password");
    let deadline = std::time::Instant::now() + WAIT;
    loop {
        let shown = review
            .evaluate("document.querySelectorAll('#review-steps img[src^=\"data:image/jpeg\"]:not([hidden])').length")
            .await
            .unwrap()
            .into_value::<u32>()
            .unwrap();
        if shown > 0 {
            break;
        }
        assert!(std::time::Instant::now() < deadline, "no thumbnail came");
        tokio::time::sleep(Duration::from_millis(200)).await;
    }

    // The person corrects the description and submits: it lands under the campaign's key, checked.
    review.evaluate("document.querySelector('#review-description').value = ''").await.unwrap();
    type_into(&review, "#review-description", "Sign in to the shop with the demo account").await.unwrap();
    click(&review, "#review-submit").await.unwrap();
    let said = wait_for_text(&review, "#review-message", Duration::from_secs(120), |text| {
        text.starts_with("Submitted") || text.starts_with("Kept") || text.starts_with("Not") || text.contains("Cannot")
    })
    .await
    .unwrap();
    assert!(said.starts_with(&format!("Submitted as shop-2026/{pseudonym}/sign-in")), "{said}");
    let prefix = format!("campaigns/shop-2026/{pseudonym}");
    let mut keys = s3.list("submissions", &prefix);
    keys.sort();
    assert_eq!(keys, ["sign-in.annotation.json", "sign-in.zip"]);
    let zip = s3.get("submissions", &format!("{prefix}/sign-in.zip"));
    let annotation: TaskAnnotation =
        serde_json::from_slice(&s3.get("submissions", &format!("{prefix}/sign-in.annotation.json"))).unwrap();
    assert_eq!(
        (annotation.bundle_size, annotation.bundle_sha256.as_str()),
        (zip.len() as u64, sha256_hex(&zip).as_str())
    );
    assert_eq!(annotation.description, "Sign in to the shop with the demo account");
    assert_password_absent(zip);

    // The popup shows it submitted.
    popup.reload().await.unwrap();
    wait_for_text(&popup, "#campaign-tasks li[data-task='sign-in'] .submission", WAIT, |text| text == "submitted")
        .await
        .unwrap();
    let other = popup.find_element("#campaign-tasks li[data-task='help']").await.unwrap().inner_text().await.unwrap();
    assert!(!other.unwrap_or_default().starts_with("✓"));
    browser.close().await.unwrap();
    site.stop();

    let output = Command::new(&build.trace_host)
        .args(["--data", data.path().to_str().unwrap(), "tasks", "--json"])
        .output()
        .unwrap();
    let tasks: serde_json::Value = serde_json::from_slice(&output.stdout).unwrap();
    assert_eq!(tasks[0]["source"], "sign-in", "{tasks}");
}

fn assert_password_absent(zip: Vec<u8>) {
    let password = DEMO_PASSWORD.as_bytes();
    let mut archive = zip::ZipArchive::new(std::io::Cursor::new(zip)).unwrap();
    for index in 0..archive.len() {
        let mut file = archive.by_index(index).unwrap();
        let mut bytes = Vec::new();
        std::io::Read::read_to_end(&mut file, &mut bytes).unwrap();
        assert!(!bytes.windows(password.len()).any(|window| window == password), "the password is in {}", file.name());
    }
}

/// Goes to `url` as a person typing it in the address bar does (a journey's start, by TRACE's rule).
async fn type_address(page: &chromiumoxide::Page, url: &str) {
    use chromiumoxide::cdp::browser_protocol::page::{NavigateParams, TransitionType};
    let params = NavigateParams::builder().url(url).transition_type(TransitionType::Typed).build().unwrap();
    page.goto(params).await.unwrap();
    page.wait_for_navigation().await.unwrap();
    settle().await;
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn journeys_of_the_browsers_history_are_grouped_annotated_submitted_and_collected() {
    let Some(build) =
        Build::for_tests("journeys_of_the_browsers_history_are_grouped_annotated_submitted_and_collected")
    else {
        return;
    };
    let site = DemoSite::start(0).unwrap();
    let store = tempfile::tempdir().unwrap();
    let campaign = serde_json::json!({
        "id": "web-2026", "title": "What you did on the web", "journeys": true,
        "tasks": [], "destination": store.path().to_str().unwrap()
    });
    let server = coordinator(vec![("/campaign.json", campaign.to_string())]).await;
    let data = tempfile::tempdir().unwrap();
    let browser = RecordingBrowser::launch(&build, data.path(), true).await.unwrap();

    // Two journeys on the shop, each started by typing an address, and one on a site the person excludes.
    let token = "a81f3c9d2e7b4a60f1c2";
    let tab = browser.browser().new_page("about:blank").await.unwrap();
    type_address(&tab, &site.url("/")).await;
    click_and_wait(&tab, "#deals-link").await.unwrap();
    type_address(&tab, &site.url(&format!("/login?token={token}"))).await;
    click_and_wait(&tab, "#home-link").await.unwrap();
    let elsewhere = site.url("/clock").replace("127.0.0.1", "localhost");
    type_address(&tab, &elsewhere).await;
    click_and_wait(&tab, "#home-link").await.unwrap();

    let popup = browser.popup().await.unwrap();
    type_into(&popup, "#campaign-url", &format!("{server}/campaign.json")).await.unwrap();
    click(&popup, "#campaign-fetch").await.unwrap();
    wait_for_text(&popup, "#campaign-message", WAIT, |text| text.contains("Loaded")).await.unwrap();
    let pseudonym = wait_for_text(&popup, "#campaign-pseudonym", WAIT, |text| text.starts_with("you are p-"))
        .await
        .unwrap()
        .trim_start_matches("you are ")
        .to_owned();
    let hidden: bool =
        popup.evaluate("document.querySelector('#campaign-journeys').hidden").await.unwrap().into_value().unwrap();
    assert!(!hidden, "a campaign that asks for journeys offers them");

    let journeys = browser.extension_page("journeys.html").await.unwrap();
    wait_for_text(&journeys, "#journeys-message", WAIT, |text| text.contains("journeys in the last")).await.unwrap();
    type_into(&journeys, "#journeys-excluded", "localhost").await.unwrap();
    click(&journeys, "#journeys-load").await.unwrap();
    settle().await;
    let said = wait_for_text(&journeys, "#journeys-message", WAIT, |text| text.contains("journeys in the last"))
        .await
        .unwrap();
    let shown: Vec<Vec<String>> = journeys
        .evaluate(
            "[...document.querySelectorAll('section.journey')].map(s => [...s.querySelectorAll('li .url')].map(u => u.textContent))",
        )
        .await
        .unwrap()
        .into_value()
        .unwrap();
    let home = site.url("/");
    let shop_home = home.clone();
    // `/deals` redirects: the person's step is where it landed.
    let first = vec![home.clone(), site.url("/search?q=mug")];
    let second = vec![site.url("/login?token=REDACTED"), home];
    assert_eq!(shown, vec![first, second], "{said}");

    // The second journey annotated; a label too short is refused and nothing is sent.
    let section = "section.journey:nth-of-type(2)";
    click(&journeys, &format!("{section} .journey-select")).await.unwrap();
    click(&journeys, &format!("{section} li:nth-of-type(2) .key-url")).await.unwrap();
    journeys
        .evaluate(format!(
            "(() => {{ const s = document.querySelector('{section}'); s.querySelector('.automate').value = 'yes'; \
             s.querySelector('.feasibility').value = 'feasible'; }})()"
        ))
        .await
        .unwrap();
    type_into(&journeys, &format!("{section} .label"), "sign in").await.unwrap();
    click(&journeys, "#journeys-submit").await.unwrap();
    let refused = wait_for_text(&journeys, &format!("{section} .error"), WAIT, |text| !text.is_empty()).await.unwrap();
    assert!(refused.contains("at least 15"), "{refused}");
    assert!(std::fs::read_dir(store.path()).unwrap().next().is_none(), "nothing may leave before it is valid");
    journeys.evaluate(format!("document.querySelector('{section} .label').value = ''")).await.unwrap();
    type_into(&journeys, &format!("{section} .label"), "Sign in to the shop and go back to its front page")
        .await
        .unwrap();
    click(&journeys, "#journeys-submit").await.unwrap();
    let said = wait_for_text(&journeys, "#journeys-message", Duration::from_secs(60), |text| {
        text.starts_with("Submitted") || text.starts_with("Not") || text.contains("kept for sending")
    })
    .await
    .unwrap();
    assert_eq!(said, "Submitted 1 journeys: they landed in the campaign's store.");
    browser.close().await.unwrap();
    site.stop();

    // The coordinator collects them: the secret parameter replaced, the person's answers kept.
    let dataset = data.path().join("collected");
    let output = Command::new(&build.trace_host)
        .args(["collect", store.path().to_str().unwrap(), "--out", dataset.to_str().unwrap(), "--json"])
        .output()
        .unwrap();
    assert!(output.status.success(), "{}", String::from_utf8_lossy(&output.stderr));
    let collected: serde_json::Value = serde_json::from_slice(&output.stdout).unwrap();
    assert_eq!(collected["journeys"], 1, "{collected}");
    let lines = std::fs::read_to_string(dataset.join("journeys.jsonl")).unwrap();
    assert!(!lines.contains(token), "the token must not leave the machine: {lines}");
    let line: serde_json::Value = serde_json::from_str(lines.lines().next().unwrap()).unwrap();
    assert_eq!(line["pseudonym"], pseudonym.as_str());
    assert_eq!(line["annotation"]["key_url"], shop_home);
    assert_eq!(line["annotation"]["automate"], true);
    assert_eq!(line["annotation"]["feasibility"], "feasible");
}
