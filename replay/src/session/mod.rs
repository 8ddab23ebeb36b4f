//! The session of whoever drives a replay (an agent, or the person's demonstration re-run), recorded the
//! way the extension records a person, so that the code that processes a person's recording processes it
//! too: every request the browser made and how replay answered it (from [`crate::serve`]'s answers, which
//! see every request of every target), navigations with their cause, page loads, the actions the in-page
//! capture script (`trace_capture::actions`, the extension's own) reports, and a screenshot and a DOM
//! snapshot when a page loads, after actions, and at the end. [`SessionRecorder::finish`] writes it out
//! as a bundle directory: `events.jsonl`, `recording.har`, `manifest.json`, with the bodies, screenshots
//! and snapshots written as they came. What it keeps of the bodies has one budget ([`bodies`]): a page or
//! an agent that sends gigabytes costs the episode no more than the budget, and loses nothing else.

use std::collections::{BTreeMap, HashMap, HashSet};
use std::path::{Path, PathBuf};
use std::sync::{Arc, Mutex};
use std::time::Duration;

use anyhow::{Context, Result};
use chromiumoxide::cdp::browser_protocol::dom::{GetDocumentParams, GetOuterHtmlParams};
use chromiumoxide::cdp::browser_protocol::page::{
    AddScriptToEvaluateOnNewDocumentParams, CaptureScreenshotFormat, ClientNavigationReason, EventFrameAttached,
    EventFrameNavigated, EventFrameRequestedNavigation, EventLoadEventFired, EventNavigatedWithinDocument,
    NavigationType,
};
use chromiumoxide::cdp::js_protocol::runtime::{AddBindingParams, EventBindingCalled, EventExecutionContextCreated};
use chromiumoxide::page::ScreenshotParams;
use chromiumoxide::{Browser, Page};
use futures::StreamExt;
use tokio::sync::{mpsc, oneshot};
use trace_analysis::har;
use trace_bundle::archive::sha256_hex;
use trace_capture::actions::{self as capture, PageReport, TypingCoalescer};
use trace_manifest::bundle::{self, BundleManifest, Counts, FileEntry, ProducerInfo, TaskInfo};
use trace_manifest::eval::BodiesLeftOut;
use trace_manifest::event::{
    BodyPart, BodyStored, DomSnapshotStored, Event, EventKind, EventRecord, Header, ImageFormat, Navigation,
    NavigationCause, PageLoad, Request, RequestFailed, RequestFinished, Response, ScreenshotStored, TabEvent, TabOp,
    Viewport, WebSocketEvent, WebSocketOp, header_value,
};
use trace_manifest::har::Creator;
use trace_manifest::task::RecorderInfo;
use trace_manifest::time_fmt::{now_ms, rfc3339_from_millis};
use trace_store::atomic;

use bodies::{Bodies, BodySink};
pub use bodies::{Budget, Kept};

pub mod bodies;

/// How long after an action its capture waits, so that the page shows the action's effect (as the
/// extension waits).
const SETTLE: Duration = Duration::from_millis(500);

/// Where a request came from, as far as the session knows: its tab, and its frame unless the tab's main one.
#[derive(Debug, Clone, Default)]
pub struct Origin {
    pub tab_id: Option<i64>,
    pub frame_id: Option<String>,
}

/// An answer replay gave to one request ([`SessionRecorder::answered`]).
pub struct Answer<'a> {
    pub request_id: &'a str,
    pub url: &'a str,
    pub status: u16,
    pub status_text: &'a str,
    pub headers: Vec<Header>,
}

/// One session being recorded into a bundle directory.
pub struct SessionRecorder {
    dir: PathBuf,
    started_at_ms: f64,
    state: Mutex<State>,
    bodies: Bodies,
    captures: Captures,
}

/// What a capture of a page (after its load, after an act, at the end) keeps.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Captures {
    /// A screenshot and the DOM, as the extension records them.
    ScreenshotAndDom,
    /// The DOM alone: for a session judged by its checkpoints only (the audit's perturbed runs), which
    /// read the pages' text, never their pictures. A screenshot is most of a capture's processor time.
    DomOnly,
}

