//! The questions TRACE asks a judge model about an agent's episode, and how its replies are read. The
//! asking (an OpenAI-compatible endpoint, a cache) belongs to `trace-replay`; what is asked is derived
//! here, from the same evidence the deterministic scores use, so that the same episode always gives the
//! same questions and a cached verdict can be found again by the hash of its question.
//! State-changing requests are shown with their form or JSON fields, but for the values of fields whose
//! names say they are secret.
//!
//! Three questions, as TRACE's original runner asked them:
//! - **success** (the binary judge): the task, the person's demonstration and where it ended, and the
//!   agent's steps, answer, state-changing requests, pages (each with the start of what it says) and final
//!   page;
//! - **checkpoint**: the same episode, and one checkpoint of the recording, its reason and its predicate in
//!   words; asked in order, stopping at the first missed;
//! - **rubric item**: the same episode, and a rubric item whose verification is text.
//!
//! Every question asks for one JSON object, `{"verdict": "yes" | "no", "reason": "..."}`, and
//! [`read_verdict`] also takes a reply that wraps it in prose or a code fence, or starts with a bare yes
//! or no. The episode's parts are cut to a size a model reads whole (see the `MAX_*` constants). No secret
//! reaches the judge: steps carry the trajectory's credential placeholders, never the values.

use std::collections::BTreeMap;
use std::fmt::Write as _;

use serde::Serialize;
use trace_manifest::bundle::TaskInfo;
use trace_manifest::eval::{RubricItem, Verification};
use trace_manifest::postprocess::{Checkpoint, Predicate};
use trace_manifest::task::TaskType;
use trace_manifest::trajectory::{ToolAction, ToolCall};

use crate::body::form_fields;
use crate::evidence::{Evidence, PageText, Region};
use crate::secrets::is_secret_name;

/// Steps of one side shown; the rest are counted.
const MAX_STEPS: usize = 80;
/// Pages and requests of the agent's shown; the rest are counted.
const MAX_LISTED: usize = 40;
/// Characters of the final page's text shown.
const MAX_PAGE_TEXT: usize = 6000;
/// Characters of what each of the agent's pages says shown.
const MAX_PAGE_EXCERPT: usize = 240;
/// Characters of one typed text, answer or heading shown.
const MAX_VALUE: usize = 300;

const SYSTEM: &str = "You judge a web agent's episode on a replayed copy of a website. You are shown the task, \
what a person did to accomplish it, and what the agent did, as recorded. Judge only from what is shown; the \
agent may reach the goal by another path than the person's. Reply with one JSON object and nothing else: \
{\"verdict\": \"yes\" or \"no\", \"reason\": \"one sentence\"}.";

/// One message of a chat request, in the OpenAI shape.
#[derive(Debug, Clone, PartialEq, Eq, Serialize)]
pub struct Message {
    pub role: &'static str,
    pub content: String,
}

/// What a question is about.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum Subject {
    Success,
    /// The checkpoint's id.
    Checkpoint(String),
    /// The rubric item's id.
    RubricItem(String),
}

#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Question {
    pub subject: Subject,
    pub messages: Vec<Message>,
}

/// What the judge is shown of an episode.
pub struct Episode<'a> {
    pub task: &'a TaskInfo,
    /// The person's tool calls.
    pub demonstration: &'a [ToolCall],
    /// The agent's tool calls.
    pub agent_steps: &'a [ToolCall],
    pub answer: Option<&'a str>,
    /// The agent's session.
    pub evidence: &'a Evidence,
}

