//! `trace-host export --format wacz` through the real binary: the WACZ's files and its package's hashes,
//! every index line pointing at the one gzip member that holds its record, every recorded body in the WARC
//! as recorded, redaction proven on the decompressed records (and shown to be needed there), and the
//! webrecorder tools' own validator and reader (py-wacz, warcio) accepting the file.

use std::collections::{BTreeMap, BTreeSet};
use std::io::Read;
use std::path::{Path, PathBuf};
use std::process::Command;

use serde_json::{Value, json};
use sha2::{Digest, Sha256};
use trace_bundle::archive::Bundle;
use trace_host::client::TaskMessages;
use trace_manifest::event::BodyPart;
use trace_manifest::task::TaskType;

use crate::common::*;

const REQUIRED: [&str; 5] =
    ["archive/data.warc.gz", "indexes/index.cdxj", "pages/pages.jsonl", "datapackage.json", "datapackage-digest.json"];

/// Records the login-and-cart task `id` and exports it as a WACZ (redacted when asked); returns the file and
/// the report.
fn exported_wacz(scratch: &Scratch, id: &str, redact: bool) -> (PathBuf, serde_json::Value) {
    record_login_and_cart(scratch, id);
    let wacz = scratch.path(&format!("{id}.wacz"));
    let mut args = vec!["export", id, "--format", "wacz", "--out", wacz.to_str().unwrap(), "--json"];
    if redact {
        args.push("--redact");
    }
    let report = scratch.cli_json(&args);
    (wacz, report)
}

/// Each entry of the WACZ as stored: its bytes (decompressed by the zip) and whether the zip stored it.
fn wacz_entries(wacz: &Path) -> BTreeMap<String, (Vec<u8>, bool)> {
    let mut archive = zip::ZipArchive::new(std::fs::File::open(wacz).unwrap()).unwrap();
    (0..archive.len())
        .map(|index| {
            let mut entry = archive.by_index(index).unwrap();
            let stored = entry.compression() == zip::CompressionMethod::Stored;
            let mut bytes = Vec::new();
            entry.read_to_end(&mut bytes).unwrap();
            (entry.name().to_owned(), (bytes, stored))
        })
        .collect()
}

/// A WARC record, parsed: its header fields and its block.
#[derive(Debug)]
struct Record {
    headers: BTreeMap<String, String>,
    block: Vec<u8>,
}

impl Record {
    fn header(&self, name: &str) -> &str {
        self.headers.get(&name.to_ascii_lowercase()).map_or("", String::as_str)
    }

    /// The HTTP message's payload: what follows its head.
    fn payload(&self) -> &[u8] {
        let at = find(&self.block, b"\r\n\r\n").expect("an HTTP message has a head") + 4;
        &self.block[at..]
    }
}

fn find(haystack: &[u8], needle: &[u8]) -> Option<usize> {
    haystack.windows(needle.len()).position(|window| window == needle)
}

/// Parses one record from the start of `bytes`; returns it and how many bytes it took.
fn parse_record(bytes: &[u8]) -> (Record, usize) {
    assert!(bytes.starts_with(b"WARC/1.1\r\n"), "{:?}", String::from_utf8_lossy(&bytes[..bytes.len().min(80)]));
    let head_end = find(bytes, b"\r\n\r\n").unwrap();
    let head = std::str::from_utf8(&bytes[10..head_end]).unwrap();
    let headers: BTreeMap<String, String> = head
        .split("\r\n")
        .map(|line| {
            let (name, value) = line.split_once(": ").unwrap();
            (name.to_ascii_lowercase(), value.to_owned())
        })
        .collect();
    let length: usize = headers["content-length"].parse().unwrap();
    let start = head_end + 4;
    let block = bytes[start..start + length].to_vec();
    assert_eq!(&bytes[start + length..start + length + 4], b"\r\n\r\n", "a record ends with two line breaks");
    (Record { headers, block }, start + length + 4)
}

/// Every record of a WARC of gzip members, decompressed as one stream.
fn records(warc_gz: &[u8]) -> Vec<Record> {
    let mut decoded = Vec::new();
    flate2::read::MultiGzDecoder::new(warc_gz).read_to_end(&mut decoded).unwrap();
    let mut records = Vec::new();
    let mut at = 0;
    while at < decoded.len() {
        let (record, used) = parse_record(&decoded[at..]);
        records.push(record);
        at += used;
    }
    records
}