#[derive(Default)]
struct State {
    events: Vec<EventRecord>,
    typing: TypingCoalescer,
    /// The screenshots' and snapshots' files (the bodies' are [`Bodies`]'s).
    files: BTreeMap<String, FileEntry>,
    /// Pages watched, by target id (a page target's id is its main frame's id).
    watched: HashSet<String>,
    /// Tabs by target id, numbered from 1 as each first does something of the site's (the browser's own
    /// first tab, which never does, takes no number).
    tabs: HashMap<String, i64>,
    /// Subframes by frame id, with their tab's target id.
    frames: HashMap<String, String>,
    /// Actions recorded, typing coalesced.
    actions: usize,
    /// A capture is waiting to be taken, per target.
    capture_pending: HashSet<String>,
    /// Each watched page's door to its event loop, which answers once it has handled every event before.
    catch_up: Vec<mpsc::UnboundedSender<oneshot::Sender<()>>>,
}

impl SessionRecorder {
    /// Starts a session written into `dir`, which must not hold one already, keeping bodies within the
    /// default [`Budget`].
    pub fn create(dir: &Path) -> Result<Arc<SessionRecorder>> {
        SessionRecorder::create_with_budget(dir, Budget::default(), Captures::ScreenshotAndDom)
    }

    /// [`SessionRecorder::create`], keeping bodies within `budget` and of each capture what `captures` says.
    pub fn create_with_budget(dir: &Path, budget: Budget, captures: Captures) -> Result<Arc<SessionRecorder>> {
        if dir.join(bundle::MANIFEST_FILE).exists() {
            anyhow::bail!("{} already holds a session", dir.display());
        }
        for sub in [bundle::RESOURCES_DIR, bundle::SCREENSHOTS_DIR, bundle::DOM_DIR] {
            std::fs::create_dir_all(dir.join(sub)).with_context(|| format!("cannot create {}", dir.display()))?;
        }
        Ok(Arc::new(SessionRecorder {
            dir: dir.to_owned(),
            started_at_ms: now_ms(),
            state: Mutex::default(),
            bodies: Bodies::new(dir, budget),
            captures,
        }))
    }

