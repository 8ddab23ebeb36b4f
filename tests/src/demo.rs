//! The demonstration the README's main command records and the end-to-end test checks: in Debian's
//! Chromium with the built extension and the real `trace-host`, a person (scripted, with real input events
//! and a person's pace) starts a task from the popup, logs in to the demo shop through its CSRF-protected
//! form, chooses shipping and gift wrap and puts a mug in the cart, searches with the Enter key and
//! scrolls the results, follows a redirect, clicks in two iframes (one from another site), types and
//! clicks on the strict-CSP page (whose worker asks the server too), looks at the clock page, opens the help page in a new tab, and stops the task from the popup.
//! The host leaves a finished bundle.
//!
//! Two shorter demonstrations use the shop's streaming pages: asking the support chat a question over its
//! WebSocket ([`record_chat`]) and asking the expert, whose answer streams back as server-sent events keyed
//! by an id the page made ([`record_ask`]).
//!
//! [`record_purchase`] records a shorter purchase (search, a product's page, a quantity), of which
//! environment maps are made.
//!
//! [`record_and_export`] records the demonstration and exports it redacted, as a researcher shares it.

use std::path::{Path, PathBuf};
use std::time::{Duration, Instant};

use anyhow::{Context, Result, bail};
use chromiumoxide::Page;

use crate::browser::{
    Build, RecordingBrowser, click, click_and_wait, click_in_frame, control_key, double_click, press_key, scroll_by,
    settle, type_into, visit, wait_for_text,
};
use crate::site::{DEMO_PASSWORD, DEMO_USER, DemoSite, ServedRequest, ask, chat, sealed, vault};

pub const DESCRIPTION: &str = "Log in and put a blue mug in the cart";
const WAIT: Duration = Duration::from_secs(20);

/// What a recorded demonstration left.
pub struct Demonstration {
    /// The finished bundle directory.
    pub bundle: PathBuf,
    /// Every request the site had served when the task was stopped: all of them must be in the bundle.
    pub served_before_stop: Vec<ServedRequest>,
}

/// Records the demonstration on `site`, with the host keeping its data in `data_dir`.
/// The demonstration in a fresh data directory, exported redacted with `trace-host export --redact`.
pub struct Exported {
    /// The data directory it was recorded into (removed on drop).
    pub data: tempfile::TempDir,
    /// The exported zip.
    pub bundle: PathBuf,
    /// The shop's origin when it was recorded (replay serves it there).
    pub origin: String,
}

impl Exported {
    /// The password the exported task gives an agent ([`given_password`]).
    pub fn password(&self) -> Result<String> {
        given_password(&self.bundle)
    }
}

/// The password the demonstration's bundle gives an agent (its `credentials.json`): in a redacted bundle,
/// the stand-in for the one typed, which signs in to the replayed shop as the person's signed in to theirs.
pub fn given_password(bundle: &Path) -> Result<String> {
    let mut bundle = trace_bundle::archive::Bundle::open(bundle)?;
    let credentials: Vec<trace_manifest::postprocess::CredentialEntry> =
        serde_json::from_slice(&bundle.read(trace_manifest::postprocess::CREDENTIALS_FILE)?)?;
    match credentials.as_slice() {
        [credential] => Ok(credential.value.clone()),
        _ => anyhow::bail!("the demonstration has {} credentials, not its one password", credentials.len()),
    }
}

/// The demonstration, recorded and exported once for every test of a test binary that only looks at it.
pub struct Recorded {
    pub build: Build,
    pub exported: Exported,
}

static RECORDED: tokio::sync::OnceCell<Option<Recorded>> = tokio::sync::OnceCell::const_new();

/// The test binary's one recording, made by its first test to ask; `None` when the build is missing
/// (`test` then says it is skipped, as [`Build::for_tests`] does).
pub async fn recorded_once(test: &str) -> Option<&'static Recorded> {
    RECORDED
        .get_or_init(|| async {
            let build = Build::for_tests(test)?;
            let exported = record_and_export(&build).await.unwrap();
            Some(Recorded { build, exported })
        })
        .await
        .as_ref()
}

