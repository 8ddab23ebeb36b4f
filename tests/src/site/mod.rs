//! The TRACE Demo Shop: the small website that end-to-end tests and the README demo record. It offers, on
//! 127.0.0.1 over plain HTTP, everything a recording has to survive: a stylesheet that loads a font and a
//! background image, images, a script that fetches JSON with a cache-busting query, an analytics beacon, a
//! sign-in form with a CSRF token and a cookie session, a cart, a search by GET, a redirect, an iframe, a
//! link that opens a new tab, a page per product with one layout, a page under a strict
//! Content-Security-Policy, a page that shows the time and a random number, a support chat over a
//! WebSocket, an expert whose answer streams back as server-sent events keyed by an id the page makes, and
//! a sign-in whose secrets travel the ways no name rule catches, and notes whose pages change under the person
//! (a loading screen, a URL rewritten while one types, a save that navigates, a slow save). Text responses are gzipped when the client accepts it. Apart from session ids, CSRF
//! tokens and the vault's keys, every response is the same from one run to the next.
//!
//! This module owns the server: [`router`] builds the site (the `trace-demo-site` binary serves it) and
//! [`DemoSite`] runs it on its own thread for synchronous tests, remembering every request it served.
//!
//! # Layout
//! - `pages`: the HTML pages that hold no state (home, help, embed and widget, strict, clock, a card
//!   checkout, a gallery of 240 pictures for a large page, 404).
//! - `catalog`: the fixed product list, `/api/products`, `/search` and a page per product, `/item/<id>`.
//! - `account`: sign-in with CSRF, sessions, `/account` and the cart.
//! - [`chat`]: the support chat, `/chat` and its WebSocket.
//! - [`ask`]: "Ask an expert", `/ask`, its event stream and the page's own session id.
//! - [`vault`]: "Partner vault", `/vault`, a sign-in carrying its secrets in script-made encodings.
//! - [`sealed`]: "Sealed note", `/sealed`, a sign-in the page gzips itself and sends without saying so.
//! - `notes`: "Notes", `/notes`, pages that change under the person: a loading screen, a filter that
//!   rewrites the URL, a title that saves itself and navigates, a save the server answers slowly.
//! - `tracker`: the `/collect` endpoint of the analytics beacon, kept apart from the shop itself.
//! - `download`: `/download?mb=N`, a large file that does not compress.
//! - `assets`: the static files under `/static/`, embedded in the binary from `static/`.
//! - `html`: the page layout, HTML escaping and the 404 page.

mod account;
pub mod ask;
mod assets;
mod catalog;
pub mod chat;
mod download;
mod html;
mod notes;
mod pages;
mod tracker;

pub(crate) use account::random_token;
pub mod sealed;
pub mod vault;

use std::future::IntoFuture;
use std::net::{Ipv4Addr, TcpListener};
use std::sync::{Arc, Mutex, MutexGuard, PoisonError};
use std::thread::JoinHandle;
use std::time::Duration;

use anyhow::Context;
use axum::Router;
use axum::extract::{Request, State};
use axum::http::{HeaderMap, StatusCode, Version, header};
use axum::middleware::{self, Next};
use axum::response::Response;
use axum::routing::{any, get};
use tokio::sync::watch;
use tower_http::compression::CompressionLayer;

pub use pages::{GALLERY_PICTURES, STRICT_CSP};

/// The one account of the shop.
pub const DEMO_USER: &str = "ann";
/// The password of [`DEMO_USER`].
pub const DEMO_PASSWORD: &str = "blue-mug-42";

/// How long connections may finish their requests once the site is asked to stop. Browsers keep idle
/// connections open; those are closed at once, so this only bounds a request that never ends.
const SHUTDOWN_GRACE: Duration = Duration::from_secs(2);

/// One request the site answered.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct ServedRequest {
    pub method: String,
    /// The path with its query, as the client sent it, e.g. `/search?q=mug`.
    pub path_and_query: String,
    pub status: u16,
}

/// What the site remembers while it runs: sessions, CSRF tokens, carts, and the requests it served.
/// Cloning shares it.
#[derive(Clone, Default)]
pub struct SiteState {
    shared: Arc<Shared>,
}

#[derive(Default)]
struct Shared {
    served: Mutex<Vec<ServedRequest>>,
    accounts: Mutex<account::Accounts>,
    /// "Ask an expert": session id → the question waiting for its stream.
    questions: Mutex<std::collections::HashMap<String, String>>,
    vault: Mutex<vault::Vault>,
    notes: Mutex<notes::Notes>,
    print_requests: bool,
}

impl SiteState {
    pub fn new() -> SiteState {
        SiteState::default()
    }

