//! The optional judge of `trace-replay eval --judge MODEL`: asks an OpenAI-compatible chat endpoint
//! (`OPENAI_BASE_URL`, default OpenAI's; `OPENAI_API_KEY` when it needs one) the questions that
//! `trace_analysis::judge` derives from an episode, and keeps every reply in a cache keyed by the SHA-256 of
//! the request it answers (model, messages, temperature 0). The same episode asks the same questions, so a
//! re-scored run is answered from the cache, costs nothing and gives the same verdicts; the endpoint is not
//! part of the key, so a cache can be shared by machines reaching one model by different addresses.
//!
//! A judge that fails (unreachable, refusing, answering without a verdict) costs the episode its judge
//! verdicts, noted in `judge.error`, never its deterministic scores. Transient failures (a refused
//! connection, 429, 5xx) are retried twice, after 1 s and 4 s. Replies without a verdict are not cached.

use std::path::{Path, PathBuf};
use std::time::Duration;

use anyhow::{Context, Result};
use serde::{Deserialize, Serialize};
use trace_analysis::judge::{Episode, Message, Question, read_verdict};
use trace_analysis::score;
use trace_manifest::archive::sha256_hex;
use trace_manifest::eval::{EvalResult, JudgeScores, JudgeVerdict, JudgedCheckpoint, Rubric};
use trace_manifest::postprocess::Checkpoint;

/// OpenAI's, when `OPENAI_BASE_URL` is not set.
const DEFAULT_BASE_URL: &str = "https://api.openai.com/v1";
/// One request's limit: a model may think for a while.
const REQUEST_TIMEOUT: Duration = Duration::from_secs(120);
/// Waits before the retries of a transient failure.
const RETRY_WAITS: [Duration; 2] = [Duration::from_secs(1), Duration::from_secs(4)];

#[derive(Debug)]
pub struct Judge {
    model: String,
    /// `<base>/chat/completions`.
    endpoint: String,
    api_key: Option<String>,
    cache: PathBuf,
    client: reqwest::Client,
}

/// The request body, serialized once: its bytes are what is sent and what is hashed.
#[derive(Serialize)]
struct ChatRequest<'a> {
    model: &'a str,
    messages: &'a [Message],
    temperature: f64,
}

#[derive(Deserialize)]
struct ChatResponse {
    choices: Vec<Choice>,
}

#[derive(Deserialize)]
struct Choice {
    message: ReplyMessage,
}

#[derive(Deserialize)]
struct ReplyMessage {
    #[serde(default)]
    content: Option<String>,
}

/// A cache file: the reply, with what it answers for a person reading the cache.
#[derive(Serialize, Deserialize)]
struct CachedReply {
    model: String,
    request: serde_json::Value,
    reply: String,
}

impl Judge {
    /// A judge of `model` at `OPENAI_BASE_URL` (default OpenAI's), caching in `cache` (default
    /// [`default_cache_dir`]).
    pub fn from_env(model: &str, cache: Option<PathBuf>) -> Result<Judge> {
        let base_url = std::env::var("OPENAI_BASE_URL").ok().filter(|url| !url.is_empty());
        let api_key = std::env::var("OPENAI_API_KEY").ok().filter(|key| !key.is_empty());
        let cache = match cache {
            Some(cache) => cache,
            None => default_cache_dir().context("no cache directory for the judge: give --judge-cache")?,
        };
        Judge::new(model, base_url.as_deref().unwrap_or(DEFAULT_BASE_URL), api_key, cache)
    }

    pub fn new(model: &str, base_url: &str, api_key: Option<String>, cache: PathBuf) -> Result<Judge> {
        anyhow::ensure!(!model.trim().is_empty(), "--judge takes a model's name");
        let parsed =
            url::Url::parse(base_url).with_context(|| format!("the judge's base URL {base_url:?} is not a URL"))?;
        anyhow::ensure!(
            matches!(parsed.scheme(), "http" | "https"),
            "the judge's base URL {base_url:?} is not http(s)"
        );
        std::fs::create_dir_all(&cache)
            .with_context(|| format!("cannot create the judge's cache {}", cache.display()))?;
        let client = reqwest::Client::builder().timeout(REQUEST_TIMEOUT).build()?;
        Ok(Judge {
            model: model.to_owned(),
            endpoint: format!("{}/chat/completions", base_url.trim_end_matches('/')),
            api_key,
            cache,
            client,
        })
    }

    /// The verdict on one question, from the cache or the model, and whether it came from the cache.
    pub async fn ask(&self, question: &Question) -> Result<(JudgeVerdict, bool)> {
        let body =
            serde_json::to_vec(&ChatRequest { model: &self.model, messages: &question.messages, temperature: 0.0 })?;
        let input_hash = sha256_hex(&body);
        let cache_file = self.cache.join(format!("{input_hash}.json"));
        let (reply, from_cache) = match read_cached(&cache_file) {
            Some(reply) => (reply, true),
            None => (self.post(&body).await?, false),
        };
        let (satisfied, reason) = read_verdict(&reply).map_err(anyhow::Error::msg)?;
        if !from_cache {
            let entry = CachedReply { model: self.model.clone(), request: serde_json::from_slice(&body)?, reply };
            write_cached(&cache_file, &entry)?;
        }
        Ok((JudgeVerdict { satisfied, reason, input_hash }, from_cache))
    }

