//! The extension's pages asking `trace-host` in messages of their own ([`Request`]), as
//! `chrome.runtime.sendNativeMessage` sends them: the review of a stopped recording (steps, thumbnails
//! within the message limit, credentials without their values), corrections saved into the bundle,
//! discarding it, submitting it and annotated journeys to a campaign, and a request the host cannot do.

use std::path::Path;
use std::time::Duration;

use trace_host::client::{HostClient, TaskMessages};
use trace_manifest::campaign::{Feasibility, Journey, JourneyAnnotation, JourneySource, JourneyStep};
use trace_manifest::event::ActionKind;
use trace_manifest::task::TaskType;
use trace_manifest::wire::{AnnotatedJourney, Answer, HostMessage, MAX_OUTBOUND_BYTES, Request};

use crate::common::*;

const SITE: &str = "http://127.0.0.1:8000";
const STEPS: usize = 40;

/// Asks one request of a host started for it, as Chrome does, and returns the answer with its size.
fn ask(scratch: &Scratch, request: &Request) -> (Answer, usize) {
    let mut host: HostClient = scratch.host();
    host.send_frame(&serde_json::to_vec(request).unwrap()).unwrap();
    let reply = host.recv(Duration::from_secs(60)).expect("an answer");
    let size = serde_json::to_vec(&reply).unwrap().len();
    assert!(size <= MAX_OUTBOUND_BYTES, "an answer of {size} bytes would close Chrome's port");
    match reply {
        HostMessage::Answer(answer) => (answer, size),
        other => panic!("not an answer: {other:?}"),
    }
}

/// Records `STEPS` clicks, each after a screenshot of noise (which compresses badly, as real pages with
/// photos do), and stops.
fn record_clicks(scratch: &Scratch, id: &str) {
    let mut host = scratch.host();
    let mut task = TaskMessages::new(task_id(id));
    let page = format!("{SITE}/gallery");
    let mut messages = vec![task.start(task_start(id, TaskType::Action))];
    messages.push(task.events(vec![navigation(1.0, &page), page_load(2.0, &page, "Gallery")]));
    let mut noise = 0x2545_f491_4f6c_dd1d_u64;
    for step in 0..STEPS {
        let mut shot = image::RgbImage::new(1280, 800);
        for pixel in shot.pixels_mut() {
            noise ^= noise << 13;
            noise ^= noise >> 7;
            noise ^= noise << 17;
            *pixel = image::Rgb([noise as u8, (noise >> 8) as u8, (noise >> 16) as u8]);
        }
        let mut png = std::io::Cursor::new(Vec::new());
        shot.write_to(&mut png, image::ImageFormat::Png).unwrap();
        let at = 100.0 + step as f64 * 100.0;
        messages.push(task.screenshot(T0 + at, 1, png.get_ref(), "load"));
        messages.push(task.events(vec![action(
            at + 50.0,
            ActionKind::Click,
            &page,
            &format!("#photo-{step}"),
            None,
            false,
        )]));
    }
    messages.push(task.stop(T0 + 10_000.0, None));
    send_all(&mut host, &task, &messages);
    host.close().unwrap();
}

