//! What a page is asked to report of the actions done in it, and what its reports mean: the script
//! (`page/capture.js`) that describes the actions done in a page, and its helper in the page's own world
//! that marks what the page's scripts do (`page/scripted.js`), the isolated world it runs in, the DevTools
//! binding it reports through, the report format, and typing coalesced into one `input` action per field
//! and run of typing. Both recorders use it, so that an action means the same wherever it was recorded.
//! Reports are checked here, never trusted: they come from inside web pages.
//!
//! The script flags the fields a person types a secret into by the secret names of
//! `trace_analysis::secrets`, their one list: [`capture_script`] puts them in place of its placeholder.

use std::sync::LazyLock;

use serde::Deserialize;
use trace_analysis::secrets::{SECRET_NAME_COMPOUNDS, SECRET_NAME_CONTAINED, SECRET_NAME_WHOLE};
use trace_manifest::event::{Action, ActionKind, Event, EventKind, MutationSummary};

/// The isolated world the script runs in: the page's scripts cannot reach it, nor does the page's CSP.
pub const WORLD: &str = "trace";
/// The DevTools binding (`Runtime.addBinding`) through which the script reports.
pub const BINDING: &str = "__traceEmit";
/// The in-page script as written, with [`SECRET_NAMES_PLACEHOLDER`] where the secret names go.
const CAPTURE_SOURCE: &str = include_str!("../page/capture.js");
/// What `page/capture.js` holds in place of the secret names.
const SECRET_NAMES_PLACEHOLDER: &str = "__TRACE_SECRET_NAMES__";

/// The in-page script, injected through the DevTools protocol: `page/capture.js` with the secret names of
/// `trace_analysis::secrets` put in place of its placeholder, once.
pub fn capture_script() -> &'static str {
    static SCRIPT: LazyLock<String> = LazyLock::new(|| {
        let names = serde_json::json!({
            "contained": SECRET_NAME_CONTAINED,
            "whole": SECRET_NAME_WHOLE,
            "compounds": SECRET_NAME_COMPOUNDS,
        });
        CAPTURE_SOURCE.replacen(SECRET_NAMES_PLACEHOLDER, &names.to_string(), 1)
    });
    &SCRIPT
}

/// The script that marks, in the page's own world, the calls of its scripts that the browser reports as
/// trusted (`execCommand`, `requestSubmit`), so that the capture script takes what they fire for the
/// page's (`page/scripted.js`). Injected at document start in every frame a person's recording attaches to.
pub const SCRIPTED_SCRIPT: &str = include_str!("../page/scripted.js");

/// The in-page script for a browser an agent drives over DevTools (`trace-replay eval`): every trusted
/// event is the agent's (a person's recording tells the page's own input from theirs by the page script
/// that made it, `page/scripted.js`).
pub fn agent_capture_script() -> String {
    format!("globalThis.__traceEveryTrustedEventIsTheActors = true;\n{}", capture_script())
}

/// Reports are small; anything larger is not from our script.
const REPORT_LIMIT_BYTES: usize = 256 << 10;

/// One report of the in-page script.
#[derive(Debug, Clone, PartialEq, Deserialize)]
#[serde(tag = "type", rename_all = "snake_case", deny_unknown_fields)]
pub enum PageReport {
    Action {
        ts: f64,
        action: Box<Action>,
    },
    Mutations {
        ts: f64,
        summary: MutationSummary,
    },
    /// The script failed to describe an action; logged, not recorded.
    Error {
        ts: f64,
        message: String,
    },
}

/// Reads a report, refusing anything malformed or oversized with the reason.
pub fn parse_report(payload: &str) -> Result<PageReport, String> {
    if payload.len() > REPORT_LIMIT_BYTES {
        return Err(format!("a page report of {} bytes is over the limit", payload.len()));
    }
    let report: PageReport =
        serde_json::from_str(payload).map_err(|error| format!("a malformed page report: {error}"))?;
    let ts = match &report {
        PageReport::Action { ts, .. } | PageReport::Mutations { ts, .. } | PageReport::Error { ts, .. } => *ts,
    };
    if !ts.is_finite() || ts <= 0.0 {
        return Err(format!("a page report with the time {ts}"));
    }
    Ok(report)
}

/// Keeps the last `input` action of a run of typing in one field until something else happens.
#[derive(Debug, Default)]
pub struct TypingCoalescer {
    pending: Option<Event>,
}

impl TypingCoalescer {
    /// Takes an action event; returns the events to record now, in order.
    /// A run's input keeps the time the run began: what the page showed before it is the previous
    /// action's doing, and a capture taken while the person typed is not. It says when its last change
    /// came (`until_ts`), which paces a re-run's keys as the person's were.
    pub fn push(&mut self, mut event: Event) -> Vec<Event> {
        let EventKind::Action(action) = &event.kind else { return vec![event] };
        if action.action == ActionKind::Input {
            let same_field = self.pending.as_ref().is_some_and(|pending| same_field(pending, &event));
            if same_field && let Some(pending) = &self.pending {
                let last_change = event.ts;
                event.ts = pending.ts;
                if let EventKind::Action(action) = &mut event.kind {
                    action.until_ts = Some(last_change);
                }
            }
            let previous = self.pending.replace(event);
            return if same_field { Vec::new() } else { previous.into_iter().collect() };
        }
        let mut events: Vec<Event> = self.pending.take().into_iter().collect();
        events.push(event);
        events
    }

