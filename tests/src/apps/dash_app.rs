//! An application built on Dash (PyPI `dash`, Plotly's): a single-page application (React) over a JSON
//! API. The page loads the layout (`/_dash-layout`) and the callbacks (`/_dash-dependencies`) as JSON,
//! calls every callback once as it starts, and from then on each callback is a `POST
//! /_dash-update-component` carrying the inputs and state as JSON, answered with the new properties as
//! JSON. A real application whose state changes are JSON, whose start page sends the same request
//! the person's action sends later, which the demo shop only imitates.

use std::path::{Path, PathBuf};
use std::process::Command;
use std::time::Duration;

use anyhow::Result;

use super::{Server, free_port};
use crate::browser::{Build, RecordingBrowser, click, settle, type_into, wait_for_text};
use crate::demo::{start_task, stop_task};

pub const DESCRIPTION: &str = "Order a lantern for Ada";
/// The name the demonstration types.
pub const NAME: &str = "Ada";
/// What the application answers, which the re-run must show.
pub const RECEIPT: &str = "Order 1 placed: one lantern for Ada.";

const WAIT: Duration = Duration::from_secs(20);

/// The application: a heading, a name, a button, and the receipt the server's callback writes.
const APP: &str = r#"
import sys
from dash import Dash, html, dcc, Input, Output, State

app = Dash(__name__)
app.layout = html.Main([
    html.H1("Lantern orders"),
    html.Label("Your name", htmlFor="name"),
    dcc.Input(id="name", type="text", value=""),
    html.Button("Order a lantern", id="order", n_clicks=0),
    html.P(id="receipt"),
])

@app.callback(Output("receipt", "children"), Input("order", "n_clicks"), State("name", "value"))
def order(clicks, name):
    if not clicks:
        return "No lantern ordered yet."
    return f"Order {clicks} placed: one lantern for {name}."

app.run(host="127.0.0.1", port=int(sys.argv[1]), debug=False)
"#;

/// A running Dash application.
pub struct DashApp {
    pub server: Server,
}

impl DashApp {
    /// Writes the application into a temporary directory and serves it.
    pub fn start(python: &Path) -> Result<DashApp> {
        let dir = tempfile::tempdir()?;
        let script = dir.path().join("orders.py");
        std::fs::write(&script, APP)?;
        let port = free_port()?;
        let server = Server::start(Command::new(python).arg(&script).arg(port.to_string()), port, dir)?;
        Ok(DashApp { server })
    }

    /// Records the demonstration: the application's page, the name typed, the order button, and the
    /// receipt the server's callback sent back. Returns the finished bundle.
    pub async fn record(&self, build: &Build, data_dir: &Path) -> Result<PathBuf> {
        let browser = RecordingBrowser::launch(build, data_dir, true).await?;
        let (popup, page) = start_task(&browser, DESCRIPTION, &self.server.url("/")).await?;
        wait_for_text(&page, "#receipt", WAIT, |text| text.contains("No lantern")).await?;
        settle().await;
        type_into(&page, "#name", NAME).await?;
        settle().await;
        click(&page, "#order").await?;
        wait_for_text(&page, "#receipt", WAIT, |text| text.contains(RECEIPT)).await?;
        settle().await;
        stop_task(&popup, browser, data_dir).await
    }
}