    /// A sink for a body that arrives in pieces ([`SessionRecorder::request_kept`] takes what it kept).
    pub fn body_sink(&self) -> BodySink<'_> {
        self.bodies.sink()
    }

    /// The bodies left out so far, past the budget, if any were.
    pub fn bodies_left_out(&self) -> Option<BodiesLeftOut> {
        self.bodies.left_out()
    }

    pub fn dir(&self) -> &Path {
        &self.dir
    }

    /// Waits (10 s at most) until a page has loaded and been captured: what the browser did to open the
    /// start page is then all recorded, before the agent is let in.
    pub async fn until_first_capture(&self) {
        let deadline = std::time::Instant::now() + Duration::from_secs(10);
        while std::time::Instant::now() < deadline {
            let captured = self.lock().events.iter().any(
                |record| matches!(&record.event.kind, EventKind::DomSnapshot(snapshot) if snapshot.reason == "load"),
            );
            if captured {
                return;
            }
            tokio::time::sleep(Duration::from_millis(50)).await;
        }
    }

    /// Waits (`within` at most) until every page's watch has handled every event the browser sent before
    /// this call: a busy machine's watches lag behind the browser, and what they have not handled yet
    /// (the agent's last navigation) would miss the session's count of steps and its end.
    pub async fn caught_up(&self, browser: &Browser, within: Duration) {
        let waited = async {
            // A command's answer comes after every event the browser sent before it, on the one connection
            // events come by: once it is here, those events are in the watches' queues.
            let _ = browser.version().await;
            let doors = self.lock().catch_up.clone();
            for door in doors {
                let (done, answered) = oneshot::channel();
                if door.send(done).is_ok() {
                    let _ = answered.await;
                }
            }
        };
        if tokio::time::timeout(within, waited).await.is_err() {
            tracing::debug!("the session's watches did not catch up within {within:?}");
        }
    }

    /// The id the next event will have.
    pub fn next_event_id(&self) -> u64 {
        self.lock().events.len() as u64
    }

    /// The actions recorded so far (a run of typing counts once it is over).
    pub fn actions(&self) -> usize {
        self.lock().actions
    }

    fn lock(&self) -> std::sync::MutexGuard<'_, State> {
        // A panic elsewhere while holding the lock leaves the events as they were: keep them.
        self.state.lock().unwrap_or_else(std::sync::PoisonError::into_inner)
    }

    /// Records an event now, with its id.
    pub fn record(&self, origin: &Origin, kind: EventKind) -> u64 {
        let event = Event { ts: now_ms(), tab_id: origin.tab_id, frame_id: origin.frame_id.clone(), kind };
        let mut state = self.lock();
        push(&mut state, event)
    }

    /// Records an event whose file is named by its id: `write` gets the id, writes the file, and returns
    /// the event with the file's index entry.
    fn record_with_file(&self, write: impl FnOnce(u64) -> Result<(Event, FileEntry)>) -> Result<u64> {
        let mut state = self.lock();
        let id = state.events.len() as u64;
        let (event, entry) = write(id)?;
        state.files.insert(entry.path.clone(), entry);
        Ok(push_recorded(&mut state, event))
    }

    /// Writes `bytes` under `path` in the bundle; returns its index entry.
    fn write_file(&self, path: &str, bytes: &[u8]) -> Result<FileEntry> {
        let target = self.dir.join(path);
        // Whole or not at all: a session stopped mid-write (an episode's time limit, Ctrl+C) must leave no
        // half snapshot or screenshot for scoring to read (bodies are [`Bodies`]'s, renamed into place). Not synced (`atomic::write_unsynced`): the page
        // waits on its bodies being stored, and a session is scored on this machine when its episode
        // ends, so a power cut loses the episode whatever is on disk.
        atomic::write_unsynced(&target, |out| Ok(out.write_all(bytes)?))?;
        Ok(FileEntry { path: path.to_owned(), size: bytes.len() as u64, sha256: sha256_hex(bytes) })
    }

    /// Records what was kept of a body of `request_id` ([`Kept`]): a file, or its digest and size alone.
    fn record_body(&self, origin: &Origin, request_id: &str, part: BodyPart, kept: Kept) {
        let (sha256, size, omitted) = match kept {
            Kept::File { sha256, size } => (sha256, size, false),
            Kept::LeftOut { sha256, size } => (sha256, size, true),
            Kept::Empty | Kept::Text(_) => return,
        };
        let stored = BodyStored { request_id: request_id.to_owned(), part, sha256, size, omitted };
        self.record(origin, EventKind::Body(stored));
    }

    /// A request as the browser sent it, with its body as the session kept it through
    /// [`SessionRecorder::body_sink`]: small text inline in the event, as the extension records it,
    /// anything else a file (see [`bodies`]).
    pub fn request_kept(&self, origin: &Origin, request: Request, kept: Kept) {
        let request_id = request.request_id.clone();
        let post_data = match &kept {
            Kept::Text(text) => Some(text.clone()),
            _ => None,
        };
        self.record(origin, EventKind::Request(Request { post_data, ..request }));
        self.record_body(origin, &request_id, BodyPart::Request, kept);
    }

    /// The answer replay gave: status, headers and body; a redirect's hop stays open for the next request
    /// of the chain.
    pub fn response(&self, origin: &Origin, response: Response, body: &[u8]) -> Result<()> {
        let request_id = response.request_id.clone();
        let redirect = (300..400).contains(&response.status) && header_value(&response.headers, "location").is_some();
        self.record(origin, EventKind::Response(response));
        let kept = self.bodies.keep(body, false)?;
        self.record_body(origin, &request_id, BodyPart::Response, kept);
        if !redirect {
            let finished = RequestFinished { request_id, encoded_data_length: body.len() as u64 };
            self.record(origin, EventKind::RequestFinished(finished));
        }
        Ok(())
    }

    /// The answer replay gave, as the browser was handed it (over HTTP/1.1, its MIME type from its
    /// `Content-Type`).
    pub fn answered(&self, origin: &Origin, answer: Answer<'_>, body: &[u8]) -> Result<()> {
        let mime_type =
            header_value(&answer.headers, "content-type").map(trace_analysis::body::mime_essence).unwrap_or_default();
        let response = Response {
            request_id: answer.request_id.to_owned(),
            url: answer.url.to_owned(),
            status: answer.status,
            status_text: answer.status_text.to_owned(),
            protocol: Some("http/1.1".to_owned()),
            headers: answer.headers,
            mime_type,
            remote_ip_address: None,
            from_cache: false,
            timing: None,
        };
        self.response(origin, response, body)
    }

    /// A request replay failed (ignored, missed, failed as recorded), with the browser's error text.
    pub fn failed(&self, origin: &Origin, request_id: &str, error_text: &str) {
        let failed =
            RequestFailed { request_id: request_id.to_owned(), error_text: error_text.to_owned(), canceled: false };
        self.record(origin, EventKind::RequestFailed(failed));
    }

    /// The tab a page target is (see [`State::tabs`]).
    fn tab_of(&self, target_id: &str) -> i64 {
        tab_in(&mut self.lock(), target_id)
    }

    /// Where a request of `frame_id` comes from: a tab's main frame (whose id is the tab's target id), a
    /// known subframe, or somewhere unknown (a worker).
    pub fn origin_of_frame(&self, frame_id: Option<&str>) -> Origin {
        let Some(frame_id) = frame_id else { return Origin::default() };
        let mut state = self.lock();
        if state.watched.contains(frame_id) {
            return Origin { tab_id: Some(tab_in(&mut state, frame_id)), frame_id: None };
        }
        let tab_id = state.frames.get(frame_id).cloned().map(|target| tab_in(&mut state, &target));
        Origin { tab_id, frame_id: Some(frame_id.to_owned()) }
    }

    /// Writes `events.jsonl`, `recording.har` and `manifest.json` (last) and returns the events.
    pub fn finish(&self, task: TaskInfo, browser: Option<String>) -> Result<Vec<EventRecord>> {
        let (events, mut files) = {
            let mut state = self.lock();
            if let Some(held) = state.typing.flush() {
                state.actions += 1;
                push_recorded(&mut state, held);
            }
            (state.events.clone(), state.files.values().cloned().chain(self.bodies.files()).collect::<Vec<_>>())
        };
        self.bodies.clear_parts();
        let mut lines = Vec::new();
        for record in &events {
            serde_json::to_writer(&mut lines, record)?;
            lines.push(b'\n');
        }
        files.push(self.write_file(bundle::EVENTS_FILE, &lines)?);
        let producer = Creator { name: "trace-replay".to_owned(), version: env!("CARGO_PKG_VERSION").to_owned() };
        let browser_creator = browser.clone().map(|name| Creator { name, version: String::new() });
        let har = har::build(producer.clone(), browser_creator, &events);
        files.push(self.write_file(bundle::HAR_FILE, &serde_json::to_vec(&har)?)?);
        files.sort();
        let ended_at_ms = events.last().map_or(self.started_at_ms, |record| record.event.ts);
        let manifest = BundleManifest {
            format: bundle::FORMAT_NAME.to_owned(),
            format_version: trace_manifest::FORMAT_VERSION,
            task,
            recorder: RecorderInfo {
                name: "trace-replay".to_owned(),
                version: producer.version.clone(),
                browser,
                user_agent: None,
                platform: Some(std::env::consts::OS.to_owned()),
            },
            producer: ProducerInfo { name: producer.name, version: producer.version },
            started_at: rfc3339_from_millis(self.started_at_ms),
            ended_at: Some(rfc3339_from_millis(ended_at_ms)),
            duration_seconds: ((ended_at_ms - self.started_at_ms) / 1000.0).max(0.0),
            counts: Counts::of(&events),
            files,
            audit: None,
        };
        self.write_file(bundle::MANIFEST_FILE, &serde_json::to_vec_pretty(&manifest)?)?;
        Ok(events)
    }
}