impl Episode<'_> {
    /// TRACE's binary judge: did the agent accomplish the task?
    pub fn success_question(&self) -> Question {
        let question = match self.task.task_type {
            TaskType::Action => "Did the agent accomplish the task?".to_owned(),
            TaskType::InformationRetrieval => {
                "Did the agent accomplish the task, and is its answer the right one?".to_owned()
            }
        };
        self.question(Subject::Success, &question)
    }

    /// TRACE's checkpoint judge: did the agent reach this state of the person's demonstration?
    pub fn checkpoint_question(&self, checkpoint: &Checkpoint) -> Question {
        let question = format!(
            "Did the agent reach this checkpoint of the person's demonstration: {}? It holds when {}.",
            checkpoint.reason.trim_end_matches('.'),
            predicate_in_words(&checkpoint.predicate)
        );
        self.question(Subject::Checkpoint(checkpoint.id.clone()), &question)
    }

    /// A rubric item that only words can verify; `None` for an item verified by a predicate.
    pub fn rubric_question(&self, item: &RubricItem) -> Option<Question> {
        let Verification::Text(how) = &item.verification else { return None };
        let question = format!(
            "Does the agent's episode satisfy this requirement: {}? How to verify it: {}",
            item.requirement.trim_end_matches('.'),
            how
        );
        Some(self.question(Subject::RubricItem(item.id.clone()), &question))
    }

    fn question(&self, subject: Subject, question: &str) -> Question {
        let mut text = String::new();
        let task_type = match self.task.task_type {
            TaskType::Action => "an action",
            TaskType::InformationRetrieval => "information retrieval (the answer matters)",
        };
        let _ =
            writeln!(text, "## Task\n{}\n(The task is {task_type}, on {}.)", self.task.description, self.task.website);
        let _ = writeln!(text, "\n## The person's demonstration");
        write_steps(&mut text, self.demonstration);
        if let Some(answer) = &self.task.answer {
            let _ = writeln!(text, "The person's answer: {}", clip(answer, MAX_VALUE));
        }
        if let Some(url) = self.demonstration.iter().rev().find_map(|call| call.url_after.as_deref()) {
            let _ = writeln!(text, "The person ended on: {url}");
        }
        let _ = writeln!(text, "\n## The agent's steps");
        write_steps(&mut text, self.agent_steps);
        let _ =
            writeln!(text, "The agent's answer: {}", self.answer.map_or("(none)".to_owned(), |a| clip(a, MAX_VALUE)));
        let _ = writeln!(text, "\n## The agent's requests that changed the site");
        let changes: Vec<String> = self
            .evidence
            .exchanges
            .iter()
            // Unanswered requests (beacons that replay failed at once) changed nothing, and their order
            // varies from run to run, which would change the question and miss the cache.
            .filter(|exchange| !matches!(exchange.method.as_str(), "GET" | "HEAD" | "OPTIONS"))
            .filter_map(|exchange| {
                let status = exchange.status?;
                let mut line = format!("{} {} → {status}", exchange.method, exchange.url);
                let fields = exchange
                    .post_data
                    .as_deref()
                    .map(|body| form_fields(body, exchange.content_type.as_deref()))
                    .unwrap_or_default();
                if !fields.is_empty() {
                    let fields: Vec<String> = fields
                        .iter()
                        .map(|(name, value)| {
                            if is_secret_name(name) {
                                format!("`{name}` = (a secret)")
                            } else {
                                format!("`{name}` = `{}`", clip(value, MAX_VALUE))
                            }
                        })
                        .collect();
                    let _ = write!(line, ", with {}", fields.join(", "));
                }
                Some(line)
            })
            .collect();
        write_list(&mut text, &changes);
        let _ = writeln!(text, "\n## The agent's pages");
        // Each page once, in the order first seen: the final captures of several tabs come in no fixed
        // order, and the question must not change with it.
        let mut pages: Vec<String> = Vec::new();
        for page in &self.evidence.pages {
            let mut line = match page.headings.first() {
                Some(heading) => format!("{} ({})", page.url, clip(heading, MAX_VALUE)),
                None => page.url.clone(),
            };
            let said = what_a_page_says(page);
            if !said.is_empty() {
                let _ = write!(line, ": {}", clip(&said, MAX_PAGE_EXCERPT));
            }
            if !pages.contains(&line) {
                pages.push(line);
            }
        }
        write_list(&mut text, &pages);
        let _ = writeln!(text, "\n## The agent's final page");
        let final_pages = self.final_pages();
        match final_pages.first() {
            Some(page) => {
                let _ = writeln!(text, "URL: {}", page.url);
                let headings: Vec<String> = page.headings.iter().map(|h| clip(h, MAX_VALUE)).collect();
                let _ = writeln!(text, "Headings: {}", headings.join(" | "));
                let _ = writeln!(text, "Text: {}", clip(&page.text, MAX_PAGE_TEXT));
            }
            None => {
                let _ = writeln!(text, "(no page was captured)");
            }
        }
        for page in final_pages.iter().skip(1) {
            let _ = writeln!(text, "Also open at the end: {}", page.url);
        }
        let _ = writeln!(text, "\n## Question\n{question}");
        Question {
            subject,
            messages: vec![
                Message { role: "system", content: SYSTEM.to_owned() },
                Message { role: "user", content: text },
            ],
        }
    }
}