/// The whole WARC decompressed, the bytes a reader of its records sees.
fn decompressed(warc_gz: &[u8]) -> Vec<u8> {
    let mut decoded = Vec::new();
    flate2::read::MultiGzDecoder::new(warc_gz).read_to_end(&mut decoded).unwrap();
    decoded
}

fn sha256_hex(bytes: &[u8]) -> String {
    hex::encode(Sha256::digest(bytes))
}

/// The bundle's HTTP exchanges that have a response: (URL, body as stored), in the HAR's order.
fn recorded_exchanges(scratch: &Scratch, id: &str) -> Vec<(String, u16, Vec<u8>)> {
    let mut bundle = Bundle::open(&scratch.capture(id)).unwrap();
    let har = bundle.har().unwrap();
    har.log
        .entries
        .iter()
        .filter(|entry| entry.response.status > 0)
        .map(|entry| {
            let body = entry.response.content.file.as_ref().map(|file| bundle.read(file).unwrap()).unwrap_or_default();
            (entry.request.url.clone(), entry.response.status, body)
        })
        .collect()
}

#[test]
fn a_wacz_export_archives_every_recorded_exchange_and_indexes_each_record() {
    let scratch = Scratch::new();
    let (wacz, report) = exported_wacz(&scratch, "archive", false);
    let exchanges = recorded_exchanges(&scratch, "archive");
    assert!(exchanges.len() >= 6, "{exchanges:?}");
    assert_eq!(report["format"], "wacz", "{report}");
    assert_eq!(report["exchanges"], exchanges.len(), "{report}");
    assert_eq!(report["zip"], wacz.to_str().unwrap());

    // The required files; the WARC and its index stored, not deflated, so that readers seek into them.
    let entries = wacz_entries(&wacz);
    assert_eq!(entries.keys().map(String::as_str).collect::<BTreeSet<_>>(), BTreeSet::from(REQUIRED));
    assert!(entries["archive/data.warc.gz"].1 && entries["indexes/index.cdxj"].1, "stored");
    assert_eq!(report["files"], REQUIRED.len());
    assert_eq!(report["bytes"], entries.values().map(|(bytes, _)| bytes.len()).sum::<usize>());

    // The package lists every other file with its size and hash, and the digest file hashes the package.
    let package: serde_json::Value = serde_json::from_slice(&entries["datapackage.json"].0).unwrap();
    assert_eq!(package["profile"], "data-package");
    assert_eq!(package["wacz_version"], "1.1.1");
    assert_eq!(package["title"], "buy the blue mug");
    assert!(package["software"].as_str().unwrap().starts_with("trace-host "), "{package}");
    assert_eq!(package["mainPageURL"], format!("{SITE}/login"));
    let resources = package["resources"].as_array().unwrap();
    assert_eq!(resources.len(), 3, "{package}");
    for resource in resources {
        let path = resource["path"].as_str().unwrap();
        let bytes = &entries[path].0;
        assert_eq!(resource["name"], path.rsplit('/').next().unwrap());
        assert_eq!(resource["bytes"], bytes.len(), "{path}");
        assert_eq!(resource["hash"], format!("sha256:{}", sha256_hex(bytes)), "{path}");
    }
    let digest: serde_json::Value = serde_json::from_slice(&entries["datapackage-digest.json"].0).unwrap();
    assert_eq!(digest["path"], "datapackage.json");
    assert_eq!(digest["hash"], format!("sha256:{}", sha256_hex(&entries["datapackage.json"].0)));

    // The pages: the header line, then the login page and the account page the form led to, titled.
    let pages: Vec<serde_json::Value> = std::str::from_utf8(&entries["pages/pages.jsonl"].0)
        .unwrap()
        .lines()
        .map(|line| serde_json::from_str(line).unwrap())
        .collect();
    assert_eq!(pages[0], serde_json::json!({"format": "json-pages-1.0", "id": "pages", "title": "All Pages"}));
    let visited: Vec<(&str, &str)> =
        pages[1..].iter().map(|page| (page["url"].as_str().unwrap(), page["title"].as_str().unwrap())).collect();
    let login = format!("{SITE}/login");
    let account = format!("{SITE}/account");
    assert_eq!(visited, [(login.as_str(), "Sign in"), (account.as_str(), "Your account")]);
    assert!(pages[1]["ts"].as_str().unwrap().starts_with("2025-11-22T10:00:00"), "{}", pages[1]);

    // Records: the warcinfo, then a response and a request for each exchange, the request concurrent to it.
    let warc = &entries["archive/data.warc.gz"].0;
    let records = records(warc);
    assert_eq!(records.len(), 1 + 2 * exchanges.len());
    assert_eq!(records[0].header("WARC-Type"), "warcinfo");
    for pair in records[1..].chunks(2) {
        let (response, request) = (&pair[0], &pair[1]);
        assert_eq!(response.header("WARC-Type"), "response");
        assert_eq!(request.header("WARC-Type"), "request");
        assert_eq!(response.header("Content-Type"), "application/http; msgtype=response");
        assert_eq!(request.header("Content-Type"), "application/http; msgtype=request");
        assert_eq!(request.header("WARC-Concurrent-To"), response.header("WARC-Record-ID"));
        assert_eq!(request.header("WARC-Target-URI"), response.header("WARC-Target-URI"));
        assert_ne!(request.header("WARC-Record-ID"), response.header("WARC-Record-ID"));
        for record in pair {
            assert!(record.header("WARC-Record-ID").starts_with("<urn:uuid:"), "{record:?}");
            assert_eq!(record.header("WARC-Block-Digest"), format!("sha256:{}", sha256_hex(&record.block)));
            assert_eq!(record.header("WARC-Payload-Digest"), format!("sha256:{}", sha256_hex(record.payload())));
            assert!(record.header("WARC-Date").starts_with("2025-11-22T10:00:0"), "{record:?}");
        }
    }

    // Every recorded response, body byte for byte, in a response record for its URL, with its status; its
    // length as the body's, whatever encoding it crossed the network in.
    for (url, status, body) in &exchanges {
        let found = records[1..].iter().any(|record| {
            record.header("WARC-Type") == "response"
                && record.header("WARC-Target-URI") == url
                && record.block.starts_with(format!("HTTP/1.1 {status}").as_bytes())
                && record.payload() == body.as_slice()
                && contains(&record.block, format!("Content-Length: {}\r\n", body.len()).as_bytes())
        });
        assert!(found, "no response record for {url} ({status}) with its {} byte body", body.len());
    }
    assert!(exchanges.iter().any(|(_, _, body)| contains(body, b"blue-mug")), "a body is checked");
    // The recorder gave the products' type but no header did: the record says it, so that replay need not guess.
    let products = records
        .iter()
        .find(|record| {
            record.header("WARC-Type") == "response" && record.header("WARC-Target-URI").contains("/api/products")
        })
        .unwrap();
    assert!(contains(&products.block, b"\r\nContent-Type: application/json\r\n"), "{products:?}");
    // The cart's request body, as posted.
    let cart = records
        .iter()
        .find(|record| {
            record.header("WARC-Type") == "request" && record.header("WARC-Target-URI") == format!("{SITE}/api/cart")
        })
        .unwrap();
    assert!(cart.block.starts_with(b"POST /api/cart HTTP/1.1\r\n"), "{:?}", String::from_utf8_lossy(&cart.block));
    assert_eq!(cart.payload(), br#"{"product":"blue-mug","qty":1,"token":"abc"}"#);

    // The index: sorted, one line per response; each offset and length is exactly one gzip member, which
    // decodes to the response record for the line's URL.
    let index = std::str::from_utf8(&entries["indexes/index.cdxj"].0).unwrap();
    let lines: Vec<&str> = index.lines().collect();
    assert_eq!(lines.len(), exchanges.len());
    let mut sorted = lines.clone();
    sorted.sort_unstable();
    assert_eq!(lines, sorted, "the index is sorted");
    for line in &lines {
        let mut parts = line.splitn(3, ' ');
        let (key, timestamp, fields) = (parts.next().unwrap(), parts.next().unwrap(), parts.next().unwrap());
        let fields: serde_json::Value = serde_json::from_str(fields).unwrap();
        assert!(key.starts_with("127.0.0.1:8000)/"), "{line}");
        assert_eq!(timestamp.len(), 14, "{line}");
        assert!(timestamp.starts_with("20251122100"), "{line}");
        assert_eq!(fields["filename"], "data.warc.gz");
        let offset: usize = fields["offset"].as_str().unwrap().parse().unwrap();
        let length: usize = fields["length"].as_str().unwrap().parse().unwrap();
        let member = &warc[offset..offset + length];
        let mut decoder = flate2::bufread::GzDecoder::new(member);
        let mut decoded = Vec::new();
        decoder.read_to_end(&mut decoded).unwrap();
        assert!(decoder.into_inner().is_empty(), "{line}: the member ends where the index says");
        let (record, used) = parse_record(&decoded);
        assert_eq!(used, decoded.len(), "{line}: one record in the member");
        assert_eq!(record.header("WARC-Type"), "response", "{line}");
        assert_eq!(record.header("WARC-Target-URI"), fields["url"].as_str().unwrap(), "{line}");
        assert_eq!(record.header("WARC-Payload-Digest"), fields["digest"].as_str().unwrap(), "{line}");
        assert!(record.block.starts_with(format!("HTTP/1.1 {}", fields["status"].as_str().unwrap()).as_bytes()));
        if fields["url"] == format!("{SITE}/login") && fields.get("method").is_some() {
            assert_eq!(fields["method"], "POST");
            assert!(key.ends_with("?__wb_method=post"), "{line}");
        }
    }
    // The login page and its POST are two lines, told apart by the method.
    assert_eq!(lines.iter().filter(|line| line.starts_with("127.0.0.1:8000)/login")).count(), 2, "{index}");
}

#[test]
fn a_redacted_wacz_holds_no_secret_even_decompressed_and_an_unredacted_one_does() {
    let secrets = [PASSWORD, "hunter2-Blue%21", CSRF, SESSION, API_TOKEN];

    // Unredacted, the secrets are in the WARC's records, and nowhere a search of the file as stored would
    // see them: they are only found decompressed, which is where the proof must look.
    let scratch = Scratch::new();
    let (plain, report) = exported_wacz(&scratch, "plain", false);
    assert!(report.get("redaction").is_none(), "{report}");
    let file = std::fs::read(&plain).unwrap();
    let entries = wacz_entries(&plain);
    let warc = decompressed(&entries["archive/data.warc.gz"].0);
    for secret in secrets {
        assert!(!contains(&file, secret.as_bytes()), "{secret} is not visible in the file as stored");
        assert!(!contains(&entries["archive/data.warc.gz"].0, secret.as_bytes()));
    }
    // The password as the login form posted it: typed, it is in the events, which a WACZ does not carry.
    for secret in ["hunter2-Blue%21", CSRF, SESSION, API_TOKEN] {
        assert!(contains(&warc, secret.as_bytes()), "{secret} is in the decompressed records");
    }

    // Redacted: none anywhere, the WARC decompressed; what is no secret stays.
    let scratch = Scratch::new();
    let (redacted, report) = exported_wacz(&scratch, "shared", true);
    assert_eq!(report["format"], "wacz");
    assert_eq!(
        report["redaction"]["secrets"],
        serde_json::json!({"credential": 1, "cookie": 1, "header": 1, "body_field": 1}),
        "{report}"
    );
    let entries = wacz_entries(&redacted);
    let warc = decompressed(&entries["archive/data.warc.gz"].0);
    let mut searched: Vec<(&str, &[u8])> =
        entries.iter().map(|(name, (bytes, _))| (name.as_str(), bytes.as_slice())).collect();
    searched.push(("the decompressed WARC", &warc));
    for (name, bytes) in searched {
        for secret in secrets {
            assert!(!contains(bytes, secret.as_bytes()), "{name} still holds {secret}");
        }
    }
    assert!(contains(&warc, b"trace-redacted-credential-password-"), "the password's stand-in was posted");
    assert!(contains(&warc, br#"[{"id":"blue-mug","price":12}]"#), "what is no secret stays");
    assert!(contains(&warc, b"session=trace-redacted-cookie-session-"));
}

/// The WACZ validators' environment, made by `.ci/install`: `None`, said in one line, when it is missing,
/// unless `TRACE_E2E_REQUIRED` is set, which makes it fail.
fn wacz_venv(test: &str) -> Option<PathBuf> {
    let venv = Path::new(env!("CARGO_MANIFEST_DIR")).join("../target/wacz-venv/bin");
    if venv.join("wacz").exists() && venv.join("python").exists() {
        return Some(venv);
    }
    let error = format!("py-wacz and warcio are not in {} (`bash .ci/install` makes it)", venv.display());
    if std::env::var_os("TRACE_E2E_REQUIRED").is_some_and(|value| !value.is_empty()) {
        panic!("{test}: {error} (TRACE_E2E_REQUIRED is set)");
    }
    eprintln!("skipped {test}: {error}");
    None
}

/// Runs py-wacz's validator on `wacz`: whether it called it valid, and what it said.
fn wacz_validate(venv: &Path, wacz: &Path) -> (bool, String) {
    let output = Command::new(venv.join("wacz")).args(["validate", "-f"]).arg(wacz).output().unwrap();
    let said = format!("{}{}", String::from_utf8_lossy(&output.stdout), String::from_utf8_lossy(&output.stderr));
    (output.status.success() && said.contains("Validation succeeded"), said)
}

#[test]
fn a_wacz_export_passes_py_wacz_validate_and_warcio_reads_every_record() {
    let Some(venv) = wacz_venv("a_wacz_export_passes_py_wacz_validate_and_warcio_reads_every_record") else {
        return;
    };
    let scratch = Scratch::new();
    let (wacz, _) = exported_wacz(&scratch, "checked", false);
    let (valid, said) = wacz_validate(&venv, &wacz);
    assert!(valid, "wacz validate: {said}");

    // warcio reads every record, its digests check, and the responses are the bundle's exchanges.
    let script = Path::new(env!("CARGO_MANIFEST_DIR")).join("../tests/wacz/read_wacz.py");
    let output = Command::new(venv.join("python")).arg(&script).arg(&wacz).output().unwrap();
    assert!(output.status.success(), "read_wacz.py: {}", String::from_utf8_lossy(&output.stderr));
    let read: serde_json::Value = serde_json::from_slice(&output.stdout).unwrap();
    assert_eq!(read["warcs"], serde_json::json!(["archive/data.warc.gz"]));
    let records = read["records"].as_array().unwrap();
    let exchanges = recorded_exchanges(&scratch, "checked");
    assert_eq!(records.len(), 1 + 2 * exchanges.len(), "{read}");
    assert_eq!(records[0]["type"], "warcinfo");
    for record in records {
        assert!(record["digest_problems"].as_array().unwrap().is_empty(), "{record}");
        if record["type"] != "warcinfo" {
            assert_eq!(record["digests_passed"], true, "{record}");
        }
    }
    let mut read_responses: Vec<(String, u64, String)> = records
        .iter()
        .filter(|record| record["type"] == "response")
        .map(|record| {
            (
                record["uri"].as_str().unwrap().to_owned(),
                record["status"].as_u64().unwrap(),
                record["payload_sha256"].as_str().unwrap().to_owned(),
            )
        })
        .collect();
    let mut recorded: Vec<(String, u64, String)> =
        exchanges.iter().map(|(url, status, body)| (url.clone(), u64::from(*status), sha256_hex(body))).collect();
    read_responses.sort();
    recorded.sort();
    assert_eq!(read_responses, recorded);
    let requests = records.iter().filter(|record| record["type"] == "request");
    for request in requests {
        assert!(records.iter().any(|r| r["type"] == "response" && r["id"] == request["concurrent_to"]), "{request}");
    }

    // Where warcio found each response is where the index says it is.
    let entries = wacz_entries(&wacz);
    let index = std::str::from_utf8(&entries["indexes/index.cdxj"].0).unwrap();
    let mut indexed: Vec<(String, u64, u64)> = index
        .lines()
        .map(|line| {
            let fields: serde_json::Value = serde_json::from_str(line.splitn(3, ' ').nth(2).unwrap()).unwrap();
            let number = |name: &str| fields[name].as_str().unwrap().parse::<u64>().unwrap();
            (fields["url"].as_str().unwrap().to_owned(), number("offset"), number("length"))
        })
        .collect();
    let mut found: Vec<(String, u64, u64)> = records
        .iter()
        .filter(|record| record["type"] == "response")
        .map(|record| {
            (
                record["uri"].as_str().unwrap().to_owned(),
                record["offset"].as_u64().unwrap(),
                record["length"].as_u64().unwrap(),
            )
        })
        .collect();
    indexed.sort();
    found.sort();
    assert_eq!(indexed, found);
}

/// The validator is no rubber stamp: a WACZ whose index no longer matches its package's hash is refused.
#[test]
fn py_wacz_validate_refuses_a_wacz_whose_file_does_not_match_its_hash() {
    let Some(venv) = wacz_venv("py_wacz_validate_refuses_a_wacz_whose_file_does_not_match_its_hash") else {
        return;
    };
    let scratch = Scratch::new();
    let (wacz, _) = exported_wacz(&scratch, "tampered", false);
    let tampered = scratch.path("tampered-again.wacz");
    let mut archive = zip::ZipArchive::new(std::fs::File::open(&wacz).unwrap()).unwrap();
    let mut out = zip::ZipWriter::new(std::fs::File::create(&tampered).unwrap());
    for index in 0..archive.len() {
        let mut entry = archive.by_index(index).unwrap();
        let name = entry.name().to_owned();
        let mut bytes = Vec::new();
        entry.read_to_end(&mut bytes).unwrap();
        if name == "indexes/index.cdxj" {
            bytes.extend_from_slice(b"com,example)/ 20251122100000 {}\n");
        }
        let options = zip::write::SimpleFileOptions::default().compression_method(entry.compression());
        out.start_file(name, options).unwrap();
        std::io::Write::write_all(&mut out, &bytes).unwrap();
    }
    out.finish().unwrap();
    let (valid, said) = wacz_validate(&venv, &tampered);
    assert!(!valid, "a changed index passed: {said}");
    assert!(said.contains("index.cdxj") && said.contains("expected hash"), "{said}");
}

/// A redacted WACZ export refused (a credential too short to replace reliably) leaves nothing at `--out`,
/// not even its partial file, as the zip's does; `--embed-bodies`, which is for zips, is refused with a WACZ.
#[test]
fn a_refused_wacz_export_writes_nothing() {
    let scratch = Scratch::new();
    record_too_short_credential(&scratch);
    let wacz = scratch.path("short.wacz");
    let output = scratch.cli(&["export", "short", "--format", "wacz", "--out", wacz.to_str().unwrap(), "--redact"]);
    assert_eq!(output.status.code(), Some(2));
    let stderr = String::from_utf8_lossy(&output.stderr);
    assert!(stderr.contains("shorter than 4 characters"), "{stderr}");
    assert!(!wacz.exists() && !scratch.path(".short.wacz.partial").exists());
    assert_eq!(std::fs::read_dir(scratch.dir.path()).unwrap().count(), 1, "only the data directory is left");

    let output =
        scratch.cli(&["export", "short", "--format", "wacz", "--out", wacz.to_str().unwrap(), "--embed-bodies"]);
    assert_eq!(output.status.code(), Some(2));
    assert!(String::from_utf8_lossy(&output.stderr).contains("--embed-bodies"));
    assert!(!wacz.exists());

    // Unredacted, the same task exports: its one page, and no exchange.
    let report = scratch.cli_json(&["export", "short", "--format", "wacz", "--out", wacz.to_str().unwrap(), "--json"]);
    assert_eq!(report["exchanges"], 0, "{report}");
    let pages = String::from_utf8(wacz_entries(&wacz)["pages/pages.jsonl"].0.clone()).unwrap();
    assert_eq!(pages.lines().count(), 2, "{pages}");
    assert!(pages.contains(&format!("{SITE}/login")), "{pages}");
}

/// Issue #45: `export --format wacz` without `--redact` said nothing, where the archive held 12 of 19
/// secrets (3 of them in `indexes/index.cdxj`, which a person may post to find an archive by). It warns as
/// a zip export does, naming the file and what to do; redacted, it does not.
#[test]
fn an_unredacted_wacz_export_warns_that_it_holds_the_secrets() {
    let scratch = Scratch::new();
    record_login_and_cart(&scratch, "plain");
    for (format, out) in [("wacz", "plain.wacz"), ("zip", "plain.zip")] {
        let out = scratch.path(out);
        let output = scratch.cli(&["export", "plain", "--format", format, "--out", out.to_str().unwrap()]);
        assert!(output.status.success());
        let stderr = String::from_utf8_lossy(&output.stderr);
        assert!(stderr.contains("is not redacted") && stderr.contains("--redact"), "{format}: {stderr}");
    }
    let out = scratch.path("shared.wacz");
    let args = ["export", "plain", "--format", "wacz", "--out", out.to_str().unwrap(), "--redact"];
    let output = scratch.cli(&args);
    assert!(output.status.success(), "{}", String::from_utf8_lossy(&output.stderr));
    assert!(!String::from_utf8_lossy(&output.stderr).contains("is not redacted"));
}

/// Issue #45: a hostile recording wrote a forged line into the WACZ's `indexes/index.cdxj` (a URL with a
/// line break that does not parse, whose index key fell back to the raw URL), and a bare carriage return
/// in a header's value stayed inside the WARC's HTTP message, where readers disagree on where the header
/// ends. A URL that is no URL is not archived (and the export says so), and a header value is written on one line, its control
/// characters spaces; every other exchange is archived as before, one index line per response.
#[test]
fn a_hostile_url_or_header_writes_nothing_of_its_own_into_the_wacz() {
    let scratch = Scratch::new();
    let mut host = scratch.host();
    let mut task = TaskMessages::new(task_id("hostile"));
    let page = format!("{SITE}/");
    let forged = "http://[\ncom,evil)/ 20250101000000 {\"url\":\"http://evil/\",\"status\":\"200\"}";
    let mut messages = vec![task.start(task_start("hostile", TaskType::Action))];
    messages.push(task.events(vec![
        navigation(1.0, &page),
        request(2.0, "1", "GET", &page, &[], None),
        response(3.0, "1", &page, 200, "text/html", &[("X-Note", "one\rInjected: two")]),
        finished(4.0, "1", 12),
        request(5.0, "2", "GET", forged, &[], None),
        response(6.0, "2", forged, 200, "text/plain", &[]),
        finished(7.0, "2", 2),
    ]));
    messages.extend(task.body("1", BodyPart::Response, b"<p>shop</p>", 1024));
    messages.extend(task.body("2", BodyPart::Response, b"ok", 1024));
    messages.push(task.stop(T0 + 100.0, None));
    send_all(&mut host, &task, &messages);
    host.close().unwrap();

    let wacz = scratch.path("hostile.wacz");
    let output = scratch.cli(&["export", "hostile", "--format", "wacz", "--out", wacz.to_str().unwrap(), "--json"]);
    let stderr = String::from_utf8_lossy(&output.stderr);
    assert!(output.status.success(), "{stderr}");
    let report: Value = serde_json::from_slice(&output.stdout).unwrap();
    // Left out, and said so: not silently.
    assert_eq!((&report["exchanges"], &report["exchanges_left_out"]), (&json!(1), &json!(1)), "{report}");
    assert!(stderr.contains("1 recorded exchange(s) left out of the WACZ"), "{stderr}");
    let entries = wacz_entries(&wacz);
    let index = String::from_utf8(entries["indexes/index.cdxj"].0.clone()).unwrap();
    let lines: Vec<&str> = index.lines().collect();
    assert_eq!(lines.len(), 1, "one line per archived response: {index}");
    assert!(lines[0].starts_with("127.0.0.1:8000)/ "), "{index}");
    assert!(!index.contains("com,evil)"), "{index}");
    for record in records(&entries["archive/data.warc.gz"].0) {
        let block = &record.block;
        let head = &block[..find(block, b"\r\n\r\n").map_or(block.len(), |at| at + 4)];
        let bare = head.windows(2).filter(|pair| pair[0] == b'\r' && pair[1] != b'\n').count();
        assert_eq!(bare, 0, "a bare carriage return in {:?}", String::from_utf8_lossy(head));
        assert!(!record.header("WARC-Target-URI").contains("evil"), "{:?}", record.headers);
    }
    let warc = decompressed(&entries["archive/data.warc.gz"].0);
    assert!(contains(&warc, b"X-Note: one Injected: two\r\n"), "the value is kept, on one line");
}
