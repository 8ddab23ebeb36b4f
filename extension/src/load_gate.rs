//! Keeps the recorder's own work off a loading page: while a recorded tab's page loads, its finished
//! exchanges' events and the reading of their bodies wait, and go all at once when the load is over.
//!
//! Measured on the demo shop, reading each body as its loading finished, and sending each exchange to the
//! host as it completed, competed with the page for the machine. Nothing is lost by waiting: Chrome keeps
//! the bodies for DevTools (durable messages) until they are read, and the events keep their times. A load
//! that never ends (a request that hangs) holds nothing longer than [`LONGEST_HOLD_MS`].
//!
//! Pure state: the recorder tells it when loads start and end and what to hold; no browser needed to test it.

use std::collections::HashMap;

use trace_manifest::event::Event;

/// Longest a load may hold its tab's work back.
pub const LONGEST_HOLD_MS: f64 = 5_000.0;

/// What one tab's load holds back.
#[derive(Debug)]
struct Held<B> {
    started_ms: f64,
    events: Vec<Event>,
    bodies: Vec<B>,
}

/// What a tab's load held back, to be done now: send the events, then read the bodies.
#[derive(Debug, PartialEq)]
pub struct Released<B> {
    pub events: Vec<Event>,
    pub bodies: Vec<B>,
}

/// The tabs whose page is loading, and what each holds back. `B` names a body to read.
#[derive(Debug)]
pub struct LoadGate<B> {
    loading: HashMap<i64, Held<B>>,
}

impl<B> Default for LoadGate<B> {
    fn default() -> Self {
        LoadGate { loading: HashMap::new() }
    }
}

impl<B> LoadGate<B> {
    /// A tab's main frame started loading a page. What the previous load still held is released.
    pub fn load_started(&mut self, tab_id: i64, now_ms: f64) -> Option<Released<B>> {
        let previous = self.load_ended(tab_id);
        self.loading.insert(tab_id, Held { started_ms: now_ms, events: Vec::new(), bodies: Vec::new() });
        previous
    }

    /// A tab's page has loaded (or the tab is gone, or the recording stops): what it held, in order.
    pub fn load_ended(&mut self, tab_id: i64) -> Option<Released<B>> {
        let held = self.loading.remove(&tab_id)?;
        Some(Released { events: held.events, bodies: held.bodies })
    }

    /// Every tab's held work (the recording stops).
    pub fn release_all(&mut self) -> Vec<Released<B>> {
        let tabs: Vec<i64> = self.loading.keys().copied().collect();
        tabs.into_iter().filter_map(|tab_id| self.load_ended(tab_id)).collect()
    }

    /// Holds a tab's events while its page loads. Otherwise they are to be sent now, after whatever an
    /// overdue load still held.
    pub fn hold_events(&mut self, tab_id: i64, events: Vec<Event>, now_ms: f64) -> Option<Released<B>> {
        self.hold(tab_id, now_ms, |held| held.events.extend(events))
    }

    /// Holds the reading of a body while its tab's page loads. Otherwise it is to be read now, after
    /// whatever an overdue load still held.
    pub fn hold_body(&mut self, tab_id: i64, body: B, now_ms: f64) -> Option<Released<B>> {
        self.hold(tab_id, now_ms, |held| held.bodies.push(body))
    }

    /// When the tab's current load, if any, stops holding at the latest.
    pub fn deadline(&self, tab_id: i64) -> Option<f64> {
        self.loading.get(&tab_id).map(|held| held.started_ms + LONGEST_HOLD_MS)
    }

    /// Releases a tab's load that has held for [`LONGEST_HOLD_MS`] (a timer's check).
    pub fn release_overdue(&mut self, tab_id: i64, now_ms: f64) -> Option<Released<B>> {
        if self.deadline(tab_id)? > now_ms {
            return None;
        }
        self.load_ended(tab_id)
    }

