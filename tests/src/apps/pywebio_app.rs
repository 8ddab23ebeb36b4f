//! An application built on PyWebIO (PyPI `pywebio`, served by its Tornado back end), whose whole
//! conversation runs over one WebSocket: the page loads a fixed shell, opens the socket, and the server
//! sends every form and every result down it as JSON messages; the person's answers go back up it. Nothing
//! after the shell is an HTTP request, so an offline replay has to record and play the socket itself.

use std::path::{Path, PathBuf};
use std::process::Command;
use std::time::Duration;

use anyhow::Result;

use super::{Server, free_port};
use crate::browser::{Build, RecordingBrowser, click, settle, type_into, wait_for_text};
use crate::demo::{start_task, stop_task};

pub const DESCRIPTION: &str = "Work out the fuel for twelve hours of light";
/// What the demonstration types into the form the server sends.
pub const HOURS: &str = "12";
/// What the server answers for [`HOURS`], which the re-run must show.
pub const ANSWER: &str = "Twelve hours of light need 2 fillings of oil.";

const WAIT: Duration = Duration::from_secs(20);

/// The application: a heading, a form asking for hours, and the answer computed on the server. Static
/// files are served by the application itself (`cdn=False`): the machines that run it are offline.
const APP: &str = r#"
import sys
from pywebio import start_server
from pywebio.input import input, NUMBER
from pywebio.output import put_markdown, put_text

WORDS = {6: 'Six', 12: 'Twelve', 18: 'Eighteen'}

def fuel():
    put_markdown('# Lantern fuel')
    hours = input('How many hours of light?', type=NUMBER)
    fillings = -(-hours // 6)
    put_text(f'{WORDS.get(hours, hours)} hours of light need {fillings} fillings of oil.')

start_server(fuel, port=int(sys.argv[1]), host='127.0.0.1', cdn=False, auto_open_webbrowser=False)
"#;

/// A running PyWebIO application.
pub struct PyWebIoApp {
    pub server: Server,
}

impl PyWebIoApp {
    /// Writes the application into a temporary directory and serves it.
    pub fn start(python: &Path) -> Result<PyWebIoApp> {
        let dir = tempfile::tempdir()?;
        let script = dir.path().join("fuel.py");
        std::fs::write(&script, APP)?;
        let port = free_port()?;
        let server = Server::start(Command::new(python).arg(&script).arg(port.to_string()), port, dir)?;
        Ok(PyWebIoApp { server })
    }

    /// Records the demonstration: the application's page, the hours typed into the form the server sent,
    /// Submit, and the answer the server sent back. Returns the finished bundle.
    pub async fn record(&self, build: &Build, data_dir: &Path) -> Result<PathBuf> {
        let browser = RecordingBrowser::launch(build, data_dir, true).await?;
        let (popup, page) = start_task(&browser, DESCRIPTION, &self.server.url("/")).await?;
        wait_for_text(&page, "body", WAIT, |text| text.contains("How many hours")).await?;
        settle().await;
        type_into(&page, "form input[name=data]", HOURS).await?;
        click(&page, "form button[type=submit]").await?;
        wait_for_text(&page, "body", WAIT, |text| text.contains(ANSWER)).await?;
        settle().await;
        stop_task(&popup, browser, data_dir).await
    }
}