/// Adds an event, actions through the typing coalescer (as the extension does). Returns the id the event
/// has, or will have once a run of typing is over.
fn push(state: &mut State, event: Event) -> u64 {
    if matches!(event.kind, EventKind::Action(_)) {
        let released = state.typing.push(event);
        let mut last = state.events.len() as u64;
        for event in released {
            state.actions += 1;
            last = push_recorded(state, event);
        }
        return last;
    }
    // A navigation or request of the typing's tab ends a run of typing, as the extension's recorder ends it.
    if let Some(held) = state.typing.end_before(std::slice::from_ref(&event)) {
        state.actions += 1;
        push_recorded(state, held);
    }
    push_recorded(state, event)
}

/// The tab of `target_id`, numbered now if it has no number yet; a tab after the first is recorded as
/// created.
fn tab_in(state: &mut State, target_id: &str) -> i64 {
    if let Some(tab) = state.tabs.get(target_id) {
        return *tab;
    }
    let tab = state.tabs.len() as i64 + 1;
    state.tabs.insert(target_id.to_owned(), tab);
    if tab > 1 {
        let created = TabEvent { op: TabOp::Created, opener_tab_id: None, url: None };
        push_recorded(state, Event { ts: now_ms(), tab_id: Some(tab), frame_id: None, kind: EventKind::Tab(created) });
    }
    tab
}

