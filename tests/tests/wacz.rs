//! End to end: the demonstration of [`trace_e2e::demo`], recorded with the extension, exported by
//! `trace-host export --format wacz --redact`, and opened in ReplayWeb.page (its `ui.js` and `sw.js`, from
//! npm, served with the WACZ from 127.0.0.1) in headless Chromium, until the page the person searched on
//! shows, inside ReplayWeb.page's frames, the text the recorded page said. Needs `cargo xtask dist` and
//! ReplayWeb.page in `target/replayweb` (`.ci/install`); skips without them, saying so, unless
//! `TRACE_E2E_REQUIRED` is set.

use std::path::{Path, PathBuf};
use std::sync::{Arc, Mutex};
use std::time::{Duration, Instant};

use anyhow::{Context, Result, bail};
use axum::Router;
use axum::body::Body;
use axum::extract::{Request, State};
use axum::http::{HeaderMap, HeaderValue, StatusCode, header};
use axum::middleware::{self, Next};
use axum::response::Response;
use axum::routing::get;
use chromiumoxide::Page;
use chromiumoxide::cdp::browser_protocol::target::SetAutoAttachParams;
use trace_bundle::archive::Bundle;
use trace_e2e::browser::REQUIRED_ENV;
use trace_e2e::demo::recorded_once as recorded;
use trace_e2e::run;
use trace_replay::chromium::{self, Launch};

/// How long ReplayWeb.page may take to load the WACZ and show the page.
const SHOWN_WITHIN: Duration = Duration::from_secs(60);

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn the_demonstration_exported_as_a_wacz_replays_in_replaywebpage() {
    let test = "the_demonstration_exported_as_a_wacz_replays_in_replaywebpage";
    let Some(replayweb) = replayweb_for_tests(test) else { return };
    let Some(recorded) = recorded(test).await else { return };
    let exported = &recorded.exported;
    let task = exported.bundle.file_stem().and_then(|stem| stem.to_str()).unwrap().to_owned();
    let wacz = exported.data.path().join(format!("{task}.wacz"));
    run(
        &recorded.build.trace_host,
        &[
            "--data",
            exported.data.path().to_str().unwrap(),
            "export",
            &task,
            "--format",
            "wacz",
            "--redact",
            "--out",
            wacz.to_str().unwrap(),
        ],
    );

    // The search results page, and what it said when it was recorded, from the bundle.
    let url = format!("{}/search?q=mug", exported.origin);
    let mut bundle = Bundle::open(&exported.bundle).unwrap();
    let har = bundle.har().unwrap();
    let entry = har
        .log
        .entries
        .iter()
        .find(|entry| entry.request.url == url && entry.response.status == 200)
        .expect("the search page is recorded");
    let body = bundle.read(entry.response.content.file.as_deref().expect("its body is recorded")).unwrap();
    let said = text_of_element(&String::from_utf8(body).unwrap(), "result-count").expect("the result count");
    assert!(said.contains("mug"), "{said}");

    let shown = shown_in_replaywebpage(&recorded.build.chromium, &replayweb, &wacz, &url, &said).await;
    let frames = shown.unwrap_or_else(|error| panic!("{error:#}"));
    assert!(frames.iter().any(|(frame_url, text)| frame_url.contains("mp_/") && text.contains(&said)), "{frames:?}");
}

/// The text of the element with `id` in `html`, entities as written (the result count has none).
fn text_of_element(html: &str, id: &str) -> Option<String> {
    let start = html.find(&format!("id=\"{id}\""))?;
    let text = &html[start..];
    let text = &text[text.find('>')? + 1..];
    Some(text[..text.find('<')?].trim().to_owned())
}

/// ReplayWeb.page's `ui.js` and `sw.js`, as `.ci/install` unpacks its npm package: `None`, said in one line,
/// when they are missing, unless `TRACE_E2E_REQUIRED` is set, which makes it fail.
fn replayweb_for_tests(test: &str) -> Option<PathBuf> {
    let dir = Path::new(env!("CARGO_MANIFEST_DIR")).join("../target/replayweb/package");
    if dir.join("ui.js").is_file() && dir.join("sw.js").is_file() {
        return Some(dir);
    }
    let error = format!("ReplayWeb.page is not in {} (`bash .ci/install` puts it there)", dir.display());
    if std::env::var_os(REQUIRED_ENV).is_some_and(|value| !value.is_empty()) {
        panic!("{test}: {error} ({REQUIRED_ENV} is set)");
    }
    eprintln!("skipped {test}: {error}");
    None
}

