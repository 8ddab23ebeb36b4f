//! The matcher's memory of the ids replayed pages made themselves (see [`trace_analysis::client_ids`]):
//! which recorded requests carry ids and where, and which of the page's values stand for which recorded
//! ones. Pure, like the matcher that owns it.
//!
//! A replayed request that no recorded request answers exactly, and that carries an id token the recording
//! never sent, is compared with the recorded requests of the same template (same canonical form once ids
//! are replaced by a placeholder). The first of them, unanswered ones first, whose ids differ from the
//! request's only where the request's are new and the recording's are still free, is a [`Proposal`]: pairs
//! of (recorded value, page's value). The caller checks that each recorded value was the page's own (no
//! response before its first request carried it) and then [`PageIds::bind`]s them; from then on every
//! request is read with the page's values replaced by the recorded ones, and responses are given with the
//! recorded values replaced by the page's.

use std::borrow::Cow;
use std::collections::HashMap;

use trace_analysis::canonical::{self, Clocks};
use trace_analysis::client_ids::{Templated, id_tokens, substitute};

/// Request bodies larger than this are not searched for ids: uploads, not session traffic.
const MAX_TEMPLATED_BODY: usize = 64 << 10;

/// Recorded values paired with the page's own, for [`PageIds::bind`].
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Proposal {
    /// The recorded request of the same template.
    pub index: usize,
    /// (recorded value, page's value), each pair once, in the order they appear in the request.
    pub pairs: Vec<(String, String)>,
}

#[derive(Debug, Default)]
pub struct PageIds {
    /// The canonical key of a recorded request's template → the requests with that template, each with its
    /// ids in order.
    templates: HashMap<Vec<u8>, Vec<(usize, Vec<String>)>>,
    /// Every id token the recorded requests carry → the first recorded request that sent it.
    first_sent: HashMap<String, usize>,
    /// The page's value → the recorded value it stands for.
    to_recorded: HashMap<String, String>,
    /// The recorded value → the page's value that stands for it.
    to_live: HashMap<String, String>,
}

/// A request as [`PageIds`] reads it.
pub struct Sent<'a> {
    pub method: &'a str,
    pub url: &'a str,
    pub body: &'a [u8],
    pub content_type: Option<&'a str>,
}

impl PageIds {
    /// Notes recorded request `index` (requests are added in recorded order).
    pub fn add(&mut self, index: usize, request: &Sent<'_>, clocks: &Clocks) {
        if request.body.len() > MAX_TEMPLATED_BODY {
            return;
        }
        let templated = Templated::new(request.url, request.body, clocks);
        if templated.ids.is_empty() {
            return;
        }
        for id in &templated.ids {
            self.first_sent.entry(id.clone()).or_insert(index);
        }
        let key = template_key(request, &templated, clocks);
        self.templates.entry(key).or_default().push((index, templated.ids));
    }

    /// The first recorded request that sent `recorded`.
    pub fn first_sent(&self, recorded: &str) -> Option<usize> {
        self.first_sent.get(recorded).copied()
    }

    /// Whether any of the page's values is bound.
    pub fn is_bound(&self) -> bool {
        !self.to_recorded.is_empty()
    }

