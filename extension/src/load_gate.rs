//! Keeps the recorder's own work off a loading page: while a recorded tab's page loads, the reading of its
//! finished responses' bodies waits, and goes all at once when the load is over.
//!
//! Measured on the demo shop, reading each body as its loading finished competed with the page for the
//! machine. Nothing is lost by waiting: Chrome keeps the bodies for DevTools (durable messages) until they
//! are read. A load that never ends (a request that hangs) holds nothing longer than [`LONGEST_HOLD_MS`].
//! The exchanges' events are not held: their order is the recording's order, and a page's requests must
//! not come after the navigation that followed them.
//!
//! Pure state: the recorder tells it when loads start and end and what to hold; no browser needed to test it.

use std::collections::HashMap;

/// Longest a load may hold its tab's body reads back.
pub const LONGEST_HOLD_MS: f64 = 5_000.0;

/// What one tab's load holds back.
#[derive(Debug)]
struct Held<B> {
    started_ms: f64,
    bodies: Vec<B>,
}

/// The tabs whose page is loading, and the bodies each holds back. `B` names a body to read.
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
    pub fn load_started(&mut self, tab_id: i64, now_ms: f64) -> Vec<B> {
        let previous = self.load_ended(tab_id);
        self.loading.insert(tab_id, Held { started_ms: now_ms, bodies: Vec::new() });
        previous
    }

    /// A tab's page has loaded (or the tab is gone, or the recording stops): the bodies it held, in order.
    pub fn load_ended(&mut self, tab_id: i64) -> Vec<B> {
        self.loading.remove(&tab_id).map(|held| held.bodies).unwrap_or_default()
    }

    /// Every tab's held bodies (the recording stops).
    pub fn release_all(&mut self) -> Vec<B> {
        self.loading.drain().flat_map(|(_, held)| held.bodies).collect()
    }

    /// Holds the reading of a body while its tab's page loads (nothing comes back). Otherwise it is to be
    /// read now, after whatever an overdue load still held.
    pub fn hold_body(&mut self, tab_id: i64, body: B, now_ms: f64) -> Vec<B> {
        match self.loading.get_mut(&tab_id) {
            Some(held) if now_ms < held.started_ms + LONGEST_HOLD_MS => {
                held.bodies.push(body);
                Vec::new()
            }
            _ => {
                let mut due = self.load_ended(tab_id);
                due.push(body);
                due
            }
        }
    }

    /// Releases a tab's load that has held for [`LONGEST_HOLD_MS`] (a timer's check).
    pub fn release_overdue(&mut self, tab_id: i64, now_ms: f64) -> Vec<B> {
        match self.loading.get(&tab_id) {
            Some(held) if now_ms >= held.started_ms + LONGEST_HOLD_MS => self.load_ended(tab_id),
            _ => Vec::new(),
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn a_loading_tab_holds_its_body_reads_until_its_load_ends_and_then_gives_them_in_order() {
        let mut gate = LoadGate::default();
        assert!(gate.load_started(1, 0.0).is_empty());
        assert!(gate.hold_body(1, "body a", 11.0).is_empty());
        assert!(gate.hold_body(1, "body b", 13.0).is_empty());
        // Another tab, not loading, is not held up.
        assert_eq!(gate.hold_body(2, "other tab", 14.0), ["other tab"]);
        assert_eq!(gate.load_ended(1), ["body a", "body b"]);
        // Loaded, the tab's bodies are read at once.
        assert_eq!(gate.hold_body(1, "later", 20.0), ["later"]);
        assert!(gate.load_ended(1).is_empty());
    }

    #[test]
    fn a_load_that_never_ends_holds_nothing_past_its_deadline_and_what_it_held_goes_first() {
        let mut gate = LoadGate::default();
        gate.load_started(1, 1_000.0);
        assert!(gate.hold_body(1, "early", 1_100.0).is_empty());
        assert!(gate.release_overdue(1, 1_000.0 + LONGEST_HOLD_MS - 1.0).is_empty());
        assert_eq!(gate.hold_body(1, "late", 1_000.0 + LONGEST_HOLD_MS), ["early", "late"]);
        assert!(gate.release_overdue(1, 1_000.0 + LONGEST_HOLD_MS).is_empty(), "nothing is held twice");

        gate.load_started(1, 10_000.0);
        gate.hold_body(1, "stuck", 10_001.0);
        assert_eq!(gate.release_overdue(1, 10_000.0 + LONGEST_HOLD_MS), ["stuck"]);
    }

    #[test]
    fn a_new_load_releases_what_the_previous_one_held_and_stopping_releases_every_tab() {
        let mut gate = LoadGate::default();
        gate.load_started(1, 0.0);
        gate.hold_body(1, "first page", 1.0);
        assert_eq!(gate.load_started(1, 2.0), ["first page"]);
        gate.hold_body(1, "second page", 3.0);
        gate.load_started(2, 3.0);
        gate.hold_body(2, "other tab", 4.0);
        let mut all = gate.release_all();
        all.sort();
        assert_eq!(all, ["other tab", "second page"]);
        assert!(gate.release_all().is_empty());
    }
}
