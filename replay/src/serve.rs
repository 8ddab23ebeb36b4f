//! The replayed browser: Chromium (launched by [`crate::chromium`]), with every request of every
//! target (tabs, popups, iframes in any process, workers) paused by the `Fetch` domain of the browser
//! session itself, and answered by the [`Responder`]. Nothing reaches the network unless the user allows
//! a fallback for misses. Before a page's own scripts run, it gets the determinism script, the recorded
//! storage and the recorded WebSockets; the recorded cookies are set before the first page opens. Every
//! attempt to leave the recording is counted as a live attempt, refused or not: a request to an origin the
//! recording never reached (with the fallback, any miss), and what `Fetch` cannot see: a WebSocket the
//! page opens for real (the recorded ones are played without one) and a WebRTC connection with ICE
//! servers or a remote candidate. A connection the browser opens ahead of a request (a preconnect)
//! carries none and is not counted; like every connection, it fails before a socket opens.
//! A launched browser ([`WarmBrowser`]) can serve one episode after another, each in a browser context of
//! its own that is discarded when it ends ([`Replay::end_episode`]), which is how [`crate::browsers`] keeps
//! browsers warm for a run of episodes. [`serve_until`] is `trace-replay serve`: the replay served to
//! whoever attaches until asked to stop.

use std::collections::HashSet;
use std::future::Future;
use std::path::{Path, PathBuf};
use std::sync::Arc;
use std::sync::atomic::{AtomicBool, Ordering};
use std::time::Duration;

use anyhow::{Context, Result};
use base64::Engine as _;
use chromiumoxide::cdp::browser_protocol::browser::BrowserContextId;
use chromiumoxide::cdp::browser_protocol::browser::CloseParams;
use chromiumoxide::cdp::browser_protocol::fetch::{
    ContinueRequestParams, EnableParams, EventRequestPaused, FailRequestParams, FulfillRequestParams, HeaderEntry,
    RequestPattern, RequestStage,
};
use chromiumoxide::cdp::browser_protocol::network::{
    ClearBrowserCacheParams, CookieParam, CookieSameSite, ErrorReason, EventWebSocketCreated, PostDataEntry,
    ResourceType, TimeSinceEpoch,
};
use chromiumoxide::cdp::browser_protocol::page::AddScriptToEvaluateOnNewDocumentParams;
use chromiumoxide::cdp::browser_protocol::storage::{
    ClearCookiesParams, ClearDataForOriginParams, GetCookiesParams, SetCookiesParams,
};
use chromiumoxide::cdp::browser_protocol::target::{
    AttachToTargetParams, CreateBrowserContextParams, CreateTargetParams, EventTargetCreated, GetBrowserContextsParams,
    TargetId,
};
use chromiumoxide::cdp::js_protocol::runtime::{AddBindingParams, EventBindingCalled};
use chromiumoxide::error::CdpError;
use chromiumoxide::{Browser, Page};
use futures::StreamExt;
use sha2::{Digest as _, Sha256};
use tokio::task::JoinHandle;
use trace_capture::storage as site_storage;
use trace_manifest::event::{StorageSnapshot, Viewport};

use crate::archive::ReplayArchive;
use crate::chromium::{self, Chromium, Launch};
use crate::matcher::{LARGE_BODY_BYTES, MatchKind, Request, RequestState, large_body_stand_in};
use crate::page_scripts;
use crate::responder::{Decision, Responder, Stats};
use crate::session::bodies::BodySink;
use crate::session::{self, Answer, Kept, Origin, SessionRecorder};
use trace_manifest::event::Header;

/// Where connections go when the network is off: a proxy whose name never resolves (see below).
const NOWHERE_PROXY: &str = "http://trace-offline.invalid:9";

#[derive(Debug, Clone)]
pub struct Options {
    /// The Chromium to drive; [`chromium::resolve`]d (`TRACE_CHROMIUM`, then Debian's) when `None`.
    pub chromium: Option<PathBuf>,
    pub headless: bool,
    /// The DevTools port agents attach to; a free one when `None`.
    pub cdp_port: Option<u16>,
    /// Let requests nothing recorded answers go to the live network (counted as live attempts).
    pub allow_network_fallback: bool,
    /// Start the clock at the recording's time and seed random numbers.
    pub determinism: bool,
}

impl Default for Options {
    fn default() -> Options {
        Options { chromium: None, headless: true, cdp_port: None, allow_network_fallback: false, determinism: true }
    }
}

impl Options {
    /// The options of a browser a command launches for a person or an agent: `chromium`, and without a
    /// window when `headless` is asked or when there is no display to open one on.
    pub fn launching(chromium: Option<PathBuf>, headless: bool) -> Options {
        Options { chromium, headless: headless || std::env::var_os("DISPLAY").is_none(), ..Options::default() }
    }
}

/// `trace-replay serve`: launches a browser serving `archive` (read from `bundle`), opens its start page,
/// and serves until `stop` resolves; then closes the browser and prints what was served.
pub async fn serve_until(
    bundle: &Path,
    archive: ReplayArchive,
    options: &Options,
    stop: impl Future<Output = Result<()>>,
) -> Result<()> {
    let start_url = archive.start_url().to_owned();
    let replay = Replay::launch(archive, options).await?;
    println!("serving {} at {start_url}", bundle.display());
    println!("DevTools endpoint: {}", replay.cdp_endpoint());
    println!("press Ctrl+C to stop");
    replay.open(&start_url).await?;
    stop.await?;
    let stats = replay.close().await?;
    print!("{stats}");
    Ok(())
}

/// What a page can store under its origin, as `Storage.clearDataForOrigin` names it.
const STORED_BY_ORIGINS: &str = "file_systems,indexeddb,local_storage,websql,service_workers,cache_storage";

/// A browser serving one bundle: a launched Chromium ([`WarmBrowser`]) and the episode it serves.
pub struct Replay {
    warm: WarmBrowser,
    /// The session recorded for an evaluation, when one is.
    session: Option<Arc<SessionRecorder>>,
    responder: Arc<Responder>,
    pages: Arc<PagePreparation>,
    /// The episode's own tasks: preparing its new pages.
    tasks: Vec<JoinHandle<()>>,
}

