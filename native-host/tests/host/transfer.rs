//! Bundles in and out of the data directory: validate, import (and what it refuses), install.

use std::io::Write;

use trace_host::client::TaskMessages;
use trace_manifest::event::BodyPart;
use trace_manifest::task::TaskType;
use zip::write::SimpleFileOptions;

use crate::common::*;

/// Records and exports a small stopped task; returns the zip's path.
fn exported_task(scratch: &Scratch, id: &str) -> std::path::PathBuf {
    let mut host = scratch.host();
    let mut task = TaskMessages::new(task_id(id));
    let mut messages = vec![
        task.start(task_start(id, TaskType::Action)),
        task.events(vec![
            navigation(1.0, "http://127.0.0.1:8000/"),
            request(2.0, "1", "GET", "http://127.0.0.1:8000/", &[], None),
            response(3.0, "1", "http://127.0.0.1:8000/", 200, "text/html", &[]),
        ]),
    ];
    messages.extend(task.body("1", BodyPart::Response, b"<h1>hello</h1>", 1024));
    messages.push(task.stop(T0 + 10_000.0, None));
    send_all(&mut host, &task, &messages);
    host.close().unwrap();
    let zip = scratch.path(&format!("{id}.zip"));
    scratch.cli_json(&["export", id, "--out", zip.to_str().unwrap(), "--json"]);
    zip
}

#[test]
fn an_exported_bundle_imports_into_another_data_directory_once() {
    let here = Scratch::new();
    let zip = exported_task(&here, "travels");
    let there = Scratch::new();
    let report = there.cli_json(&["import", zip.to_str().unwrap(), "--json"]);
    assert_eq!(
        (report["task_id"].as_str(), report["events"].as_u64()),
        (Some("travels"), Some(4)),
        "three events and the body"
    );
    let tasks = there.cli_json(&["tasks", "--json"]);
    assert_eq!(
        (tasks[0]["id"].as_str(), tasks[0]["status"].as_str(), tasks[0]["imported"].as_bool()),
        (Some("travels"), Some("stopped"), Some(true))
    );
    assert_eq!(there.cli_json(&["validate", there.capture("travels").to_str().unwrap(), "--json"])["valid"], true);
    // And out again: the same files.
    let again = there.path("again.zip");
    there.cli_json(&["export", "travels", "--out", again.to_str().unwrap(), "--json"]);
    assert_eq!(there.cli_json(&["validate", again.to_str().unwrap(), "--json"])["valid"], true);

    let twice = there.cli(&["import", zip.to_str().unwrap()]);
    assert_eq!(twice.status.code(), Some(2));
    assert!(
        String::from_utf8_lossy(&twice.stderr).contains("already exists"),
        "{}",
        String::from_utf8_lossy(&twice.stderr)
    );
}

/// Copies a zip, letting `edit` change each entry (return None to drop it) and `extra` add entries.
fn rewrite_zip(from: &std::path::Path, to: &std::path::Path, extra: impl FnOnce(&mut zip::ZipWriter<std::fs::File>)) {
    let mut source = zip::ZipArchive::new(std::fs::File::open(from).unwrap()).unwrap();
    let mut out = zip::ZipWriter::new(std::fs::File::create(to).unwrap());
    for index in 0..source.len() {
        let entry = source.by_index_raw(index).unwrap();
        out.raw_copy_file(entry).unwrap();
    }
    extra(&mut out);
    out.finish().unwrap();
}

