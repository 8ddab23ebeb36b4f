//! The trajectory of the real demo recording (`fixtures/demo-events.jsonl`, the `events.jsonl` of a bundle
//! that `cargo xtask demo` recorded), compared against a summary checked by hand against the events.

use trace_analysis::trajectory::derive;
use trace_manifest::event::EventRecord;
use trace_manifest::trajectory::{ToolAction, ToolCall, Trajectory};

const DEMO_PASSWORD: &str = "blue-mug-42";

fn demo_events() -> Vec<EventRecord> {
    include_str!("fixtures/demo-events.jsonl").lines().map(|line| serde_json::from_str(line).unwrap()).collect()
}

/// The path and query of a URL of the demo site, whose port changes from recording to recording.
fn path(url: Option<&str>) -> String {
    let Some(url) = url else { return "-".to_owned() };
    let parsed = url::Url::parse(url).unwrap();
    let mut path = parsed.path().to_owned();
    if let Some(query) = parsed.query() {
        path = format!("{path}?{query}");
    }
    path
}

fn params(action: &ToolAction) -> String {
    match action {
        ToolAction::Navigate { url } => path(Some(url)),
        ToolAction::Click { count, .. } => format!("count={count}"),
        ToolAction::Input { text } => format!("{text:?}"),
        ToolAction::SendKeys { keys } => keys.clone(),
        ToolAction::Scroll { down, delta_x, delta_y, .. } => format!("down={down} dx={delta_x} dy={delta_y}"),
        ToolAction::SelectDropdown { option } => format!("{option:?}"),
        ToolAction::Done { text, success } => format!("{text:?} success={success}"),
        other => serde_json::to_value(other).unwrap()["params"].to_string(),
    }
}

/// One line per call: name, params, target (frames first), tab, URL before -> after, event ids, captures.
fn summary_line(call: &ToolCall) -> String {
    let target = call.target.as_ref().map_or("-".to_owned(), |target| {
        target.frame_path.iter().map(|frame| format!("{frame} >> ")).collect::<String>() + &target.selector
    });
    let file = |f: &Option<String>| f.as_deref().map_or("-".to_owned(), |f| f.rsplit('/').next().unwrap().to_owned());
    format!(
        "{} {} | {} | tab {} | {} -> {} | {:?} | {} {}",
        call.action.name(),
        params(&call.action),
        target,
        call.tab.map_or("-".to_owned(), |tab| tab.to_string()),
        path(call.url_before.as_deref()),
        path(call.url_after.as_deref()),
        call.event_ids,
        file(&call.screenshot),
        file(&call.dom_snapshot),
    )
}

fn summary(trajectory: &Trajectory) -> Vec<String> {
    trajectory.tool_calls.iter().map(summary_line).collect()
}