/// A launched Chromium, between the episodes it serves or in one ([`WarmBrowser::begin`]). On the
/// DevTools path, `Fetch` pauses every request of every target (tabs, popups, iframes in any process,
/// workers, in every browser context) on the browser's own session, for as long as the browser lives; each
/// paused request goes to the episode being served then ([`Serving`]), and between episodes, when no page
/// should ask for anything, it is refused.
pub struct WarmBrowser {
    browser: Arc<Browser>,
    /// Drives chromiumoxide's connection; runs until the browser is gone.
    handler: JoinHandle<()>,
    endpoint: String,
    /// The episode whose requests are answered now; `None` between episodes and on the proxy's path.
    serving: Arc<std::sync::RwLock<Option<Arc<Serving>>>>,
    /// Answers paused requests (the DevTools path).
    answering: Option<JoinHandle<()>>,
    /// What every page is shown at (the window's size): an episode is served by a browser launched for
    /// its recording's viewport.
    viewport: Option<Viewport>,
    /// Set as the browser is closed on purpose (see [`chromium::Chromium::closing`]).
    closing: Arc<AtomicBool>,
    /// Chromium's process: waited for on close, killed if the browser is dropped unclosed.
    process: chromium::BrowserProcess,
    _profile: Option<tempfile::TempDir>,
}

/// What answers the requests of the episode a browser serves.
struct Serving {
    responder: Arc<Responder>,
    session: Option<Arc<SessionRecorder>>,
    /// The head of every worker's script ([`devtools_scripts`]).
    worker_prelude: Option<Arc<String>>,
    allow_network_fallback: bool,
    /// The episode's browser context, whose cookies a request carries.
    context: Option<BrowserContextId>,
}

impl WarmBrowser {
    /// Launches Chromium for pages of `viewport`, with `Fetch` on for every request. Fails with the
    /// reason if Chromium is missing or cannot start, or the DevTools port is taken.
    pub async fn launch(options: &Options, viewport: Option<Viewport>) -> Result<WarmBrowser> {
        // Refused before anything else is set up, with what to do about it.
        chromium::find(options.chromium.as_deref())?;
        if let Some(port) = options.cdp_port {
            std::net::TcpListener::bind(("127.0.0.1", port))
                .with_context(|| format!("the DevTools port {port} is in use; choose another with --cdp-port"))?;
        }
        let flag = |name: &str, value: Option<&str>| (name.to_owned(), value.map(str::to_owned));
        // Every frame of a tab in the tab's process, cross-site iframes included, so that the page scripts
        // (determinism, storage) reach them as they reach the tab: a replay is a local copy of one site's
        // pages, not a browser to defend against them.
        let mut args = vec![flag("disable-site-isolation-trials", None)];
        if !options.allow_network_fallback {
            // Requests are answered before they reach the network, but Chromium also opens connections of
            // its own: ahead of requests (preconnects), for page WebSockets and WebRTC (which `Fetch` does
            // not see), and for services no flag turns off (a ListAccounts at start-up). Every one of them,
            // loopback included, goes through a proxy whose name resolves to nothing, as every name does:
            // it fails inside the browser, before any socket opens or any packet leaves. (A proxy on a
            // loopback port where nothing listened still received each attempt's connection.)
            args.push(flag("proxy-server", Some(NOWHERE_PROXY)));
            args.push(flag("proxy-bypass-list", Some("<-loopback>")));
            args.push(flag("host-resolver-rules", Some("MAP * ~NOTFOUND")));
        }
        let launch = Launch {
            chromium: options.chromium.clone(),
            headless: options.headless,
            args,
            disabled_features: vec!["IsolateOrigins".to_owned(), "site-per-process".to_owned()],
            port: options.cdp_port,
            viewport,
            ..Launch::default()
        };
        let mut warm = WarmBrowser::from(chromium::launch(&launch).await?, viewport);
        // Listen before enabling, so that no paused request goes unanswered.
        let paused = warm.browser.event_listener::<EventRequestPaused>().await?;
        warm.answering = Some(tokio::spawn(answer_requests(warm.browser.clone(), warm.serving.clone(), paused)));
        let pattern = RequestPattern::builder().url_pattern("*").request_stage(RequestStage::Request).build();
        warm.browser.execute(EnableParams::builder().pattern(pattern).build()).await.context("Fetch.enable")?;
        Ok(warm)
    }

    fn from(chromium: Chromium, viewport: Option<Viewport>) -> WarmBrowser {
        let Chromium { browser, handler, profile, closing, process } = chromium;
        let endpoint = browser.websocket_address().clone();
        WarmBrowser {
            browser: Arc::new(browser),
            handler,
            endpoint,
            serving: Arc::default(),
            answering: None,
            viewport,
            closing,
            process,
            _profile: profile,
        }
    }

    /// Whether an episode whose recording shows pages at `viewport` can be served by this browser.
    pub fn shows(&self, viewport: Option<Viewport>) -> bool {
        self.viewport == viewport
    }

