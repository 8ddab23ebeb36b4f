//! `trace-replay serve --proxy-port`: the bundle served to a browser that replay does not drive, through
//! an HTTP proxy on loopback. It is for agents that launch their own browser (BrowserGym's Playwright
//! launch with `proxy`, a `--proxy-server` flag): every request that reaches the proxy is answered by the
//! same [`Responder`] the DevTools path uses (the same matcher, state-aware answers, ids, ignore list,
//! live attempts refused and counted), and every page gets the same page scripts (determinism, storage,
//! the recorded WebSockets), put at the head of its document since no DevTools adds them.
//!
//! HTTPS: a `CONNECT` to an origin the recording reached over `https` is answered with a TLS server whose
//! certificate, made for that host, a certificate authority of the proxy's signs ([`Authority`]); the
//! browser trusts it through `--ignore-certificate-errors-spki-list` (its key's fingerprint is printed),
//! Playwright's `ignore_https_errors`, or the authority's certificate installed. A `CONNECT` to an origin
//! the recording reached over plain `http` (a `ws://` socket) is a plain tunnel answered the same way; one
//! to anywhere else is a live attempt, refused.
//!
//! State: the proxy serves one episode at a time. The browser's cookies travel in its
//! requests, so each request's state is its own; the recording's start cookies, which the browser does
//! not have, count as sent until the first response from their host hands them to the browser
//! (`Set-Cookie`), after which the browser's own word is the state (a page that logs out loses them as it
//! should). Two browsers sharing one episode would share its matcher and the one-time handing of the
//! cookies: one browser context an episode. [`Proxy::next_episode`] begins the next one in the same proxy
//! (the bundle open, the certificates made, the port bound), with a matcher, a clock and start cookies of
//! its own; every connection belongs to the episode it was accepted in, and one still open when its
//! episode ends is closed at its next request, so nothing of one episode is served into the next.
//!
//! Load: the proxy holds at most [`MAX_CONNECTIONS`] connections; when every place is taken, a new one
//! takes the place of the connection that has waited longest without sending a request's head (one
//! that connects and says nothing is the cheapest way to hold a place, and a browser sends its request as
//! soon as it has connected), and otherwise waits, the next ones in the kernel's queue, until one ends.
//! It closes a connection that has not sent a request's head within [`HEAD_TIMEOUT`] (a tunnel's TLS
//! handshake too), holds at most [`MAX_BODIES_IN_MEMORY`] of request bodies at once (the
//! matcher reads a body whole; past that, requests wait before their body is read), and keeps at most
//! [`MAX_CERTIFICATES`] hosts' certificates. At the open-file limit it waits, longer each time, rather
//! than retrying at once, and says so once.
//!
//! The certificate authority is short-lived and name-constrained ([`Authority`]): it can vouch only for
//! the hosts the recording reached over HTTPS (and its own `.invalid` name when there are none), for two
//! days when made for a run, thirty when kept in `--ca-dir`.
//!
//! What the page shows: no DevTools session watches a browser the agent launched, so a page script of
//! the proxy's (`page/report.js`) posts the page's document when it has loaded and whenever it settles
//! after a change, and the recorded sockets' reports, to [`page_scripts::REPORT_PATH`] on the page's own
//! origin; the proxy answers that path itself and records each report in the episode's session as the
//! DevTools path records a DOM snapshot or a socket frame, so that a checkpoint on text the page's
//! scripts draw, or on a frame it sends, is judged alike on both paths. A page can post anything there,
//! as it can draw anything: each report is bounded ([`MAX_REPORT_BYTES`]), and so is their number
//! ([`MAX_SHOWN_REPORTS`]).
//!
//! What the DevTools path has and this one cannot: IndexedDB restored before the page runs, WebRTC
//! connections counted (they never reach a proxy), and the recorded answer's status text.
//!
//! [`serve_until`] is the command: it serves until asked to stop, and with `--episode DIR` writes the
//! episode the proxy recorded there when it stops ([`ProxyEpisode`]), for `trace-replay score`; a proxy
//! that serves episode after episode is [`crate::proxy_episodes`]'s.

use std::collections::{BTreeMap, BTreeSet, HashMap, HashSet};
use std::future::Future;
use std::net::SocketAddr;
use std::path::{Path, PathBuf};
use std::sync::atomic::{AtomicBool, AtomicU64, Ordering};
use std::sync::{Arc, Mutex, PoisonError};
use std::time::Duration;

use std::io::Write as _;
use std::os::unix::fs::PermissionsExt as _;

use anyhow::{Context, Result};
use base64::Engine as _;
use bytes::Bytes;
use http_body_util::{BodyExt, Full};
use hyper::body::Incoming;
use hyper::header::{HeaderName, HeaderValue};
use hyper::{Method, StatusCode};
use hyper_util::rt::{TokioIo, TokioTimer};
use sha2::{Digest, Sha256};
use tokio::net::TcpListener;
use tokio::sync::{OwnedSemaphorePermit, Semaphore, oneshot};
use tokio::task::JoinHandle;
use tokio_rustls::TlsAcceptor;
use tokio_rustls::rustls;
use tokio_rustls::rustls::pki_types::pem::PemObject as _;
use trace_manifest::bundle::TaskInfo;
use trace_manifest::eval::{SERVED_FILE, SESSION_DIR, Served};
use trace_manifest::event::{Cookie, EventKind, Header, Navigation, NavigationCause};
use trace_manifest::task::TaskStatus;

use crate::archive::ReplayArchive;
use crate::matcher::{Request, RequestState};
use crate::page_scripts;
use crate::responder::{Decision, Responder, Stats};
use crate::session::{self, Budget, Captures, Kept, Origin, SessionRecorder};

/// The largest request body the proxy reads; a larger one fails its request.
const MAX_REQUEST_BODY: usize = 64 << 20;

/// The largest report a page may post (`page/report.js`: a document of up to 4 Mi characters, as JSON).
const MAX_REPORT_BYTES: usize = 16 << 20;

/// The most documents an episode's pages may report; past this, reports are refused (a page that
/// changes without rest is reported at most every two seconds).
pub const MAX_SHOWN_REPORTS: u64 = 2000;

/// Request bodies held at once, in bytes: each is held whole until it is answered (the matcher reads it
/// whole), so past this a request waits, its body unread, for others to be answered.
pub const MAX_BODIES_IN_MEMORY: usize = 256 << 20;

/// Connections served at once, tunnels included; past this, new ones wait to be accepted. A browser
/// opens at most 32 to one proxy.
pub const MAX_CONNECTIONS: usize = 256;

/// How long a client has to send a request's head, and a tunnel's TLS handshake, before its connection
/// is closed; an idle kept-alive connection is closed after as long.
pub const HEAD_TIMEOUT: Duration = Duration::from_secs(10);

/// How long a request's body may pause between two pieces before the request fails.
const BODY_IDLE_TIMEOUT: Duration = Duration::from_secs(30);

/// Hosts whose certificate is kept; past this many, the one used longest ago is dropped (and made again
/// if asked for).
pub const MAX_CERTIFICATES: usize = 1024;

/// How a proxy serves.
#[derive(Debug, Clone, Default)]
pub struct ProxyOptions {
    /// The loopback port to listen on; 0 for a free one.
    pub port: u16,
    /// Where the certificate authority is kept, to be trusted once and reused; a new one per run (in a
    /// temporary folder) when `None`.
    pub ca_dir: Option<PathBuf>,
    /// Start the clock at the recording's time and seed random numbers.
    pub determinism: bool,
}

/// A proxy serving one bundle until closed.
pub struct Proxy {
    address: SocketAddr,
    shared: Arc<Shared>,
    accepting: JoinHandle<()>,
}