/// The browser's own pages (a new tab's, `about:blank`) are not the site's: nothing of them is recorded.
fn is_site(url: &str) -> bool {
    url.starts_with("http://") || url.starts_with("https://")
}

fn push_recorded(state: &mut State, event: Event) -> u64 {
    let id = state.events.len() as u64;
    state.events.push(EventRecord { id, event });
    id
}

/// Watches one page for the session: the capture script in its isolated world, its navigations and
/// loads, captures after its actions. Returns once the page is set up (before its next document); the
/// watch goes on until the page is gone.
pub async fn watch(session: Arc<SessionRecorder>, page: Page) -> Result<()> {
    let target_id: String = page.target_id().as_ref().to_owned();
    session.lock().watched.insert(target_id.clone());
    let main = {
        let session = session.clone();
        let target_id = target_id.clone();
        move || Origin { tab_id: Some(session.tab_of(&target_id)), frame_id: None }
    };
    let mut reports = page.event_listener::<EventBindingCalled>().await?;
    let mut contexts = page.event_listener::<EventExecutionContextCreated>().await?;
    let mut navigated = page.event_listener::<EventFrameNavigated>().await?;
    let mut within = page.event_listener::<EventNavigatedWithinDocument>().await?;
    let mut loaded = page.event_listener::<EventLoadEventFired>().await?;
    let mut attached = page.event_listener::<EventFrameAttached>().await?;
    let mut requested = page.event_listener::<EventFrameRequestedNavigation>().await?;
    let (door, mut catch_up) = mpsc::unbounded_channel::<oneshot::Sender<()>>();
    session.lock().catch_up.push(door);
    page.execute(
        AddBindingParams::builder()
            .name(capture::BINDING)
            .execution_context_name(capture::WORLD)
            .build()
            .map_err(anyhow::Error::msg)?,
    )
    .await?;
    // The recorded sockets the page opens and the frames it sends on them (`page/websocket.js`).
    page.execute(AddBindingParams::new(crate::page_scripts::SOCKET_BINDING)).await?;
    page.execute(
        AddScriptToEvaluateOnNewDocumentParams::builder()
            .source(capture::agent_capture_script())
            .world_name(capture::WORLD)
            .run_immediately(true)
            .build()
            .map_err(anyhow::Error::msg)?,
    )
    .await?;
    tokio::spawn(async move {
        // The capture script's contexts, by id, with their frame.
        let mut script_frames: HashMap<i64, String> = HashMap::new();
        // Why each frame's next document was asked for, when the page asked (a link, a form, a script).
        let mut asked_for: HashMap<String, ClientNavigationReason> = HashMap::new();
        let subframe =
            |frame: &str| Origin { tab_id: Some(session.tab_of(&target_id)), frame_id: Some(frame.to_owned()) };
        loop {
            tokio::select! {
                // In the order of the branches: the events come from one connection in the page's order, and
                // a navigation's request must be read before the navigation it explains (unbiased, a busy
                // machine saw a form's commit before its request, typed the form's navigation and gave the
                // next typed one the form's reason).
                biased;
                Some(context) = contexts.next() => {
                    if context.context.name == capture::WORLD
                        && let Some(frame) = context.context.aux_data.as_ref().and_then(|data| data["frameId"].as_str())
                    {
                        script_frames.insert(*context.context.id.inner(), frame.to_owned());
                    }
                }
                Some(report) = reports.next() => {
                    if report.name == crate::page_scripts::SOCKET_BINDING {
                        match socket_event(&report.payload) {
                            Some(socket) => {
                                session.record(&main(), EventKind::WebSocket(socket));
                            }
                            None => tracing::debug!("a socket report refused: {:.200}", report.payload),
                        }
                        continue;
                    }
                    if report.name != capture::BINDING {
                        continue;
                    }
                    let frame = script_frames.get(report.execution_context_id.inner()).filter(|frame| **frame != target_id);
                    match capture::parse_report(&report.payload) {
                        Ok(PageReport::Action { ts, action }) if is_site(&action.url) => {
                            let origin = frame.map_or_else(&main, |frame| subframe(frame));
                            let event = Event { ts, tab_id: origin.tab_id, frame_id: origin.frame_id, kind: EventKind::Action(action) };
                            let mut state = session.lock();
                            push(&mut state, event);
                            let first = state.capture_pending.insert(target_id.clone());
                            drop(state);
                            if first {
                                tokio::spawn(capture_after_action(session.clone(), page.clone()));
                            }
                        }
                        Ok(PageReport::Mutations { ts, summary }) => {
                            let origin = frame.map_or_else(&main, |frame| subframe(frame));
                            let event = Event { ts, tab_id: origin.tab_id, frame_id: origin.frame_id, kind: EventKind::DomMutations(summary) };
                            push(&mut session.lock(), event);
                        }
                        Ok(PageReport::Action { .. }) => {}
                        Ok(PageReport::Error { message, .. }) => tracing::debug!("the capture script failed: {message}"),
                        Err(reason) => tracing::debug!("a page report refused: {reason}"),
                    }
                }
                Some(request) = requested.next() => {
                    asked_for.insert(request.frame_id.as_ref().to_owned(), request.reason.clone());
                }
                Some(frame) = attached.next() => {
                    session.lock().frames.insert(frame.frame_id.as_ref().to_owned(), target_id.clone());
                }
                Some(navigation) = navigated.next() => {
                    let main_frame = navigation.frame.parent_id.is_none();
                    let asked = asked_for.remove(navigation.frame.id.as_ref());
                    let url = navigation.frame.url.clone() + navigation.frame.url_fragment.as_deref().unwrap_or_default();
                    if !is_site(&url) {
                        continue;
                    }
                    let cause = if navigation.r#type == NavigationType::BackForwardCacheRestore {
                        NavigationCause::BackForward
                    } else if main_frame {
                        cause_of(asked.as_ref())
                    } else {
                        NavigationCause::Other
                    };
                    let origin = if main_frame {
                        main()
                    } else {
                        session.lock().frames.insert(navigation.frame.id.as_ref().to_owned(), target_id.clone());
                        subframe(navigation.frame.id.as_ref())
                    };
                    session.record(&origin, EventKind::Navigation(Navigation { url, cause, main_frame }));
                }
                Some(navigation) = within.next() => {
                    if !is_site(&navigation.url) {
                        continue;
                    }
                    let main_frame = navigation.frame_id.as_ref() == target_id;
                    let origin = if main_frame { main() } else { subframe(navigation.frame_id.as_ref()) };
                    session.record(&origin, EventKind::Navigation(Navigation { url: navigation.url.clone(), cause: NavigationCause::Script, main_frame }));
                }
                load = loaded.next() => {
                    // The last branch to end: when it has, every stream before it has ended and been drained.
                    let Some(_) = load else { break };
                    tokio::spawn(record_load(session.clone(), page.clone()));
                }
                // Polled only when no event waits (the select is biased): everything before is handled.
                Some(done) = catch_up.recv() => {
                    let _ = done.send(());
                }
                else => break,
            }
        }
    });
    Ok(())
}

