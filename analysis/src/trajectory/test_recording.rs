//! A recording built event by event, and the calls derived from it written as one-line strings: what the
//! tests of every part of the derivation (the builder's rules, captures, credentials) write their cases in.

// What every test of the derivation names, brought in once by its `use test_recording::*`.
pub(crate) use super::{Derived, derive};
pub(crate) use trace_manifest::event::{
    Action, ActionKind, DomSnapshotStored, ElementDescriptor, Event, EventKind, EventRecord, ImageFormat, Navigation,
    NavigationCause, Request, ScreenshotStored, TabEvent, TabOp,
};
use trace_manifest::testing;
pub(crate) use trace_manifest::trajectory::{ToolAction, ToolCall};

pub(crate) const TAB: i64 = 1;
pub(crate) const OTHER_TAB: i64 = 2;
pub(crate) const SITE: &str = "https://shop.test";

/// A recording built event by event, 100 ms apart unless told otherwise.
#[derive(Default)]
pub(crate) struct Recording {
    pub(crate) events: Vec<EventRecord>,
    pub(crate) now: f64,
}

impl Recording {
    pub(crate) fn add(&mut self, tab: Option<i64>, kind: EventKind) -> u64 {
        self.now += 100.0;
        let id = self.events.len() as u64;
        self.events.push(EventRecord { id, event: Event { ts: self.now, tab_id: tab, frame_id: None, kind } });
        id
    }

    pub(crate) fn wait(&mut self, ms: f64) -> &mut Recording {
        self.now += ms;
        self
    }

    pub(crate) fn navigation(&mut self, tab: i64, path: &str, cause: NavigationCause) -> u64 {
        let url = format!("{SITE}{path}");
        self.add(Some(tab), EventKind::Navigation(Navigation { url, cause, main_frame: true }))
    }

    pub(crate) fn action(&mut self, tab: i64, action: Action) -> u64 {
        self.add(Some(tab), EventKind::Action(Box::new(action)))
    }

    pub(crate) fn tab(&mut self, tab: i64, op: TabOp, opener: Option<i64>) -> u64 {
        self.add(Some(tab), EventKind::Tab(TabEvent { op, opener_tab_id: opener, url: None }))
    }

    pub(crate) fn document_request(&mut self, tab: i64, request_id: &str, path: &str) -> u64 {
        let request = Request {
            request_id: request_id.to_owned(),
            url: format!("{SITE}{path}"),
            method: "GET".to_owned(),
            headers: Vec::new(),
            post_data: None,
            resource_type: Some("Document".to_owned()),
        };
        self.add(Some(tab), EventKind::Request(request))
    }

    /// A screenshot and a DOM snapshot, as the recorder takes them.
    pub(crate) fn capture(&mut self, tab: i64, reason: &str) -> (String, String) {
        let url = self
            .events
            .iter()
            .rev()
            .find_map(|record| match &record.event.kind {
                EventKind::Navigation(navigation) if record.event.tab_id == Some(tab) => Some(navigation.url.clone()),
                _ => None,
            })
            .unwrap_or_else(|| SITE.to_owned());
        self.capture_of(tab, reason, &url)
    }

    /// A capture the recorder tied to the action event `action` (its id here).
    pub(crate) fn capture_tied_to(&mut self, tab: i64, action: u64) -> (String, String) {
        let ts = self.events[action as usize].event.ts;
        let (shot, dom) = self.capture(tab, "action");
        for record in self.events.iter_mut().rev().take(2) {
            match &mut record.event.kind {
                EventKind::Screenshot(shot) => shot.after_action_ts = Some(ts),
                EventKind::DomSnapshot(dom) => dom.after_action_ts = Some(ts),
                _ => unreachable!("the capture's two events"),
            }
        }
        (shot, dom)
    }

    /// A screenshot and a DOM snapshot of the document at `url`.
    pub(crate) fn capture_of(&mut self, tab: i64, reason: &str, url: &str) -> (String, String) {
        let shot = format!("screenshots/{:06}.png", self.events.len());
        let kind = ScreenshotStored {
            file: shot.clone(),
            format: ImageFormat::Png,
            reason: reason.to_owned(),
            viewport: None,
            after_action_ts: None,
        };
        self.add(Some(tab), EventKind::Screenshot(kind));
        let dom = format!("dom/{:06}.html", self.events.len());
        let kind = DomSnapshotStored {
            url: url.to_owned(),
            reason: reason.to_owned(),
            file: dom.clone(),
            accessibility_file: None,
            after_action_ts: None,
        };
        self.add(Some(tab), EventKind::DomSnapshot(kind));
        (shot, dom)
    }

    pub(crate) fn derive(&self) -> Derived {
        derive("t".parse().unwrap(), &self.events, None)
    }
}

pub(crate) fn element(selector: &str, tag: &str, input_type: Option<&str>) -> ElementDescriptor {
    ElementDescriptor { input_type: input_type.map(str::to_owned), ..testing::element(selector, tag) }
}

pub(crate) fn action(kind: ActionKind, target: Option<ElementDescriptor>) -> Action {
    testing::action(kind, &format!("{SITE}/"), target)
}

pub(crate) fn click(selector: &str) -> Action {
    action(ActionKind::Click, Some(element(selector, "button", None)))
}

pub(crate) fn typing(selector: &str, value: &str) -> Action {
    Action {
        value: Some(value.to_owned()),
        ..action(ActionKind::Input, Some(element(selector, "input", Some("text"))))
    }
}

pub(crate) fn key(key: &str, modifiers: &[&str]) -> Action {
    Action {
        key: Some(key.to_owned()),
        modifiers: modifiers.iter().map(|m| m.to_string()).collect(),
        ..action(ActionKind::KeyPress, None)
    }
}

pub(crate) fn change(target: ElementDescriptor, value: &str) -> Action {
    Action { value: Some(value.to_owned()), ..action(ActionKind::Change, Some(target)) }
}

/// The calls without the final `done`, as "name params target".
pub(crate) fn calls(derived: &Derived) -> Vec<String> {
    let calls = &derived.trajectory.tool_calls;
    assert_eq!(calls.last().map(|c| c.action.name()), Some("done"));
    calls[..calls.len() - 1]
        .iter()
        .map(|call| {
            let params = serde_json::to_value(&call.action).unwrap()["params"].to_string();
            let target = call.target.as_ref().map_or(String::new(), |t| format!(" {}", t.selector));
            format!("{} {params}{target}", call.action.name())
        })
        .collect()
}

pub(crate) fn call(derived: &Derived, index: usize) -> &ToolCall {
    &derived.trajectory.tool_calls[index]
}
