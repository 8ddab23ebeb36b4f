//! TiddlyWiki (npm `tiddlywiki`), its Node.js server: a single-page application over a JSON API. The page
//! is one large document that boots the wiki in the browser and loads its tiddlers from
//! `/recipes/default/tiddlers.json`; every edit is saved by `PUT /recipes/default/tiddlers/<title>` with the
//! tiddler as JSON (its `created` and `modified` stamped by the page's clock), and a draft is saved the same
//! way while the person types its title, then deleted. A real application whose state changes are JSON,
//! with page-made clock fields and an autosave burst, which the demo shop only imitates.

use std::path::{Path, PathBuf};
use std::process::Command;
use std::time::Duration;

use anyhow::{Context, Result, ensure};

use super::{Server, free_port, run};
use crate::browser::{Build, RecordingBrowser, click, click_and_wait, control_key, settle, wait_for_text};
use crate::demo::{start_task, stop_task};

pub const DESCRIPTION: &str = "Add a tiddler called Groceries to the wiki";
/// The title the demonstration gives its new tiddler.
pub const TITLE: &str = "Groceries";

const WAIT: Duration = Duration::from_secs(30);

/// Where `.ci/install` installs the Node applications (`tests/apps/package.json`).
pub fn node_modules() -> PathBuf {
    Path::new(env!("CARGO_MANIFEST_DIR")).join("../target/apps-node/node_modules")
}

/// A running TiddlyWiki server.
pub struct TiddlyWiki {
    pub server: Server,
}

impl TiddlyWiki {
    /// Makes a wiki from TiddlyWiki's `server` edition in a temporary directory and serves it.
    pub fn start() -> Result<TiddlyWiki> {
        let script = node_modules().join("tiddlywiki/tiddlywiki.js");
        ensure!(script.is_file(), "TiddlyWiki is not at {} (`bash .ci/install` installs it)", script.display());
        let dir = tempfile::tempdir()?;
        let wiki = dir.path().join("wiki");
        run(Command::new("node").arg(&script).arg(&wiki).args(["--init", "server"]))
            .context("node is not installed")?;
        let port = free_port()?;
        let server = Server::start(
            Command::new("node").arg(&script).arg(&wiki).args(["--listen", &format!("port={port}"), "host=127.0.0.1"]),
            port,
            dir,
        )?;
        Ok(TiddlyWiki { server })
    }

    /// Records the demonstration: the wiki, "new tiddler" in the sidebar, the title typed over the one
    /// proposed (saved as a draft as it is typed), the edit confirmed, and the tiddler shown under its
    /// title. Returns the finished bundle.
    pub async fn record(&self, build: &Build, data_dir: &Path) -> Result<PathBuf> {
        let browser = RecordingBrowser::launch(build, data_dir, true).await?;
        let (popup, page) = start_task(&browser, DESCRIPTION, &self.server.url("/")).await?;
        wait_for_text(&page, ".tc-story-river", WAIT, |text| text.contains("GettingStarted")).await?;
        settle().await;
        click(&page, "button[aria-label='New tiddler'], button[aria-label='new tiddler']").await?;
        let title = "input.tc-titlebar.tc-edit-texteditor";
        wait_for_text(&page, ".tc-story-river", WAIT, |text| text.contains("New Tiddler")).await?;
        // The proposed title selected and typed over, as a person does.
        click(&page, title).await?;
        control_key(&page, "a").await?;
        page.find_element(title).await?.type_str(TITLE).await?;
        settle().await;
        click_and_wait(&page, "button[aria-label='Confirm changes to this tiddler'], button[aria-label='confirm changes to this tiddler']")
            .await?;
        wait_for_text(&page, ".tc-story-river .tc-title", WAIT, |text| text.contains(TITLE)).await?;
        settle().await;
        stop_task(&popup, browser, data_dir).await
    }
}