impl Proxy {
    /// Listens on `127.0.0.1:port` and answers from `archive`; `session`, when given, records every
    /// request that crosses and its answer.
    pub async fn start(
        archive: impl Into<Arc<ReplayArchive>>,
        options: &ProxyOptions,
        session: Option<Arc<SessionRecorder>>,
    ) -> Result<Proxy> {
        let archive = archive.into();
        let authority = Authority::load_or_create(options.ca_dir.as_deref(), &secure_hosts(&archive))?;
        let listener = TcpListener::bind(("127.0.0.1", options.port))
            .await
            .with_context(|| format!("cannot listen on 127.0.0.1:{}; choose another --proxy-port", options.port))?;
        let address = listener.local_addr()?;
        let episode = EpisodeState::begin(&archive, options.determinism, session);
        let shared = Arc::new(Shared {
            archive,
            determinism: options.determinism,
            episode: Mutex::new(Arc::new(episode)),
            authority,
            connections: Arc::new(Semaphore::new(MAX_CONNECTIONS)),
            silent: std::sync::Mutex::default(),
            bodies_in_memory: Arc::new(Semaphore::new(MAX_BODIES_IN_MEMORY)),
        });
        let accepting = tokio::spawn(accept(listener, shared.clone()));
        Ok(Proxy { address, shared, accepting })
    }

    /// Ends the episode being served and begins the next, recorded into `session` when given: its own
    /// matcher, page clock (starting now) and start cookies, served from the bundle already open. A
    /// connection of the episode that ended is closed at its next request. Returns what the ended one
    /// was served.
    pub fn next_episode(&self, session: Option<Arc<SessionRecorder>>) -> Stats {
        let next = Arc::new(EpisodeState::begin(&self.shared.archive, self.shared.determinism, session));
        let ended = std::mem::replace(&mut *self.shared.episode.lock().unwrap_or_else(PoisonError::into_inner), next);
        ended.ended.store(true, Ordering::Relaxed);
        ended.responder.stats()
    }

    pub fn address(&self) -> SocketAddr {
        self.address
    }

    /// The proxy's URL, as a browser's proxy setting takes it.
    pub fn url(&self) -> String {
        format!("http://{}", self.address)
    }

    pub fn authority(&self) -> &Authority {
        &self.shared.authority
    }

    /// What answers the episode's requests: a browser driven through the proxy waits on it.
    pub fn responder(&self) -> Arc<Responder> {
        self.shared.episode().responder.clone()
    }

    /// What the episode being served was served so far.
    pub fn stats(&self) -> Stats {
        self.shared.episode().responder.stats()
    }

    /// Stops accepting and returns what the episode being served was served. Connections still open are
    /// dropped with the runtime.
    pub fn close(self) -> Stats {
        self.accepting.abort();
        self.stats()
    }
}

/// `trace-replay serve --proxy-port`: serves `archive` (read from `bundle`) as a proxy until `stop`
/// resolves, printing where and how to trust it; with `episode`, records what crosses it and writes the
/// episode there when it stops ([`ProxyEpisode`]). Prints what was served.
pub async fn serve_until(
    bundle: &Path,
    archive: ReplayArchive,
    options: &ProxyOptions,
    episode: Option<(&Path, Budget)>,
    stop: impl Future<Output = Result<()>>,
) -> Result<()> {
    let start_url = archive.start_url().to_owned();
    let task = archive.manifest.task.clone();
    let episode = episode.map(|(dir, budget)| ProxyEpisode::create(dir, budget)).transpose()?;
    let proxy = Proxy::start(archive, options, episode.as_ref().map(ProxyEpisode::session)).await?;
    announce(bundle, &start_url, &proxy)?;
    stop.await?;
    let stats = proxy.close();
    if let Some(episode) = episode {
        let dir = episode.finish(task, &stats)?;
        println!(
            "episode: {} (score it with `trace-replay score {} --episode {}`)",
            dir.display(),
            bundle.display(),
            dir.display()
        );
    }
    print!("{stats}");
    Ok(())
}

/// Prints where the proxy serves `bundle` and how to trust it, ending with the line a harness waits for
/// (`press Ctrl+C to stop`).
pub fn announce(bundle: &Path, start_url: &str, proxy: &Proxy) -> Result<()> {
    println!("serving {} at {start_url}", bundle.display());
    println!("proxy: {}", proxy.url());
    println!("certificate authority: {}", proxy.authority().certificate_path().display());
    println!("certificate key fingerprint (SPKI, SHA-256): {}", proxy.authority().spki_fingerprint());
    println!("press Ctrl+C to stop");
    // Whoever waits for the port reads the lines above whole.
    std::io::stdout().flush()?;
    Ok(())
}

/// An episode recorded through a proxy (`serve --proxy-port --episode DIR`, or each of
/// `--episodes-on-stdin`'s): the session of every request
/// that crossed it (`DIR/session/`, a bundle) and what was served (`DIR/served.json`), which
/// `trace-replay score` scores as `eval` scores its own.
pub struct ProxyEpisode {
    dir: PathBuf,
    session: Arc<SessionRecorder>,
    started: std::time::Instant,
    started_at_ms: f64,
}

impl ProxyEpisode {
    /// Starts recording into `dir`, keeping bodies within `budget`.
    pub fn create(dir: &Path, budget: Budget) -> Result<ProxyEpisode> {
        let session = SessionRecorder::create_with_budget(&dir.join(SESSION_DIR), budget, Captures::ScreenshotAndDom)?;
        let (started, started_at_ms) = (std::time::Instant::now(), trace_manifest::time_fmt::now_ms());
        Ok(ProxyEpisode { dir: dir.to_owned(), session, started, started_at_ms })
    }

    /// The session the proxy records into ([`Proxy::start`]).
    pub fn session(&self) -> Arc<SessionRecorder> {
        self.session.clone()
    }

    /// Writes the session, as a bundle of the served bundle's `task` stopped where the agent left it, and
    /// what the proxy served (`stats`); returns the episode's folder.
    pub fn finish(self, task: TaskInfo, stats: &Stats) -> Result<PathBuf> {
        let task = TaskInfo { status: TaskStatus::Stopped, ..task };
        self.session.finish(task, None)?;
        let served = Served {
            requests: stats.request_counts(),
            live_attempts: stats.live_attempts,
            started_at: trace_manifest::time_fmt::rfc3339_from_millis(self.started_at_ms),
            duration_seconds: self.started.elapsed().as_secs_f64(),
            bodies_left_out: self.session.bodies_left_out(),
        };
        trace_store::atomic::write_json(&self.dir.join(SERVED_FILE), &served)?;
        Ok(self.dir)
    }
}

struct Shared {
    archive: Arc<ReplayArchive>,
    determinism: bool,
    /// The episode being served; a connection holds the one it was accepted in.
    episode: Mutex<Arc<EpisodeState>>,
    authority: Authority,
    /// A place for each connection served ([`MAX_CONNECTIONS`]).
    connections: Arc<Semaphore>,
    /// The connections that have not sent a request's head yet.
    silent: std::sync::Mutex<Silent>,
    /// A byte for each byte of request body held ([`MAX_BODIES_IN_MEMORY`]).
    bodies_in_memory: Arc<Semaphore>,
}

/// What one episode is served from and records into: nothing of it outlives the episode.
struct EpisodeState {
    responder: Arc<Responder>,
    scripts: PageScripts,
    start_cookies: StartCookies,
    session: Option<Arc<SessionRecorder>>,
    /// Numbers the exchanges the session records.
    exchanges: AtomicU64,
    /// How many documents the pages have reported ([`MAX_SHOWN_REPORTS`]).
    shown_reports: AtomicU64,
    /// Set when the next episode began: this one's connections are closed at their next request.
    ended: AtomicBool,
}