/// What a page says: its messages and main content, or, on a page without landmarks, its text outside
/// the site's frame and controls.
fn what_a_page_says(page: &PageText) -> String {
    let has_main = page.blocks.iter().any(|block| matches!(block.region, Region::Message | Region::Main));
    let said: Vec<&str> = page
        .blocks
        .iter()
        .filter(|block| match block.region {
            Region::Message | Region::Main => true,
            Region::Body => !has_main,
            Region::Frame | Region::Hidden => false,
        })
        .map(|block| block.text.as_str())
        .collect();
    said.join(" ")
}

impl Episode<'_> {
    /// The last snapshot of each of the agent's tabs: first the one its last step left it on (else the
    /// latest of all), then the others by URL.
    fn final_pages(&self) -> Vec<&PageText> {
        let tab_of = |page: &PageText| {
            self.evidence.events.iter().find(|record| record.id == page.event_id).and_then(|record| record.event.tab_id)
        };
        let mut last_of_tab: BTreeMap<Option<i64>, &PageText> = BTreeMap::new();
        for page in &self.evidence.pages {
            let entry = last_of_tab.entry(tab_of(page)).or_insert(page);
            if page.event_id > entry.event_id {
                *entry = page;
            }
        }
        let mut pages: Vec<&PageText> = last_of_tab.into_values().collect();
        let last_url = self.agent_steps.iter().rev().find_map(|call| call.url_after.as_deref());
        let first = last_url
            .and_then(|url| pages.iter().position(|page| page.url == url))
            .or_else(|| pages.iter().enumerate().max_by_key(|(_, page)| page.event_id).map(|(index, _)| index));
        let Some(first) = first else { return pages };
        let first = pages.remove(first);
        // The others by URL: the tabs' last captures come in no fixed order.
        pages.sort_by(|a, b| a.url.cmp(&b.url));
        pages.insert(0, first);
        pages
    }
}

/// A predicate as a person says it; patterns and texts in backquotes.
pub fn predicate_in_words(predicate: &Predicate) -> String {
    match predicate {
        Predicate::Request { method, url_pattern, body_fields, credential_fields } => {
            let mut words = format!("a {method} request to a URL containing `{url_pattern}` succeeded");
            // A credential by its placeholder: the judge never sees a secret.
            let fields: Vec<String> = body_fields
                .iter()
                .map(|(name, value)| format!("`{name}` = `{value}`"))
                .chain(
                    credential_fields
                        .iter()
                        .map(|(name, placeholder)| format!("`{name}` = the credential {placeholder}")),
                )
                .collect();
            if !fields.is_empty() {
                let _ = write!(words, ", with {}", fields.join(", "));
            }
            words
        }
        Predicate::Frame { url_pattern, fields } => {
            let fields: Vec<String> = fields.iter().map(|(name, value)| format!("`{name}` = `{value}`")).collect();
            format!("the page sent a frame on a socket whose URL contains `{url_pattern}`, with {}", fields.join(", "))
        }
        Predicate::Url { pattern } => format!("a page whose URL contains `{pattern}` was reached"),
        Predicate::Text { text } => format!("a page showed the text `{text}`"),
    }
}