#[test]
fn import_refuses_zip_slip_absolute_paths_links_and_oversized_bundles_writing_nothing() {
    let scratch = Scratch::new();
    let zip = exported_task(&scratch, "source");
    let target = Scratch::new();
    let options = SimpleFileOptions::default();
    type AddEntry = Box<dyn FnOnce(&mut zip::ZipWriter<std::fs::File>)>;
    let cases: Vec<(&str, AddEntry)> = vec![
        (
            "unsafe path \"../escaped.txt\"",
            Box::new(move |z| {
                z.start_file("../escaped.txt", options).unwrap();
                z.write_all(b"x").unwrap();
            }),
        ),
        (
            "unsafe path \"/tmp/absolute.txt\"",
            Box::new(move |z| {
                z.start_file("/tmp/absolute.txt", options).unwrap();
                z.write_all(b"x").unwrap();
            }),
        ),
        (
            "symbolic link",
            Box::new(move |z| {
                z.add_symlink("resources/link", "/etc/passwd", options).unwrap();
            }),
        ),
    ];
    for (expected, extra) in cases {
        let evil = scratch.path("evil.zip");
        rewrite_zip(&zip, &evil, extra);
        let output = target.cli(&["import", evil.to_str().unwrap()]);
        let stderr = String::from_utf8_lossy(&output.stderr);
        assert_eq!(output.status.code(), Some(2), "{expected}: {stderr}");
        assert!(stderr.contains(expected), "expected {expected:?} in {stderr}");
    }
    assert!(!scratch.dir.path().join("escaped.txt").exists() && !std::path::Path::new("/tmp/absolute.txt").exists());

    let output = target.cli(&["import", zip.to_str().unwrap(), "--max-size", "100"]);
    assert!(
        String::from_utf8_lossy(&output.stderr).contains("more than the limit of 100"),
        "{}",
        String::from_utf8_lossy(&output.stderr)
    );
    assert_eq!(target.cli_json(&["tasks", "--json"]), serde_json::json!([]));
    assert!(std::fs::read_dir(target.data().join("captures")).unwrap().next().is_none(), "nothing was extracted");
}

/// A PNG of `width`×`height` pixels of noise, which no compressor shrinks: as costly as a real screenshot.
fn noisy_png(seed: u32, width: u32, height: u32) -> Vec<u8> {
    let mut state = seed | 1;
    let image = image::RgbImage::from_fn(width, height, |_, _| {
        state ^= state << 13;
        state ^= state >> 17;
        state ^= state << 5;
        image::Rgb([state as u8, (state >> 8) as u8, (state >> 16) as u8])
    });
    let mut png = Vec::new();
    image.write_to(&mut std::io::Cursor::new(&mut png), image::ImageFormat::Png).unwrap();
    png
}

#[test]
fn an_exported_zip_keeps_a_screen_shown_again_once_and_gives_every_screenshot_back_as_recorded() {
    let scratch = Scratch::new();
    let (home, cart) = (noisy_png(1, 160, 120), noisy_png(2, 160, 120));
    let mut host = scratch.host();
    let mut task = TaskMessages::new(task_id("screens"));
    let messages = vec![
        task.start(task_start("screens", TaskType::Action)),
        task.events(vec![navigation(1.0, "http://127.0.0.1:8000/")]),
        task.screenshot(T0 + 20.0, 1, &home, "load"),
        task.screenshot(T0 + 30.0, 1, &cart, "action"),
        // The person went back: the same screen, the same image.
        task.screenshot(T0 + 40.0, 1, &home, "load"),
        task.stop(T0 + 10_000.0, None),
    ];
    send_all(&mut host, &task, &messages);
    host.close().unwrap();
    let zip = scratch.path("screens.zip");
    scratch.cli_json(&["export", "screens", "--out", zip.to_str().unwrap(), "--json"]);

    let mut archive = zip::ZipArchive::new(std::fs::File::open(&zip).unwrap()).unwrap();
    let names: Vec<String> = archive.file_names().map(str::to_owned).collect();
    assert!(names.iter().all(|name| !name.starts_with("screenshots/")), "screenshots are packed: {names:?}");
    let packed = archive.by_name(trace_bundle::pack::PACK_FILE).unwrap().compressed_size();
    let distinct = (home.len() + cart.len()) as u64;
    assert!(packed < distinct + 2048, "the pack takes {packed} bytes for {distinct} bytes of distinct screenshots");

    let mut bundle = trace_bundle::archive::Bundle::open(&zip).unwrap();
    let shots: Vec<String> =
        bundle.files().unwrap().into_keys().filter(|name| name.starts_with("screenshots/")).collect();
    let read: Vec<Vec<u8>> = shots.iter().map(|name| bundle.read(name).unwrap()).collect();
    assert_eq!(read, [home.clone(), cart, home], "{shots:?}");
    assert_eq!(scratch.cli_json(&["validate", zip.to_str().unwrap(), "--json"])["valid"], true);

    // Imported elsewhere, each screenshot is a file of its own again.
    let there = Scratch::new();
    there.cli_json(&["import", zip.to_str().unwrap(), "--json"]);
    for (name, bytes) in shots.iter().zip(&read) {
        assert_eq!(&std::fs::read(there.capture("screens").join(name)).unwrap(), bytes, "{name}");
    }
}

