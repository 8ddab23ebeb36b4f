//! `trace-replay` given bad input: a corrupt or incomplete bundle, a missing Chromium, a port in use, a
//! bundle from a newer format version. Each must end in a clear error naming the problem (exit code 2),
//! never a panic or a hang, and `serve` must refuse before it launches Chromium.
//!
//! The real binary is driven as a user would. Bundles are written by hand from a minimal valid one, then
//! broken one way per test. `serve` is given a stand-in Chromium that leaves a mark if it is ever started,
//! so a test sees whether the refusal came before the launch, and no test here needs a real browser.

use std::io::Write as _;
use std::path::{Path, PathBuf};
use std::process::{Command, Stdio};
use std::sync::LazyLock;
use std::time::{Duration, Instant};

use serde_json::{Value, json};
use trace_replay::archive::ReplayArchive;

use crate::common::{body_path, files_under, har, har_entry, write_bundle, write_file, write_manifest};

/// Generous: other test binaries drive Chromium on the same two cores.
const TIMEOUT: Duration = Duration::from_secs(60);

/// The page's body, stored as a file of the bundle (`content._file`).
const PAGE_HTML: &[u8] = b"<html><title>Shop</title><p>hello</p></html>";

/// What one run of `trace-replay` left behind.
struct Outcome {
    code: Option<i32>,
    stdout: String,
    stderr: String,
}

impl Outcome {
    /// Asserts a refusal: exit code 2 (main.rs's "error"), no panic, and every one of `needles` in stderr.
    #[track_caller]
    fn assert_refused(&self, needles: &[&str]) {
        // Shown with --nocapture, to read the messages a user would get.
        println!("{}", self.stderr.trim_end());
        assert!(!self.stderr.contains("panicked"), "trace-replay panicked:\n{}", self.stderr);
        assert_eq!(self.code, Some(2), "expected exit code 2; stdout:\n{}\nstderr:\n{}", self.stdout, self.stderr);
        for needle in needles {
            assert!(self.stderr.contains(needle), "stderr does not say {needle:?}:\n{}", self.stderr);
        }
        let causes: Vec<&str> = self.stderr.trim_end().split(": ").collect();
        assert!(
            causes.windows(2).all(|pair| pair[0] != pair[1]),
            "stderr says the same cause twice in a row:\n{}",
            self.stderr
        );
    }
}

/// Runs `trace-replay` with `args`, killing it after [`TIMEOUT`] so that a hang fails the test instead of
/// stalling the suite. Output goes to files, which cannot fill up and block the child the way pipes can.
fn trace_replay(args: &[&str], chromium_marker: Option<&Path>) -> Outcome {
    let scratch = tempfile::tempdir().unwrap();
    let stdout_path = scratch.path().join("stdout");
    let stderr_path = scratch.path().join("stderr");
    let mut command = Command::new(env!("CARGO_BIN_EXE_trace-replay"));
    command
        .args(args)
        .stdin(Stdio::null())
        .stdout(std::fs::File::create(&stdout_path).unwrap())
        .stderr(std::fs::File::create(&stderr_path).unwrap())
        .env_remove("TRACE_LOG");
    if let Some(marker) = chromium_marker {
        command.env("FAKE_CHROMIUM_MARKER", marker);
    }
    let mut child = command.spawn().expect("trace-replay starts");
    let deadline = Instant::now() + TIMEOUT;
    let status = loop {
        if let Some(status) = child.try_wait().unwrap() {
            break status;
        }
        if Instant::now() > deadline {
            child.kill().unwrap();
            child.wait().unwrap();
            panic!(
                "trace-replay {args:?} hung for {TIMEOUT:?}; stderr so far:\n{}",
                std::fs::read_to_string(&stderr_path).unwrap()
            );
        }
        std::thread::sleep(Duration::from_millis(50));
    };
    Outcome {
        code: status.code(),
        stdout: std::fs::read_to_string(&stdout_path).unwrap(),
        stderr: std::fs::read_to_string(&stderr_path).unwrap(),
    }
}

fn inspect(bundle: &Path) -> Outcome {
    trace_replay(&["inspect", path_str(bundle)], None)
}

/// A stand-in for Chromium: a script that creates the file `$FAKE_CHROMIUM_MARKER` and fails. Written
/// once, so that no test writes an executable while another forks (which can make exec fail with
/// "text file busy").
static FAKE_CHROMIUM: LazyLock<(tempfile::TempDir, PathBuf)> = LazyLock::new(|| {
    use std::os::unix::fs::PermissionsExt as _;
    let dir = tempfile::tempdir().unwrap();
    let script = dir.path().join("chromium");
    std::fs::write(&script, "#!/bin/sh\n: > \"$FAKE_CHROMIUM_MARKER\"\nexit 1\n").unwrap();
    std::fs::set_permissions(&script, std::fs::Permissions::from_mode(0o755)).unwrap();
    (dir, script)
});

