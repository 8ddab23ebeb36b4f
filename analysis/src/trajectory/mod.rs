//! The demonstration as a trajectory of high-level tool calls (`trajectory.json`), derived from a recording's
//! events by pure functions: post-processing writes it, and replay reads it, or runs the very same derivation
//! for a bundle never processed, so the two cannot disagree. It owns the rules that turn low-level events
//! into the calls an agent would make, named as browser-use names its actions, and the extraction of the
//! secrets typed along the way, which never enter the trajectory.
//!
//! [`derive`] reads the events in `id` order (the order the host committed them; their `ts` may disagree
//! slightly, since navigation times come from the browser and request times from DevTools), except that a
//! run of typing goes back before the navigations of its tab that happened after it began (an older
//! recorder sent a run only when it ended, after the URL it rewrote or the page it saved and opened), and
//! applies:
//!
//! - **Navigations.** A main-frame navigation with cause `link`, `form_submit`, `redirect` or `other` within
//!   [`EFFECT_WINDOW_MS`] of the latest call on the same tab (a click, a submit, a key, a choice) is that call's
//!   effect (timed from when its document request left, if that was during the call: a slow save and its redirect
//!   are the click's): it sets the call's `url_after`. After a `navigate`, `go_back` or `go_forward` only a client
//!   `redirect` is an effect. A navigation that is no call's effect becomes a call: `typed` (and unexplained
//!   `link`, `form_submit` or `other`, and the recording's first navigation whatever its cause) becomes
//!   `navigate{url}`, with the URL that was asked for when the browser's document request was redirected by the
//!   server (Chrome reports the URL it ended at); `reload` becomes `navigate` to the same URL, since browser-use
//!   has no reload; `back_forward` becomes as many `go_back` or `go_forward` calls as the tab's history says it
//!   moved, or `navigate` when that history does not know the URL. A `redirect` that is no call's effect is the
//!   page's own doing and no call. `back_forward` and `reload` are a click's effect only within
//!   [`QUICK_EFFECT_WINDOW_MS`] (a "Back" button in the page).
//! - **Typing.** An `input` is `input{text}` with the field's whole value; consecutive inputs to the same
//!   field merge, and the click that focused the field just before is part of the call (browser-use's
//!   `input` clicks the field itself).
//! - **Clicks.** A main-frame navigation recorded after a click's press began (its `pressed_ts`) and
//!   before the click is the click's effect, not the previous call's nor a call of its own: tabs that switch
//!   on the press navigate before the click is reported.
//!   A `submit` within [`QUICK_EFFECT_WINDOW_MS`] of a click or key on the same tab is part of it
//!   (a standalone one stays a `submit` call, which browser-use lacks: replay submits the form). A `change`
//!   of a checkbox or radio button right after a click on it (or on a `<label>`) is part of the click;
//!   without one it becomes a click. A `double_click` absorbs the two clicks before it on the same element
//!   and is `click{count: 2}`, so that tools knowing only `click` still see a click.
//! - **Choices.** A `change` on a `<select>` is `select_dropdown{option}` (the option labels, `, `-joined),
//!   absorbing a click on the select just before; on a file input `upload_file{files}`; on a text field it
//!   is part of the input before it, or an `input` of its own.
//! - **Keys.** A `key_press` is `send_keys{keys}`, the modifiers and the key joined by `+` (`Control+a`);
//!   an Enter that submits a form stays a `send_keys` call and absorbs the submit and its navigation.
//! - **Scrolling.** `scroll{down, delta_x, delta_y}` in CSS pixels; consecutive scrolls of one container
//!   add up. `pages` stays empty: the recording has no viewport height to divide by.
//! - **Tabs.** A tab created by a click (its opener is the clicked tab) within the effect window is the
//!   click's effect, together with its first navigation and the reload the recorder does to attach to it;
//!   the person is then on the new tab unless Control or Meta was held. `activated` becomes `switch{tab}`
//!   when it changes the tab the person is on; `removed` becomes `close{tab}` (unless the page closed
//!   itself within [`QUICK_EFFECT_WINDOW_MS`] of a click in it: then it is the click's). An action in another tab than
//!   the current one without an activation in between gets a `switch` first (with no event ids), and a
//!   recording that starts on an already open page gets a `navigate` to it first (likewise). Tabs are
//!   numbered 0, 1, … in the order they first appear.
//! - **Snapshots.** A call's `screenshot` and `dom_snapshot` are the first main-frame ones of the tab the
//!   call left the person on, after its last event and before the next call, preferring reason `action`
//!   to `load`. The recorder throttles captures, so calls in a quick burst may have none. A `switch` and
//!   the final `done` take the latest capture of their tab (switching changes nothing on the page).
//! - **Credentials.** An input (or choice) whose action has `credential: true` carries the placeholder
//!   `{{credentials.<site>.<field>}}` (site: the host of the page the field is in; field: its `name`, else
//!   `id`, sanitized) instead of its value, and the value goes to [`Derived::credentials`]. A field that
//!   was given several values (a password mistyped, then typed again) has the one typed last under its
//!   own name, listed first; the earlier ones are numbered after it (`<field>_2`, …). As a second
//!   line of defence every secret of four or more characters is replaced by its placeholder wherever it
//!   appears in the trajectory (raw or URL-encoded, such as in the URL a GET form led to).
//! - **HTTP authentication.** The `user:password` a browser sent with `Authorization: Basic` (typed into the
//!   browser's own dialog, which no page saw) is a credential of its site, field `http_basic_auth`, with no
//!   call: replay authenticates the browser as the recording shows.
//! - **The answer.** The trajectory ends with `done{text, success: true}`, `text` being the task's answer
//!   (empty for action tasks).

