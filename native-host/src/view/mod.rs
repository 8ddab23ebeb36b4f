//! `trace-host view`: a local, read-only web app to look at recordings and agents' runs.
//!
//! It listens on 127.0.0.1 only, at a random port unless `--port` says otherwise, and answers only requests
//! whose path starts with its token: every URL of the app is under `/<token>/`, and anything else is not
//! found. The token lives in the path, never in a cookie: browsers send a cookie of 127.0.0.1 to every port
//! of it, so any other local server a page of the viewer reached would have received the key to it.
//! Responses say `Referrer-Policy: no-referrer`, so that a link out of a bundle's page carries no URL (nor
//! the token in it) to where it leads. What it shows:
//! - the data directory's tasks, or a run's tasks (`trace-replay eval`'s output), filterable;
//! - a recording ([`recording::Recording`]): its steps with screenshots and the target's box, its network
//!   entries with headers and bodies and how replay answers each, its DOM snapshots (rendered in a sandbox,
//!   scripts off, with the recording's stylesheets and images, [`snapshot`]) and accessibility trees,
//!   checkpoints with their evidence, credentials (names only), console messages, cookies and web storage.
//!
//! Pages are rendered on the server ([`pages`]); there is no script. A bundle is read in place (a zip is
//! never unpacked to disk) and never written to. Files of a bundle are served under a `sandbox` content
//! security policy, so that nothing a stranger's bundle holds runs as the app; only files in its folders
//! (screenshots, snapshots, bodies) are, never its top-level documents, which hold the typed credentials
//! ([`recording::Recording::file`]). What one request reads of a file is capped, whatever the bundle
//! declares of its sizes.

mod pages;
mod pretty;
pub(crate) mod recording;
mod snapshot;

use std::collections::HashMap;
use std::net::SocketAddr;
use std::path::{Path, PathBuf};
use std::sync::{Arc, Mutex};

use anyhow::{Context, Result};
use axum::Router;
use axum::extract::{Path as UrlPath, Query, State};
use axum::http::{HeaderValue, StatusCode, header};
use axum::middleware;
use axum::response::{IntoResponse, Redirect, Response};
use axum::routing::get;
use serde::Deserialize;
use trace_analysis::accessibility::{self, Outline};
use trace_manifest::eval::{DEMONSTRATION_FILE, EvalResult, RESULT_FILE, RESULTS_FILE, SESSION_DIR};
use trace_manifest::task::TaskId;
use trace_manifest::trajectory::Trajectory;

use crate::paths::DataDir;
use crate::tasks::{self, TaskRow};
pub use pages::NetworkFilter;
use recording::Recording;

/// The policy of the app's own pages: nothing from elsewhere, no script.
const APP_POLICY: &str =
    "default-src 'none'; img-src 'self' data:; style-src 'unsafe-inline'; frame-src 'self'; form-action 'self'";
/// The policy of a bundle's files: a sandbox (no script, its own origin), nothing fetched.
const FILE_POLICY: &str = "sandbox; default-src 'none'; img-src data:; style-src 'unsafe-inline'";
/// The policy of a rendered DOM snapshot: as a file's, with the inlined stylesheets, fonts and images.
const SNAPSHOT_POLICY: &str =
    "sandbox; default-src 'none'; img-src data:; style-src 'unsafe-inline' data:; font-src data:; media-src data:";
/// The most of a body read to show it on its request's page (which shows 200,000 characters of it).
const MAX_SHOWN_BODY_BYTES: usize = 4 << 20;

/// What is being looked at.
#[derive(Debug, Clone)]
pub enum Target {
    /// The data directory's recordings.
    Tasks(PathBuf),
    /// One bundle, a zip or a directory.
    Bundle(PathBuf),
    /// A run of `trace-replay eval`: its results and each agent's session.
    Run(PathBuf),
}

impl Target {
    /// What `trace-host view [WHAT]` names: nothing (the data directory), a task id of it, a bundle (zip or
    /// directory), or a run directory (with `results.jsonl`).
    pub fn resolve(what: Option<&str>, data: &DataDir) -> Result<(Target, Option<String>)> {
        let Some(what) = what else { return Ok((Target::Tasks(data.root().to_owned()), None)) };
        let path = Path::new(what);
        if path.is_dir() && path.join(RESULTS_FILE).exists() {
            return Ok((Target::Run(path.to_owned()), None));
        }
        if path.exists() {
            return Ok((Target::Bundle(path.to_owned()), Some(BUNDLE_KEY.to_owned())));
        }
        let id: TaskId =
            what.parse().map_err(|_| anyhow::anyhow!("{what} is neither a file, a directory nor a task id"))?;
        anyhow::ensure!(data.capture(&id).exists(), "no task {what} in {}", data.root().display());
        Ok((Target::Tasks(data.root().to_owned()), Some(id.to_string())))
    }
}

