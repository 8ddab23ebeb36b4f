//! ArchiveWeb.page, Webrecorder's recording extension, loaded beside TRACE's in one Chromium so that the
//! overhead benchmark can compare the two recorders on the same pages: where `.ci/install` built it (from
//! its npm package's sources, `tests/archiveweb/`), starting it on a tab as its popup does, and reading back
//! what it stored, so that a benchmark can check it really recorded what it loaded.
//!
//! ArchiveWeb.page records as TRACE does, through `chrome.debugger` (Network, and Fetch paused at the
//! Response stage for every URL, the cache disabled), and writes every response to IndexedDB in its
//! extension. Its background takes commands only from its own `popup.html`, over a port: the build's
//! stand-in popup (`tests/archiveweb/popup.js`) holds the two calls made here.

use std::path::{Path, PathBuf};
use std::time::{Duration, Instant};

use anyhow::{Context, Result, bail, ensure};
use chromiumoxide::Page;
use serde::Deserialize;

use crate::browser::RecordingBrowser;

/// The ID Chrome derives from the public `key` in `tests/archiveweb/manifest.json`.
pub const EXTENSION_ID: &str = "mnnodhgbhknjnnanhfjligjcjcjlgfkl";

/// The unpacked extension `.ci/install` built under `target/archiveweb/extension`.
pub fn built_extension() -> Result<PathBuf> {
    let extension = Path::new(env!("CARGO_MANIFEST_DIR")).join("../target/archiveweb/extension");
    ensure!(
        extension.join("manifest.json").exists() && extension.join("bg.js").exists(),
        "ArchiveWeb.page is not built at {}: run bash .ci/install",
        extension.display()
    );
    Ok(extension)
}

/// ArchiveWeb.page's popup page, open in a tab of the browser that loaded it.
pub struct ArchiveWebPage {
    popup: Page,
}

/// What ArchiveWeb.page stored, over all its collections.
#[derive(Debug, Deserialize)]
#[serde(rename_all = "camelCase")]
pub struct Recorded {
    /// Responses stored (one per URL and time: a page loaded twice is two).
    pub resources: usize,
    /// Pages it counted as visited.
    pub pages: usize,
    /// Each stored response's URL.
    pub urls: Vec<String>,
    /// The length of the body kept for each response whose URL holds the part asked about.
    pub body_lengths: Vec<u64>,
}

impl Recorded {
    /// How many responses for exactly `url` it stored.
    pub fn count_of(&self, url: &str) -> usize {
        self.urls.iter().filter(|stored| *stored == url).count()
    }
}

impl ArchiveWebPage {
    /// Opens the popup page in a tab of `browser`, which must have loaded [`built_extension`].
    pub async fn open(browser: &RecordingBrowser) -> Result<ArchiveWebPage> {
        let url = format!("chrome-extension://{EXTENSION_ID}/popup.html");
        let popup = browser.browser().new_page(url).await.context("cannot open ArchiveWeb.page's popup")?;
        Ok(ArchiveWebPage { popup })
    }

    /// The popup's tab (its scripts run in ArchiveWeb.page's extension process).
    pub fn page(&self) -> &Page {
        &self.popup
    }

    /// Has ArchiveWeb.page record `tab`, returning once its background says it does. Attaching reloads
    /// the tab. The tab is found by a title given it for the purpose: DevTools and the extension API
    /// number tabs differently.
    pub async fn record(&self, tab: &Page) -> Result<()> {
        let marker = format!("archiveweb-{}", std::process::id());
        tab.evaluate(format!("document.title = {}", serde_json::to_string(&marker)?)).await?;
        let find = format!(
            "chrome.tabs.query({{ title: {} }}).then((tabs) => tabs.map((tab) => tab.id))",
            serde_json::to_string(&marker)?
        );
        let deadline = Instant::now() + Duration::from_secs(10);
        let tab_id = loop {
            let ids: Vec<i64> = self.popup.evaluate(find.as_str()).await?.into_value()?;
            match ids[..] {
                [id] => break id,
                [] if Instant::now() < deadline => tokio::time::sleep(Duration::from_millis(100)).await,
                _ => bail!("ArchiveWeb.page's popup finds tabs {ids:?} titled {marker}"),
            }
        };
        let started = self.popup.evaluate(format!("window.startRecording({tab_id})"));
        tokio::time::timeout(Duration::from_secs(20), started)
            .await
            .context("ArchiveWeb.page did not start recording in 20 s")?
            .context("ArchiveWeb.page did not start recording")?;
        Ok(())
    }

    /// What it stored so far; `body_url_part` picks the responses whose body lengths are given.
    pub async fn recorded(&self, body_url_part: &str) -> Result<Recorded> {
        let expression = format!("window.recorded({})", serde_json::to_string(body_url_part)?);
        let recorded = self.popup.evaluate(expression).await.context("cannot read ArchiveWeb.page's IndexedDB")?;
        Ok(recorded.into_value()?)
    }
}
