//! JupyterLab (PyPI `jupyterlab`) serving a directory with one notebook: a single-page application whose
//! kernel speaks over a WebSocket that the page opens with an id of its own making in its URL
//! (`/api/kernels/<kernel>/channels?session_id=<made in the page>`), and whose every message carries a
//! `msg_id` the page made, which the kernel's replies echo in their `parent_header`. Saving is a `PUT` of
//! the whole notebook (the output the kernel sent included), whose body `fetch` sends as a stream.

use std::path::{Path, PathBuf};
use std::process::Command;
use std::time::Duration;

use anyhow::Result;
use chromiumoxide::Page;

use super::{Server, free_port};
use crate::browser::{
    Build, RecordingBrowser, click, control_key, settle, shift_enter, type_into, wait_for_text, wait_until_gone,
};
use crate::demo::{start_task, stop_task, wait_for_url};

pub const DESCRIPTION: &str = "Work out six times seven in the lantern notebook and save it";
/// The code typed into the notebook's cell.
pub const CODE: &str = "print(6*7)";
/// What the kernel prints for [`CODE`], which the re-run must show.
pub const OUTPUT: &str = "42";
/// The notebook's name once the person renamed it (without its extension).
pub const RENAMED: &str = "answer";

const WAIT: Duration = Duration::from_secs(30);

/// The notebook the server starts with: one empty code cell, with the cell id nbformat 4.5 wants (without
/// one, the page makes its own at every load).
const NOTEBOOK: &str = r#"{
 "cells": [
  {"cell_type": "code", "execution_count": null, "id": "5f1c2a7e", "metadata": {}, "outputs": [], "source": []}
 ],
 "metadata": {
  "kernelspec": {"display_name": "Python 3", "language": "python", "name": "python3"},
  "language_info": {"name": "python"}
 },
 "nbformat": 4,
 "nbformat_minor": 5
}
"#;

/// A running JupyterLab.
pub struct JupyterLab {
    pub server: Server,
}

impl JupyterLab {
    /// Writes the notebook into a temporary directory and serves it, without a token (the server binds to
    /// 127.0.0.1), with Jupyter's configuration, data and runtime directories of its own there, and
    /// without the announcements, update checks and extension listings that would reach for the network
    /// (`--allow-root` only lifts a refusal to run as root).
    pub fn start(python: &Path) -> Result<JupyterLab> {
        let dir = tempfile::tempdir()?;
        let notebooks = dir.path().join("notebooks");
        std::fs::create_dir(&notebooks)?;
        std::fs::write(notebooks.join("lantern.ipynb"), NOTEBOOK)?;
        // A person who uses JupyterLab has answered its first-visit question about fetching news; a fresh
        // profile would show it in a message box on every page, beside the demonstration.
        let settings = dir.path().join("config/lab/user-settings/@jupyterlab/apputils-extension");
        std::fs::create_dir_all(&settings)?;
        std::fs::write(settings.join("notification.jupyterlab-settings"), r#"{"fetchNews": "false"}"#)?;
        let port = free_port()?;
        let mut command = Command::new(python);
        command
            .args(["-m", "jupyter", "lab", "--no-browser", "--allow-root", "--ip=127.0.0.1"])
            .arg(format!("--port={port}"))
            .args(["--port-retries=0", "--IdentityProvider.token=", "--ServerApp.password="])
            .args(["--LabApp.news_url=", "--LabApp.check_for_updates_class=jupyterlab.NeverCheckForUpdate"])
            .arg("--LabApp.extension_manager=readonly")
            .arg(format!("--ServerApp.root_dir={}", notebooks.display()));
        for (variable, name) in [
            ("JUPYTER_CONFIG_DIR", "config"),
            ("JUPYTER_DATA_DIR", "data"),
            ("JUPYTER_RUNTIME_DIR", "runtime"),
            ("IPYTHONDIR", "ipython"),
        ] {
            command.env(variable, dir.path().join(name));
        }
        let server = Server::start(&mut command, port, dir)?;
        Ok(JupyterLab { server })
    }

    /// Records the demonstration: the notebook opened, [`CODE`] typed into its cell and run (Shift+Enter),
    /// [`OUTPUT`] shown, the notebook saved (Control+S), and renamed [`RENAMED`] from the File menu.
    /// Returns the finished bundle.
    pub async fn record(&self, build: &Build, data_dir: &Path) -> Result<PathBuf> {
        let browser = RecordingBrowser::launch(build, data_dir, true).await?;
        let (popup, page) = start_task(&browser, DESCRIPTION, &self.server.url("/lab/tree/lantern.ipynb")).await?;
        kernel_idle(&page).await?;
        settle().await;
        type_into(&page, ".jp-Cell .cm-content", CODE).await?;
        shift_enter(&page).await?;
        wait_for_text(&page, ".jp-OutputArea-output", WAIT, |text| text.trim() == OUTPUT).await?;
        settle().await;
        control_key(&page, "s").await?;
        wait_for_text(&page, ".jp-Notebook", WAIT, |text| text.contains(OUTPUT)).await?;
        kernel_idle(&page).await?;
        settle().await;
        // File > Rename Notebook…: Lumino's menu acts on the button's release. The dialog selects the name
        // but its extension, which the person types over.
        click(&page, "li.lm-MenuBar-item").await?;
        settle().await;
        click(&page, ".lm-Menu-item[data-command='docmanager:rename']").await?;
        wait_for_text(&page, ".jp-Dialog", WAIT, |text| text.contains("New Name")).await?;
        settle().await;
        page.find_element(".jp-Dialog input").await?.type_str(RENAMED).await?;
        settle().await;
        click(&page, ".jp-Dialog .jp-mod-accept").await?;
        wait_for_url(&page, &format!("/lab/tree/{RENAMED}.ipynb")).await?;
        kernel_idle(&page).await?;
        // A person stops once the page has come to rest: the dialog gone and the status bar's "Saving
        // completed" cleared (two seconds after the save), not in the instant the dialog is fading out.
        wait_until_gone(&page, ".jp-Dialog", WAIT).await?;
        wait_for_text(&page, "#jp-main-statusbar", WAIT, |text| !text.contains("Saving")).await?;
        settle().await;
        stop_task(&popup, browser, data_dir).await
    }
}

/// Waits until the notebook's toolbar says its kernel is idle (started, or done with what it ran).
async fn kernel_idle(page: &Page) -> Result<()> {
    wait_for_text(page, ".jp-Notebook-ExecutionIndicator[data-status='idle']", WAIT, |_| true).await?;
    Ok(())
}