impl EpisodeState {
    /// An episode beginning now: its pages' clock starts at the recording's time from now on.
    fn begin(archive: &Arc<ReplayArchive>, determinism: bool, session: Option<Arc<SessionRecorder>>) -> EpisodeState {
        let started_ms = trace_manifest::time_fmt::now_ms();
        EpisodeState {
            responder: Arc::new(Responder::new(archive.clone(), started_ms)),
            scripts: PageScripts::for_archive(archive, determinism, started_ms, session.is_some()),
            start_cookies: StartCookies::new(archive),
            session,
            exchanges: AtomicU64::new(0),
            shown_reports: AtomicU64::new(0),
            ended: AtomicBool::new(false),
        }
    }

    /// The session the episode records into, until it has ended: what a request still in flight then
    /// does is no part of it (the session is written by then).
    fn session(&self) -> Option<&Arc<SessionRecorder>> {
        self.session.as_ref().filter(|_| !self.ended.load(Ordering::Relaxed))
    }
}

/// The connections served that have not sent a request's head yet, by the order they were accepted in,
/// each with the word that makes it give up its place.
#[derive(Default)]
struct Silent {
    next: u64,
    waiting: BTreeMap<u64, oneshot::Sender<()>>,
}

impl Shared {
    /// The episode being served.
    fn episode(&self) -> Arc<EpisodeState> {
        self.episode.lock().unwrap_or_else(PoisonError::into_inner).clone()
    }

    /// A connection just accepted: its number, and what tells it to give up its place.
    fn accepted_silent(&self) -> (u64, oneshot::Receiver<()>) {
        let mut silent = self.silent.lock().unwrap_or_else(std::sync::PoisonError::into_inner);
        let id = silent.next;
        silent.next += 1;
        let (give_up, told) = oneshot::channel();
        silent.waiting.insert(id, give_up);
        (id, told)
    }

    /// Connection `id` has sent a request's head, or has ended.
    fn spoke(&self, id: u64) {
        self.silent.lock().unwrap_or_else(std::sync::PoisonError::into_inner).waiting.remove(&id);
    }

    /// Tells the connection that has waited longest without a word to give up its place, if there is one.
    fn silence_oldest(&self) {
        let oldest = self.silent.lock().unwrap_or_else(std::sync::PoisonError::into_inner).waiting.pop_first();
        if let Some((_, give_up)) = oldest {
            let _ = give_up.send(());
        }
    }
}

/// A connection's place among those served, held until its last tunnel ends.
type Place = Arc<OwnedSemaphorePermit>;

async fn accept(listener: TcpListener, shared: Arc<Shared>) {
    let mut pause = AcceptPause::default();
    loop {
        let stream = match listener.accept().await {
            Ok((stream, _)) => {
                pause.accepted();
                stream
            }
            Err(error) => {
                pause.failed(&error).await;
                continue;
            }
        };
        // Every place taken: the connection that has waited longest without a word gives its place up;
        // failing that, this one waits for a place, and those after it wait in the kernel's queue.
        let place = match shared.connections.clone().try_acquire_owned() {
            Ok(place) => place,
            Err(_) => {
                shared.silence_oldest();
                shared.connections.clone().acquire_owned().await.expect("the semaphore is never closed")
            }
        };
        let shared = shared.clone();
        tokio::spawn(async move {
            let (id, told_to_give_up) = shared.accepted_silent();
            let connection = Connection { episode: shared.episode(), tunnel: None, _place: Arc::new(place) };
            let serving = serve_connection(TokioIo::new(stream), shared.clone(), connection, Some(id));
            tokio::select! {
                () = serving => {}
                // Dropped, which closes it. (The word dropped unsent means it spoke: it is served on.)
                Ok(()) = told_to_give_up => tracing::debug!("a connection that said nothing gave up its place"),
            }
            shared.spoke(id);
        });
    }
}

/// How the accept loop waits after a failure: out of file descriptors (or memory), the same failure
/// comes back at once until a connection closes, so it waits, from 10 ms doubling to a second, and says
/// so once; any other failure is one connection's, and the next is taken.
#[derive(Default)]
struct AcceptPause {
    next: Option<Duration>,
    said: bool,
}

impl AcceptPause {
    fn accepted(&mut self) {
        self.next = None;
    }

    async fn failed(&mut self, error: &std::io::Error) {
        use rustix::io::Errno;
        let out_of_resources = Errno::from_io_error(error)
            .is_some_and(|errno| [Errno::MFILE, Errno::NFILE, Errno::NOBUFS, Errno::NOMEM].contains(&errno));
        if !out_of_resources {
            tracing::debug!("the proxy could not accept a connection: {error}");
            return;
        }
        if !std::mem::replace(&mut self.said, true) {
            tracing::warn!(
                "the proxy has reached a limit of open files or memory ({error}): new connections wait until                  others close (raise the limit with `ulimit -n`); said once"
            );
        }
        let pause = self.next.map_or(Duration::from_millis(10), |last| (last * 2).min(Duration::from_secs(1)));
        self.next = Some(pause);
        tokio::time::sleep(pause).await;
    }
}

/// Where a tunnel's requests go: they name only their path.
#[derive(Debug, Clone)]
struct Tunnel {
    scheme: &'static str,
    authority: String,
}

/// What a connection serves for: the episode it was accepted in, and the tunnel it is (its requests name
/// only their path).
#[derive(Clone)]
struct Connection {
    episode: Arc<EpisodeState>,
    tunnel: Option<Tunnel>,
    /// Its place among those served, held, never read: given up when it and its tunnels have ended.
    _place: Place,
}

/// Serves one connection's requests; `silent` is its number among the connections that have not spoken
/// yet ([`Silent`]), for one accepted from a client.
async fn serve_connection<S>(io: TokioIo<S>, shared: Arc<Shared>, connection: Connection, silent: Option<u64>)
where
    S: tokio::io::AsyncRead + tokio::io::AsyncWrite + Unpin + Send + 'static,
{
    let service = hyper::service::service_fn(move |request| {
        if let Some(id) = silent {
            shared.spoke(id);
        }
        let shared = shared.clone();
        let connection = connection.clone();
        async move { handle(request, shared, connection).await }
    });
    let connection = hyper::server::conn::http1::Builder::new()
        .timer(TokioTimer::new())
        .header_read_timeout(HEAD_TIMEOUT)
        .serve_connection(io, service)
        .with_upgrades();
    if let Err(error) = connection.await {
        // A request refused by closing its connection ends here too, as do browsers hanging up.
        tracing::debug!("proxy connection ended: {error}");
    }
}

type Answer = hyper::Response<Full<Bytes>>;

/// Why a request is answered by closing its connection: the browser then fails it as a network error, as
/// the DevTools path fails what it refuses.
#[derive(Debug, thiserror::Error)]
#[error("{0}")]
struct Refused(String);

