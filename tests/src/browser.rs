//! Real Chromium with the real extension and the real `trace-host`, for end-to-end tests and the demo.
//!
//! Each launch gets its own profile, into which `trace-host install --user-data-dir` registers the host,
//! and its own data directory (passed to the host through the browser's environment, which Chrome hands
//! to the native hosts it starts). Chromium is launched by `trace_replay::chromium`, as replay launches it.
//!
//! The end-to-end tests need the release build (`cargo xtask dist`): under plain `cargo test`, where it may
//! be missing, [`Build::for_tests`] says so in one line and the test skips; `cargo xtask test` sets
//! `TRACE_E2E_REQUIRED`, under which a missing build or Chromium fails the test instead.

use std::path::{Path, PathBuf};
use std::process::Command;
use std::time::{Duration, Instant};

use anyhow::{Context, Result, bail, ensure};
use chromiumoxide::cdp::browser_protocol::input::{
    DispatchKeyEventParams, DispatchKeyEventType, DispatchMouseEventParams, DispatchMouseEventType, MouseButton,
};
use chromiumoxide::layout::Point;
use chromiumoxide::types::ClickOptions;
use chromiumoxide::{Browser, Element, Page};
use trace_manifest::report::FidelityReport;
use trace_replay::chromium::{self, Chromium, Launch};

/// Where the built pieces are: `cargo xtask dist` puts them under `target/`.
#[derive(Debug, Clone)]
pub struct Build {
    pub trace_host: PathBuf,
    pub trace_replay: PathBuf,
    pub extension: PathBuf,
    pub chromium: PathBuf,
}

impl Build {
    /// The pieces `cargo xtask dist` built in this workspace, and the Chromium `TRACE_CHROMIUM` names (else
    /// Debian's).
    pub fn from_workspace() -> Result<Build> {
        let target = Path::new(env!("CARGO_MANIFEST_DIR")).join("../target");
        let build = Build {
            trace_host: target.join("release/trace-host"),
            trace_replay: target.join("release/trace-replay"),
            extension: target.join("extension"),
            chromium: chromium::find(None).context("the end-to-end tests need Chromium (.ci/install installs it)")?,
        };
        ensure!(
            build.trace_host.exists() && build.trace_replay.exists() && build.extension.join("manifest.json").exists(),
            "the end-to-end tests need the release build: run `cargo xtask dist` first"
        );
        Ok(build)
    }

    /// [`Build::from_workspace`] for a test: `None`, said in one line, when the build or Chromium is missing,
    /// unless `TRACE_E2E_REQUIRED` is set, which makes it fail the test.
    pub fn for_tests(test: &str) -> Option<Build> {
        match Build::from_workspace() {
            Ok(build) => Some(build),
            Err(error) if std::env::var_os(REQUIRED_ENV).is_some_and(|v| !v.is_empty()) => {
                panic!("{test}: {error:#} ({REQUIRED_ENV} is set)")
            }
            Err(error) => {
                eprintln!("skipped {test}: {error:#}");
                None
            }
        }
    }
}

impl Build {
    /// `trace-replay run --human --json` on `bundle`, in this build's Chromium: the fidelity report, and
    /// whether the run called the re-run faithful (exit 0).
    pub fn replay_human(&self, bundle: &Path) -> Result<(FidelityReport, bool)> {
        let output = Command::new(self.trace_host.with_file_name("trace-replay"))
            .args(["run", "--human", "--json", "--chromium"])
            .arg(&self.chromium)
            .arg(bundle)
            .output()
            .context("cannot run trace-replay")?;
        let report = serde_json::from_slice(&output.stdout)
            .with_context(|| format!("no report: {}", String::from_utf8_lossy(&output.stderr)))?;
        Ok((report, output.status.success()))
    }
}

/// Set by `cargo xtask test`: the end-to-end tests must run, not skip.
pub const REQUIRED_ENV: &str = "TRACE_E2E_REQUIRED";

/// A running Chromium with the extension loaded and the host registered.
pub struct RecordingBrowser {
    chromium: Chromium,
    /// The browser's process, parent of all its others.
    process_id: u32,
    pub data_dir: PathBuf,
    _profile: tempfile::TempDir,
}