use trace_manifest::event::{ActionKind, EventKind, EventRecord};
use trace_manifest::task::TaskId;
#[cfg(feature = "native")]
use trace_manifest::trajectory::ToolCall;
use trace_manifest::trajectory::{Credential, Trajectory};

use builder::Builder;
pub use builder::keys_of;

mod builder;
mod captures;
mod credentials;
#[cfg(test)]
mod test_recording;

/// How long after a person's action a navigation or a new tab is still taken for its effect.
pub const EFFECT_WINDOW_MS: f64 = 5_000.0;
/// How long after a click a `submit`, a checkbox's `change`, a history move or a reload is still its effect:
/// the browser does those at once, while a person needs longer to do the same by hand.
pub const QUICK_EFFECT_WINDOW_MS: f64 = 1_000.0;
/// How far back a document request may have started to explain a navigation's server redirect, or to
/// time a navigation whose server answered slowly.
const REDIRECT_LOOKBACK_MS: f64 = 10_000.0;
/// How far the browser's clock for requests and a page's clock for actions may disagree.
const CLOCK_SKEW_MS: f64 = 250.0;
/// How long before a click's press a navigation may be recorded and still be the press's doing: both
/// times are the machine's clock, read by the page and by the browser.
const PRESS_SKEW_MS: f64 = 20.0;

/// What [`derive`] produces: the trajectory, and the secrets it refers to by placeholder.
#[derive(Debug, Clone, PartialEq)]
pub struct Derived {
    pub trajectory: Trajectory,
    pub credentials: Vec<Credential>,
}

/// A bundle's demonstration as tool calls, with the credentials its placeholders name: what
/// post-processing wrote (`trajectory.json` and `credentials.json`) when the bundle was processed, or else
/// [`derive`] from its events.
#[cfg(feature = "native")]
pub fn of_bundle(bundle: &mut trace_bundle::archive::Bundle) -> anyhow::Result<(Vec<ToolCall>, Vec<Credential>)> {
    use anyhow::Context as _;
    use trace_manifest::postprocess::{CREDENTIALS_FILE, CredentialEntry, TRAJECTORY_FILE};
    if bundle.contains(TRAJECTORY_FILE) {
        let trajectory: Trajectory = serde_json::from_slice(&bundle.read(TRAJECTORY_FILE)?)
            .with_context(|| format!("{TRAJECTORY_FILE} does not parse"))?;
        let credentials: Vec<CredentialEntry> = if bundle.contains(CREDENTIALS_FILE) {
            serde_json::from_slice(&bundle.read(CREDENTIALS_FILE)?)
                .with_context(|| format!("{CREDENTIALS_FILE} does not parse"))?
        } else {
            Vec::new()
        };
        return Ok((trajectory.tool_calls, credentials.iter().map(Credential::from).collect()));
    }
    let manifest = bundle.manifest()?;
    let events = bundle.events().context("the bundle's events")?;
    let derived = derive(manifest.task.id.clone(), &events, manifest.task.answer.as_deref());
    Ok((derived.trajectory.tool_calls, derived.credentials))
}

/// Derives the trajectory of a recording from its events (any order; they are read by `id`). `answer` is the
/// task's answer for information-retrieval tasks, the text of the final `done`.
pub fn derive(task_id: TaskId, events: &[EventRecord], answer: Option<&str>) -> Derived {
    let mut ordered: Vec<&EventRecord> = events.iter().collect();
    ordered.sort_by_key(|record| record.id);
    put_typing_before_what_it_caused(&mut ordered);
    let mut builder = Builder::new(&ordered);
    for record in &ordered {
        builder.on_event(record);
    }
    let mut derived = builder.finish(task_id, answer);
    derived.credentials.extend(credentials::http_basic(&ordered));
    derived
}

