//! `trace-host export --redact` on a recording through the real binary: no secret left in any entry of the
//! zip, each replaced consistently, in every encoding pages send them; and the exports it refuses (a
//! credential too short or too common to replace, a value that looks like a secret until the person
//! decides).

use std::path::Path;

use trace_host::client::TaskMessages;
use trace_manifest::event::{ActionKind, BodyPart};
use trace_manifest::postprocess::CredentialEntry;
use trace_manifest::task::TaskType;

use crate::common::*;

#[test]
fn a_redacted_export_holds_no_secret_and_replaces_each_one_consistently() {
    let scratch = Scratch::new();
    record_login_and_cart(&scratch, "share");
    let zip = scratch.path("share.zip");
    let report = scratch.cli_json(&["export", "share", "--out", zip.to_str().unwrap(), "--redact", "--json"]);
    assert_eq!(report["processed"], true, "an unprocessed task is processed on the way: {report}");
    assert_eq!(
        report["redaction"]["secrets"],
        serde_json::json!({"credential": 1, "cookie": 1, "header": 1, "body_field": 1}),
        "{report}"
    );

    // A byte search of every entry, decompressed, and of every packed snapshot, unpacked, finds no secret
    // in any form it was recorded in.
    let entries = zip_entries(&zip);
    assert!(entries.keys().any(|name| name.starts_with("dom/")), "the snapshots are searched too");
    let secrets = [PASSWORD, "hunter2-Blue%21", CSRF, SESSION, API_TOKEN];
    for (name, bytes) in &entries {
        for secret in secrets {
            assert!(!contains(bytes, secret.as_bytes()), "{name} still holds {secret}");
        }
    }
    let validated = scratch.cli_json(&["validate", zip.to_str().unwrap(), "--json"]);
    assert_eq!(validated["valid"], true, "{validated}");

    // The derived files came along; the trajectory names the password by its placeholder, and the
    // credential's value is now the stand-in that the redacted recording posted instead.
    let credentials: Vec<CredentialEntry> = serde_json::from_slice(&entries["credentials.json"]).unwrap();
    let stand_in = credentials[0].value.clone();
    assert!(stand_in.starts_with("trace-redacted-credential-password-"), "{stand_in}");
    assert_eq!(credentials[0].placeholder, "{{credentials.127.0.0.1.password}}");
    assert!(contains(&entries["trajectory.json"], credentials[0].placeholder.as_bytes()));
    for name in ["checkpoints.json", "ignored.json"] {
        assert!(entries.contains_key(name), "{name} is exported");
    }

    // One secret, one placeholder: the posted CSRF token equals the hidden input and the cookie, the session
    // cookie set equals the one sent, and the password posted is the credential's stand-in.
    let har: serde_json::Value = serde_json::from_slice(&entries["recording.har"]).unwrap();
    let har_entries = har["log"]["entries"].as_array().unwrap();
    let login_post =
        har_entries.iter().find(|e| e["request"]["method"] == "POST" && e["request"]["url"] == format!("{SITE}/login"));
    let login_post = &login_post.expect("the login POST")["request"];
    let posted: std::collections::HashMap<String, String> =
        url::form_urlencoded::parse(login_post["postData"]["text"].as_str().unwrap().as_bytes()).into_owned().collect();
    assert_eq!(posted["password"], stand_in);
    assert_eq!(posted["username"], "ann", "what is no secret stays");
    let header = |request: &serde_json::Value, name: &str| {
        request["headers"].as_array().unwrap().iter().find(|h| h["name"] == name).unwrap()["value"]
            .as_str()
            .unwrap()
            .to_owned()
    };
    assert_eq!(header(login_post, "Cookie"), format!("csrf={}", posted["csrf"]));
    let login_form =
        entries.iter().find(|(name, bytes)| name.starts_with("resources/") && contains(bytes, b"login-form"));
    let login_form = String::from_utf8(login_form.expect("the login page's body").1.clone()).unwrap();
    assert!(login_form.contains(&format!("value=\"{}\"", posted["csrf"])), "{login_form}");
    let account = har_entries.iter().find(|e| e["request"]["url"] == format!("{SITE}/account")).unwrap();
    let session = header(&account["request"], "Cookie");
    assert!(session.starts_with("session=trace-redacted-cookie-session-"), "{session}");
    let redirect = har_entries.iter().find(|e| e["response"]["status"] == 303).unwrap();
    assert!(header(&redirect["response"], "Set-Cookie").starts_with(&format!("{session};")));
    assert!(header(&account["request"], "Authorization").starts_with("Bearer trace-redacted-header-authorization-"));

    // The data directory keeps the recording as it was, and no staging directory is left behind.
    let original = std::fs::read(scratch.capture("share").join("events.jsonl")).unwrap();
    assert!(contains(&original, PASSWORD.as_bytes()));
    let leftovers: Vec<_> = std::fs::read_dir(zip.parent().unwrap())
        .unwrap()
        .map(|entry| entry.unwrap().file_name().to_string_lossy().into_owned())
        .filter(|name| name.starts_with(".trace-redacting") || name.ends_with(".partial"))
        .collect();
    assert!(leftovers.is_empty(), "{leftovers:?}");
}