    /// One chat completion's text, retried on transient failures.
    async fn post(&self, body: &[u8]) -> Result<String> {
        let mut waits = RETRY_WAITS.iter();
        loop {
            let mut request = self
                .client
                .post(&self.endpoint)
                .header(reqwest::header::CONTENT_TYPE, "application/json")
                .body(body.to_vec());
            if let Some(key) = &self.api_key {
                request = request.bearer_auth(key);
            }
            let transient = match request.send().await {
                Ok(response) if response.status().is_success() => {
                    let bytes = response.bytes().await.context("the judge's answer was cut off")?;
                    let parsed: ChatResponse = serde_json::from_slice(&bytes).with_context(|| {
                        format!("the judge at {} did not answer as a chat completion", self.endpoint)
                    })?;
                    return parsed
                        .choices
                        .into_iter()
                        .next()
                        .and_then(|choice| choice.message.content)
                        .with_context(|| format!("the judge at {} answered with no message", self.endpoint));
                }
                Ok(response) => {
                    let status = response.status();
                    let text = response.text().await.unwrap_or_default();
                    let error = anyhow::anyhow!(
                        "the judge at {} answered {status}: {}",
                        self.endpoint,
                        text.chars().take(300).collect::<String>()
                    );
                    if !(status.as_u16() == 429 || status.is_server_error()) {
                        return Err(error);
                    }
                    error
                }
                Err(error) if error.is_connect() || error.is_timeout() => {
                    anyhow::Error::new(error).context(format!("cannot reach the judge at {}", self.endpoint))
                }
                Err(error) => return Err(error).context(format!("cannot ask the judge at {}", self.endpoint)),
            };
            match waits.next() {
                Some(wait) => tokio::time::sleep(*wait).await,
                None => return Err(transient),
            }
        }
    }
}

/// `$XDG_CACHE_HOME/trace/judge`, else `~/.cache/trace/judge`.
pub fn default_cache_dir() -> Option<PathBuf> {
    let base = std::env::var_os("XDG_CACHE_HOME").filter(|dir| !dir.is_empty()).map(PathBuf::from).or_else(|| {
        std::env::var_os("HOME").filter(|dir| !dir.is_empty()).map(|home| PathBuf::from(home).join(".cache"))
    })?;
    Some(base.join("trace").join("judge"))
}

fn read_cached(path: &Path) -> Option<String> {
    let bytes = std::fs::read(path).ok()?;
    match serde_json::from_slice::<CachedReply>(&bytes) {
        Ok(entry) => Some(entry.reply),
        Err(error) => {
            tracing::warn!("ignoring the unreadable judge cache entry {}: {error}", path.display());
            None
        }
    }
}

/// Written whole or not at all: episodes running in parallel may answer the same question.
fn write_cached(path: &Path, entry: &CachedReply) -> Result<()> {
    let dir = path.parent().context("a cache entry is inside the cache")?;
    let mut file = tempfile::NamedTempFile::new_in(dir)?;
    serde_json::to_writer_pretty(&mut file, entry)?;
    file.persist(path).with_context(|| format!("cannot write {}", path.display()))?;
    Ok(())
}

/// Asks the judge about an episode and records its verdicts in `result`: the binary judge, the checkpoint
/// judge (in order, stopping at the first missed) and the rubric's text items, whose verdicts enter the
/// rubric's scores and the SPL. A failure stops the asking and is kept in `judge.error`, with the verdicts
/// given before it.
pub async fn judge_episode(
    judge: &Judge,
    episode: &Episode<'_>,
    checkpoints: &[Checkpoint],
    rubric: Option<&Rubric>,
    result: &mut EvalResult,
) {
    let mut scores = JudgeScores {
        model: judge.model.clone(),
        success: None,
        checkpoints: Vec::new(),
        partial_credit: 0.0,
        cached: 0,
        asked: 0,
        error: None,
    };
    let mut rubric_verdicts = Vec::new();
    if let Err(error) = ask_all(judge, episode, checkpoints, rubric, &mut scores, &mut rubric_verdicts).await {
        tracing::warn!("the judge failed on {}: {error:#}", result.task_id);
        scores.error = Some(format!("{error:#}"));
    }
    let reached = scores.checkpoints.iter().take_while(|c| c.verdict.satisfied).count();
    scores.partial_credit = if checkpoints.is_empty() { 1.0 } else { reached as f64 / checkpoints.len() as f64 };
    for (id, verdict) in rubric_verdicts {
        if let Some(outcome) = result.rubric.items.iter_mut().find(|outcome| outcome.id == id) {
            outcome.satisfied = Some(verdict.satisfied);
            outcome.evidence = Some(verdict.reason);
            outcome.judged_by = Some(judge.model.clone());
        }
    }
    score::total_rubric(&mut result.rubric);
    result.spl = score::spl(&result.rubric, result.steps);
    result.judge = Some(scores);
}

async fn ask_all(
    judge: &Judge,
    episode: &Episode<'_>,
    checkpoints: &[Checkpoint],
    rubric: Option<&Rubric>,
    scores: &mut JudgeScores,
    rubric_verdicts: &mut Vec<(String, JudgeVerdict)>,
) -> Result<()> {
    scores.success = Some(ask_counted(judge, &episode.success_question(), scores).await?);
    for checkpoint in checkpoints {
        let verdict = ask_counted(judge, &episode.checkpoint_question(checkpoint), scores).await?;
        let reached = verdict.satisfied;
        scores.checkpoints.push(JudgedCheckpoint { id: checkpoint.id.clone(), verdict });
        if !reached {
            break;
        }
    }
    for item in rubric.map(|rubric| rubric.items.as_slice()).unwrap_or_default() {
        if let Some(question) = episode.rubric_question(item) {
            rubric_verdicts.push((item.id.clone(), ask_counted(judge, &question, scores).await?));
        }
    }
    Ok(())
}

async fn ask_counted(judge: &Judge, question: &Question, scores: &mut JudgeScores) -> Result<JudgeVerdict> {
    let (verdict, cached) = judge.ask(question).await?;
    if cached {
        scores.cached += 1;
    } else {
        scores.asked += 1;
    }
    Ok(verdict)
}