/// The key of the one recording of [`Target::Bundle`].
const BUNDLE_KEY: &str = "bundle";

pub struct Options {
    /// 0 for any free port.
    pub port: u16,
    /// Stop once no request has come for this long.
    pub stop_when_idle: Option<std::time::Duration>,
}

struct App {
    target: Target,
    /// `/<token>`: the path every URL of the app starts with.
    root: String,
    /// Recordings opened so far, by key.
    recordings: Mutex<HashMap<String, Arc<Recording>>>,
}

/// Starts the viewer and serves until the process is stopped. `ready` receives the URL to open (with its
/// token) once the app listens.
pub async fn serve(target: Target, first: Option<String>, options: Options, ready: impl FnOnce(&str)) -> Result<()> {
    let root = format!("/{}", random_token()?);
    let app = Arc::new(App { target, root: root.clone(), recordings: Mutex::new(HashMap::new()) });
    let last_request = Arc::new(Mutex::new(std::time::Instant::now()));
    let seen = last_request.clone();
    // Every route is under the token: a request without it matches none and is answered by the fallback,
    // whatever else it carries.
    let router = Router::new()
        .route(&format!("{root}/"), get(index))
        .route(&format!("{root}/r/{{key}}/"), get(recording_page))
        .route(&format!("{root}/r/{{key}}/network"), get(network_page))
        .route(&format!("{root}/r/{{key}}/compare"), get(comparison_page))
        .route(&format!("{root}/r/{{key}}/state"), get(state_page))
        .route(&format!("{root}/r/{{key}}/network/{{index}}"), get(entry_page))
        .route(&format!("{root}/r/{{key}}/file/{{*path}}"), get(bundle_file))
        .route(&format!("{root}/r/{{key}}/snapshot/{{*path}}"), get(rendered_snapshot))
        .fallback(not_here)
        .layer(middleware::map_response(no_referrer))
        .layer(middleware::map_request(move |request: axum::extract::Request| {
            *seen.lock().unwrap_or_else(|p| p.into_inner()) = std::time::Instant::now();
            std::future::ready(request)
        }))
        .with_state(app);
    let listener = tokio::net::TcpListener::bind(SocketAddr::from(([127, 0, 0, 1], options.port)))
        .await
        .with_context(|| format!("cannot listen on 127.0.0.1:{}", options.port))?;
    let address = listener.local_addr()?;
    let start = first.map_or_else(String::new, |key| format!("r/{key}/"));
    ready(&format!("http://{address}{root}/{start}"));
    let idle = options.stop_when_idle;
    axum::serve(listener, router)
        .with_graceful_shutdown(async move {
            match idle {
                Some(idle) => until_idle(&last_request, idle).await,
                None => std::future::pending().await,
            }
        })
        .await
        .context("the viewer stopped")
}

/// Returns once no request has come for `idle` (`last_request` is when the latest came).
async fn until_idle(last_request: &Mutex<std::time::Instant>, idle: std::time::Duration) {
    loop {
        let since = last_request.lock().unwrap_or_else(|p| p.into_inner()).elapsed();
        if since >= idle {
            return;
        }
        tokio::time::sleep(idle - since).await;
    }
}

fn random_token() -> Result<String> {
    let mut bytes = [0u8; 16];
    getrandom::fill(&mut bytes).map_err(|error| anyhow::anyhow!("no randomness for the token: {error}"))?;
    Ok(hex::encode(bytes))
}

/// Any request no route answers; among them every one whose path does not start with the token.
async fn not_here() -> Response {
    let said = "Nothing here: this viewer answers only under the URL it printed, whose path starts with its token.";
    (StatusCode::NOT_FOUND, said).into_response()
}

/// Keeps the URL, and so the token, out of the `Referer` of whatever a page leads to: a link in a
/// snapshot or a body may point at another server of this machine.
async fn no_referrer(mut response: Response) -> Response {
    response.headers_mut().insert(header::REFERRER_POLICY, HeaderValue::from_static("no-referrer"));
    response
}

/// A page of the app, or a clear page saying what went wrong.
type PageResult = std::result::Result<Response, Failure>;

struct Failure(StatusCode, String);

impl From<anyhow::Error> for Failure {
    fn from(error: anyhow::Error) -> Failure {
        Failure(StatusCode::UNPROCESSABLE_ENTITY, format!("{error:#}"))
    }
}

impl IntoResponse for Failure {
    fn into_response(self) -> Response {
        app_page(self.0, pages::failure(&self.1))
    }
}

fn not_found(what: &str) -> Failure {
    Failure(StatusCode::NOT_FOUND, format!("{what} is not here"))
}

fn app_page(status: StatusCode, markup: maud::Markup) -> Response {
    let mut response = (status, markup).into_response();
    response.headers_mut().insert(header::CONTENT_SECURITY_POLICY, HeaderValue::from_static(APP_POLICY));
    response
}