/// The cause of a navigation: the reason the page gave when it asked for it, or, when it did not (the
/// browser navigated: an agent's `Page.navigate`, as a person types an address), typed. Read from the
/// page's own events in their order, so that it does not depend on how fast they are handled.
fn cause_of(asked: Option<&ClientNavigationReason>) -> NavigationCause {
    match asked {
        None => NavigationCause::Typed,
        Some(ClientNavigationReason::AnchorClick | ClientNavigationReason::ScriptInitiated) => NavigationCause::Link,
        Some(ClientNavigationReason::FormSubmissionGet | ClientNavigationReason::FormSubmissionPost) => {
            NavigationCause::FormSubmit
        }
        Some(ClientNavigationReason::Reload) => NavigationCause::Reload,
        Some(ClientNavigationReason::HttpHeaderRefresh | ClientNavigationReason::MetaTagRefresh) => {
            NavigationCause::Redirect
        }
        Some(_) => NavigationCause::Other,
    }
}

/// A page's load: its URL and title recorded, then a capture. Apart from the page's watch, whose loop must
/// keep up with the browser: a busy machine takes seconds to capture, and a loop waiting for it would handle
/// what came meanwhile out of the browser's order (an action before the navigation that preceded it).
async fn record_load(session: Arc<SessionRecorder>, page: Page) {
    let (url, title) = location(&page).await;
    // Only now is the tab numbered: the browser's own first tab, which loads no page of the site, takes none.
    if !is_site(&url) {
        return;
    }
    let origin = Origin { tab_id: Some(session.tab_of(page.target_id().as_ref())), frame_id: None };
    session.record(&origin, EventKind::PageLoad(PageLoad { url, title, dom_content_loaded_ms: None, load_ms: None }));
    if let Err(error) = capture_page(&session, &page, "load").await {
        tracing::debug!("no capture of a tab at its load: {error:#}");
    }
}

