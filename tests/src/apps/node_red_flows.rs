//! Node-RED (npm `node-red`), the flow editor, in a user directory of its own: a canvas editor built by
//! drag and drop. Nodes are dragged from a palette (jQuery UI's draggable, which moves a temporary copy
//! under the pointer) onto an SVG canvas, and a wire is drawn by dragging from one node's output port to
//! another's input port. Deploy is an HTTP `POST /flows`, after which the server pushes notifications over
//! its `/comms` WebSocket; pressing an inject node's button is a `POST /inject/<id>`, whose result comes
//! back over the socket as a debug message. The editor also asks one URL twice (`/nodes`, for JSON and for
//! HTML, told apart only by `Accept`) and saves the user's settings by itself on its first load.

use std::path::{Path, PathBuf};
use std::process::Command;
use std::time::Duration;

use anyhow::{Context, Result, ensure};

use super::lighthouse_stores::node_modules;
use super::person::{drag, middle_of, pause, widen_window};
use super::{Server, free_port};
use crate::browser::{Build, RecordingBrowser, click, wait_for_text};
use crate::demo::{start_task, stop_task};

pub const DESCRIPTION: &str = "Wire an inject node to a debug node, deploy, and inject once";
/// The palette's node types the demonstration drags onto the canvas, in order, and where it drops each:
/// as shares of the canvas's visible width and height (the window may be small).
pub const DROPS: &[(&str, (f64, f64))] = &[("inject", (0.2, 0.3)), ("debug", (0.7, 0.3))];
/// What the editor says once the flow is deployed.
pub const DEPLOYED: &str = "Successfully deployed";
/// What the debug sidebar shows for the injected message.
pub const DEBUG_OUTPUT: &str = "msg.payload : number";

const WAIT: Duration = Duration::from_secs(30);

/// The editor's settings: on 127.0.0.1, and nothing asked of another site (no telemetry or update check,
/// no palette catalogue, no module installed on demand, no tour, no diagnostics).
const SETTINGS: &str = r#"
module.exports = {
    uiHost: "127.0.0.1",
    uiPort: Number(process.env.PORT),
    flowFile: "flows.json",
    credentialSecret: "trace-test",
    diagnostics: { enabled: false, ui: false },
    runtimeState: { enabled: false, ui: false },
    telemetry: { enabled: false, updateNotification: false },
    logging: { console: { level: "info", metrics: false, audit: false } },
    editorTheme: { tours: false, projects: { enabled: false } },
    functionExternalModules: false,
    externalModules: { autoInstall: false, palette: { allowInstall: false } },
};
"#;

/// A running Node-RED.
pub struct NodeRedFlows {
    pub server: Server,
}

impl NodeRedFlows {
    /// Runs Node-RED from `target/node-apps` under Node, with a fresh user directory (its flows and user
    /// settings are kept there) in a temporary directory.
    pub fn start() -> Result<NodeRedFlows> {
        let red = node_modules().join("node-red/red.js");
        ensure!(
            red.exists(),
            "node-red is not installed in {} (`bash .ci/install` installs it)",
            node_modules().display()
        );
        let dir = tempfile::tempdir()?;
        let user = dir.path().join("user");
        std::fs::create_dir(&user)?;
        let settings = user.join("settings.js");
        std::fs::write(&settings, SETTINGS)?;
        let port = free_port()?;
        let mut command = Command::new("node");
        command.arg(&red).arg("--settings").arg(&settings).arg("--userDir").arg(&user).env("PORT", port.to_string());
        let server = Server::start(&mut command, port, dir)?;
        Ok(NodeRedFlows { server })
    }

    /// Records the demonstration: the editor, its window widened; an inject node and a debug node dragged
    /// from the palette onto the canvas, each with the mouse held down through several moves; a wire dragged
    /// from the inject node's output to the debug node's input; Deploy; the debug sidebar opened; the inject
    /// node's button pressed; and the debug message shown. Returns the finished bundle.
    pub async fn record(&self, build: &Build, data_dir: &Path) -> Result<PathBuf> {
        let browser = RecordingBrowser::launch(build, data_dir, true).await?;
        let (popup, page) = start_task(&browser, DESCRIPTION, &self.server.url("/")).await?;
        widen_window(&page).await?;
        let palette = |kind: &str| format!(".red-ui-palette-node[data-palette-type='{kind}']");
        wait_for_text(&page, &palette("debug"), WAIT, |_| true).await?;
        // The editor is ready once it has opened its first flow's tab.
        let deadline = std::time::Instant::now() + WAIT;
        while !page.url().await?.unwrap_or_default().contains("#flow/") {
            ensure!(std::time::Instant::now() < deadline, "the editor never opened a flow");
            tokio::time::sleep(Duration::from_millis(100)).await;
        }
        pause(1500).await;
        let chart = page.find_element("#red-ui-workspace-chart").await?.bounding_box().await?;
        let nodes = "#red-ui-workspace-chart g.red-ui-flow-node";
        for (dropped, (kind, (x, y))) in DROPS.iter().enumerate() {
            let from = middle_of(&page, &palette(kind)).await?;
            let to = (chart.x + chart.width * x, chart.y + chart.height * y);
            drag(&page, from, to, 12).await?;
            pause(1000).await;
            let placed: usize =
                page.evaluate(format!("document.querySelectorAll({nodes:?}).length")).await?.into_value()?;
            ensure!(
                placed == dropped + 1,
                "{placed} nodes on the canvas after dragging {kind} from {from:?} to {to:?}"
            );
        }
        let output = middle_of(&page, "#red-ui-workspace-chart .red-ui-flow-port-output").await?;
        let input = middle_of(&page, "#red-ui-workspace-chart .red-ui-flow-port-input").await?;
        drag(&page, output, input, 10).await?;
        pause(1000).await;
        let wires = "#red-ui-workspace-chart path.red-ui-flow-link-line";
        let wired: usize = page.evaluate(format!("document.querySelectorAll({wires:?}).length")).await?.into_value()?;
        ensure!(wired == 1, "{wired} wires on the canvas after drawing one");
        click(&page, "#red-ui-header-button-deploy").await?;
        wait_for_text(&page, "#red-ui-notifications", WAIT, |text| text.contains(DEPLOYED)).await?;
        pause(1500).await;
        click(&page, "#red-ui-tab-debug-link-button").await?;
        pause(1000).await;
        click(&page, "#red-ui-workspace-chart .red-ui-flow-node-button rect").await.context("no inject button")?;
        wait_for_text(&page, ".red-ui-debug-content", WAIT, |text| text.contains(DEBUG_OUTPUT)).await?;
        pause(1500).await;
        stop_task(&popup, browser, data_dir).await
    }
}