#[test]
fn a_review_shows_steps_thumbnails_and_credentials_within_the_message_limit() {
    let scratch = Scratch::new();
    record_clicks(&scratch, "gallery");
    let (answer, _) = ask(&scratch, &Request::Review { task_id: task_id("gallery") });
    let Answer::Review(sheet) = answer else { panic!("{answer:?}") };
    assert_eq!(sheet.steps.len(), STEPS + 2, "the navigation, every click and the end: {:?}", sheet.steps);
    assert!(sheet.steps[1].text.contains("#photo-0"), "{:?}", sheet.steps[1]);
    assert!(sheet.steps.iter().all(|step| step.has_thumbnail));

    // Forty thumbnails of noise do not fit in one message: they come in pages, each step once, in order.
    let mut shown = Vec::new();
    let mut from = 0;
    let mut pages = 0;
    loop {
        let (answer, size) = ask(&scratch, &Request::Thumbnails { task_id: task_id("gallery"), from });
        let Answer::Thumbnails { thumbnails, next, .. } = answer else { panic!("{answer:?}") };
        pages += 1;
        assert!(!thumbnails.is_empty() && size > 0);
        for thumbnail in &thumbnails {
            assert!(thumbnail.width <= 320 && thumbnail.height <= 240, "{}x{}", thumbnail.width, thumbnail.height);
            let jpeg = base64::Engine::decode(&base64::engine::general_purpose::STANDARD, &thumbnail.jpeg).unwrap();
            assert!(jpeg.starts_with(&[0xff, 0xd8, 0xff]), "a JPEG");
            shown.push(thumbnail.step);
        }
        match next {
            Some(next) => from = next,
            None => break,
        }
    }
    assert!(pages > 1, "the thumbnails should have needed more than one message");
    assert_eq!(shown, (0..STEPS + 2).collect::<Vec<_>>());

    // A login: the password is named by its placeholder and length, never shown.
    record_login_and_cart(&scratch, "login-cart");
    let request = Request::Review { task_id: task_id("login-cart") };
    let mut host = scratch.host();
    host.send_frame(&serde_json::to_vec(&request).unwrap()).unwrap();
    let raw = serde_json::to_vec(&host.recv(Duration::from_secs(60)).unwrap()).unwrap();
    assert!(!contains(&raw, PASSWORD.as_bytes()), "the review must not carry the typed password");
    let HostMessage::Answer(Answer::Review(sheet)) = serde_json::from_slice(&raw).unwrap() else { panic!() };
    let password = sheet.credentials.iter().find(|c| c.field == "password").expect("the password");
    assert_eq!(password.characters, PASSWORD.chars().count());
    assert!(!sheet.checkpoints.is_empty(), "{sheet:?}");
}

#[test]
fn corrections_are_saved_into_the_bundle_and_a_discarded_recording_is_gone() {
    let scratch = Scratch::new();
    record_login_and_cart(&scratch, "login-cart");
    let annotate = |description: &str| Request::Annotate {
        task_id: task_id("login-cart"),
        description: description.to_owned(),
        answer: None,
    };
    let (answer, _) = ask(&scratch, &annotate("  "));
    assert!(matches!(&answer, Answer::Failed { message } if message.contains("description cannot be empty")));
    let (answer, _) = ask(&scratch, &annotate("Log in and put the blue mug in the cart"));
    assert_eq!(answer, Answer::Done);
    let exported = scratch.path("export.zip");
    assert!(scratch.cli(&["export", "login-cart", "--out", exported.to_str().unwrap()]).status.success());
    let manifest = zip_entries(&exported).into_iter().find(|(name, _)| name == "manifest.json").unwrap().1;
    let manifest: serde_json::Value = serde_json::from_slice(&manifest).unwrap();
    assert_eq!(manifest["task"]["description"], "Log in and put the blue mug in the cart");

    let (answer, _) = ask(&scratch, &Request::Discard { task_id: task_id("login-cart") });
    assert_eq!(answer, Answer::Done);
    assert!(!scratch.capture("login-cart").exists());
    let tasks = scratch.cli_json(&["tasks", "--all", "--json"]);
    assert_eq!(tasks[0]["status"], "discarded", "{tasks}");
}

fn campaign_json(destination: &Path, journeys: bool) -> String {
    serde_json::json!({
        "id": "shop-2026", "title": "Shopping tasks", "journeys": journeys,
        "tasks": [{"id": "mug", "description": "Put the blue mug in the cart", "website": SITE, "task_type": "action"}],
        "destination": destination.to_str().unwrap()
    })
    .to_string()
}

