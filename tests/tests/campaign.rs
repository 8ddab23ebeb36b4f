//! End to end: the demonstration recorded through the extension into a data directory, then submitted to a
//! campaign whose destination is an S3 bucket (moto's server on loopback, reached through `object_store`
//! as a real store is): the zip and its annotation land under the campaign's key with the checksum the
//! annotation gives, and the zip holds no typed secret. With the store stopped, the submission waits in
//! the outbox and goes once the store is back. `trace-host collect` then makes the bucket a dataset whose
//! bundle replays every step offline. Needs `cargo xtask dist` and `.ci/install`.

use std::process::Command;

use trace_e2e::browser::Build;
use trace_e2e::demo;
use trace_e2e::s3::S3Server;
use trace_e2e::site::DEMO_PASSWORD;
use trace_manifest::archive::sha256_hex;
use trace_manifest::campaign::TaskAnnotation;

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