/// The demonstration's task, as the actions (Python) of a scripted agent in a harness that runs Playwright
/// code (BrowserGym's, AgentLab's) on the replayed shop at `origin`: sign in, express shipping and gift
/// wrap, the mug put in the cart, a search for it, and last the agent's answer in BrowserGym's chat. The
/// agent signs in with the password the task gave it ([`given_password`]).
pub fn in_playwright(origin: &str, password: &str) -> Vec<String> {
    [
        format!("page.goto('{origin}/login')"),
        format!("page.fill('#username', '{DEMO_USER}')"),
        format!("page.fill('#password', {})", serde_json::to_string(password).unwrap()),
        "page.click('#login-submit')".to_owned(),
        "page.wait_for_url('**/account')".to_owned(),
        "page.select_option('#shipping', 'express')".to_owned(),
        "page.check('#gift-wrap')".to_owned(),
        "page.click('#add-to-cart')".to_owned(),
        "page.wait_for_url('**/cart')".to_owned(),
        format!("page.goto('{origin}/')"),
        "page.fill('#search-input', 'mug')".to_owned(),
        "page.press('#search-input', 'Enter')".to_owned(),
        "page.wait_for_url('**/search?q=mug')".to_owned(),
        "send_message_to_user('The blue mug is in the cart.')".to_owned(),
    ]
    .into()
}

/// Records the demonstration on a shop of its own, stopped afterwards, and exports it redacted.
pub async fn record_and_export(build: &Build) -> Result<Exported> {
    let site = DemoSite::start(0)?;
    let origin = site.url("/").trim_end_matches('/').to_owned();
    let data = tempfile::tempdir()?;
    let demonstration = record(build, &site, data.path()).await?;
    site.stop();
    let task = demonstration.bundle.file_name().and_then(|name| name.to_str()).context("a task's bundle")?.to_owned();
    let bundle = data.path().join(format!("{task}.zip"));
    let data_dir = data.path().to_str().context("a UTF-8 data directory")?;
    crate::run(
        &build.trace_host,
        &["--data", data_dir, "export", &task, "--out", bundle.to_str().context("a UTF-8 path")?, "--redact"],
    );
    Ok(Exported { data, bundle, origin })
}

pub async fn record(build: &Build, site: &DemoSite, data_dir: &Path) -> Result<Demonstration> {
    let browser = RecordingBrowser::launch(build, data_dir, true).await?;
    let (popup, shop) = start_task(&browser, DESCRIPTION, &site.url("/")).await?;
    // A person looks at the page between two actions ([`settle`]), long enough for the recorder's picture
    // of it (each step is shown on the page it acted on); a page that loads is waited for by `visit`.
    visit(&shop, &site.url("/login")).await?;
    type_into(&shop, "#username", DEMO_USER).await?;
    settle().await;
    type_into(&shop, "#password", DEMO_PASSWORD).await?;
    settle().await;
    click_and_wait(&shop, "#login-submit").await?;
    wait_for_url(&shop, "/account").await?;
    settle().await;
    double_click(&shop, "#signed-in-as").await?;
    settle().await;
    shop.find_element("#shipping").await?.focus().await?.type_str("E").await?; // "Express", by its first letter
    settle().await;
    click(&shop, "#gift-wrap").await?;
    settle().await;
    click_and_wait(&shop, "#add-to-cart").await?;
    wait_for_url(&shop, "/cart").await?;

    visit(&shop, &site.url("/")).await?;
    scroll_by(&shop, 300.0).await?;
    tokio::time::sleep(Duration::from_millis(1200)).await; // a scroll is reported once it has come to rest
    type_into(&shop, "#search-input", "mug").await?;
    settle().await;
    press_key(&shop, "#search-input", "Enter").await?;
    wait_for_url(&shop, "/search?q=mug").await?;
    settle().await;
    visit(&shop, &site.url("/deals")).await?;

    visit(&shop, &site.url("/embed")).await?;
    // Both frames show the same widget; the same-site one says where its button is.
    let button: (f64, f64) = shop
        .evaluate(
            "(() => { const r = document.querySelector('#widget').contentDocument\
             .getElementById('widget-button').getBoundingClientRect(); return [r.x + r.width / 2, r.y + r.height / 2]; })()",
        )
        .await?
        .into_value()?;
    click_in_frame(&shop, "#widget", button.0, button.1).await?;
    settle().await;
    click_in_frame(&shop, "#partner-widget", button.0, button.1).await?;
    settle().await;

    visit(&shop, &site.url("/strict")).await?;
    wait_for_text(&shop, "#strict-worker", WAIT, |text| text == "pong").await?;
    type_into(&shop, "#strict-input", "copied under a strict policy").await?;
    settle().await;
    click(&shop, "#strict-button").await?;
    settle().await;
    press_key(&shop, "#strict-input", "Escape").await?;
    settle().await;

    visit(&shop, &site.url("/clock")).await?;
    visit(&shop, &site.url("/")).await?;
    click(&shop, "#help-link").await?;
    tokio::time::sleep(Duration::from_millis(1500)).await; // the new tab opens and loads

    // Chrome may still ask for a favicon after the stop; what was served until now must be recorded.
    let served_before_stop = site.served();
    let bundle = stop_task(&popup, browser, data_dir).await?;
    Ok(Demonstration { bundle, served_before_stop })
}

