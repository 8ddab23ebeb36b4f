//! Issue #31: `trace-host collect` over a store that careless and hostile people wrote to. Each test puts
//! one good submission in a store, then beside it what a security probe measured against the release
//! binary (a 3 GiB zip, an annotation linked to `/dev/zero`, a FIFO, a zip linked to a file outside the
//! store, copies credited as submissions, a 512 MiB journey label), and checks that the bad entry is
//! reported in `collected.json` with why, within a fixed memory, and that the good one is still collected
//! and credited once.

use std::io::Write as _;
use std::path::{Path, PathBuf};
use std::process::{Command, Stdio};
use std::time::{Duration, Instant};

use trace_bundle::archive::sha256_hex;
use trace_manifest::campaign::{MAX_LABEL_CHARS, MAX_SUBMISSION_BYTES};

use crate::common::{Scratch, read_json, record_login_and_cart};

/// The campaign every test submits to.
const CAMPAIGN: &str = "shop-2026";
/// A pseudonym that sorts after every `p-<hex>` one: its submissions are looked at after the good one.
const STRANGER: &str = "p-zz-stranger";
/// Address space `collect` is run in: the good submission fits; a file read whole past it aborts.
const MEMORY_MIB: u64 = 512;

/// A store holding one good submission: the recording `login-cart`, sent as the campaign's task `mug`.
struct Store {
    scratch: Scratch,
    root: PathBuf,
    /// The pseudonym of the good submission.
    pseudonym: String,
}

impl Store {
    fn with_a_good_submission() -> Store {
        let scratch = Scratch::new();
        record_login_and_cart(&scratch, "login-cart");
        let root = scratch.path("store");
        submit(&scratch, "login-cart", &root);
        let pseudonym = std::fs::read_to_string(scratch.data().join("pseudonym")).unwrap();
        Store { scratch, root, pseudonym }
    }

    /// `<campaign>/<pseudonym>/`, made.
    fn folder(&self, pseudonym: &str) -> PathBuf {
        let folder = self.root.join(CAMPAIGN).join(pseudonym);
        std::fs::create_dir_all(&folder).unwrap();
        folder
    }

    /// The good submission's zip.
    fn good_zip(&self) -> PathBuf {
        self.root.join(CAMPAIGN).join(&self.pseudonym).join("mug.zip")
    }

    /// The good submission's annotation, as sent under `pseudonym`'s `task` for the zip at `zip`.
    fn annotation(&self, pseudonym: &str, task: &str, zip: &Path) -> serde_json::Value {
        let mut annotation = read_json(&self.root.join(CAMPAIGN).join(&self.pseudonym).join("mug.annotation.json"));
        let bytes = std::fs::read(zip).unwrap();
        annotation["pseudonym"] = pseudonym.into();
        annotation["campaign_task"] = task.into();
        annotation["bundle_size"] = bytes.len().into();
        annotation["bundle_sha256"] = sha256_hex(&bytes).into();
        annotation
    }

    fn write_annotation(&self, pseudonym: &str, task: &str, annotation: &serde_json::Value) {
        let path = self.folder(pseudonym).join(format!("{task}.annotation.json"));
        std::fs::write(path, serde_json::to_vec(annotation).unwrap()).unwrap();
    }

    /// `trace-host collect` of the store under `prlimit --as`, ended if it has not finished in two
    /// minutes (a read that waits forever): its report, once it succeeded.
    fn collect(&self) -> Collected {
        let out = self.scratch.path("dataset");
        let mut child = Command::new("prlimit")
            .arg(format!("--as={}", MEMORY_MIB << 20))
            .arg(crate::common::host_exe())
            .arg("--data")
            .arg(self.scratch.data())
            .args(["collect", self.root.to_str().unwrap(), "--out", out.to_str().unwrap(), "--json"])
            .env_remove("TRACE_DATA")
            .stdin(Stdio::null())
            .stdout(Stdio::piped())
            .stderr(Stdio::piped())
            .spawn()
            .unwrap();
        let started = Instant::now();
        while child.try_wait().unwrap().is_none() {
            if started.elapsed() > Duration::from_secs(120) {
                child.kill().unwrap();
                child.wait().unwrap();
                panic!("collect still ran after two minutes: it waits on something in the store");
            }
            std::thread::sleep(Duration::from_millis(100));
        }
        let output = child.wait_with_output().unwrap();
        let stderr = String::from_utf8_lossy(&output.stderr);
        assert!(output.status.success(), "collect failed ({:?}): {stderr}", output.status);
        let report: serde_json::Value = serde_json::from_slice(&output.stdout).unwrap();
        assert_eq!(read_json(&out.join("collected.json")), report);
        Collected { report, out }
    }
}