impl RecordingBrowser {
    /// Launches Chromium headless; `register_host: false` leaves the host unregistered.
    pub async fn launch(build: &Build, data_dir: &Path, register_host: bool) -> Result<RecordingBrowser> {
        RecordingBrowser::launch_with_env(build, data_dir, register_host, Vec::new()).await
    }

    /// Launches Chromium headless with `env` added to its environment, which the host it starts inherits
    /// (an object store's endpoint and credentials, as a person's shell would have them).
    pub async fn launch_with_env(
        build: &Build,
        data_dir: &Path,
        register_host: bool,
        env: Vec<(String, String)>,
    ) -> Result<RecordingBrowser> {
        RecordingBrowser::start(build, data_dir, register_host, env, None).await
    }

    /// Launches Chromium headless, the host registered, with a second unpacked extension loaded beside
    /// TRACE's (another recorder, which a benchmark compares with TRACE in the same browser).
    pub async fn launch_with_extra_extension(
        build: &Build,
        data_dir: &Path,
        extra_extension: &Path,
    ) -> Result<RecordingBrowser> {
        RecordingBrowser::start(build, data_dir, true, Vec::new(), Some(extra_extension)).await
    }

    async fn start(
        build: &Build,
        data_dir: &Path,
        register_host: bool,
        env: Vec<(String, String)>,
        extra_extension: Option<&Path>,
    ) -> Result<RecordingBrowser> {
        let profile = tempfile::tempdir()?;
        if register_host {
            let status = Command::new(&build.trace_host)
                .args(["install", "--user-data-dir"])
                .arg(profile.path())
                .stdout(std::process::Stdio::null())
                .status()?;
            ensure!(status.success(), "trace-host install failed");
        }
        let launch = Launch {
            chromium: Some(build.chromium.clone()),
            headless: true,
            extensions: std::iter::once(build.extension.clone()).chain(extra_extension.map(Path::to_owned)).collect(),
            env: [("TRACE_DATA".to_owned(), data_dir.display().to_string())].into_iter().chain(env).collect(),
            user_data_dir: Some(profile.path().to_owned()),
            ..Launch::default()
        };
        let chromium = chromium::launch(&launch).await.context("cannot launch Chromium")?;
        // Chromium is started by trace_replay::chromium, not chromiumoxide, which knows no child process.
        let process_id = chromium.process.id();
        Ok(RecordingBrowser { chromium, process_id, data_dir: data_dir.to_owned(), _profile: profile })
    }

    pub fn browser(&self) -> &Browser {
        &self.chromium.browser
    }

    /// The browser's main process (its others, and the host it starts, are below it).
    pub fn process_id(&self) -> u32 {
        self.process_id
    }

    /// Opens the extension's popup page in a tab.
    pub async fn popup(&self) -> Result<Page> {
        self.extension_page("popup.html").await
    }

    /// Opens one of the extension's pages (`popup.html`, `journeys.html`) in a tab.
    pub async fn extension_page(&self, page: &str) -> Result<Page> {
        let url = format!("chrome-extension://{}/{page}", trace_manifest::EXTENSION_ID);
        self.browser().new_page(url).await.with_context(|| format!("cannot open {page}"))
    }

    /// The tab whose URL starts with `prefix`, once one does.
    pub async fn tab_at(&self, prefix: &str, timeout: Duration) -> Result<Page> {
        let deadline = Instant::now() + timeout;
        while Instant::now() < deadline {
            for page in self.browser().pages().await? {
                if page.url().await.ok().flatten().is_some_and(|url| url.starts_with(prefix)) {
                    return Ok(page);
                }
            }
            tokio::time::sleep(Duration::from_millis(100)).await;
        }
        bail!("no tab opened at {prefix}")
    }

    pub async fn close(self) -> Result<()> {
        self.chromium.close().await
    }
}

