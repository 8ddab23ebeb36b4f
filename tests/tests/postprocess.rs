//! End to end, through the command line a user runs: the demonstration of [`trace_e2e::demo`] is recorded
//! in Chromium with the extension and the host, then `trace-host process` derives its trajectory,
//! credentials, checkpoints and ignore list and audits the checkpoints (the demonstration re-run offline
//! earns full marks, an agent that does nothing and every perturbed demonstration zero), with a model's
//! proposals judged beside the rules' ([`trace_e2e::judge`]'s scripted model); `trace-host export --redact`
//! makes a zip in which a byte search finds none of the session's secrets, which carries the audit's
//! verdict and which `trace-replay run --human` still re-runs offline; and `trace-host dataset` writes both
//! dataset layouts, read back here through their types, and refuses a bundle whose final state is on its
//! start page. Needs `cargo xtask dist`.

use std::collections::BTreeSet;
use std::io::Read;
use std::path::Path;
use std::process::{Command, Output};

use trace_analysis::evidence::{Evidence, holds};
use trace_bundle::archive::{Bundle, sha256_hex};
use trace_e2e::audit::assert_proves as assert_audit_proves;
use trace_e2e::browser::Build;
use trace_e2e::demo;
use trace_e2e::judge::{Behaviour, ScriptedJudge};
use trace_e2e::run;
use trace_e2e::site::{DEMO_PASSWORD, DEMO_USER, DemoSite, sealed, vault};
use trace_manifest::audit::{Audit, AuditRunKind, CheckpointVerdict, ServingPath};
use trace_manifest::bundle::BundleManifest;
use trace_manifest::dataset::{BrowserUseHistory, TaskLine, WebArenaEntry, WebArenaResult};
use trace_manifest::eval::{EvalResult, EvalSummary};
use trace_manifest::postprocess::{Checkpoint, CheckpointRole, CredentialEntry, Predicate};
use trace_manifest::trajectory::{ToolAction, Trajectory};

/// The demonstration as tool calls: name and what it acted on (frames first), with the site's port
/// written as PORT, and the URL path before and after.
const EXPECTED_TRAJECTORY: &[&str] = &[
    "navigate / | - | - -> /",
    "navigate /login | - | / -> /login",
    "input \"ann\" | #username | /login -> /login",
    "input \"{{credentials.127.0.0.1.password}}\" | #password | /login -> /login",
    "click | #login-submit | /login -> /account",
    "click | #signed-in-as | /account -> /account",
    "select_dropdown \"Express (next day)\" | #shipping | /account -> /account",
    "click | #gift-wrap | /account -> /account",
    "click | #add-to-cart | /account -> /cart",
    "navigate / | - | /cart -> /",
    "scroll | - | / -> /",
    "input \"mug\" | #search-input | / -> /",
    "send_keys Enter | #search-input | / -> /search?q=mug",
    "navigate /deals | - | /search?q=mug -> /search?q=mug",
    "navigate /embed | - | /search?q=mug -> /embed",
    "click | #widget >> #widget-button | /embed -> /embed",
    "click | iframe[src^=\"http\\:\\/\\/localhost\\:PORT\"] >> #widget-button | /embed -> /embed",
    "navigate /strict | - | /embed -> /strict",
    "input \"copied under a strict policy\" | #strict-input | /strict -> /strict",
    "click | #strict-button | /strict -> /strict",
    "send_keys Escape | #strict-input | /strict -> /strict",
    "navigate /clock | - | /strict -> /clock",
    "navigate / | - | /clock -> /",
    "click | #help-link | / -> /help",
    "done \"\" | - | /help -> /help",
];

fn path_of(url: Option<&str>) -> String {
    let Some(url) = url else { return "-".to_owned() };
    let parsed = url::Url::parse(url).unwrap();
    match parsed.query() {
        Some(query) => format!("{}?{query}", parsed.path()),
        None => parsed.path().to_owned(),
    }
}

