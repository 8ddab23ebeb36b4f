//! Which screenshot and DOM snapshot show what a call did: the one the recorder tied to its actions, else
//! the first after it in its window, preferring one taken after an action (the module's **Snapshots** rule).

use crate::urls::without_fragment;

#[derive(Debug, Clone, Copy, PartialEq)]
pub(super) enum CaptureKind {
    Screenshot,
    Dom,
}

#[derive(Debug)]
pub(super) struct Capture<'e> {
    pub(super) id: u64,
    pub(super) ts: f64,
    pub(super) tab_id: Option<i64>,
    /// The document a DOM snapshot is of (screenshots do not say).
    pub(super) url: Option<&'e str>,
    pub(super) kind: CaptureKind,
    pub(super) reason: &'e str,
    pub(super) file: &'e str,
    /// The action event it was taken after, as the recorder tied it (see `ScreenshotStored::after_action_ts`).
    pub(super) action_id: Option<u64>,
}

/// The last capture the recorder tied to one of the call's actions: what the page showed once it had
/// reacted to them, wherever its message falls among later events (the next action's can be stored first).
/// Only one taken before the next call began (after, it shows that call's doing too), of the tab the call
/// left the person in (a click that opened a tab is shown by the new tab's page), and for a DOM snapshot,
/// of the page the call reached.
pub(super) fn tied_capture(
    captures: &[Capture],
    tab: Option<i64>,
    event_ids: &[u64],
    kind: CaptureKind,
    window: &CaptureWindow,
) -> Option<String> {
    let tab = tab?;
    captures
        .iter()
        .rev()
        .find(|c| {
            c.kind == kind
                && c.tab_id == Some(tab)
                && c.action_id.is_some_and(|id| event_ids.contains(&id))
                && c.ts < window.end_ts
                && window.shows_page_of(c)
        })
        .map(|c| c.file.to_owned())
}

/// When no capture is tied to a call's actions (recordings made before captures were tied, a call with
/// no action of the person's): which captures can show what a call did: after its last event (`start`, an
/// event id), or taken once its acts were done (`acted_until`) though stored before its last event (a run
/// of typing is stored when it ends, which can come after the capture of the page it left); before the
/// next call's first event (`end`) and before it began (`end_ts`); and, for a DOM snapshot, of the page the
/// call left its tab at (`url`), since a capture begun just before a navigation committed shows the old
/// page.
pub(super) struct CaptureWindow<'u> {
    /// The call's first event.
    pub(super) first: u64,
    pub(super) start: u64,
    pub(super) acted_until: f64,
    pub(super) end: u64,
    pub(super) end_ts: f64,
    pub(super) url: Option<&'u str>,
}

impl CaptureWindow<'_> {
    /// Whether the capture is of the page the call reached (a screenshot does not say: it may be).
    fn shows_page_of(&self, capture: &Capture) -> bool {
        match (capture.url, self.url) {
            (Some(shown), Some(reached)) => without_fragment(shown) == without_fragment(reached),
            _ => true,
        }
    }
}

/// The first capture of `tab` in the window, preferring one taken after an action.
pub(super) fn capture_after(
    captures: &[Capture],
    tab: Option<i64>,
    kind: CaptureKind,
    window: &CaptureWindow,
) -> Option<String> {
    let tab = tab?;
    let mut found = captures
        .iter()
        .filter(|c| {
            c.kind == kind
                && c.tab_id == Some(tab)
                && (c.id > window.start || (c.id > window.first && c.ts > window.acted_until))
                && c.id < window.end
                && c.ts < window.end_ts
                && window.shows_page_of(c)
        })
        .peekable();
    let first = found.peek().map(|c| c.file.to_owned());
    found.find(|c| c.reason == "action").map(|c| c.file.to_owned()).or(first)
}

/// The latest capture of `tab` before `end`.
pub(super) fn latest_capture(captures: &[Capture], tab: Option<i64>, kind: CaptureKind, end: u64) -> Option<String> {
    let tab = tab?;
    captures.iter().rev().find(|c| c.kind == kind && c.tab_id == Some(tab) && c.id < end).map(|c| c.file.to_owned())
}

#[cfg(test)]
mod tests {
    use crate::trajectory::test_recording::*;

    #[test]
    fn a_snapshot_of_the_page_a_click_left_is_not_what_the_click_showed() {
        let mut rec = Recording::default();
        rec.navigation(TAB, "/", NavigationCause::Typed);
        rec.action(TAB, click("#next"));
        rec.navigation(TAB, "/next", NavigationCause::Link);
        // Begun before the navigation committed, stored after it: the old page.
        rec.capture_of(TAB, "action", &format!("{SITE}/"));
        let (_, shown) = rec.capture(TAB, "load");
        let derived = rec.derive();
        assert_eq!(call(&derived, 1).dom_snapshot.as_deref(), Some(shown.as_str()));
    }

