//! `trace-replay` restores the recorded start state: the cookies, the local and session storage and the
//! IndexedDB databases of every origin as the recording first found it are back before the first page
//! loads, so a logged-in session is logged in again; and with determinism on, a page's clock starts at the
//! recording and its random numbers agree from one replay to the next, in its workers too.
//!
//! A bundle is written by hand: `http://shop.test/` (replay answers before any name is resolved) is a page
//! whose inline script, in its head, reads storage, `document.cookie`, the clock and random numbers as the
//! document is parsed, leaves what it read on the root element, then changes storage as a page would;
//! `http://shop.test/embed` embeds a widget from another site that reads the clock and random numbers;
//! `http://shop.test/worker` and `https://shop.test/pwa` have a dedicated and a service worker read them.
//! The bundle is served by the library, in Debian's Chromium.

use std::path::{Path, PathBuf};
use std::time::{Duration, Instant, SystemTime, UNIX_EPOCH};

use chromiumoxide::Page;
use serde_json::{Value, json};
use trace_replay::archive::ReplayArchive;
use trace_replay::serve::{Options, Replay};

use crate::common::{STARTED_AT, har, har_entry, stored_body, write_bundle};

/// Generous: other tests drive Chromium on the same two cores.
const WAIT: Duration = Duration::from_secs(30);

const SHOP: &str = "http://shop.test/";
/// A page of the shop embedding a widget from another site, which runs in a process of its own.
const EMBED: &str = "http://shop.test/embed";

/// Reads, at parse time, what the start state should have put in place, then changes storage.
const SHOP_HTML: &str = r#"<!doctype html>
<html><head><title>Shop</title>
<script>
  const seen = {
    theme: localStorage.getItem("theme"),
    banner: localStorage.getItem("banner"),
    cart: sessionStorage.getItem("cart"),
    cookie: document.cookie,
    now: [Date.now(), Date.now()],
    random: [Math.random(), Math.random()],
  };
  document.documentElement.dataset.seen = JSON.stringify(seen);
  // The page's own changes, which a reload must keep.
  localStorage.setItem("theme", "light");
  localStorage.removeItem("banner");
  sessionStorage.setItem("cart", "2 mugs");
</script>
</head><body><p>Welcome back</p></body></html>
"#;

/// Shows what the cross-site widget reads as `seen`, as the shop page does.
const EMBED_HTML: &str = r#"<!doctype html>
<html><head><title>Embed</title>
<script>
  addEventListener("message", (event) => { document.documentElement.dataset.seen = event.data; });
</script>
</head><body><iframe src="http://widget.test/frame"></iframe></body></html>
"#;

const WIDGET_HTML: &str = r#"<!doctype html>
<script>
  parent.postMessage(JSON.stringify({ now: [Date.now(), Date.now()], random: [Math.random(), Math.random()] }), "*");
</script>
"#;

/// A page whose dedicated worker reads the clock and random numbers and reports them.
const WORKER_PAGE: &str = "http://shop.test/worker";
const WORKER_PAGE_HTML: &str = r#"<!doctype html>
<script>
  new Worker("/clock-worker.js").onmessage = (event) => { document.documentElement.dataset.seen = event.data; };
</script>
"#;
const CLOCK_WORKER_JS: &str =
    "postMessage(JSON.stringify({ now: [Date.now(), Date.now()], random: [Math.random(), Math.random()] }));\n";

/// A page of a progressive web app: it registers a service worker, waits until the worker controls it, and
/// shows what the worker answers for `/readings`, which only the worker makes (the bundle has no such
/// page). Service workers need a secure origin, so this one is HTTPS.
const PWA_PAGE: &str = "https://shop.test/pwa";
const PWA_PAGE_HTML: &str = r#"<!doctype html>
<script>
  (async () => {
    await navigator.serviceWorker.register("/pwa-worker.js");
    await navigator.serviceWorker.ready;
    if (!navigator.serviceWorker.controller) {
      await new Promise((resolve) => navigator.serviceWorker.addEventListener("controllerchange", resolve));
    }
    document.documentElement.dataset.seen = await (await fetch("/readings")).text();
  })();
</script>
"#;
const PWA_WORKER_JS: &str = r#"
self.addEventListener("install", () => self.skipWaiting());
self.addEventListener("activate", (event) => event.waitUntil(self.clients.claim()));
self.addEventListener("fetch", (event) => {
  if (new URL(event.request.url).pathname !== "/readings") return;
  const readings = { now: [Date.now(), Date.now()], random: [Math.random(), Math.random()] };
  event.respondWith(new Response(JSON.stringify(readings), { headers: { "content-type": "application/json" } }));
});
"#;

