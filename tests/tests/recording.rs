//! End to end: Debian's Chromium, headless, with the built extension and the real `trace-host` registered
//! in a fresh profile, records the demonstration of [`trace_e2e::demo`] on the demo site, driven from the
//! popup with real input events; the test checks the bundle the host wrote. Needs `cargo xtask dist`.

use std::collections::BTreeSet;
use std::time::Duration;

use trace_e2e::browser::{Build, RecordingBrowser, wait_for_text};
use trace_e2e::demo;
use trace_e2e::site::DemoSite;

const WAIT: Duration = Duration::from_secs(20);

/// One Chromium at a time: these machines have two cores, and a starved browser delays what it records.
static ONE_BROWSER: tokio::sync::Mutex<()> = tokio::sync::Mutex::const_new(());

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn the_popup_says_plainly_when_the_host_is_not_installed() {
    let _one = ONE_BROWSER.lock().await;
    let build = Build::from_workspace().unwrap();
    let data = tempfile::tempdir().unwrap();
    let browser = RecordingBrowser::launch(&build, data.path(), false).await.unwrap();
    let popup = browser.popup().await.unwrap();
    let status = wait_for_text(&popup, "#status", WAIT, |t| t.contains("not connected")).await.unwrap();
    assert!(status.contains("Install it with: trace-host install"), "{status}");
    browser.close().await.unwrap();
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_demonstration_on_the_demo_site_becomes_a_complete_bundle() {
    let _one = ONE_BROWSER.lock().await;
    let build = Build::from_workspace().unwrap();
    let site = DemoSite::start(0).unwrap();
    // TRACE_E2E_KEEP=1 keeps the data directory, to look at what was recorded.
    let data = tempfile::tempdir().unwrap();
    let (_cleanup, data_dir) = match std::env::var_os("TRACE_E2E_KEEP") {
        Some(_) => (None, data.keep()),
        None => {
            let path = data.path().to_owned();
            (Some(data), path)
        }
    };
    eprintln!("data directory: {}", data_dir.display());
    let demo::Demonstration { bundle, served_before_stop } = demo::record(&build, &site, &data_dir).await.unwrap();
    let har: serde_json::Value = serde_json::from_slice(&std::fs::read(bundle.join("recording.har")).unwrap()).unwrap();
    let entries = har["log"]["entries"].as_array().unwrap();
    let recorded: BTreeSet<String> = entries
        .iter()
        .filter_map(|e| e["request"]["url"].as_str())
        .filter_map(|url| url.strip_prefix(&site.url("")).map(|p| format!("/{p}")))
        .collect();
    for served in served_before_stop {
        assert!(
            recorded.contains(&served.path_and_query),
            "{} {} was served but not recorded",
            served.method,
            served.path_and_query
        );
    }
    let without_body: Vec<String> = entries
        .iter()
        .filter(|e| e["response"]["status"] == 200)
        .filter(|e| !e["response"]["content"]["_file"].as_str().is_some_and(|f| bundle.join(f).exists()))
        .map(|e| format!("{} ({})", e["request"]["url"], e["_resourceType"]))
        .collect();
    assert!(without_body.is_empty(), "responses recorded without their body: {without_body:#?}");
    let login = entries
        .iter()
        .find(|e| e["request"]["method"] == "POST" && e["request"]["url"] == site.url("/login").as_str())
        .unwrap();
    assert!(login["request"]["postData"]["text"].as_str().unwrap().contains("csrf="));
    assert_eq!(login["response"]["status"], 303);
    assert!(login["response"]["cookies"].as_array().unwrap().iter().any(|c| c["name"] == "session"));

    let manifest: serde_json::Value =
        serde_json::from_slice(&std::fs::read(bundle.join("manifest.json")).unwrap()).unwrap();
    assert!(manifest["counts"]["screenshots"].as_u64().unwrap() >= 3, "{}", manifest["counts"]);
    let storage: serde_json::Value =
        serde_json::from_slice(&std::fs::read(bundle.join("storage.json")).unwrap()).unwrap();
    let stop = storage["snapshots"].as_array().unwrap().last().unwrap();
    assert_eq!(stop["phase"], "stop");
    assert!(stop["cookies"].as_array().unwrap().iter().any(|c| c["name"] == "session"), "{stop}");
    assert!(manifest["counts"]["dom_snapshots"].as_u64().unwrap() >= 3, "{}", manifest["counts"]);
    let snapshots: Vec<String> = manifest["files"]
        .as_array()
        .unwrap()
        .iter()
        .filter_map(|f| f["path"].as_str().filter(|p| p.ends_with(".html")).map(str::to_owned))
        .collect();
    let account_page = snapshots
        .iter()
        .map(|path| std::fs::read_to_string(bundle.join(path)).unwrap())
        .find(|html| html.contains("Signed in as"));
    assert!(account_page.is_some(), "no DOM snapshot of the account page among {snapshots:?}");
    let events = std::fs::read_to_string(bundle.join("events.jsonl")).unwrap();
    assert!(
        events.contains(r#""type":"console","level":"info","text":"loaded 3 products""#),
        "the shop's console line"
    );
    assert!(events.contains(r#""type":"tab","op":"created""#), "the help tab was followed");
    let validate = std::process::Command::new(&build.trace_host).arg("validate").arg(&bundle).output().unwrap();
    assert!(validate.status.success(), "{}", String::from_utf8_lossy(&validate.stdout));
}