/// One tool call in words: `click "Add to cart" (button #add-to-cart) on http://…`.
pub fn step_in_words(call: &ToolCall) -> String {
    let mut words = match &call.action {
        ToolAction::Navigate { url } => format!("navigate to {url}"),
        ToolAction::Click { count, .. } if *count > 1 => format!("click {count} times"),
        ToolAction::Click { .. } => "click".to_owned(),
        ToolAction::Input { text } => format!("type {:?}", clip(text, MAX_VALUE)),
        ToolAction::SendKeys { keys } => format!("press {keys}"),
        ToolAction::Scroll { delta_x, delta_y, .. } => format!("scroll by ({delta_x}, {delta_y}) px"),
        ToolAction::SelectDropdown { option } => format!("select {:?}", clip(option, MAX_VALUE)),
        ToolAction::DragDrop { element_target, coord_target_x, coord_target_y, .. } => match element_target {
            Some(onto) => format!("drag onto {} ({})", onto.selector, onto.role.as_deref().unwrap_or(&onto.tag)),
            None => format!("drag to ({coord_target_x}, {coord_target_y})"),
        },
        ToolAction::UploadFile { files } => format!("upload {}", files.join(", ")),
        ToolAction::Submit {} => "submit the form".to_owned(),
        ToolAction::GoBack {} => "go back".to_owned(),
        ToolAction::GoForward {} => "go forward".to_owned(),
        ToolAction::Switch { tab } => format!("switch to tab {tab}"),
        ToolAction::Close { tab } => format!("close tab {tab}"),
        ToolAction::Done { text, success } => format!("done (success: {success}): {:?}", clip(text, MAX_VALUE)),
    };
    if let Some(target) = &call.target {
        let name = target.accessible_name.as_deref().or(target.text.as_deref()).filter(|name| !name.is_empty());
        let kind = target.role.as_deref().unwrap_or(&target.tag);
        match name {
            Some(name) => {
                let _ = write!(words, " on {:?} ({kind})", clip(name, MAX_VALUE));
            }
            None => {
                let _ = write!(words, " on {kind} {}", target.selector);
            }
        }
    }
    if let Some(url) = &call.url_before
        && !matches!(call.action, ToolAction::Navigate { .. })
    {
        let _ = write!(words, " at {url}");
    }
    words
}

pub(crate) fn write_steps(text: &mut String, calls: &[ToolCall]) {
    if calls.is_empty() {
        text.push_str("(none)\n");
    }
    for (index, call) in calls.iter().take(MAX_STEPS).enumerate() {
        let _ = writeln!(text, "{}. {}", index + 1, step_in_words(call));
    }
    if calls.len() > MAX_STEPS {
        let _ = writeln!(text, "… and {} more steps", calls.len() - MAX_STEPS);
    }
}

pub(crate) fn write_list(text: &mut String, items: &[String]) {
    if items.is_empty() {
        text.push_str("(none)\n");
    }
    for item in items.iter().take(MAX_LISTED) {
        let _ = writeln!(text, "- {item}");
    }
    if items.len() > MAX_LISTED {
        let _ = writeln!(text, "… and {} more", items.len() - MAX_LISTED);
    }
}

/// At most `max` characters, marked when cut.
pub(crate) fn clip(text: &str, max: usize) -> String {
    match text.char_indices().nth(max) {
        Some((end, _)) => format!("{}…", &text[..end]),
        None => text.to_owned(),
    }
}

/// A judge's reply read as a verdict and its reason: the first JSON object with a `verdict` (`yes`/`no`,
/// `true`/`false`, `pass`/`fail`), wherever it stands in the reply, else a reply that starts with a bare yes
/// or no. Anything else is an error quoting the reply.
pub fn read_verdict(reply: &str) -> Result<(bool, String), String> {
    for (start, _) in reply.match_indices('{') {
        let mut objects = serde_json::Deserializer::from_str(&reply[start..]).into_iter::<serde_json::Value>();
        let Some(Ok(serde_json::Value::Object(object))) = objects.next() else { continue };
        let Some(verdict) = object.get("verdict").and_then(verdict_of) else { continue };
        let reason = object.get("reason").and_then(|reason| reason.as_str()).unwrap_or_default();
        return Ok((verdict, reason.trim().to_owned()));
    }
    let first_word: String = reply.trim_start().chars().take_while(|c| c.is_alphabetic()).collect();
    if let Some(verdict) = verdict_word(&first_word) {
        return Ok((verdict, reply.trim().to_owned()));
    }
    Err(format!("the judge's reply holds no verdict: {:?}", clip(reply.trim(), 200)))
}

fn verdict_of(value: &serde_json::Value) -> Option<bool> {
    match value {
        serde_json::Value::Bool(verdict) => Some(*verdict),
        serde_json::Value::String(word) => verdict_word(word.trim()),
        _ => None,
    }
}