    /// The input action of the run of typing going on, if any: it is recorded when the run ends.
    pub fn held(&self) -> Option<&Event> {
        self.pending.as_ref()
    }

    /// Ends the run of typing (a navigation, a stop): returns the held action, if any.
    pub fn flush(&mut self) -> Option<Event> {
        self.pending.take()
    }

    /// Ends the run of typing if `events`, about to be recorded, hold a navigation or a request of its tab:
    /// what the typing caused (a search as one types, a draft saved and opened) must come after the typing
    /// in the recording, as it did in the page. Returns the held action, to be recorded first.
    pub fn end_before(&mut self, events: &[Event]) -> Option<Event> {
        let tab_id = self.pending.as_ref()?.tab_id;
        let caused = events.iter().any(|event| {
            event.tab_id == tab_id && matches!(event.kind, EventKind::Navigation(_) | EventKind::Request(_))
        });
        if caused { self.flush() } else { None }
    }
}

fn same_field(a: &Event, b: &Event) -> bool {
    let target = |event: &Event| match &event.kind {
        EventKind::Action(action) => {
            action.target.as_ref().map(|target| (target.selector.clone(), target.frame_path.clone()))
        }
        _ => None,
    };
    let page_made = |event: &Event| matches!(&event.kind, EventKind::Action(action) if action.page_made);
    a.tab_id == b.tab_id
        && a.frame_id == b.frame_id
        && target(a).is_some()
        && target(a) == target(b)
        && page_made(a) == page_made(b)
}

#[cfg(test)]
mod tests {
    use super::*;

    fn report(action: &str, selector: &str, value: Option<&str>) -> String {
        serde_json::json!({
            "type": "action",
            "ts": 1_763_805_600_000.0,
            "action": {
                "action": action,
                "url": "http://127.0.0.1:8000/login",
                "target": {"selector": selector, "xpath": "/html[1]/body[1]/input[1]", "tag": "input"},
                "value": value,
                "credential": false,
            }
        })
        .to_string()
    }

    fn action_event(payload: &str) -> Event {
        let PageReport::Action { ts, action } = parse_report(payload).unwrap() else { panic!("not an action") };
        Event { ts, tab_id: Some(1), frame_id: Some("F".into()), kind: EventKind::Action(action) }
    }

    fn value_of(event: &Event) -> Option<&str> {
        match &event.kind {
            EventKind::Action(action) => action.value.as_deref(),
            _ => None,
        }
    }

    #[test]
    fn typing_in_one_field_becomes_one_action_with_the_final_value() {
        let mut typing = TypingCoalescer::default();
        for value in ["a", "an", "ann"] {
            assert!(typing.push(action_event(&report("input", "#user", Some(value)))).is_empty());
        }
        let events = typing.push(action_event(&report("input", "#password", Some("b"))));
        assert_eq!(events.len(), 1);
        assert_eq!(value_of(&events[0]), Some("ann"));
        let events = typing.push(action_event(&report("click", "#login", None)));
        assert_eq!(events.iter().map(value_of).collect::<Vec<_>>(), [Some("b"), None]);
        assert!(typing.flush().is_none());
    }

    #[test]
    fn what_the_page_typed_is_not_merged_into_the_persons_typing() {
        let mut typing = TypingCoalescer::default();
        assert!(typing.push(action_event(&report("input", "#q", Some("mug")))).is_empty());
        let mut forged = action_event(&report("input", "#q", Some("mug account")));
        if let EventKind::Action(action) = &mut forged.kind {
            action.page_made = true;
        }
        let released = typing.push(forged);
        assert_eq!(released.iter().map(value_of).collect::<Vec<_>>(), [Some("mug")]);
        let held = typing.flush().unwrap();
        assert!(matches!(&held.kind, EventKind::Action(action) if action.page_made));
    }

    #[test]
    fn a_run_of_typing_keeps_the_time_it_began() {
        let mut typing = TypingCoalescer::default();
        for (ts, value) in [(1000.0, "m"), (1200.0, "mu"), (1400.0, "mug")] {
            let mut event = action_event(&report("input", "#q", Some(value)));
            event.ts = ts;
            assert!(typing.push(event).is_empty());
        }
        let held = typing.flush().unwrap();
        assert_eq!((held.ts, value_of(&held)), (1000.0, Some("mug")));
        let EventKind::Action(action) = &held.kind else { panic!("not an action") };
        assert_eq!(action.until_ts, Some(1400.0), "the run's last change");
    }