#[test]
fn a_credential_too_short_to_redact_reliably_refuses_the_export_and_writes_nothing() {
    let scratch = Scratch::new();
    record_too_short_credential(&scratch);

    let zip = scratch.path("short.zip");
    let output = scratch.cli(&["export", "short", "--out", zip.to_str().unwrap(), "--redact"]);
    assert_eq!(output.status.code(), Some(2));
    let stderr = String::from_utf8_lossy(&output.stderr);
    assert!(stderr.contains("shorter than 4 characters") && stderr.contains("#pin"), "{stderr}");
    assert!(!zip.exists() && !scratch.path(".short.zip.partial").exists());
    // Without redaction the same task exports: nothing was lost.
    scratch.cli_json(&["export", "short", "--out", zip.to_str().unwrap(), "--json"]);
    assert!(zip.exists());
}

/// Issue #11: a login page that sends its form through script keeps the typed password in the encodings
/// scripts use: `encodeURIComponent` in a URL (`%40` for `@`, `!` and `(` bare) and base64 of `user:password`
/// inside a JSON body sent as `text/plain`. The redacted export holds none of them, and still validates.
#[test]
fn a_password_sent_through_script_is_redacted_in_every_encoding() {
    use base64::Engine as _;
    const TYPED: &str = "s3cret@Pass!(1)";
    let scratch = Scratch::new();
    let login = format!("{SITE}/login");
    let basic = base64::engine::general_purpose::STANDARD.encode(format!("ann:{TYPED}"));
    let uri_component = TYPED.replace('@', "%40");
    let check = format!("{SITE}/api/check?p={uri_component}");
    record_action_task(
        &scratch,
        "scripted",
        vec![
            navigation(1.0, &login),
            action(100.0, ActionKind::Click, &login, "#password", None, false),
            action(200.0, ActionKind::Input, &login, "#password", Some(TYPED), true),
            request(
                300.0,
                "1",
                "POST",
                &format!("{SITE}/api/login"),
                &[("Content-Type", "text/plain;charset=UTF-8")],
                Some(&format!(r#"{{"auth":"{basic}"}}"#)),
            ),
            response(310.0, "1", &format!("{SITE}/api/login"), 204, "", &[]),
            finished(311.0, "1", 0),
            typed_request(400.0, "2", "GET", &check, "Fetch", None),
            response(410.0, "2", &check, 200, "application/json", &[]),
            finished(411.0, "2", 2),
        ],
    );

    export_redacted_holding_none(&scratch, "scripted", &[TYPED, &uri_component, &basic, &basic[8..basic.len() - 4]]);
}

/// Exports `task` redacted and checks that no entry of the zip holds any of `leaks`, and that it validates.
fn export_redacted_holding_none(scratch: &Scratch, task: &str, leaks: &[&str]) {
    let zip = scratch.path(&format!("{task}.zip"));
    scratch.cli_json(&["export", task, "--out", zip.to_str().unwrap(), "--redact", "--json"]);
    for (entry, bytes) in zip_entries(&zip) {
        for leaked in leaks {
            assert!(!contains(&bytes, leaked.as_bytes()), "{entry} still holds {leaked:?}");
        }
    }
    let validated = scratch.cli_json(&["validate", zip.to_str().unwrap(), "--json"]);
    assert_eq!(validated["valid"], true, "{validated}");
}

/// Issue #11: a credential that is a word the recording's own addresses use (a password of `account` on a
/// shop with an `/account` page) cannot be replaced everywhere without breaking them: the redacted export
/// refuses it, naming the field and not the value, and writes nothing.
#[test]
fn a_credential_the_sites_addresses_use_refuses_the_redacted_export() {
    let scratch = Scratch::new();
    let login = format!("{SITE}/login");
    let account = format!("{SITE}/account");
    record_action_task(
        &scratch,
        "common",
        vec![
            navigation(1.0, &login),
            action(200.0, ActionKind::Input, &login, "#password", Some("account"), true),
            request(300.0, "1", "GET", &account, &[], None),
            response(310.0, "1", &account, 200, "text/html", &[]),
            finished(311.0, "1", 10),
        ],
    );
    let zip = scratch.path("common.zip");
    let output = scratch.cli(&["export", "common", "--out", zip.to_str().unwrap(), "--redact"]);
    let stderr = String::from_utf8_lossy(&output.stderr);
    assert_eq!(output.status.code(), Some(2), "{stderr}");
    assert!(stderr.contains("#password") && stderr.contains("addresses use"), "{stderr}");
    assert!(!zip.exists());
    // Without --redact the recording is still the person's to export.
    scratch.cli_json(&["export", "common", "--out", zip.to_str().unwrap(), "--json"]);
}

/// Issue #11: a value no redaction rule chooses (an API key of a service the rules do not know, in an
/// innocently named query parameter and a custom header) but that has the shape of a secret is listed by
/// id, without its value, and the redacted export is refused until the person decides: redacted, it is
/// gone from every file; allowed, it stays; and a policy decides for all.
#[test]
fn a_value_that_looks_like_a_secret_is_listed_for_the_person_to_redact_or_allow() {
    const KEY: &str = "q8Zr2LmX0vTnB4sYwKd7PfJ1";
    let scratch = Scratch::new();
    let search = format!("{SITE}/api/search?k={KEY}&q=mug");
    record_action_task(
        &scratch,
        "suspect",
        vec![
            navigation(1.0, &format!("{SITE}/")),
            request(300.0, "1", "GET", &search, &[("X-Client", KEY)], None),
            response(310.0, "1", &search, 200, "application/json", &[]),
            finished(311.0, "1", 2),
        ],
    );

    let zip = scratch.path("suspect.zip");
    let export = |extra: &[&str]| {
        let mut args = vec!["export", "suspect", "--out", zip.to_str().unwrap(), "--redact"];
        args.extend_from_slice(extra);
        scratch.cli(&args)
    };
    let id = trace_analysis::suspects::id_of(KEY);
    let refused = export(&[]);
    let stderr = String::from_utf8_lossy(&refused.stderr);
    assert_eq!(refused.status.code(), Some(2), "{stderr}");
    assert!(stderr.contains(&id) && stderr.contains("the query of GET http"), "{stderr}");
    assert!(!stderr.contains(KEY), "the refusal shows the value: {stderr}");
    assert!(!zip.exists());

    let holds_key = |zip: &Path| zip_entries(zip).iter().any(|(_, bytes)| contains(bytes, KEY.as_bytes()));
    assert!(export(&["--redact-suspect", &id]).status.success());
    assert!(!holds_key(&zip), "a suspect the person redacted is still in the zip");
    let validated = scratch.cli_json(&["validate", zip.to_str().unwrap(), "--json"]);
    assert_eq!(validated["valid"], true, "{validated}");
    std::fs::remove_file(&zip).unwrap();

    assert!(export(&["--allow-suspect", &id]).status.success());
    assert!(holds_key(&zip), "a suspect the person allowed was removed");
    std::fs::remove_file(&zip).unwrap();

    let report = scratch.cli_json(&[
        "export",
        "suspect",
        "--out",
        zip.to_str().unwrap(),
        "--redact",
        "--suspects",
        "redact",
        "--json",
    ]);
    assert_eq!(report["redaction"]["suspects_redacted"], 1, "{report}");
    assert!(!holds_key(&zip));
}

/// Issue #11: secrets in encodings no single encoder of the redactor writes, sent as script-driven pages
/// send them: JSON declared a form (jQuery's default), a form declared text (`fetch`'s), the password in a
/// URL by `encodeURI` (`@`, `/` and `+` bare) and inside `encodeURIComponent(btoa("ann:" + password))`
/// (its base64 holding `/`), and echoed back by the server as HTML numeric references and as JSON with
/// `\/` and `\u00f6`. The redacted export holds none of them, and still validates.
#[test]
fn secrets_in_encodings_no_one_encoder_writes_leave_no_trace_in_the_redacted_export() {
    use base64::Engine as _;
    const TYPED: &str = "op\"en? sésam?e@vault/+(7)";
    const CLIENT_SECRET: &str = "cl13nt-s3cr3t-0a1b2c3d";
    const FORM_TOKEN: &str = "f0rm-t0k3n-9z8y7x";
    let scratch = Scratch::new();
    let mut host = scratch.host();
    let mut task = TaskMessages::new(task_id("encodings"));
    let login = format!("{SITE}/login");
    let basic = base64::engine::general_purpose::STANDARD.encode(format!("ann:{TYPED}"));
    let basic_in_url = basic.replace('+', "%2B").replace('/', "%2F").replace('=', "%3D");
    assert!(basic[8..basic.len() - 4].contains(['+', '/']), "{basic}");
    let uri = TYPED.replace('"', "%22").replace(' ', "%20").replace('é', "%C3%A9");
    let check = format!("{SITE}/api/check?b={basic_in_url}&p={uri}");
    let numeric = "op&#34;en&#63; s&#233;sam&#63;e&#64;vault&#x2f;&#43;&#40;7&#41;";
    let ascii_json = r#"op\"en? s\u00e9sam?e@vault\/+(7)"#;
    let echo = format!(r#"{{"html":"<p>Signed in with {numeric}</p>","json":"{ascii_json}"}}"#);
    let messages = vec![
        task.start(task_start("encodings", TaskType::Action)),
        task.events(vec![
            navigation(1.0, &login),
            action(100.0, ActionKind::Click, &login, "#password", None, false),
            action(200.0, ActionKind::Input, &login, "#password", Some(TYPED), true),
            request(
                300.0,
                "1",
                "POST",
                &format!("{SITE}/api/partner"),
                &[("Content-Type", "application/x-www-form-urlencoded; charset=UTF-8")],
                Some(&format!(r#"{{"user":"ann","client_secret":"{CLIENT_SECRET}"}}"#)),
            ),
            response(310.0, "1", &format!("{SITE}/api/partner"), 204, "", &[]),
            finished(311.0, "1", 0),
            request(
                320.0,
                "2",
                "POST",
                &format!("{SITE}/api/session"),
                &[("Content-Type", "text/plain;charset=UTF-8")],
                Some(&format!("user=ann&csrf_token={FORM_TOKEN}")),
            ),
            response(330.0, "2", &format!("{SITE}/api/session"), 204, "", &[]),
            finished(331.0, "2", 0),
            typed_request(400.0, "3", "GET", &check, "Fetch", None),
            response(410.0, "3", &check, 200, "application/json", &[]),
            finished(411.0, "3", echo.len() as u64),
        ]),
    ];
    let mut messages = messages;
    messages.extend(task.body("3", BodyPart::Response, echo.as_bytes(), 1024));
    messages.push(task.stop(T0 + 1000.0, None));
    send_all(&mut host, &task, &messages);
    host.close().unwrap();

    let leaks = [TYPED, &uri, &basic_in_url[8..basic_in_url.len() - 8], numeric, ascii_json, CLIENT_SECRET, FORM_TOKEN];
    export_redacted_holding_none(&scratch, "encodings", &leaks);
}

/// Issue #11: a common value under a name a broad rule calls secret (`?sort_key=text`, which became
/// `trace-redacted-…/plain` in every content type; `?sort_key=name`, which took the HAR's `name` fields away
/// and refused the export with "missing field `name`") is left as it is and listed by its name; the
/// export succeeds whole. A credential typed as such a word refuses the export, naming the field.
#[test]
fn a_common_value_under_a_broad_secret_name_is_listed_and_the_export_stays_whole() {
    let scratch = Scratch::new();
    let by_text = format!("{SITE}/search?q=mug&sort_key=text");
    let by_name = format!("{SITE}/search?q=mug&sort_key=name");
    record_action_task(
        &scratch,
        "sorted",
        vec![
            navigation(1.0, &by_text),
            request(2.0, "1", "GET", &by_text, &[], None),
            response(3.0, "1", &by_text, 200, "text/plain", &[("Content-Type", "text/plain")]),
            finished(4.0, "1", 0),
            request(5.0, "2", "GET", &by_name, &[], None),
            response(6.0, "2", &by_name, 200, "text/plain", &[("Content-Type", "text/plain")]),
            finished(7.0, "2", 0),
        ],
    );

    let zip = scratch.path("sorted.zip");
    let output = scratch.cli(&["export", "sorted", "--out", zip.to_str().unwrap(), "--redact"]);
    let stderr = String::from_utf8_lossy(&output.stderr);
    assert_eq!(output.status.code(), Some(0), "{stderr}");
    assert!(stderr.contains("url-parameter \"sort_key\"") && stderr.contains("not redacted"), "{stderr}");
    let entries = zip_entries(&zip);
    let har: trace_manifest::har::Har = serde_json::from_slice(&entries["recording.har"]).unwrap();
    let types: Vec<&str> = har.log.entries.iter().map(|entry| entry.response.content.mime_type.as_str()).collect();
    assert_eq!(types, ["text/plain", "text/plain"]);
    assert!(har.log.entries[1].request.url.ends_with("sort_key=name"));
    let validated = scratch.cli_json(&["validate", zip.to_str().unwrap(), "--json"]);
    assert_eq!(validated["valid"], true, "{validated}");

    // Typed into a credential field, the same word refuses the export.
    let login = format!("{SITE}/login");
    record_action_task(
        &scratch,
        "typed-text",
        vec![navigation(1.0, &login), action(200.0, ActionKind::Input, &login, "#password", Some("Text"), true)],
    );
    let zip = scratch.path("typed-text.zip");
    let output = scratch.cli(&["export", "typed-text", "--out", zip.to_str().unwrap(), "--redact"]);
    let stderr = String::from_utf8_lossy(&output.stderr);
    assert_eq!(output.status.code(), Some(2), "{stderr}");
    assert!(stderr.contains("#password") && stderr.contains("common word"), "{stderr}");
    assert!(!zip.exists());
}

/// Issue #31: after `--suspects redact`, 4 of 19 secrets of a realistic page survived: a password and a
/// passphrase in a request body the page compressed (`Content-Encoding: gzip`), a session token in a
/// WebSocket frame (Socket.IO's framing), and an API key shown on a page. Each is now found by the rules
/// every body goes through (decoded, unframed, the page's text read) and replaced; the compressed body is
/// compressed again and the bundle validates. The other side: a labelled value that names no secret (an
/// order number), a frame of plain data and a compressed body holding no secret are kept as they were.
#[test]
fn secrets_in_compressed_bodies_socket_frames_and_page_text_are_redacted() {
    use trace_analysis::body::ContentEncoding;
    use trace_manifest::event::{EventKind, WebSocketEvent, WebSocketOp};

    const TYPED: &str = "Tr0ub4dor&3-horse";
    const PASSPHRASE: &str = "correct-horse-battery-staple-77";
    const SOCKET_TOKEN: &str = "sk9Q2mZ7xLp4Rt8Vw3Yb6Nc1";
    const API_KEY: &str = "9f86d081884c7d659a2feaa0c55ad015";
    const ORDER: &str = "ORD2024A11B27C0042X";
    const PING_ID: &str = "3f2504e0-4f89-41d3-9a0c-0305e82c3301";
    let scratch = Scratch::new();
    let mut host = scratch.host();
    let mut task = TaskMessages::new(task_id("realistic"));
    let login = format!("{SITE}/login");
    let keys = format!("{SITE}/account/keys");
    let socket = "ws://127.0.0.1:8000/socket.io/?EIO=4&transport=websocket";
    let login_body =
        format!(r#"{{"user":"ann","password":"{TYPED}","vault":{{"passphrase":"{PASSPHRASE}"}}}}"#).into_bytes();
    let telemetry = br#"{"events":[{"kind":"view","page":"/account/keys"}]}"#.to_vec();
    let page = format!(
        "<html><body><h1>Keys</h1><dl><dt>API key</dt><dd><code>{API_KEY}</code></dd>\
         <dt>Order number</dt><dd>{ORDER}</dd></dl></body></html>"
    );
    let frame = |ts: f64, op: WebSocketOp, data: String| {
        event(
            ts,
            EventKind::WebSocket(WebSocketEvent {
                request_id: "ws1".into(),
                op,
                url: None,
                opcode: Some(1),
                data: Some(data),
            }),
        )
    };
    let gzipped = [("Content-Type", "application/json"), ("Content-Encoding", "gzip")];
    let mut messages = vec![
        task.start(task_start("realistic", TaskType::Action)),
        task.events(vec![
            navigation(1.0, &login),
            action(100.0, ActionKind::Click, &login, "#password", None, false),
            action(200.0, ActionKind::Input, &login, "#password", Some(TYPED), true),
            request(300.0, "1", "POST", &format!("{SITE}/api/login"), &gzipped, None),
            response(310.0, "1", &format!("{SITE}/api/login"), 204, "", &[]),
            finished(311.0, "1", 0),
            request(320.0, "2", "POST", &format!("{SITE}/api/telemetry"), &gzipped, None),
            response(330.0, "2", &format!("{SITE}/api/telemetry"), 204, "", &[]),
            finished(331.0, "2", 0),
            event(
                400.0,
                EventKind::WebSocket(WebSocketEvent {
                    request_id: "ws1".into(),
                    op: WebSocketOp::Opened,
                    url: Some(socket.into()),
                    opcode: None,
                    data: None,
                }),
            ),
            frame(410.0, WebSocketOp::Sent, format!(r#"42["auth",{{"session_token":"{SOCKET_TOKEN}"}}]"#)),
            frame(420.0, WebSocketOp::Received, format!(r#"42["ping",{{"id":"{PING_ID}"}}]"#)),
            navigation(500.0, &keys),
            request(510.0, "3", "GET", &keys, &[], None),
            response(520.0, "3", &keys, 200, "text/html", &[]),
            finished(521.0, "3", page.len() as u64),
        ]),
    ];
    messages.extend(task.body("1", BodyPart::Request, &ContentEncoding::Gzip.encode(&login_body), 1024));
    let telemetry_gzipped = ContentEncoding::Gzip.encode(&telemetry);
    messages.extend(task.body("2", BodyPart::Request, &telemetry_gzipped, 1024));
    messages.extend(task.body("3", BodyPart::Response, page.as_bytes(), 1024));
    messages.push(task.stop(T0 + 1000.0, None));
    send_all(&mut host, &task, &messages);
    host.close().unwrap();

    let zip = scratch.path("realistic.zip");
    let args = ["export", "realistic", "--out", zip.to_str().unwrap(), "--redact", "--suspects", "redact", "--json"];
    let report = scratch.cli_json(&args);
    assert!(report.get("error").is_none(), "{report}");
    let entries = zip_entries(&zip);
    let mut decoded_bodies = 0;
    for (entry, bytes) in &entries {
        let decoded = ContentEncoding::Gzip.decode(bytes, 1 << 20);
        decoded_bodies += usize::from(decoded.is_some());
        for view in std::iter::once(bytes).chain(decoded.as_ref()) {
            for leaked in [TYPED, PASSPHRASE, SOCKET_TOKEN, API_KEY] {
                assert!(!contains(view, leaked.as_bytes()), "{entry} still holds {leaked:?}");
            }
        }
    }
    assert_eq!(decoded_bodies, 2, "both compressed bodies are still compressed");
    // What names no secret is kept: byte for byte for the body that held none.
    assert!(entries.values().any(|bytes| *bytes == telemetry_gzipped), "the telemetry body changed");
    assert!(entries.values().any(|bytes| contains(bytes, ORDER.as_bytes())), "the order number was redacted");
    assert!(entries.values().any(|bytes| contains(bytes, PING_ID.as_bytes())), "the ping's id was redacted");
    let validated = scratch.cli_json(&["validate", zip.to_str().unwrap(), "--json"]);
    assert_eq!(validated["valid"], true, "{validated}");

    // The same as a WACZ: its search decodes each WARC record and the compressed request bodies in them,
    // finds nothing left, and lets the export through; decoded, the records hold none of the secrets.
    let wacz = scratch.path("realistic.wacz");
    let args = ["export", "realistic", "--format", "wacz", "--out", wacz.to_str().unwrap(), "--redact", "--suspects"];
    let report = scratch.cli_json(&[&args[..], &["redact", "--json"]].concat());
    assert_eq!(report["format"], "wacz", "{report}");
    let mut warc = Vec::new();
    let warc_gz = zip_entries(&wacz).remove("archive/data.warc.gz").unwrap();
    std::io::Read::read_to_end(&mut flate2::read::MultiGzDecoder::new(&warc_gz[..]), &mut warc).unwrap();
    for leaked in [TYPED, PASSPHRASE, API_KEY] {
        assert!(!contains(&warc, leaked.as_bytes()), "the WACZ still holds {leaked:?}");
    }
    assert!(contains(&warc, ORDER.as_bytes()), "the order number was redacted");
    assert!(contains(&warc, &telemetry_gzipped), "the telemetry body changed");
}

/// Every way a compressed body can sit in `bytes` (an entry of an export), decoded: the bytes as they are,
/// gunzipped or inflated, and each JSON string in them that stands for a compressed stream one character
/// per byte (DevTools' text of a body that is not UTF-8), decoded.
fn every_view(bytes: &[u8]) -> Vec<Vec<u8>> {
    use trace_analysis::body::{compressed_text, decode_compressed};
    let mut views = vec![bytes.to_vec()];
    if let Some((_, decoded)) = decode_compressed(bytes, 1 << 24) {
        views.push(decoded);
    }
    for line in bytes.split(|byte| *byte == b'\n') {
        let Ok(value) = serde_json::from_slice::<serde_json::Value>(line) else { continue };
        let mut strings = vec![&value];
        while let Some(value) = strings.pop() {
            match value {
                serde_json::Value::String(text) => {
                    if let Some((_, decoded)) = compressed_text(text, 1 << 24) {
                        views.push(decoded);
                    }
                }
                serde_json::Value::Array(items) => strings.extend(items),
                serde_json::Value::Object(members) => strings.extend(members.values()),
                _ => {}
            }
        }
    }
    views
}

/// Issue #45: a page that gzips a JSON body itself (`CompressionStream('gzip')`) and POSTs it as
/// `application/octet-stream`, without `Content-Encoding`: DevTools gives the body as text of one
/// character per byte (`\u{1f}\u{8b}…`), which the recorder keeps in the request event and the HAR; the
/// redacted zip and WACZ still gunzipped to the typed password and the passphrase (2 of 19 secrets), and
/// the export's own search said the zip held none. Compressed bodies are known by their bytes, in text and
/// in files, redacted inside and compressed again, and the final search decodes them too. The other side:
/// a compressed body with no secret stays byte for byte, and the bundle validates.
#[test]
fn a_body_compressed_without_saying_so_is_redacted_inside_and_searched_decoded() {
    use trace_analysis::body::{ContentEncoding, latin1_text};

    const TYPED: &str = "Tr0ub4dor&3-horse";
    const PASSPHRASE: &str = "correct-horse-battery-staple-77";
    let scratch = Scratch::new();
    let mut host = scratch.host();
    let mut task = TaskMessages::new(task_id("gzipped"));
    let login = format!("{SITE}/login");
    let body = format!(r#"{{"user":"ann","password":"{TYPED}","vault":{{"passphrase":"{PASSPHRASE}"}}}}"#);
    let gzipped = ContentEncoding::Gzip.encode(body.as_bytes());
    let telemetry = ContentEncoding::Gzip.encode(br#"{"events":[{"kind":"view","page":"/login"}]}"#);
    let as_devtools_gives_it = latin1_text(&gzipped);
    let octets = [("Content-Type", "application/octet-stream")];
    let mut messages = vec![
        task.start(task_start("gzipped", TaskType::Action)),
        task.events(vec![
            navigation(1.0, &login),
            action(100.0, ActionKind::Click, &login, "#password", None, false),
            action(200.0, ActionKind::Input, &login, "#password", Some(TYPED), true),
            request(300.0, "1", "POST", &format!("{SITE}/api/login"), &octets, Some(&as_devtools_gives_it)),
            response(310.0, "1", &format!("{SITE}/api/login"), 204, "", &[]),
            finished(311.0, "1", 0),
            // The same body kept as a file, as a recorder that takes the bytes keeps it.
            request(320.0, "2", "POST", &format!("{SITE}/api/vault"), &octets, None),
            response(330.0, "2", &format!("{SITE}/api/vault"), 204, "", &[]),
            finished(331.0, "2", 0),
            request(340.0, "3", "POST", &format!("{SITE}/api/telemetry"), &octets, None),
            response(350.0, "3", &format!("{SITE}/api/telemetry"), 204, "", &[]),
            finished(351.0, "3", 0),
        ]),
    ];
    messages.extend(task.body("2", BodyPart::Request, &gzipped, 1024));
    messages.extend(task.body("3", BodyPart::Request, &telemetry, 1024));
    messages.push(task.stop(T0 + 1000.0, None));
    send_all(&mut host, &task, &messages);
    host.close().unwrap();

    let zip = scratch.path("gzipped.zip");
    let report = scratch.cli_json(&["export", "gzipped", "--out", zip.to_str().unwrap(), "--redact", "--json"]);
    assert!(report.get("error").is_none(), "{report}");
    let entries = zip_entries(&zip);
    for (entry, bytes) in &entries {
        for view in every_view(bytes) {
            for leaked in [TYPED, PASSPHRASE] {
                assert!(!contains(&view, leaked.as_bytes()), "{entry} still holds {leaked:?}");
            }
        }
    }
    let events = &entries["events.jsonl"];
    assert!(every_view(events).len() > 1, "the body is still compressed text in the events");
    assert!(entries.values().any(|bytes| *bytes == telemetry), "the body that held no secret changed");
    let validated = scratch.cli_json(&["validate", zip.to_str().unwrap(), "--json"]);
    assert_eq!(validated["valid"], true, "{validated}");

    let wacz = scratch.path("gzipped.wacz");
    let args = ["export", "gzipped", "--format", "wacz", "--out", wacz.to_str().unwrap(), "--redact", "--json"];
    let report = scratch.cli_json(&args);
    assert_eq!(report["format"], "wacz", "{report}");
    let mut warc = Vec::new();
    let warc_gz = zip_entries(&wacz).remove("archive/data.warc.gz").unwrap();
    std::io::Read::read_to_end(&mut flate2::read::MultiGzDecoder::new(&warc_gz[..]), &mut warc).unwrap();
    let mut compressed_payloads = 0;
    for at in 0..warc.len().saturating_sub(1) {
        if warc[at..].starts_with(&[0x1f, 0x8b]) {
            // One gzip member, the payload, followed by the rest of the WARC.
            let mut decoded = Vec::new();
            let member = flate2::read::GzDecoder::new(&warc[at..]);
            if std::io::Read::read_to_end(&mut std::io::Read::take(member, 1 << 24), &mut decoded).is_err() {
                continue;
            }
            compressed_payloads += 1;
            for leaked in [TYPED, PASSPHRASE] {
                assert!(!contains(&decoded, leaked.as_bytes()), "a WACZ record still gunzips to {leaked:?}");
            }
        }
    }
    assert!(compressed_payloads >= 2, "the compressed bodies are in the WARC as they were sent");
}
