//! Django's admin site (PyPI `django`), set up as its tutorial does: a new project, its database migrated,
//! one superuser. It is a real application with what replay must get right: `/admin/` answers with a
//! redirect to the login page before the login and with the dashboard after it (one URL, two states), the
//! login rotates the CSRF token and sets the session cookie, and the group form's permission picker is
//! built by script and filters as one types.

use std::path::{Path, PathBuf};
use std::process::Command;
use std::time::Duration;

use anyhow::{Context, Result};

use super::{Server, free_port, run};
use crate::browser::{Build, RecordingBrowser, click, click_and_wait, control_click, settle, type_into, wait_for_text};
use crate::demo::{start_task, stop_task, wait_for_url};

pub const USER: &str = "admin";
pub const PASSWORD: &str = "Tr4ce-admin-pass";
pub const DESCRIPTION: &str = "Create a group Editors with two view permissions";
/// The group the demonstration creates, which the page lists once it is saved.
pub const GROUP: &str = "Editors";

const WAIT: Duration = Duration::from_secs(20);

/// A running Django admin site.
pub struct DjangoAdmin {
    pub server: Server,
}

impl DjangoAdmin {
    /// Makes a project in a temporary directory, migrates its database, creates the superuser, and serves
    /// it with Django's own server.
    pub fn start(python: &Path) -> Result<DjangoAdmin> {
        let dir = tempfile::tempdir()?;
        let manage = || {
            let mut command = Command::new(python);
            command.arg(dir.path().join("manage.py")).current_dir(dir.path());
            command
        };
        run(Command::new(python).args(["-m", "django", "startproject", "tracedemo"]).arg(dir.path()))
            .context("django is not installed")?;
        run(manage().args(["migrate", "--verbosity", "0"]))?;
        run(manage()
            .args(["createsuperuser", "--noinput", "--username", USER, "--email", "admin@example.test"])
            .env("DJANGO_SUPERUSER_PASSWORD", PASSWORD))?;
        let port = free_port()?;
        let address = format!("127.0.0.1:{port}");
        let server = Server::start(manage().args(["runserver", "--noreload", "--nothreading", &address]), port, dir)?;
        Ok(DjangoAdmin { server })
    }

    /// Records the demonstration: the task starts at `/admin/`, which sends the person to the login page;
    /// they log in, open "Add group", name the group, filter the permissions by typing, pick two (the
    /// second with Control held), move them across, and save. Returns the finished bundle.
    pub async fn record(&self, build: &Build, data_dir: &Path) -> Result<PathBuf> {
        self.record_group(build, data_dir, DESCRIPTION, GROUP, "can view").await
    }

    /// Records [`DjangoAdmin::record`]'s demonstration with another group name and permission filter
    /// (`can add`, `can change`, ...): recordings of one site that differ, as an environment map is made of.
    pub async fn record_group(
        &self,
        build: &Build,
        data_dir: &Path,
        description: &str,
        group: &str,
        filter: &str,
    ) -> Result<PathBuf> {
        let browser = RecordingBrowser::launch(build, data_dir, true).await?;
        let (popup, admin) = start_task(&browser, description, &self.server.url("/admin/")).await?;
        wait_for_url(&admin, "/admin/login/").await?;
        type_into(&admin, "#id_username", USER).await?;
        type_into(&admin, "#id_password", PASSWORD).await?;
        click_and_wait(&admin, "input[type=submit]").await?;
        wait_for_text(&admin, "#content h1", WAIT, |t| t.contains("Site administration")).await?;
        click_and_wait(&admin, "a[href='/admin/auth/group/add/']").await?;
        type_into(&admin, "#id_name", group).await?;
        type_into(&admin, "#id_permissions_input", filter).await?;
        // The picker keeps only the matching permissions, once the typing has stopped.
        let filtered = "[...document.querySelectorAll('#id_permissions_from option')].map(o => o.text)";
        let deadline = std::time::Instant::now() + WAIT;
        loop {
            let options: Vec<String> = admin.evaluate(filtered).await?.into_value()?;
            if options.len() >= 2 && options.iter().all(|option| option.to_lowercase().contains(filter)) {
                break;
            }
            anyhow::ensure!(std::time::Instant::now() < deadline, "the permission filter shows {options:?}");
            tokio::time::sleep(Duration::from_millis(100)).await;
        }
        // Two permissions: the second added to the selection with Control held.
        click(&admin, "#id_permissions_from option:nth-child(1)").await?;
        control_click(&admin, "#id_permissions_from option:nth-child(2)").await?;
        click(&admin, "#id_permissions_add").await?;
        settle().await;
        click_and_wait(&admin, "input[name=_save]").await?;
        wait_for_text(&admin, ".messagelist", WAIT, |t| t.contains(group)).await?;
        settle().await;
        stop_task(&popup, browser, data_dir).await
    }
}