/// The password [`record_second_try_login`] types first, a slip of the person's.
pub const MISTYPED_PASSWORD: &str = "Blue-Mug-24";

/// Records signing in at the second try: [`MISTYPED_PASSWORD`] first, refused ("Wrong username or
/// password."), then [`DEMO_PASSWORD`], until the account page shows; returns the bundle.
pub async fn record_second_try_login(build: &Build, site: &DemoSite, data_dir: &Path) -> Result<PathBuf> {
    let browser = RecordingBrowser::launch(build, data_dir, true).await?;
    let (popup, shop) = start_task(&browser, "Sign in to the shop", &site.url("/login")).await?;
    for password in [MISTYPED_PASSWORD, DEMO_PASSWORD] {
        type_into(&shop, "#username", DEMO_USER).await?;
        settle().await;
        type_into(&shop, "#password", password).await?;
        settle().await;
        click_and_wait(&shop, "#login-submit").await?;
    }
    wait_for_url(&shop, "/account").await?;
    tokio::time::sleep(Duration::from_millis(1500)).await;
    stop_task(&popup, browser, data_dir).await
}

/// What [`record_chat`] asks the support chat.
pub const CHAT_QUESTION: &str = "Are the mugs dishwasher safe?";

/// Records asking the support chat [`CHAT_QUESTION`] (`/chat`) until its answer shows; returns the bundle.
pub async fn record_chat(build: &Build, site: &DemoSite, data_dir: &Path) -> Result<PathBuf> {
    record_chat_at(build, site, data_dir, "/chat").await
}

/// Records the chat of [`record_chat`] at `path` (`/chat/worker`: its connection kept in a worker).
pub async fn record_chat_at(build: &Build, site: &DemoSite, data_dir: &Path, path: &str) -> Result<PathBuf> {
    let browser = RecordingBrowser::launch(build, data_dir, true).await?;
    let (popup, page) = start_task(&browser, "Ask support about the mugs", &site.url(path)).await?;
    wait_for_text(&page, "#messages", WAIT, |t| t.contains(chat::GREETING)).await?;
    type_into(&page, "#chat-input", CHAT_QUESTION).await?;
    click(&page, "#chat-send").await?;
    let answer = chat::answer(CHAT_QUESTION);
    wait_for_text(&page, "#messages", WAIT, |t| t.contains(&answer)).await?;
    // Long enough for the recorder's capture after the click (throttled to one a second).
    tokio::time::sleep(Duration::from_millis(1500)).await;
    stop_task(&popup, browser, data_dir).await
}

/// What [`record_ask`] asks the expert.
pub const EXPERT_QUESTION: &str = "Can the mug go in the microwave?";

/// Records asking the expert [`EXPERT_QUESTION`] (`/ask`) until the streamed answer is complete; returns
/// the bundle.
pub async fn record_ask(build: &Build, site: &DemoSite, data_dir: &Path) -> Result<PathBuf> {
    let browser = RecordingBrowser::launch(build, data_dir, true).await?;
    let (popup, page) = start_task(&browser, "Ask an expert about the mugs", &site.url("/ask")).await?;
    type_into(&page, "#question", EXPERT_QUESTION).await?;
    click(&page, "#ask").await?;
    let answer = ask::answer(EXPERT_QUESTION);
    wait_for_text(&page, "#answer", WAIT, |t| t.contains(&answer)).await?;
    wait_for_text(&page, "#status", WAIT, |t| t == "Answered").await?;
    tokio::time::sleep(Duration::from_millis(1500)).await;
    stop_task(&popup, browser, data_dir).await
}

/// Records opening the partner vault (`/vault`): the user and [`vault::VAULT_PASSPHRASE`] typed, the
/// button pressed, until the page says the vault is open; returns the bundle.
pub async fn record_vault(build: &Build, site: &DemoSite, data_dir: &Path) -> Result<PathBuf> {
    let browser = RecordingBrowser::launch(build, data_dir, true).await?;
    let (popup, page) = start_task(&browser, "Open the partner vault", &site.url("/vault")).await?;
    type_into(&page, "#vault-user", DEMO_USER).await?;
    type_into(&page, "#vault-passphrase", vault::VAULT_PASSPHRASE).await?;
    click(&page, "#vault-open").await?;
    wait_for_text(&page, "#vault-status", WAIT, |t| t.starts_with("Vault open")).await?;
    tokio::time::sleep(Duration::from_millis(1500)).await;
    stop_task(&popup, browser, data_dir).await
}