    /// `text` as the recording would have sent it: each bound value of the page's replaced by its recorded one.
    pub fn to_recorded<'t>(&self, text: &'t [u8]) -> Cow<'t, [u8]> {
        substitute(text, &self.to_recorded)
    }

    /// `text` as the page expects it: each bound recorded value replaced by the page's own.
    pub fn to_live<'t>(&self, text: &'t [u8]) -> Cow<'t, [u8]> {
        substitute(text, &self.to_live)
    }

    /// A recorded request that `request` (already read with [`PageIds::to_recorded`]) would match once
    /// some of its new ids were bound; `answered` says which recorded requests have answered.
    pub fn propose(&self, request: &Sent<'_>, answered: &[bool], clocks: &Clocks) -> Option<Proposal> {
        if self.templates.is_empty() || request.body.len() > MAX_TEMPLATED_BODY {
            return None;
        }
        let is_new = |id: &str| !self.first_sent.contains_key(id) && !self.to_recorded.contains_key(id);
        let has_new = |text: &[u8]| id_tokens(text, clocks).any(|range| is_new(&String::from_utf8_lossy(&text[range])));
        if !has_new(request.url.as_bytes()) && !has_new(request.body) {
            return None;
        }
        let templated = Templated::new(request.url, request.body, clocks);
        let candidates = self.templates.get(&template_key(request, &templated, clocks))?;
        let mut unanswered_first = candidates
            .iter()
            .filter(|(index, _)| !answered[*index])
            .chain(candidates.iter().filter(|(i, _)| answered[*i]));
        unanswered_first.find_map(|(index, recorded_ids)| {
            let pairs = self.pairs(recorded_ids, &templated.ids, is_new)?;
            Some(Proposal { index: *index, pairs })
        })
    }

    /// The (recorded, page's) pairs where the ids differ, when each such page value is new and each such
    /// recorded value is free, consistently.
    fn pairs(
        &self,
        recorded: &[String],
        live: &[String],
        is_new: impl Fn(&str) -> bool,
    ) -> Option<Vec<(String, String)>> {
        if recorded.len() != live.len() {
            return None;
        }
        let mut pairs: Vec<(String, String)> = Vec::new();
        for (recorded, live) in recorded.iter().zip(live) {
            if recorded == live {
                continue;
            }
            if !is_new(live) || self.to_live.contains_key(recorded) {
                return None;
            }
            match pairs.iter().find(|(r, l)| r == recorded || l == live) {
                Some((r, l)) if r == recorded && l == live => {}
                Some(_) => return None,
                None => pairs.push((recorded.clone(), live.clone())),
            }
        }
        (!pairs.is_empty()).then_some(pairs)
    }

    /// From now on, each page value stands for its recorded one.
    pub fn bind(&mut self, pairs: &[(String, String)]) {
        for (recorded, live) in pairs {
            self.to_recorded.insert(live.clone(), recorded.clone());
            self.to_live.insert(recorded.clone(), live.clone());
        }
    }
}

fn template_key(request: &Sent<'_>, templated: &Templated, clocks: &Clocks) -> Vec<u8> {
    let method = request.method.to_ascii_uppercase();
    canonical::request(&method, &templated.url, &templated.body, request.content_type, clocks).key
}

#[cfg(test)]
mod tests {
    use super::*;

    fn sent<'a>(url: &'a str, body: &'a str) -> Sent<'a> {
        Sent { method: "POST", url, body: body.as_bytes(), content_type: Some("application/json") }
    }

    fn recorded() -> PageIds {
        let mut ids = PageIds::default();
        ids.add(0, &sent("https://h/join", r#"{"session":"r3c0rd3d1","q":"mug"}"#), &Clocks::NONE);
        ids.add(1, &sent("https://h/stream?session=r3c0rd3d1", ""), &Clocks::NONE);
        ids.add(2, &sent("https://h/join", r#"{"session":"s3c0nd1d2","q":"mug"}"#), &Clocks::NONE);
        ids
    }

    #[test]
    fn a_new_id_in_a_request_of_a_recorded_shape_is_paired_with_the_recorded_one() {
        let mut ids = recorded();
        let request = sent("https://h/join", r#"{"session":"l1v3v4lu3","q":"mug"}"#);
        let proposal = ids.propose(&request, &[false; 3], &Clocks::NONE).expect("same template");
        assert_eq!(proposal, Proposal { index: 0, pairs: vec![("r3c0rd3d1".into(), "l1v3v4lu3".into())] });
        ids.bind(&proposal.pairs);
        assert_eq!(ids.to_recorded(b"/stream?session=l1v3v4lu3").as_ref(), b"/stream?session=r3c0rd3d1");
        assert_eq!(ids.to_live(b"data: {\"session\":\"r3c0rd3d1\"}").as_ref(), b"data: {\"session\":\"l1v3v4lu3\"}");
        // A second session made by the page pairs with the recording's second, which is still free.
        let again = sent("https://h/join", r#"{"session":"an0th3rv4","q":"mug"}"#);
        let proposal = ids.propose(&again, &[true, true, false], &Clocks::NONE).expect("the second session");
        assert_eq!(proposal.pairs, vec![("s3c0nd1d2".into(), "an0th3rv4".into())]);
    }

    #[test]
    fn nothing_is_proposed_for_known_ids_or_another_shape() {
        let ids = recorded();
        // The recorded id itself: the exact level answers, nothing to bind.
        assert!(
            ids.propose(&sent("https://h/join", r#"{"session":"r3c0rd3d1","q":"mug"}"#), &[false; 3], &Clocks::NONE)
                .is_none()
        );
        // Another question: another template.
        assert!(
            ids.propose(&sent("https://h/join", r#"{"session":"l1v3v4lu3","q":"cup"}"#), &[false; 3], &Clocks::NONE)
                .is_none()
        );
        // No ids at all.
        assert!(ids.propose(&sent("https://h/join", r#"{"q":"mug"}"#), &[false; 3], &Clocks::NONE).is_none());
    }
}