/// Waits until `text()` of the element `selector` satisfies `done`, returning the text.
pub async fn wait_for_text(
    page: &Page,
    selector: &str,
    timeout: Duration,
    done: impl Fn(&str) -> bool,
) -> Result<String> {
    let deadline = Instant::now() + timeout;
    let mut last = String::new();
    while Instant::now() < deadline {
        if let Ok(element) = page.find_element(selector).await
            && let Ok(Some(text)) = element.inner_text().await
        {
            if done(&text) {
                return Ok(text);
            }
            last = text;
        }
        tokio::time::sleep(Duration::from_millis(100)).await;
    }
    bail!("{selector} still says {last:?} after {timeout:?}")
}

/// Waits until no element matches `selector` (a dialog closed, a notification dismissed).
pub async fn wait_until_gone(page: &Page, selector: &str, timeout: Duration) -> Result<()> {
    let deadline = Instant::now() + timeout;
    while Instant::now() < deadline {
        if page.find_elements(selector).await.is_ok_and(|found| found.is_empty()) {
            return Ok(());
        }
        tokio::time::sleep(Duration::from_millis(100)).await;
    }
    bail!("{selector} is still on the page after {timeout:?}")
}

/// Clicks an element with real mouse events, waiting for it to be there (the page may still be loading).
pub async fn click(page: &Page, selector: &str) -> Result<()> {
    on_element(page, selector, "click", async |element| element.click().await.map(drop)).await
}

/// Finds `selector` and acts on it, again and again until the act works or 20 s have passed: a page still
/// loading may not have the element yet, and one that has just navigated may replace the node found
/// before the act reaches it ("Could not find node with given id"), more often on a loaded machine.
async fn on_element(
    page: &Page,
    selector: &str,
    what: &str,
    act: impl AsyncFn(Element) -> chromiumoxide::error::Result<()>,
) -> Result<()> {
    let deadline = Instant::now() + Duration::from_secs(20);
    loop {
        let done = match page.find_element(selector).await {
            Ok(element) => act(element).await,
            Err(error) => Err(error),
        };
        match done {
            Ok(()) => return Ok(()),
            Err(error) if Instant::now() > deadline => {
                return Err(error).with_context(|| format!("cannot {what} {selector}"));
            }
            Err(_) => tokio::time::sleep(Duration::from_millis(100)).await,
        }
    }
}

/// Clicks an element with Control held, as a person adds an option to a multiple selection.
pub async fn control_click(page: &Page, selector: &str) -> Result<()> {
    let element = page.find_element(selector).await.with_context(|| format!("no {selector} to click"))?;
    element.scroll_into_view().await?;
    let point = element.clickable_point().await?;
    for kind in [DispatchMouseEventType::MousePressed, DispatchMouseEventType::MouseReleased] {
        let event = DispatchMouseEventParams::builder()
            .r#type(kind)
            .x(point.x)
            .y(point.y)
            .button(MouseButton::Left)
            .click_count(1)
            .modifiers(CONTROL)
            .build()
            .map_err(anyhow::Error::msg)?;
        page.execute(event).await?;
    }
    Ok(())
}

/// Presses a letter key with Control held in the focused element (Control+A selects all).
pub async fn control_key(page: &Page, letter: &str) -> Result<()> {
    let upper = letter.to_ascii_uppercase();
    let key_code = i64::from(upper.as_bytes().first().copied().context("no letter")?);
    chord(page, letter, &format!("Key{upper}"), key_code, CONTROL).await
}

/// Presses `Enter` with Shift held in the focused element (a notebook runs its cell).
pub async fn shift_enter(page: &Page) -> Result<()> {
    chord(page, "Enter", "Enter", 13, SHIFT).await
}

/// Presses one key with `modifiers` held, as DevTools names them.
async fn chord(page: &Page, key: &str, code: &str, key_code: i64, modifiers: i64) -> Result<()> {
    for kind in [DispatchKeyEventType::RawKeyDown, DispatchKeyEventType::KeyUp] {
        let event = DispatchKeyEventParams::builder()
            .r#type(kind)
            .key(key)
            .code(code)
            .windows_virtual_key_code(key_code)
            .native_virtual_key_code(key_code)
            .modifiers(modifiers)
            .build()
            .map_err(anyhow::Error::msg)?;
        page.execute(event).await?;
    }
    Ok(())
}