    /// Serves `archive` from now, recording into `session`: its replayed clock starts now, in a browser
    /// context of its own when `own_context` (then [`Replay::end_episode`] gives the browser back for the
    /// next episode, which shares nothing with this one), else in the browser's default context.
    pub async fn begin(
        self,
        archive: Arc<ReplayArchive>,
        options: &Options,
        session: Option<Arc<SessionRecorder>>,
        own_context: bool,
    ) -> Result<Replay> {
        let started_ms = trace_manifest::time_fmt::now_ms();
        let responder = Arc::new(Responder::new(archive.clone(), started_ms));
        let (scripts, worker_prelude) = devtools_scripts(&archive, options.determinism, started_ms);
        let browser = self.browser.clone();
        let context = match own_context {
            true => Some(
                browser
                    .create_browser_context(CreateBrowserContextParams::default())
                    .await
                    .context("cannot create the episode's browser context")?,
            ),
            false => None,
        };
        *self.serving.write().expect("no panics while locked") = Some(Arc::new(Serving {
            responder: responder.clone(),
            session: session.clone(),
            worker_prelude,
            allow_network_fallback: options.allow_network_fallback,
            context: context.clone(),
        }));
        let created = browser.event_listener::<EventTargetCreated>().await?;
        if let Some(storage) = &archive.start_storage {
            // A cookie keeps the lifetime it had left when the recording started: one that would have
            // expired since (a month-long login replayed a year later) is not lost.
            let shift_seconds = ((trace_manifest::time_fmt::now_ms() - archive.started_at_ms) / 1000.0).max(0.0);
            let cookies: Vec<CookieParam> = storage.cookies.iter().map(|c| cookie_param(c, shift_seconds)).collect();
            if !cookies.is_empty() {
                // In the default context too, when the episode has its own: a tab an agent opens without
                // naming a context (`Target.createTarget`, as Puppeteer's `newPage` and browser-use's new
                // tabs do) opens there, and starts from the recording's cookies as the episode's pages do
                // (though not from what they have changed since).
                let contexts = if context.is_some() { vec![context.clone(), None] } else { vec![None] };
                for browser_context_id in contexts {
                    let set = SetCookiesParams { cookies: cookies.clone(), browser_context_id };
                    browser.execute(set).await.context("cannot restore the recorded cookies")?;
                }
            }
        }
        let pages = Arc::new(PagePreparation {
            scripts,
            context: context.clone(),
            responder: responder.clone(),
            session: session.clone(),
            watch_live_connections: true,
            prepared: tokio::sync::Mutex::default(),
            left_the_context: AtomicBool::new(false),
        });
        if let Some(storage) = &archive.start_storage {
            restore_databases(&browser, &pages, storage).await?;
        }
        if own_context {
            // The episode starts as a browser does, with one blank tab, and that tab is the context's: the
            // browser's own first one, in the default context, is closed.
            for page in browser.pages().await? {
                let _ = page.close().await;
            }
            // Prepared here, once open, as [`Replay::open`] prepares a tab. (Made by command and left to
            // the watch on new pages, it was prepared while still attaching, and an audit's run in it once
            // recorded no page at all.)
            pages.prepare(&pages.new_blank_page(&browser).await?).await?;
        }
        let tasks = vec![tokio::spawn(prepare_new_pages(browser, pages.clone(), created))];
        Ok(Replay { warm: self, session, responder, pages, tasks })
    }

    /// Leaves nothing of an episode in the browser's default context: the recording's cookies it was given,
    /// and when a page opened there (Playwright's `browser.contexts[0].new_page()` after `connect_over_cdp`
    /// opens there), its cookies, its HTTP cache, and everything `origins` stored (web storage, databases,
    /// caches, service workers). Offline, a page loads from nothing but the recording's origins, so those
    /// are all a page could have stored under.
    async fn wipe_default_context(&self, pages_opened: bool, origins: impl Iterator<Item = &str>) -> Result<()> {
        self.browser.execute(ClearCookiesParams::default()).await.context("cannot clear its cookies")?;
        if !pages_opened {
            return Ok(());
        }
        let page = self.browser.new_page("about:blank").await.context("cannot open a page in the default context")?;
        let wiped = async {
            page.execute(ClearBrowserCacheParams::default()).await.context("cannot clear its cache")?;
            for origin in origins {
                let clear = ClearDataForOriginParams::new(origin, STORED_BY_ORIGINS);
                page.execute(clear).await.with_context(|| format!("cannot clear what {origin} stored"))?;
            }
            anyhow::Ok(())
        }
        .await;
        let _ = page.close().await;
        wiped
    }

    /// Closes the browser and waits for its process.
    pub async fn close(self) {
        let WarmBrowser { browser, handler, answering, closing, mut process, .. } = self;
        if let Some(answering) = answering {
            answering.abort();
            let _ = answering.await;
        }
        closing.store(true, Ordering::SeqCst);
        // Requests still being answered hold the browser too, so it is closed by command rather than by
        // `Browser::close`, which needs it alone; the handler must run until the answer comes.
        let _ = tokio::time::timeout(Duration::from_secs(10), browser.execute(CloseParams::default())).await;
        // Then the process is waited for, so that it is not left to be killed.
        drop(browser);
        process.exited(Duration::from_secs(10)).await;
        let _ = tokio::time::timeout(Duration::from_secs(10), handler).await;
    }
}

impl Replay {
    /// Launches Chromium serving `archive` in its default browser context. Fails with the reason if
    /// Chromium is missing or cannot start, or the DevTools port is taken.
    pub async fn launch(archive: ReplayArchive, options: &Options) -> Result<Replay> {
        Replay::launch_recorded(archive, options, None).await
    }

    /// Launches as [`Replay::launch`] does, recording into `session` everything the browser is asked and
    /// does (see [`crate::session`]).
    pub async fn launch_recorded(
        archive: ReplayArchive,
        options: &Options,
        session: Option<Arc<SessionRecorder>>,
    ) -> Result<Replay> {
        let warm = WarmBrowser::launch(options, archive.viewport).await?;
        warm.begin(Arc::new(archive), options, session, false).await
    }

    /// Launches Chromium going through the proxy at `proxy_url` for every request (loopback included),
    /// trusting the certificates of the key `certificate_fingerprint` names: the browser BrowserGym's
    /// package gives an agent ([`crate::proxy`]). DevTools drives it (the person's re-run acts through it)
    /// but answers nothing: the proxy serves, puts its page scripts in and records the session. The
    /// replay's `responder` is the proxy's, so that the re-run waits on what it serves.
    pub async fn launch_through_proxy(
        proxy_url: &str,
        certificate_fingerprint: &str,
        responder: Arc<Responder>,
        options: &Options,
    ) -> Result<Replay> {
        chromium::find(options.chromium.as_deref())?;
        let flag = |name: &str, value: &str| (name.to_owned(), Some(value.to_owned()));
        let args = vec![
            flag("proxy-server", proxy_url),
            // Chromium sends loopback addresses past a proxy unless told not to; a recording of a local site
            // is served by the proxy as any other.
            flag("proxy-bypass-list", "<-loopback>"),
            flag("ignore-certificate-errors-spki-list", certificate_fingerprint),
        ];
        let viewport = responder.archive().viewport;
        let launch = Launch {
            chromium: options.chromium.clone(),
            headless: options.headless,
            args,
            port: options.cdp_port,
            viewport,
            ..Launch::default()
        };
        let warm = WarmBrowser::from(chromium::launch(&launch).await?, viewport);
        let browser = warm.browser.clone();
        let created = browser.event_listener::<EventTargetCreated>().await?;
        let pages = Arc::new(PagePreparation {
            // The re-run asks pages whether they have settled; every other page script is the proxy's.
            scripts: vec![page_scripts::SETTLE.to_owned()],
            context: None,
            responder: responder.clone(),
            session: None,
            watch_live_connections: false,
            prepared: tokio::sync::Mutex::default(),
            left_the_context: AtomicBool::new(false),
        });
        let tasks = vec![tokio::spawn(prepare_new_pages(browser, pages.clone(), created))];
        Ok(Replay { warm, session: None, responder, pages, tasks })
    }