/// Moves each run of typing back before the navigations of its tab that happened after it began. A
/// recorder sends a run when it ends, so a recording made before runs ended at what they caused
/// (`TypingCoalescer::end_before`) can hold a URL the typing rewrote (`history.replaceState` as one
/// types) or a page it saved and opened before the typing; without this, that navigation would be the
/// previous call's. Never past an action of the same tab: typing ends at the next action.
fn put_typing_before_what_it_caused(ordered: &mut Vec<&EventRecord>) {
    for index in 0..ordered.len() {
        let typing = &ordered[index].event;
        let EventKind::Action(action) = &typing.kind else { continue };
        if action.action != ActionKind::Input || action.page_made {
            continue;
        }
        let mut destination = index;
        for earlier in (0..index).rev() {
            let event = &ordered[earlier].event;
            if event.tab_id != typing.tab_id {
                continue;
            }
            match &event.kind {
                EventKind::Action(_) => {
                    // Typing began after the action before it; a time saying otherwise is a clock to distrust.
                    if event.ts > typing.ts {
                        destination = index;
                    }
                    break;
                }
                EventKind::Navigation(_) if event.ts > typing.ts => destination = earlier,
                EventKind::Navigation(_) => break,
                _ => {}
            }
        }
        if destination < index {
            let moved = ordered.remove(index);
            ordered.insert(destination, moved);
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::trajectory::test_recording::*;

    #[test]
    fn typing_recorded_after_the_url_it_rewrote_goes_back_before_it() {
        let mut rec = Recording::default();
        rec.navigation(TAB, "/notes", NavigationCause::Typed);
        rec.wait(1_000.0).action(TAB, click("#find"));
        // The run of typing began here; the recorder sent it when it ended, after the URLs it rewrote.
        let began = rec.wait(500.0).now;
        rec.navigation(TAB, "/notes?find=m", NavigationCause::Script);
        rec.navigation(TAB, "/notes?find=mug", NavigationCause::Script);
        let typed = rec.action(TAB, typing("#find-input", "mug"));
        rec.events[typed as usize].event.ts = began;
        rec.wait(1_000.0).action(TAB, click("#new-note"));
        let derived = rec.derive();
        assert_eq!(
            calls(&derived),
            [
                r#"navigate {"url":"https://shop.test/notes"}"#,
                "click {} #find",
                r#"input {"text":"mug"} #find-input"#,
                "click {} #new-note",
            ]
        );
        assert_eq!(
            call(&derived, 1).url_after.as_deref(),
            Some("https://shop.test/notes"),
            "the click rewrote nothing"
        );
        assert_eq!(call(&derived, 2).url_after.as_deref(), Some("https://shop.test/notes?find=mug"));
    }

    #[test]
    fn typing_goes_back_no_further_than_the_persons_previous_action() {
        let mut rec = Recording::default();
        rec.navigation(TAB, "/notes", NavigationCause::Typed);
        let began = rec.wait(500.0).now;
        // A click, then a route it opened, both after the typing's stated time: a clock to distrust, since
        // typing after a click began after it.
        rec.wait(1_000.0).action(TAB, click("#inbox"));
        rec.navigation(TAB, "/notes/inbox", NavigationCause::Script);
        let typed = rec.action(TAB, typing("#q", "mug"));
        rec.events[typed as usize].event.ts = began;
        let derived = rec.derive();
        assert_eq!(call(&derived, 1).url_after.as_deref(), Some("https://shop.test/notes/inbox"));
        assert_eq!(calls(&derived)[2], r#"input {"text":"mug"} #q"#);
    }

    #[test]
    fn done_ends_every_trajectory_with_the_answer() {
        let mut rec = Recording::default();
        rec.navigation(TAB, "/", NavigationCause::Typed);
        let derived = derive("t".parse().unwrap(), &rec.events, Some("42 mugs"));
        let done = derived.trajectory.tool_calls.last().unwrap();
        assert_eq!(done.action, ToolAction::Done { text: "42 mugs".to_owned(), success: true });
        assert_eq!(done.url_after.as_deref(), Some("https://shop.test/"));
        let empty = derive("t".parse().unwrap(), &[], None);
        assert_eq!(empty.trajectory.tool_calls.len(), 1);
        assert_eq!(empty.trajectory.tool_calls[0].action, ToolAction::Done { text: String::new(), success: true });
    }

    #[test]
    fn tool_calls_are_name_and_params_and_read_back() {
        let call = ToolCall {
            action: ToolAction::GoBack {},
            target: None,
            tab: Some(0),
            url_before: None,
            url_after: None,
            dom_snapshot: None,
            screenshot: None,
            event_ids: vec![3],
            ts: 1.0,
            end_ts: None,
            typing_ts: None,
        };
        let json = serde_json::to_string(&call).unwrap();
        assert_eq!(json, r#"{"name":"go_back","params":{},"tab":0,"event_ids":[3],"ts":1.0}"#);
        assert_eq!(serde_json::from_str::<ToolCall>(&json).unwrap(), call);
        let click: ToolCall = serde_json::from_str(r#"{"name":"click","params":{},"ts":2}"#).unwrap();
        assert_eq!(click.action, ToolAction::Click { count: 1, modifiers: Vec::new(), coord: None });
        // Where a click came, when recorded, is one of its parameters.
        let placed: ToolCall =
            serde_json::from_str(r#"{"name":"click","params":{"coord":[92.0,126.0]},"ts":2}"#).unwrap();
        assert_eq!(placed.action, ToolAction::Click { count: 1, modifiers: Vec::new(), coord: Some([92.0, 126.0]) });
    }
}
