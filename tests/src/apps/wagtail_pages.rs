//! Wagtail (PyPI `wagtail`), the content management system built on Django, in a project of its own made
//! by `wagtail start`: an editor that saves by itself. Once typing in a new page's title stops, the editor
//! posts the form in the background (a `fetch` of the add URL answered with JSON), the page is created,
//! and the editor's URL becomes the new page's edit URL (`/admin/pages/4/edit/`) through the history API,
//! with no document loaded. The person's later Publish posts the form to that edit URL: a re-run that
//! does not wait for the autosave posts to the add URL instead, and makes another page.

use std::path::{Path, PathBuf};
use std::process::Command;
use std::time::Duration;

use anyhow::{Context, Result};

use super::person::{pause, type_keys};
use super::{Server, free_port, run};
use crate::browser::{Build, RecordingBrowser, click, click_and_wait, settle, type_into, visit, wait_for_text};
use crate::demo::{start_task, stop_task, wait_for_url};

pub const USER: &str = "admin";
pub const PASSWORD: &str = "Tr4ce-wagtail-pass";
pub const DESCRIPTION: &str = "Publish a page Lantern hours under the home page";
/// The new page's title, which the demonstration types.
pub const TITLE: &str = "Lantern hours";
/// Where the editor goes once the autosave has created the page: the site's home page is page 3, so the
/// first page made under it is page 4.
pub const EDIT_PATH: &str = "/admin/pages/4/edit/";

const WAIT: Duration = Duration::from_secs(30);

/// What the project's development settings gain: nothing asked of another site (the release check the
/// dashboard makes, avatars from Gravatar), and only loopback as a host.
const SETTINGS: &str = "
WAGTAIL_ENABLE_UPDATE_CHECK = False
WAGTAIL_GRAVATAR_PROVIDER_URL = None
ALLOWED_HOSTS = ['127.0.0.1']
";

/// A running Wagtail site.
pub struct WagtailPages {
    pub server: Server,
}

impl WagtailPages {
    /// Makes a project with `wagtail start` in a temporary directory, keeps it off the network, migrates its
    /// database, creates the superuser, and serves it with Django's own server.
    pub fn start(python: &Path) -> Result<WagtailPages> {
        let dir = tempfile::tempdir()?;
        let manage = || {
            let mut command = Command::new(python);
            command.arg(dir.path().join("manage.py")).current_dir(dir.path());
            command
        };
        run(Command::new(python).args(["-m", "wagtail.bin.wagtail", "start", "lantern"]).arg(dir.path()))
            .context("wagtail is not installed")?;
        let port = free_port()?;
        let settings = dir.path().join("lantern/settings/dev.py");
        let mut text = std::fs::read_to_string(&settings)?;
        text.push_str(SETTINGS);
        text.push_str(&format!("WAGTAILADMIN_BASE_URL = 'http://127.0.0.1:{port}'\n"));
        std::fs::write(&settings, text)?;
        run(manage().args(["migrate", "--verbosity", "0"]))?;
        run(manage()
            .args(["createsuperuser", "--noinput", "--username", USER, "--email", "admin@example.test"])
            .env("DJANGO_SUPERUSER_PASSWORD", PASSWORD))?;
        let address = format!("127.0.0.1:{port}");
        let server = Server::start(manage().args(["runserver", "--noreload", "--nothreading", &address]), port, dir)?;
        Ok(WagtailPages { server })
    }

    /// Records the demonstration: the admin asked for, the login, the home page's listing, "Add child
    /// page", the title clicked, a pause, the title typed a key at a time, a wait while the editor saves by
    /// itself (its URL becomes the page's edit URL), then Publish from the footer's menu, and the listing
    /// that says it was published. Returns the finished bundle.
    pub async fn record(&self, build: &Build, data_dir: &Path) -> Result<PathBuf> {
        let browser = RecordingBrowser::launch(build, data_dir, true).await?;
        let (popup, page) = start_task(&browser, DESCRIPTION, &self.server.url("/admin/")).await?;
        wait_for_url(&page, "/admin/login/").await?;
        type_into(&page, "#id_username", USER).await?;
        type_into(&page, "#id_password", PASSWORD).await?;
        click_and_wait(&page, "button[type=submit]").await?;
        wait_for_text(&page, "main", WAIT, |text| text.contains("Site summary")).await?;
        visit(&page, &self.server.url("/admin/pages/3/")).await?;
        click_and_wait(&page, "a[href='/admin/pages/3/add_subpage/']").await?;
        wait_for_url(&page, "/admin/pages/add/home/homepage/3/").await?;
        settle().await;
        click(&page, "#id_title").await?;
        pause(1500).await;
        type_keys(&page, TITLE).await?;
        // The editor saves about a second and a half after the last key; the person waits for it.
        pause(2500).await;
        wait_for_url(&page, EDIT_PATH).await?;
        pause(1500).await;
        click(&page, "footer .w-dropdown__toggle").await?;
        pause(800).await;
        click_and_wait(&page, "footer button[name=action-publish]").await?;
        wait_for_text(&page, ".messages", WAIT, |text| text.contains(TITLE) && text.contains("published")).await?;
        settle().await;
        stop_task(&popup, browser, data_dir).await
    }
}