/// When the recording started, in seconds since the Unix epoch, as cookie expiry is written.
fn started_at_seconds() -> f64 {
    trace_manifest::time_fmt::millis_from_rfc3339(STARTED_AT).unwrap() / 1000.0
}

fn seconds_since_epoch() -> f64 {
    SystemTime::now().duration_since(UNIX_EPOCH).unwrap().as_secs() as f64
}

/// The shop's bundle, in a temporary directory.
struct ShopBundle {
    _scratch: tempfile::TempDir,
    dir: PathBuf,
    /// The expiry of the cookie `visible`: tomorrow, as Chromium caps any expiry at 400 days from now.
    visible_expiry: f64,
}

/// Writes the shop's bundle into a fresh temporary directory.
fn shop_bundle() -> ShopBundle {
    let scratch = tempfile::tempdir().unwrap();
    let visible_expiry = seconds_since_epoch() + 86_400.0;
    let dir = scratch.path().join("bundle");
    let entries = vec![
        har_entry(SHOP, stored_body(&dir, SHOP_HTML.as_bytes(), "text/html")),
        har_entry(EMBED, stored_body(&dir, EMBED_HTML.as_bytes(), "text/html")),
        har_entry("http://widget.test/frame", stored_body(&dir, WIDGET_HTML.as_bytes(), "text/html")),
        har_entry(WORKER_PAGE, stored_body(&dir, WORKER_PAGE_HTML.as_bytes(), "text/html")),
        har_entry("http://shop.test/clock-worker.js", stored_body(&dir, CLOCK_WORKER_JS.as_bytes(), "text/javascript")),
        har_entry(PWA_PAGE, stored_body(&dir, PWA_PAGE_HTML.as_bytes(), "text/html")),
        har_entry("https://shop.test/pwa-worker.js", stored_body(&dir, PWA_WORKER_JS.as_bytes(), "text/javascript")),
    ];
    let storage = json!({ "snapshots": [
        {
            "time": STARTED_AT,
            "phase": "start",
            "cookies": [
                // The login: a session cookie scripts cannot read.
                { "name": "session", "value": "abc123", "domain": "shop.test", "path": "/", "http_only": true },
                // A login remembered for 30 days after the recording: past by the time a dataset is replayed.
                {
                    "name": "remember", "value": "me", "domain": "shop.test", "path": "/", "http_only": true,
                    "expires": started_at_seconds() + 30.0 * 86_400.0
                },
                {
                    "name": "visible", "value": "yes", "domain": "shop.test", "path": "/",
                    "expires": visible_expiry, "same_site": "Lax"
                },
                { "name": "scoped", "value": "1", "domain": "shop.test", "path": "/account" },
                { "name": "elsewhere", "value": "1", "domain": "other.test", "path": "/" },
            ],
            "local_storage": {
                "http://shop.test": { "theme": "dark", "banner": "shown" },
                "http://other.test": { "theme": "other" },
            },
            "session_storage": { "http://shop.test": { "cart": "1 mug" } },
        },
        {
            // The storage of origins the recording reached later, as it first found them: the widget's is
            // new; the shop's local storage is not its start (the snapshot above is), its databases are.
            "time": "2025-11-22T10:00:02.000Z",
            "phase": "start",
            "local_storage": {
                "http://widget.test": { "seen": "first visit" },
                "http://shop.test": { "theme": "later" },
            },
            "indexed_db": { "http://shop.test": [shop_database()] },
        },
        {
            // What the recording ended with: replay must start from the start, not from here.
            "time": "2025-11-22T10:00:05.000Z",
            "phase": "stop",
            "cookies": [{ "name": "session", "value": "stale", "domain": "shop.test", "path": "/" }],
            "local_storage": { "http://shop.test": { "theme": "stale" } },
        },
    ]});
    write_bundle(&dir, "restore", &har(entries), &storage);
    ShopBundle { _scratch: scratch, dir, visible_expiry }
}

