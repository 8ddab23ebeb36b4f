//! Checkpoints a model proposes (`trace-host process --llm MODEL`, the TRACE paper's way), beside the
//! rules' own: the question it is asked, derived from the recording (the task, the person's steps, the
//! requests that changed the site with their fields, the pages seen and what the start and the final
//! page show; secrets never, cut to a size a model reads whole), and how its reply is read. Nothing a
//! model says is trusted: every proposal is placed as the rules' checkpoints are
//! ([`crate::checkpoints::place_proposals`]) and kept only if the audit shows that it discriminates.
//!
//! The reply is a JSON array of `{"role": "state_change" | "page" | "final_state", "reason": "...",
//! "predicate": {...}}` with predicates in `checkpoints.json`'s language; [`read_proposals`] takes it
//! wrapped in prose or a code fence and skips items it cannot read.

use std::fmt::Write as _;

use serde::Deserialize;
use trace_manifest::bundle::TaskInfo;
use trace_manifest::postprocess::{CheckpointRole, Predicate};
use trace_manifest::trajectory::{ToolCall, Trajectory};

use crate::body::form_fields;
use crate::evidence::Evidence;
use crate::judge::{Message, clip, write_list, write_steps};
use crate::secrets::is_secret_name;

/// Characters of a page's text shown.
const MAX_PAGE_TEXT: usize = 3000;
/// The most proposals read from one reply.
pub const MAX_PROPOSALS: usize = 12;

const SYSTEM: &str = "You choose checkpoints for evaluating web agents on a replayed copy of a website. A \
checkpoint is a state that the person's demonstration reached and that an agent doing nothing on the start page \
never reaches: a request that changed the site's state, a page reached, or a text the final page shows that the \
start page did not. Never use text every page shows (the site's name, navigation, 'Skip to content', 'Log out'). \
Reply with one JSON array and nothing else.";

/// A checkpoint as a model proposed it.
#[derive(Debug, Clone, PartialEq, Deserialize)]
pub struct Proposal {
    pub role: CheckpointRole,
    #[serde(default)]
    pub reason: String,
    pub predicate: Predicate,
}

/// The question: what the recording shows, and what to answer.
pub fn question(task: &TaskInfo, calls: &[ToolCall], recording: &Evidence) -> Vec<Message> {
    let mut text = String::new();
    let _ = writeln!(text, "## Task\n{}\n(on {})", task.description, task.website);
    if let Some(answer) = &task.answer {
        let _ = writeln!(text, "The person's answer: {}", clip(answer, 300));
    }
    let _ = writeln!(text, "\n## The person's steps");
    write_steps(&mut text, calls);
    let _ = writeln!(text, "\n## Requests that changed the site");
    let changes: Vec<String> = recording
        .exchanges
        .iter()
        .filter(|exchange| !matches!(exchange.method.as_str(), "GET" | "HEAD" | "OPTIONS") && exchange.succeeded())
        .map(|exchange| {
            let fields: Vec<String> = exchange
                .post_data
                .as_deref()
                .map(|body| form_fields(body, exchange.content_type.as_deref()))
                .unwrap_or_default()
                .iter()
                .filter(|(name, _)| !is_secret_name(name))
                .map(|(name, value)| format!("{name}={}", clip(value, 80)))
                .collect();
            format!("{} {} [{}]", exchange.method, exchange.url, fields.join(", "))
        })
        .collect();
    write_list(&mut text, &changes);
    let _ = writeln!(text, "\n## Pages the person saw");
    let pages: Vec<String> = recording
        .pages
        .iter()
        .map(|page| format!("{} ({})", page.url, page.headings.first().map_or("", String::as_str)))
        .collect();
    write_list(&mut text, &pages);
    let trajectory = Trajectory { task_id: task.id.clone(), tool_calls: calls.to_vec() };
    if let (Some(start), Some(last)) = (recording.start_page(&trajectory), recording.final_page(&trajectory)) {
        let _ = writeln!(text, "\n## What the start page shows\n{}", clip(&start.text, MAX_PAGE_TEXT));
        let _ = writeln!(text, "\n## What the final page shows\n{}", clip(&last.text, MAX_PAGE_TEXT));
    }
    let _ = writeln!(
        text,
        "\n## Answer\nPropose at most {MAX_PROPOSALS} checkpoints in the order the demonstration reached them, as \
         a JSON array of objects {{\"role\": \"state_change\" | \"page\" | \"final_state\", \"reason\": \"...\", \
         \"predicate\": P}}, where P is one of {{\"kind\": \"request\", \"method\": \"POST\", \"url_pattern\": \
         \"host/path\", \"body_fields\": {{\"field\": \"value\"}}}}, {{\"kind\": \"url\", \"pattern\": \
         \"host/path?query\"}} or {{\"kind\": \"text\", \"text\": \"exact text shown\"}}. URL patterns are \
         substrings of the URL without its scheme. Use only fields the person typed or chose."
    );
    vec![Message { role: "system", content: SYSTEM.to_owned() }, Message { role: "user", content: text }]
}

/// The proposals of a reply: the first JSON array in it, each item that reads as a [`Proposal`] (at most
/// [`MAX_PROPOSALS`]). A reply with no array is an error quoting it.
pub fn read_proposals(reply: &str) -> Result<Vec<Proposal>, String> {
    for (start, _) in reply.match_indices('[') {
        let mut values = serde_json::Deserializer::from_str(&reply[start..]).into_iter::<serde_json::Value>();
        let Some(Ok(serde_json::Value::Array(items))) = values.next() else { continue };
        return Ok(items
            .into_iter()
            .filter_map(|item| serde_json::from_value(item).ok())
            .take(MAX_PROPOSALS)
            .collect());
    }
    Err(format!("the model's reply holds no JSON array of checkpoints: {:?}", clip(reply.trim(), 200)))
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn proposals_are_read_from_a_fenced_reply_and_unreadable_items_skipped() {
        let reply = "Here you go:\n```json\n[{\"role\": \"final_state\", \"reason\": \"saved\", \"predicate\": \
                     {\"kind\": \"text\", \"text\": \"Group created\"}}, {\"role\": \"nonsense\"}, \
                     {\"role\": \"state_change\", \"predicate\": {\"kind\": \"request\", \"method\": \"POST\", \
                     \"url_pattern\": \"shop.test/cart\"}}]\n```";
        let proposals = read_proposals(reply).unwrap();
        assert_eq!(proposals.len(), 2);
        assert_eq!(proposals[0].predicate, Predicate::Text { text: "Group created".into() });
        assert_eq!(proposals[1].role, CheckpointRole::StateChange);
        assert!(read_proposals("I cannot help with that").is_err());
    }
}