/// What `replay/` answers until ReplayWeb.page's service worker controls it (from then on the worker answers
/// it with its own app). `<replay-web-page>` opens its frame there as soon as the worker is registered, which
/// is before the worker is active; it reloads the frame three times, 100 ms apart, and then gives up for
/// good, leaving the frame empty. A worker whose install outlasts that (ReplayWeb.page's is 1.2 MB of script,
/// on a busy 2-core machine) left the test waiting on an empty frame; this page reloads itself once the
/// worker has taken it over.
const BEFORE_THE_WORKER: &str = "<!doctype html>\n<script>\n\
    const reload = () => location.reload();\n\
    if (navigator.serviceWorker.controller) reload();\n\
    else navigator.serviceWorker.addEventListener('controllerchange', reload);\n\
    </script>\n";

/// What the test's server serves: ReplayWeb.page's files and one WACZ; and every request it answered, for
/// the failure's message.
struct Served {
    ui: Vec<u8>,
    sw: Vec<u8>,
    wacz: Vec<u8>,
    index: String,
    answered: Mutex<Vec<String>>,
}

/// Serves `index.html` (a `<replay-web-page>` of `url` in the WACZ), `ui.js` (also under `replay/`, where
/// the replay frame's own page asks for it), `replay/sw.js` (where the element looks for its service worker
/// by default), `replay/` until the worker answers it ([`BEFORE_THE_WORKER`]) and `task.wacz` on 127.0.0.1,
/// opens the page in headless Chromium, and waits until a frame of the replayed page (`…mp_/URL`) shows
/// `text`. Returns every frame ReplayWeb.page made, by URL, with its text.
async fn shown_in_replaywebpage(
    chromium: &Path,
    replayweb: &Path,
    wacz: &Path,
    url: &str,
    text: &str,
) -> Result<Vec<(String, String)>> {
    let index = format!(
        "<!doctype html>\n<html><head><meta charset=\"utf-8\"><script src=\"/ui.js\"></script></head>\n<body>\
         <replay-web-page source=\"/task.wacz\" url=\"{}\" embed=\"replayonly\" \
         style=\"display:block;width:1000px;height:700px\"></replay-web-page></body></html>\n",
        url.replace('&', "&amp;").replace('"', "&quot;")
    );
    let served = Arc::new(Served {
        ui: std::fs::read(replayweb.join("ui.js"))?,
        sw: std::fs::read(replayweb.join("sw.js"))?,
        wacz: std::fs::read(wacz)?,
        index,
        answered: Mutex::default(),
    });
    let app = Router::new()
        .route("/", get(|State(served): State<Arc<Served>>| async move { html(&served.index) }))
        .route("/index.html", get(|State(served): State<Arc<Served>>| async move { html(&served.index) }))
        .route("/ui.js", get(|State(served): State<Arc<Served>>| async move { script(&served.ui) }))
        .route("/replay/ui.js", get(|State(served): State<Arc<Served>>| async move { script(&served.ui) }))
        .route("/replay/sw.js", get(|State(served): State<Arc<Served>>| async move { script(&served.sw) }))
        .route("/replay/", get(|| async { html(BEFORE_THE_WORKER) }))
        .route("/task.wacz", get(wacz_file))
        .layer(middleware::from_fn_with_state(served.clone(), noted))
        .with_state(served.clone());
    let listener = tokio::net::TcpListener::bind("127.0.0.1:0").await?;
    let origin = format!("http://{}", listener.local_addr()?);
    let server = tokio::spawn(async move { axum::serve(listener, app).await });

    let browser =
        chromium::launch(&Launch { chromium: Some(chromium.to_owned()), headless: true, ..Launch::default() }).await?;
    let shown = async {
        let page = browser.browser.new_page("about:blank").await?;
        // chromiumoxide has each page's new targets wait for a debugger, and a service worker it is
        // attached to never starts (it stays "starting"): ReplayWeb.page's worker must run unattended.
        let unattended = SetAutoAttachParams::builder()
            .auto_attach(false)
            .wait_for_debugger_on_start(false)
            .flatten(true)
            .build()
            .map_err(anyhow::Error::msg)?;
        page.execute(unattended).await?;
        page.goto(format!("{origin}/")).await?;
        wait_for_replayed_text(&page, text).await
    }
    .await;
    browser.close().await?;
    server.abort();
    shown.with_context(|| format!("the server answered: {:#?}", served.answered.lock().unwrap()))
}