async fn handle(
    request: hyper::Request<Incoming>,
    shared: Arc<Shared>,
    connection: Connection,
) -> Result<Answer, Refused> {
    let episode = &connection.episode;
    if episode.ended.load(Ordering::Relaxed) {
        return Err(Refused("a connection of an episode that has ended".to_owned()));
    }
    if request.method() == Method::CONNECT {
        return Ok(connect(request, shared, connection));
    }
    let asked = match (&connection.tunnel, request.uri().scheme_str()) {
        (_, Some(_)) => request.uri().to_string(),
        (Some(tunnel), None) => format!(
            "{}://{}{}",
            tunnel.scheme,
            tunnel.authority,
            request.uri().path_and_query().map_or("/", |p| p.as_str())
        ),
        (None, None) => {
            return Ok(plain(StatusCode::BAD_REQUEST, "this is trace-replay's proxy: set it as the browser's proxy"));
        }
    };
    // As the browser writes it, and the recording has it: without the scheme's default port.
    let parsed = url::Url::parse(&asked).ok();
    if request.method() == Method::POST && parsed.as_ref().is_some_and(|url| url.path() == page_scripts::REPORT_PATH) {
        return Ok(take_report(request, episode).await);
    }
    let url = parsed.map_or(asked, String::from);
    let method = request.method().as_str().to_owned();
    let headers: Vec<(String, String)> = request
        .headers()
        .iter()
        .map(|(name, value)| (name.as_str().to_owned(), String::from_utf8_lossy(value.as_bytes()).into_owned()))
        .collect();
    let is_upgrade = request.headers().contains_key(hyper::header::UPGRADE);
    if !episode.responder.recording_reached_origin_of(&url) && !made_by_page(&headers) {
        // The browser's own traffic (its updater, its account check), which no flag stops entirely: no
        // page asked for it, so it is neither a live attempt of the agent's nor part of its session.
        tracing::debug!("refused the browser's own {method} {url}");
        return Err(Refused(format!("the browser's own request {method} {url}")));
    }
    let (body, kept, _held) = read_body(request, &shared, episode)
        .await
        .map_err(|error| Refused(format!("cannot read the body of {method} {url}: {error:#}")))?;
    let exchange = Exchange::start(episode, &method, &url, &headers, kept);
    if is_upgrade {
        // The recorded sockets are played inside the page (`page/websocket.js`): one that reaches the
        // network is the page's own, as a socket the DevTools path sees opened is.
        episode.responder.count_live_attempt(&method, &url);
        exchange.failed(episode, "net::ERR_INTERNET_DISCONNECTED");
        return Err(Refused(format!("a WebSocket the recording does not hold: {url}")));
    }
    answer(episode, &exchange, &method, &url, &headers, &body)
}

/// A page's report (`page/report.js`), read within [`MAX_REPORT_BYTES`] and recorded in the episode's
/// session: a document as a DOM snapshot of the main frame, a socket report as its frame.
async fn take_report(request: hyper::Request<Incoming>, episode: &EpisodeState) -> Answer {
    #[derive(serde::Deserialize)]
    #[serde(tag = "kind", rename_all = "snake_case")]
    enum Report {
        Shown { url: String, html: String },
        Moved { url: String },
        Socket { message: String },
    }
    let Some(session) = episode.session() else { return plain(StatusCode::NO_CONTENT, "") };
    let read = http_body_util::Limited::new(request.into_body(), MAX_REPORT_BYTES).collect();
    let body = match tokio::time::timeout(BODY_IDLE_TIMEOUT, read).await {
        Ok(Ok(body)) => body.to_bytes(),
        _ => return plain(StatusCode::PAYLOAD_TOO_LARGE, "a report is at most 16 MiB, sent at once"),
    };
    let recorded = match serde_json::from_slice(&body) {
        Ok(Report::Shown { url, html }) => {
            if episode.shown_reports.fetch_add(1, Ordering::Relaxed) >= MAX_SHOWN_REPORTS {
                tracing::warn!("a page reported more than {MAX_SHOWN_REPORTS} documents: the rest are not kept");
                return plain(StatusCode::TOO_MANY_REQUESTS, "no more documents are kept in this episode");
            }
            let ts = trace_manifest::time_fmt::now_ms();
            session.dom_snapshot(ts, None, url, &html, "shown").map_err(|error| format!("{error:#}"))
        }
        Ok(Report::Moved { url }) if url.starts_with("http://") || url.starts_with("https://") => {
            // Counted with the documents: a page that moves without end is refused as one that changes.
            if episode.shown_reports.fetch_add(1, Ordering::Relaxed) >= MAX_SHOWN_REPORTS {
                return plain(StatusCode::TOO_MANY_REQUESTS, "no more reports are kept in this episode");
            }
            let navigation = Navigation { url, cause: NavigationCause::Script, main_frame: true };
            session.record(&Origin::default(), EventKind::Navigation(navigation));
            Ok(())
        }
        Ok(Report::Moved { .. }) => Err("a page's own address is a web page's".to_owned()),
        Ok(Report::Socket { message }) => match session::socket_event(&message) {
            Some(socket) => {
                session.record(&Origin::default(), EventKind::WebSocket(socket));
                Ok(())
            }
            None => Err("not a socket report".to_owned()),
        },
        Err(error) => Err(error.to_string()),
    };
    match recorded {
        Ok(()) => plain(StatusCode::NO_CONTENT, ""),
        Err(error) => {
            tracing::debug!("a page's report refused: {error}");
            plain(StatusCode::BAD_REQUEST, "not a report of trace-replay's page script")
        }
    }
}

/// Reads a request's body as it arrives, within the proxy's bounds: at most [`MAX_REQUEST_BODY`], with
/// its bytes counted against [`MAX_BODIES_IN_MEMORY`] before they are read (the place its length says,
/// the most a body may take when it says none) and held until the returned permit is dropped, and no
/// pause longer than [`BODY_IDLE_TIMEOUT`]. Each piece goes to the session too, which keeps what its
/// budget allows ([`Kept`]).
async fn read_body(
    request: hyper::Request<Incoming>,
    shared: &Shared,
    episode: &EpisodeState,
) -> Result<(Vec<u8>, Option<Kept>, Option<OwnedSemaphorePermit>)> {
    use hyper::body::Body as _;
    let declared = request
        .headers()
        .get(hyper::header::CONTENT_LENGTH)
        .and_then(|value| value.to_str().ok()?.trim().parse::<u64>().ok());
    if declared.is_some_and(|length| length > MAX_REQUEST_BODY as u64) {
        anyhow::bail!("it is larger than {MAX_REQUEST_BODY} bytes");
    }
    let mut incoming = request.into_body();
    let room = match declared {
        _ if incoming.is_end_stream() => 0,
        Some(length) => length as usize,
        None => MAX_REQUEST_BODY,
    };
    let held = match room {
        0 => None,
        room => Some(
            shared
                .bodies_in_memory
                .clone()
                .acquire_many_owned(room as u32)
                .await
                .expect("the semaphore is never closed"),
        ),
    };
    let mut sink = episode.session().map(|session| session.body_sink());
    let mut body = Vec::with_capacity(room.min(1 << 20));
    loop {
        let frame = match tokio::time::timeout(BODY_IDLE_TIMEOUT, incoming.frame()).await {
            Err(_) => anyhow::bail!("it paused for more than {BODY_IDLE_TIMEOUT:?}"),
            Ok(None) => break,
            Ok(Some(frame)) => frame?,
        };
        let Ok(data) = frame.into_data() else { continue };
        if body.len() + data.len() > room {
            anyhow::bail!("it is larger than its length said, or than {MAX_REQUEST_BODY} bytes");
        }
        if let Some(sink) = sink.as_mut() {
            sink.write(&data)?;
        }
        body.extend_from_slice(&data);
    }
    let kept = sink.map(|sink| sink.finish(true)).transpose()?;
    Ok((body, kept, held))
}

