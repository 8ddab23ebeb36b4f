//! The builder: the rules of the module's documentation applied event by event, in the order
//! [`super::derive`] puts them. It keeps the calls being built, each tab's history and the main frame's
//! document requests, and at the end hands the calls to [`super::captures`] for their snapshots and to
//! [`super::credentials`] for their placeholders.

use std::collections::HashMap;

use trace_manifest::event::{Action, ActionKind, ElementDescriptor, EventKind, EventRecord, NavigationCause, TabOp};
use trace_manifest::task::TaskId;
use trace_manifest::trajectory::{ToolAction, ToolCall, Trajectory};

use super::captures::{Capture, CaptureKind, CaptureWindow, capture_after, latest_capture, tied_capture};
use super::credentials::{Secret, register_secrets, scrub};
use super::{CLOCK_SKEW_MS, Derived, EFFECT_WINDOW_MS, PRESS_SKEW_MS, QUICK_EFFECT_WINDOW_MS, REDIRECT_LOOKBACK_MS};
use crate::urls::without_fragment;

/// Whether keys move a slider or spin button by themselves: arrows, Page Up/Down, Home and End, with no
/// modifier.
fn moves_a_control(keys: &str) -> bool {
    matches!(keys, "ArrowUp" | "ArrowDown" | "ArrowLeft" | "ArrowRight" | "PageUp" | "PageDown" | "Home" | "End")
}

/// The keys of a key press as `send_keys` takes them: modifiers, then the key, joined by `+`.
pub fn keys_of(action: &Action) -> String {
    let mut parts: Vec<&str> = Vec::new();
    for modifier in &action.modifiers {
        if !parts.contains(&modifier.as_str()) && action.key.as_deref() != Some(modifier) {
            parts.push(modifier);
        }
    }
    parts.push(action.key.as_deref().unwrap_or_default());
    parts.join("+")
}

/// The same element for the purpose of merging actions: same selector in the same frame.
fn same_element(a: &ElementDescriptor, b: &ElementDescriptor) -> bool {
    a.selector == b.selector && a.frame_path == b.frame_path
}

fn same_target(a: Option<&ElementDescriptor>, b: Option<&ElementDescriptor>) -> bool {
    match (a, b) {
        (None, None) => true,
        (Some(a), Some(b)) => same_element(a, b),
        _ => false,
    }
}

enum FieldKind {
    Select,
    Toggle,
    File,
    Text,
}

fn field_kind(target: &ElementDescriptor) -> FieldKind {
    match (target.tag.as_str(), target.input_type.as_deref()) {
        ("select", _) => FieldKind::Select,
        (_, Some("checkbox" | "radio")) => FieldKind::Toggle,
        (_, Some("file")) => FieldKind::File,
        _ => FieldKind::Text,
    }
}

/// Where a pointer action came, when the recorder said.
fn coord_of(action: &Action) -> Option<[f64; 2]> {
    Some([action.x?, action.y?])
}

/// A call being built, with what the rules need to know about it.
#[derive(Debug)]
pub(super) struct PendingCall {
    pub(super) call: ToolCall,
    /// The tab it happened in.
    pub(super) tab_id: Option<i64>,
    /// The tab it left the person on (a new tab for a click that opened one).
    pub(super) result_tab: Option<i64>,
    /// The id where its evidence starts, ending the previous call's snapshot window.
    pub(super) first_event_id: u64,
    /// The time of its latest action, from which effects are timed.
    pub(super) last_person_ts: f64,
    pub(super) navigated: bool,
    pub(super) opened_tab: Option<i64>,
    pub(super) absorbed_change: bool,
    pub(super) secret: Option<Secret>,
    pub(super) closed: bool,
}

impl PendingCall {
    fn absorb(&mut self, id: u64) {
        self.call.event_ids.push(id);
    }

    fn absorb_action(&mut self, id: u64, ts: f64) {
        self.absorb(id);
        self.last_person_ts = self.last_person_ts.max(ts);
    }

    fn last_event_id(&self) -> Option<u64> {
        self.call.event_ids.iter().copied().max()
    }

    /// A call made in the page, whose effects navigations and new tabs can be.
    fn is_in_page(&self) -> bool {
        matches!(
            self.call.action,
            ToolAction::Click { .. }
                | ToolAction::DragDrop { .. }
                | ToolAction::Input { .. }
                | ToolAction::SendKeys { .. }
                | ToolAction::Scroll { .. }
                | ToolAction::SelectDropdown { .. }
                | ToolAction::UploadFile { .. }
                | ToolAction::Submit {}
        )
    }

    fn is_single_click_on(&self, tab: i64, target: &ElementDescriptor) -> bool {
        matches!(self.call.action, ToolAction::Click { count: 1, .. })
            && self.tab_id == Some(tab)
            && !self.navigated
            && self.opened_tab.is_none()
            && self.call.target.as_ref().is_some_and(|own| same_element(own, target))
    }

    fn is_on(&self, tab: i64, name: &str, target: &ElementDescriptor) -> bool {
        self.tab_id == Some(tab)
            && self.call.action.name() == name
            && self.call.target.as_ref().is_some_and(|own| same_element(own, target))
    }
}

#[derive(Debug, Default)]
struct TabState {
    ordinal: u32,
    url: Option<String>,
    /// The tab's session history as far as the recording saw it, and where in it the tab is.
    history: Vec<String>,
    index: usize,
    main_navigations: u32,
    created_in_recording: bool,
    opened_by_call: bool,
    acted_in: bool,
    /// Its latest main-frame navigation, which a click whose press came before it takes for its own.
    last_change: Option<UrlChange>,
}

/// A main-frame navigation as the rules first took it, and what it changed, so that a click whose press
/// started it can take it back ([`Builder::take_pressed_change`]).
#[derive(Debug, Clone)]
struct UrlChange {
    id: u64,
    ts: f64,
    /// The tab's URL before it.
    url_before: Option<String>,
    /// How many calls there were before it (any beyond were made of it).
    calls_before: usize,
    /// The call it was taken as an effect of, with that call's `url_after` and `navigated` before.
    owner: Option<(usize, Option<String>, bool)>,
}

impl TabState {
    /// A new document: it replaces the current history entry (a client redirect) or is pushed after it.
    fn commit(&mut self, url: &str, replace: bool) {
        if replace && !self.history.is_empty() {
            self.history[self.index] = url.to_owned();
        } else {
            self.history.truncate(if self.history.is_empty() { 0 } else { self.index + 1 });
            self.history.push(url.to_owned());
            self.index = self.history.len() - 1;
        }
        self.url = Some(url.to_owned());
    }

    /// Where a back/forward navigation to `url` went: negative steps back, positive forward.
    fn history_steps_to(&self, url: &str) -> Option<i64> {
        let wanted = without_fragment(url);
        let back = (0..self.index).rev().find(|&i| without_fragment(&self.history[i]) == wanted);
        let forward = (self.index + 1..self.history.len()).find(|&i| without_fragment(&self.history[i]) == wanted);
        match (back, forward) {
            (Some(back), Some(forward)) if forward - self.index < self.index - back => {
                Some(forward as i64 - self.index as i64)
            }
            (Some(back), _) => Some(back as i64 - self.index as i64),
            (None, Some(forward)) => Some(forward as i64 - self.index as i64),
            (None, None) => None,
        }
    }
}

#[derive(Debug)]
struct DocumentChain<'e> {
    tab_id: i64,
    first_ts: f64,
    first_is_get: bool,
    /// Whether a hop came without a frame id, as the main frame's do.
    main_frame: bool,
    hops: Vec<&'e str>,
}

pub(super) struct Builder<'e> {
    calls: Vec<PendingCall>,
    tabs: HashMap<i64, TabState>,
    current_tab: Option<i64>,
    /// Main-frame document requests, by tab and request id, with their redirect hops.
    documents: HashMap<(i64, &'e str), DocumentChain<'e>>,
    /// Main-frame screenshots and DOM snapshots, in id order.
    captures: Vec<Capture<'e>>,
    last_ts: f64,
}