    #[test]
    fn a_navigation_or_request_of_the_typings_tab_ends_the_run_and_comes_after_it() {
        let navigation = |tab_id| Event {
            ts: 1_763_805_600_500.0,
            tab_id: Some(tab_id),
            frame_id: None,
            kind: EventKind::Navigation(trace_manifest::event::Navigation {
                url: "http://127.0.0.1:8000/notes?find=m".into(),
                cause: trace_manifest::event::NavigationCause::Script,
                main_frame: true,
            }),
        };
        let mut typing = TypingCoalescer::default();
        assert!(typing.push(action_event(&report("input", "#find", Some("m")))).is_empty());
        assert!(typing.end_before(&[navigation(2)]).is_none(), "another tab's navigation is not the typing's doing");
        assert!(typing.end_before(&[]).is_none());
        let ended = typing.end_before(&[navigation(1)]);
        assert_eq!(ended.as_ref().and_then(value_of), Some("m"));
        assert!(typing.held().is_none());
        // The next keystroke starts a run of its own, at its own time.
        let mut next = action_event(&report("input", "#find", Some("mu")));
        next.ts += 900.0;
        typing.push(next);
        assert_eq!(typing.held().map(|held| held.ts), Some(1_763_805_600_900.0));
    }

    #[test]
    fn typing_still_held_at_a_stop_is_flushed() {
        let mut typing = TypingCoalescer::default();
        typing.push(action_event(&report("input", "#q", Some("mug"))));
        assert_eq!(typing.flush().as_ref().and_then(value_of), Some("mug"));
    }

    #[test]
    fn malformed_and_hostile_reports_are_refused_with_a_reason() {
        for (payload, reason) in [
            ("not json", "malformed"),
            (r#"{"type":"action","ts":1,"action":{"action":"fly","url":"x"}}"#, "malformed"),
            (r#"{"type":"nonsense","ts":1}"#, "malformed"),
            (r#"{"type":"error","ts":-1,"message":"m"}"#, "time"),
        ] {
            let error = parse_report(payload).unwrap_err();
            assert!(error.contains(reason), "{payload}: {error}");
        }
        let huge = format!(r#"{{"type":"error","ts":1,"message":"{}"}}"#, "x".repeat(REPORT_LIMIT_BYTES));
        assert!(parse_report(&huge).unwrap_err().contains("over the limit"));
    }

    #[test]
    fn the_script_reports_through_the_binding_the_recorder_adds() {
        let script = capture_script();
        assert!(script.contains(&format!("globalThis.{BINDING}(")));
        // Every action name the script sends is one the format knows.
        for name in ["click", "double_click", "drag", "input", "change", "submit", "key_press", "scroll"] {
            assert!(script.contains(&format!("\"{name}\"")), "{name}");
            let kind: ActionKind = serde_json::from_value(serde_json::json!(name)).unwrap();
            assert_eq!(serde_json::to_value(kind).unwrap(), name);
        }
    }

    #[test]
    fn the_script_holds_the_secret_names_of_their_one_list_and_no_placeholder() {
        let script = capture_script();
        assert_eq!(CAPTURE_SOURCE.matches(SECRET_NAMES_PLACEHOLDER).count(), 1, "capture.js has one placeholder");
        assert!(!script.contains(SECRET_NAMES_PLACEHOLDER));
        for list in [SECRET_NAME_CONTAINED, SECRET_NAME_WHOLE, SECRET_NAME_COMPOUNDS] {
            assert!(script.contains(&serde_json::to_string(list).unwrap()), "{list:?}");
        }
    }

    /// The in-page script flags the fields a person types a secret into by the same lists and the same rule
    /// as `trace_analysis::secrets`: run by Node on the script's own code, it agrees with
    /// [`trace_analysis::secrets::is_secret_name`] name by name.
    #[test]
    fn the_capture_script_names_secrets_as_the_host_does() {
        let script = capture_script();
        let lists = script.find("const { contained: SECRET_NAME_CONTAINED").expect("capture.js takes the lists");
        let start = script.find("const isSecretName = ").expect("capture.js has isSecretName");
        let end = start + script[start..].find("\n  };\n").expect("isSecretName ends") + "\n  };\n".len();
        let names = [
            "password",
            "user_password",
            "csrfmiddlewaretoken",
            "X-CSRF-Token",
            "PHPSESSID",
            "accessToken",
            "api_key",
            "X-Api-Key",
            "one_time_code",
            "pin",
            "spinner",
            "author",
            "passenger",
            "keyword",
            "q",
            "cardNumber",
            "newPassword",
            "otp",
            "sig",
            "signature_v2",
        ];
        // The lists as the script received them, and the rule, from the script itself.
        let program = format!(
            "{}\nconsole.log(JSON.stringify({}.map(isSecretName)));",
            &script[lists..end],
            serde_json::to_string(&names).unwrap(),
        );
        let output = std::process::Command::new("node")
            .args(["-e", &program])
            .output()
            .expect("the capture script's test needs Node (.ci/install installs it)");
        assert!(output.status.success(), "{}", String::from_utf8_lossy(&output.stderr));
        let in_page: Vec<bool> = serde_json::from_slice(&output.stdout).unwrap();
        let here: Vec<bool> = names.iter().map(|name| trace_analysis::secrets::is_secret_name(name)).collect();
        assert_eq!(in_page, here, "for {names:?}");
    }
}
