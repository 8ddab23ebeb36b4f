//! An application built on NiceGUI (PyPI `nicegui`): a user interface the server drives over one socket
//! (Socket.IO straight over a WebSocket, Vue and Quasar in the page, every asset served by the application
//! itself). Each change of a control goes up the socket as an event and each new state comes down as an
//! update. Its slider is throttled: a run of arrow keys sends the first value at once and the last one
//! 50 ms later, while its button sends at once, so a click made before the slider's last value has gone
//! computes with an older one, and the replies arrive in the order the page sent.

use std::path::{Path, PathBuf};
use std::process::Command;
use std::time::Duration;

use anyhow::Result;

use super::person::{pause, press_times};
use super::{Server, free_port};
use crate::browser::{Build, RecordingBrowser, click, settle, wait_for_text};
use crate::demo::{start_task, stop_task};

pub const DESCRIPTION: &str = "Compute six times seven with the slider";
/// How many times the demonstration presses the right arrow on the slider, from its start at 3.
pub const PRESSES: usize = 3;
/// What the button's computation shows for the slider at 6, which the re-run must show.
pub const SUMMARY: &str = "6 x 7 = 42";

const WAIT: Duration = Duration::from_secs(30);
/// How long the person waits for the page to draw before reloading it.
const FIRST_DRAW: Duration = Duration::from_secs(20);

/// The application: a heading, a slider from 0 to 10 at 3, a button, and the summary the server writes
/// when the button is pressed. Run as `python app.py PORT` from its own directory (NiceGUI keeps its
/// storage in `.nicegui/` there); bound to 127.0.0.1, opening no browser, watching no files.
const APP: &str = r#"
import sys
from nicegui import ui

@ui.page("/")
def index():
    ui.label("Lantern times table").classes("text-h5")
    slider = ui.slider(min=0, max=10, step=1, value=3).props("label-always data-testid=slider").classes("w-64 q-mt-xl")
    summary = ui.label("").props("data-testid=summary")
    ui.button("Compute", on_click=lambda: summary.set_text(f"{slider.value} x 7 = {slider.value * 7}")).props("data-testid=compute")

ui.run(host="127.0.0.1", port=int(sys.argv[1]), show=False, reload=False, show_welcome_message=False,
       title="Lantern times table")
"#;

/// A running NiceGUI application.
pub struct NiceGuiSlider {
    pub server: Server,
}

impl NiceGuiSlider {
    /// Writes the application into a temporary directory and serves it from there.
    pub fn start(python: &Path) -> Result<NiceGuiSlider> {
        let dir = tempfile::tempdir()?;
        let script = dir.path().join("app.py");
        std::fs::write(&script, APP)?;
        let port = free_port()?;
        let mut command = Command::new(python);
        command.arg(&script).arg(port.to_string()).current_dir(dir.path());
        let server = Server::start(&mut command, port, dir)?;
        Ok(NiceGuiSlider { server })
    }

    /// Records the demonstration: the page, connected; the slider's handle clicked where it stands (which
    /// moves nothing but gives the slider the keyboard), the right arrow pressed [`PRESSES`] times at a
    /// hand's pace, a pause of a person checking the value, Compute, and the summary the server wrote.
    /// Returns the finished bundle.
    pub async fn record(&self, build: &Build, data_dir: &Path) -> Result<PathBuf> {
        let browser = RecordingBrowser::launch(build, data_dir, true).await?;
        let (popup, page) = start_task(&browser, DESCRIPTION, &self.server.url("/")).await?;
        let slider = "[data-testid=slider]";
        // A person facing a page that has not drawn reloads it. Seen once, in a fresh-clone CI run under
        // load: the recorded page had not drawn its slider after 30 s (its cause not read down); it always
        // drew within seconds in every other run.
        if wait_for_text(&page, slider, FIRST_DRAW, |text| text.trim() == "3").await.is_err() {
            eprintln!("NiceGUI's page has not drawn its slider in {FIRST_DRAW:?}: reloading it, as a person would");
            page.reload().await?;
            wait_for_text(&page, slider, WAIT, |text| text.trim() == "3").await?;
        }
        settle().await;
        click(&page, &format!("{slider} .q-slider__thumb")).await?;
        pause(600).await;
        press_times(&page, "ArrowRight", PRESSES).await?;
        wait_for_text(&page, slider, WAIT, |text| text.trim() == "6").await?;
        pause(1400).await;
        click(&page, "[data-testid=compute]").await?;
        wait_for_text(&page, "[data-testid=summary]", WAIT, |text| text.contains(SUMMARY)).await?;
        pause(1500).await;
        stop_task(&popup, browser, data_dir).await
    }
}