async fn location(page: &Page) -> (String, String) {
    let value = page
        .evaluate("({url: location.href, title: document.title})")
        .await
        .ok()
        .and_then(|result| result.value().cloned())
        .unwrap_or_default();
    (value["url"].as_str().unwrap_or_default().to_owned(), value["title"].as_str().unwrap_or_default().to_owned())
}

/// The capture after a burst of actions in a tab: once the page has had [`SETTLE`] to react.
async fn capture_after_action(session: Arc<SessionRecorder>, page: Page) {
    tokio::time::sleep(SETTLE).await;
    session.lock().capture_pending.remove(page.target_id().as_ref());
    if let Err(error) = capture_page(&session, &page, "action").await {
        tracing::debug!("no capture of a tab after an action: {error:#}");
    }
}

/// A socket report of `page/websocket.js` (`{op: "opened", id, url}` or `{op: "sent", id, data}`) as the
/// recorder's event; `None` for anything else (the page can call the binding itself).
pub(crate) fn socket_event(payload: &str) -> Option<WebSocketEvent> {
    #[derive(serde::Deserialize)]
    struct Report {
        op: String,
        id: String,
        url: Option<String>,
        data: Option<String>,
    }
    // The script reports frames of 64 KiB at most; anything larger is not its report.
    if payload.len() > 1 << 17 {
        return None;
    }
    let report: Report = serde_json::from_str(payload).ok()?;
    let op = match report.op.as_str() {
        "opened" if report.url.is_some() => WebSocketOp::Opened,
        "sent" => WebSocketOp::Sent,
        _ => return None,
    };
    let opcode = (op == WebSocketOp::Sent).then_some(1);
    Some(WebSocketEvent { request_id: report.id, op, url: report.url, opcode, data: report.data })
}