impl App {
    /// Where the pages of the recording `key` are.
    fn urls(&self, key: &str) -> pages::RecordingUrls {
        pages::RecordingUrls::new(&self.root, key)
    }

    fn in_run(&self) -> bool {
        matches!(self.target, Target::Run(_))
    }

    /// The bundle a key names: a task's capture, the one bundle, or a run task's session.
    fn bundle_path(&self, key: &str) -> Option<PathBuf> {
        match &self.target {
            Target::Bundle(path) => (key == BUNDLE_KEY).then(|| path.clone()),
            Target::Tasks(root) => {
                let id: TaskId = key.parse().ok()?;
                Some(DataDir::at(root.clone()).ok()?.capture(&id))
            }
            Target::Run(run) => {
                let id: TaskId = key.parse().ok()?;
                Some(run.join(id.as_str()).join(SESSION_DIR))
            }
        }
    }

    /// The recording a key names, opened once (on a blocking thread: a large zip takes a while).
    async fn recording(&self, key: &str) -> std::result::Result<Arc<Recording>, Failure> {
        if let Some(recording) = self.recordings.lock().unwrap_or_else(|p| p.into_inner()).get(key) {
            return Ok(recording.clone());
        }
        let path = self.bundle_path(key).filter(|path| path.exists()).ok_or_else(|| not_found(key))?;
        let opened = tokio::task::spawn_blocking(move || Recording::open(&path))
            .await
            .map_err(|error| Failure(StatusCode::INTERNAL_SERVER_ERROR, error.to_string()))??;
        let recording = Arc::new(opened);
        self.recordings.lock().unwrap_or_else(|p| p.into_inner()).insert(key.to_owned(), recording.clone());
        Ok(recording)
    }
}

#[derive(Deserialize, Default)]
struct IndexQuery {
    #[serde(default)]
    q: String,
}

async fn index(State(app): State<Arc<App>>, Query(query): Query<IndexQuery>) -> PageResult {
    match &app.target {
        Target::Bundle(_) => Ok(Redirect::to(&format!("{}/r/{BUNDLE_KEY}/", app.root)).into_response()),
        Target::Tasks(root) => {
            let data = DataDir::at(root.clone())?;
            let tasks: Vec<TaskRow> = tasks::tasks_as_recorded(&data)?;
            Ok(app_page(StatusCode::OK, pages::tasks(&app.root, &tasks, &query.q)))
        }
        Target::Run(run) => {
            let results = read_results(run)?;
            Ok(app_page(StatusCode::OK, pages::run(&app.root, run, &results, &query.q)))
        }
    }
}

fn read_results(run: &Path) -> Result<Vec<EvalResult>> {
    let path = run.join(RESULTS_FILE);
    let text = std::fs::read_to_string(&path).with_context(|| format!("cannot read {}", path.display()))?;
    // A line cut short by a stopped run is left out, as `trace-replay` leaves it out.
    Ok(text.lines().filter_map(|line| serde_json::from_str(line).ok()).collect())
}

#[derive(Deserialize, Default)]
struct StepQuery {
    step: Option<usize>,
}

async fn recording_page(
    State(app): State<Arc<App>>,
    UrlPath(key): UrlPath<String>,
    Query(query): Query<StepQuery>,
) -> PageResult {
    let recording = app.recording(&key).await?;
    let selected =
        query.step.filter(|step| *step < recording.steps.len()).or((!recording.steps.is_empty()).then_some(0));
    let accessibility = selected.map(|step| accessibility_of(&recording, step)).transpose()?.flatten();
    Ok(app_page(
        StatusCode::OK,
        pages::recording(&app.urls(&key), &recording, selected, accessibility.as_ref(), app.in_run()),
    ))
}

/// The accessibility tree of step `step`'s DOM snapshot, when one was captured.
fn accessibility_of(recording: &Recording, step: usize) -> Result<Option<Outline>> {
    let Some(file) = recording.steps[step].dom_snapshot.as_deref() else { return Ok(None) };
    let Some(tree) = recording.snapshots.get(file).and_then(|snapshot| snapshot.accessibility_file.as_deref()) else {
        return Ok(None);
    };
    let Some(bytes) = recording.file(tree)? else { return Ok(None) };
    let nodes: serde_json::Value = serde_json::from_slice(&bytes).with_context(|| format!("{tree} does not parse"))?;
    Ok(Some(accessibility::outline(&nodes)))
}

async fn network_page(
    State(app): State<Arc<App>>,
    UrlPath(key): UrlPath<String>,
    Query(filter): Query<NetworkFilter>,
) -> PageResult {
    let recording = app.recording(&key).await?;
    Ok(app_page(StatusCode::OK, pages::network(&app.urls(&key), &recording, &filter, app.in_run())))
}

