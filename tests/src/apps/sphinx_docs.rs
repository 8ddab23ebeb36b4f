//! A documentation site built with Sphinx (PyPI `sphinx`, its default theme) and served as static files
//! by Python's own HTTP server, as documentation is hosted. A real application with client-side search:
//! the search page loads the site's index by script, then fills its results a few at a time on a timer,
//! fetching each hit's page for its summary, so a step that clicks a result must wait for it to appear.

use std::path::{Path, PathBuf};
use std::process::Command;
use std::time::Duration;

use anyhow::Result;

use super::{Server, run};
use crate::browser::{Build, RecordingBrowser, click_and_wait, settle, type_into, wait_for_text};
use crate::demo::{start_task, stop_task};

pub const DESCRIPTION: &str = "Find how long a glowing wick lasts";
/// The word the demonstration searches for.
pub const QUERY: &str = "wick";
/// What the page the search leads to says, which the re-run must show.
pub const ANSWER: &str = "lasts six hours";

const WAIT: Duration = Duration::from_secs(20);

/// The site's sources: a small manual in three pages, two of which mention the word searched for.
const PAGES: &[(&str, &str)] = &[
    ("conf.py", "project = 'Lantern'\nhtml_theme = 'alabaster'\n"),
    ("index.rst", "Lantern\n=======\n\nA manual for the Lantern.\n\n.. toctree::\n\n   install\n   usage\n"),
    (
        "install.rst",
        "Installing\n==========\n\nLantern installs from the package index. \
         The wick must be trimmed before first use.\n",
    ),
    (
        "usage.rst",
        "Lighting the lantern\n====================\n\nTurn the knob until the wick glows. \
         A glowing wick lasts six hours on one filling.\n",
    ),
];

/// A running documentation site.
pub struct SphinxDocs {
    pub server: Server,
}

impl SphinxDocs {
    /// Builds the site with Sphinx in a temporary directory and serves the HTML.
    pub fn start(python: &Path) -> Result<SphinxDocs> {
        let dir = tempfile::tempdir()?;
        let source = dir.path().join("source");
        let html = dir.path().join("html");
        std::fs::create_dir(&source)?;
        for (name, text) in PAGES {
            std::fs::write(source.join(name), text)?;
        }
        run(Command::new(python).args(["-m", "sphinx", "-q", "-b", "html"]).arg(&source).arg(&html))?;
        let server = Server::static_files(python, &html, dir)?;
        Ok(SphinxDocs { server })
    }

    /// Records the demonstration: the manual's first page, the word typed into the search box, Go, the
    /// result about lighting the lantern clicked once the search shows it, and the answer on that page.
    /// Returns the finished bundle.
    pub async fn record(&self, build: &Build, data_dir: &Path) -> Result<PathBuf> {
        let browser = RecordingBrowser::launch(build, data_dir, true).await?;
        let (popup, page) = start_task(&browser, DESCRIPTION, &self.server.url("/index.html")).await?;
        type_into(&page, "#searchbox input[name=q]", QUERY).await?;
        click_and_wait(&page, "#searchbox input[type=submit]").await?;
        wait_for_text(&page, "#search-results", WAIT, |text| text.contains("Lighting the lantern")).await?;
        settle().await;
        click_and_wait(&page, "#search-results a[href^='usage.html']").await?;
        wait_for_text(&page, "div.body", WAIT, |text| text.contains(ANSWER)).await?;
        settle().await;
        stop_task(&popup, browser, data_dir).await
    }
}