/// Answers a request from the bundle, as `serve::answer` does for a paused one.
fn answer(
    episode: &EpisodeState,
    exchange: &Exchange,
    method: &str,
    url: &str,
    headers: &[(String, String)],
    body: &[u8],
) -> Result<Answer, Refused> {
    let content_type = header_of(headers, "content-type");
    let accept = header_of(headers, "accept");
    let authorization = header_of(headers, "authorization");
    let mut asked = Request {
        method,
        url,
        body: (!body.is_empty()).then_some(body),
        content_type: content_type.as_deref(),
        state: None,
        accept: accept.as_deref(),
        authorization: authorization.as_deref(),
    };
    let state;
    if episode.responder.depends_on_state(&asked) {
        state = episode.start_cookies.state(url, headers);
        asked.state = Some(&state);
    }
    let responder = &episode.responder;
    match responder.decide(&asked) {
        Decision::Answer { index, kind } => {
            let destination = Destination::of(headers);
            if matches!(kind, crate::matcher::MatchKind::Fuzzy { .. }) {
                responder.note_fuzzy_answer(&asked, index, destination == Destination::Document);
            }
            let response = responder.response(index).map_err(|error| Refused(format!("{error:#}")))?;
            let mut response_headers = response.headers;
            let is_html = header_of(&response_headers, "content-type")
                .is_some_and(|value| trace_analysis::body::mime_essence(&value) == "text/html");
            let is_javascript = header_of(&response_headers, "content-type")
                .is_some_and(|value| value.to_ascii_lowercase().contains("javascript"));
            let body = match destination {
                Destination::Document if is_html && response.status == 200 => {
                    // The scripts are inline: a policy that forbids inline scripts would refuse them.
                    response_headers.retain(|(name, _)| {
                        !name.eq_ignore_ascii_case("content-security-policy")
                            && !name.eq_ignore_ascii_case("content-security-policy-report-only")
                    });
                    episode.scripts.document_with_scripts(&response.body)
                }
                Destination::Worker if is_javascript && response.status == 200 => match &episode.scripts.worker {
                    Some(prelude) => [prelude.as_bytes(), b"\n", response.body.as_slice()].concat(),
                    None => response.body.to_vec(),
                },
                _ => response.body.to_vec(),
            };
            response_headers.extend(episode.start_cookies.hand_over(url));
            exchange.answered(episode, response.status, &response.status_text, &response_headers, &body);
            Ok(respond(response.status, &response_headers, body))
        }
        Decision::StreamOver { .. } => {
            exchange.answered(episode, 204, "", &[], &[]);
            Ok(respond(204, &[], Vec::new()))
        }
        Decision::RecordedFailure { error, .. } => {
            exchange.failed(episode, "net::ERR_FAILED");
            Err(Refused(format!("{method} {url} failed in the recording ({error})")))
        }
        Decision::Ignored { pattern } => {
            exchange.failed(episode, "net::ERR_BLOCKED_BY_CLIENT");
            Err(Refused(format!("{method} {url} is ignored ({pattern})")))
        }
        Decision::Miss => {
            if !responder.recording_reached_origin_of(url) {
                responder.count_live_attempt(method, url);
            }
            exchange.failed(episode, "net::ERR_INTERNET_DISCONNECTED");
            Err(Refused(format!("nothing recorded answers {method} {url}")))
        }
    }
}

/// Opens a tunnel to an origin the recording reached: TLS with a certificate for its host when it was
/// reached over `https`, plain otherwise. Anywhere else is a live attempt, refused.
fn connect(request: hyper::Request<Incoming>, shared: Arc<Shared>, connection: Connection) -> Answer {
    let Some(authority) = request.uri().authority().map(|a| a.as_str().to_owned()) else {
        return plain(StatusCode::BAD_REQUEST, "CONNECT needs a host and port");
    };
    let host = request.uri().host().unwrap_or_default().trim_start_matches('[').trim_end_matches(']').to_owned();
    // Plain only where the recording went over plain HTTP (a `ws://` socket's tunnel). A host it never
    // reached gets TLS too: who is asking is told by the request inside (see `made_by_page`).
    let responder = &connection.episode.responder;
    let reached = |scheme: &str| responder.recording_reached_origin_of(&format!("{scheme}://{authority}/"));
    let plain_http = !reached("https") && !reached("wss") && (reached("http") || reached("ws"));
    let scheme = if plain_http { "http" } else { "https" };
    let acceptor = if scheme == "https" {
        match shared.authority.acceptor_for(&host) {
            Ok(acceptor) => Some(acceptor),
            Err(error) => {
                tracing::warn!("no certificate for {host}: {error:#}");
                return plain(StatusCode::BAD_GATEWAY, "no certificate could be made for this host");
            }
        }
    } else {
        None
    };
    let tunnel = Tunnel { scheme, authority };
    let connection = Connection { tunnel: Some(tunnel.clone()), ..connection };
    tokio::spawn(async move {
        let upgraded = match hyper::upgrade::on(request).await {
            Ok(upgraded) => TokioIo::new(upgraded),
            Err(error) => return tracing::debug!("CONNECT not upgraded: {error}"),
        };
        match acceptor {
            Some(acceptor) => match tokio::time::timeout(HEAD_TIMEOUT, acceptor.accept(upgraded)).await {
                Ok(Ok(tls)) => serve_connection(TokioIo::new(tls), shared, connection, None).await,
                Ok(Err(error)) => tracing::debug!("TLS with the browser failed for {}: {error}", tunnel.authority),
                Err(_) => tracing::debug!("no TLS handshake for {} within {HEAD_TIMEOUT:?}", tunnel.authority),
            },
            None => serve_connection(TokioIo::new(upgraded), shared, connection, None).await,
        }
    });
    respond(200, &[], Vec::new())
}

/// Whether a page made the request (or a navigation asked for it), rather than the browser for itself: a
/// page's requests say where they come from or what they are for (`Sec-Fetch-Site` other than `none`,
/// `Origin`, `Referer`), and a navigation asks to be upgraded (`Upgrade-Insecure-Requests`) or says it is
/// one (`Sec-Fetch-Mode: navigate`); the browser's services (its updater, its account check) send from
/// no site in no mode a page has, or no such header at all.
fn made_by_page(headers: &[(String, String)]) -> bool {
    // What the browser's services send to secure origins: from no site, for no page's use.
    let from_nowhere = header_of(headers, "sec-fetch-site").as_deref() == Some("none")
        && header_of(headers, "sec-fetch-mode").as_deref() != Some("navigate");
    !from_nowhere
        && ["sec-fetch-mode", "origin", "referer", "upgrade-insecure-requests"]
            .iter()
            .any(|name| header_of(headers, name).is_some())
}

/// Why a tab's document is asked for, when the request is one: typed (or `goto`: from no site), a form
/// sent, a link followed. A frame's document is the frame's, not the tab's.
fn tab_navigation(method: &str, headers: &[(String, String)]) -> Option<NavigationCause> {
    let tab_document = match header_of(headers, "sec-fetch-dest").as_deref() {
        Some(destination) => destination == "document",
        None => Destination::of(headers) == Destination::Document,
    };
    if !tab_document {
        return None;
    }
    Some(if !method.eq_ignore_ascii_case("GET") {
        NavigationCause::FormSubmit
    } else if header_of(headers, "sec-fetch-site").as_deref() == Some("none") {
        NavigationCause::Typed
    } else if header_of(headers, "referer").is_some() {
        NavigationCause::Link
    } else {
        NavigationCause::Other
    })
}

/// What a request is for, as the browser says in `Sec-Fetch-Dest` (sent to secure and loopback origins),
/// else as its `Accept` header shows: a navigation asks for HTML first, a script's `fetch` for anything.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
enum Destination {
    Document,
    Worker,
    Other,
}

impl Destination {
    fn of(headers: &[(String, String)]) -> Destination {
        match header_of(headers, "sec-fetch-dest").as_deref() {
            Some("document" | "iframe" | "frame") => Destination::Document,
            Some("worker" | "sharedworker" | "serviceworker") => Destination::Worker,
            Some(_) => Destination::Other,
            None if header_of(headers, "accept").is_some_and(|accept| accept.starts_with("text/html")) => {
                Destination::Document
            }
            None => Destination::Other,
        }
    }
}

/// The page scripts, as a document's head and a worker's prelude take them.
struct PageScripts {
    /// A `<script>` element holding every page script.
    document: String,
    /// What workers run before their own script (determinism and the sockets).
    worker: Option<String>,
}

impl PageScripts {
    /// The page scripts of `archive`, and with `reporting` the report of what each page shows to the
    /// episode's session.
    fn for_archive(archive: &ReplayArchive, determinism: bool, started_ms: f64, reporting: bool) -> PageScripts {
        let page_scripts::ReplayScripts { mut page, worker } =
            page_scripts::for_archive(archive, determinism, started_ms);
        if reporting {
            page.push(page_scripts::proxy_report());
        }
        let inline = escape_script_ends(&page.join("\n"));
        PageScripts {
            document: format!("<script>{inline}</script>"),
            worker: (!worker.is_empty()).then(|| worker.join("\n")),
        }
    }