/// The shop's IndexedDB database as recorded: an auto-incremented store with an index and values JSON
/// cannot hold, and a store with keys apart from its values, binary and compound ones among them.
fn shop_database() -> Value {
    json!({
        "name": "shop", "version": 3,
        "object_stores": [
            {
                "name": "orders", "key_path": "id", "auto_increment": true,
                "indexes": [{ "name": "by_customer", "key_path": "customer", "unique": false, "multi_entry": false }],
                "records": [
                    {
                        "key": 1,
                        "value": {
                            "id": 1, "customer": "ann",
                            "placed": { "$trace": "date", "v": 1_700_000_000_000_u64 },
                            "total": { "$trace": "number", "v": "NaN" },
                            "lines": { "$trace": "map", "v": [["mug", 2]] },
                            "tags": { "$trace": "set", "v": ["gift"] },
                        },
                    },
                    {
                        "key": 7,
                        "value": {
                            "id": 7, "customer": "bob",
                            "receipt": { "$trace": "blob", "type": "text/plain", "v": "cGFpZA==" },
                            "raw": { "$trace": "view", "type": "Uint8Array", "v": "AQID" },
                            // An object of the page's that happens to have the tag's name as a key.
                            "note": { "$trace": "object", "v": { "$trace": "mine" } },
                        },
                    },
                ],
            },
            {
                "name": "settings",
                "records": [
                    { "key": ["ui", "theme"], "value": "dark" },
                    { "key": { "$trace": "arraybuffer", "v": "aw==" }, "value": 42 },
                ],
            },
        ],
    })
}

async fn launch(bundle: &Path, determinism: bool) -> Replay {
    let options = Options { determinism, ..Options::default() };
    Replay::launch(ReplayArchive::open(bundle).unwrap(), &options).await.unwrap()
}