/// Submits the recording `task` as the campaign task `mug` to `destination`.
fn submit(scratch: &Scratch, task: &str, destination: &Path) {
    let path = scratch.path(&format!("campaign-{task}.json"));
    let campaign = serde_json::json!({
        "id": CAMPAIGN,
        "title": "Shopping tasks",
        "tasks": [{"id": "mug", "description": "Put the blue mug in the cart", "website": "http://127.0.0.1:8000/",
                   "task_type": "action"}],
        "journeys": true,
        "destination": destination.to_str().unwrap()
    });
    std::fs::write(&path, serde_json::to_vec(&campaign).unwrap()).unwrap();
    let output = scratch.cli(&["submit", task, "--campaign", path.to_str().unwrap(), "--as", "mug"]);
    assert!(output.status.success(), "{}", String::from_utf8_lossy(&output.stderr));
}

struct Collected {
    report: serde_json::Value,
    out: PathBuf,
}

impl Collected {
    /// Why `submission` was not taken; fails when it was, or was not reported.
    fn reason(&self, submission: &str) -> String {
        let skipped = self.report["skipped"].as_array().unwrap();
        let found = skipped.iter().find(|skipped| skipped["submission"] == submission);
        found.unwrap_or_else(|| panic!("{submission} is not reported as skipped: {}", self.report))["reason"]
            .as_str()
            .unwrap()
            .to_owned()
    }

    /// The good submission is in the dataset and credited once, and no pseudonym is credited with more than
    /// the dataset holds.
    fn holds_the_good_submission(&self, store: &Store) {
        let good = format!("{CAMPAIGN}/{}/mug", store.pseudonym);
        assert_eq!(self.report["submissions"], serde_json::json!([good]), "{}", self.report);
        assert_eq!(self.report["per_pseudonym"], serde_json::json!({ store.pseudonym.clone(): 1 }));
        assert_eq!(self.report["per_task"], serde_json::json!({"mug": 1}));
        let lines = std::fs::read_to_string(self.out.join("tasks.jsonl")).unwrap();
        assert_eq!(lines.lines().count(), 1);
        assert!(lines.contains("\"task_id\":\"login-cart\""), "{lines}");
    }
}

/// A zip whose entries are the good one's, with a comment of its own: other bytes, the same bundle.
fn copy_of(zip: &Path, to: &Path, comment: &str) {
    rewrite_zip(zip, to, |out| out.set_comment(comment.to_owned()));
}

/// Copies a zip entry by entry (compressed bytes as they are), letting `extra` add to it.
fn rewrite_zip(from: &Path, to: &Path, extra: impl FnOnce(&mut zip::ZipWriter<std::fs::File>)) {
    let mut source = zip::ZipArchive::new(std::fs::File::open(from).unwrap()).unwrap();
    let mut out = zip::ZipWriter::new(std::fs::File::create(to).unwrap());
    for index in 0..source.len() {
        out.raw_copy_file(source.by_index_raw(index).unwrap()).unwrap();
    }
    extra(&mut out);
    out.finish().unwrap();
}

/// Issue #31: a 3 GiB zip was read whole into memory before its size was checked (3.16 GB resident). It
/// is refused by its size, before a byte of it is read, within 512 MiB of address space.
#[test]
fn a_zip_larger_than_the_limit_is_refused_by_its_size_before_it_is_read() {
    let store = Store::with_a_good_submission();
    let zip = store.folder(STRANGER).join("mug.zip");
    let huge = std::fs::File::create(&zip).unwrap();
    huge.set_len(3 << 30).unwrap();
    let mut annotation = store.annotation(STRANGER, "mug", &store.good_zip());
    annotation["bundle_size"] = (3u64 << 30).into();
    store.write_annotation(STRANGER, "mug", &annotation);

    let collected = store.collect();
    let reason = collected.reason(&format!("{CAMPAIGN}/{STRANGER}/mug"));
    let limit = format!("{} bytes, more than the limit of {MAX_SUBMISSION_BYTES}", 3u64 << 30);
    assert!(reason.contains("its zip cannot be taken") && reason.contains(&limit), "{reason}");
    collected.holds_the_good_submission(&store);
}