/// DevTools' bits for the Shift and Control keys in `modifiers`.
const SHIFT: i64 = 8;
const CONTROL: i64 = 2;

/// Clicks something that navigates, and waits for the new page to load and settle.
pub async fn click_and_wait(page: &Page, selector: &str) -> Result<()> {
    click(page, selector).await?;
    page.wait_for_navigation().await?;
    settle().await;
    Ok(())
}

/// Goes to a URL as if typed, and waits for the page to load and settle.
pub async fn visit(page: &Page, url: &str) -> Result<()> {
    page.goto(url).await?;
    settle().await;
    Ok(())
}

/// A person does not act within a few hundred milliseconds of a page appearing; scripted demonstrations
/// should not either, or they measure races no one meets (a page's own beacons still leaving as the test
/// already navigates away).
pub async fn settle() {
    tokio::time::sleep(Duration::from_millis(400)).await;
}

/// Double-clicks an element as a person does: a click, then a second press counted as the second click.
pub async fn double_click(page: &Page, selector: &str) -> Result<()> {
    on_element(page, selector, "double-click", async |element| {
        let point = element.clickable_point().await?;
        page.click(point).await?;
        page.click_with(point, ClickOptions::builder().click_count(2).build()).await.map(drop)
    })
    .await
}

/// Presses a key (`Enter`, `Escape`, ...) in an element, focusing it first.
pub async fn press_key(page: &Page, selector: &str, key: &str) -> Result<()> {
    on_element(page, selector, "press a key in", async |element| element.focus().await?.press_key(key).await.map(drop))
        .await
}

/// Turns the mouse wheel over the middle of the viewport, as a person scrolling down a page does.
pub async fn scroll_by(page: &Page, delta_y: f64) -> Result<()> {
    let wheel = DispatchMouseEventParams::builder()
        .r#type(DispatchMouseEventType::MouseWheel)
        .x(200.0)
        .y(200.0)
        .delta_x(0.0)
        .delta_y(delta_y)
        .build()
        .map_err(anyhow::Error::msg)?;
    page.execute(wheel).await?;
    Ok(())
}

/// Clicks at a point inside an iframe, given in the frame's own coordinates: real input events go to the
/// page, and the browser routes them into the frame, whichever process runs it.
pub async fn click_in_frame(page: &Page, frame_selector: &str, x: f64, y: f64) -> Result<()> {
    let frame = page.find_element(frame_selector).await.with_context(|| format!("no {frame_selector}"))?;
    let frame_box = frame.bounding_box().await?;
    page.click(Point { x: frame_box.x + x, y: frame_box.y + y }).await?;
    Ok(())
}

/// Types into a field with real key events.
pub async fn type_into(page: &Page, selector: &str, text: &str) -> Result<()> {
    click(page, selector).await?;
    page.find_element(selector).await?.type_str(text).await?;
    Ok(())
}

/// Loads `url` in `page`, brought to the front, and returns the time from navigation start to the end of
/// the load event in milliseconds, as the page's Navigation Timing entry gives it (for benchmarks).
pub async fn load_event_end(page: &Page, url: &str, timeout: Duration) -> Result<f64> {
    page.bring_to_front().await?;
    page.goto(url).await?;
    loaded_in(page, url, timeout).await
}

/// The time from navigation start to the end of the load event of `url`, the document `page` shows or is
/// loading, in milliseconds, once that event has ended (at most `timeout`).
pub async fn loaded_in(page: &Page, url: &str, timeout: Duration) -> Result<f64> {
    // The entry of the document just loaded (not the one before it), once its load event has ended.
    let expression = format!(
        "(() => {{ const entry = performance.getEntriesByType('navigation')[0]; \
         return entry && entry.name === {url} ? entry.loadEventEnd : 0; }})()",
        url = serde_json::to_string(url)?
    );
    let deadline = Instant::now() + timeout;
    while Instant::now() < deadline {
        let load_event_end: f64 = page.evaluate(expression.as_str()).await?.into_value()?;
        if load_event_end > 0.0 {
            return Ok(load_event_end);
        }
        tokio::time::sleep(Duration::from_millis(10)).await;
    }
    bail!("{url} did not finish loading in {timeout:?}")
}