fn summary(trajectory: &Trajectory, port: u16) -> Vec<String> {
    trajectory
        .tool_calls
        .iter()
        .map(|call| {
            let action = match &call.action {
                ToolAction::Navigate { url } => format!("navigate {}", path_of(Some(url))),
                ToolAction::Input { text } => format!("input {text:?}"),
                ToolAction::SendKeys { keys } => format!("send_keys {keys}"),
                ToolAction::SelectDropdown { option } => format!("select_dropdown {option:?}"),
                ToolAction::Done { text, .. } => format!("done {text:?}"),
                other => other.name().to_owned(),
            };
            let target = call.target.as_ref().map_or("-".to_owned(), |target| {
                target.frame_path.iter().map(|frame| format!("{frame} >> ")).collect::<String>() + &target.selector
            });
            let before = path_of(call.url_before.as_deref());
            let after = path_of(call.url_after.as_deref());
            format!("{action} | {target} | {before} -> {after}").replace(&port.to_string(), "PORT")
        })
        .collect()
}

fn json_of(output: &Output) -> serde_json::Value {
    serde_json::from_slice(&output.stdout)
        .unwrap_or_else(|e| panic!("{e}: {}", String::from_utf8_lossy(&output.stdout)))
}

fn read_json<T: serde::de::DeserializeOwned>(path: &Path) -> T {
    serde_json::from_slice(&std::fs::read(path).unwrap()).unwrap_or_else(|e| panic!("{}: {e}", path.display()))
}