/// Runs `serve BUNDLE --headless` with the stand-in Chromium and `extra` arguments, and asserts that it was
/// refused with every one of `needles` in stderr before Chromium was started.
#[track_caller]
fn assert_serve_refused(bundle: &Path, extra: &[&str], needles: &[&str]) {
    let scratch = tempfile::tempdir().unwrap();
    let marker = scratch.path().join("chromium-was-started");
    let mut args = vec!["serve", path_str(bundle), "--headless", "--chromium", path_str(&FAKE_CHROMIUM.1)];
    args.extend_from_slice(extra);
    let outcome = trace_replay(&args, Some(&marker));
    outcome.assert_refused(needles);
    assert!(!marker.exists(), "serve started Chromium before refusing:\n{}", outcome.stderr);
}

fn path_str(path: &Path) -> &str {
    path.to_str().expect("temporary paths are UTF-8")
}

fn page_body_path() -> String {
    body_path(PAGE_HTML)
}

/// The bundle's task, whose id `inspect` shows.
const TASK_ID: &str = "bad-input";

fn minimal_har() -> Value {
    har(vec![
        har_entry(
            "http://shop.test/",
            json!({ "size": PAGE_HTML.len(), "mimeType": "text/html", "_file": page_body_path() }),
        ),
        har_entry("http://shop.test/style.css", json!({ "size": 6, "mimeType": "text/css", "text": "p{a:b}" })),
        har_entry("https://tracker.test/beacon?id=1", json!({ "size": 2, "mimeType": "text/plain", "text": "ok" })),
        har_entry("http://tracker.test/beacon?id=2", json!({ "size": 3, "mimeType": "text/plain", "text": "yes" })),
    ])
}