impl<'e> Builder<'e> {
    pub(super) fn new(events: &[&'e EventRecord]) -> Builder<'e> {
        let mut documents: HashMap<(i64, &str), DocumentChain> = HashMap::new();
        let mut captures = Vec::new();
        // An action is named by its tab and time, which the recorder knows before the host numbers it.
        let actions: HashMap<(Option<i64>, u64), u64> = events
            .iter()
            .filter(|record| matches!(record.event.kind, EventKind::Action(_)))
            .map(|record| ((record.event.tab_id, record.event.ts.to_bits()), record.id))
            .collect();
        let action_of = |tab_id: Option<i64>, ts: Option<f64>| actions.get(&(tab_id, ts?.to_bits())).copied();
        for record in events {
            let event = &record.event;
            match &event.kind {
                EventKind::Request(request) if request.resource_type.as_deref() == Some("Document") => {
                    let Some(tab_id) = event.tab_id else { continue };
                    let chain =
                        documents.entry((tab_id, request.request_id.as_str())).or_insert_with(|| DocumentChain {
                            tab_id,
                            first_ts: event.ts,
                            first_is_get: request.method.eq_ignore_ascii_case("GET"),
                            main_frame: false,
                            hops: Vec::new(),
                        });
                    chain.main_frame |= event.frame_id.is_none();
                    chain.hops.push(&request.url);
                }
                EventKind::Screenshot(shot) => captures.push(Capture {
                    id: record.id,
                    ts: event.ts,
                    tab_id: event.tab_id,
                    url: None,
                    kind: CaptureKind::Screenshot,
                    reason: &shot.reason,
                    file: &shot.file,
                    action_id: action_of(event.tab_id, shot.after_action_ts),
                }),
                EventKind::DomSnapshot(dom) if event.frame_id.is_none() => captures.push(Capture {
                    id: record.id,
                    ts: event.ts,
                    tab_id: event.tab_id,
                    url: Some(&dom.url),
                    kind: CaptureKind::Dom,
                    reason: &dom.reason,
                    file: &dom.file,
                    action_id: action_of(event.tab_id, dom.after_action_ts),
                }),
                _ => {}
            }
        }
        // An iframe's document requests all carry its frame id. The main frame's carry none, except in
        // recordings made before the recorder learnt the main frame's id on attaching: there the hops before
        // its first document committed (a redirect) carry it. A chain with one frame-less hop is the main
        // frame's.
        documents.retain(|_, chain| chain.main_frame);
        Builder { calls: Vec::new(), tabs: HashMap::new(), current_tab: None, documents, captures, last_ts: 0.0 }
    }

    pub(super) fn on_event(&mut self, record: &EventRecord) {
        let event = &record.event;
        self.last_ts = self.last_ts.max(event.ts);
        let Some(tab) = event.tab_id else { return };
        match &event.kind {
            // What the page did by itself is not the person's: no call, no credential.
            EventKind::Action(action) if action.page_made => {}
            EventKind::Action(action) => {
                self.tab(tab);
                self.on_action(record.id, event.ts, tab, event.frame_id.is_none(), action);
                self.timed(record.id, event.ts, action);
            }
            // The blank page a recorder opens a task's tab with is no step of the demonstration.
            EventKind::Navigation(navigation) if navigation.main_frame && navigation.url == "about:blank" => {}
            EventKind::Navigation(navigation) if navigation.main_frame => {
                self.tab(tab);
                self.on_navigation(record.id, event.ts, tab, &navigation.url, navigation.cause);
            }
            EventKind::Navigation(navigation) => {
                // An iframe that a click navigated: evidence of the click, no call of its own.
                if matches!(navigation.cause, NavigationCause::Link | NavigationCause::FormSubmit)
                    && let Some(last) = self.calls.last_mut()
                    && last.tab_id == Some(tab)
                    && last.is_in_page()
                    && event.ts - last.last_person_ts <= EFFECT_WINDOW_MS
                {
                    last.absorb(record.id);
                }
            }
            EventKind::Tab(tab_event) => {
                self.tab(tab);
                match tab_event.op {
                    TabOp::Created => self.on_tab_created(record.id, event.ts, tab, tab_event),
                    TabOp::Activated => self.on_tab_activated(record.id, event.ts, tab),
                    TabOp::Removed => self.on_tab_removed(record.id, event.ts, tab),
                }
            }
            _ => {}
        }
    }

    /// The tab's state, numbering it on first sight.
    fn tab(&mut self, tab: i64) -> &mut TabState {
        let next = self.tabs.len() as u32;
        self.tabs.entry(tab).or_insert_with(|| TabState { ordinal: next, ..TabState::default() })
    }

    fn url_of(&self, tab: Option<i64>) -> Option<String> {
        tab.and_then(|tab| self.tabs.get(&tab)).and_then(|state| state.url.clone())
    }

    fn ordinal(&mut self, tab: i64) -> u32 {
        self.tab(tab).ordinal
    }

    /// Ends the latest call: its `url_after` is where its tab is now.
    fn close_last(&mut self) {
        let Some(last) = self.calls.last_mut() else { return };
        if last.closed {
            return;
        }
        last.closed = true;
        if let Some(url) = last.result_tab.and_then(|tab| self.tabs.get(&tab)).and_then(|state| state.url.clone()) {
            last.call.url_after = Some(url);
        }
    }

    fn push(
        &mut self,
        action: ToolAction,
        target: Option<ElementDescriptor>,
        tab: Option<i64>,
        first_event_id: u64,
        event_ids: Vec<u64>,
        ts: f64,
    ) -> &mut PendingCall {
        self.close_last();
        let ordinal = tab.map(|tab| self.ordinal(tab));
        let url_before = self.url_of(tab);
        self.calls.push(PendingCall {
            call: ToolCall {
                action,
                target,
                tab: ordinal,
                url_before: url_before.clone(),
                url_after: url_before,
                dom_snapshot: None,
                screenshot: None,
                event_ids,
                ts,
                end_ts: None,
                typing_ts: None,
            },
            tab_id: tab,
            result_tab: tab,
            first_event_id,
            last_person_ts: ts,
            navigated: false,
            opened_tab: None,
            absorbed_change: false,
            secret: None,
            closed: false,
        });
        self.calls.last_mut().expect("just pushed")
    }

    /// The person does something in `tab`: if they were on another tab, they switched to it first.
    fn enter_tab(&mut self, tab: i64, id: u64, ts: f64) {
        match self.current_tab {
            Some(current) if current == tab => {}
            Some(current) => {
                let ordinal = self.ordinal(tab);
                let switched = self.push(ToolAction::Switch { tab: ordinal }, None, Some(current), id, Vec::new(), ts);
                switched.result_tab = Some(tab);
                self.current_tab = Some(tab);
            }
            None => self.arrive_at(tab),
        }
    }

    /// The person is on `tab` without having chosen it (the recording starts, or the browser picked a tab
    /// after a close).
    fn arrive_at(&mut self, tab: i64) {
        self.current_tab = Some(tab);
        if let Some(last) = self.calls.last_mut()
            && matches!(last.call.action, ToolAction::Close { .. })
            && last.result_tab.is_none()
        {
            last.result_tab = Some(tab);
        }
    }

    fn on_action(&mut self, id: u64, ts: f64, tab: i64, main_frame: bool, action: &Action) {
        self.tab(tab).acted_in = true;
        if main_frame && self.tab(tab).url.is_none() {
            // A tab recorded from an open page: its URL is known from the first action.
            let url = action.url.clone();
            self.tab(tab).commit(&url, false);
        }
        if self.calls.is_empty() {
            // Replay has to start where the person started.
            if let Some(url) = self.url_of(Some(tab)) {
                self.arrive_at(tab);
                self.push(ToolAction::Navigate { url }, None, Some(tab), id, Vec::new(), ts).call.url_before = None;
            }
        }
        let target = action.target.clone();
        match action.action {
            ActionKind::Click => {
                // In a list box the browser reports the choice before the click that made it: the choice
                // already says what the click did (with Control held or not).
                if let Some(last) = self.calls.last_mut()
                    && target.as_ref().is_some_and(|clicked| clicked.tag == "option")
                    && last.tab_id == Some(tab)
                    && matches!(last.call.action, ToolAction::SelectDropdown { .. })
                    && ts - last.last_person_ts <= QUICK_EFFECT_WINDOW_MS
                {
                    last.absorb(id);
                    return;
                }
                let pressed = action.pressed_ts.and_then(|pressed| self.take_pressed_change(tab, pressed, ts));
                self.enter_tab(tab, id, ts);
                let click =
                    ToolAction::Click { count: 1, modifiers: action.modifiers.clone(), coord: coord_of(action) };
                let call = self.push(click, target, Some(tab), id, vec![id], ts);
                if let Some((navigation, went_to)) = pressed {
                    call.absorb(navigation);
                    call.navigated = true;
                    self.tab(tab).url = Some(went_to);
                }
            }
            ActionKind::DoubleClick => self.on_double_click(id, ts, tab, action),
            ActionKind::Drag => {
                self.enter_tab(tab, id, ts);
                let drag = ToolAction::DragDrop {
                    coord_source_x: action.x.unwrap_or_default(),
                    coord_source_y: action.y.unwrap_or_default(),
                    coord_target_x: action.to_x.unwrap_or_default(),
                    coord_target_y: action.to_y.unwrap_or_default(),
                    element_target: action.drop_target.clone().map(Box::new),
                    steps: action.moves.unwrap_or(1),
                };
                self.push(drag, target, Some(tab), id, vec![id], ts);
            }
            ActionKind::Input => {
                let value = action.value.clone().unwrap_or_default();
                self.on_typed(id, ts, tab, action, value);
            }
            ActionKind::KeyPress => {
                self.enter_tab(tab, id, ts);
                let keys = keys_of(action);
                self.push(ToolAction::SendKeys { keys }, target, Some(tab), id, vec![id], ts);
            }
            ActionKind::Scroll => self.on_scroll(id, ts, tab, action),
            ActionKind::Submit => {
                if let Some(last) = self.calls.last_mut()
                    && last.tab_id == Some(tab)
                    && matches!(last.call.action, ToolAction::Click { .. } | ToolAction::SendKeys { .. })
                    && ts - last.last_person_ts <= QUICK_EFFECT_WINDOW_MS
                {
                    last.absorb_action(id, ts);
                } else {
                    self.enter_tab(tab, id, ts);
                    self.push(ToolAction::Submit {}, target, Some(tab), id, vec![id], ts);
                }
            }
            ActionKind::Change => self.on_change(id, ts, tab, action),
        }
    }

    /// Times the call `action` (event `id`, at `ts`) became part of: when its last act ended, and for typing
    /// that a click began, when the first key came.
    fn timed(&mut self, id: u64, ts: f64, action: &Action) {
        let Some(last) = self.calls.last_mut().filter(|last| last.call.event_ids.contains(&id)) else { return };
        let ended = action.until_ts.unwrap_or(ts).max(ts);
        last.call.end_ts = Some(last.call.end_ts.map_or(ended, |end| end.max(ended)));
        if action.action == ActionKind::Input
            && matches!(last.call.action, ToolAction::Input { .. })
            && last.call.typing_ts.is_none()
            && ts > last.call.ts
        {
            last.call.typing_ts = Some(ts);
        }
    }

    fn on_double_click(&mut self, id: u64, ts: f64, tab: i64, action: &Action) {
        let Some(target) = &action.target else {
            self.enter_tab(tab, id, ts);
            let click = ToolAction::Click { count: 2, modifiers: Vec::new(), coord: coord_of(action) };
            self.push(click, None, Some(tab), id, vec![id], ts);
            return;
        };
        let n = self.calls.len();
        let clicked_before = |calls: &[PendingCall], back: usize| {
            n >= back && calls[n - back].is_single_click_on(tab, target) && !calls[n - back].absorbed_change
        };
        if clicked_before(&self.calls, 1) {
            if clicked_before(&self.calls, 2) {
                let second = self.calls.pop().expect("checked");
                self.calls.last_mut().expect("checked").call.event_ids.extend(second.call.event_ids);
            }
            let call = self.calls.last_mut().expect("checked");
            call.call.action = ToolAction::Click { count: 2, modifiers: Vec::new(), coord: coord_of(action) };
            call.call.target = Some(target.clone());
            // The first click was closed when the second came: the double click goes on with it.
            call.closed = false;
            call.absorb_action(id, ts);
        } else {
            self.enter_tab(tab, id, ts);
            self.push(
                ToolAction::Click { count: 2, modifiers: Vec::new(), coord: coord_of(action) },
                Some(target.clone()),
                Some(tab),
                id,
                vec![id],
                ts,
            );
        }
    }

    /// Typing into a text field (an `input`, or the `change` of a field no `input` reported).
    fn on_typed(&mut self, id: u64, ts: f64, tab: i64, action: &Action, value: String) {
        let Some(target) = action.target.clone() else {
            // Typing needs a field; without one the keys are all there is to replay.
            self.enter_tab(tab, id, ts);
            self.push(ToolAction::Input { text: value }, None, Some(tab), id, vec![id], ts);
            return;
        };
        // A slider or spin button moved by its keys: the keys are the call, and replaying them moves it
        // again (the value would be a second, different change). Only keys that move one do: after
        // Control+A, the value typed is typing.
        if let Some(last) = self.calls.last_mut()
            && target.input_type.as_deref().is_some_and(|kind| kind == "range" || kind == "number")
            && last.is_on(tab, "send_keys", &target)
            && matches!(&last.call.action, ToolAction::SendKeys { keys } if moves_a_control(keys))
            && ts - last.last_person_ts <= QUICK_EFFECT_WINDOW_MS
        {
            last.absorb(id);
            return;
        }
        let secret = (action.credential && !value.is_empty()).then(|| Secret::of(action, &target, &value));
        let last = self.calls.last_mut();
        if let Some(last) = last
            && (last.is_on(tab, "input", &target) || last.is_single_click_on(tab, &target))
        {
            last.call.action = ToolAction::Input { text: value.clone() };
            last.call.target = Some(target);
            last.absorb_action(id, ts);
            last.secret = match (last.secret.take(), secret) {
                (Some(earlier), Some(newer)) => Some(earlier.replaced_by(newer)),
                (None, newer) => newer,
                // A field once secret stays secret, whatever a later report says.
                (Some(earlier), None) if !value.is_empty() => {
                    Some(earlier.clone().replaced_by(Secret { value, ..earlier }))
                }
                (Some(_), None) => None,
            };
            return;
        }
        self.enter_tab(tab, id, ts);
        let call = self.push(ToolAction::Input { text: value }, Some(target), Some(tab), id, vec![id], ts);
        call.secret = secret;
    }

    fn on_scroll(&mut self, id: u64, ts: f64, tab: i64, action: &Action) {
        let (dx, dy) = (action.delta_x.unwrap_or(0.0), action.delta_y.unwrap_or(0.0));
        if let Some(last) = self.calls.last_mut()
            && last.tab_id == Some(tab)
            && same_target(last.call.target.as_ref(), action.target.as_ref())
            && let ToolAction::Scroll { delta_x, delta_y, down, .. } = &mut last.call.action
        {
            *delta_x += dx;
            *delta_y += dy;
            *down = *delta_y >= 0.0;
            last.absorb_action(id, ts);
            return;
        }
        self.enter_tab(tab, id, ts);
        let scroll = ToolAction::Scroll { down: dy >= 0.0, pages: None, delta_x: dx, delta_y: dy };
        self.push(scroll, action.target.clone(), Some(tab), id, vec![id], ts);
    }

    fn on_change(&mut self, id: u64, ts: f64, tab: i64, action: &Action) {
        let value = action.value.clone().unwrap_or_default();
        let Some(target) = action.target.clone() else {
            if let Some(last) = self.calls.last_mut().filter(|last| last.tab_id == Some(tab)) {
                last.absorb(id);
            }
            return;
        };
        match field_kind(&target) {
            FieldKind::Select => {
                let secret = (action.credential && !value.is_empty()).then(|| Secret::of(action, &target, &value));
                let choice = ToolAction::SelectDropdown { option: value };
                if let Some(last) = self.calls.last_mut()
                    && (last.is_single_click_on(tab, &target) || last.is_on(tab, "select_dropdown", &target))
                {
                    last.call.action = choice;
                    last.absorb_action(id, ts);
                    last.secret = secret;
                } else {
                    self.enter_tab(tab, id, ts);
                    self.push(choice, Some(target), Some(tab), id, vec![id], ts).secret = secret;
                }
            }
            FieldKind::Toggle => {
                if let Some(last) = self.calls.last_mut()
                    && last.tab_id == Some(tab)
                    && matches!(last.call.action, ToolAction::Click { .. })
                    && !last.absorbed_change
                    && ts - last.last_person_ts <= QUICK_EFFECT_WINDOW_MS
                    && last
                        .call
                        .target
                        .as_ref()
                        .is_some_and(|clicked| same_element(clicked, &target) || clicked.tag == "label")
                {
                    last.absorbed_change = true;
                    last.absorb(id);
                } else {
                    // Toggled by no recorded click (the keyboard): a click sets it the same way.
                    self.enter_tab(tab, id, ts);
                    self.push(
                        ToolAction::Click { count: 1, modifiers: Vec::new(), coord: None },
                        Some(target),
                        Some(tab),
                        id,
                        vec![id],
                        ts,
                    )
                    .absorbed_change = true;
                }
            }
            FieldKind::File => {
                let files = value.split(", ").filter(|name| !name.is_empty()).map(str::to_owned).collect();
                let upload = ToolAction::UploadFile { files };
                if let Some(last) = self.calls.last_mut()
                    && (last.is_single_click_on(tab, &target) || last.is_on(tab, "upload_file", &target))
                {
                    last.call.action = upload;
                    last.absorb_action(id, ts);
                } else {
                    self.enter_tab(tab, id, ts);
                    self.push(upload, Some(target), Some(tab), id, vec![id], ts);
                }
            }
            FieldKind::Text => self.on_typed(id, ts, tab, action, value),
        }
    }

    /// The call whose effect a main-frame navigation of `tab` to `url` with `cause` at `ts` is, if any.
    /// A navigation is timed from when its document request left, if that was during the call: a form the
    /// server takes long to answer (a slow save, then a redirect) is still the click's effect.
    fn effect_owner(&self, tab: i64, url: &str, ts: f64, cause: NavigationCause) -> Option<usize> {
        let index = self.calls.len().checked_sub(1)?;
        let last = &self.calls[index];
        if last.result_tab != Some(tab) {
            return None;
        }
        let asked = self
            .document_chain(tab, url, ts)
            .map(|chain| chain.first_ts)
            .filter(|&asked| asked >= last.call.ts - CLOCK_SKEW_MS);
        let elapsed = asked.unwrap_or(ts) - last.last_person_ts;
        let owned = match cause {
            NavigationCause::Redirect | NavigationCause::Script => {
                (last.is_in_page()
                    || matches!(
                        last.call.action,
                        ToolAction::Navigate { .. } | ToolAction::GoBack {} | ToolAction::GoForward {}
                    ))
                    && elapsed <= EFFECT_WINDOW_MS
            }
            NavigationCause::Link | NavigationCause::FormSubmit | NavigationCause::Other => {
                last.is_in_page() && elapsed <= EFFECT_WINDOW_MS
            }
            NavigationCause::BackForward | NavigationCause::Reload => {
                matches!(last.call.action, ToolAction::Click { .. })
                    && !last.navigated
                    && elapsed <= QUICK_EFFECT_WINDOW_MS
            }
            NavigationCause::Typed => false,
        };
        owned.then_some(index)
    }

    fn on_navigation(&mut self, id: u64, ts: f64, tab: i64, url: &str, cause: NavigationCause) {
        let url_before = self.tab(tab).url.clone();
        let calls_before = self.calls.len();
        let last_before = self.calls.last().map(|last| (last.call.url_after.clone(), last.navigated));
        self.take_navigation(id, ts, tab, url, cause);
        let owner = self.calls.iter().rposition(|call| call.call.event_ids.contains(&id));
        let owner = owner.filter(|&owner| owner + 1 == calls_before).zip(last_before).map(|(o, (u, n))| (o, u, n));
        self.tab(tab).last_change = Some(UrlChange { id, ts, url_before, calls_before, owner });
    }

    /// A click whose press came before `tab`'s latest navigation (at or after `pressed_ts`, before the click
    /// at `ts`) started it: tabs that switch on the press navigate before the click is reported. Undoes what
    /// the navigation was first taken for (another call's effect, or calls of its own) and puts the tab back
    /// where it was when the press came; returns the navigation's event id and where it went, for the click.
    fn take_pressed_change(&mut self, tab: i64, pressed_ts: f64, ts: f64) -> Option<(u64, String)> {
        let state = self.tabs.get_mut(&tab)?;
        let change = state.last_change.take_if(|change| change.ts >= pressed_ts - PRESS_SKEW_MS && change.ts <= ts)?;
        let went_to = state.url.clone()?;
        state.url = change.url_before.clone();
        if let Some((owner, url_after, navigated)) = change.owner {
            let call = &mut self.calls[owner];
            call.call.event_ids.retain(|&event| event != change.id);
            call.call.url_after = url_after;
            call.navigated = navigated;
        }
        self.calls.truncate(change.calls_before);
        Some((change.id, went_to))
    }

    fn take_navigation(&mut self, id: u64, ts: f64, tab: i64, url: &str, cause: NavigationCause) {
        let opener = self.calls.iter().rposition(|call| call.opened_tab == Some(tab));
        let state = self.tab(tab);
        // The recorder reloads a tab it starts recording, since its first request left unrecorded.
        let recorder_reload = cause == NavigationCause::Reload
            && state.created_in_recording
            && state.main_navigations == 1
            && !state.acted_in
            && state.url.as_deref() == Some(url);
        if recorder_reload {
            if let Some(opener) = opener {
                self.calls[opener].absorb(id);
            }
            return;
        }
        if state.opened_by_call && state.main_navigations == 0 {
            state.main_navigations += 1;
            state.commit(url, false);
            if let Some(opener) = opener {
                let call = &mut self.calls[opener];
                call.absorb(id);
                call.navigated = true;
                call.call.url_after = Some(url.to_owned());
            }
            return;
        }
        let first_of_tab = state.main_navigations == 0 && state.url.is_none();
        state.main_navigations += 1;
        if first_of_tab && state.created_in_recording {
            // A tab that a page opened by itself (no recorded action did): where it went is no call; the
            // person acting in it later gets a switch to it.
            state.commit(url, false);
            return;
        }

        if let Some(owner) = self.effect_owner(tab, url, ts, cause) {
            let state = self.tabs.get_mut(&tab).expect("seen");
            match cause {
                NavigationCause::BackForward => match state.history_steps_to(url) {
                    Some(steps) => {
                        state.index = (state.index as i64 + steps) as usize;
                        state.url = Some(url.to_owned());
                    }
                    None => state.commit(url, false),
                },
                NavigationCause::Reload => state.url = Some(url.to_owned()),
                NavigationCause::Redirect | NavigationCause::Script => state.commit(url, true),
                _ => state.commit(url, false),
            }
            let call = &mut self.calls[owner];
            call.absorb(id);
            call.navigated = true;
            call.call.url_after = Some(url.to_owned());
            return;
        }

        let page_did_it = matches!(cause, NavigationCause::Redirect | NavigationCause::Script);
        if page_did_it && !self.calls.is_empty() && !first_of_tab {
            self.tab(tab).commit(url, true);
            return;
        }
        self.enter_tab(tab, id, ts);
        if cause == NavigationCause::BackForward
            && let Some(steps) = self.tabs[&tab].history_steps_to(url)
            && steps != 0
        {
            for _ in 0..steps.unsigned_abs() {
                let (action, step) =
                    if steps < 0 { (ToolAction::GoBack {}, -1) } else { (ToolAction::GoForward {}, 1) };
                self.push(action, None, Some(tab), id, vec![id], ts);
                let state = self.tabs.get_mut(&tab).expect("seen");
                state.index = (state.index as i64 + step) as usize;
                state.url = Some(state.history[state.index].clone());
            }
            // The history may hold the URL without its fragment, or before a redirect: the tab is at `url`.
            self.tab(tab).url = Some(url.to_owned());
            self.calls.last_mut().expect("pushed").navigated = true;
            return;
        }
        let asked_for = self.url_asked_for(tab, url, ts).unwrap_or_else(|| url.to_owned());
        self.push(ToolAction::Navigate { url: asked_for }, None, Some(tab), id, vec![id], ts).navigated = true;
        let state = self.tab(tab);
        if cause == NavigationCause::Reload && state.url.as_deref() == Some(url) {
            return;
        }
        state.commit(url, false);
    }

    /// The URL a navigation that ended at `url` asked for: the first hop of its document request, when the
    /// server redirected it (Chrome reports where it ended). Only GET requests: a POST cannot be retyped.
    fn url_asked_for(&self, tab: i64, url: &str, ts: f64) -> Option<String> {
        let chain = self.document_chain(tab, url, ts)?;
        (chain.hops.len() > 1 && chain.first_is_get).then(|| chain.hops[0].to_owned())
    }

    /// The document request, with its redirect hops, of a navigation of `tab` that ended at `url` at `ts`.
    fn document_chain(&self, tab: i64, url: &str, ts: f64) -> Option<&DocumentChain<'e>> {
        self.documents
            .values()
            .filter(|chain| {
                chain.tab_id == tab
                    && chain.first_ts <= ts + 1.0
                    && ts - chain.first_ts <= REDIRECT_LOOKBACK_MS
                    && chain.hops.last().is_some_and(|last| without_fragment(last) == without_fragment(url))
            })
            .max_by(|a, b| a.first_ts.total_cmp(&b.first_ts))
    }

    fn on_tab_created(&mut self, id: u64, ts: f64, tab: i64, created: &trace_manifest::event::TabEvent) {
        let state = self.tab(tab);
        state.created_in_recording = true;
        let Some(opener) = created.opener_tab_id else { return };
        let Some(last) = self.calls.last_mut() else { return };
        let opened_by_last = last.is_in_page()
            && (last.tab_id == Some(opener) || last.result_tab == Some(opener))
            && last.opened_tab.is_none()
            && ts - last.last_person_ts <= EFFECT_WINDOW_MS;
        if !opened_by_last {
            return;
        }
        last.absorb(id);
        last.opened_tab = Some(tab);
        // Control or Meta opens a link in the background; otherwise Chrome shows the new tab.
        let background = matches!(&last.call.action, ToolAction::Click { modifiers, .. }
            if modifiers.iter().any(|m| m == "Control" || m == "Meta"));
        if !background {
            last.result_tab = Some(tab);
            last.call.url_after = created.url.clone();
            self.current_tab = Some(tab);
        }
        self.tab(tab).opened_by_call = true;
    }

    fn on_tab_activated(&mut self, id: u64, ts: f64, tab: i64) {
        match self.current_tab {
            Some(current) if current == tab => {
                // Chrome showing the tab a click opened: part of that click.
                if let Some(last) = self.calls.last_mut().filter(|last| last.opened_tab == Some(tab)) {
                    last.absorb(id);
                }
            }
            Some(current) => {
                let ordinal = self.ordinal(tab);
                let switched = self.push(ToolAction::Switch { tab: ordinal }, None, Some(current), id, vec![id], ts);
                switched.result_tab = Some(tab);
                self.current_tab = Some(tab);
            }
            None => {
                self.arrive_at(tab);
                if let Some(last) =
                    self.calls.last_mut().filter(|last| matches!(last.call.action, ToolAction::Close { .. }))
                {
                    last.absorb(id);
                }
            }
        }
    }

    fn on_tab_removed(&mut self, id: u64, ts: f64, tab: i64) {
        // A page closing itself right after a click in it (a popup's "Done").
        if let Some(last) = self.calls.last_mut()
            && last.tab_id == Some(tab)
            && matches!(last.call.action, ToolAction::Click { .. })
            && ts - last.last_person_ts <= QUICK_EFFECT_WINDOW_MS
        {
            last.absorb(id);
            last.result_tab = None;
        } else {
            let ordinal = self.ordinal(tab);
            let closed = self.push(ToolAction::Close { tab: ordinal }, None, Some(tab), id, vec![id], ts);
            closed.call.url_after = None;
            closed.result_tab = None;
        }
        if self.current_tab == Some(tab) {
            self.current_tab = None;
        } else if let Some(last) = self.calls.last_mut().filter(|last| last.result_tab.is_none()) {
            // A background tab closed: the person stays where they were.
            last.result_tab = self.current_tab;
        }
    }

    pub(super) fn finish(mut self, task_id: TaskId, answer: Option<&str>) -> Derived {
        self.close_last();
        let done_tab = self.current_tab;
        let done_ordinal = done_tab.map(|tab| self.ordinal(tab));
        let final_url = self.url_of(done_tab);
        let last_ts = self.last_ts;

        // A call's capture comes before the next call's first event, and before it began: a run of typing
        // is recorded at its end, but began (its time) before the captures taken while it went on.
        let ends: Vec<(u64, f64)> = self
            .calls
            .iter()
            .skip(1)
            .map(|call| (call.first_event_id, call.call.ts))
            .chain([(u64::MAX, f64::INFINITY)])
            .collect();
        for (call, (end, end_ts)) in self.calls.iter_mut().zip(ends) {
            // A switch changes nothing on the page, and a call the derivation added has no events of its own:
            // both show the tab as it last was.
            let as_it_was = matches!(call.call.action, ToolAction::Switch { .. }) || call.call.event_ids.is_empty();
            let (screenshot, dom) = if as_it_was {
                (
                    latest_capture(&self.captures, call.result_tab, CaptureKind::Screenshot, end),
                    latest_capture(&self.captures, call.result_tab, CaptureKind::Dom, end),
                )
            } else {
                let start = call.last_event_id().unwrap_or(call.first_event_id);
                let window = CaptureWindow {
                    first: call.first_event_id,
                    start,
                    acted_until: call.call.end_ts.unwrap_or(call.call.ts),
                    end,
                    end_ts,
                    url: call.call.url_after.as_deref(),
                };
                let chosen = |kind| {
                    tied_capture(&self.captures, call.result_tab, &call.call.event_ids, kind, &window)
                        .or_else(|| capture_after(&self.captures, call.result_tab, kind, &window))
                };
                (chosen(CaptureKind::Screenshot), chosen(CaptureKind::Dom))
            };
            call.call.screenshot = screenshot;
            call.call.dom_snapshot = dom;
        }

        let typed = self.calls.iter_mut().filter_map(|pending| {
            let secret = pending.secret.take()?;
            Some((&mut pending.call, secret))
        });
        let (credentials, scrubs) = register_secrets(typed);
        let mut tool_calls: Vec<ToolCall> = self.calls.into_iter().map(|pending| pending.call).collect();
        tool_calls.push(ToolCall {
            action: ToolAction::Done { text: answer.unwrap_or_default().to_owned(), success: true },
            target: None,
            tab: done_ordinal,
            url_before: final_url.clone(),
            url_after: final_url,
            dom_snapshot: latest_capture(&self.captures, done_tab, CaptureKind::Dom, u64::MAX),
            screenshot: latest_capture(&self.captures, done_tab, CaptureKind::Screenshot, u64::MAX),
            event_ids: Vec::new(),
            ts: last_ts,
            end_ts: None,
            typing_ts: None,
        });
        if !scrubs.is_empty() {
            for call in &mut tool_calls {
                scrub(call, &scrubs);
            }
        }
        Derived { trajectory: Trajectory { task_id, tool_calls }, credentials }
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::trajectory::test_recording::*;

    #[test]
    fn a_typed_navigation_is_navigate_and_the_link_a_click_followed_is_its_url_after() {
        let mut rec = Recording::default();
        rec.navigation(TAB, "/", NavigationCause::Typed);
        let clicked = rec.action(TAB, click("#products"));
        let followed = rec.navigation(TAB, "/products", NavigationCause::Link);
        let derived = rec.derive();
        assert_eq!(calls(&derived), [r#"navigate {"url":"https://shop.test/"}"#, r#"click {} #products"#]);
        let click = call(&derived, 1);
        assert_eq!(click.url_before.as_deref(), Some("https://shop.test/"));
        assert_eq!(click.url_after.as_deref(), Some("https://shop.test/products"));
        assert_eq!(click.event_ids, [clicked, followed]);
    }

    #[test]
    fn the_blank_page_a_task_starts_on_is_no_step() {
        let mut rec = Recording::default();
        let blank = Navigation { url: "about:blank".into(), cause: NavigationCause::Link, main_frame: true };
        rec.add(Some(TAB), EventKind::Navigation(blank));
        rec.navigation(TAB, "/", NavigationCause::Typed);
        assert_eq!(calls(&rec.derive())[0], r#"navigate {"url":"https://shop.test/"}"#);
    }

    #[test]
    fn a_navigation_long_after_a_click_or_typed_is_a_navigate_of_its_own() {
        let mut rec = Recording::default();
        rec.navigation(TAB, "/", NavigationCause::Typed);
        rec.action(TAB, click("#nothing"));
        rec.wait(EFFECT_WINDOW_MS).navigation(TAB, "/late", NavigationCause::Link);
        rec.action(TAB, click("#again"));
        rec.navigation(TAB, "/typed", NavigationCause::Typed);
        let derived = rec.derive();
        assert_eq!(
            calls(&derived),
            [
                r#"navigate {"url":"https://shop.test/"}"#,
                r#"click {} #nothing"#,
                r#"navigate {"url":"https://shop.test/late"}"#,
                r#"click {} #again"#,
                r#"navigate {"url":"https://shop.test/typed"}"#,
            ]
        );
        assert_eq!(call(&derived, 1).url_after.as_deref(), Some("https://shop.test/"));
    }

    #[test]
    fn a_server_redirected_typed_url_navigates_to_what_was_typed_and_ends_where_it_went() {
        let mut rec = Recording::default();
        rec.document_request(TAB, "A", "/deals");
        let typed = rec.navigation(TAB, "/sale", NavigationCause::Typed);
        // The redirect's hop is committed after the navigation, as the recorder holds hops until complete.
        rec.document_request(TAB, "A", "/sale");
        let derived = rec.derive();
        assert_eq!(calls(&derived), [r#"navigate {"url":"https://shop.test/deals"}"#]);
        assert_eq!(call(&derived, 0).url_after.as_deref(), Some("https://shop.test/sale"));
        assert_eq!(call(&derived, 0).event_ids, [typed]);
    }

    #[test]
    fn a_redirect_before_the_first_document_is_the_main_frames_though_it_carries_a_frame_id() {
        // The dashboard asked for at the start sent the person to log in; older recordings name the main
        // frame on the hop before its first document committed.
        let mut rec = Recording::default();
        let first_hop = rec.document_request(TAB, "A", "/admin/");
        rec.events[first_hop as usize].event.frame_id = Some("MAIN".to_owned());
        rec.navigation(TAB, "/admin/login/?next=/admin/", NavigationCause::Typed);
        rec.document_request(TAB, "A", "/admin/login/?next=/admin/");
        // An iframe's redirected document is not the tab's.
        let frame_hop = rec.document_request(TAB, "B", "/widget");
        rec.events[frame_hop as usize].event.frame_id = Some("CHILD".to_owned());
        let derived = rec.derive();
        assert_eq!(calls(&derived), [r#"navigate {"url":"https://shop.test/admin/"}"#]);
        assert_eq!(call(&derived, 0).url_after.as_deref(), Some("https://shop.test/admin/login/?next=/admin/"));
    }

    #[test]
    fn a_click_on_an_option_is_part_of_the_choice_the_browser_reported_before_it() {
        let option = |selector: &str, modifiers: &[&str]| Action {
            modifiers: modifiers.iter().map(|m| m.to_string()).collect(),
            ..action(ActionKind::Click, Some(element(selector, "option", None)))
        };
        let mut rec = Recording::default();
        rec.navigation(TAB, "/group", NavigationCause::Typed);
        let list = element("#permissions", "select", None);
        rec.action(TAB, change(list.clone(), "view user"));
        rec.action(TAB, option("option:nth-of-type(1)", &[]));
        rec.wait(1_500.0).action(TAB, change(list, "view user, view group"));
        rec.action(TAB, option("option:nth-of-type(2)", &["Control"]));
        rec.wait(1_500.0).action(TAB, click("#add"));
        let derived = rec.derive();
        assert_eq!(
            calls(&derived),
            [
                r#"navigate {"url":"https://shop.test/group"}"#,
                // Successive choices in one list are its final selection.
                r#"select_dropdown {"option":"view user, view group"} #permissions"#,
                "click {} #add",
            ]
        );
    }

    #[test]
    fn a_page_that_rewrites_its_own_url_moves_the_url_after_and_routes_are_a_clicks_effect() {
        let mut rec = Recording::default();
        rec.navigation(TAB, "/app?token=t0k3n", NavigationCause::Typed);
        rec.navigation(TAB, "/app", NavigationCause::Script);
        rec.wait(2_000.0).action(TAB, click("#inbox"));
        rec.navigation(TAB, "/app/inbox", NavigationCause::Script);
        let derived = rec.derive();
        assert_eq!(calls(&derived).len(), 2, "{:?}", calls(&derived));
        assert_eq!(call(&derived, 0).url_after.as_deref(), Some("https://shop.test/app"));
        assert_eq!(call(&derived, 1).url_after.as_deref(), Some("https://shop.test/app/inbox"));
    }

    #[test]
    fn a_form_the_server_answers_slowly_still_leads_where_its_click_did() {
        let mut rec = Recording::default();
        rec.navigation(TAB, "/notes/2/edit", NavigationCause::Typed);
        rec.wait(1_000.0).action(TAB, click("#save"));
        rec.document_request(TAB, "save", "/notes/2");
        // The server takes longer than the effect window, then redirects.
        rec.wait(EFFECT_WINDOW_MS + 1_000.0).document_request(TAB, "save", "/notes?saved=2");
        rec.navigation(TAB, "/notes?saved=2", NavigationCause::FormSubmit);
        let derived = rec.derive();
        assert_eq!(calls(&derived), [r#"navigate {"url":"https://shop.test/notes/2/edit"}"#, "click {} #save"]);
        assert_eq!(call(&derived, 1).url_after.as_deref(), Some("https://shop.test/notes?saved=2"));

        // A navigation asked for as late is no call's effect: the person went there.
        let mut rec = Recording::default();
        rec.navigation(TAB, "/notes/2/edit", NavigationCause::Typed);
        rec.wait(1_000.0).action(TAB, click("#save"));
        rec.wait(EFFECT_WINDOW_MS + 1_000.0).document_request(TAB, "later", "/notes");
        rec.navigation(TAB, "/notes", NavigationCause::Link);
        assert_eq!(calls(&rec.derive())[2], r#"navigate {"url":"https://shop.test/notes"}"#);
    }

    #[test]
    fn a_client_redirect_moves_the_url_after_and_is_otherwise_no_call() {
        let mut rec = Recording::default();
        rec.navigation(TAB, "/old", NavigationCause::Typed);
        let redirected = rec.navigation(TAB, "/new", NavigationCause::Redirect);
        rec.wait(EFFECT_WINDOW_MS).navigation(TAB, "/refreshed", NavigationCause::Redirect);
        let derived = rec.derive();
        assert_eq!(calls(&derived), [r#"navigate {"url":"https://shop.test/old"}"#]);
        assert!(call(&derived, 0).event_ids.contains(&redirected));
        // The page's own later redirect is where the person ended up.
        assert_eq!(call(&derived, 1).url_after.as_deref(), Some("https://shop.test/refreshed"));
    }

    #[test]
    fn typing_runs_in_one_field_merge_and_take_the_click_that_focused_it() {
        let mut rec = Recording::default();
        rec.navigation(TAB, "/", NavigationCause::Typed);
        let focus = rec.action(TAB, click("#q"));
        let first = rec.action(TAB, typing("#q", "blu"));
        let second = rec.action(TAB, typing("#q", "blue mug"));
        rec.action(TAB, typing("#other", "x"));
        let derived = rec.derive();
        assert_eq!(
            calls(&derived),
            [
                r#"navigate {"url":"https://shop.test/"}"#,
                r#"input {"text":"blue mug"} #q"#,
                r#"input {"text":"x"} #other"#
            ]
        );
        assert_eq!(call(&derived, 1).event_ids, [focus, first, second]);
    }

    #[test]
    fn what_the_page_did_by_itself_is_neither_a_call_nor_a_credential() {
        let mut rec = Recording::default();
        rec.navigation(TAB, "/login", NavigationCause::Typed);
        // The page's script inserts a word into the password field and submits the form itself.
        let mut forged = typing("#pw", "account");
        forged.credential = true;
        forged.page_made = true;
        rec.action(TAB, forged);
        rec.action(
            TAB,
            Action { page_made: true, ..action(ActionKind::Submit, Some(element("#login", "form", None))) },
        );
        rec.action(
            TAB,
            Action { page_made: true, delta_y: Some(400.0), delta_x: Some(0.0), ..action(ActionKind::Scroll, None) },
        );
        // The person then types into the search field.
        rec.action(TAB, typing("#q", "mug"));
        let derived = rec.derive();
        assert_eq!(calls(&derived), [r#"navigate {"url":"https://shop.test/login"}"#, r#"input {"text":"mug"} #q"#]);
        assert!(derived.credentials.is_empty(), "{:?}", derived.credentials);
    }

    #[test]
    fn a_submit_is_part_of_the_click_or_enter_before_it_and_stays_a_call_alone() {
        let mut rec = Recording::default();
        rec.navigation(TAB, "/", NavigationCause::Typed);
        let form = element("#search", "form", None);
        let clicked = rec.action(TAB, click("#go"));
        let submitted = rec.action(TAB, action(ActionKind::Submit, Some(form.clone())));
        rec.action(TAB, typing("#q", "mug"));
        let enter = rec.action(TAB, key("Enter", &[]));
        let submitted_by_enter = rec.action(TAB, action(ActionKind::Submit, Some(form.clone())));
        rec.wait(QUICK_EFFECT_WINDOW_MS).action(TAB, action(ActionKind::Submit, Some(form)));
        let derived = rec.derive();
        assert_eq!(
            calls(&derived),
            [
                r#"navigate {"url":"https://shop.test/"}"#,
                r#"click {} #go"#,
                r#"input {"text":"mug"} #q"#,
                r#"send_keys {"keys":"Enter"}"#,
                r#"submit {} #search"#,
            ]
        );
        assert_eq!(call(&derived, 1).event_ids, [clicked, submitted]);
        assert_eq!(call(&derived, 3).event_ids, [enter, submitted_by_enter]);
    }

    #[test]
    fn a_checkbox_change_is_part_of_its_click_or_its_labels_and_a_click_without_one() {
        let mut rec = Recording::default();
        rec.navigation(TAB, "/", NavigationCause::Typed);
        let checkbox = element("#wrap", "input", Some("checkbox"));
        let clicked = rec.action(TAB, action(ActionKind::Click, Some(checkbox.clone())));
        let changed = rec.action(TAB, change(checkbox.clone(), "true"));
        rec.action(TAB, action(ActionKind::Click, Some(element("#wrap-label", "label", None))));
        rec.action(TAB, change(checkbox.clone(), "false"));
        let by_keyboard = rec.action(TAB, change(checkbox, "true"));
        let derived = rec.derive();
        assert_eq!(
            calls(&derived),
            [
                r#"navigate {"url":"https://shop.test/"}"#,
                r#"click {} #wrap"#,
                r#"click {} #wrap-label"#,
                r#"click {} #wrap"#
            ]
        );
        assert_eq!(call(&derived, 1).event_ids, [clicked, changed]);
        assert_eq!(call(&derived, 3).event_ids, [by_keyboard]);
    }

    #[test]
    fn a_select_change_is_select_dropdown_with_the_click_that_opened_it() {
        let mut rec = Recording::default();
        rec.navigation(TAB, "/", NavigationCause::Typed);
        let select = element("#ship", "select", None);
        let opened = rec.action(TAB, action(ActionKind::Click, Some(select.clone())));
        let chosen = rec.action(TAB, change(select.clone(), "Express (next day)"));
        rec.action(TAB, click("#elsewhere"));
        rec.action(TAB, change(select, "Standard"));
        let derived = rec.derive();
        assert_eq!(
            calls(&derived),
            [
                r#"navigate {"url":"https://shop.test/"}"#,
                r#"select_dropdown {"option":"Express (next day)"} #ship"#,
                r#"click {} #elsewhere"#,
                r#"select_dropdown {"option":"Standard"} #ship"#,
            ]
        );
        assert_eq!(call(&derived, 1).event_ids, [opened, chosen]);
    }

    #[test]
    fn a_double_click_takes_its_two_clicks_and_is_a_click_counted_twice() {
        let mut rec = Recording::default();
        rec.navigation(TAB, "/", NavigationCause::Typed);
        let ids = [
            rec.action(TAB, click("#word")),
            rec.action(TAB, click("#word")),
            rec.action(TAB, action(ActionKind::DoubleClick, Some(element("#word", "button", None)))),
        ];
        rec.action(TAB, click("#word"));
        let derived = rec.derive();
        assert_eq!(
            calls(&derived),
            [r#"navigate {"url":"https://shop.test/"}"#, r#"click {"count":2} #word"#, r#"click {} #word"#]
        );
        assert_eq!(call(&derived, 1).event_ids, ids);
    }

    #[test]
    fn key_presses_are_send_keys_with_their_modifiers() {
        let mut rec = Recording::default();
        rec.navigation(TAB, "/", NavigationCause::Typed);
        rec.action(TAB, key("a", &["Control"]));
        rec.action(TAB, key("Tab", &["Shift"]));
        rec.action(TAB, key("Escape", &[]));
        let derived = rec.derive();
        assert_eq!(
            calls(&derived)[1..],
            [
                r#"send_keys {"keys":"Control+a"}"#,
                r#"send_keys {"keys":"Shift+Tab"}"#,
                r#"send_keys {"keys":"Escape"}"#
            ]
        );
    }

    #[test]
    fn a_number_typed_after_select_all_is_typing_but_one_moved_by_arrows_is_the_keys() {
        let field = || element("#qty", "input", Some("number"));
        let typed = |value: &str| Action { value: Some(value.to_owned()), ..action(ActionKind::Input, Some(field())) };
        let mut rec = Recording::default();
        rec.navigation(TAB, "/", NavigationCause::Typed);
        rec.action(TAB, Action { target: Some(field()), ..key("a", &["Control"]) });
        rec.action(TAB, typed("2"));
        rec.action(TAB, Action { target: Some(field()), ..key("ArrowUp", &[]) });
        rec.action(TAB, typed("3"));
        let derived = rec.derive();
        assert_eq!(
            calls(&derived)[1..],
            [
                r#"send_keys {"keys":"Control+a"} #qty"#,
                r#"input {"text":"2"} #qty"#,
                r#"send_keys {"keys":"ArrowUp"} #qty"#
            ]
        );
    }

    #[test]
    fn back_and_forward_are_told_apart_by_the_tabs_history() {
        let mut rec = Recording::default();
        rec.navigation(TAB, "/a", NavigationCause::Typed);
        rec.navigation(TAB, "/b", NavigationCause::Typed);
        rec.navigation(TAB, "/c", NavigationCause::Typed);
        rec.navigation(TAB, "/b", NavigationCause::BackForward);
        rec.navigation(TAB, "/c", NavigationCause::BackForward);
        // Two entries back at once (the back button's menu): two go_back calls.
        rec.navigation(TAB, "/a", NavigationCause::BackForward);
        // A URL the history never saw: only a navigate gets there for sure.
        rec.navigation(TAB, "/elsewhere", NavigationCause::BackForward);
        let derived = rec.derive();
        assert_eq!(
            calls(&derived)[3..],
            [
                "go_back {}",
                "go_forward {}",
                "go_back {}",
                "go_back {}",
                r#"navigate {"url":"https://shop.test/elsewhere"}"#
            ]
        );
        assert_eq!(call(&derived, 3).url_after.as_deref(), Some("https://shop.test/b"));
        assert_eq!(call(&derived, 6).url_before.as_deref(), Some("https://shop.test/b"));
        assert_eq!(call(&derived, 6).url_after.as_deref(), Some("https://shop.test/a"));
    }

    #[test]
    fn a_reload_is_a_navigate_to_the_same_url_unless_a_click_did_it() {
        let mut rec = Recording::default();
        rec.navigation(TAB, "/", NavigationCause::Typed);
        rec.wait(2_000.0).navigation(TAB, "/", NavigationCause::Reload);
        rec.wait(2_000.0).action(TAB, click("#refresh"));
        let reloaded_by_page = rec.navigation(TAB, "/", NavigationCause::Reload);
        let derived = rec.derive();
        assert_eq!(
            calls(&derived),
            [
                r#"navigate {"url":"https://shop.test/"}"#,
                r#"navigate {"url":"https://shop.test/"}"#,
                "click {} #refresh"
            ]
        );
        assert!(call(&derived, 2).event_ids.contains(&reloaded_by_page));
    }

    #[test]
    fn activating_another_tab_is_a_switch_and_removing_one_a_close() {
        let mut rec = Recording::default();
        rec.navigation(TAB, "/", NavigationCause::Typed);
        rec.action(TAB, click("#open"));
        rec.tab(OTHER_TAB, TabOp::Created, Some(TAB));
        rec.navigation(OTHER_TAB, "/help", NavigationCause::Link);
        let shown = rec.tab(OTHER_TAB, TabOp::Activated, None);
        let back = rec.wait(1_000.0).tab(TAB, TabOp::Activated, None);
        rec.tab(TAB, TabOp::Activated, None);
        let closed = rec.tab(OTHER_TAB, TabOp::Removed, None);
        let derived = rec.derive();
        assert_eq!(
            calls(&derived),
            [r#"navigate {"url":"https://shop.test/"}"#, "click {} #open", r#"switch {"tab":0}"#, r#"close {"tab":1}"#]
        );
        assert!(call(&derived, 1).event_ids.contains(&shown), "Chrome showing the new tab is the click's effect");
        assert_eq!(call(&derived, 1).url_after.as_deref(), Some("https://shop.test/help"));
        assert_eq!(call(&derived, 2).event_ids, [back]);
        assert_eq!(call(&derived, 2).url_before.as_deref(), Some("https://shop.test/help"));
        assert_eq!(call(&derived, 2).url_after.as_deref(), Some("https://shop.test/"));
        assert_eq!(call(&derived, 3).event_ids, [closed]);
        assert_eq!(call(&derived, 4).tab, Some(0), "done happens where the person is");
    }

    #[test]
    fn a_tab_a_click_opened_takes_its_first_load_and_the_recorders_reload() {
        let mut rec = Recording::default();
        rec.navigation(TAB, "/", NavigationCause::Typed);
        let clicked = rec.action(TAB, click("#help"));
        let created = rec.tab(OTHER_TAB, TabOp::Created, Some(TAB));
        let loaded = rec.navigation(OTHER_TAB, "/help", NavigationCause::Link);
        let reloaded = rec.navigation(OTHER_TAB, "/help", NavigationCause::Reload);
        let (shot, dom) = rec.capture(OTHER_TAB, "load");
        rec.action(OTHER_TAB, click("#faq"));
        let derived = rec.derive();
        assert_eq!(calls(&derived), [r#"navigate {"url":"https://shop.test/"}"#, "click {} #help", "click {} #faq"]);
        let opening = call(&derived, 1);
        assert_eq!(opening.event_ids, [clicked, created, loaded, reloaded]);
        assert_eq!(opening.url_after.as_deref(), Some("https://shop.test/help"));
        assert_eq!((opening.screenshot.as_ref(), opening.dom_snapshot.as_ref()), (Some(&shot), Some(&dom)));
        assert_eq!(call(&derived, 2).tab, Some(1));
    }

    #[test]
    fn a_tab_opened_in_the_background_is_switched_to_when_the_person_acts_there() {
        let mut rec = Recording::default();
        rec.navigation(TAB, "/", NavigationCause::Typed);
        rec.action(TAB, Action { modifiers: vec!["Control".to_owned()], ..click("#help") });
        rec.tab(OTHER_TAB, TabOp::Created, Some(TAB));
        rec.navigation(OTHER_TAB, "/help", NavigationCause::Link);
        rec.action(TAB, click("#stay"));
        rec.action(OTHER_TAB, click("#faq"));
        let derived = rec.derive();
        assert_eq!(
            calls(&derived),
            [
                r#"navigate {"url":"https://shop.test/"}"#,
                r#"click {"modifiers":["Control"]} #help"#,
                "click {} #stay",
                r#"switch {"tab":1}"#,
                "click {} #faq",
            ]
        );
        assert_eq!(call(&derived, 1).url_after.as_deref(), Some("https://shop.test/"));
        assert!(call(&derived, 3).event_ids.is_empty(), "a switch the derivation added has no events");
        assert_eq!(call(&derived, 3).url_after.as_deref(), Some("https://shop.test/help"));
    }

    #[test]
    fn scrolls_carry_their_pixels_and_a_burst_on_one_container_adds_up() {
        let mut rec = Recording::default();
        rec.navigation(TAB, "/", NavigationCause::Typed);
        let scroll = |dy: f64| Action { delta_x: Some(0.0), delta_y: Some(dy), ..action(ActionKind::Scroll, None) };
        rec.action(TAB, scroll(300.0));
        rec.action(TAB, scroll(200.0));
        rec.action(TAB, Action { target: Some(element("#list", "div", None)), ..scroll(-50.0) });
        let derived = rec.derive();
        assert_eq!(
            calls(&derived)[1..],
            [
                r#"scroll {"delta_x":0.0,"delta_y":500.0,"down":true}"#,
                r#"scroll {"delta_x":0.0,"delta_y":-50.0,"down":false} #list"#,
            ]
        );
    }

    #[test]
    fn a_recording_of_an_open_page_starts_with_a_navigate_to_it() {
        let mut rec = Recording::default();
        let (shot, _) = rec.capture(TAB, "load");
        rec.action(TAB, click("#a"));
        let derived = rec.derive();
        assert_eq!(calls(&derived), [r#"navigate {"url":"https://shop.test/"}"#, "click {} #a"]);
        assert!(call(&derived, 0).event_ids.is_empty());
        assert_eq!(call(&derived, 0).screenshot, Some(shot));
    }

    #[test]
    fn a_call_says_when_it_ended_and_when_the_typing_its_click_began_started() {
        let mut rec = Recording::default();
        rec.navigation(TAB, "/docs", NavigationCause::Typed);
        let clicked = rec.action(TAB, click("#search"));
        let click_ts = rec.events[clicked as usize].event.ts;
        // The person waited 1.5 s after the click (what the focus loads arrives meanwhile), then typed for
        // 0.8 s: the recorder holds the run's first key as its time and its last change as `until_ts`.
        let first_key = click_ts + 1_500.0;
        rec.now = first_key - 100.0;
        rec.action(TAB, Action { until_ts: Some(first_key + 800.0), ..typing("#search", "HashMap") });
        rec.wait(2_000.0).action(TAB, key("Enter", &[]));
        let derived = rec.derive();
        assert_eq!(calls(&derived)[1], r#"input {"text":"HashMap"} #search"#);
        let typed = call(&derived, 1);
        assert_eq!((typed.ts, typed.typing_ts, typed.end_ts), (click_ts, Some(first_key), Some(first_key + 800.0)));
        // A key is over when it is pressed; typing with no click before it starts with its first key.
        let enter = call(&derived, 2);
        assert_eq!((enter.typing_ts, enter.end_ts), (None, Some(enter.ts)));

        let mut rec = Recording::default();
        rec.navigation(TAB, "/docs", NavigationCause::Typed);
        rec.action(TAB, typing("#q", "mug"));
        let derived = rec.derive();
        assert_eq!(call(&derived, 1).typing_ts, None);
    }

    /// Issue #43: tabs that switch on the press navigate before the click is reported.
    #[test]
    fn a_navigation_the_press_of_a_click_started_is_the_clicks_effect() {
        let mut rec = Recording::default();
        rec.navigation(TAB, "/app", NavigationCause::Typed);
        rec.action(TAB, click("#search"));
        rec.wait(1_500.0);
        let pressed_ts = rec.now + 95.0;
        rec.navigation(TAB, "/app#/settings", NavigationCause::Script);
        rec.action(TAB, Action { pressed_ts: Some(pressed_ts), ..click("#settings-tab") });
        let derived = rec.derive();
        assert_eq!(calls(&derived)[1..], ["click {} #search", "click {} #settings-tab"]);
        let (search, tab) = (call(&derived, 1), call(&derived, 2));
        assert_eq!(search.url_after.as_deref(), Some("https://shop.test/app"));
        assert_eq!(tab.url_before.as_deref(), Some("https://shop.test/app"));
        assert_eq!(tab.url_after.as_deref(), Some("https://shop.test/app#/settings"));
        assert!(!search.event_ids.iter().any(|id| tab.event_ids.contains(id)));

        // A link followed on the press, long after anything else: no navigate of its own either.
        let mut rec = Recording::default();
        rec.navigation(TAB, "/app", NavigationCause::Typed);
        rec.wait(9_000.0);
        let pressed_ts = rec.now + 90.0;
        rec.navigation(TAB, "/app/inbox", NavigationCause::Link);
        rec.action(TAB, Action { pressed_ts: Some(pressed_ts), ..click("#inbox") });
        let derived = rec.derive();
        assert_eq!(calls(&derived)[1..], ["click {} #inbox"]);
        assert_eq!(call(&derived, 1).url_after.as_deref(), Some("https://shop.test/app/inbox"));

        // The old rule stands where the press came after the navigation: the earlier click's effect.
        let mut rec = Recording::default();
        rec.navigation(TAB, "/app", NavigationCause::Typed);
        rec.action(TAB, click("#search"));
        rec.navigation(TAB, "/app#/results", NavigationCause::Script);
        let pressed_ts = rec.now + 50.0;
        rec.wait(1_000.0).action(TAB, Action { pressed_ts: Some(pressed_ts), ..click("#first") });
        let derived = rec.derive();
        assert_eq!(call(&derived, 1).url_after.as_deref(), Some("https://shop.test/app#/results"));
        assert_eq!(call(&derived, 2).url_before.as_deref(), Some("https://shop.test/app#/results"));
    }

    /// Issue #44: a node dragged from a palette onto a canvas is one drag, from the node to the canvas.
    #[test]
    fn a_drag_is_one_call_from_the_element_pressed_to_the_element_dropped_onto() {
        let mut rec = Recording::default();
        rec.navigation(TAB, "/editor", NavigationCause::Typed);
        let canvas = element("#chart", "svg", None);
        rec.action(
            TAB,
            Action {
                x: Some(40.0),
                y: Some(120.0),
                to_x: Some(300.0),
                to_y: Some(160.0),
                moves: Some(14),
                drop_target: Some(canvas.clone()),
                ..action(ActionKind::Drag, Some(element("li.palette-node", "div", None)))
            },
        );
        rec.action(TAB, click("#deploy"));
        let derived = rec.derive();
        assert_eq!(
            calls(&derived)[1..],
            [
                r##"drag_drop {"coord_source_x":40.0,"coord_source_y":120.0,"coord_target_x":300.0,"coord_target_y":160.0,"element_target":{"id":"chart","selector":"#chart","tag":"svg","xpath":"//svg[@id='chart']"},"steps":14} li.palette-node"##,
                "click {} #deploy"
            ]
        );
        assert!(crate::judge::step_in_words(call(&derived, 1)).starts_with("drag onto #chart (svg)"));
    }
}