fn contains(haystack: &[u8], needle: &[u8]) -> bool {
    haystack.windows(needle.len()).any(|window| window == needle)
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_recording_becomes_a_redacted_replayable_environment_and_a_dataset() {
    let Some(build) = Build::for_tests("a_recording_becomes_a_redacted_replayable_environment_and_a_dataset") else {
        return;
    };
    let site = DemoSite::start(0).unwrap();
    let port = site.port();
    let data = tempfile::tempdir().unwrap();
    let demonstration = demo::record(&build, &site, data.path()).await.unwrap();
    site.stop();
    let host = |args: &[&str]| {
        let mut all = vec!["--data", data.path().to_str().unwrap()];
        all.extend_from_slice(args);
        run(&build.trace_host, &all)
    };
    let manifest: serde_json::Value = read_json(&demonstration.bundle.join("manifest.json"));
    let task = manifest["task"]["id"].as_str().unwrap().to_owned();

    // `process`: the expected trajectory, the password as a placeholder only, and the checkpoints audited,
    // with a model asked for more.
    let model = ScriptedJudge::start(Behaviour::Scripted).await;
    let cache = tempfile::tempdir().unwrap();
    let process = Command::new(&build.trace_host)
        .args(["--data", data.path().to_str().unwrap(), "process", &task, "--json", "--llm", "scripted"])
        .arg("--llm-cache")
        .arg(cache.path())
        .env("OPENAI_BASE_URL", model.base_url())
        .output()
        .unwrap();
    assert!(process.status.success(), "{}", String::from_utf8_lossy(&process.stderr));
    let report = json_of(&process);
    assert_eq!(report["credentials"], 1, "{report}");
    let bundle = &demonstration.bundle;
    let trajectory: Trajectory = read_json(&bundle.join("trajectory.json"));
    let actual = summary(&trajectory, port);
    assert_eq!(actual, EXPECTED_TRAJECTORY, "actual:\n{}", actual.join("\n"));
    assert!(!contains(&std::fs::read(bundle.join("trajectory.json")).unwrap(), DEMO_PASSWORD.as_bytes()));
    let credentials: Vec<CredentialEntry> = read_json(&bundle.join("credentials.json"));
    assert_eq!(credentials.len(), 1);
    assert_eq!(
        (credentials[0].value.as_str(), credentials[0].descriptor.selector.as_str()),
        (DEMO_PASSWORD, "#password")
    );

    // Checkpoints: real progress (the login POST, the cart, the search results), each holding on the
    // recording itself, in the order reached, and proven so.
    let checkpoints: Vec<Checkpoint> = read_json(&bundle.join("checkpoints.json"));
    assert!(checkpoints.len() >= 2, "{checkpoints:#?}");
    let audit: Audit = read_json(&bundle.join("audit.json"));
    assert_audit_proves(&audit);
    // Issue #47, part 3: the login checkpoint checks the password given, by its placeholder, and the
    // audit's wrong password (the demonstration with the password's last character moved on) signs in to
    // nothing; neither password is written in the audit.
    let login = checkpoints
        .iter()
        .find(|c| matches!(&c.predicate, Predicate::Request { url_pattern, .. } if url_pattern.ends_with("/login")))
        .unwrap_or_else(|| panic!("no login checkpoint: {checkpoints:#?}"));
    let Predicate::Request { credential_fields, .. } = &login.predicate else { unreachable!() };
    assert_eq!(credential_fields.values().collect::<Vec<_>>(), [&credentials[0].placeholder], "{login:?}");
    let wrong = audit.runs.iter().position(|run| matches!(run.kind, AuditRunKind::CredentialAltered { .. }));
    let wrong = &audit.runs[wrong.unwrap_or_else(|| panic!("no wrong password in {:#?}", audit.runs))];
    assert_eq!((wrong.success, wrong.as_expected), (0.0, true), "{wrong:#?}");
    let login_reached = audit.checkpoints.iter().find(|c| c.id == login.id).unwrap();
    assert!(login_reached.runs.iter().any(|r| r.run == wrong.name && !r.reached), "{login_reached:#?}");
    let written = std::fs::read(bundle.join("audit.json")).unwrap();
    for password in [DEMO_PASSWORD.to_owned(), trace_analysis::audit::alter_text(DEMO_PASSWORD)] {
        assert!(!contains(&written, password.as_bytes()), "audit.json holds a password");
    }
    assert_eq!(report["audit"]["status"], "audited", "{report}");
    assert_eq!(report["audit"]["valid"], true, "{report}");
    // The model's proposals were judged as the rules' are: the text of the final page kept, the shop's
    // name, which an agent doing nothing sees, dropped.
    assert!(model.requests() >= 1);
    let kept: Vec<&Checkpoint> = checkpoints.iter().filter(|c| c.proposed_by.as_deref() == Some("scripted")).collect();
    assert_eq!(kept.len(), 1, "{checkpoints:#?}");
    assert!(
        audit.dropped.iter().any(|dropped| dropped.proposed_by.as_deref() == Some("scripted")
            && dropped.verdict == CheckpointVerdict::ReachedByNothing),
        "{:#?}",
        audit.dropped
    );
    let manifest: BundleManifest = read_json(&bundle.join("manifest.json"));
    assert_eq!(manifest.audit.as_ref().map(|audit| audit.valid), Some(true));
    let evidence = Evidence::load(&mut Bundle::open(bundle).unwrap()).unwrap();
    for checkpoint in &checkpoints {
        assert!(!holds(&checkpoint.predicate, &evidence).is_empty(), "{checkpoint:?} does not hold");
    }
    let predicates = serde_json::to_string(&checkpoints).unwrap();
    for reached in ["/login", "/cart", "/search?q=mug"] {
        assert!(predicates.contains(&format!("127.0.0.1:{port}{reached}")), "{reached} is no checkpoint: {predicates}");
    }

    // The ignore list has the shop's tracker and not its API.
    let ignored: Vec<String> = read_json(&bundle.join("ignored.json"));
    assert!(ignored.iter().any(|pattern| pattern.contains("/collect")), "{ignored:?}");
    assert!(!ignored.iter().any(|pattern| format!("127.0.0.1:{port}/api/products?_=1").contains(pattern.as_str())));

    // The session's secrets, as recorded: the password, and the session and CSRF cookies' values.
    let storage: serde_json::Value = read_json(&bundle.join("storage.json"));
    let mut secrets: BTreeSet<String> = BTreeSet::from([DEMO_PASSWORD.to_owned()]);
    for snapshot in storage["snapshots"].as_array().unwrap() {
        for cookie in snapshot["cookies"].as_array().unwrap() {
            secrets.insert(cookie["value"].as_str().unwrap().to_owned());
        }
    }
    let har = std::fs::read_to_string(bundle.join("recording.har")).unwrap();
    for name in ["session=", "csrf="] {
        for (at, _) in har.match_indices(name) {
            let value: String = har[at + name.len()..].chars().take_while(|c| c.is_ascii_alphanumeric()).collect();
            if value.len() >= 16 {
                secrets.insert(value);
            }
        }
    }
    assert!(secrets.len() >= 3, "the password, a session id and a CSRF token: {} found", secrets.len());

    // `export --redact`: a byte search of every entry finds none of them, and the zip validates.
    let zip = data.path().join("redacted.zip");
    let export = json_of(&host(&["export", &task, "--out", zip.to_str().unwrap(), "--redact", "--json"]));
    assert!(export["redaction"]["replacements"].as_u64().unwrap() > 0, "{export}");
    let mut archive = zip::ZipArchive::new(std::fs::File::open(&zip).unwrap()).unwrap();
    for index in 0..archive.len() {
        let mut entry = archive.by_index(index).unwrap();
        let mut bytes = Vec::new();
        entry.read_to_end(&mut bytes).unwrap();
        for secret in &secrets {
            assert!(!contains(&bytes, secret.as_bytes()), "{} holds a secret", entry.name());
        }
    }
    let validated = json_of(&host(&["validate", zip.to_str().unwrap(), "--json"]));
    assert_eq!(validated["valid"], true, "{validated}");
    let exported = Bundle::open(&zip).unwrap().manifest().unwrap();
    assert_eq!(exported.audit.as_ref().map(|audit| audit.valid), Some(true), "the zip carries the verdict");

    // The redacted environment still replays: the person's demonstration, re-run offline, signs in with the
    // credential's stand-in and passes every step.
    let replay = Command::new(build.trace_host.with_file_name("trace-replay"))
        .args(["run", "--human", "--json", "--headless", "--chromium"])
        .arg(&build.chromium)
        .arg(&zip)
        .output()
        .unwrap();
    let replayed = json_of(&replay);
    assert_eq!(replayed["steps_failed"], 0, "{replayed:#}");
    assert_eq!(replayed["steps_passed"], replayed["steps_total"], "{replayed:#}");
    assert_eq!(replayed["misses"], serde_json::json!([]), "{replayed:#}");

    // The built-in agent that does nothing earns nothing on the audited environment, and its result says
    // that the environment's checkpoints were proven.
    let runs = data.path().join("runs-nothing");
    let output = Command::new(build.trace_host.with_file_name("trace-replay"))
        .args(["eval", zip.to_str().unwrap(), "--agent", "nothing", "--out", runs.to_str().unwrap(), "--chromium"])
        .arg(&build.chromium)
        .output()
        .unwrap();
    assert!(output.status.success(), "{}", String::from_utf8_lossy(&output.stderr));
    let idle: EvalResult = read_json(&runs.join(&task).join("result.json"));
    assert_eq!((idle.success, idle.checkpoints.reached_any_order), (0.0, 0), "{idle:#?}");
    assert_eq!(idle.audit.as_ref().map(|audit| audit.valid), Some(true), "{idle:#?}");
    let idle_summary: EvalSummary = read_json(&runs.join("summary.json"));
    assert_eq!((idle_summary.tasks, idle_summary.invalid_tasks, idle_summary.unaudited_tasks), (1, 0, 0));

    // `dataset`, in both layouts, from the task of the data directory.
    let trace_dir = data.path().join("dataset-trace");
    host(&["dataset", &task, "--out", trace_dir.to_str().unwrap()]);
    let text = std::fs::read_to_string(trace_dir.join("tasks.jsonl")).unwrap();
    let lines: Vec<TaskLine> = text.lines().map(|line| serde_json::from_str(line).unwrap()).collect();
    assert_eq!(lines.len(), 1);
    let line = &lines[0];
    assert_eq!(line.task_description, demo::DESCRIPTION);
    assert_eq!(
        summary(&Trajectory { task_id: line.task_id.clone(), tool_calls: line.tool_calls.clone() }, port),
        EXPECTED_TRAJECTORY
    );
    assert_eq!(line.num_steps, EXPECTED_TRAJECTORY.len());
    assert_eq!(line.checkpoints.len(), checkpoints.len());
    // #47: the audit proved the task for `eval` and through the proxy BrowserGym's package serves from.
    assert_eq!(line.paths, [ServingPath::Devtools, ServingPath::Proxy]);
    assert!(line.credentials[0].value.starts_with("trace-redacted-"), "redacted credentials");
    assert!(!contains(text.as_bytes(), DEMO_PASSWORD.as_bytes()));

    let webarena_dir = data.path().join("dataset-webarena");
    host(&["dataset", &task, "--out", webarena_dir.to_str().unwrap(), "--format", "webarena-infinity"]);
    let entries: Vec<WebArenaEntry> = read_json(&webarena_dir.join("data/manifest.json"));
    assert_eq!(entries.len(), 1);
    // The initial navigation is step 0 of a browser-use history; the other calls follow it.
    assert_eq!((entries[0].model.as_str(), entries[0].steps), ("human", EXPECTED_TRAJECTORY.len()));
    assert_eq!(entries[0].difficulty, "hard");
    assert_eq!(entries[0].environment, format!("127-0-0-1-{port}"));
    let task_dir = webarena_dir.join("data/human").join(&entries[0].environment).join(&task);
    let history: BrowserUseHistory = read_json(&task_dir.join("history.json"));
    assert_eq!(history.history.len(), EXPECTED_TRAJECTORY.len());
    let first = &history.history[0];
    assert_eq!(first.metadata.as_ref().unwrap().step_number, 0);
    assert_eq!(first.state.title, "Initial Actions");
    assert!(first.state.screenshot_path.is_none());
    let navigate = &first.model_output.as_ref().unwrap().action[0]["navigate"];
    assert_eq!(navigate["new_tab"], false, "{navigate}");
    let result: WebArenaResult = read_json(&task_dir.join("result.json"));
    assert!(result.passed && result.is_done, "{result:?}");
    assert_eq!((result.steps, result.errors.len()), (history.history.len(), history.history.len()));
    assert!(result.verifier_message.contains("checkpoints hold"), "{result:?}");
    let raw: serde_json::Value = read_json(&task_dir.join("result.json"));
    let keys: Vec<&str> = raw.as_object().unwrap().keys().map(String::as_str).collect();
    assert_eq!(
        keys,
        [
            "difficulty",
            "elapsed",
            "errors",
            "final_result",
            "instruction",
            "is_done",
            "passed",
            "steps",
            "task_id",
            "verifier_message"
        ],
        "WebArena-Infinity's result fields, no others"
    );
    // Every step whose state had a screenshot points at a real picture beside it, of the kind its name says
    // (WebP, as the recorder takes them).
    let screenshots: Vec<&String> =
        history.history.iter().filter_map(|step| step.state.screenshot_path.as_ref()).collect();
    assert!(screenshots.len() >= 10, "{screenshots:?}");
    for screenshot in screenshots {
        assert!(screenshot.ends_with(".webp"), "{screenshot} is named as a WebP");
        let bytes = std::fs::read(task_dir.join(screenshot)).unwrap();
        assert!(bytes.starts_with(b"RIFF") && &bytes[8..12] == b"WEBP", "{screenshot} is a WebP");
    }

    // Issue #29: a bundle whose final state is on its start page (the shop's name, shown everywhere) is no
    // task: `dataset` refuses it, naming the checkpoint, unless told to take it anyway.
    let copy = data.path().join("shop-name-as-final-state");
    trace_e2e::bench::copy_dir(bundle, &copy).unwrap();
    host(&["process", copy.to_str().unwrap(), "--no-audit"]);
    let mut checkpoints: Vec<Checkpoint> = read_json(&copy.join("checkpoints.json"));
    checkpoints.retain(|checkpoint| checkpoint.role != Some(CheckpointRole::FinalState));
    checkpoints.push(Checkpoint {
        id: format!("cp{}", checkpoints.len() + 1),
        reason: "the final page shows the shop's name".into(),
        predicate: Predicate::Text { text: "TRACE Demo Shop".into() },
        event_ids: vec![],
        step: None,
        role: Some(CheckpointRole::FinalState),
        proposed_by: None,
    });
    let bytes = serde_json::to_vec_pretty(&checkpoints).unwrap();
    std::fs::write(copy.join("checkpoints.json"), &bytes).unwrap();
    let mut manifest: BundleManifest = read_json(&copy.join("manifest.json"));
    let entry = manifest.files.iter_mut().find(|entry| entry.path == "checkpoints.json").unwrap();
    (entry.size, entry.sha256) = (bytes.len() as u64, sha256_hex(&bytes));
    std::fs::write(copy.join("manifest.json"), serde_json::to_vec_pretty(&manifest).unwrap()).unwrap();
    let refused = data.path().join("dataset-refused");
    let output = Command::new(&build.trace_host)
        .args(["dataset", copy.to_str().unwrap(), "--out", refused.to_str().unwrap(), "--json"])
        .output()
        .unwrap();
    assert!(!output.status.success(), "a dataset of no task fails");
    let report = json_of(&output);
    let reason = report["skipped"][0]["reason"].as_str().unwrap_or_default();
    assert!(reason.contains("TRACE Demo Shop") && reason.contains("holds on the start page"), "{report:#}");
    let taken = data.path().join("dataset-allowed");
    let report = json_of(&host(&[
        "dataset",
        copy.to_str().unwrap(),
        "--out",
        taken.to_str().unwrap(),
        "--allow-invalid",
        "--json",
    ]));
    assert_eq!(report["invalid"], serde_json::json!([task]), "{report:#}");
}

/// Issue #11: secrets a page sends by script, under names no rule knows, recorded through the extension
/// on the shop's partner vault: a passphrase typed into a text field, sent in base64 `user:passphrase`
/// inside JSON sent as `text/plain`, with `encodeURIComponent` in a URL, and as base64 again through
/// `encodeURIComponent` (its `/` as `%2F`), and echoed back in HTML numeric references (`&#64;`); a
/// 7-character cookie named `v`; a CSRF token in a hidden `form_key`; an API key in `?key=`; an
/// `api_token` in the JSON; a `client_secret` in JSON declared a form, as jQuery sends it. The redacted
/// export holds none of them in any encoding a page or the recorder uses, in any file (snapshots in the
/// pack included), and the redacted environment still opens the vault offline, every step passing.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn secrets_a_page_sends_by_script_leave_no_trace_in_the_redacted_export_which_still_replays() {
    use base64::Engine as _;
    let test = "secrets_a_page_sends_by_script_leave_no_trace_in_the_redacted_export_which_still_replays";
    let Some(build) = Build::for_tests(test) else { return };
    let site = DemoSite::start(0).unwrap();
    let data = tempfile::tempdir().unwrap();
    let bundle = demo::record_vault(&build, &site, data.path()).await.unwrap();
    let issued = site.vault_secrets();
    site.stop();
    assert_eq!(
        issued.len(),
        5,
        "one page load: a cookie, a form key, an API key and token, a client secret: {issued:?}"
    );

    let manifest: serde_json::Value = read_json(&bundle.join("manifest.json"));
    let task = manifest["task"]["id"].as_str().unwrap().to_owned();
    let zip = data.path().join("vault.zip");
    let data_dir = data.path().to_str().unwrap();
    let export = json_of(&run(
        &build.trace_host,
        &["--data", data_dir, "export", &task, "--out", zip.to_str().unwrap(), "--redact", "--json"],
    ));
    assert!(export["redaction"]["replacements"].as_u64().unwrap() > 0, "{export}");

    let passphrase = vault::VAULT_PASSPHRASE;
    let basic = base64::engine::general_purpose::STANDARD.encode(format!("{DEMO_USER}:{passphrase}"));
    let basic_in_url = basic.replace('+', "%2B").replace('/', "%2F").replace('=', "%3D");
    assert!(basic_in_url[8..].contains("%2F"), "the base64 holds a `/` where the passphrase is: {basic}");
    let mut leaks = vec![
        passphrase.to_owned(),
        passphrase.replace('?', "%3F").replace(' ', "%20").replace('@', "%40"),
        url::form_urlencoded::byte_serialize(passphrase.as_bytes()).collect::<String>(),
        basic.clone(),
        // The passphrase's own part of the base64, whatever comes before it, as is and in a URL.
        basic[8..basic.len() - 4].to_owned(),
        basic_in_url[8..basic_in_url.len() - 6].to_owned(),
        vault::passphrase_echoed(),
    ];
    leaks.extend(issued);
    // The recording holds every one of them but the form encoding (nothing was sent as a form), so that
    // the search below means something.
    let mut recorded = Bundle::open(&bundle).unwrap();
    let recorded: Vec<Vec<u8>> =
        recorded.files().unwrap().into_keys().map(|name| recorded.read(&name).unwrap()).collect();
    for leak in leaks.iter().filter(|leak| !leak.contains('+')) {
        assert!(recorded.iter().any(|bytes| contains(bytes, leak.as_bytes())), "the recording lacks {leak:?}");
    }
    let mut redacted = Bundle::open(&zip).unwrap();
    for (name, _) in redacted.files().unwrap() {
        let bytes = redacted.read(&name).unwrap();
        for leak in &leaks {
            assert!(!contains(&bytes, leak.as_bytes()), "{name} still holds {leak:?}");
        }
    }
    let validated = json_of(&run(&build.trace_host, &["validate", zip.to_str().unwrap(), "--json"]));
    assert_eq!(validated["valid"], true, "{validated}");

    let (report, faithful) = build.replay_human(&zip).unwrap();
    let text = trace_replay::run::text(&report);
    assert!(faithful && report.steps_failed == 0 && report.steps_total >= 3, "{text}");
    assert!(report.misses.is_empty() && report.live_attempts == 0, "{text}");
    let opened = report.steps.last().and_then(|step| step.text_shown);
    assert!(opened.is_some_and(|shown| shown >= 0.9), "the vault did not open offline: {text}");
}