    /// A state that also prints every request to stderr as it is answered, for a person watching the site.
    pub fn printing_requests() -> SiteState {
        SiteState { shared: Arc::new(Shared { print_requests: true, ..Shared::default() }) }
    }

    /// Every request answered so far, in the order the answers were produced.
    pub fn served(&self) -> Vec<ServedRequest> {
        lock(&self.shared.served).clone()
    }

    fn accounts(&self) -> MutexGuard<'_, account::Accounts> {
        lock(&self.shared.accounts)
    }

    fn vault(&self) -> MutexGuard<'_, vault::Vault> {
        lock(&self.shared.vault)
    }

    fn notes(&self) -> MutexGuard<'_, notes::Notes> {
        lock(&self.shared.notes)
    }
}

/// A panic in one handler must not take the whole site down with a poisoned lock: the data behind these
/// locks stays consistent between statements, so it is safe to go on using it.
fn lock<T>(mutex: &Mutex<T>) -> MutexGuard<'_, T> {
    mutex.lock().unwrap_or_else(PoisonError::into_inner)
}

/// The whole site. Requests are recorded in `state` and text responses gzipped when the client accepts it.
pub fn router(state: SiteState) -> Router {
    Router::new()
        .route("/", get(pages::home))
        .route("/login", get(account::login_form).post(account::login))
        .route("/account", get(account::account))
        .route("/cart", get(account::cart).post(account::add_to_cart))
        .route("/search", get(catalog::search))
        .route("/item/{id}", get(catalog::item))
        .route("/api/products", get(catalog::products))
        .route("/api/ping", get(pages::ping))
        .route("/deals", get(pages::deals))
        .route("/embed", get(pages::embed))
        .route("/widget", get(pages::widget))
        .route("/help", get(pages::help))
        .route("/gallery", get(pages::gallery))
        .route("/picture/{name}", get(pages::picture))
        .route("/strict", get(pages::strict))
        .route("/clock", get(pages::clock))
        .route("/forge", get(pages::forge))
        .route("/checkout", get(pages::checkout).post(pages::pay))
        .route("/chat", get(chat::page))
        .route("/chat/worker", get(chat::page))
        .route("/chat/socket", get(chat::socket))
        .route("/ask", get(ask::page))
        .route("/ask/join", axum::routing::post(ask::join))
        .route("/ask/stream", get(ask::stream))
        .route("/vault", get(vault::page))
        .route("/vault/connect", axum::routing::post(vault::connect))
        .route("/vault/check", get(vault::check))
        .route("/sealed", get(sealed::page))
        .route("/sealed/send", axum::routing::post(sealed::send))
        .route("/notes", get(notes::list))
        .route("/notes/api/list", get(notes::list_json))
        .route("/notes/api/draft", axum::routing::post(notes::draft))
        .route("/notes/new", get(notes::new))
        .route("/notes/{id}", axum::routing::post(notes::save))
        .route("/notes/{id}/edit", get(notes::edit))
        .route("/collect", any(tracker::collect))
        .route("/download", get(download::download))
        .route("/static/{file}", get(assets::asset))
        .fallback(html::not_found)
        .layer(CompressionLayer::new().compress_when(is_text))
        .layer(middleware::from_fn_with_state(state.clone(), record_served))
        .with_state(state)
}

/// Compresses what a real site would: text of any size (even `{"ok":true}`, so that tests of gzip handling
/// meet it everywhere), never images or fonts, which are compressed already.
fn is_text(_: StatusCode, _: Version, headers: &HeaderMap, _: &axum::http::Extensions) -> bool {
    let Some(content_type) = headers.get(header::CONTENT_TYPE).and_then(|value| value.to_str().ok()) else {
        return false;
    };
    let mime = content_type.split(';').next().unwrap_or_default().trim();
    mime.starts_with("text/") || mime == "application/json"
}

async fn record_served(State(state): State<SiteState>, request: Request, next: Next) -> Response {
    let method = request.method().to_string();
    let path_and_query =
        request.uri().path_and_query().map_or_else(|| request.uri().path().to_owned(), |pq| pq.as_str().to_owned());
    let response = next.run(request).await;
    let served = ServedRequest { method, path_and_query, status: response.status().as_u16() };
    if state.shared.print_requests {
        eprintln!("{} {} {}", served.method, served.path_and_query, served.status);
    }
    lock(&state.shared.served).push(served);
    response
}

/// Listens on 127.0.0.1:`port` (0 for any free port), with an error that says which address was taken.
pub fn bind(port: u16) -> anyhow::Result<TcpListener> {
    let listener =
        TcpListener::bind((Ipv4Addr::LOCALHOST, port)).with_context(|| format!("cannot listen on 127.0.0.1:{port}"))?;
    // Tokio requires it of listeners it adopts.
    listener.set_nonblocking(true).context("cannot make the listening socket non-blocking")?;
    Ok(listener)
}

