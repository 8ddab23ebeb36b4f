//! Trac (PyPI `Trac`), the issue tracker, in a project of its own served by its standalone server: a
//! server-rendered application whose new-ticket form carries a form token tied to a cookie, answers its
//! POST with a redirect to the ticket it made, and shows the ticket among a site frame (banner, main and
//! meta navigation, footer) that every page repeats. Anonymous visitors are allowed to create tickets.
//!
//! Served behind HTTP Basic authentication instead ([`TracTickets::start_behind_basic_auth`], as Trac's own
//! server does it with `--basic-auth`), only `/login` asks for credentials: the browser's first request for
//! it is answered 401 with a challenge, the person gives their name and password in the browser's own
//! dialog, the browser asks again with an `Authorization` header, and Trac answers with a session cookie
//! and a redirect back. Only a logged-in user may create tickets then.

use std::path::{Path, PathBuf};
use std::process::Command;
use std::time::Duration;

use anyhow::{Context, Result};

use chromiumoxide::auth::Credentials;

use super::person::pause;
use super::{Server, free_port, run};
use crate::browser::{Build, RecordingBrowser, click_and_wait, settle, type_into, wait_for_text};
use crate::demo::{start_task, stop_task, wait_for_url};

pub const DESCRIPTION: &str = "Report that the lantern's wick burns too fast";
/// The ticket's summary, which the ticket's page shows.
pub const SUMMARY: &str = "Wick burns too fast";
/// The ticket's description.
pub const DETAILS: &str = "It lasts two hours, not six.";

/// The user who logs in behind Basic authentication, and their password.
pub const USER: &str = "keeper";
pub const PASSWORD: &str = "Tr4ce-trac-pass";
/// The realm Trac names in its challenge.
pub const REALM: &str = "Lantern";

const WAIT: Duration = Duration::from_secs(20);

/// A running Trac project.
pub struct TracTickets {
    pub server: Server,
}

impl TracTickets {
    /// Makes a project with an SQLite database in a temporary directory, lets anonymous visitors create
    /// tickets, and serves it.
    pub fn start(python: &Path) -> Result<TracTickets> {
        TracTickets::start_project(python, false)
    }

    /// Makes a project as [`TracTickets::start`] does, but serves it behind HTTP Basic authentication: only
    /// [`USER`], logged in, may create tickets.
    pub fn start_behind_basic_auth(python: &Path) -> Result<TracTickets> {
        TracTickets::start_project(python, true)
    }

    fn start_project(python: &Path, basic_auth: bool) -> Result<TracTickets> {
        let dir = tempfile::tempdir()?;
        let project = dir.path().join("lantern");
        let admin = || {
            let mut command = Command::new(python);
            command.args(["-m", "trac.admin.console"]).arg(&project);
            command
        };
        run(admin().args(["initenv", "Lantern", "sqlite:db/trac.db"])).context("Trac is not installed")?;
        let port = free_port()?;
        let mut server = Command::new(python);
        server
            .args(["-m", "trac.web.standalone", "--hostname", "127.0.0.1", "--port", &port.to_string()])
            .arg("--single-env");
        if basic_auth {
            run(admin().args(["permission", "add", USER, "TICKET_CREATE"]))?;
            // An htpasswd file with the password as `{SHA}` (base64 of its SHA-1), a form Trac reads.
            let htpasswd = dir.path().join("htpasswd");
            run(Command::new(python).arg("-c").arg(HTPASSWD).arg(&htpasswd).arg(USER).arg(PASSWORD))?;
            let mut option = std::ffi::OsString::from("--basic-auth=*,");
            option.push(&htpasswd);
            option.push(format!(",{REALM}"));
            server.arg(option);
        } else {
            run(admin().args(["permission", "add", "anonymous", "TICKET_CREATE"]))?;
        }
        let server = Server::start(server.arg(&project), port, dir)?;
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

    /// Records the demonstration behind Basic authentication: the project's start page, Login, the browser's
    /// challenge answered with [`USER`] and [`PASSWORD`] (as a person types them into the browser's dialog;
    /// here the recording browser's DevTools answer it), the start page again, logged in, then New Ticket,
    /// the summary and description typed, Create ticket, and the ticket's page. Returns the finished bundle.
    pub async fn record_behind_basic_auth(&self, build: &Build, data_dir: &Path) -> Result<PathBuf> {
        let browser = RecordingBrowser::launch(build, data_dir, true).await?;
        let (popup, page) = start_task(&browser, DESCRIPTION, &self.server.url("/")).await?;
        wait_for_text(&page, "#metanav", WAIT, |text| text.contains("Login")).await?;
        page.authenticate(Credentials { username: USER.to_owned(), password: PASSWORD.to_owned() }).await?;
        settle().await;
        click_and_wait(&page, "#metanav a[href$='/login']").await?;
        wait_for_text(&page, "#metanav", WAIT, |text| text.contains(&format!("logged in as {USER}"))).await?;
        pause(1000).await;
        click_and_wait(&page, "#mainnav a[href$='/newticket']").await?;
        wait_for_url(&page, "/newticket").await?;
        type_into(&page, "#field-summary", SUMMARY).await?;
        settle().await;
        type_into(&page, "#field-description", DETAILS).await?;
        pause(1000).await;
        click_and_wait(&page, "input[name=submit]").await?;
        wait_for_text(&page, "#content", WAIT, |text| text.contains(SUMMARY)).await?;
        settle().await;
        stop_task(&popup, browser, data_dir).await
    }
}

/// Writes an htpasswd file (`python -c HTPASSWD FILE USER PASSWORD`): one line, the password's SHA-1 in
/// base64 after `{SHA}`.
const HTPASSWD: &str = "import base64, hashlib, sys
digest = base64.b64encode(hashlib.sha1(sys.argv[3].encode()).digest()).decode()
open(sys.argv[1], 'w').write(f'{sys.argv[2]}:{{SHA}}{digest}\\n')
";