    /// The DevTools endpoint agents connect to (Playwright's `connectOverCDP`, browser-use's `cdp_url`).
    pub fn cdp_endpoint(&self) -> &str {
        &self.warm.endpoint
    }

    pub fn browser(&self) -> &Browser {
        &self.warm.browser
    }

    pub fn responder(&self) -> &Responder {
        &self.responder
    }

    pub fn stats(&self) -> Stats {
        self.responder.stats()
    }

    pub fn session(&self) -> Option<&Arc<SessionRecorder>> {
        self.session.as_ref()
    }

    /// Every tab of the browser, each prepared (so that one an agent opened is observed too).
    pub async fn pages(&self) -> Result<Vec<Page>> {
        let pages = self.browser().pages().await?;
        for page in &pages {
            self.pages.prepare(page).await?;
        }
        Ok(pages)
    }

    /// Opens a tab at `url` in the episode's browser context, with the page scripts in place before its
    /// first document.
    pub async fn open(&self, url: &str) -> Result<Page> {
        let page = self.pages.new_blank_page(self.browser()).await?;
        self.pages.prepare(&page).await?;
        match page.goto(url).await {
            Ok(_) => {}
            // DevTools did not confirm the load in time: the page's own traffic held its connection up (a
            // page that posts large bodies as it loads), or the page never ends loading. It is open all the
            // same, and an agent is given it as it is rather than losing the episode.
            Err(CdpError::Timeout) => tracing::warn!("{url} did not finish loading within DevTools' timeout"),
            Err(error) => return Err(error).with_context(|| format!("cannot open {url}")),
        }
        Ok(page)
    }

    /// Ends an episode begun in a browser context of its own ([`WarmBrowser::begin`]): every tab closed
    /// (those an agent opened in the default context too), the context discarded with all it held
    /// (cookies, storage, databases, caches, service workers, history), as is any context an agent made,
    /// and the default context wiped of what it may have been given. Returns what was served, and the browser, ready for the next episode,
    /// unless it could not be made so (a browser an agent closed): it is then closed, and said in the log.
    pub async fn end_episode(mut self) -> (Stats, Option<WarmBrowser>) {
        self.stop_tasks().await;
        *self.warm.serving.write().expect("no panics while locked") = None;
        let stats = self.responder.stats();
        let Replay { warm, responder, pages, .. } = self;
        let ended = async {
            for page in warm.browser.pages().await? {
                let _ = page.close().await;
            }
            // The episode's context, and any an agent made for itself.
            let contexts =
                warm.browser.execute(GetBrowserContextsParams::default()).await.context("cannot list them")?;
            for context in contexts.result.browser_context_ids {
                warm.browser.dispose_browser_context(context).await.context("cannot discard a browser context")?;
            }
            let pages_opened = pages.left_the_context.load(Ordering::SeqCst);
            warm.wipe_default_context(pages_opened, responder.recorded_origins()).await
        };
        match ended.await {
            Ok(()) => (stats, Some(warm)),
            Err(error) => {
                tracing::warn!("a browser is not kept for the next episode: {error:#}");
                warm.close().await;
                (stats, None)
            }
        }
    }

    /// Closes the browser and returns what was served.
    pub async fn close(mut self) -> Result<Stats> {
        self.stop_tasks().await;
        let stats = self.responder.stats();
        self.warm.close().await;
        Ok(stats)
    }

    async fn stop_tasks(&mut self) {
        for task in self.tasks.drain(..) {
            task.abort();
            let _ = task.await;
        }
    }
}

/// The scripts of a replay through DevTools whose clock starts at `started_ms`: the page scripts (those of
/// [`page_scripts::for_archive`], the report of WebRTC connections and the re-run's settling probe), and
/// the prelude of every worker's script. Workers are targets the page scripts cannot be added to before
/// they run (chromiumoxide resumes them at once), so their scripts travel at the head of their own.
fn devtools_scripts(archive: &ReplayArchive, determinism: bool, started_ms: f64) -> (Vec<String>, Option<Arc<String>>) {
    let page_scripts::ReplayScripts { page: mut scripts, worker } =
        page_scripts::for_archive(archive, determinism, started_ms);
    // WebRTC connections are reported through a DevTools binding, which only this path has.
    scripts.push(page_scripts::live_connections());
    // And the human re-run, which only this path has, asks pages whether they have settled.
    scripts.push(page_scripts::SETTLE.to_owned());
    let prelude = (!worker.is_empty()).then(|| Arc::new(worker.join("\n")));
    (scripts, prelude)
}

/// Answers each paused request for the episode being served ([`WarmBrowser`]), concurrently: a large body
/// must not hold up the rest.
async fn answer_requests(
    browser: Arc<Browser>,
    serving: Arc<std::sync::RwLock<Option<Arc<Serving>>>>,
    mut paused: chromiumoxide::listeners::EventStream<EventRequestPaused>,
) {
    while let Some(event) = paused.next().await {
        let browser = browser.clone();
        let serving = serving.read().expect("no panics while locked").clone();
        tokio::spawn(async move {
            let Some(serving) = serving else {
                // Between episodes no page is open to ask; a request that comes all the same is refused.
                let _ = browser.execute(FailRequestParams::new(event.request_id.clone(), ErrorReason::Failed)).await;
                return;
            };
            if is_storage_page(&event.request.url) {
                let blank = FulfillRequestParams::builder()
                    .request_id(event.request_id.clone())
                    .response_code(200)
                    .response_headers([HeaderEntry { name: "Content-Type".into(), value: "text/html".into() }])
                    .body(String::new());
                if let Ok(blank) = blank.build() {
                    let _ = browser.execute(blank).await;
                }
                return;
            }
            let observed = serving.session.as_deref().map(|session| Observed::request(session, &event));
            let (id, url) = (event.request_id.clone(), event.request.url.clone());
            // Owned, so that its body is dropped once read rather than held until the answer.
            let event = Arc::unwrap_or_clone(event);
            if let Err(error) = answer(&browser, &serving, event, observed.as_ref()).await {
                // A paused request left unanswered would hold its page forever: fail it instead.
                tracing::warn!("cannot answer {url}: {error:#}");
                let _ = browser.execute(FailRequestParams::new(id, ErrorReason::Failed)).await;
            }
        });
    }
}