    /// `html` with the scripts first: after its doctype (before it, the page would render in quirks mode),
    /// before anything else, so that they run before the page's own.
    fn document_with_scripts(&self, html: &[u8]) -> Vec<u8> {
        let at = doctype_end(html).unwrap_or(0);
        [&html[..at], self.document.as_bytes(), &html[at..]].concat()
    }
}

/// `script` as the text of an inline `<script>`: inside one, `</script` in any case ends the element
/// early (a recorded storage value or socket frame may hold it); the scripts' own text, their JSON strings
/// included, reads the same with the slash escaped.
fn escape_script_ends(script: &str) -> String {
    let lower = script.to_ascii_lowercase();
    let mut escaped = String::with_capacity(script.len());
    let mut from = 0;
    for (at, _) in lower.match_indices("</script") {
        escaped.push_str(&script[from..at]);
        escaped.push_str("<\\/");
        from = at + 2;
    }
    escaped.push_str(&script[from..]);
    escaped
}

/// Where a leading `<!doctype …>` (after a byte order mark, white space and comments) ends.
fn doctype_end(html: &[u8]) -> Option<usize> {
    let mut at = if html.starts_with(b"\xef\xbb\xbf") { 3 } else { 0 };
    loop {
        while html.get(at).is_some_and(u8::is_ascii_whitespace) {
            at += 1;
        }
        let rest = &html[at..];
        if rest.starts_with(b"<!--") {
            let close = rest.windows(3).position(|w| w == b"-->")?;
            at += close + 3;
        } else if rest.len() >= 9 && rest[..9].eq_ignore_ascii_case(b"<!doctype") {
            return Some(at + rest.iter().position(|&b| b == b'>')? + 1);
        } else {
            return None;
        }
    }
}

/// The recording's start cookies, handed to the browser with the first response from their host.
struct StartCookies {
    cookies: Vec<Cookie>,
    /// How far the clock has moved since the recording: a cookie keeps the lifetime it had left then.
    shift_seconds: f64,
    /// Indices of the cookies handed over.
    handed: Mutex<HashSet<usize>>,
}

impl StartCookies {
    fn new(archive: &ReplayArchive) -> StartCookies {
        let cookies = archive.start_storage.as_ref().map(|storage| storage.cookies.clone()).unwrap_or_default();
        let shift_seconds = ((trace_manifest::time_fmt::now_ms() - archive.started_at_ms) / 1000.0).max(0.0);
        StartCookies { cookies, shift_seconds, handed: Mutex::default() }
    }

    /// The cookies not yet handed over that a request to `url` would carry.
    fn pending_for<'c>(&'c self, url: &url::Url, handed: &HashSet<usize>) -> impl Iterator<Item = (usize, &'c Cookie)> {
        let url = url.clone();
        self.cookies.iter().enumerate().filter(move |(index, cookie)| {
            !handed.contains(index) && crate::serve::cookie_is_sent(&cookie.domain, &cookie.path, cookie.secure, &url)
        })
    }

    /// The state a request carries: its own headers, and the start cookies it would carry had the browser
    /// been given them already (but where it sends a cookie of that name itself).
    fn state(&self, url: &str, headers: &[(String, String)]) -> RequestState {
        let own_cookies = header_of(headers, "cookie").unwrap_or_default();
        let sent: HashSet<&str> = trace_analysis::http::cookie_pairs(&own_cookies).map(|(name, _)| name).collect();
        let mut cookies = vec![own_cookies.clone()];
        if let Ok(parsed) = url::Url::parse(url) {
            let handed = self.handed.lock().expect("no panics while locked");
            let pending = self.pending_for(&parsed, &handed).filter(|(_, cookie)| !sent.contains(cookie.name.as_str()));
            cookies.extend(pending.map(|(_, cookie)| format!("{}={}", cookie.name, cookie.value)));
        }
        let cookies = cookies.iter().filter(|part| !part.is_empty()).cloned().collect::<Vec<_>>().join("; ");
        let others = headers.iter().filter(|(name, _)| !name.eq_ignore_ascii_case("cookie"));
        let all = others.map(|(name, value)| (name.as_str(), value.as_str())).chain([("cookie", cookies.as_str())]);
        RequestState::from_headers(all)
    }

    /// `Set-Cookie` headers for the start cookies of `url`'s host not handed over yet; they count as
    /// handed from now on.
    fn hand_over(&self, url: &str) -> Vec<(String, String)> {
        let Ok(parsed) = url::Url::parse(url) else { return Vec::new() };
        let mut handed = self.handed.lock().expect("no panics while locked");
        let now: Vec<(usize, String)> =
            self.pending_for(&parsed, &handed).map(|(index, cookie)| (index, self.set_cookie(cookie))).collect();
        now.into_iter()
            .map(|(index, header)| {
                handed.insert(index);
                ("set-cookie".to_owned(), header)
            })
            .collect()
    }

    fn set_cookie(&self, cookie: &Cookie) -> String {
        let mut header = format!("{}={}; Path={}", cookie.name, cookie.value, cookie.path);
        if cookie.domain.starts_with('.') {
            header.push_str(&format!("; Domain={}", cookie.domain.trim_start_matches('.')));
        }
        if let Some(expires) = cookie.expires {
            let seconds = (expires + self.shift_seconds - trace_manifest::time_fmt::now_ms() / 1000.0).max(0.0);
            header.push_str(&format!("; Max-Age={}", seconds.round() as u64));
        }
        if cookie.secure {
            header.push_str("; Secure");
        }
        if cookie.http_only {
            header.push_str("; HttpOnly");
        }
        if let Some(same_site) = &cookie.same_site {
            header.push_str(&format!("; SameSite={same_site}"));
        }
        header
    }
}

/// One request as the session records it.
struct Exchange {
    request_id: String,
    url: String,
    /// Why the tab's page is changing, when this is a tab's document (not a frame's).
    navigation: Option<NavigationCause>,
}

impl Exchange {
    fn start(
        episode: &EpisodeState,
        method: &str,
        url: &str,
        headers: &[(String, String)],
        body: Option<Kept>,
    ) -> Exchange {
        let number = episode.exchanges.fetch_add(1, Ordering::Relaxed) + 1;
        let exchange = Exchange {
            request_id: format!("proxy-{number}"),
            url: url.to_owned(),
            navigation: tab_navigation(method, headers),
        };
        if let Some(session) = episode.session() {
            let request = trace_manifest::event::Request {
                request_id: exchange.request_id.clone(),
                url: url.to_owned(),
                method: method.to_owned(),
                headers: headers.iter().map(|(name, value)| Header::new(name, value)).collect(),
                post_data: None,
                resource_type: Some(
                    match Destination::of(headers) {
                        Destination::Document => "Document",
                        Destination::Worker => "Other",
                        Destination::Other => "Fetch",
                    }
                    .to_owned(),
                ),
            };
            session.request_kept(&Origin::default(), request, body.unwrap_or(Kept::Empty));
        }
        exchange
    }

    fn answered(
        &self,
        episode: &EpisodeState,
        status: u16,
        status_text: &str,
        headers: &[(String, String)],
        body: &[u8],
    ) {
        let Some(session) = episode.session() else { return };
        let headers = headers.iter().map(|(name, value)| Header::new(name, value)).collect();
        let answer = session::Answer { request_id: &self.request_id, url: &self.url, status, status_text, headers };
        if let Err(error) = session.answered(&Origin::default(), answer, body) {
            tracing::warn!("the session cannot keep the answer to {}: {error:#}", self.url);
        }
        // A document that is no redirect is the page the tab shows next: its navigation, as a person's
        // recording has one for each page reached (what a checkpoint's URL is looked for in).
        if let Some(cause) = self.navigation.filter(|_| !(300..400).contains(&status)) {
            let navigation = Navigation { url: self.url.clone(), cause, main_frame: true };
            session.record(&Origin::default(), EventKind::Navigation(navigation));
        }
    }

