//! Django's admin site with a rich-text field edited in TinyMCE (PyPI `django-tinymce`, which brings
//! TinyMCE 5): an editor inside an iframe that the page writes itself. The editor's `<iframe>` has neither
//! `src` nor `srcdoc`; TinyMCE's script fills it with `document.open()` and `write()`, and what the person
//! types there is the body of an editable document of that frame. On Save, TinyMCE copies that body into
//! the form's hidden field, which is posted with the rest of the form.

use std::path::{Path, PathBuf};
use std::process::Command;
use std::time::Duration;

use anyhow::{Context, Result};

use super::person::{pause, type_keys};
use super::{Server, free_port, run};
use crate::browser::{Build, RecordingBrowser, click_and_wait, click_in_frame, settle, type_into, wait_for_text};
use crate::demo::{start_task, stop_task, wait_for_url};

pub const USER: &str = "admin";
pub const PASSWORD: &str = "Tr4ce-notes-pass";
pub const DESCRIPTION: &str = "Write a note about the lamp in the log";
/// The note's title, typed into a plain field of the page.
pub const TITLE: &str = "Lamp log";
/// The note's body, typed into the editor in its written iframe.
pub const BODY: &str = "The lamp was lit at dusk.";

const WAIT: Duration = Duration::from_secs(20);

/// The notes application: a note with a title and a rich-text body, listed with its body's text.
const MODELS: &str = r#"
from django.db import models
from tinymce.models import HTMLField

class Note(models.Model):
    title = models.CharField(max_length=200)
    body = HTMLField(blank=True)

    def __str__(self):
        return self.title
"#;
const ADMIN: &str = r#"
from django.contrib import admin
from django.utils.html import strip_tags
from .models import Note

@admin.register(Note)
class NoteAdmin(admin.ModelAdmin):
    list_display = ("title", "text")

    @admin.display(description="Text")
    def text(self, note):
        return strip_tags(note.body)
"#;
/// What the project's settings gain: the two applications, only loopback as a host, and a small editor
/// (TinyMCE's own plugins only, nothing from its cloud).
const SETTINGS: &str = r#"
INSTALLED_APPS += ["tinymce", "notes"]
ALLOWED_HOSTS = ["127.0.0.1"]
TINYMCE_DEFAULT_CONFIG = {
    "height": 300,
    "menubar": False,
    "plugins": "lists,link",
    "toolbar": "undo redo | bold italic | bullist numlist | link",
}
"#;
const URLS: &str = r#"
from django.contrib import admin
from django.urls import include, path

urlpatterns = [path("admin/", admin.site.urls), path("tinymce/", include("tinymce.urls"))]
"#;

/// A running notes site.
pub struct TinyMceNotes {
    pub server: Server,
}

impl TinyMceNotes {
    /// Makes a project with a notes application in a temporary directory, migrates its database, creates
    /// the superuser, and serves it with Django's own server.
    pub fn start(python: &Path) -> Result<TinyMceNotes> {
        let dir = tempfile::tempdir()?;
        let manage = || {
            let mut command = Command::new(python);
            command.arg(dir.path().join("manage.py")).current_dir(dir.path());
            command
        };
        run(Command::new(python).args(["-m", "django", "startproject", "lamplog"]).arg(dir.path()))
            .context("django is not installed")?;
        run(manage().args(["startapp", "notes"]))?;
        std::fs::write(dir.path().join("notes/models.py"), MODELS)?;
        std::fs::write(dir.path().join("notes/admin.py"), ADMIN)?;
        std::fs::write(dir.path().join("lamplog/urls.py"), URLS)?;
        let settings = dir.path().join("lamplog/settings.py");
        let text = std::fs::read_to_string(&settings)? + SETTINGS;
        std::fs::write(&settings, text)?;
        run(manage().args(["makemigrations", "notes", "--verbosity", "0"]))
            .context("django-tinymce is not installed")?;
        run(manage().args(["migrate", "--verbosity", "0"]))?;
        run(manage()
            .args(["createsuperuser", "--noinput", "--username", USER, "--email", "admin@example.test"])
            .env("DJANGO_SUPERUSER_PASSWORD", PASSWORD))?;
        let port = free_port()?;
        let address = format!("127.0.0.1:{port}");
        let server = Server::start(manage().args(["runserver", "--noreload", "--nothreading", &address]), port, dir)?;
        Ok(TinyMceNotes { server })
    }

    /// Records the demonstration: the task starts at the new note's form, which sends the person to log in
    /// first; the title typed; a click into the editor's written iframe, a pause, the body typed there a key
    /// at a time; Save; and the list of notes, which shows the body's text. Returns the finished bundle.
    pub async fn record(&self, build: &Build, data_dir: &Path) -> Result<PathBuf> {
        let browser = RecordingBrowser::launch(build, data_dir, true).await?;
        let (popup, page) = start_task(&browser, DESCRIPTION, &self.server.url("/admin/notes/note/add/")).await?;
        wait_for_url(&page, "/admin/login/").await?;
        type_into(&page, "#id_username", USER).await?;
        type_into(&page, "#id_password", PASSWORD).await?;
        click_and_wait(&page, "input[type=submit]").await?;
        wait_for_url(&page, "/admin/notes/note/add/").await?;
        // The editor is ready once TinyMCE has written its frame's document.
        let deadline = std::time::Instant::now() + WAIT;
        let ready = "document.querySelector('iframe#id_body_ifr')?.contentDocument?.body?.id === 'tinymce'";
        // (The page may still be replacing the login's document: an answer that never came is not yet.)
        while !page.evaluate(ready).await.ok().and_then(|done| done.into_value::<bool>().ok()).unwrap_or(false) {
            anyhow::ensure!(std::time::Instant::now() < deadline, "TinyMCE never wrote its frame");
            tokio::time::sleep(Duration::from_millis(100)).await;
        }
        settle().await;
        type_into(&page, "#id_title", TITLE).await?;
        pause(1000).await;
        click_in_frame(&page, "iframe#id_body_ifr", 40.0, 30.0).await?;
        pause(1000).await;
        type_keys(&page, BODY).await?;
        pause(1500).await;
        click_and_wait(&page, "input[name=_save]").await?;
        wait_for_text(&page, "#result_list", WAIT, |text| text.contains(BODY)).await?;
        settle().await;
        stop_task(&popup, browser, data_dir).await
    }
}