fn verdict_word(word: &str) -> Option<bool> {
    match word.to_ascii_lowercase().as_str() {
        "yes" | "true" | "pass" | "passed" => Some(true),
        "no" | "false" | "fail" | "failed" => Some(false),
        _ => None,
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::evidence::page_text;
    use trace_manifest::bundle::TaskInfo;
    use trace_manifest::task::TaskStatus;

    fn task() -> TaskInfo {
        TaskInfo {
            id: "task-1".parse().unwrap(),
            source: "test".to_owned(),
            task_type: TaskType::Action,
            description: "Put the blue mug in the cart".to_owned(),
            website: "http://shop.test".to_owned(),
            status: TaskStatus::Stopped,
            answer: None,
        }
    }

    fn call(action: ToolAction, url_after: &str) -> ToolCall {
        serde_json::from_value(serde_json::json!({
            "name": action.name(),
            "params": serde_json::to_value(&action).unwrap()["params"],
            "url_after": url_after,
            "ts": 0.0,
        }))
        .unwrap()
    }

    #[test]
    fn a_question_shows_both_sides_and_the_agents_final_page_without_secrets() {
        let task = task();
        let demonstration = vec![
            call(ToolAction::Navigate { url: "http://shop.test/".to_owned() }, "http://shop.test/"),
            call(ToolAction::Input { text: "{{credentials.shop.test.password}}".to_owned() }, "http://shop.test/login"),
            call(ToolAction::Click { count: 1, modifiers: vec![], coord: None }, "http://shop.test/cart"),
        ];
        let agent =
            vec![call(ToolAction::Navigate { url: "http://shop.test/deals".to_owned() }, "http://shop.test/deals")];
        let evidence = Evidence {
            pages: vec![page_text(7, "http://shop.test/deals", "dom/7.html", "<h1>Deals</h1><p>of the day</p>")],
            ..Evidence::default()
        };
        let episode = Episode {
            task: &task,
            demonstration: &demonstration,
            agent_steps: &agent,
            answer: None,
            evidence: &evidence,
        };
        let question = episode.success_question();
        assert_eq!(question.subject, Subject::Success);
        let text = &question.messages[1].content;
        for expected in [
            "Put the blue mug in the cart",
            "The person ended on: http://shop.test/cart",
            "2. type \"{{credentials.shop.test.password}}\"",
            "1. navigate to http://shop.test/deals",
            "URL: http://shop.test/deals",
            "Text: Deals of the day",
            "The agent's answer: (none)",
        ] {
            assert!(text.contains(expected), "{expected:?} missing from:\n{text}");
        }
        let checkpoint = Checkpoint {
            id: "cp2".to_owned(),
            reason: "The cart was changed".to_owned(),
            predicate: Predicate::Request {
                method: "POST".to_owned(),
                url_pattern: "shop.test/cart".to_owned(),
                body_fields: [("product".to_owned(), "blue-mug".to_owned())].into(),
                credential_fields: Default::default(),
            },
            event_ids: vec![],
            step: None,
            role: None,
            proposed_by: None,
        };
        let question = episode.checkpoint_question(&checkpoint);
        assert_eq!(question.subject, Subject::Checkpoint("cp2".to_owned()));
        assert!(question.messages[1].content.ends_with(
            "The cart was changed? It holds when a POST request to a URL containing `shop.test/cart` succeeded, \
             with `product` = `blue-mug`.\n"
        ));
        let predicate_item: RubricItem = serde_json::from_value(serde_json::json!(
            {"id": "r1", "requirement": "x", "verification": {"kind": "url", "pattern": "cart"}}
        ))
        .unwrap();
        assert!(episode.rubric_question(&predicate_item).is_none(), "a predicate needs no judge");
    }

    #[test]
    fn a_verdict_is_read_from_json_wrapped_in_prose_or_a_bare_word() {
        assert_eq!(read_verdict(r#"{"verdict": "yes", "reason": "It did."}"#), Ok((true, "It did.".to_owned())));
        assert_eq!(
            read_verdict("Sure.\n```json\n{\"note\": {}, \"verdict\": \"NO\", \"reason\": \"wrong page\"}\n```"),
            Ok((false, "wrong page".to_owned()))
        );
        assert_eq!(read_verdict(r#"{"a": 1} then {"verdict": true}"#), Ok((true, String::new())));
        assert_eq!(read_verdict("No, the cart is empty."), Ok((false, "No, the cart is empty.".to_owned())));
        let error = read_verdict("I cannot tell {not json").unwrap_err();
        assert!(error.contains("no verdict") && error.contains("I cannot tell"), "{error}");
        assert!(read_verdict(r#"{"verdict": "maybe"}"#).is_err());
    }
}