async fn answer(
    browser: &Browser,
    serving: &Serving,
    mut event: EventRequestPaused,
    observed: Option<&Observed<'_>>,
) -> Result<()> {
    let responder = &serving.responder;
    let worker_prelude = serving.worker_prelude.as_deref().map(String::as_str);
    // The body is read (and kept by the session) and dropped before the request waits for anything.
    let pieces = event.request.post_data_entries.take().unwrap_or_default();
    let (body, kept) = read_body(pieces, observed.map(|observed| observed.session.body_sink()))?;
    if let Some(observed) = observed {
        observed.sent(&event, kept.unwrap_or(Kept::Empty));
    }
    let event = &event;
    let request = &event.request;
    let content_type = header(&request.headers, "content-type");
    let accept = header(&request.headers, "accept");
    let authorization = header(&request.headers, "authorization");
    let id = event.request_id.clone();
    let mut asked = Request {
        method: &request.method,
        url: &request.url,
        body: (!body.is_empty()).then_some(body.as_slice()),
        content_type: content_type.as_deref(),
        state: None,
        accept: accept.as_deref(),
        authorization: authorization.as_deref(),
    };
    let state;
    if responder.depends_on_state(&asked) {
        state = browser_state(browser, request, serving.context.clone()).await;
        asked.state = Some(&state);
    }
    match responder.decide(&asked) {
        Decision::Answer { index, kind } => {
            if matches!(kind, MatchKind::Fuzzy { .. }) {
                responder.note_fuzzy_answer(&asked, index, event.resource_type == ResourceType::Document);
            }
            let response = responder.response(index)?;
            let headers: Vec<HeaderEntry> =
                response.headers.into_iter().map(|(name, value)| HeaderEntry { name, value }).collect();
            // DevTools reports a worker's script as "Other", with no `Sec-Fetch-Dest` at this stage: a
            // script that is neither a page's `<script>` nor a fetch is a worker's (or its `importScripts`).
            let is_javascript = headers.iter().any(|h| {
                h.name.eq_ignore_ascii_case("content-type") && h.value.to_ascii_lowercase().contains("javascript")
            });
            let is_worker_script = event.resource_type == ResourceType::Other && is_javascript;
            let body = match worker_prelude.filter(|_| is_worker_script && response.status == 200) {
                Some(prelude) => [prelude.as_bytes(), b"\n", response.body.as_slice()].concat(),
                None => response.body.to_vec(),
            };
            // Recorded before the browser has it: a redirect's next hop, which the browser asks for as soon
            // as it does, must come after this answer in the session, as it did in the recording.
            if let Some(observed) = observed {
                observed.answered(response.status, &response.status_text, &headers, &body)?;
            }
            let mut fulfill = FulfillRequestParams::builder()
                .request_id(id)
                .response_code(i64::from(response.status))
                .response_headers(headers)
                .body(base64::engine::general_purpose::STANDARD.encode(&body));
            if !response.status_text.is_empty() {
                fulfill = fulfill.response_phrase(response.status_text);
            }
            browser.execute(fulfill.build().map_err(anyhow::Error::msg)?).await?;
        }
        Decision::StreamOver { .. } => {
            if let Some(observed) = observed {
                observed.answered(204, "", &[], &[])?;
            }
            let over = FulfillRequestParams::builder().request_id(id).response_code(204).body(String::new());
            browser.execute(over.build().map_err(anyhow::Error::msg)?).await?;
        }
        Decision::RecordedFailure { .. } => fail(browser, id, ErrorReason::Failed, observed).await?,
        Decision::Ignored { .. } => fail(browser, id, ErrorReason::BlockedByClient, observed).await?,
        Decision::Miss if serving.allow_network_fallback => {
            responder.count_live_attempt(&request.method, &request.url);
            browser.execute(ContinueRequestParams::new(id)).await?;
        }
        Decision::Miss => {
            // Refused all the same; but a request to an origin the recording never reached is the page
            // trying to leave it, not a gap in it (see `crate::responder`).
            if !responder.recording_reached_origin_of(&request.url) {
                responder.count_live_attempt(&request.method, &request.url);
            }
            fail(browser, id, ErrorReason::InternetDisconnected, observed).await?
        }
    }
    Ok(())
}

async fn fail(
    browser: &Browser,
    id: chromiumoxide::cdp::browser_protocol::fetch::RequestId,
    reason: ErrorReason,
    observed: Option<&Observed<'_>>,
) -> Result<()> {
    if let Some(observed) = observed {
        observed.failed(&reason);
    }
    browser.execute(FailRequestParams::new(id, reason)).await?;
    Ok(())
}

/// One paused request as the session records it: the browser's id for its exchange (shared by the hops
/// of a redirect chain, as in a person's recording) and where it came from.
struct Observed<'s> {
    session: &'s SessionRecorder,
    origin: Origin,
    request_id: String,
    url: String,
}

