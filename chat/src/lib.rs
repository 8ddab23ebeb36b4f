//! An OpenAI-compatible chat model, asked where TRACE wants a model's words: the judge of `trace-replay eval
//! --judge`, the checkpoints proposed by `--llm`, and the definitions of `trace-host map --llm`. A crate of
//! its own, so that `trace-host` asks it without linking `trace-replay`'s browser driver. The endpoint is
//! `OPENAI_BASE_URL` (default OpenAI's) with `OPENAI_API_KEY` when it needs one; requests are made at
//! temperature 0, and every reply is kept in a cache keyed by the SHA-256 of the request it answers (model,
//! messages, temperature). The same question is therefore answered once, costs nothing the next time and
//! gives the same answer; the endpoint is not part of the key, so a cache can be shared by machines reaching
//! one model by different addresses.
//!
//! Transient failures (a refused connection, 429, 5xx) are retried twice, after 1 s and 4 s. A reply the
//! caller cannot read is not cached.

use std::path::{Path, PathBuf};
use std::time::Duration;

use anyhow::{Context, Result};
use serde::{Deserialize, Serialize};
use trace_bundle::archive::sha256_hex;
use trace_store::atomic;

/// OpenAI's, when `OPENAI_BASE_URL` is not set.
const DEFAULT_BASE_URL: &str = "https://api.openai.com/v1";
/// One request's limit: a model may think for a while.
const REQUEST_TIMEOUT: Duration = Duration::from_secs(120);
/// Waits before the retries of a transient failure.
const RETRY_WAITS: [Duration; 2] = [Duration::from_secs(1), Duration::from_secs(4)];

/// A model at an endpoint, with its cache.
#[derive(Debug)]
pub struct ChatModel {
    /// What the model is to the person (`judge`, `model`), in errors and the default cache's name.
    role: &'static str,
    model: String,
    /// `<base>/chat/completions`.
    endpoint: String,
    api_key: Option<String>,
    cache: PathBuf,
    client: reqwest::Client,
}

/// The request body, serialized once: its bytes are what is sent and what is hashed. The messages are the
/// caller's, in OpenAI's shape (`{"role": …, "content": …}`): the prompts are written where the questions
/// are (`trace_analysis::judge`).
#[derive(Serialize)]
struct ChatRequest<'a, M> {
    model: &'a str,
    messages: &'a [M],
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

/// A reply read by its caller, and where it came from.
pub struct Completion<T> {
    pub value: T,
    /// The SHA-256 of the request, which names its cache entry.
    pub input_hash: String,
    pub cached: bool,
}

impl ChatModel {
    /// `model` at `OPENAI_BASE_URL` (default OpenAI's), caching in `cache` (default
    /// [`default_cache_dir`] of `role`); `cache_flag` is the option a person gives a cache with.
    pub fn from_env(role: &'static str, model: &str, cache: Option<PathBuf>, cache_flag: &str) -> Result<ChatModel> {
        let base_url = std::env::var("OPENAI_BASE_URL").ok().filter(|url| !url.is_empty());
        let api_key = std::env::var("OPENAI_API_KEY").ok().filter(|key| !key.is_empty());
        let cache = match cache {
            Some(cache) => cache,
            None => default_cache_dir(role)
                .with_context(|| format!("no cache directory for the {role}: give {cache_flag}"))?,
        };
        ChatModel::new(role, model, base_url.as_deref().unwrap_or(DEFAULT_BASE_URL), api_key, cache)
    }

    pub fn new(
        role: &'static str,
        model: &str,
        base_url: &str,
        api_key: Option<String>,
        cache: PathBuf,
    ) -> Result<ChatModel> {
        anyhow::ensure!(!model.trim().is_empty(), "the {role} needs a model's name");
        let parsed =
            url::Url::parse(base_url).with_context(|| format!("the {role}'s base URL {base_url:?} is not a URL"))?;
        anyhow::ensure!(
            matches!(parsed.scheme(), "http" | "https"),
            "the {role}'s base URL {base_url:?} is not http(s)"
        );
        std::fs::create_dir_all(&cache)
            .with_context(|| format!("cannot create the {role}'s cache {}", cache.display()))?;
        let client = reqwest::Client::builder().timeout(REQUEST_TIMEOUT).build()?;
        Ok(ChatModel {
            role,
            model: model.to_owned(),
            endpoint: format!("{}/chat/completions", base_url.trim_end_matches('/')),
            api_key,
            cache,
            client,
        })
    }