/// Issue #31: an annotation that was a link to `/dev/zero` was read until memory ran out, with no report.
/// It is refused as a link without being read; so is a zip that is a link to a file outside the store,
/// which was collected.
#[test]
fn links_are_refused_without_being_followed() {
    let store = Store::with_a_good_submission();
    let zero = store.folder("p-zero");
    std::os::unix::fs::symlink("/dev/zero", zero.join("mug.annotation.json")).unwrap();
    std::fs::copy(store.good_zip(), zero.join("mug.zip")).unwrap();

    // A second recording, sent somewhere else, and linked into the store under a pseudonym of its own.
    record_login_and_cart(&store.scratch, "second-run");
    let outside = store.scratch.path("outside");
    submit(&store.scratch, "second-run", &outside);
    let sent = outside.join(CAMPAIGN).join(&store.pseudonym);
    std::os::unix::fs::symlink(sent.join("mug.zip"), store.folder(STRANGER).join("mug.zip")).unwrap();
    let mut annotation = read_json(&sent.join("mug.annotation.json"));
    annotation["pseudonym"] = STRANGER.into();
    store.write_annotation(STRANGER, "mug", &annotation);

    let collected = store.collect();
    let reason = collected.reason(&format!("{CAMPAIGN}/p-zero/mug"));
    assert!(
        reason.contains("its annotation cannot be taken: it or a folder on its path is a symbolic link"),
        "{reason}"
    );
    let reason = collected.reason(&format!("{CAMPAIGN}/{STRANGER}/mug"));
    assert!(reason.contains("its zip cannot be taken: it or a folder on its path is a symbolic link"), "{reason}");
    collected.holds_the_good_submission(&store);
}

/// Issue #31: a FIFO in the store made `collect` wait forever. A FIFO, as an annotation or as a zip, is
/// refused at once.
#[test]
fn a_fifo_in_the_store_is_refused_without_waiting_on_it() {
    let store = Store::with_a_good_submission();
    let fifo_annotation = store.folder("p-fifo-annotation").join("mug.annotation.json");
    let fifo_zip = store.folder(STRANGER).join("mug.zip");
    for fifo in [&fifo_annotation, &fifo_zip] {
        let made = Command::new("mkfifo").arg(fifo).status().unwrap();
        assert!(made.success(), "mkfifo {}", fifo.display());
    }
    let annotation = store.annotation(STRANGER, "mug", &store.good_zip());
    store.write_annotation(STRANGER, "mug", &annotation);

    let collected = store.collect();
    let reason = collected.reason(&format!("{CAMPAIGN}/p-fifo-annotation/mug"));
    assert!(reason.contains("its annotation cannot be taken: it is a FIFO, not a regular file"), "{reason}");
    let reason = collected.reason(&format!("{CAMPAIGN}/{STRANGER}/mug"));
    assert!(reason.contains("its zip cannot be taken: it is a FIFO, not a regular file"), "{reason}");
    collected.holds_the_good_submission(&store);
}