    #[test]
    fn a_calls_captures_are_the_first_after_it_preferring_action_ones_and_none_past_the_next_call() {
        let mut rec = Recording::default();
        rec.navigation(TAB, "/", NavigationCause::Typed);
        let (load_shot, load_dom) = rec.capture(TAB, "load");
        let (action_shot, action_dom) = rec.capture(TAB, "action");
        rec.action(TAB, click("#a"));
        rec.action(TAB, click("#b"));
        let (late_shot, late_dom) = rec.capture(TAB, "action");
        rec.capture(OTHER_TAB, "load");
        let derived = rec.derive();
        let files = |i: usize| (call(&derived, i).screenshot.clone(), call(&derived, i).dom_snapshot.clone());
        assert_eq!(files(0), (Some(action_shot), Some(action_dom)));
        assert_eq!(files(1), (None, None), "the capture after #b shows #b's effect too");
        assert_eq!(files(2), (Some(late_shot.clone()), Some(late_dom.clone())));
        assert_eq!(files(3), (Some(late_shot), Some(late_dom)), "done shows the final page");
        assert_ne!(load_shot, load_dom);
    }

    /// The demo's sign-in on a quick machine: the click into the field, the page captured once typing had
    /// stopped, and only then the run of typing stored (it is stored when it ends), stamped when it began.
    #[test]
    fn a_capture_taken_after_typing_ended_is_the_typings_though_stored_before_it() {
        let mut rec = Recording::default();
        rec.navigation(TAB, "/login", NavigationCause::Typed);
        rec.action(TAB, click("#username"));
        let began = rec.now + 10.0;
        let (shot, dom) = rec.capture(TAB, "settled");
        let typed = rec.action(TAB, Action { until_ts: Some(began + 8.0), ..typing("#username", "ann") });
        rec.events[typed as usize].event.ts = began;
        rec.action(TAB, click("#password"));
        let derived = rec.derive();
        let typed_call = derived.trajectory.tool_calls.iter().find(|c| c.event_ids.contains(&typed)).unwrap();
        assert_eq!((typed_call.screenshot.clone(), typed_call.dom_snapshot.clone()), (Some(shot), Some(dom)));

        // A capture taken while the typing went on does not show it.
        let mut rec = Recording::default();
        rec.navigation(TAB, "/login", NavigationCause::Typed);
        rec.action(TAB, click("#username"));
        rec.capture(TAB, "settled");
        let typed = rec.action(TAB, Action { until_ts: Some(rec.now + 500.0), ..typing("#username", "ann") });
        rec.events[typed as usize].event.ts = rec.now - 300.0;
        rec.action(TAB, click("#password"));
        let derived = rec.derive();
        let typed_call = derived.trajectory.tool_calls.iter().find(|c| c.event_ids.contains(&typed)).unwrap();
        assert_eq!(typed_call.screenshot, None);
    }

    #[test]
    fn a_capture_tied_to_an_action_is_that_actions_however_late_it_comes() {
        let mut rec = Recording::default();
        rec.navigation(TAB, "/", NavigationCause::Typed);
        let first = rec.action(TAB, click("#a"));
        // The person clicks again just after the first click's capture was taken, and that click's event is
        // stored before the capture's message.
        let second = rec.action(TAB, click("#b"));
        let (first_shot, first_dom) = rec.capture_tied_to(TAB, first);
        let taken = rec.events[second as usize].event.ts - 50.0;
        for record in rec.events.iter_mut().rev().take(2) {
            record.event.ts = taken;
        }
        let (second_shot, second_dom) = rec.capture_tied_to(TAB, second);
        let derived = rec.derive();
        let files = |i: usize| (call(&derived, i).screenshot.clone(), call(&derived, i).dom_snapshot.clone());
        assert_eq!(files(1), (Some(first_shot.clone()), Some(first_dom.clone())), "by time, #a would have none");
        assert_eq!(files(2), (Some(second_shot), Some(second_dom)), "by time, #b would show #a's effect");

        // A click that opened a tab is shown by the new tab's page, not by the capture of the tab clicked in.
        let opener = rec.action(TAB, click("#help"));
        rec.tab(OTHER_TAB, TabOp::Created, Some(TAB));
        rec.navigation(OTHER_TAB, "/help", NavigationCause::Link);
        let (help_shot, _) = rec.capture(OTHER_TAB, "load");
        rec.capture_tied_to(TAB, opener);
        let derived = rec.derive();
        let opened = derived.trajectory.tool_calls.iter().find(|c| c.event_ids.contains(&opener)).unwrap();
        assert_eq!(opened.screenshot, Some(help_shot));

        // Untied, the same recording falls back to time: what the old recordings get.
        for record in &mut rec.events {
            match &mut record.event.kind {
                EventKind::Screenshot(shot) => shot.after_action_ts = None,
                EventKind::DomSnapshot(dom) => dom.after_action_ts = None,
                _ => {}
            }
        }
        let derived = rec.derive();
        assert_eq!(call(&derived, 1).screenshot, None);
        assert_eq!(call(&derived, 2).screenshot, Some(first_shot));
    }
}