    /// The model's name.
    pub fn model(&self) -> &str {
        &self.model
    }

    /// The reply to `messages`, from the cache or the model, as `read` reads it; a reply `read` refuses is
    /// an error and is not cached.
    pub async fn complete<T, M: Serialize>(
        &self,
        messages: &[M],
        read: impl FnOnce(&str) -> Result<T, String>,
    ) -> Result<Completion<T>> {
        let body = serde_json::to_vec(&ChatRequest { model: &self.model, messages, temperature: 0.0 })?;
        let input_hash = sha256_hex(&body);
        let cache_file = self.cache.join(format!("{input_hash}.json"));
        let (reply, cached) = match read_cached(&cache_file, self.role) {
            Some(reply) => (reply, true),
            None => (self.post(&body).await?, false),
        };
        let value = read(&reply).map_err(anyhow::Error::msg)?;
        if !cached {
            let entry = CachedReply { model: self.model.clone(), request: serde_json::from_slice(&body)?, reply };
            write_cached(&cache_file, &entry)?;
        }
        Ok(Completion { value, input_hash, cached })
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
                    let bytes =
                        response.bytes().await.with_context(|| format!("the {}'s answer was cut off", self.role))?;
                    let parsed: ChatResponse = serde_json::from_slice(&bytes).with_context(|| {
                        format!("the {} at {} did not answer as a chat completion", self.role, self.endpoint)
                    })?;
                    return parsed
                        .choices
                        .into_iter()
                        .next()
                        .and_then(|choice| choice.message.content)
                        .with_context(|| format!("the {} at {} answered with no message", self.role, self.endpoint));
                }
                Ok(response) => {
                    let status = response.status();
                    let text = response.text().await.unwrap_or_default();
                    let error = anyhow::anyhow!(
                        "the {} at {} answered {status}: {}",
                        self.role,
                        self.endpoint,
                        text.chars().take(300).collect::<String>()
                    );
                    if !(status.as_u16() == 429 || status.is_server_error()) {
                        return Err(error);
                    }
                    error
                }
                Err(error) if error.is_connect() || error.is_timeout() => {
                    anyhow::Error::new(error).context(format!("cannot reach the {} at {}", self.role, self.endpoint))
                }
                Err(error) => return Err(error).context(format!("cannot ask the {} at {}", self.role, self.endpoint)),
            };
            match waits.next() {
                Some(wait) => tokio::time::sleep(*wait).await,
                None => return Err(transient),
            }
        }
    }
}

/// `$XDG_CACHE_HOME/trace/<role>`, else `~/.cache/trace/<role>`.
pub fn default_cache_dir(role: &str) -> Option<PathBuf> {
    let base = std::env::var_os("XDG_CACHE_HOME").filter(|dir| !dir.is_empty()).map(PathBuf::from).or_else(|| {
        std::env::var_os("HOME").filter(|dir| !dir.is_empty()).map(|home| PathBuf::from(home).join(".cache"))
    })?;
    Some(base.join("trace").join(role))
}

fn read_cached(path: &Path, role: &str) -> Option<String> {
    let bytes = std::fs::read(path).ok()?;
    match serde_json::from_slice::<CachedReply>(&bytes) {
        Ok(entry) => Some(entry.reply),
        Err(error) => {
            tracing::warn!("ignoring the unreadable {role} cache entry {}: {error}", path.display());
            None
        }
    }
}

/// Written whole or not at all, under a partial name of its own ([`atomic::write_shared`]): episodes running
/// in parallel may ask the same question.
fn write_cached(path: &Path, entry: &CachedReply) -> Result<()> {
    atomic::write_shared(path, |out| Ok(serde_json::to_writer_pretty(out, entry)?)).map(drop)
}
