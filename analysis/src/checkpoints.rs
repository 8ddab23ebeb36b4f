//! `checkpoints.json`: states that mark real progress in the demonstration, chosen by fixed rules (no model)
//! so that the same bundle always gets the same checkpoints:
//!
//! 1. **State changes.** Every successful (2xx, 3xx) request other than GET, HEAD or OPTIONS that is not on
//!    the ignore list (a login, adding to a cart): `request` with its method, host and path, and the
//!    non-secret fields of its form or JSON body.
//! 2. **Pages reached by a form.** Every main-frame page a form submission led to, and every page a call
//!    reached right after the person typed (a search): `url` with the page's scheme-less URL.
//! 3. **The final state.** A distinctive text of the last main-frame DOM snapshot: its first heading that
//!    no earlier snapshot shows, else its first such visible text run, else its first heading: `text`.
//!
//! Nothing secret enters a predicate: no credential value, no field whose name [`is_secret_name`] marks, no
//! value that looks like a token. Each checkpoint is kept only if [`holds`] finds it on the recording itself.

use std::collections::BTreeMap;

use trace_manifest::event::{EventKind, NavigationCause};
use trace_manifest::postprocess::{Checkpoint, Predicate};
use trace_manifest::trajectory::{Credential, ToolAction, Trajectory};

use crate::body::form_fields;
use crate::evidence::{Evidence, PageText, holds};
use crate::exchange::Exchange;
use crate::secrets::is_secret_name;
use crate::urls::{self, scheme_less, without_query};

/// Methods that read without changing anything.
const SAFE_METHODS: &[&str] = &["GET", "HEAD", "OPTIONS"];
/// Visible texts shorter or longer than this make poor final-state texts.
const TEXT_CHARS: std::ops::RangeInclusive<usize> = 3..=80;

/// Chooses the checkpoints of a recording, in the order the demonstration reached them.
pub fn select(
    evidence: &Evidence,
    trajectory: &Trajectory,
    credentials: &[Credential],
    ignored: &[String],
) -> Vec<Checkpoint> {
    let secrets: Vec<&str> = credentials.iter().map(|c| c.value.as_str()).filter(|v| !v.is_empty()).collect();
    let mentions_secret = |text: &str| text.contains("{{credentials.") || secrets.iter().any(|s| text.contains(s));
    // (first event id, reason, predicate, event ids)
    let mut candidates: Vec<(u64, String, Predicate, Vec<u64>)> = Vec::new();

    for exchange in &evidence.exchanges {
        if SAFE_METHODS.iter().any(|m| exchange.method.eq_ignore_ascii_case(m))
            || !exchange.succeeded()
            || ignored.iter().any(|pattern| urls::matches(pattern, &exchange.url))
            || matches!(exchange.resource_type.as_deref(), Some("Ping" | "CSPViolationReport"))
        {
            continue;
        }
        let url_pattern = without_query(scheme_less(&exchange.url)).to_owned();
        if mentions_secret(&url_pattern) {
            continue;
        }
        let body_fields = safe_body_fields(exchange, &mentions_secret);
        let reason = format!(
            "{} {} succeeded ({}): the site's state changed",
            exchange.method,
            url_pattern,
            exchange.status.unwrap_or_default()
        );
        let event_ids = std::iter::once(exchange.request_event).chain(exchange.response_event).collect();
        let predicate = Predicate::Request { method: exchange.method.to_ascii_uppercase(), url_pattern, body_fields };
        candidates.push((exchange.request_event, reason, predicate, event_ids));
    }

    for record in &evidence.events {
        if let EventKind::Navigation(navigation) = &record.event.kind
            && navigation.main_frame
            && record.event.frame_id.is_none()
            && navigation.cause == NavigationCause::FormSubmit
        {
            let pattern = scheme_less(&navigation.url).to_owned();
            let reason = format!("a form submission led to {pattern}");
            candidates.push((record.id, reason, Predicate::Url { pattern }, vec![record.id]));
        }
    }
    for (index, call) in trajectory.tool_calls.iter().enumerate() {
        let typed_before = index > 0 && matches!(trajectory.tool_calls[index - 1].action, ToolAction::Input { .. });
        let Some(after) = call.url_after.as_deref() else { continue };
        if !typed_before || call.url_before.as_deref() == Some(after) {
            continue;
        }
        let pattern = scheme_less(after).to_owned();
        // The navigation that shows it, so that the checkpoint points at evidence.
        let first = call.event_ids.iter().min().copied().unwrap_or(0);
        let Some(&navigation) =
            holds(&Predicate::Url { pattern: pattern.clone() }, evidence).iter().find(|&&id| id >= first)
        else {
            continue;
        };
        let reason = format!("after typing, the person reached {pattern}");
        candidates.push((navigation, reason, Predicate::Url { pattern }, vec![navigation]));
    }

    if let Some((page, text)) = final_text(&evidence.pages, &mentions_secret) {
        let reason = format!("the final page ({}) shows {text:?}", scheme_less(&page.url));
        candidates.push((page.event_id, reason, Predicate::Text { text }, vec![page.event_id]));
    }

    candidates.sort_by_key(|(first, ..)| *first);
    let mut chosen: Vec<Checkpoint> = Vec::new();
    for (_, reason, predicate, event_ids) in candidates {
        if mentions_secret(&serde_json::to_string(&predicate).unwrap_or_default())
            || chosen.iter().any(|c| c.predicate == predicate)
            || holds(&predicate, evidence).is_empty()
        {
            continue;
        }
        let step = step_of(trajectory, event_ids[0]);
        chosen.push(Checkpoint { id: format!("cp{}", chosen.len() + 1), reason, predicate, event_ids, step });
    }
    chosen
}