/// Notes each request the server answers, with the part of the WACZ it asked for and the status.
async fn noted(State(served): State<Arc<Served>>, request: Request, next: Next) -> Response {
    let path = request.uri().path().to_owned();
    let range = request.headers().get(header::RANGE).and_then(|range| range.to_str().ok()).map(str::to_owned);
    let response = next.run(request).await;
    let range = range.map(|range| format!(" ({range})")).unwrap_or_default();
    served.answered.lock().unwrap().push(format!("{path}{range}: {}", response.status()));
    response
}

/// Every same-origin frame under the page, through shadow roots and iframes, by URL, with its text.
const FRAMES_SCRIPT: &str = r#"(() => {
  const frames = [];
  const walk = (root) => {
    for (const element of root.querySelectorAll('*')) {
      if (element.shadowRoot) walk(element.shadowRoot);
      if (element.tagName === 'IFRAME') {
        let inner = null;
        try { inner = element.contentDocument; } catch (error) {}
        if (inner && inner.body) {
          frames.push([inner.location.href, inner.body.innerText]);
          walk(inner);
        }
      }
    }
  };
  walk(document);
  return JSON.stringify(frames);
})()"#;

async fn wait_for_replayed_text(page: &Page, text: &str) -> Result<Vec<(String, String)>> {
    let deadline = Instant::now() + SHOWN_WITHIN;
    loop {
        let frames: String = page.evaluate(FRAMES_SCRIPT).await?.into_value()?;
        let frames: Vec<(String, String)> = serde_json::from_str(&frames).context("the frames' list")?;
        if frames.iter().any(|(url, shown)| url.contains("mp_/") && shown.contains(text)) {
            return Ok(frames);
        }
        if Instant::now() > deadline {
            bail!("ReplayWeb.page did not show {text:?} within {SHOWN_WITHIN:?}; its frames: {frames:?}");
        }
        tokio::time::sleep(Duration::from_millis(250)).await;
    }
}

fn html(text: &str) -> Response {
    typed(text.as_bytes().to_vec(), "text/html; charset=utf-8")
}

fn script(bytes: &[u8]) -> Response {
    typed(bytes.to_vec(), "application/javascript")
}

fn typed(bytes: Vec<u8>, content_type: &'static str) -> Response {
    let mut response = Response::new(Body::from(bytes));
    response.headers_mut().insert(header::CONTENT_TYPE, HeaderValue::from_static(content_type));
    response
}

/// The WACZ, whole or the one byte range asked for: ReplayWeb.page reads a remote WACZ by ranges, the zip's
/// directory first, then the index, then each record where the index says it is.
async fn wacz_file(State(served): State<Arc<Served>>, headers: HeaderMap) -> Response {
    let bytes = &served.wacz;
    let total = bytes.len();
    let range = headers
        .get(header::RANGE)
        .and_then(|value| value.to_str().ok())
        .and_then(|value| value.strip_prefix("bytes="))
        .and_then(|range| range.split_once('-'))
        .and_then(|(start, end)| {
            let last = total.checked_sub(1)?;
            let (start, end) = match (start.parse::<usize>().ok(), end.parse::<usize>().ok()) {
                // The last `end` bytes (the zip's directory, read first).
                (None, Some(suffix)) if start.is_empty() => (total.saturating_sub(suffix), last),
                (Some(start), None) if end.is_empty() => (start, last),
                (Some(start), Some(end)) => (start, end.min(last)),
                _ => return None,
            };
            (start <= end && start < total).then_some((start, end))
        });
    let mut response = match range {
        Some((start, end)) => {
            let mut response = Response::new(Body::from(bytes[start..=end].to_vec()));
            *response.status_mut() = StatusCode::PARTIAL_CONTENT;
            let content_range = format!("bytes {start}-{end}/{total}");
            response.headers_mut().insert(header::CONTENT_RANGE, HeaderValue::from_str(&content_range).unwrap());
            response
        }
        None => Response::new(Body::from(bytes.clone())),
    };
    let headers = response.headers_mut();
    headers.insert(header::ACCEPT_RANGES, HeaderValue::from_static("bytes"));
    headers.insert(header::CONTENT_TYPE, HeaderValue::from_static("application/wacz"));
    response
}