    /// Adds to what the tab's load holds (`None`), or, when it holds nothing or is overdue, gives back
    /// what it held with the addition at its end.
    fn hold(&mut self, tab_id: i64, now_ms: f64, add: impl FnOnce(&mut Held<B>)) -> Option<Released<B>> {
        let mut held = match self.loading.get_mut(&tab_id) {
            Some(held) if now_ms < held.started_ms + LONGEST_HOLD_MS => {
                add(held);
                return None;
            }
            Some(_) => self.loading.remove(&tab_id).expect("just seen"),
            None => Held { started_ms: now_ms, events: Vec::new(), bodies: Vec::new() },
        };
        add(&mut held);
        Some(Released { events: held.events, bodies: held.bodies })
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use trace_manifest::event::{ConsoleMessage, EventKind};

    fn console(text: &str) -> Event {
        let kind = EventKind::Console(ConsoleMessage { level: "log".into(), text: text.into(), url: None });
        Event { ts: 0.0, tab_id: Some(1), frame_id: None, kind }
    }

    #[test]
    fn a_loading_tab_holds_its_events_and_bodies_until_its_load_ends_and_then_gives_them_in_order() {
        let mut gate = LoadGate::default();
        assert!(gate.load_started(1, 0.0).is_none());
        assert!(gate.hold_events(1, vec![console("a")], 10.0).is_none());
        assert!(gate.hold_body(1, "body a", 11.0).is_none());
        assert!(gate.hold_events(1, vec![console("b")], 12.0).is_none());
        assert!(gate.hold_body(1, "body b", 13.0).is_none());
        // Another tab, not loading, is not held up.
        assert_eq!(gate.hold_body(2, "other tab", 14.0), Some(Released { events: vec![], bodies: vec!["other tab"] }));
        let released = gate.load_ended(1).unwrap();
        assert_eq!(released.events, vec![console("a"), console("b")]);
        assert_eq!(released.bodies, vec!["body a", "body b"]);
        // Loaded, the tab's work goes at once.
        assert_eq!(gate.hold_events(1, vec![console("c")], 20.0).unwrap().events, vec![console("c")]);
        assert!(gate.load_ended(1).is_none());
    }

    #[test]
    fn a_load_that_never_ends_holds_nothing_past_its_deadline_and_what_it_held_goes_first() {
        let mut gate = LoadGate::default();
        gate.load_started(1, 1_000.0);
        assert!(gate.hold_body(1, "early", 1_100.0).is_none());
        assert_eq!(gate.deadline(1), Some(1_000.0 + LONGEST_HOLD_MS));
        assert!(gate.release_overdue(1, 1_000.0 + LONGEST_HOLD_MS - 1.0).is_none());
        let late = gate.hold_body(1, "late", 1_000.0 + LONGEST_HOLD_MS).unwrap();
        assert_eq!(late.bodies, vec!["early", "late"]);
        assert!(gate.release_overdue(1, 1_000.0 + LONGEST_HOLD_MS).is_none(), "nothing is held twice");

        gate.load_started(1, 10_000.0);
        gate.hold_body(1, "stuck", 10_001.0);
        assert_eq!(gate.release_overdue(1, 10_000.0 + LONGEST_HOLD_MS).unwrap().bodies, vec!["stuck"]);
    }

    #[test]
    fn a_new_load_releases_what_the_previous_one_held_and_stopping_releases_every_tab() {
        let mut gate = LoadGate::default();
        gate.load_started(1, 0.0);
        gate.hold_body(1, "first page", 1.0);
        let previous = gate.load_started(1, 2.0).unwrap();
        assert_eq!(previous.bodies, vec!["first page"]);
        gate.hold_body(1, "second page", 3.0);
        gate.load_started(2, 3.0);
        gate.hold_body(2, "other tab", 4.0);
        let mut all: Vec<&str> = gate.release_all().into_iter().flat_map(|r| r.bodies).collect();
        all.sort();
        assert_eq!(all, vec!["other tab", "second page"]);
        assert!(gate.release_all().is_empty());
    }
}