/// The body fields a checkpoint may name: not secret by name, value or shape.
fn safe_body_fields(exchange: &Exchange, mentions_secret: &dyn Fn(&str) -> bool) -> BTreeMap<String, String> {
    let Some(body) = exchange.post_data.as_deref() else { return BTreeMap::new() };
    let mut fields = BTreeMap::new();
    for (name, value) in form_fields(body, exchange.content_type.as_deref()) {
        if is_secret_name(&name)
            || mentions_secret(&name)
            || mentions_secret(&value)
            || looks_like_token(&value)
            || fields.contains_key(&name)
        {
            continue;
        }
        fields.insert(name, value);
    }
    fields
}

/// Long runs of letters and digits with both in them are ids, hashes and tokens, which change per session.
fn looks_like_token(value: &str) -> bool {
    value.len() >= 16
        && value.chars().all(|c| c.is_ascii_alphanumeric() || "-_=+/.".contains(c))
        && value.chars().any(|c| c.is_ascii_digit())
        && value.chars().any(|c| c.is_ascii_alphabetic())
}

/// The distinctive text of the last main-frame snapshot (see the module's rule 3).
fn final_text<'p>(pages: &'p [PageText], mentions_secret: &dyn Fn(&str) -> bool) -> Option<(&'p PageText, String)> {
    let (last, earlier) = pages.split_last()?;
    let usable = |text: &&String| TEXT_CHARS.contains(&text.chars().count()) && !mentions_secret(text);
    let new_here = |text: &&String| !earlier.iter().any(|page| page.text.contains(text.as_str()));
    let text = last
        .headings
        .iter()
        .filter(usable)
        .find(new_here)
        .or_else(|| last.runs.iter().filter(usable).find(new_here))
        .or_else(|| last.headings.iter().find(usable))
        .or_else(|| last.runs.iter().find(usable))?;
    // A title is not part of the visible text a predicate is searched in.
    if !last.text.contains(text.as_str()) {
        return last.runs.iter().find(usable).map(|run| (last, run.clone()));
    }
    Some((last, text.clone()))
}

/// The trajectory call an event belongs to: the last call that started at or before it.
fn step_of(trajectory: &Trajectory, event_id: u64) -> Option<usize> {
    trajectory
        .tool_calls
        .iter()
        .enumerate()
        .filter(|(_, call)| call.event_ids.iter().min().is_some_and(|&first| first <= event_id))
        .map(|(index, _)| index)
        .next_back()
}
