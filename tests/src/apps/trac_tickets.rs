//! Trac (PyPI `Trac`), the issue tracker, in a project of its own served by its standalone server: a
//! server-rendered application whose new-ticket form carries a form token tied to a cookie, answers its
//! POST with a redirect to the ticket it made, and shows the ticket among a site frame (banner, main and
//! meta navigation, footer) that every page repeats. Anonymous visitors are allowed to create tickets.

use std::path::{Path, PathBuf};
use std::process::Command;
use std::time::Duration;

use anyhow::{Context, Result};

use super::{Server, free_port, run};
use crate::browser::{Build, RecordingBrowser, click_and_wait, settle, type_into, wait_for_text};
use crate::demo::{start_task, stop_task};

pub const DESCRIPTION: &str = "Report that the lantern's wick burns too fast";
/// The ticket's summary, which the ticket's page shows.
pub const SUMMARY: &str = "Wick burns too fast";
/// The ticket's description.
pub const DETAILS: &str = "It lasts two hours, not six.";

const WAIT: Duration = Duration::from_secs(20);

/// A running Trac project.
pub struct TracTickets {
    pub server: Server,
}

impl TracTickets {
    /// Makes a project with an SQLite database in a temporary directory, lets anonymous visitors create
    /// tickets, and serves it.
    pub fn start(python: &Path) -> Result<TracTickets> {
        let dir = tempfile::tempdir()?;
        let project = dir.path().join("lantern");
        let admin = || {
            let mut command = Command::new(python);
            command.args(["-m", "trac.admin.console"]).arg(&project);
            command
        };
        run(admin().args(["initenv", "Lantern", "sqlite:db/trac.db"])).context("Trac is not installed")?;
        run(admin().args(["permission", "add", "anonymous", "TICKET_CREATE"]))?;
        let port = free_port()?;
        let server = Server::start(
            Command::new(python)
                .args(["-m", "trac.web.standalone", "--hostname", "127.0.0.1", "--port", &port.to_string()])
                .arg("--single-env")
                .arg(&project),
            port,
            dir,
        )?;
        Ok(TracTickets { server })
    }

    /// Records the demonstration: the project's start page, New Ticket, the summary and description
    /// typed, Create ticket, and the ticket's page. Returns the finished bundle.
    pub async fn record(&self, build: &Build, data_dir: &Path) -> Result<PathBuf> {
        let browser = RecordingBrowser::launch(build, data_dir, true).await?;
        let (popup, page) = start_task(&browser, DESCRIPTION, &self.server.url("/")).await?;
        wait_for_text(&page, "#mainnav", WAIT, |text| text.to_lowercase().contains("new ticket")).await?;
        settle().await;
        click_and_wait(&page, "#mainnav a[href$='/newticket']").await?;
        type_into(&page, "#field-summary", SUMMARY).await?;
        settle().await;
        type_into(&page, "#field-description", DETAILS).await?;
        settle().await;
        click_and_wait(&page, "input[name=submit]").await?;
        wait_for_text(&page, "#content", WAIT, |text| text.contains(SUMMARY)).await?;
        settle().await;
        stop_task(&popup, browser, data_dir).await
    }
}