impl<'s> Observed<'s> {
    fn request(session: &'s SessionRecorder, event: &EventRequestPaused) -> Observed<'s> {
        let request_id = match &event.network_id {
            Some(id) => id.inner().clone(),
            None => format!("fetch-{}", event.request_id.inner()),
        };
        Observed {
            session,
            origin: session.origin_of_frame(Some(event.frame_id.as_ref())),
            request_id,
            url: event.request.url.clone(),
        }
    }

    fn sent(&self, event: &EventRequestPaused, body: Kept) {
        let headers = header_pairs(&event.request.headers).map(|(name, value)| Header::new(name, value)).collect();
        let request = trace_manifest::event::Request {
            request_id: self.request_id.clone(),
            url: self.url.clone(),
            method: event.request.method.clone(),
            headers,
            post_data: None,
            resource_type: Some(event.resource_type.as_ref().to_owned()),
        };
        self.session.request_kept(&self.origin, request, body);
    }

    fn answered(&self, status: u16, status_text: &str, headers: &[HeaderEntry], body: &[u8]) -> Result<()> {
        let headers = headers.iter().map(|h| Header::new(&h.name, &h.value)).collect();
        let answer = Answer { request_id: &self.request_id, url: &self.url, status, status_text, headers };
        self.session.answered(&self.origin, answer, body)
    }

    fn failed(&self, reason: &ErrorReason) {
        let error_text = match reason {
            ErrorReason::BlockedByClient => "net::ERR_BLOCKED_BY_CLIENT",
            ErrorReason::InternetDisconnected => "net::ERR_INTERNET_DISCONNECTED",
            _ => "net::ERR_FAILED",
        };
        self.session.failed(&self.origin, &self.request_id, error_text);
    }
}

/// The path of the blank page in which an origin's databases are put back: answered by the replay itself,
/// never from the recording, and neither counted nor part of an agent's session.
const STORAGE_PAGE_PATH: &str = "/__trace_replay_storage__";

fn is_storage_page(url: &str) -> bool {
    url::Url::parse(url).is_ok_and(|url| url.path() == STORAGE_PAGE_PATH)
}

/// Puts back each origin's IndexedDB databases before any page of the replay opens, each in a blank page of
/// its origin that is closed after. Web storage is put back by each document's first script instead, but
/// databases are written asynchronously and can be large: done once here, a page's own first opening of
/// one finds it whole. A database that cannot be put back is said in the log, and the replay goes on.
async fn restore_databases(browser: &Browser, pages: &PagePreparation, storage: &StorageSnapshot) -> Result<()> {
    for (origin, databases) in &storage.indexed_db {
        let page = pages.new_blank_page(browser).await?;
        // Not a page of the replay: no scripts, no session.
        pages.prepared.lock().await.insert(page.target_id().clone());
        let restored = async {
            page.goto(format!("{origin}{STORAGE_PAGE_PATH}")).await?;
            let created = page.evaluate(site_storage::restore_expression(databases)).await?;
            anyhow::Ok(created.into_value::<u64>()?)
        }
        .await;
        let _ = page.close().await;
        // The pages replay all the same, as a browser without those databases would show them.
        match restored {
            Ok(created) => tracing::debug!(origin, created, "IndexedDB databases put back"),
            Err(error) => tracing::warn!("cannot put back the IndexedDB databases of {origin}: {error:#}"),
        }
    }
    Ok(())
}

/// Gives every new tab or popup the page scripts, and lets every new service worker start
/// ([`release_service_worker`]). A popup's first document may already be loading when it is announced: the
/// scripts then apply from its next document. (Holding that document in `Fetch` until they are in place
/// cannot work: chromiumoxide finishes attaching to a tab only once its first document has come.)
async fn prepare_new_pages(
    browser: Arc<Browser>,
    pages: Arc<PagePreparation>,
    mut created: chromiumoxide::listeners::EventStream<EventTargetCreated>,
) {
    while let Some(event) = created.next().await {
        if pages.context.is_some() && event.target_info.browser_context_id != pages.context {
            pages.left_the_context.store(true, Ordering::SeqCst);
        }
        if event.target_info.r#type == "service_worker" {
            tokio::spawn(release_service_worker(browser.clone(), event.target_info.target_id.clone()));
            continue;
        }
        if event.target_info.r#type != "page" {
            continue;
        }
        let target: TargetId = event.target_info.target_id.clone();
        let browser = browser.clone();
        let pages = pages.clone();
        tokio::spawn(async move {
            // chromiumoxide attaches to the target just after announcing it.
            for _ in 0..50 {
                if let Ok(page) = browser.get_page(target.clone()).await {
                    if let Err(error) = pages.prepare(&page).await {
                        tracing::debug!("cannot prepare a new page: {error:#}");
                    }
                    return;
                }
                tokio::time::sleep(Duration::from_millis(20)).await;
            }
        });
    }
}

/// Lets a service worker a page registered start. chromiumoxide attaches to a page's new workers paused
/// (so that none runs a line unwatched), and lets each go; but a service worker it lets go and detaches from
/// in one breath, and Chromium then keeps the worker waiting for a debugger that has gone: the page's
/// `register` never settles. So the replay attaches to each service worker itself, from the browser's own
/// session, stays attached (which also keeps the worker from being stopped while the replay lasts, where
/// a browser might stop an idle one), and lets it go. The session is not a flat one: chromiumoxide sends
/// commands only on the browser's session and its pages', so the one command goes inside
/// `Target.sendMessageToTarget`. (Re-sending each page's auto-attach with service workers filtered out let
/// them start too, but JupyterLab's re-run failed twice with it, for no reason found.) A worker gone
/// meanwhile is no error. An agent that holds new service workers for its own set-up finds them let go
/// already: it may miss a worker's first lines, where without this the worker never ran at all.
async fn release_service_worker(browser: Arc<Browser>, target: TargetId) {
    let released = async {
        let attach = AttachToTargetParams { target_id: target, flatten: Some(false) };
        let attached = browser.execute(attach).await?;
        let resume = serde_json::json!({"id": 1, "method": "Runtime.runIfWaitingForDebugger"}).to_string();
        browser.execute(SendMessageToTarget { session_id: attached.result.session_id.into(), message: resume }).await?;
        anyhow::Ok(())
    };
    if let Err(error) = released.await {
        tracing::debug!("cannot let a service worker start: {error:#}");
    }
}

/// `Target.sendMessageToTarget`, which chromiumoxide's protocol types leave out (it is deprecated in
/// favour of flat sessions, which chromiumoxide drives only for pages).
#[derive(Debug, serde::Serialize)]
#[serde(rename_all = "camelCase")]
struct SendMessageToTarget {
    session_id: String,
    message: String,
}

impl chromiumoxide::Method for SendMessageToTarget {
    fn identifier(&self) -> chromiumoxide::types::MethodId {
        "Target.sendMessageToTarget".into()
    }
}

impl chromiumoxide::Command for SendMessageToTarget {
    type Response = serde_json::Value;
}

/// What every page of the replay gets before its first document, once: the page scripts, the binding
/// through which `page/live.js` reports WebRTC connections, and a watch on the WebSockets it opens.
struct PagePreparation {
    scripts: Vec<String>,
    /// The browser context the episode's pages open in: one of its own for an episode of a browser kept
    /// for the episodes after it ([`Replay::end_episode`]), else the browser's default one (`None`).
    context: Option<BrowserContextId>,
    responder: Arc<Responder>,
    session: Option<Arc<SessionRecorder>>,
    /// Count the WebSockets and WebRTC connections pages open for real as live attempts (a proxy counts
    /// what reaches it itself).
    watch_live_connections: bool,
    /// The pages prepared (or being prepared).
    prepared: tokio::sync::Mutex<HashSet<TargetId>>,
    /// Whether a page or worker of another browser context than the episode's opened (one an agent opened
    /// in the default context), which [`Replay::end_episode`] then wipes.
    left_the_context: AtomicBool,
}