/// Records sending the sealed note (`/sealed`): the user, [`DEMO_PASSWORD`] and
/// [`sealed::SEALED_PASSPHRASE`] typed, the button pressed, until the page says it was sealed; returns the
/// bundle.
pub async fn record_sealed(build: &Build, site: &DemoSite, data_dir: &Path) -> Result<PathBuf> {
    let browser = RecordingBrowser::launch(build, data_dir, true).await?;
    let (popup, page) = start_task(&browser, "Seal a note", &site.url("/sealed")).await?;
    type_into(&page, "#sealed-user", DEMO_USER).await?;
    type_into(&page, "#sealed-password", DEMO_PASSWORD).await?;
    type_into(&page, "#sealed-passphrase", sealed::SEALED_PASSPHRASE).await?;
    click(&page, "#sealed-send").await?;
    wait_for_text(&page, "#sealed-status", WAIT, |t| t.starts_with("Sealed for")).await?;
    tokio::time::sleep(Duration::from_millis(1500)).await;
    stop_task(&popup, browser, data_dir).await
}

/// A purchase [`record_purchase`] makes: what is searched for, the product chosen among the results (its id),
/// and how many.
pub struct Purchase {
    pub search: &'static str,
    pub product: &'static str,
    pub quantity: u32,
}

/// Records a purchase: sign in, search from the home page, follow the product's link among the results, type
/// the quantity and add it to the cart; returns the bundle. Recordings of different purchases are what an
/// environment map is made from.
pub async fn record_purchase(build: &Build, site: &DemoSite, data_dir: &Path, purchase: &Purchase) -> Result<PathBuf> {
    let browser = RecordingBrowser::launch(build, data_dir, true).await?;
    let description = format!("Buy {} of {}", purchase.quantity, purchase.product);
    let (popup, shop) = start_task(&browser, &description, &site.url("/")).await?;
    visit(&shop, &site.url("/login")).await?;
    type_into(&shop, "#username", DEMO_USER).await?;
    type_into(&shop, "#password", DEMO_PASSWORD).await?;
    click_and_wait(&shop, "#login-submit").await?;
    wait_for_url(&shop, "/account").await?;
    visit(&shop, &site.url("/")).await?;
    type_into(&shop, "#search-input", purchase.search).await?;
    press_key(&shop, "#search-input", "Enter").await?;
    wait_for_url(&shop, "/search?q=").await?;
    settle().await;
    click_and_wait(&shop, &format!("#results a[href=\"/item/{}\"]", purchase.product)).await?;
    wait_for_url(&shop, &format!("/item/{}", purchase.product)).await?;
    click(&shop, "#item-qty").await?;
    control_key(&shop, "a").await?;
    shop.find_element("#item-qty").await?.type_str(purchase.quantity.to_string()).await?;
    settle().await;
    click_and_wait(&shop, "#item-add").await?;
    wait_for_url(&shop, "/cart").await?;
    tokio::time::sleep(Duration::from_millis(1500)).await;
    stop_task(&popup, browser, data_dir).await
}

/// The window size [`record_resized`] changes to, in CSS pixels.
pub const RESIZED: (u32, u32) = (720, 540);

/// Records a person who resizes their window mid-task: the home page, the window made [`RESIZED`], then
/// the sign-in link followed; returns the bundle.
pub async fn record_resized(build: &Build, site: &DemoSite, data_dir: &Path) -> Result<PathBuf> {
    use chromiumoxide::cdp::browser_protocol::emulation::SetDeviceMetricsOverrideParams;
    let browser = RecordingBrowser::launch(build, data_dir, true).await?;
    let (popup, page) = start_task(&browser, "Find the sign-in page", &site.url("/")).await?;
    let (width, height) = RESIZED;
    page.execute(SetDeviceMetricsOverrideParams::new(i64::from(width), i64::from(height), 1.0, false)).await?;
    settle().await;
    click(&page, "#login-link").await?;
    wait_for_url(&page, "/login").await?;
    tokio::time::sleep(Duration::from_millis(1500)).await;
    stop_task(&popup, browser, data_dir).await
}