#[test]
fn a_page_submits_a_recording_and_journeys_and_sees_them_sent() {
    let scratch = Scratch::new();
    record_login_and_cart(&scratch, "login-cart");
    let store = scratch.path("store");
    let submit = Request::Submit {
        task_id: task_id("login-cart"),
        campaign: campaign_json(&store, true),
        campaign_task: "mug".into(),
        pseudonym: "p-0123456789abcdef".into(),
    };
    let (answer, _) = ask(&scratch, &submit);
    let Answer::Outbox { submissions } = answer else { panic!("{answer:?}") };
    assert!(submissions[0].is_sent() && submissions[0].name == "shop-2026/p-0123456789abcdef/mug", "{submissions:?}");
    for (name, bytes) in zip_entries(&store.join("shop-2026/p-0123456789abcdef/mug.zip")) {
        assert!(!contains(&bytes, PASSWORD.as_bytes()), "the typed password is in {name}");
    }

    let step = |visit_id: u64, url: &str| JourneyStep {
        visit_id,
        url: url.to_owned(),
        title: format!("page {visit_id}"),
        time: "2026-11-24T10:00:00Z".into(),
    };
    let journey = Journey {
        id: "j-1".into(),
        grouped_by: JourneySource::Trace,
        steps: vec![
            step(1, &format!("{SITE}/")),
            step(2, &format!("{SITE}/search?q=mug&token=a81f3c9d2e7b4a60f1")),
            step(3, &format!("{SITE}/cart")),
        ],
    };
    let annotation = JourneyAnnotation {
        journey_id: "j-1".into(),
        key_url: format!("{SITE}/cart"),
        automate: true,
        label: "mugs".into(),
        feasibility: Feasibility::Feasible,
        dropped: vec![1],
    };
    let journeys = |annotation: &JourneyAnnotation| Request::SubmitJourneys {
        campaign: campaign_json(&store, true),
        pseudonym: "p-0123456789abcdef".into(),
        journeys: vec![AnnotatedJourney { journey: journey.clone(), annotation: annotation.clone() }],
    };
    let (answer, _) = ask(&scratch, &journeys(&annotation));
    assert!(matches!(&answer, Answer::Failed { message } if message.contains("at least 15")), "{answer:?}");
    let labelled = JourneyAnnotation { label: "Find a blue mug and put it in the cart".into(), ..annotation };
    let (answer, _) = ask(&scratch, &journeys(&labelled));
    let Answer::Outbox { submissions } = answer else { panic!("{answer:?}") };
    assert!(submissions.iter().all(|s| s.is_sent()), "{submissions:?}");
    let lines = std::fs::read_to_string(store.join("shop-2026/p-0123456789abcdef/journeys.jsonl")).unwrap();
    assert_eq!(lines.lines().count(), 1);
    let line: serde_json::Value = serde_json::from_str(lines.lines().next().unwrap()).unwrap();
    let urls: Vec<&str> =
        line["journey"]["steps"].as_array().unwrap().iter().map(|s| s["url"].as_str().unwrap()).collect();
    assert_eq!(
        urls,
        [format!("{SITE}/search?q=mug&token=REDACTED"), format!("{SITE}/cart")],
        "dropped step left out, token replaced"
    );
    assert_eq!(line["annotation"]["label"], "Find a blue mug and put it in the cart");

    // Collected, with a summary; a line that does not hold for its journey (edited after it left the
    // extension) is skipped, with why.
    let mut forged = line.clone();
    forged["pseudonym"] = "p-ffffffffffffffff".into();
    forged["annotation"]["label"] = "mugs".into();
    std::fs::create_dir_all(store.join("shop-2026/p-ffffffffffffffff")).unwrap();
    std::fs::write(store.join("shop-2026/p-ffffffffffffffff/journeys.jsonl"), format!("{forged}\n")).unwrap();
    let out = scratch.path("collected");
    let report = scratch.cli_json(&["collect", store.to_str().unwrap(), "--out", out.to_str().unwrap(), "--json"]);
    assert_eq!(report["journeys"], 1, "{report}");
    assert_eq!(report["label_chars"], serde_json::json!({"min": 38, "median": 38, "max": 38}));
    assert_eq!(report["feasibility"], serde_json::json!({"feasible": 1}));
    assert_eq!(report["automate"], serde_json::json!({"yes": 1, "no": 0}));
    assert_eq!(report["journeys_per_pseudonym"], serde_json::json!({"p-0123456789abcdef": 1}));
    let skipped = report["skipped"].as_array().unwrap();
    assert!(
        skipped.iter().any(|s| s["submission"].as_str().unwrap().contains("p-ffffffffffffffff/journeys.jsonl line 1")
            && s["reason"].as_str().unwrap().contains("at least 15")),
        "{report}"
    );

    // A campaign that does not ask for journeys gets none.
    let (answer, _) = ask(
        &scratch,
        &Request::SubmitJourneys {
            campaign: campaign_json(&store, false),
            pseudonym: "p-0123456789abcdef".into(),
            journeys: vec![],
        },
    );
    assert!(
        matches!(&answer, Answer::Failed { message } if message.contains("does not ask for journeys")),
        "{answer:?}"
    );
}