/// Each line checked against the events: the two typed visits, typing with the focusing click folded in,
/// the password as a placeholder, Sign in with its submit and the /account navigation, the double click
/// with its two clicks, Express chosen by keyboard, gift wrap with its change, the cart form, the typed
/// home page and its scroll (150 px is what the page moved), search with Enter, /deals typed but
/// redirected by the server, the two widgets (one same-site, one cross-site), the strict page, and the
/// help link opening tab 1 (its first load and the recorder's reload are the click's).
const EXPECTED: &[&str] = &[
    r#"navigate / | - | tab 0 | - -> / | [1] | 000056.png 000057.html"#,
    r#"navigate /login | - | tab 0 | / -> /login | [58] | 000088.png 000089.html"#,
    r#"input "ann" | #username | tab 0 | /login -> /login | [91, 92] | - -"#,
    r#"input "{{credentials.127.0.0.1.password}}" | #password | tab 0 | /login -> /login | [93, 94] | - -"#,
    r#"click count=1 | #login-submit | tab 0 | /login -> /account | [95, 96, 99] | 000129.png 000130.html"#,
    r#"click count=2 | #signed-in-as | tab 0 | /account -> /account | [132, 133, 134] | - -"#,
    r#"select_dropdown "Express (next day)" | #shipping | tab 0 | /account -> /account | [135] | - -"#,
    r#"click count=1 | #gift-wrap | tab 0 | /account -> /account | [136, 137] | 000138.png 000139.html"#,
    r#"click count=1 | #add-to-cart | tab 0 | /account -> /cart | [140, 141, 144] | 000174.png 000175.html"#,
    r#"navigate / | - | tab 0 | /cart -> / | [176] | 000228.png 000229.html"#,
    r#"scroll down=true dx=0 dy=150 | - | tab 0 | / -> / | [231] | 000232.png 000233.html"#,
    r#"input "mug" | #search-input | tab 0 | / -> / | [234, 235] | - -"#,
    r#"send_keys Enter | #search-input | tab 0 | / -> /search?q=mug | [236, 237, 238] | 000276.png 000277.html"#,
    r#"navigate /deals | - | tab 0 | /search?q=mug -> /search?q=mug | [280] | 000318.png 000320.html"#,
    r#"navigate /embed | - | tab 0 | /search?q=mug -> /embed | [322] | 000384.png 000385.html"#,
    r##"click count=1 | #widget >> #widget-button | tab 0 | /embed -> /embed | [388] | - -"##,
    r##"click count=1 | iframe[src^="http\:\/\/localhost\:46297"] >> #widget-button | tab 0 | /embed -> /embed | [394] | - -"##,
    r#"navigate /strict | - | tab 0 | /embed -> /strict | [400] | 000440.png 000442.html"#,
    r#"input "copied under a strict policy" | #strict-input | tab 0 | /strict -> /strict | [444, 445] | - -"#,
    r#"click count=1 | #strict-button | tab 0 | /strict -> /strict | [446] | - -"#,
    r#"send_keys Escape | #strict-button | tab 0 | /strict -> /strict | [448] | - -"#,
    r#"navigate / | - | tab 0 | /strict -> / | [449] | 000500.png 000501.html"#,
    r#"click count=1 | #help-link | tab 0 | / -> /help | [505, 506, 507, 521] | 000551.png 000552.html"#,
    r#"done "" success=true | - | tab 1 | /help -> /help | [] | 000551.png 000552.html"#,
];

#[test]
fn the_demo_recording_becomes_the_expected_tool_calls() {
    let derived = derive("demo-shop".parse().unwrap(), &demo_events(), None);
    let actual = summary(&derived.trajectory);
    assert_eq!(actual, EXPECTED, "actual:\n{}", actual.join("\n"));
}

#[test]
fn the_demo_password_is_extracted_and_absent_from_the_trajectory() {
    let derived = derive("demo-shop".parse().unwrap(), &demo_events(), None);
    let json = serde_json::to_string(&derived.trajectory).unwrap();
    assert!(!json.contains(DEMO_PASSWORD), "the password leaked into the trajectory");
    assert!(json.contains("{{credentials.127.0.0.1.password}}"));

    assert_eq!(derived.credentials.len(), 1);
    let credential = &derived.credentials[0];
    assert_eq!((credential.site.as_str(), credential.field.as_str()), ("127.0.0.1", "password"));
    assert_eq!(credential.value, DEMO_PASSWORD);
    assert_eq!(credential.target.selector, "#password");
    assert!(!format!("{credential:?}").contains(DEMO_PASSWORD), "Debug must not print the secret");
}

#[test]
fn the_demo_trajectory_keeps_full_targets_and_round_trips_through_json() {
    let derived = derive("demo-shop".parse().unwrap(), &demo_events(), Some("a blue mug"));
    let trajectory = &derived.trajectory;
    let sign_in = &trajectory.tool_calls[4];
    let target = sign_in.target.as_ref().unwrap();
    assert_eq!(target.accessible_name.as_deref(), Some("Sign in"));
    assert!(target.bbox.is_some() && !target.xpath.is_empty());
    let done = trajectory.tool_calls.last().unwrap();
    assert_eq!(done.action, ToolAction::Done { text: "a blue mug".to_owned(), success: true });

    let json = serde_json::to_value(trajectory).unwrap();
    assert_eq!(json["tool_calls"][0]["name"], "navigate");
    assert_eq!(json["tool_calls"][0]["params"]["url"], "http://127.0.0.1:46297/");
    assert_eq!(json["tool_calls"][5]["params"]["count"], 2);
    let back: Trajectory = serde_json::from_value(json).unwrap();
    assert_eq!(&back, trajectory);
}