    fn failed(&self, episode: &EpisodeState, error_text: &str) {
        if let Some(session) = episode.session() {
            session.failed(&Origin::default(), &self.request_id, error_text);
        }
    }
}

fn respond(status: u16, headers: &[(String, String)], body: Vec<u8>) -> Answer {
    let mut response = hyper::Response::new(Full::new(Bytes::from(body)));
    *response.status_mut() = StatusCode::from_u16(status).unwrap_or(StatusCode::OK);
    for (name, value) in headers {
        // A recorded header the HTTP crate will not carry (a name with a space) is left out.
        if let (Ok(name), Ok(value)) = (HeaderName::try_from(name.as_str()), HeaderValue::try_from(value.as_str())) {
            response.headers_mut().append(name, value);
        }
    }
    response
}

fn plain(status: StatusCode, text: &str) -> Answer {
    respond(status.as_u16(), &[("content-type".into(), "text/plain".into())], text.into())
}

fn header_of(headers: &[(String, String)], name: &str) -> Option<String> {
    headers.iter().find(|(key, _)| key.eq_ignore_ascii_case(name)).map(|(_, value)| value.clone())
}

/// The hosts a recording reached over TLS (`https`, `wss`), in lower case: those the proxy's authority
/// may vouch for.
fn secure_hosts(archive: &ReplayArchive) -> BTreeSet<String> {
    let requests = archive.exchanges.iter().map(|exchange| exchange.request.url.as_str());
    let sockets = archive.websockets.iter().map(|socket| socket.url.as_str());
    requests
        .chain(sockets)
        .filter_map(|url| url::Url::parse(url).ok())
        .filter(|url| matches!(url.scheme(), "https" | "wss"))
        .filter_map(|url| Some(url.host_str()?.trim_start_matches('[').trim_end_matches(']').to_ascii_lowercase()))
        .collect()
}

/// The proxy's certificate authority: a key and a self-signed certificate, kept in a folder (made on first
/// use with `--ca-dir`, else for the run), and the certificates it made for each host asked for. Every
/// host's certificate has the same key, so that one fingerprint ([`Authority::spki_fingerprint`]) lets a
/// browser take them all.
///
/// A browser that trusts the authority, rather than one key's fingerprint, trusts whatever it signs: so it
/// is name-constrained to the hosts the recording reached over TLS (a DNS name with its subdomains, an IP
/// address alone; `trace-replay.invalid`, which no host is, when there are none), and short-lived: two
/// days for a run's own, thirty for one kept in a folder. A kept one that has expired, will within a
/// day, or does not cover a bundle's hosts is made anew, for its hosts and the new ones, and the new one
/// must be trusted again (said at warn). Certificates for other hosts are still made, for browsers that
/// take the fingerprint; a browser that trusts only the authority refuses them.
pub struct Authority {
    issuer: rcgen::Issuer<'static, rcgen::KeyPair>,
    certificate_path: PathBuf,
    certificate_der: rustls::pki_types::CertificateDer<'static>,
    host_key: rcgen::KeyPair,
    /// When the authority's certificates start and stop being valid, in seconds since the epoch.
    valid: (u64, u64),
    acceptors: Mutex<Certificates>,
    /// The run's own folder, removed with the proxy.
    _temporary: Option<tempfile::TempDir>,
}

const CA_CERTIFICATE_FILE: &str = "trace-replay-ca.pem";
const CA_KEY_FILE: &str = "trace-replay-ca.key.pem";
/// What the kept authority covers (its hosts and validity), beside it: read back to decide whether it
/// still serves.
const CA_SCOPE_FILE: &str = "trace-replay-ca.json";

/// How long an authority made for one run is valid.
const RUN_AUTHORITY_DAYS: u64 = 2;
/// How long an authority kept in a folder is valid.
const KEPT_AUTHORITY_DAYS: u64 = 30;
/// The name a constrained authority permits when the recording reached no host over TLS: an `.invalid`
/// name, which no host has (RFC 6761).
const NO_HOST: &str = "trace-replay.invalid";
const DAY_SECONDS: u64 = 24 * 60 * 60;

/// What a kept authority covers: `trace-replay-ca.json`.
#[derive(Debug, Clone, serde::Serialize, serde::Deserialize)]
struct Scope {
    hosts: BTreeSet<String>,
    not_before: u64,
    not_after: u64,
}

impl Authority {
    /// The authority kept in `dir` (made there if it holds none, or none that covers `hosts` for another
    /// day), or a new one for this run; either vouches for `hosts` only.
    pub fn load_or_create(dir: Option<&Path>, hosts: &BTreeSet<String>) -> Result<Authority> {
        let now = std::time::SystemTime::now().duration_since(std::time::UNIX_EPOCH)?.as_secs();
        let (dir, temporary) = match dir {
            Some(dir) => {
                std::fs::create_dir_all(dir).with_context(|| format!("cannot create {}", dir.display()))?;
                (dir.to_owned(), None)
            }
            None => {
                let temporary = tempfile::Builder::new().prefix("trace-replay-ca-").tempdir()?;
                (temporary.path().to_owned(), Some(temporary))
            }
        };
        let certificate_path = dir.join(CA_CERTIFICATE_FILE);
        let key_path = dir.join(CA_KEY_FILE);
        let scope_path = dir.join(CA_SCOPE_FILE);
        let read =
            |path: &Path| std::fs::read_to_string(path).with_context(|| format!("cannot read {}", path.display()));
        let kept: Option<Scope> = key_path
            .exists()
            .then(|| read(&scope_path).ok())
            .flatten()
            .and_then(|text| serde_json::from_str(&text).ok());
        let serves =
            kept.as_ref().filter(|scope| scope.not_after > now + DAY_SECONDS && scope.hosts.is_superset(hosts));
        let (key, certificate_pem, scope) = match serves {
            Some(scope) => {
                let key = rcgen::KeyPair::from_pem(&read(&key_path)?)
                    .with_context(|| format!("{} is not a private key in PEM", key_path.display()))?;
                (key, read(&certificate_path)?, scope.clone())
            }
            None => {
                let days = if temporary.is_some() { RUN_AUTHORITY_DAYS } else { KEPT_AUTHORITY_DAYS };
                // A kept one's hosts stay covered, so that bundles served in turn share one authority.
                let mut covered = kept.map(|scope| scope.hosts).unwrap_or_default();
                covered.extend(hosts.iter().cloned());
                let scope = Scope {
                    hosts: covered,
                    not_before: now.saturating_sub(DAY_SECONDS),
                    not_after: now + days * DAY_SECONDS,
                };
                if key_path.exists() {
                    tracing::warn!(
                        "the certificate authority in {} expires within a day or does not cover {}: a new one \
                         was made there; a browser that trusted the old one must trust the new one",
                        dir.display(),
                        hosts.iter().cloned().collect::<Vec<_>>().join(", ")
                    );
                }
                let key = rcgen::KeyPair::generate()?;
                let certificate = authority_params(&scope)?.self_signed(&key)?;
                // The key is written readable by its owner alone, before it holds anything.
                let mut file = trace_store::atomic::AtomicFile::create(&key_path)?;
                std::fs::set_permissions(file.partial_path(), std::fs::Permissions::from_mode(0o600))?;
                file.file().write_all(key.serialize_pem().as_bytes())?;
                file.commit()?;
                trace_store::atomic::write(&certificate_path, |out| Ok(out.write_all(certificate.pem().as_bytes())?))?;
                trace_store::atomic::write_json(&scope_path, &scope)?;
                (key, certificate.pem(), scope)
            }
        };
        let certificate_der = rustls::pki_types::CertificateDer::from_pem_slice(certificate_pem.as_bytes())
            .with_context(|| format!("{} holds no certificate in PEM", certificate_path.display()))?;
        Ok(Authority {
            issuer: rcgen::Issuer::new(authority_params(&scope)?, key),
            certificate_path,
            certificate_der,
            host_key: rcgen::KeyPair::generate()?,
            valid: (scope.not_before, scope.not_after),
            acceptors: Mutex::default(),
            _temporary: temporary,
        })
    }