#[test]
fn validate_names_every_damaged_missing_and_unindexed_file() {
    let scratch = Scratch::new();
    exported_task(&scratch, "damaged");
    let dir = scratch.capture("damaged");
    let manifest = read_json(&dir.join("manifest.json"));
    let body = manifest["files"]
        .as_array()
        .unwrap()
        .iter()
        .find(|f| f["path"].as_str().unwrap().starts_with("resources/"))
        .unwrap();
    std::fs::write(dir.join(body["path"].as_str().unwrap()), b"<h1>HELLO</h1>").unwrap();
    std::fs::remove_file(dir.join("storage.json")).unwrap();
    std::fs::write(dir.join("stray.txt"), b"?").unwrap();
    let output = scratch.cli(&["validate", dir.to_str().unwrap()]);
    let text = String::from_utf8_lossy(&output.stdout);
    assert_eq!(output.status.code(), Some(1), "{text}");
    assert!(text.contains("3 problem(s)"), "{text}");
    assert!(text.contains(&format!("{}: sha256 is", body["path"].as_str().unwrap())), "{text}");
    assert!(text.contains("storage.json: indexed in manifest.json but missing"), "{text}");
    assert!(text.contains("stray.txt: present but not indexed"), "{text}");

    let not_a_bundle = scratch.cli(&["validate", scratch.path("nothing-here").to_str().unwrap()]);
    assert_eq!(not_a_bundle.status.code(), Some(2));
}

#[test]
fn install_registers_the_host_for_a_profile_and_uninstall_removes_it() {
    let scratch = Scratch::new();
    let profile = scratch.path("profile");
    let written = scratch.cli_json(&["install", "--user-data-dir", profile.to_str().unwrap(), "--json"]);
    let path = profile.join("NativeMessagingHosts").join("dev.trace.host.json");
    assert_eq!(written[0]["manifest"], path.to_str().unwrap());
    let manifest = read_json(&path);
    assert_eq!(manifest["name"], "dev.trace.host");
    assert_eq!(manifest["type"], "stdio");
    assert_eq!(manifest["path"], host_exe().canonicalize().unwrap().to_str().unwrap());
    assert_eq!(
        manifest["allowed_origins"],
        serde_json::json!([format!("chrome-extension://{}/", trace_manifest::EXTENSION_ID)])
    );

    let config = scratch.path("config");
    let output = std::process::Command::new(host_exe())
        .args(["install", "--browser", "all", "--json"])
        .env("XDG_CONFIG_HOME", &config)
        .output()
        .unwrap();
    assert!(output.status.success());
    assert!(config.join("google-chrome/NativeMessagingHosts/dev.trace.host.json").exists());
    assert!(config.join("chromium/NativeMessagingHosts/dev.trace.host.json").exists());

    let removed = scratch.cli_json(&["uninstall", "--user-data-dir", profile.to_str().unwrap(), "--json"]);
    assert_eq!(removed.as_array().unwrap().len(), 1);
    assert!(!path.exists());
}
