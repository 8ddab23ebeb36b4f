//! A documentation site made with docsify (npm `docsify`), a single-page application whose routes are URL
//! fragments (`/#/rooms/lamp`): one document, `/`, fetches each page's Markdown by script when its route is
//! chosen and draws it in place, so that moving between pages changes only the fragment. Served as static
//! files by Python's own HTTP server (no fallback needed: the server never sees a route), with docsify's
//! script and theme copied from its package rather than fetched from the CDN its own generator points at.

use std::path::{Path, PathBuf};
use std::time::Duration;

use anyhow::{Context, Result, ensure};

use super::Server;
use super::lighthouse_stores::node_modules;
use super::person::pause;
use crate::browser::{Build, RecordingBrowser, click, settle, wait_for_text};
use crate::demo::{start_task, stop_task};

pub const DESCRIPTION: &str = "Find how much oil the lighthouse's oil store holds";
/// The first route the demonstration opens from the sidebar.
pub const FIRST_ROUTE: &str = "#/rooms/lamp";
/// The second, whose page answers the task.
pub const SECOND_ROUTE: &str = "#/rooms/oil";
/// What the second route's page says, which the re-run must show.
pub const ANSWER: &str = "holds forty gallons";

const WAIT: Duration = Duration::from_secs(20);

/// The site: its page, which loads docsify from the site itself, and the Markdown of its routes. (The
/// alias keeps each route from asking for a sidebar of its own folder, which would answer 404.)
const PAGES: &[(&str, &str)] = &[
    (
        "index.html",
        r#"<!DOCTYPE html>
<html lang="en"><head><meta charset="UTF-8"><title>Keepers' handbook</title>
<link rel="stylesheet" href="lib/themes/core.min.css"></head>
<body><div id="app"></div>
<script>window.$docsify = { name: "Keepers' handbook", loadSidebar: true, subMaxLevel: 2,
  alias: { "/.*/_sidebar.md": "/_sidebar.md" } };</script>
<script src="lib/docsify.min.js"></script>
</body></html>
"#,
    ),
    ("README.md", "# Keepers' handbook\n\nWhat every keeper of the lighthouse should know. Start with the rooms.\n"),
    (
        "_sidebar.md",
        "- [Home](/)\n- [Getting started](guide/start.md)\n- [Lamp room](rooms/lamp.md)\n- [Oil store](rooms/oil.md)\n",
    ),
    ("guide/start.md", "# Getting started\n\nClimb the stairs before dusk.\n"),
    (
        "rooms/lamp.md",
        "# Lamp room\n\nThe lamp room is at the top of the tower.\n\n## The lens\n\nPolish the lens every morning.\n",
    ),
    (
        "rooms/oil.md",
        "# Oil store\n\nThe oil store holds forty gallons, enough for a month of nights.\n\n\
         ## Safety\n\nNo open flame below the lamp room.\n",
    ),
];

/// docsify's files the page loads, as they are in its package's `dist` folder.
const DOCSIFY_FILES: &[&str] = &["docsify.min.js", "themes/core.min.css"];

/// A running docsify site.
pub struct DocsifyHandbook {
    pub server: Server,
}

impl DocsifyHandbook {
    /// Writes the site into a temporary directory with docsify's files from `target/node-apps`, and serves it
    /// with `python3 -m http.server`.
    pub fn start() -> Result<DocsifyHandbook> {
        let dist = node_modules().join("docsify/dist");
        ensure!(
            dist.join("docsify.min.js").exists(),
            "docsify is not installed in {} (`bash .ci/install` installs it)",
            node_modules().display()
        );
        let dir = tempfile::tempdir()?;
        let site = dir.path().join("site");
        for (name, text) in PAGES {
            let path = site.join(name);
            std::fs::create_dir_all(path.parent().context("a page has a folder")?)?;
            std::fs::write(path, text)?;
        }
        for file in DOCSIFY_FILES {
            let path = site.join("lib").join(file);
            std::fs::create_dir_all(path.parent().context("a file has a folder")?)?;
            std::fs::copy(dist.join(file), path)?;
        }
        let server = Server::static_files("python3", &site, dir)?;
        Ok(DocsifyHandbook { server })
    }

    /// Records the demonstration: the handbook's home page, the Lamp room chosen in the sidebar, read, then
    /// the Oil store, whose page answers the task. Returns the finished bundle.
    pub async fn record(&self, build: &Build, data_dir: &Path) -> Result<PathBuf> {
        let browser = RecordingBrowser::launch(build, data_dir, true).await?;
        let (popup, page) = start_task(&browser, DESCRIPTION, &self.server.url("/")).await?;
        let article = ".markdown-section";
        wait_for_text(&page, article, WAIT, |text| text.contains("What every keeper")).await?;
        settle().await;
        click(&page, &format!(".sidebar-nav a[href='{FIRST_ROUTE}']")).await?;
        wait_for_text(&page, article, WAIT, |text| text.contains("top of the tower")).await?;
        pause(1500).await;
        click(&page, &format!(".sidebar-nav a[href='{SECOND_ROUTE}']")).await?;
        wait_for_text(&page, article, WAIT, |text| text.contains(ANSWER)).await?;
        pause(1500).await;
        stop_task(&popup, browser, data_dir).await
    }
}