#[test]
fn a_destination_the_person_cannot_write_to_is_said_plainly_and_the_submission_waits() {
    let scratch = Scratch::new();
    record_login_and_cart(&scratch, "login-cart");
    let blocked = scratch.path("store");
    std::fs::write(&blocked, b"not a directory").unwrap();
    let submit = Request::Submit {
        task_id: task_id("login-cart"),
        campaign: campaign_json(&blocked.join("inner"), false),
        campaign_task: "mug".into(),
        pseudonym: "p-0123456789abcdef".into(),
    };
    let (answer, _) = ask(&scratch, &submit);
    let Answer::Outbox { submissions } = answer else { panic!("{answer:?}") };
    assert!(!submissions[0].is_sent());
    let error = submissions[0].last_error.as_deref().unwrap_or_default();
    assert!(error.contains("inner"), "the error should name where it could not write: {error}");
    let (answer, _) = ask(&scratch, &Request::Outbox { send: false });
    assert!(matches!(answer, Answer::Outbox { submissions } if submissions.len() == 1 && submissions[0].attempts == 1));
}

/// Records a search whose field the recorder took for a credential: the page made it a password field,
/// and what the person typed into it, `text`, is a word every bundle's formats hold.
fn record_search_in_a_password_field(scratch: &Scratch, id: &str) {
    let mut host = scratch.host();
    let mut task = TaskMessages::new(task_id(id));
    let page = format!("{SITE}/search");
    let results = format!("{SITE}/search?q=text");
    let mut messages = vec![task.start(task_start(id, TaskType::Action))];
    messages.push(task.events(vec![
        navigation(1.0, &page),
        request(2.0, "1", "GET", &page, &[], None),
        response(3.0, "1", &page, 200, "text/html", &[]),
        finished(4.0, "1", 60),
        page_load(5.0, &page, "Search"),
        action(1000.0, ActionKind::Click, &page, "#q", None, false),
        action(1100.0, ActionKind::Input, &page, "#q", Some("text"), true),
        action(1200.0, ActionKind::KeyPress, &page, "#q", None, false),
        request(1210.0, "2", "GET", &results, &[], None),
        response(1220.0, "2", &results, 200, "text/html", &[]),
        finished(1230.0, "2", 60),
        navigation(1240.0, &results),
    ]));
    messages.push(task.stop(T0 + 3_000.0, None));
    send_all(&mut host, &task, &messages);
    host.close().unwrap();
}