/// What the shop page's inline script (or the widget the embed page shows) read while its document was parsed.
async fn seen(page: &Page) -> Value {
    let deadline = Instant::now() + WAIT;
    loop {
        let value = page.evaluate("document.documentElement.dataset.seen").await.ok();
        if let Some(text) = value.and_then(|v| v.into_value::<String>().ok()) {
            return serde_json::from_str(&text).unwrap();
        }
        assert!(Instant::now() < deadline, "the page never showed what it read");
        tokio::time::sleep(Duration::from_millis(100)).await;
    }
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn the_recorded_cookies_and_storage_are_back_before_the_first_page_runs() {
    let shop = shop_bundle();
    let replay = launch(&shop.dir, true).await;
    let page = replay.open(SHOP).await.unwrap();

    let first = seen(&page).await;
    assert_eq!(first["theme"], "dark", "local storage restored before the page's script: {first}");
    assert_eq!(first["banner"], "shown", "{first}");
    assert_eq!(first["cart"], "1 mug", "session storage restored before the page's script: {first}");
    assert_eq!(
        first["cookie"], "visible=yes",
        "document.cookie shows the script-visible cookie for this path only, not the httpOnly ones"
    );

    // The login cookie is in the jar for the page's URL, httpOnly as recorded; the other site's is not.
    let cookies = page.get_cookies().await.unwrap();
    let session = cookies.iter().find(|c| c.name == "session").unwrap_or_else(|| panic!("no session: {cookies:?}"));
    assert_eq!(session.value, "abc123", "the start snapshot's cookie, not the stop one's");
    assert!(session.http_only, "{session:?}");
    assert!(session.session, "a cookie recorded without expiry stays a session cookie: {session:?}");
    assert_eq!(session.domain, "shop.test", "host-only, as recorded: {session:?}");
    let visible = cookies.iter().find(|c| c.name == "visible").unwrap();
    // It keeps the lifetime it had left when the recording started, so it expires later than recorded.
    assert!(visible.expires >= shop.visible_expiry, "{visible:?}");
    assert!(!visible.session && !visible.http_only, "{visible:?}");
    assert!(!cookies.iter().any(|c| c.name == "elsewhere"), "{cookies:?}");
    let all = replay.browser().get_cookies().await.unwrap();
    assert!(all.iter().any(|c| c.name == "elsewhere" && c.domain == "other.test"), "{all:?}");
    assert!(all.iter().any(|c| c.name == "scoped" && c.path == "/account"), "{all:?}");

    // A reload in the same tab keeps what the page itself changed: storage is restored once per tab.
    // What the first document read is removed, so that only the reloaded one can answer.
    page.evaluate("delete document.documentElement.dataset.seen").await.unwrap();
    page.reload().await.unwrap();
    let again = seen(&page).await;
    assert_eq!(again["theme"], "light", "the page's own change survives a reload: {again}");
    assert_eq!(again["banner"], Value::Null, "a key the page removed stays removed: {again}");
    assert_eq!(again["cart"], "2 mugs", "{again}");
    assert_eq!(again["cookie"], "visible=yes", "{again}");

    let stats = replay.close().await.unwrap();
    assert!(stats.exact >= 2, "both loads were served from the bundle: {stats}");
    assert_eq!(stats.live_attempts, 0);
}

/// Reads the shop's database as a page would, then adds an order without a key.
const READ_SHOP_DATABASE: &str = r#"(async () => {
  const done = (request) => new Promise((resolve, reject) => {
    request.onsuccess = () => resolve(request.result);
    request.onerror = () => reject(request.error);
  });
  const db = await done(indexedDB.open("shop"));
  const orders = db.transaction("orders").objectStore("orders");
  const [ann, bob] = await done(orders.getAll());
  const byAnn = await done(orders.index("by_customer").count("ann"));
  const settings = db.transaction("settings").objectStore("settings");
  const settingKeys = await done(settings.getAllKeys());
  const theme = await done(settings.get(["ui", "theme"]));
  const binary = await done(settings.get(new TextEncoder().encode("k").buffer));
  const added = await done(db.transaction("orders", "readwrite").objectStore("orders").add({ customer: "cy" }));
  db.close();
  return JSON.stringify({
    version: db.version,
    stores: [...db.objectStoreNames],
    placed: ann.placed instanceof Date && ann.placed.getTime(),
    total: Number.isNaN(ann.total),
    mugs: ann.lines instanceof Map && ann.lines.get("mug"),
    gift: ann.tags instanceof Set && ann.tags.has("gift"),
    receipt: bob.receipt instanceof Blob && (await bob.receipt.text()),
    raw: bob.raw instanceof Uint8Array && [...bob.raw],
    note: bob.note,
    byAnn,
    settingKeys: settingKeys.length,
    theme,
    binary,
    added,
  });
})()"#;

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn every_origin_the_recording_reached_starts_as_first_found_with_its_databases_whole() {
    let shop = shop_bundle();
    let replay = launch(&shop.dir, true).await;
    let page = replay.open(SHOP).await.unwrap();
    let seen = seen(&page).await;
    assert_eq!(seen["theme"], "dark", "the shop's storage is its first snapshot's, not a later one's: {seen}");

    let read: String = page.evaluate(READ_SHOP_DATABASE).await.unwrap().into_value().unwrap();
    let read: Value = serde_json::from_str(&read).unwrap();
    assert_eq!(read["version"], 3, "{read}");
    assert_eq!(read["stores"], json!(["orders", "settings"]), "{read}");
    assert_eq!(read["placed"], 1_700_000_000_000_u64, "a Date comes back a Date: {read}");
    assert_eq!(read["total"], true, "NaN: {read}");
    assert_eq!(read["mugs"], 2, "a Map: {read}");
    assert_eq!(read["gift"], true, "a Set: {read}");
    assert_eq!(read["receipt"], "paid", "a Blob with its bytes: {read}");
    assert_eq!(read["raw"], json!([1, 2, 3]), "a typed array: {read}");
    assert_eq!(read["note"], json!({ "$trace": "mine" }), "the page's own object, not a tag: {read}");
    assert_eq!(read["byAnn"], 1, "the index was built over the records: {read}");
    assert_eq!(read["settingKeys"], 2, "{read}");
    assert_eq!(read["theme"], "dark", "a compound key: {read}");
    assert_eq!(read["binary"], 42, "a binary key: {read}");
    assert_eq!(read["added"], 8, "the key generator goes on after the highest recorded key: {read}");

    // An origin first reached later in the recording has its storage too.
    let widget = replay.open("http://widget.test/frame").await.unwrap();
    let widget_seen: Option<String> =
        widget.evaluate("localStorage.getItem('seen')").await.unwrap().into_value().unwrap();
    let stats = replay.close().await.unwrap();
    assert_eq!(widget_seen.as_deref(), Some("first visit"));
    assert_eq!(stats.live_attempts, 0, "putting the databases back reached for nothing: {stats}");
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_second_tab_sees_what_the_first_tab_stored() {
    let shop = shop_bundle();
    let replay = launch(&shop.dir, true).await;
    let first_tab = replay.open(SHOP).await.unwrap();
    assert_eq!(seen(&first_tab).await["theme"], "dark");

    // Local storage is shared by every tab of the origin, and the page set "light" in the first tab.
    let second_tab = replay.open(SHOP).await.unwrap();
    let second = seen(&second_tab).await;
    replay.close().await.unwrap();
    assert_eq!(second["theme"], "light", "a new tab restored the start storage over the page's own: {second}");
    assert_eq!(second["banner"], Value::Null, "{second}");
    assert_eq!(second["cart"], "1 mug", "session storage is per tab: the new tab starts from the recording");
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_cookie_that_has_expired_since_the_recording_is_restored() {
    let shop = shop_bundle();
    let replay = launch(&shop.dir, true).await;
    let page = replay.open(SHOP).await.unwrap();
    let cookies = page.get_cookies().await.unwrap();
    replay.close().await.unwrap();
    assert!(cookies.iter().any(|c| c.name == "remember" && c.value == "me"), "{cookies:?}");
}

/// What a page read of the clock and drew of random numbers in one fresh replay.
struct Readings {
    now: Vec<f64>,
    random: Vec<f64>,
    /// How long the replay had run when the page's readings came back, in milliseconds: the most the
    /// replay's clock, which runs at real speed from the recording's start, can have moved by then.
    elapsed: f64,
}

/// The clock readings and random numbers of the shop page, or of the widget in the shop's embed page, from
/// a fresh replay.
async fn clock_and_random(bundle: &Path, url: &str, determinism: bool) -> Readings {
    let started = std::time::Instant::now();
    let replay = launch(bundle, determinism).await;
    let page = replay.open(url).await.unwrap();
    let seen = seen(&page).await;
    let elapsed = started.elapsed().as_secs_f64() * 1000.0;
    replay.close().await.unwrap();
    let numbers = |key: &str| seen[key].as_array().unwrap().iter().map(|n| n.as_f64().unwrap()).collect::<Vec<_>>();
    Readings { now: numbers("now"), random: numbers("random"), elapsed }
}

/// Asserts that a replay's clock read the recording's start (`started`, in milliseconds) moved on by no
/// more than the time the replay had run.
fn assert_starts_at_the_recording(what: &str, started: f64, readings: &Readings) {
    let Readings { now, elapsed, .. } = readings;
    assert!(
        now[0] >= started && now[0] <= started + elapsed,
        "{what}'s clock starts at {started} and runs at real speed ({elapsed:.0} ms so far): {now:?}"
    );
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn with_determinism_the_clock_starts_at_the_recording_and_random_numbers_repeat() {
    let shop = shop_bundle();
    let started = started_at_seconds() * 1000.0;

    let first = clock_and_random(&shop.dir, SHOP, true).await;
    assert_starts_at_the_recording("the page", started, &first);
    let Readings { now, random, .. } = &first;
    assert!(now[1] >= now[0], "and never goes back: {now:?}");
    assert!(random.iter().all(|r| (0.0..1.0).contains(r)), "{random:?}");
    assert_ne!(random[0], random[1]);

    // A second replay starts the clock at the recording's start again (not where the first left it), and
    // draws the same numbers.
    let again = clock_and_random(&shop.dir, SHOP, true).await;
    assert_starts_at_the_recording("the second replay", started, &again);
    assert_eq!(&again.random, random, "two replays draw the same random numbers");

    // Without determinism, the page has the real clock.
    let real = clock_and_random(&shop.dir, SHOP, false).await;
    let wall = seconds_since_epoch() * 1000.0;
    assert!((wall - real.now[0]).abs() < 120_000.0, "the real clock, {wall}: {:?}", real.now);
}

/// Asserts that what `url` shows (read by `what`) starts at the recording's time in a replay with
/// determinism, and draws the same random numbers in a second replay.
async fn assert_deterministic(url: &str, what: &str) {
    let shop = shop_bundle();
    let started = started_at_seconds() * 1000.0;
    let first = clock_and_random(&shop.dir, url, true).await;
    assert_starts_at_the_recording(what, started, &first);
    let again = clock_and_random(&shop.dir, url, true).await;
    assert_eq!(again.random, first.random, "two replays draw the same random numbers in {what}");
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn with_determinism_a_cross_site_iframe_starts_at_the_recording_too() {
    assert_deterministic(EMBED, "the widget").await;
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn with_determinism_a_worker_starts_at_the_recording_too() {
    assert_deterministic(WORKER_PAGE, "the worker").await;
}

/// A service worker a replayed page registers starts, takes the page over and answers it, with the
/// recording's clock and the replay's random numbers like every other worker. (It never started: DevTools
/// held it for a debugger that had already let it go, and `register` never settled.)
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_service_worker_starts_controls_its_page_and_keeps_the_recordings_clock() {
    assert_deterministic(PWA_PAGE, "the service worker").await;
}