/// Every way a secret can sit in `bytes`, a file of an export: as they are, gunzipped or inflated when
/// they are a compressed stream, and each JSON string in them that stands for one, one character per byte
/// (DevTools' text of a body that is not UTF-8), decoded.
fn decoded_views(bytes: &[u8]) -> Vec<Vec<u8>> {
    use trace_analysis::body::{compressed_text, decode_compressed};
    let mut views = vec![bytes.to_vec()];
    views.extend(decode_compressed(bytes, 1 << 26).map(|(_, decoded)| decoded));
    let documents: Vec<serde_json::Value> = match serde_json::from_slice(bytes) {
        Ok(document) => vec![document],
        Err(_) => bytes.split(|byte| *byte == b'\n').filter_map(|line| serde_json::from_slice(line).ok()).collect(),
    };
    let mut values: Vec<&serde_json::Value> = documents.iter().collect();
    while let Some(value) = values.pop() {
        match value {
            serde_json::Value::String(text) => views.extend(compressed_text(text, 1 << 26).map(|(_, decoded)| decoded)),
            serde_json::Value::Array(items) => values.extend(items),
            serde_json::Value::Object(members) => values.extend(members.values()),
            _ => {}
        }
    }
    views
}

/// Issue #45: a page that gzips a JSON sign-in itself and POSTs it as `application/octet-stream`, with no
/// `Content-Encoding` (the shop's sealed note), recorded through the extension: the redacted zip and WACZ
/// still gunzipped to the typed password and the passphrase (2 of 19 secrets survived, in the HAR's
/// `postData.text` and in `events.jsonl`, where DevTools' text of the body is one character per byte), and
/// the export's own search said the zip held none. Now neither export holds either, however decoded; the
/// body is still gzip, and the redacted environment still replays: the server's answer, which it gave only
/// to that gzipped JSON, comes back offline.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_body_a_page_gzipped_itself_is_redacted_inside_and_the_export_still_replays() {
    let test = "a_body_a_page_gzipped_itself_is_redacted_inside_and_the_export_still_replays";
    let Some(build) = Build::for_tests(test) else { return };
    let site = DemoSite::start(0).unwrap();
    let data = tempfile::tempdir().unwrap();
    let bundle = demo::record_sealed(&build, &site, data.path()).await.unwrap();
    site.stop();
    let secrets = [DEMO_PASSWORD, sealed::SEALED_PASSPHRASE];
    let mut recorded = Bundle::open(&bundle).unwrap();
    let recorded_views: Vec<Vec<u8>> =
        recorded.files().unwrap().into_keys().flat_map(|name| decoded_views(&recorded.read(&name).unwrap())).collect();
    for secret in secrets {
        assert!(recorded_views.iter().any(|view| contains(view, secret.as_bytes())), "the recording lacks {secret}");
    }

    let manifest: serde_json::Value = read_json(&bundle.join("manifest.json"));
    let task = manifest["task"]["id"].as_str().unwrap().to_owned();
    let data_dir = data.path().to_str().unwrap();
    let zip = data.path().join("sealed.zip");
    let wacz = data.path().join("sealed.wacz");
    for (format, out) in [("zip", &zip), ("wacz", &wacz)] {
        let args = ["--data", data_dir, "export", &task, "--format", format, "--out", out.to_str().unwrap()];
        json_of(&run(&build.trace_host, &[&args[..], &["--redact", "--suspects", "redact", "--json"]].concat()));
    }
    let mut redacted = Bundle::open(&zip).unwrap();
    for (name, _) in redacted.files().unwrap() {
        for view in decoded_views(&redacted.read(&name).unwrap()) {
            for secret in secrets {
                assert!(!contains(&view, secret.as_bytes()), "{name} still holds {secret:?}");
            }
        }
    }
    let mut archive = zip::ZipArchive::new(std::fs::File::open(&wacz).unwrap()).unwrap();
    let mut warc_gz = Vec::new();
    archive.by_name("archive/data.warc.gz").unwrap().read_to_end(&mut warc_gz).unwrap();
    let mut warc = Vec::new();
    flate2::read::MultiGzDecoder::new(&warc_gz[..]).read_to_end(&mut warc).unwrap();
    for at in (0..warc.len().saturating_sub(1)).filter(|&at| warc[at..].starts_with(&[0x1f, 0x8b])) {
        let mut decoded = Vec::new();
        if flate2::read::GzDecoder::new(&warc[at..]).take(1 << 26).read_to_end(&mut decoded).is_ok() {
            for secret in secrets {
                assert!(!contains(&decoded, secret.as_bytes()), "the WACZ still gunzips to {secret:?}");
            }
        }
    }
    let validated = json_of(&run(&build.trace_host, &["validate", zip.to_str().unwrap(), "--json"]));
    assert_eq!(validated["valid"], true, "{validated}");

    let (report, faithful) = build.replay_human(&zip).unwrap();
    let text = trace_replay::run::text(&report);
    assert!(faithful && report.steps_failed == 0, "{text}");
    assert!(report.live_attempts == 0, "{text}");
    let sealed = report.steps.last().and_then(|step| step.text_shown);
    assert!(sealed.is_some_and(|shown| shown >= 0.9), "the note was not sealed offline: {text}");
}