impl PagePreparation {
    async fn prepare(&self, page: &Page) -> Result<()> {
        // Held until the page is ready, so that a second caller (a tab `open`s and the watch on new
        // targets both see) returns only once it is.
        let mut prepared = self.prepared.lock().await;
        if !prepared.insert(page.target_id().clone()) {
            return Ok(());
        }
        if self.watch_live_connections {
            let sockets = page.event_listener::<EventWebSocketCreated>().await?;
            let reports = page.event_listener::<EventBindingCalled>().await?;
            tokio::spawn(count_live_connections(self.responder.clone(), sockets, reports));
            page.execute(AddBindingParams::new(page_scripts::LIVE_BINDING)).await?;
        }
        for script in &self.scripts {
            page.execute(AddScriptToEvaluateOnNewDocumentParams::new(script.as_str())).await?;
        }
        if let Some(session) = &self.session {
            session::watch(session.clone(), page.clone()).await?;
        }
        Ok(())
    }

    /// A blank tab in the episode's browser context.
    async fn new_blank_page(&self, browser: &Browser) -> Result<Page> {
        let mut target = CreateTargetParams::new("about:blank");
        target.browser_context_id = self.context.clone();
        Ok(browser.new_page(target).await?)
    }
}

/// Counts what a page reaches for outside `Fetch` as live attempts: each WebSocket it opens for real
/// (chromiumoxide enables DevTools' `Network` domain on every page, which reports them; a recorded socket
/// is played by `page/websocket.js` without one, so a real one is one the recording never saw) and each
/// WebRTC connection `page/live.js` reports. Ends when the page does.
async fn count_live_connections(
    responder: Arc<Responder>,
    mut sockets: chromiumoxide::listeners::EventStream<EventWebSocketCreated>,
    mut reports: chromiumoxide::listeners::EventStream<EventBindingCalled>,
) {
    loop {
        tokio::select! {
            Some(socket) = sockets.next() => responder.count_live_attempt("WEBSOCKET", &socket.url),
            Some(report) = reports.next() => {
                if report.name == page_scripts::LIVE_BINDING {
                    responder.count_live_attempt("WEBRTC", &report.payload);
                }
            }
            else => break,
        }
    }
}

/// The base64 a request body's pieces are decoded by at a time: 1 MiB of it, 768 KiB of body.
const BODY_SLICE_CHARS: usize = 1 << 20;

/// A paused request's body, from the base64 pieces DevTools gives it in (`postDataEntries`), as the
/// matcher takes it: its bytes, or past [`LARGE_BODY_BYTES`] its digest ([`large_body_stand_in`]), which is
/// how a large body is matched anyway; and what `sink` (the session's) kept of it. The pieces are decoded
/// a slice at a time into the sink and dropped as they go, so that a request waiting for its answer holds
/// no more of an upload than its digest, however large it is and however many a page sends at once.
fn read_body(pieces: Vec<PostDataEntry>, mut sink: Option<BodySink<'_>>) -> Result<(Vec<u8>, Option<Kept>)> {
    let mut held = Vec::new();
    let mut size = 0;
    // The sink hashes what it takes; without one, the digest is taken here.
    let mut hasher = sink.is_none().then(Sha256::new);
    let mut decoded = Vec::new();
    for piece in pieces {
        let Some(encoded) = piece.bytes else { continue };
        let encoded: &str = encoded.as_ref();
        // Slices of whole base64 quanta (4 characters), so that each decodes on its own.
        for slice in encoded.as_bytes().chunks(BODY_SLICE_CHARS) {
            decoded.clear();
            base64::engine::general_purpose::STANDARD
                .decode_vec(slice, &mut decoded)
                .context("DevTools gave a request body that is not base64")?;
            size += decoded.len();
            if let Some(sink) = sink.as_mut() {
                sink.write(&decoded)?;
            }
            if let Some(hasher) = hasher.as_mut() {
                hasher.update(&decoded);
            }
            if size <= LARGE_BODY_BYTES {
                held.extend_from_slice(&decoded);
            } else {
                held = Vec::new();
            }
        }
    }
    let kept = sink.map(|sink| sink.finish(true)).transpose()?;
    if size <= LARGE_BODY_BYTES {
        return Ok((held, kept));
    }
    let sha256 = match (&kept, hasher) {
        (Some(Kept::File { sha256, .. } | Kept::LeftOut { sha256, .. }), _) => sha256.clone(),
        (_, Some(hasher)) => format!("{:x}", hasher.finalize()),
        _ => anyhow::bail!("a body of {size} bytes was kept inline"),
    };
    Ok((large_body_stand_in(&sha256), kept))
}

/// The longest a paused request waits for the browser's cookies: the browser answers in milliseconds, and
/// a request held longer would hold the page (a form's POST, the step that sent it) with it.
const COOKIE_LOOKUP_LIMIT: Duration = Duration::from_secs(5);

/// The browser's state as a request carries it: its headers, and the cookies the browser will attach,
/// which `Fetch` does not show at the request stage and so are asked for. Cookies that do not come within
/// [`COOKIE_LOOKUP_LIMIT`] are left out, said in a warning: the request is then matched by its headers,
/// rather than left waiting on DevTools' own 30 s timeout and failed.
async fn browser_state(
    browser: &Browser,
    request: &chromiumoxide::cdp::browser_protocol::network::Request,
    context: Option<BrowserContextId>,
) -> RequestState {
    let cookies = GetCookiesParams { browser_context_id: context };
    let lookup = tokio::time::timeout(COOKIE_LOOKUP_LIMIT, browser.execute(cookies)).await;
    let cookies = match lookup {
        Ok(Ok(answer)) => answer.result.cookies,
        Ok(Err(error)) => {
            tracing::warn!("{} {} is matched without its cookies: {error}", request.method, request.url);
            Vec::new()
        }
        Err(_) => {
            tracing::warn!(
                "{} {} is matched without its cookies: the browser did not give them within {} s",
                request.method,
                request.url,
                COOKIE_LOOKUP_LIMIT.as_secs()
            );
            Vec::new()
        }
    };
    let url = url::Url::parse(&request.url).ok();
    let sent = cookies.iter().filter(|cookie| {
        url.as_ref().is_some_and(|url| cookie_is_sent(&cookie.domain, &cookie.path, cookie.secure, url))
    });
    RequestState::from_headers(header_pairs(&request.headers))
        .with_cookies(sent.map(|cookie| (cookie.name.as_str(), cookie.value.as_str())))
}

