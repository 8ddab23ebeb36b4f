//! An application over Socket.IO (npm `socket.io`, the Node server, which serves its own browser client):
//! the page connects with Engine.IO's default transports, long-polling first (a handshake that gives the
//! page a session id, then polls that carry it) and then the upgrade to a WebSocket whose URL carries the
//! session id the polling learnt, with a probe exchanged on it before the polls stop. The order and its
//! confirmation are events on the socket; nothing after the handshake is a page of its own.

use std::path::{Path, PathBuf};
use std::process::Command;
use std::time::Duration;

use anyhow::{Result, ensure};

use super::{Server, free_port};
use crate::browser::{Build, RecordingBrowser, click, settle, type_into, wait_for_text};
use crate::demo::{start_task, stop_task};

/// Where `.ci/install` puts `socket.io` (`npm install --prefix`), under `target/`.
pub const NODE_PREFIX: &str = "socketio-node";

pub const DESCRIPTION: &str = "Order three wicks for the lighthouse";
/// What the demonstration types into the order form.
pub const ITEM: &str = "three wicks";
/// What the server sends back for [`ITEM`], which the re-run must show.
pub const CONFIRMATION: &str = "Order 1 confirmed: three wicks";

const WAIT: Duration = Duration::from_secs(20);

/// The server: the page, and a Socket.IO endpoint that greets each connection and confirms each order
/// with a number of its own.
const SERVER: &str = r#"
const http = require("http");
const { Server } = require("socket.io");

const PAGE = `<!doctype html>
<html><head><meta charset="utf-8"><title>Lighthouse stores</title></head>
<body>
<h1>Lighthouse stores</h1>
<p id="status">Connecting...</p>
<form id="order"><input id="item" name="item" placeholder="What do you need?"><button>Order</button></form>
<ul id="orders"></ul>
<script src="/socket.io/socket.io.js"></script>
<script>
  const socket = io();
  socket.on("welcome", (text) => { document.getElementById("status").textContent = text; });
  socket.on("confirmed", (text) => {
    const item = document.createElement("li");
    item.textContent = text;
    document.getElementById("orders").append(item);
  });
  document.getElementById("order").addEventListener("submit", (event) => {
    event.preventDefault();
    const field = document.getElementById("item");
    socket.emit("order", { item: field.value });
    field.value = "";
  });
</script>
</body></html>`;

const server = http.createServer((request, response) => {
  if (request.url === "/") {
    response.writeHead(200, { "content-type": "text/html; charset=utf-8" });
    response.end(PAGE);
  } else {
    response.writeHead(404);
    response.end();
  }
});
const io = new Server(server);
let orders = 0;
io.on("connection", (socket) => {
  socket.emit("welcome", "Connected to the lighthouse stores");
  socket.on("order", ({ item }) => {
    orders += 1;
    socket.emit("confirmed", `Order ${orders} confirmed: ${item}`);
  });
});
server.listen(Number(process.argv[2]), "127.0.0.1");
"#;

/// A running Socket.IO application.
pub struct SocketIoApp {
    pub server: Server,
}

impl SocketIoApp {
    /// Writes the server into a temporary directory and runs it under Node, with `socket.io` from
    /// `target/socketio-node`.
    pub fn start() -> Result<SocketIoApp> {
        let modules = node_modules();
        ensure!(
            modules.join("socket.io/package.json").exists(),
            "socket.io is not installed in {} (`bash .ci/install` installs it)",
            modules.display()
        );
        let dir = tempfile::tempdir()?;
        let script = dir.path().join("stores.js");
        std::fs::write(&script, SERVER)?;
        let port = free_port()?;
        let mut command = Command::new("node");
        command.arg(&script).arg(port.to_string()).env("NODE_PATH", &modules);
        let server = Server::start(&mut command, port, dir)?;
        Ok(SocketIoApp { server })
    }

    /// Records the demonstration: the page, connected (the server's welcome shown), [`ITEM`] typed and
    /// ordered, and the server's confirmation shown. Returns the finished bundle.
    pub async fn record(&self, build: &Build, data_dir: &Path) -> Result<PathBuf> {
        let browser = RecordingBrowser::launch(build, data_dir, true).await?;
        let (popup, page) = start_task(&browser, DESCRIPTION, &self.server.url("/")).await?;
        wait_for_text(&page, "#status", WAIT, |text| text.starts_with("Connected")).await?;
        // Long enough for the upgrade to the WebSocket to finish, as it does while a person reads.
        tokio::time::sleep(Duration::from_secs(1)).await;
        type_into(&page, "#item", ITEM).await?;
        click(&page, "#order button").await?;
        wait_for_text(&page, "#orders", WAIT, |text| text.contains(CONFIRMATION)).await?;
        settle().await;
        stop_task(&popup, browser, data_dir).await
    }
}

/// `target/socketio-node/node_modules`.
pub fn node_modules() -> PathBuf {
    Path::new(env!("CARGO_MANIFEST_DIR")).join("../target").join(NODE_PREFIX).join("node_modules")
}