    /// The authority's certificate (PEM), to install where a browser should trust it.
    pub fn certificate_path(&self) -> &Path {
        &self.certificate_path
    }

    /// The authority's certificate, DER-encoded.
    pub fn certificate_der(&self) -> &rustls::pki_types::CertificateDer<'static> {
        &self.certificate_der
    }

    /// The base64 SHA-256 of the hosts' certificates' public key, as Chromium's
    /// `--ignore-certificate-errors-spki-list` takes it.
    pub fn spki_fingerprint(&self) -> String {
        use rcgen::PublicKeyData as _;
        base64::engine::general_purpose::STANDARD.encode(Sha256::digest(self.host_key.subject_public_key_info()))
    }

    /// How many hosts' certificates are kept now.
    pub fn certificates_kept(&self) -> usize {
        self.acceptors.lock().expect("no panics while locked").len()
    }

    fn acceptor_for(&self, host: &str) -> Result<TlsAcceptor> {
        if let Some(acceptor) = self.acceptors.lock().expect("no panics while locked").get(host) {
            return Ok(acceptor);
        }
        let mut params = rcgen::CertificateParams::new(vec![host.to_owned()])?;
        params.distinguished_name.push(rcgen::DnType::CommonName, host);
        set_validity(&mut params, self.valid);
        let certificate = params.signed_by(&self.host_key, &self.issuer)?;
        let key = rustls::pki_types::PrivateKeyDer::Pkcs8(self.host_key.serialize_der().into());
        let provider = Arc::new(rustls::crypto::aws_lc_rs::default_provider());
        let mut config = rustls::ServerConfig::builder_with_provider(provider)
            .with_safe_default_protocol_versions()?
            .with_no_client_auth()
            .with_single_cert(vec![certificate.der().clone(), self.certificate_der.clone()], key)?;
        // One HTTP/1.1 server answers every tunnel.
        config.alpn_protocols = vec![b"http/1.1".to_vec()];
        let acceptor = TlsAcceptor::from(Arc::new(config));
        self.acceptors.lock().expect("no panics while locked").insert(host.to_owned(), acceptor.clone());
        Ok(acceptor)
    }
}

/// The hosts' certificates, at most [`MAX_CERTIFICATES`], the one used longest ago dropped first.
#[derive(Default)]
struct Certificates {
    by_host: HashMap<String, (TlsAcceptor, u64)>,
    /// Counts uses, to tell which was used longest ago.
    uses: u64,
}

impl Certificates {
    fn len(&self) -> usize {
        self.by_host.len()
    }

    fn get(&mut self, host: &str) -> Option<TlsAcceptor> {
        self.uses += 1;
        let (acceptor, used) = self.by_host.get_mut(host)?;
        *used = self.uses;
        Some(acceptor.clone())
    }

    fn insert(&mut self, host: String, acceptor: TlsAcceptor) {
        if self.by_host.len() >= MAX_CERTIFICATES && !self.by_host.contains_key(&host) {
            // A linear search, once per certificate made: making one costs far more.
            let oldest = self.by_host.iter().min_by_key(|(_, (_, used))| *used).map(|(host, _)| host.clone());
            if let Some(oldest) = oldest {
                self.by_host.remove(&oldest);
            }
        }
        self.uses += 1;
        self.by_host.insert(host, (acceptor, self.uses));
    }
}

/// Makes `params` valid from `not_before` to `not_after`, in seconds since the epoch.
fn set_validity(params: &mut rcgen::CertificateParams, (not_before, not_after): (u64, u64)) {
    let epoch = rcgen::date_time_ymd(1970, 1, 1);
    params.not_before = epoch + Duration::from_secs(not_before);
    params.not_after = epoch + Duration::from_secs(not_after);
}

/// The authority's certificate for `scope`, the same each time, so that its key (kept) and these make the
/// certificate a browser was told to trust.
fn authority_params(scope: &Scope) -> Result<rcgen::CertificateParams> {
    let mut params = rcgen::CertificateParams::default();
    params.distinguished_name.push(rcgen::DnType::CommonName, "trace-replay certificate authority");
    params.distinguished_name.push(rcgen::DnType::OrganizationName, "TRACE");
    // It signs hosts' certificates, not other authorities'.
    params.is_ca = rcgen::IsCa::Ca(rcgen::BasicConstraints::Constrained(0));
    params.key_usages = vec![rcgen::KeyUsagePurpose::KeyCertSign, rcgen::KeyUsagePurpose::CrlSign];
    let mut permitted: Vec<rcgen::GeneralSubtree> = scope
        .hosts
        .iter()
        .map(|host| match host.parse::<std::net::IpAddr>() {
            Ok(address) => {
                let bits = if address.is_ipv4() { 32 } else { 128 };
                rcgen::GeneralSubtree::IpAddress(rcgen::CidrSubnet::from_addr_prefix(address, bits))
            }
            Err(_) => rcgen::GeneralSubtree::DnsName(host.clone()),
        })
        .collect();
    if permitted.is_empty() {
        permitted.push(rcgen::GeneralSubtree::DnsName(NO_HOST.to_owned()));
    }
    params.name_constraints =
        Some(rcgen::NameConstraints { permitted_subtrees: permitted, excluded_subtrees: Vec::new() });
    set_validity(&mut params, (scope.not_before, scope.not_after));
    Ok(params)
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn the_scripts_go_after_the_doctype_and_before_everything_else() {
        let scripts = PageScripts { document: "<script>S</script>".to_owned(), worker: None };
        let cases: [(&str, &str); 4] = [
            ("<!DOCTYPE html><html><head>", "<!DOCTYPE html><script>S</script><html><head>"),
            (
                "\u{feff}  <!-- c --> <!doctype html>\n<p>",
                "\u{feff}  <!-- c --> <!doctype html><script>S</script>\n<p>",
            ),
            ("<html><body>x", "<script>S</script><html><body>x"),
            ("<!-- unclosed", "<script>S</script><!-- unclosed"),
        ];
        for (html, expected) in cases {
            let written = String::from_utf8(scripts.document_with_scripts(html.as_bytes())).unwrap();
            assert_eq!(written, expected, "{html:?}");
        }
    }

    #[test]
    fn an_inline_script_ends_only_where_it_should_whatever_the_case() {
        let script = r#"const saved = {"note": "</ScRiPt><b>x</b>", "other": "</script >"};"#;
        let escaped = escape_script_ends(script);
        assert_eq!(escaped, r#"const saved = {"note": "<\/ScRiPt><b>x</b>", "other": "<\/script >"};"#);
        assert!(!escaped.to_ascii_lowercase().contains("</script"));
        assert_eq!(escape_script_ends("no end here: </scrip"), "no end here: </scrip");
    }

    #[test]
    fn a_navigation_is_told_from_a_fetch_of_html() {
        let headers = |pairs: &[(&str, &str)]| -> Vec<(String, String)> {
            pairs.iter().map(|(name, value)| (name.to_string(), value.to_string())).collect()
        };
        assert_eq!(Destination::of(&headers(&[("Sec-Fetch-Dest", "document")])), Destination::Document);
        assert_eq!(
            Destination::of(&headers(&[("sec-fetch-dest", "empty"), ("accept", "text/html")])),
            Destination::Other
        );
        assert_eq!(Destination::of(&headers(&[("Accept", "text/html,application/xhtml+xml")])), Destination::Document);
        assert_eq!(Destination::of(&headers(&[("Accept", "*/*")])), Destination::Other);
        assert_eq!(Destination::of(&headers(&[("Sec-Fetch-Dest", "worker")])), Destination::Worker);
    }
}