async fn entry_page(State(app): State<Arc<App>>, UrlPath((key, index)): UrlPath<(String, usize)>) -> PageResult {
    let recording = app.recording(&key).await?;
    if index >= recording.entries.len() {
        return Err(not_found(&format!("request {index}")));
    }
    let body = recording.response_body(index, MAX_SHOWN_BODY_BYTES)?;
    Ok(app_page(StatusCode::OK, pages::entry(&app.urls(&key), &recording, index, body.as_ref(), app.in_run())))
}

async fn state_page(State(app): State<Arc<App>>, UrlPath(key): UrlPath<String>) -> PageResult {
    let recording = app.recording(&key).await?;
    Ok(app_page(StatusCode::OK, pages::state(&app.urls(&key), &recording, app.in_run())))
}

/// A task of a run: the agent's episode beside the person's demonstration.
async fn comparison_page(State(app): State<Arc<App>>, UrlPath(key): UrlPath<String>) -> PageResult {
    let Target::Run(run) = &app.target else { return Err(not_found("a comparison outside a run")) };
    let id: TaskId = key.parse().map_err(|_| not_found(&key))?;
    let dir = run.join(id.as_str());
    let result: EvalResult = read_json(&dir.join(RESULT_FILE))?.ok_or_else(|| not_found(&key))?;
    // Runs made before the demonstration was written beside the result show the agent alone.
    let person: Option<Trajectory> = read_json(&dir.join(DEMONSTRATION_FILE))?;
    let agent = app.recording(&key).await?;
    let person = person.map(|trajectory| trajectory.tool_calls).unwrap_or_default();
    Ok(app_page(StatusCode::OK, pages::comparison(&app.urls(&key), &result, &person, &agent)))
}

/// A JSON file of a run, `None` when it is not there.
fn read_json<T: serde::de::DeserializeOwned>(path: &Path) -> Result<Option<T>> {
    match std::fs::read(path) {
        Ok(bytes) => {
            Ok(Some(serde_json::from_slice(&bytes).with_context(|| format!("{} does not parse", path.display()))?))
        }
        Err(error) if error.kind() == std::io::ErrorKind::NotFound => Ok(None),
        Err(error) => Err(error).with_context(|| format!("cannot read {}", path.display())),
    }
}

/// A file of the bundle, as [`Recording::file`] gives it (never a top-level document), under the sandbox
/// policy.
async fn bundle_file(State(app): State<Arc<App>>, UrlPath((key, path)): UrlPath<(String, String)>) -> PageResult {
    let recording = app.recording(&key).await?;
    let bytes = recording.file(&path)?.ok_or_else(|| not_found(&path))?;
    Ok(sandboxed(bytes, content_type(&path), FILE_POLICY))
}

/// A DOM snapshot as the page looked: its stylesheets and images inlined from the recording, under the
/// sandbox policy.
async fn rendered_snapshot(State(app): State<Arc<App>>, UrlPath((key, path)): UrlPath<(String, String)>) -> PageResult {
    let recording = app.recording(&key).await?;
    let Some(snapshot) = recording.snapshots.get(&path) else { return Err(not_found(&path)) };
    let html = recording.file(&path)?.ok_or_else(|| not_found(&path))?;
    let (url, at) = (snapshot.url.clone(), snapshot.ts);
    let rendered = tokio::task::spawn_blocking(move || {
        snapshot::render(&String::from_utf8_lossy(&html), &url, &recording.responses_at(at))
    })
    .await
    .map_err(|error| Failure(StatusCode::INTERNAL_SERVER_ERROR, error.to_string()))?;
    Ok(sandboxed(rendered.into_bytes(), "text/html; charset=utf-8", SNAPSHOT_POLICY))
}

/// Content from a bundle as a response: of the type given (never sniffed), under `policy`.
fn sandboxed(body: Vec<u8>, content_type: &'static str, policy: &'static str) -> Response {
    let mut response = body.into_response();
    let headers = response.headers_mut();
    headers.insert(header::CONTENT_TYPE, HeaderValue::from_static(content_type));
    headers.insert(header::CONTENT_SECURITY_POLICY, HeaderValue::from_static(policy));
    headers.insert(header::X_CONTENT_TYPE_OPTIONS, HeaderValue::from_static("nosniff"));
    response
}

/// The type a bundle file is served as: images and snapshots as what they are, anything else as bytes.
fn content_type(path: &str) -> &'static str {
    match path.rsplit('.').next().unwrap_or_default() {
        "png" => "image/png",
        "jpg" | "jpeg" => "image/jpeg",
        "webp" => "image/webp",
        "html" => "text/html; charset=utf-8",
        "json" | "jsonl" | "har" => "application/json",
        _ => "application/octet-stream",
    }
}