/// Writes a minimal valid bundle into `dir`: a HAR of one page and four requests (one body stored as a
/// file), `events.jsonl`, `storage.json`, an `ignored.json` naming the tracker, and `manifest.json` last,
/// indexing the rest as the host would.
fn write_minimal_bundle(dir: &Path) {
    write_file(dir, &page_body_path(), PAGE_HTML);
    write_file(dir, "ignored.json", br#"["tracker.test/beacon", "ads.test", "  "]"#);
    write_bundle(dir, TASK_ID, &minimal_har(), &json!({ "snapshots": [] }));
}

/// A fresh temporary directory holding the minimal bundle in `bundle/`.
fn minimal_bundle() -> (tempfile::TempDir, PathBuf) {
    let scratch = tempfile::tempdir().unwrap();
    let bundle = scratch.path().join("bundle");
    write_minimal_bundle(&bundle);
    (scratch, bundle)
}

/// The files of `dir` as an uncompressed zip, the same tree `trace-host export` writes. Written by hand
/// (this crate does not depend on `zip`): local headers, the central directory, its end record.
fn zip_of(dir: &Path) -> Vec<u8> {
    const MSDOS_1980_01_01: u16 = 0x21;
    let mut zip = Vec::new();
    let mut central = Vec::new();
    let files = files_under(dir);
    for (name, bytes) in &files {
        let offset = zip.len() as u32;
        let (crc, size) = (crc32(bytes), bytes.len() as u32);
        // The fields local and central headers share: version 2.0, no flags, stored, time, date, crc, sizes.
        let mut common = Vec::new();
        for field in [20u16, 0, 0, 0, MSDOS_1980_01_01] {
            common.extend(field.to_le_bytes());
        }
        for field in [crc, size, size] {
            common.extend(field.to_le_bytes());
        }
        common.extend((name.len() as u16).to_le_bytes());
        common.extend(0u16.to_le_bytes()); // no extra field

        zip.extend(0x0403_4b50u32.to_le_bytes());
        zip.extend(&common);
        zip.extend(name.as_bytes());
        zip.extend(bytes);

        central.extend(0x0201_4b50u32.to_le_bytes());
        central.extend(20u16.to_le_bytes()); // made by MS-DOS, version 2.0: no Unix modes, so no links
        central.extend(&common);
        for field in [0u16, 0, 0] {
            central.extend(field.to_le_bytes()); // comment length, disk, internal attributes
        }
        central.extend(0u32.to_le_bytes()); // external attributes
        central.extend(offset.to_le_bytes());
        central.extend(name.as_bytes());
    }
    let central_offset = zip.len() as u32;
    zip.extend(&central);
    zip.extend(0x0605_4b50u32.to_le_bytes());
    for field in [0u16, 0, files.len() as u16, files.len() as u16] {
        zip.extend(field.to_le_bytes());
    }
    zip.extend((central.len() as u32).to_le_bytes());
    zip.extend(central_offset.to_le_bytes());
    zip.extend(0u16.to_le_bytes()); // no comment
    zip
}

/// CRC-32 (IEEE), as zip entries carry it.
fn crc32(bytes: &[u8]) -> u32 {
    let mut crc = !0u32;
    for byte in bytes {
        crc ^= u32::from(*byte);
        for _ in 0..8 {
            crc = if crc & 1 == 1 { (crc >> 1) ^ 0xEDB8_8320 } else { crc >> 1 };
        }
    }
    !crc
}

#[test]
fn inspect_summarizes_the_minimal_bundle_with_what_its_ignore_list_removes() {
    let (_scratch, bundle) = minimal_bundle();
    let text = inspect(&bundle);
    assert_eq!(text.code, Some(0), "stderr:\n{}", text.stderr);
    assert!(text.stdout.contains("task bad-input (action, stopped)"), "{}", text.stdout);
    assert!(text.stdout.contains("pages (1):\n  Shop"), "{}", text.stdout);
    assert!(text.stdout.contains("removes 2 requests"), "{}", text.stdout);

    let json = trace_replay(&["inspect", path_str(&bundle), "--json"], None);
    assert_eq!(json.code, Some(0), "stderr:\n{}", json.stderr);
    let summary: Value = serde_json::from_str(&json.stdout).unwrap();
    assert_eq!(summary["manifest"]["task"]["id"], "bad-input");
    assert_eq!(summary["pages"], json!(["Shop"]));
    assert_eq!(
        summary["hosts"],
        json!([
            { "host": "shop.test", "requests": 2, "body_bytes": PAGE_HTML.len() + 6 },
            { "host": "tracker.test", "requests": 2, "body_bytes": 5 },
        ])
    );
    assert_eq!(
        summary["ignored"],
        json!([
            { "pattern": "tracker.test/beacon", "requests": 2, "body_bytes": 5 },
            { "pattern": "ads.test", "requests": 0, "body_bytes": 0 },
        ])
    );

    let zip_path = bundle.with_extension("zip");
    std::fs::write(&zip_path, zip_of(&bundle)).unwrap();
    let zipped = trace_replay(&["inspect", path_str(&zip_path), "--json"], None);
    assert_eq!(zipped.code, Some(0), "the same bundle as a zip; stderr:\n{}", zipped.stderr);
    assert_eq!(serde_json::from_str::<Value>(&zipped.stdout).unwrap(), summary);
}

#[test]
fn a_bundle_folder_holding_a_link_is_refused_before_anything_is_served() {
    let outside = tempfile::tempdir().unwrap();
    std::fs::write(outside.path().join("secret"), b"a file outside the bundle").unwrap();
    // A body replaced by a link to a file outside (as `unzip` restores one), and a dot-named link.
    for (link, replaces) in [(page_body_path(), true), (".cache".to_owned(), false)] {
        let (_scratch, bundle) = minimal_bundle();
        if replaces {
            std::fs::remove_file(bundle.join(&link)).unwrap();
        }
        std::os::unix::fs::symlink(outside.path().join("secret"), bundle.join(&link)).unwrap();
        let needles = [format!("{link:?} is a symbolic link")];
        let needles: Vec<&str> = needles.iter().map(String::as_str).collect();
        inspect(&bundle).assert_refused(&needles);
        assert_serve_refused(&bundle, &[], &needles);
    }
}

#[test]
fn a_nonexistent_path_is_refused_by_name() {
    let scratch = tempfile::tempdir().unwrap();
    let missing = scratch.path().join("no-such-bundle");
    let needles = [&format!("cannot open the bundle {}: No such file or directory", path_str(&missing))[..]];
    inspect(&missing).assert_refused(&needles);
    assert_serve_refused(&missing, &[], &needles);
}

#[test]
fn a_fifo_is_refused_instead_of_waiting_for_a_writer() {
    let scratch = tempfile::tempdir().unwrap();
    let fifo = scratch.path().join("bundle.zip");
    let made = Command::new("mkfifo").arg(&fifo).status().expect("mkfifo runs");
    assert!(made.success());
    let needles = ["neither a directory nor a zip file"];
    inspect(&fifo).assert_refused(&needles);
    assert_serve_refused(&fifo, &[], &needles);
}

#[test]
fn a_directory_without_a_manifest_is_refused() {
    let (_scratch, bundle) = minimal_bundle();
    std::fs::remove_file(bundle.join("manifest.json")).unwrap();
    let needles = ["not a usable bundle", "no manifest.json"];
    inspect(&bundle).assert_refused(&needles);
    assert_serve_refused(&bundle, &[], &needles);

    let empty = tempfile::tempdir().unwrap();
    inspect(empty.path()).assert_refused(&needles);
}

#[test]
fn a_manifest_that_is_not_json_is_refused() {
    let (_scratch, bundle) = minimal_bundle();
    write_file(&bundle, "manifest.json", b"{\"format\": \"trace-bundle\", \"format_vers");
    let needles = ["manifest.json is not valid", "EOF"];
    inspect(&bundle).assert_refused(&needles);
    assert_serve_refused(&bundle, &[], &needles);
}

#[test]
fn a_bundle_of_a_newer_format_asks_for_an_upgrade() {
    let (_scratch, bundle) = minimal_bundle();
    let newer = trace_manifest::FORMAT_VERSION + 1;
    write_manifest(&bundle, newer, TASK_ID);
    let found = format!("format version {newer}");
    let supported = format!("newer than this program understands ({})", trace_manifest::FORMAT_VERSION);
    let needles = [found.as_str(), supported.as_str(), "upgrade TRACE"];
    inspect(&bundle).assert_refused(&needles);
    assert_serve_refused(&bundle, &[], &needles);
}

#[test]
fn a_har_naming_a_body_the_bundle_lacks_is_refused() {
    let (_scratch, bundle) = minimal_bundle();
    let body = page_body_path();
    std::fs::remove_file(bundle.join(&body)).unwrap();
    let needles = ["http://shop.test/", &body, "which the bundle does not hold"];
    inspect(&bundle).assert_refused(&needles);
    assert_serve_refused(&bundle, &[], &needles);
}

#[test]
fn a_har_naming_a_request_body_the_bundle_lacks_is_refused() {
    let (_scratch, bundle) = minimal_bundle();
    let mut har = minimal_har();
    har["log"]["entries"][1]["request"]["postData"] =
        json!({ "mimeType": "application/octet-stream", "_file": "resources/0000" });
    write_file(&bundle, "recording.har", har.to_string().as_bytes());
    let needles = ["http://shop.test/style.css", "resources/0000", "which the bundle does not hold"];
    inspect(&bundle).assert_refused(&needles);
    assert_serve_refused(&bundle, &[], &needles);
}

#[test]
fn a_har_that_does_not_parse_is_refused() {
    let (_scratch, bundle) = minimal_bundle();
    write_file(&bundle, "recording.har", br#"{"log": {"version": "1.2", "entries": 7}}"#);
    let needles = ["recording.har does not parse"];
    inspect(&bundle).assert_refused(&needles);
    assert_serve_refused(&bundle, &[], &needles);

    std::fs::remove_file(bundle.join("recording.har")).unwrap();
    let needles = ["not a usable bundle", "no recording.har"];
    inspect(&bundle).assert_refused(&needles);
    assert_serve_refused(&bundle, &[], &needles);
}

/// Issue #11: the HAR is parsed whole, so one larger than any recording's (here 300 MiB, a sparse file that
/// takes no disk) is refused by its size before a byte of it is read, by `inspect` and by `serve`.
#[test]
fn a_har_too_large_to_parse_in_memory_is_refused_before_it_is_read() {
    let (_scratch, bundle) = minimal_bundle();
    let har = std::fs::OpenOptions::new().write(true).open(bundle.join("recording.har")).unwrap();
    har.set_len(300 << 20).unwrap();
    let needles = ["recording.har is 314572800 bytes, more than the limit"];
    inspect(&bundle).assert_refused(&needles);
    assert_serve_refused(&bundle, &[], &needles);
}

/// Issue #11: a body is held in memory while it is served, so one over `--max-file-size` is refused when
/// it would be read, and the limit is the user's to raise.
#[test]
fn a_body_over_the_file_size_limit_is_not_read() {
    let (_scratch, bundle) = minimal_bundle();
    let limits = trace_bundle::archive::ZipLimits { max_entry_bytes: 16, ..Default::default() };
    let archive = ReplayArchive::open_with_limits(&bundle, limits).unwrap();
    let page = archive.exchanges.iter().position(|exchange| exchange.body_file.is_some()).unwrap();
    let error = format!("{:#}", archive.body(page).unwrap_err());
    assert!(error.contains("more than the limit of 16 for one file"), "{error}");
    let archive = ReplayArchive::open(&bundle).unwrap();
    assert_eq!(archive.body(page).unwrap().as_slice(), PAGE_HTML);
}

#[test]
fn an_inline_body_that_is_not_base64_is_refused() {
    let (_scratch, bundle) = minimal_bundle();
    let mut har = minimal_har();
    har["log"]["entries"][2]["response"]["content"]["encoding"] = json!("base64");
    har["log"]["entries"][2]["response"]["content"]["text"] = json!("not base64!");
    write_file(&bundle, "recording.har", har.to_string().as_bytes());
    let needles = ["https://tracker.test/beacon?id=1", "base64"];
    inspect(&bundle).assert_refused(&needles);
    assert_serve_refused(&bundle, &[], &needles);
}

#[test]
fn a_truncated_zip_is_refused() {
    let (scratch, bundle) = minimal_bundle();
    let whole = zip_of(&bundle);
    let truncated = scratch.path().join("truncated.zip");
    std::fs::write(&truncated, &whole[..whole.len() / 2]).unwrap();
    let needles = ["cannot open the bundle", "truncated.zip is not a zip file"];
    inspect(&truncated).assert_refused(&needles);
    assert_serve_refused(&truncated, &[], &needles);

    let empty = scratch.path().join("empty.zip");
    std::fs::write(&empty, b"").unwrap();
    inspect(&empty).assert_refused(&["empty.zip is not a zip file"]);
}

#[test]
fn a_zip_whose_har_is_damaged_names_the_file() {
    let (scratch, bundle) = minimal_bundle();
    let mut zip = zip_of(&bundle);
    // Flip one byte inside the stored recording.har: its CRC no longer matches.
    let har = minimal_har().to_string();
    let at = zip.windows(har.len()).position(|window| window == har.as_bytes()).unwrap() + har.len() / 2;
    zip[at] ^= 0x01;
    let damaged = scratch.path().join("damaged.zip");
    std::fs::write(&damaged, &zip).unwrap();
    let needles = ["recording.har"];
    inspect(&damaged).assert_refused(&needles);
    assert_serve_refused(&damaged, &[], &needles);
}

#[test]
fn a_missing_chromium_is_named_with_how_to_get_one() {
    let (_scratch, bundle) = minimal_bundle();
    let outcome =
        trace_replay(&["serve", path_str(&bundle), "--headless", "--chromium", "/nonexistent/chromium"], None);
    outcome.assert_refused(&["Chromium is not at /nonexistent/chromium", "--chromium"]);

    // TRACE_CHROMIUM names it when --chromium does not, for serve and run alike.
    for command in ["serve", "run"] {
        let output = Command::new(env!("CARGO_BIN_EXE_trace-replay"))
            .args([command, path_str(&bundle), "--headless"])
            .args((command == "run").then_some("--human"))
            .env("TRACE_CHROMIUM", "/nonexistent/from-the-environment")
            .stdin(Stdio::null())
            .output()
            .unwrap();
        let stderr = String::from_utf8_lossy(&output.stderr);
        assert_eq!(output.status.code(), Some(2), "{command}: {stderr}");
        assert!(stderr.contains("Chromium is not at /nonexistent/from-the-environment"), "{command}: {stderr}");
    }
}

#[test]
fn a_devtools_port_in_use_is_refused_before_chromium_starts() {
    let (_scratch, bundle) = minimal_bundle();
    let taken = std::net::TcpListener::bind(("127.0.0.1", 0)).unwrap();
    let port = taken.local_addr().unwrap().port().to_string();
    assert_serve_refused(&bundle, &["--cdp-port", &port], &[&format!("port {port} is in use"), "--cdp-port"]);
    drop(taken);
}

#[test]
fn a_malformed_ignore_list_is_refused_by_name() {
    let (scratch, bundle) = minimal_bundle();
    let list = scratch.path().join("ignore.json");
    for (contents, problem) in [
        (&b"{\"tracker.test\": true}"[..], "a JSON array of strings"),
        (b"[\"tracker.test\", 7]", "a JSON array of strings"),
        (b"[\"tracker.test\"", "EOF"),
    ] {
        std::fs::File::create(&list).unwrap().write_all(contents).unwrap();
        assert_serve_refused(&bundle, &["--ignore-list", path_str(&list)], &[path_str(&list), problem]);
    }
    let missing = scratch.path().join("no-such-list.json");
    assert_serve_refused(&bundle, &["--ignore-list", path_str(&missing)], &["cannot read", path_str(&missing)]);
}

#[test]
fn a_malformed_ignore_list_inside_the_bundle_is_refused() {
    let (_scratch, bundle) = minimal_bundle();
    write_file(&bundle, "ignored.json", br#"{"tracker.test": true}"#);
    let needles = ["ignored.json", "a JSON array of strings"];
    inspect(&bundle).assert_refused(&needles);
    assert_serve_refused(&bundle, &[], &needles);
}

#[test]
fn a_corrupt_storage_file_is_refused() {
    let (_scratch, bundle) = minimal_bundle();
    write_file(&bundle, "storage.json", b"[1, 2");
    let needles = ["storage.json does not parse"];
    inspect(&bundle).assert_refused(&needles);
    assert_serve_refused(&bundle, &[], &needles);
}

/// Replaces a document of the minimal bundle by `mib` MiB of `first`, then `piece(n)` for n = 0, 1, …,
/// then `last`: the shapes issue #11's audit found to take the most memory per byte.
fn write_large_document(
    bundle: &Path,
    name: &str,
    mib: usize,
    first: &str,
    piece: impl Fn(usize) -> String,
    last: &str,
) {
    let mut file = std::io::BufWriter::new(std::fs::File::create(bundle.join(name)).unwrap());
    let mut size = 0;
    file.write_all(first.as_bytes()).unwrap();
    for n in 0.. {
        if size >= mib << 20 {
            break;
        }
        let piece = piece(n);
        size += piece.len();
        file.write_all(piece.as_bytes()).unwrap();
    }
    file.write_all(last.as_bytes()).unwrap();
}

/// Small navigation events, `mib` MiB of them.
fn write_many_small_events(bundle: &Path, mib: usize) {
    let event = |n: usize| {
        format!(
            r#"{{"id":{n},"ts":{}.0,"type":"navigation","url":"http://shop.test/","cause":"typed","main_frame":true}}"#,
            n + 1
        ) + "\n"
    };
    write_large_document(bundle, "events.jsonl", mib, "", event, "");
}

/// A HAR of entries with few, short headers and no bodies, `mib` MiB of them.
fn write_many_har_entries(bundle: &Path, mib: usize) {
    let entry = |n: usize| {
        let comma = if n == 0 { "" } else { "," };
        let entry = har_entry(&format!("http://shop.test/{n}"), json!({ "size": 0, "mimeType": "text/plain" }));
        format!("{comma}{entry}")
    };
    let first = r#"{"log":{"version":"1.2","creator":{"name":"x","version":"0"},"pages":[],"entries":["#;
    write_large_document(bundle, "recording.har", mib, first, entry, "]}}");
}

/// `trace-replay ARGS` under `prlimit --as=MIB MiB`, with `TRACE_MAX_MEMORY` set to `max_memory` bytes:
/// asserts it ended by itself (out of memory, a process aborts) and says what it said.
fn trace_replay_in_little_memory(mib: u64, max_memory: u64, args: &[&str], marker: &Path) -> Outcome {
    let output = Command::new("prlimit")
        .arg(format!("--as={}", mib << 20))
        .arg(env!("CARGO_BIN_EXE_trace-replay"))
        .args(args)
        .env("TRACE_MAX_MEMORY", max_memory.to_string())
        // glibc gives each thread that allocates an arena of its own, reserving 64 MiB of address space
        // apiece: how many threads happened to allocate decided whether a thread could still be started
        // under the cap. Two arenas keep the cap about what the program holds.
        .env("MALLOC_ARENA_MAX", "2")
        .env("FAKE_CHROMIUM_MARKER", marker)
        .env_remove("TRACE_LOG")
        .stdin(Stdio::null())
        .output()
        .unwrap();
    let outcome = Outcome {
        code: output.status.code(),
        stdout: String::from_utf8_lossy(&output.stdout).into_owned(),
        stderr: String::from_utf8_lossy(&output.stderr).into_owned(),
    };
    assert!(matches!(outcome.code, Some(0..=2)), "{args:?}: {:?}: {}", output.status, outcome.stderr);
    assert!(!outcome.stderr.contains("panicked"), "{args:?}: {}", outcome.stderr);
    outcome
}

/// Issue #11: replay holds a bundle's events and HAR in memory, which for small events or HAR entries takes
/// four to six times their size (the audit's 240 MiB took 1.2 GB and 0.93 GB, and aborted under
/// `prlimit --as=512MiB`). A bundle whose documents would take more than `TRACE_MAX_MEMORY` is refused by
/// `inspect` and `serve` before they are read, naming the variable; one within it is read within the
/// memory it estimated. Run at a budget of 128 MiB, so that the bombs stay small.
#[test]
fn documents_that_would_take_more_memory_than_the_limit_are_refused_before_they_are_read() {
    const BUDGET: u64 = 128 << 20;
    let scratch = tempfile::tempdir().unwrap();
    let marker = scratch.path().join("chromium-was-started");
    let serve = |bundle: &Path| {
        let args = ["serve", path_str(bundle), "--headless", "--chromium", path_str(&FAKE_CHROMIUM.1)];
        trace_replay_in_little_memory(256, BUDGET, &args, &marker)
    };
    for (name, write) in
        [("events.jsonl", write_many_small_events as fn(&Path, usize)), ("recording.har", write_many_har_entries)]
    {
        let (_scratch, bundle) = minimal_bundle();
        // Over the budget by the estimate, 32 MiB of them: refused before a byte is read.
        write(&bundle, 32);
        let needles = [name, "of memory to read whole, more than the limit of 134217728", "TRACE_MAX_MEMORY"];
        let inspected = trace_replay_in_little_memory(256, BUDGET, &["inspect", path_str(&bundle)], &marker);
        inspected.assert_refused(&needles);
        serve(&bundle).assert_refused(&needles);
        assert!(!marker.exists(), "serve started Chromium");

        // Within it, 16 MiB: read, in less memory than the limit on top of the program's own.
        write(&bundle, 16);
        let inspected = trace_replay_in_little_memory(256, BUDGET, &["inspect", path_str(&bundle)], &marker);
        assert_eq!(inspected.code, Some(0), "{name}: {}", inspected.stderr);
        assert!(inspected.stdout.contains(TASK_ID), "{}", inspected.stdout);
        // Serve reads it too, and goes on to start (the stand-in) Chromium.
        let served = serve(&bundle);
        assert_eq!(served.code, Some(2), "{}", served.stderr);
        assert!(marker.exists(), "{name}: serve did not get as far as Chromium: {}", served.stderr);
        std::fs::remove_file(&marker).unwrap();
    }
}

/// Issue #31: a HAR that names one 128 MiB request body from 16 requests (a 440 KB zip) took `inspect` and
/// `serve` to 2.1 GB, each request holding its own copy, and aborted under a 1 GiB cap. A request body is
/// read once however many requests name it, and one over `matcher::LARGE_BODY_BYTES` is held as its digest:
/// both run within 512 MiB of address space.
#[test]
fn one_large_request_body_named_by_many_requests_is_held_once_as_its_digest() {
    let (scratch, bundle) = minimal_bundle();
    let upload: Vec<u8> = (0..128u32 << 20).map(|i| (i % 251) as u8).collect();
    let file = body_path(&upload);
    write_file(&bundle, &file, &upload);
    drop(upload);
    let mut har = minimal_har();
    let entries = har["log"]["entries"].as_array_mut().unwrap();
    for n in 0..16 {
        let mut entry = har_entry(
            &format!("http://shop.test/upload/{n}"),
            json!({ "size": 0, "mimeType": "text/plain", "text": "" }),
        );
        entry["request"]["method"] = json!("POST");
        entry["request"]["postData"] = json!({ "mimeType": "application/octet-stream", "_file": file });
        entries.push(entry);
    }
    write_file(&bundle, "recording.har", har.to_string().as_bytes());
    write_manifest(&bundle, 3, TASK_ID);

    let marker = scratch.path().join("chromium-was-started");
    let inspected = trace_replay_in_little_memory(512, 1 << 30, &["inspect", path_str(&bundle)], &marker);
    assert_eq!(inspected.code, Some(0), "{}", inspected.stderr);
    assert!(inspected.stdout.contains(TASK_ID), "{}", inspected.stdout);
    let args = ["serve", path_str(&bundle), "--headless", "--chromium", path_str(&FAKE_CHROMIUM.1)];
    let served = trace_replay_in_little_memory(512, 1 << 30, &args, &marker);
    assert!(marker.exists(), "serve did not get as far as Chromium: {}", served.stderr);
}

/// A dataset in `dir` whose `tasks.jsonl` names `bundle` for its one task, with the minimal bundle written
/// at `dir/bundles/task`.
fn dataset_naming(dir: &Path, bundle: &str) {
    write_minimal_bundle(&dir.join("bundles/task"));
    let line = json!({
        "task_id": TASK_ID, "task_description": "Look at the shop", "task_type": "action",
        "website_url": "http://shop.test/", "num_steps": 0, "duration_seconds": 0.0, "answer": null,
        "tool_calls": [], "credentials": [], "checkpoints": [], "checkpoints_reasoning": "", "ignored": [],
        "bundle": bundle, "redacted": false,
    });
    std::fs::write(dir.join("tasks.jsonl"), format!("{line}\n")).unwrap();
}

/// Issue #45: a dataset is read as untrustingly as a bundle, by `eval`, `audit` and `list` (which
/// BrowserGym's tasks are registered from): a task's bundle named by an absolute path, through `..`,
/// through a link (at its end or on the way) or being a FIFO (whose opening hung `eval` and `audit`) is
/// refused, saying which; the bundles inside the dataset are listed, with the page each task starts at.
#[test]
fn a_dataset_names_only_bundles_of_its_own() {
    let scratch = tempfile::tempdir().unwrap();
    let outside = scratch.path().join("outside");
    write_minimal_bundle(&outside);

    let own = scratch.path().join("own");
    dataset_naming(&own, "bundles/task");
    let listed = trace_replay(&["list", path_str(&own), "--json"], None);
    assert_eq!(listed.code, Some(0), "{}", listed.stderr);
    let tasks: Value = serde_json::from_str(&listed.stdout).unwrap();
    assert_eq!(tasks[0]["task_id"], TASK_ID);
    assert_eq!(tasks[0]["start_url"], "http://shop.test/");
    assert_eq!(tasks[0]["bundle"], path_str(&own.join("bundles/task")));

    /// A dataset that names `bundle`, made so by `prepare` (given the dataset and the bundle outside it),
    /// refused for `why`.
    struct Case {
        name: &'static str,
        bundle: String,
        prepare: fn(&Path, &Path),
        why: &'static str,
    }
    let nothing: fn(&Path, &Path) = |_, _| {};
    let cases = [
        Case { name: "absolute", bundle: path_str(&outside).to_owned(), prepare: nothing, why: "outside the dataset" },
        Case { name: "dots", bundle: "../outside".to_owned(), prepare: nothing, why: "outside the dataset" },
        Case {
            name: "link",
            bundle: "bundles/link".to_owned(),
            prepare: |dataset, outside| std::os::unix::fs::symlink(outside, dataset.join("bundles/link")).unwrap(),
            why: "is a symbolic link",
        },
        Case {
            name: "link-on-the-way",
            bundle: "linked/task".to_owned(),
            prepare: |dataset, _| std::os::unix::fs::symlink(dataset.join("bundles"), dataset.join("linked")).unwrap(),
            why: "is a symbolic link",
        },
        Case {
            name: "fifo",
            bundle: "bundles/task.zip".to_owned(),
            prepare: |dataset, _| {
                assert!(Command::new("mkfifo").arg(dataset.join("bundles/task.zip")).status().unwrap().success())
            },
            why: "neither a regular file nor a folder",
        },
        Case { name: "missing", bundle: "bundles/nowhere".to_owned(), prepare: nothing, why: "cannot find" },
    ];
    for case in cases {
        let dataset = scratch.path().join(case.name);
        dataset_naming(&dataset, &case.bundle);
        (case.prepare)(&dataset, &outside);
        trace_replay(&["list", path_str(&dataset)], None).assert_refused(&[case.why]);
        let run = scratch.path().join(format!("{}-run", case.name));
        let args = ["eval", path_str(&dataset), "--agent", "nothing", "--out", path_str(&run), "--headless"];
        trace_replay(&[&args[..], &["--chromium", path_str(&FAKE_CHROMIUM.1)]].concat(), None)
            .assert_refused(&[case.why]);
        let args = ["audit", path_str(&dataset), "--out", path_str(&run), "--chromium", path_str(&FAKE_CHROMIUM.1)];
        trace_replay(&args, None).assert_refused(&[case.why]);
    }

    // Its tasks.jsonl is its own too.
    let linked = scratch.path().join("linked-tasks");
    dataset_naming(&linked, "bundles/task");
    std::fs::rename(linked.join("tasks.jsonl"), scratch.path().join("tasks-elsewhere.jsonl")).unwrap();
    std::os::unix::fs::symlink(scratch.path().join("tasks-elsewhere.jsonl"), linked.join("tasks.jsonl")).unwrap();
    trace_replay(&["list", path_str(&linked)], None).assert_refused(&["tasks.jsonl is a symbolic link"]);
}

/// Issue #45: a 2 GiB `tasks.jsonl` was read whole, 2.1 GB of memory. It is refused by its size before it
/// is read, as any document past `--max-document-size`, and read a line at a time within it: `list` runs in
/// 256 MiB of address space either way.
#[test]
fn a_huge_tasks_file_is_refused_before_it_is_read() {
    let scratch = tempfile::tempdir().unwrap();
    let dataset = scratch.path().join("dataset");
    dataset_naming(&dataset, "bundles/task");
    let marker = scratch.path().join("marker");
    let line = std::fs::read(dataset.join("tasks.jsonl")).unwrap();
    // Sparse: two gibibytes that take no disk.
    let file = std::fs::OpenOptions::new().append(true).open(dataset.join("tasks.jsonl")).unwrap();
    file.set_len(2 << 30).unwrap();
    trace_replay_in_little_memory(256, 64 << 20, &["list", path_str(&dataset)], &marker)
        .assert_refused(&["tasks.jsonl is 2147483648 bytes, more than the limit of 268435456"]);
    // Within the limit, blank lines and all, a line at a time: 200 MiB would not fit the 256 MiB whole.
    let mut padded = line.clone();
    for _ in 0..200 {
        padded.extend(std::iter::repeat_n(b' ', (1 << 20) - 1));
        padded.push(b'\n');
    }
    std::fs::write(dataset.join("tasks.jsonl"), &padded).unwrap();
    let outcome = trace_replay_in_little_memory(256, 64 << 20, &["list", path_str(&dataset)], &marker);
    assert_eq!(outcome.code, Some(0), "{}", outcome.stderr);
    assert!(outcome.stdout.contains(TASK_ID), "{}", outcome.stdout);
    // One line longer than a task takes is refused by its number.
    let mut long = line.strip_suffix(b"\n").unwrap().to_vec();
    long.extend(std::iter::repeat_n(b' ', 17 << 20));
    long.push(b'\n');
    std::fs::write(dataset.join("tasks.jsonl"), &long).unwrap();
    trace_replay(&["list", path_str(&dataset)], None).assert_refused(&["line 1 of", "is longer than 16777216 bytes"]);
}

/// Issue #45: BrowserGym's tasks opened a `file://` start page, showing the agent a local file. A task
/// that starts at no web page is refused by `list` and `eval` alike (one rule), saying where it starts.
#[test]
fn a_task_that_starts_at_a_local_file_is_refused() {
    let scratch = tempfile::tempdir().unwrap();
    let dataset = scratch.path().join("dataset");
    dataset_naming(&dataset, "bundles/task");
    let bundle = dataset.join("bundles/task");
    let trajectory = json!({
        "task_id": TASK_ID,
        "tool_calls": [{ "name": "navigate", "params": { "url": "file:///etc/hostname" }, "ts": 1.0 }],
    });
    write_file(&bundle, "trajectory.json", trajectory.to_string().as_bytes());
    write_manifest(&bundle, 3, TASK_ID);
    let needle = "starts at \"file:///etc/hostname\", which is no web page";
    trace_replay(&["list", path_str(&dataset)], None).assert_refused(&[needle]);
    let run = scratch.path().join("run");
    let args = ["eval", path_str(&dataset), "--agent", "nothing", "--out", path_str(&run), "--headless"];
    let outcome = trace_replay(&[&args[..], &["--chromium", path_str(&FAKE_CHROMIUM.1)]].concat(), None);
    let results = std::fs::read_to_string(run.join("results.jsonl")).unwrap_or_default();
    let result: Value = serde_json::from_str(results.lines().next().unwrap_or("null")).unwrap();
    assert!(result["error"].as_str().is_some_and(|error| error.contains(needle)), "{result}\n{}", outcome.stderr);
}