/// Issue #31: a pseudonym that sent copies of a bundle already taken (each zip's bytes its own), a zip-slip
/// zip whose annotation named the recording taken, and an annotation that spoke for another pseudonym was
/// credited with 4 submissions while the dataset held 1. Each is reported, the copies as duplicates, and
/// only what the dataset holds is credited.
#[test]
fn a_pseudonym_is_credited_only_with_what_the_dataset_holds() {
    let store = Store::with_a_good_submission();
    let folder = store.folder(STRANGER);
    for task in ["copy-1", "copy-2"] {
        let zip = folder.join(format!("{task}.zip"));
        copy_of(&store.good_zip(), &zip, task);
        store.write_annotation(STRANGER, task, &store.annotation(STRANGER, task, &zip));
    }
    let slip = folder.join("slip.zip");
    rewrite_zip(&store.good_zip(), &slip, |out| {
        out.start_file("../../escaped.txt", zip::write::SimpleFileOptions::default()).unwrap();
        out.write_all(b"out of the staging folder").unwrap();
    });
    store.write_annotation(STRANGER, "slip", &store.annotation(STRANGER, "slip", &slip));
    // Sent under the stranger's key, it claims to be the good submission's pseudonym's.
    let claimed = folder.join("claimed.zip");
    copy_of(&store.good_zip(), &claimed, "claimed");
    store.write_annotation(STRANGER, "claimed", &store.annotation(&store.pseudonym, "claimed", &claimed));

    let collected = store.collect();
    for copy in ["copy-1", "copy-2"] {
        let reason = collected.reason(&format!("{CAMPAIGN}/{STRANGER}/{copy}"));
        let first = format!("{CAMPAIGN}/{}/mug", store.pseudonym);
        assert!(
            reason.contains("a duplicate: the recording login-cart was submitted already") && reason.contains(&first)
        );
    }
    let reason = collected.reason(&format!("{CAMPAIGN}/{STRANGER}/slip"));
    assert!(reason.contains("its zip is not a valid bundle") && reason.contains("../../escaped.txt"), "{reason}");
    let reason = collected.reason(&format!("{CAMPAIGN}/{STRANGER}/claimed"));
    let expected = format!("claims the pseudonym {:?}, but it was sent under {STRANGER:?}", store.pseudonym);
    assert!(reason.contains(&expected), "{reason}");
    collected.holds_the_good_submission(&store);
}

/// One line of `journeys.jsonl`: a journey of two visits, labelled `label`.
fn journey(pseudonym: &str, id: &str, label: &str) -> String {
    let step = |visit: u64, path: &str| {
        serde_json::json!({"visit_id": visit, "url": format!("http://127.0.0.1:8000{path}"), "title": path,
                           "time": "2026-11-24T10:00:00Z"})
    };
    serde_json::json!({
        "campaign": CAMPAIGN, "pseudonym": pseudonym, "submitted_at": "2026-11-24T11:00:00Z",
        "journey": {"id": id, "grouped_by": "trace", "steps": [step(1, "/"), step(2, "/cart")]},
        "annotation": {"journey_id": id, "key_url": "http://127.0.0.1:8000/cart", "automate": true,
                       "label": label, "feasibility": "feasible"}
    })
    .to_string()
}

/// Issue #31: a journey label of 512 MiB was taken. A label longer than the extension allows is refused
/// (the same check, the same limit), a journeys file larger than its limit is refused by its size before it
/// is read, and a journey sent twice is counted once; the good journeys beside them are collected.
#[test]
fn journey_labels_and_journeys_files_are_bounded_and_counted_once() {
    let store = Store::with_a_good_submission();
    let good = journey(&store.pseudonym, "j-good", "Put the blue mug in my cart");
    let long = journey(&store.pseudonym, "j-long", &"Buy a mug. ".repeat(MAX_LABEL_CHARS));
    let mine = store.folder(&store.pseudonym).join("journeys.jsonl");
    std::fs::write(&mine, format!("{good}\n{long}\n{good}\n")).unwrap();
    // A 512 MiB label: a line that starts as a journey, and never ends.
    let huge = store.folder(STRANGER).join("journeys.jsonl");
    let mut file = std::fs::File::create(&huge).unwrap();
    file.write_all(br#"{"campaign":"shop-2026","pseudonym":"p-zz-stranger","annotation":{"label":""#).unwrap();
    file.set_len(512 << 20).unwrap();

    let collected = store.collect();
    let key = format!("{CAMPAIGN}/{}/journeys.jsonl", store.pseudonym);
    let reason = collected.reason(&format!("{key} line 2"));
    assert!(reason.contains(&format!("more than the {MAX_LABEL_CHARS}")), "{reason}");
    assert!(collected.reason(&format!("{key} line 3")).contains("a duplicate: the journey j-good"));
    let reason = collected.reason(&format!("{CAMPAIGN}/{STRANGER}/journeys.jsonl"));
    assert!(reason.contains(&format!("{} bytes, more than the limit of {}", 512 << 20, 64 << 20)), "{reason}");
    assert_eq!(collected.report["journeys"], 1, "{}", collected.report);
    assert_eq!(collected.report["journeys_per_pseudonym"], serde_json::json!({ store.pseudonym.clone(): 1 }));
    assert_eq!(std::fs::read_to_string(collected.out.join("journeys.jsonl")).unwrap(), format!("{good}\n"));
    collected.holds_the_good_submission(&store);
}