/// Whether the browser may keep what the site serves.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Caching {
    /// As the shop's handlers say (most say nothing).
    AsServed,
    /// Every response `Cache-Control: no-store`: each page load fetches everything again, in any tab,
    /// without a DevTools domain enabled to turn the cache off (a benchmark of those domains' costs needs
    /// a tab with none enabled that still fetches everything).
    NoStore,
}

/// The demo shop running on its own thread with its own runtime, for tests that are synchronous. Stops when
/// dropped.
pub struct DemoSite {
    port: u16,
    state: SiteState,
    stop: watch::Sender<bool>,
    thread: Option<JoinHandle<()>>,
}

impl DemoSite {
    /// Starts the site on 127.0.0.1:`port` (0 = any free port).
    pub fn start(port: u16) -> anyhow::Result<DemoSite> {
        DemoSite::start_with_latency(port, Duration::ZERO)
    }

    /// Starts the site with every response held back `latency` first, as a real network's round trip would.
    pub fn start_with_latency(port: u16, latency: Duration) -> anyhow::Result<DemoSite> {
        DemoSite::start_with(port, latency, Caching::AsServed)
    }

    /// Starts the site with every response held back `latency` first and, with [`Caching::NoStore`], marked
    /// `Cache-Control: no-store`.
    pub fn start_with(port: u16, latency: Duration, caching: Caching) -> anyhow::Result<DemoSite> {
        let listener = bind(port)?;
        let port = listener.local_addr().context("cannot read the site's address")?.port();
        let runtime = tokio::runtime::Builder::new_current_thread()
            .enable_all()
            .build()
            .context("cannot start the site's runtime")?;
        let listener = {
            let _in_runtime = runtime.enter();
            tokio::net::TcpListener::from_std(listener).context("cannot hand the socket to the runtime")?
        };
        let state = SiteState::new();
        let mut app = router(state.clone());
        if !latency.is_zero() {
            app = app.layer(middleware::from_fn(move |request: Request, next: Next| async move {
                tokio::time::sleep(latency).await;
                next.run(request).await
            }));
        }
        if caching == Caching::NoStore {
            app = app.layer(middleware::from_fn(|request: Request, next: Next| async move {
                let mut response = next.run(request).await;
                response.headers_mut().insert(header::CACHE_CONTROL, header::HeaderValue::from_static("no-store"));
                response
            }));
        }
        let (stop, stop_requested) = watch::channel(false);
        let thread = std::thread::Builder::new()
            .name(format!("demo-site-{port}"))
            .spawn(move || runtime.block_on(serve_until_stopped(listener, app, stop_requested)))
            .context("cannot start the site's thread")?;
        Ok(DemoSite { port, state, stop, thread: Some(thread) })
    }

    pub fn port(&self) -> u16 {
        self.port
    }

    /// The site's URL for `path`: `url("/login")` is `http://127.0.0.1:PORT/login`.
    pub fn url(&self, path: &str) -> String {
        let separator = if path.starts_with('/') { "" } else { "/" };
        format!("http://127.0.0.1:{}{separator}{path}", self.port)
    }

    /// Every request served so far, in order: method, path with query, status.
    pub fn served(&self) -> Vec<ServedRequest> {
        self.state.served()
    }

    /// Every secret the vault handed out so far (session cookies, form keys, API keys and tokens).
    pub fn vault_secrets(&self) -> Vec<String> {
        self.state.vault().issued()
    }

    /// Stops the site and waits until its thread has ended (dropping it does the same).
    pub fn stop(self) {}
}

impl Drop for DemoSite {
    fn drop(&mut self) {
        // An error means the server's thread has ended already, which is what we want.
        let _ = self.stop.send(true);
        if let Some(thread) = self.thread.take() {
            let _ = thread.join();
        }
    }
}

async fn serve_until_stopped(listener: tokio::net::TcpListener, app: Router, stop_requested: watch::Receiver<bool>) {
    // A dropped sender also means stop, hence the results are ignored.
    let mut graceful_signal = stop_requested.clone();
    let server = axum::serve(listener, app).with_graceful_shutdown(async move {
        let _ = graceful_signal.wait_for(|stop| *stop).await;
    });
    let mut deadline_signal = stop_requested;
    let grace_over = async move {
        let _ = deadline_signal.wait_for(|stop| *stop).await;
        tokio::time::sleep(SHUTDOWN_GRACE).await;
    };
    tokio::select! {
        result = server.into_future() => {
            if let Err(error) = result {
                eprintln!("demo site: the server stopped: {error}");
            }
        }
        () = grace_over => {}
    }
}