#[test]
fn a_credential_the_person_says_is_no_secret_becomes_plain_typing_and_the_recording_exports() {
    let scratch = Scratch::new();
    record_search_in_a_password_field(&scratch, "search");
    let exported = scratch.path("search.zip");
    let export = || scratch.cli(&["export", "search", "--redact", "--out", exported.to_str().unwrap()]);
    let refused = export();
    assert!(!refused.status.success() && !exported.exists());
    assert!(String::from_utf8_lossy(&refused.stderr).contains("common word"), "{refused:?}");

    let (answer, _) = ask(&scratch, &Request::Review { task_id: task_id("search") });
    let Answer::Review(sheet) = answer else { panic!("{answer:?}") };
    let placeholder =
        sheet.credentials.iter().find(|c| c.field == "q").expect("the field as a credential").placeholder.clone();

    // A placeholder the recording does not hold is refused, and changes nothing.
    let (answer, _) = ask(
        &scratch,
        &Request::NotASecret { task_id: task_id("search"), placeholder: "{{credentials.elsewhere.q}}".into() },
    );
    assert!(matches!(&answer, Answer::Failed { message } if message.contains("no credential")), "{answer:?}");

    let (answer, _) = ask(&scratch, &Request::NotASecret { task_id: task_id("search"), placeholder });
    let Answer::Review(sheet) = answer else { panic!("{answer:?}") };
    assert!(sheet.credentials.is_empty(), "{:?}", sheet.credentials);
    assert!(export().status.success(), "the recording exports once its only credential is dropped");
    let entries = zip_entries(&exported);
    let trajectory = &entries.iter().find(|(name, _)| *name == "trajectory.json").unwrap().1;
    let trajectory: serde_json::Value = serde_json::from_slice(trajectory).unwrap();
    let typed = trajectory["tool_calls"].as_array().unwrap().iter().find(|call| call["name"] == "input").unwrap();
    assert_eq!(typed["params"]["text"], "text", "{trajectory:#}");
    let credentials = entries.iter().find(|(name, _)| *name == "credentials.json");
    assert!(credentials.is_none_or(|(_, json)| !String::from_utf8_lossy(json).contains("\"q\"")), "{credentials:?}");
}

/// Issue #45: `not_a_secret` with an empty placeholder, which every typed text contains, unflagged every
/// credential of the task, the password with the rest; so did a part of a placeholder
/// (`{{credentials.`). Only a credential's whole placeholder is taken: the others are refused and change
/// nothing, and the whole one unflags that credential alone.
#[test]
fn only_a_credentials_whole_placeholder_says_it_is_no_secret() {
    let scratch = Scratch::new();
    let mut host = scratch.host();
    let mut task = TaskMessages::new(task_id("login"));
    let page = format!("{SITE}/login");
    let mut messages = vec![task.start(task_start("login", TaskType::Action))];
    messages.push(task.events(vec![
        navigation(1.0, &page),
        page_load(2.0, &page, "Log in"),
        action(1000.0, ActionKind::Input, &page, "#q", Some("text"), true),
        action(1100.0, ActionKind::Input, &page, "#password", Some("Tr0ub4dor&3-horse"), true),
    ]));
    messages.push(task.stop(T0 + 3_000.0, None));
    send_all(&mut host, &task, &messages);
    host.close().unwrap();
    let credentials = || {
        let (answer, _) = ask(&scratch, &Request::Review { task_id: task_id("login") });
        let Answer::Review(sheet) = answer else { panic!("{answer:?}") };
        let mut fields: Vec<String> = sheet.credentials.iter().map(|credential| credential.field.clone()).collect();
        fields.sort();
        (fields, sheet.credentials)
    };
    let (fields, listed) = credentials();
    assert_eq!(fields, ["password", "q"]);

    for partial in ["", "{{credentials.", "}}"] {
        let (answer, _) =
            ask(&scratch, &Request::NotASecret { task_id: task_id("login"), placeholder: partial.to_owned() });
        assert!(matches!(&answer, Answer::Failed { message } if message.contains("no credential")), "{answer:?}");
        assert_eq!(credentials().0, ["password", "q"], "{partial:?} changed nothing");
    }
    let search = listed.iter().find(|credential| credential.field == "q").unwrap().placeholder.clone();
    let (answer, _) = ask(&scratch, &Request::NotASecret { task_id: task_id("login"), placeholder: search });
    assert!(matches!(answer, Answer::Review(_)), "{answer:?}");
    assert_eq!(credentials().0, ["password"], "the password is still a secret");
}