/// The URL and the HTML, shadow roots included, of a tab's main frame's document. The document is named by
/// its backend node id, which lasts as long as the node: a node id lasts only until any client of the page
/// asks for the document again, as the runner and the recorder do at once.
pub async fn document_html(page: &Page) -> Result<(String, String)> {
    let root = page.execute(GetDocumentParams::builder().depth(0).build()).await?.result.root;
    let outer = GetOuterHtmlParams::builder().backend_node_id(root.backend_node_id).include_shadow_dom(true).build();
    let html = page.execute(outer).await?.result.outer_html;
    Ok((root.document_url.unwrap_or_default(), html))
}

/// A screenshot and a DOM snapshot of a tab's main frame, recorded as the extension records them (the DOM
/// alone under [`Captures::DomOnly`]; none of a page of the browser's own).
pub async fn capture_page(session: &SessionRecorder, page: &Page, reason: &str) -> Result<()> {
    let (url, html) = document_html(page).await?;
    if !is_site(&url) {
        return Ok(());
    }
    let tab_id = session.tab_of(page.target_id().as_ref());
    if session.captures == Captures::DomOnly {
        return session.dom_snapshot(now_ms(), Some(tab_id), url, &html, reason);
    }
    let png = page.screenshot(ScreenshotParams::builder().format(CaptureScreenshotFormat::Png).build()).await?;
    let viewport = page
        .evaluate("({width: innerWidth, height: innerHeight, dpr: devicePixelRatio})")
        .await
        .ok()
        .and_then(|result| result.value().cloned())
        .and_then(|value| {
            Some(Viewport {
                width: u32::try_from(value["width"].as_u64()?).ok()?,
                height: u32::try_from(value["height"].as_u64()?).ok()?,
                device_scale_factor: value["dpr"].as_f64()?,
            })
        });
    let ts = now_ms();
    session.record_with_file(|id| {
        let file = bundle::screenshot_path(id, "png");
        let entry = session.write_file(&file, &png)?;
        let kind = EventKind::Screenshot(ScreenshotStored {
            file: file.clone(),
            format: ImageFormat::Png,
            reason: reason.to_owned(),
            viewport,
            after_action_ts: None,
        });
        Ok((Event { ts, tab_id: Some(tab_id), frame_id: None, kind }, entry))
    })?;
    session.dom_snapshot(ts, Some(tab_id), url, &html, reason)?;
    Ok(())
}

impl SessionRecorder {
    /// Records a main frame's document (`html`, at `url`) as a DOM snapshot taken at `ts`.
    pub fn dom_snapshot(&self, ts: f64, tab_id: Option<i64>, url: String, html: &str, reason: &str) -> Result<()> {
        self.record_with_file(|id| {
            let file = bundle::dom_snapshot_path(id);
            let entry = self.write_file(&file, html.as_bytes())?;
            let kind = EventKind::DomSnapshot(DomSnapshotStored {
                url,
                reason: reason.to_owned(),
                file: file.clone(),
                accessibility_file: None,
                after_action_ts: None,
            });
            Ok((Event { ts, tab_id, frame_id: None, kind }, entry))
        })?;
        Ok(())
    }
}
