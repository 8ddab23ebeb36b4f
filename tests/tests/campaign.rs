//! End to end: the demonstration recorded through the extension into a data directory, then submitted to a
//! campaign whose destination is an S3 bucket (moto's server on loopback, reached through `object_store`
//! as a real store is): the zip and its annotation land under the campaign's key with the checksum the
//! annotation gives, and the zip holds no typed secret. With the store stopped, the submission waits in
//! the outbox and goes once the store is back. `trace-host collect` then makes the bucket a dataset whose
//! bundle replays every step offline. And the person's side: a campaign loaded in the extension's popup
//! (an invalid one refused), its task recorded from its button with the task's id as the source. Needs
//! `cargo xtask dist` and `.ci/install`.

use std::process::Command;

use std::time::Duration;

use trace_e2e::browser::{Build, RecordingBrowser, click, settle, type_into, wait_for_text};
use trace_e2e::demo;
use trace_e2e::s3::S3Server;
use trace_e2e::site::DEMO_PASSWORD;
use trace_e2e::site::DemoSite;
use trace_manifest::archive::sha256_hex;
use trace_manifest::campaign::TaskAnnotation;

const WAIT: Duration = Duration::from_secs(20);

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_recording_is_submitted_to_a_campaigns_bucket_and_waits_while_the_store_is_down() {
    let Some(build) =
        Build::for_tests("a_recording_is_submitted_to_a_campaigns_bucket_and_waits_while_the_store_is_down")
    else {
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

    // Back (the running server): it goes, and lands as the annotation says.
    s3.create_bucket("submissions");
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
    let password = DEMO_PASSWORD.as_bytes();
    let mut archive = zip::ZipArchive::new(std::io::Cursor::new(zip)).unwrap();
    for index in 0..archive.len() {
        let mut file = archive.by_index(index).unwrap();
        let mut bytes = Vec::new();
        std::io::Read::read_to_end(&mut file, &mut bytes).unwrap();
        assert!(!bytes.windows(password.len()).any(|window| window == password), "the password is in {}", file.name());
    }

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
async fn a_campaign_loaded_in_the_popup_records_its_task_with_the_tasks_id_as_the_source() {
    let Some(build) =
        Build::for_tests("a_campaign_loaded_in_the_popup_records_its_task_with_the_tasks_id_as_the_source")
    else {
        return;
    };
    let site = DemoSite::start(0).unwrap();
    let website = site.url("/");
    let campaign = serde_json::json!({
        "id": "shop-2026", "title": "The demo shop", "instructions": "Use the demo account.",
        "tasks": [
            {"id": "browse", "description": "Look at the shop's products", "website": website, "task_type": "action"},
            {"id": "help", "description": "Find the help page", "website": website, "task_type": "action"}
        ]
    });
    let invalid = r#"{"id": "shop 2026", "title": "Spaces in the id", "tasks": []}"#.to_owned();
    let server = coordinator(vec![("/campaign.json", campaign.to_string()), ("/invalid.json", invalid)]).await;

    let data = tempfile::tempdir().unwrap();
    let browser = RecordingBrowser::launch(&build, data.path(), true).await.unwrap();
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
    wait_for_text(&popup, "#campaign-pseudonym", WAIT, |text| text.starts_with("you are p-")).await.unwrap();

    // Record its first task from its button; once stopped, it is marked recorded.
    click(&popup, "#campaign-tasks li[data-task='browse'] button").await.unwrap();
    wait_for_text(&popup, "#status", WAIT, |text| text.starts_with("Recording")).await.unwrap();
    let origin = website.trim_end_matches('/').to_owned();
    let tab = demo::recorded_tab(&browser, &origin).await.unwrap();
    tab.wait_for_navigation().await.unwrap();
    settle().await;
    popup.bring_to_front().await.unwrap();
    click(&popup, "#stop").await.unwrap();
    wait_for_text(&popup, "#status", WAIT, |text| text.starts_with("Host connected")).await.unwrap();
    wait_for_text(&popup, "#campaign-tasks li[data-task='browse']", WAIT, |text| text.starts_with("✓")).await.unwrap();
    let other = popup.find_element("#campaign-tasks li[data-task='help']").await.unwrap().inner_text().await.unwrap();
    assert!(!other.unwrap_or_default().starts_with("✓"));
    browser.close().await.unwrap();
    site.stop();

    let output = Command::new(&build.trace_host)
        .args(["--data", data.path().to_str().unwrap(), "tasks", "--json"])
        .output()
        .unwrap();
    let tasks: serde_json::Value = serde_json::from_slice(&output.stdout).unwrap();
    assert_eq!(tasks[0]["source"], "browse", "{tasks}");
}