/// Whether the browser sends `cookie` with a request to `url`: its domain (the host itself, or a parent
/// domain for a cookie set with one), its path, and `Secure` (which loopback hosts satisfy over http, as
/// Chromium treats them as secure).
pub(crate) fn cookie_is_sent(domain: &str, cookie_path: &str, secure: bool, url: &url::Url) -> bool {
    let host = url.host_str().unwrap_or_default().trim_start_matches('[').trim_end_matches(']');
    let domain_matches = match domain.strip_prefix('.') {
        Some(parent) => host == parent || host.ends_with(&format!(".{parent}")),
        None => host == domain,
    };
    let path = url.path();
    let path_matches = path == cookie_path
        || (path.starts_with(cookie_path)
            && (cookie_path.ends_with('/') || path[cookie_path.len()..].starts_with('/')));
    let secure_ok = !secure || url.scheme() == "https" || matches!(host, "localhost" | "127.0.0.1" | "::1");
    domain_matches && path_matches && secure_ok
}

/// DevTools' headers (a JSON object) as name and value pairs.
fn header_pairs(
    headers: &chromiumoxide::cdp::browser_protocol::network::Headers,
) -> impl Iterator<Item = (&str, &str)> {
    let object = headers.inner().as_object().into_iter().flatten();
    object.map(|(name, value)| (name.as_str(), value.as_str().unwrap_or_default()))
}

fn header(headers: &chromiumoxide::cdp::browser_protocol::network::Headers, name: &str) -> Option<String> {
    header_pairs(headers).find(|(key, _)| key.eq_ignore_ascii_case(name)).map(|(_, value)| value.to_owned())
}

fn cookie_param(cookie: &trace_manifest::event::Cookie, shift_seconds: f64) -> CookieParam {
    let mut param = CookieParam::new(cookie.name.clone(), cookie.value.clone());
    param.domain = Some(cookie.domain.clone());
    param.path = Some(cookie.path.clone());
    param.secure = Some(cookie.secure);
    param.http_only = Some(cookie.http_only);
    param.expires = cookie.expires.map(|expires| TimeSinceEpoch::new(expires + shift_seconds));
    param.same_site = cookie.same_site.as_deref().and_then(|s| match s {
        "Strict" => Some(CookieSameSite::Strict),
        "Lax" => Some(CookieSameSite::Lax),
        "None" => Some(CookieSameSite::None),
        _ => None,
    });
    param
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn cookies_are_sent_by_domain_path_and_secure_as_a_browser_sends_them() {
        let url = |u: &str| url::Url::parse(u).unwrap();
        for (domain, path, secure, to, sent) in [
            ("app.test", "/", false, "http://app.test/admin/", true),
            ("app.test", "/", false, "http://www.app.test/", false),
            (".app.test", "/", false, "http://www.app.test/", true),
            (".app.test", "/", false, "http://app.test/", true),
            (".app.test", "/", false, "http://notapp.test/", false),
            ("app.test", "/admin", false, "http://app.test/admin", true),
            ("app.test", "/admin", false, "http://app.test/admin/users", true),
            ("app.test", "/admin", false, "http://app.test/administrator", false),
            ("app.test", "/admin/", false, "http://app.test/admin/x", true),
            ("app.test", "/", true, "http://app.test/", false),
            ("app.test", "/", true, "https://app.test/", true),
            ("127.0.0.1", "/", true, "http://127.0.0.1:8000/", true),
            ("localhost", "/", false, "http://localhost:8000/a", true),
        ] {
            assert_eq!(cookie_is_sent(domain, path, secure, &url(to)), sent, "{domain} {path} {secure} → {to}");
        }
    }

    fn pieces(body: &[u8], cut: usize) -> Vec<PostDataEntry> {
        let encode = |bytes: &[u8]| base64::engine::general_purpose::STANDARD.encode(bytes);
        let (first, second) = body.split_at(cut);
        [first, second].map(|piece| PostDataEntry { bytes: Some(encode(piece).into()) }).into()
    }

    /// Issue #45: a page's upload was held whole (and more than once) until its answer. A body is now read
    /// a slice at a time into the session; what the matcher holds of a large one is its digest, and a
    /// small one, a form, is held whole as before.
    #[test]
    fn a_request_body_is_kept_as_it_is_decoded_and_held_only_when_small() {
        let scratch = tempfile::tempdir().unwrap();
        let session = SessionRecorder::create_with_budget(
            &scratch.path().join("session"),
            session::Budget::default(),
            session::Captures::DomOnly,
        )
        .unwrap();
        // Pieces cut anywhere, slices of the base64 ending mid-piece: the bytes come out as they went in.
        let upload: Vec<u8> = (0..3 * LARGE_BODY_BYTES + 7).map(|i| (i * 31 % 251) as u8).collect();
        let digest = trace_bundle::archive::sha256_hex(&upload);
        let (held, kept) = read_body(pieces(&upload, 1_000_001), Some(session.body_sink())).unwrap();
        assert_eq!(held, large_body_stand_in(&digest), "a large body is held as its digest");
        match kept {
            Some(Kept::File { sha256, size }) => {
                assert_eq!((sha256.as_str(), size), (digest.as_str(), upload.len() as u64))
            }
            other => panic!("the upload is a file of the session: {other:?}"),
        }
        let file = session.dir().join(trace_manifest::bundle::resource_path(&digest));
        assert_eq!(std::fs::read(file).unwrap(), upload, "the session keeps the whole upload");
        // Without a session the digest is the same.
        let (held, kept) = read_body(pieces(&upload, 5), None).unwrap();
        assert_eq!((held, kept), (large_body_stand_in(&digest), None));

        let form = b"title=Mugs&body=".repeat(100);
        let (held, kept) = read_body(pieces(&form, 3), Some(session.body_sink())).unwrap();
        assert_eq!(held, form, "a small body is matched by its bytes");
        assert_eq!(kept, Some(Kept::Text(String::from_utf8(form).unwrap())));
        assert!(read_body(vec![PostDataEntry { bytes: Some("not base64!".to_owned().into()) }], None).is_err());
    }
}