/// Starts a task from the popup, as a person does: its description and website typed in, Start pressed.
/// Returns the popup and the task's tab, once the website has loaded there and the recorder has captured
/// it: a person reads the page before acting, and a scripted one that navigated away at once would leave
/// the recording without its start page (what an agent doing nothing sees), a race no person meets.
pub async fn start_task(browser: &RecordingBrowser, description: &str, website: &str) -> Result<(Page, Page)> {
    let popup = browser.popup().await?;
    wait_for_text(&popup, "#status", WAIT, |t| t.contains("Host connected")).await?;
    type_into(&popup, "#description", description).await?;
    type_into(&popup, "#website", website).await?;
    click(&popup, "#start").await?;
    let status = wait_for_text(&popup, "#status", WAIT, |t| t.starts_with("Recording")).await?;
    let origin = url::Url::parse(website).context("the website is not a URL")?.origin().ascii_serialization();
    let tab = recorded_tab(browser, &origin).await?;
    tab.wait_for_navigation().await?;
    let task_id = status.trim_start_matches("Recording ").split(['.', ' ']).next().unwrap_or_default();
    first_page_captured(&browser.data_dir, task_id).await?;
    settle().await;
    Ok((popup, tab))
}

/// Waits until the host has stored a DOM snapshot of the recording `task_id`.
async fn first_page_captured(data_dir: &Path, task_id: &str) -> Result<()> {
    let snapshots = data_dir.join("captures").join(task_id).join(trace_manifest::bundle::DOM_DIR);
    let deadline = Instant::now() + WAIT;
    while Instant::now() < deadline {
        let stored = std::fs::read_dir(&snapshots).into_iter().flatten().flatten();
        if stored.map(|entry| entry.path()).any(|path| path.extension().is_some_and(|ext| ext == "html")) {
            return Ok(());
        }
        tokio::time::sleep(Duration::from_millis(100)).await;
    }
    bail!("the recording {task_id} has no capture of its start page after {WAIT:?} (looked in {})", snapshots.display())
}

/// Stops the task from the popup, closes the browser, and returns the bundle the host finished.
pub async fn stop_task(popup: &Page, browser: RecordingBrowser, data_dir: &Path) -> Result<PathBuf> {
    stop_recording(popup).await?;
    browser.close().await?;
    stopped_bundle(data_dir).await
}

/// Stops the task from the popup, leaving the browser open.
pub async fn stop_recording(popup: &Page) -> Result<()> {
    popup.bring_to_front().await?;
    click(popup, "#stop").await?;
    wait_for_text(popup, "#status", WAIT, |t| t.starts_with("Host connected")).await?;
    Ok(())
}

/// The tab the extension opened for the task: the one showing a page of `origin` (`http://host:port`).
pub async fn recorded_tab(browser: &RecordingBrowser, origin: &str) -> Result<Page> {
    let deadline = Instant::now() + WAIT;
    let mut seen = Vec::new();
    while Instant::now() < deadline {
        seen.clear();
        for page in browser.browser().pages().await? {
            let url = page.url().await.ok().flatten().unwrap_or_default();
            if url.starts_with(&format!("{origin}/")) {
                return Ok(page);
            }
            seen.push(url);
        }
        tokio::time::sleep(Duration::from_millis(100)).await;
    }
    bail!("the extension did not open the website (the browser shows {seen:?})")
}

/// Waits until the page's URL contains `path`.
pub async fn wait_for_url(page: &Page, path: &str) -> Result<()> {
    let deadline = Instant::now() + WAIT;
    while Instant::now() < deadline {
        if page.url().await.ok().flatten().is_some_and(|url| url.contains(path)) {
            return Ok(());
        }
        tokio::time::sleep(Duration::from_millis(100)).await;
    }
    bail!("the page never reached {path}")
}

/// Waits for the host to finish the one task of the data directory, and returns its bundle.
pub async fn stopped_bundle(data_dir: &Path) -> Result<PathBuf> {
    stopped_bundle_within(data_dir, WAIT).await
}

/// [`stopped_bundle`], waiting at most `wait`: a recording of a hundred megabytes takes the host longer to
/// finish than the demonstration's.
pub async fn stopped_bundle_within(data_dir: &Path, wait: Duration) -> Result<PathBuf> {
    let deadline = Instant::now() + wait;
    while Instant::now() < deadline {
        let captures = std::fs::read_dir(data_dir.join("captures")).context("the host stored nothing")?;
        if let Some(dir) = captures.flatten().map(|d| d.path()).find(|d| d.join("manifest.json").exists()) {
            return Ok(dir);
        }
        tokio::time::sleep(Duration::from_millis(100)).await;
    }
    bail!("the host did not finish a bundle in {}", data_dir.display())
}
