//! A scripted judge: an OpenAI-compatible chat endpoint on 127.0.0.1 that stands in for a model, which
//! these machines cannot run, as the scripted agents stand in for model-driven ones. It reads the question
//! that `trace-replay eval --judge` sends and answers by a fixed rule, so a test can tell that the question
//! carried what a model needs:
//! - a question with phrases in backquotes (a checkpoint's predicate, a rubric requirement) is answered yes
//!   when every phrase appears in the sections about the agent (its steps, requests, pages, final page);
//! - the success question is answered yes when the page the person ended on is open in the agent's browser
//!   at the end (its final page, or another tab).
//!
//! A glossary question (an environment map's definitions) gets one term per page the question names.
//!
//! A checkpoints question (`trace-host process --llm`) gets two proposals: the first words of the start
//! page, which an agent doing nothing sees (the audit must drop it), and the last words of the final page
//! that the start page does not show (the audit must keep it).
//!
//! It counts the requests it answers, and can instead answer with no verdict or refuse with 503.

use std::net::SocketAddr;
use std::sync::Arc;
use std::sync::atomic::{AtomicUsize, Ordering};

use axum::Json;
use axum::extract::State;
use axum::http::StatusCode;
use axum::response::{IntoResponse, Response};
use axum::routing::post;
use serde_json::{Value, json};

#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Behaviour {
    /// Answers by the rule above.
    Scripted,
    /// Answers in prose, with no verdict.
    NoVerdict,
    /// Refuses every request with 503.
    Unavailable,
}

pub struct ScriptedJudge {
    pub addr: SocketAddr,
    requests: Arc<AtomicUsize>,
    server: tokio::task::JoinHandle<()>,
}

impl ScriptedJudge {
    pub async fn start(behaviour: Behaviour) -> ScriptedJudge {
        let requests = Arc::new(AtomicUsize::new(0));
        let app =
            axum::Router::new().route("/v1/chat/completions", post(complete)).with_state((behaviour, requests.clone()));
        let listener = tokio::net::TcpListener::bind("127.0.0.1:0").await.unwrap();
        let addr = listener.local_addr().unwrap();
        let server = tokio::spawn(async move {
            axum::serve(listener, app).await.unwrap();
        });
        ScriptedJudge { addr, requests, server }
    }

    /// What `OPENAI_BASE_URL` is set to.
    pub fn base_url(&self) -> String {
        format!("http://{}/v1", self.addr)
    }

    /// Requests answered so far.
    pub fn requests(&self) -> usize {
        self.requests.load(Ordering::SeqCst)
    }
}

impl Drop for ScriptedJudge {
    fn drop(&mut self) {
        self.server.abort();
    }
}

async fn complete(
    State((behaviour, requests)): State<(Behaviour, Arc<AtomicUsize>)>,
    Json(request): Json<Value>,
) -> Response {
    requests.fetch_add(1, Ordering::SeqCst);
    let reply = match behaviour {
        Behaviour::Unavailable => return (StatusCode::SERVICE_UNAVAILABLE, "overloaded").into_response(),
        Behaviour::NoVerdict => "I would need to see the page itself to say.".to_owned(),
        Behaviour::Scripted => {
            let content = |index: usize| {
                request["messages"]
                    .as_array()
                    .and_then(|messages| messages.get(index))
                    .and_then(|m| m["content"].as_str())
            };
            let prompt = request["messages"]
                .as_array()
                .and_then(|messages| messages.last())
                .and_then(|message| message["content"].as_str())
                .unwrap_or_default();
            if content(0).is_some_and(|system| system.contains("glossary")) {
                glossary(prompt)
            } else if content(0).is_some_and(|system| system.contains("You choose checkpoints")) {
                checkpoints(prompt)
            } else {
                let (verdict, reason) = verdict(prompt);
                json!({"verdict": if verdict { "yes" } else { "no" }, "reason": reason}).to_string()
            }
        }
    };
    Json(json!({
        "id": "scripted",
        "object": "chat.completion",
        "model": request["model"],
        "choices": [{"index": 0, "message": {"role": "assistant", "content": reply}, "finish_reason": "stop"}],
    }))
    .into_response()
}

/// A glossary question (`trace-host map --llm`) is answered with one term per page named in it, defined by
/// the page's URL pattern, in a code fence as models often write.
fn glossary(prompt: &str) -> String {
    let definitions: Vec<Value> = prompt
        .lines()
        .filter_map(|line| line.strip_prefix("Page: "))
        .filter_map(|page| page.rsplit_once(" ("))
        .map(|(name, pattern)| json!({"term": name, "definition": format!("The pages at {}", pattern.trim_end_matches(')'))}))
        .collect();
    format!("```json\n{}\n```", Value::Array(definitions))
}

/// Proposals for a checkpoints question: see the module's documentation.
fn checkpoints(prompt: &str) -> String {
    let section = |title: &str| {
        prompt.split("\n## ").find_map(|section| section.strip_prefix(title)).unwrap_or_default().trim().to_owned()
    };
    let start = section("What the start page shows\n");
    let last = section("What the final page shows\n");
    let start_words: Vec<&str> = start.split_whitespace().take(3).collect();
    let words: Vec<&str> = last.split_whitespace().collect();
    let ending = (4..=words.len().min(12))
        .map(|count| words[words.len() - count..].join(" "))
        .find(|text| !start.contains(text.as_str()))
        .unwrap_or_default();
    let proposals = json!([
        {"role": "final_state", "reason": "the site says so", "predicate": {"kind": "text", "text": start_words.join(" ")}},
        {"role": "final_state", "reason": "the page ends so", "predicate": {"kind": "text", "text": ending}},
    ]);
    format!("Checkpoints:\n```json\n{proposals}\n```")
}

/// The rule: see the module's documentation.
fn verdict(prompt: &str) -> (bool, String) {
    let mut about_agent = String::new();
    let mut question = "";
    for section in prompt.split("\n## ") {
        if section.starts_with("The agent's") {
            about_agent.push_str(section);
        } else if let Some(text) = section.strip_prefix("Question\n") {
            question = text;
        }
    }
    let phrases: Vec<&str> = question.split('`').skip(1).step_by(2).collect();
    if !phrases.is_empty() {
        let missing: Vec<&&str> = phrases.iter().filter(|phrase| !about_agent.contains(**phrase)).collect();
        return (missing.is_empty(), format!("missing from the agent's episode: {missing:?}"));
    }
    let line = |prefix: &str, text: &str| text.lines().find_map(|line| line.strip_prefix(prefix)).map(str::to_owned);
    let person = line("The person ended on: ", prompt);
    let open: Vec<&str> = about_agent
        .lines()
        .filter_map(|line| line.strip_prefix("URL: ").or_else(|| line.strip_prefix("Also open at the end: ")))
        .collect();
    let verdict = person.as_deref().is_some_and(|person| open.contains(&person));
    (verdict, format!("the person ended on {person:?}; open in the agent's browser: {open:?}"))
}
