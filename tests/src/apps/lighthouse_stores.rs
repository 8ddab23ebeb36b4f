//! The lighthouse stores: one small ordering application, served by Node over either of the two socket
//! libraries real applications use where a WebSocket may be refused, each installed from npm and serving
//! its own browser client:
//! - Socket.IO (`socket.io`): Engine.IO long-polls first (a handshake that gives the page a session id,
//!   then polls that carry it), then upgrades to a WebSocket whose URL carries the session id the polling
//!   learnt, with a probe exchanged on it before the polls stop;
//! - SockJS (`sockjs`, and `sockjs-client` in the page): an `info` request (with a random `entropy`), then
//!   a WebSocket at `/<server>/<session>/websocket`, both ids made in the page with `Math.random()`.
//!
//! The order and its confirmation go over the socket; nothing after the page is a page of its own.

use std::path::{Path, PathBuf};
use std::process::Command;
use std::time::Duration;

use anyhow::{Result, ensure};

use super::{Server, free_port};
use crate::browser::{Build, RecordingBrowser, click, settle, type_into, wait_for_text};
use crate::demo::{start_task, stop_task};

/// Where `.ci/install` puts the Node applications' packages (`npm install` of `tests/apps/node/package.json`),
/// under `target/`.
pub const NODE_PREFIX: &str = "node-apps";

pub const DESCRIPTION: &str = "Order three wicks for the lighthouse";
/// What the demonstration types into the order form.
pub const ITEM: &str = "three wicks";
/// What the server sends back for [`ITEM`], which the re-run must show.
pub const CONFIRMATION: &str = "Order 1 confirmed: three wicks";

const WAIT: Duration = Duration::from_secs(20);

/// Which socket library the stores run over.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Transport {
    SocketIo,
    SockJs,
}

/// The server: the page (whose script differs by transport only in how it connects, sends and hears),
/// and an endpoint that greets each connection (the page enables its form then) and confirms each order
/// with a number of its own. (The greeting changes no text: the checkpoint rules see no state change in
/// an order sent over a socket, and would take a text the socket wrote after the page's first capture,
/// before the person acted, for the final state; the audit refuses such a checkpoint.)
const SERVER: &str = r##"
const http = require("http");
const fs = require("fs");
const path = require("path");
const transport = process.argv[3];

const CLIENT = transport === "socketio"
  ? `<script src="/socket.io/socket.io.js"></script>
     <script>
       const socket = io();
       socket.on("welcome", () => ready());
       socket.on("confirmed", (text) => listed(text));
       const order = (item) => socket.emit("order", { item });
     </script>`
  : `<script src="/sockjs.min.js"></script>
     <script>
       const socket = new SockJS("/stores");
       socket.onmessage = (event) => {
         const message = JSON.parse(event.data);
         if (message.welcome) ready(); else listed(message.confirmed);
       };
       const order = (item) => socket.send(JSON.stringify({ item }));
     </script>`;

const PAGE = `<!doctype html>
<html><head><meta charset="utf-8"><title>Lighthouse stores</title></head>
<body>
<h1>Lighthouse stores</h1>
<form id="order"><input id="item" name="item" placeholder="What do you need?"><button disabled>Order</button></form>
<ul id="orders"></ul>
<script>
  const ready = () => { document.querySelector("#order button").disabled = false; };
  const listed = (text) => {
    const item = document.createElement("li");
    item.textContent = text;
    document.getElementById("orders").append(item);
  };
</script>
${CLIENT}
<script>
  document.getElementById("order").addEventListener("submit", (event) => {
    event.preventDefault();
    const field = document.getElementById("item");
    order(field.value);
    field.value = "";
  });
</script>
</body></html>`;

const server = http.createServer((request, response) => {
  if (request.url === "/") {
    response.writeHead(200, { "content-type": "text/html; charset=utf-8" });
    response.end(PAGE);
  } else if (request.url === "/sockjs.min.js" && transport === "sockjs") {
    const client = path.join(path.dirname(require.resolve("sockjs-client/package.json")), "dist/sockjs.min.js");
    response.writeHead(200, { "content-type": "text/javascript" });
    response.end(fs.readFileSync(client));
  } else if (!request.url.startsWith("/socket.io/") && !request.url.startsWith("/stores")) {
    response.writeHead(404);
    response.end();
  }
});
let orders = 0;
const confirmation = (item) => `Order ${++orders} confirmed: ${item}`;
if (transport === "socketio") {
  const { Server } = require("socket.io");
  new Server(server).on("connection", (socket) => {
    socket.emit("welcome", "Connected to the lighthouse stores");
    socket.on("order", ({ item }) => socket.emit("confirmed", confirmation(item)));
  });
} else {
  const stores = require("sockjs").createServer({ log: () => {} });
  stores.on("connection", (connection) => {
    connection.write(JSON.stringify({ welcome: "Connected to the lighthouse stores" }));
    connection.on("data", (data) => connection.write(JSON.stringify({ confirmed: confirmation(JSON.parse(data).item) })));
  });
  stores.installHandlers(server, { prefix: "/stores" });
}
server.listen(Number(process.argv[2]), "127.0.0.1");
"##;

/// A running lighthouse stores application.
pub struct LighthouseStores {
    pub server: Server,
}

impl LighthouseStores {
    /// Writes the server into a temporary directory and runs it under Node over `transport`, with the
    /// packages of `target/node-apps`.
    pub fn start(transport: Transport) -> Result<LighthouseStores> {
        let modules = node_modules();
        let package = match transport {
            Transport::SocketIo => "socket.io",
            Transport::SockJs => "sockjs",
        };
        ensure!(
            modules.join(package).join("package.json").exists(),
            "{package} is not installed in {} (`bash .ci/install` installs it)",
            modules.display()
        );
        let dir = tempfile::tempdir()?;
        let script = dir.path().join("stores.js");
        std::fs::write(&script, SERVER)?;
        let port = free_port()?;
        let name = match transport {
            Transport::SocketIo => "socketio",
            Transport::SockJs => "sockjs",
        };
        let mut command = Command::new("node");
        command.arg(&script).arg(port.to_string()).arg(name).env("NODE_PATH", &modules);
        let server = Server::start(&mut command, port, dir)?;
        Ok(LighthouseStores { server })
    }

    /// Records the demonstration: the page, connected (the server's welcome enables the form), [`ITEM`] typed and
    /// ordered, and the server's confirmation shown. Returns the finished bundle.
    pub async fn record(&self, build: &Build, data_dir: &Path) -> Result<PathBuf> {
        let browser = RecordingBrowser::launch(build, data_dir, true).await?;
        let (popup, page) = start_task(&browser, DESCRIPTION, &self.server.url("/")).await?;
        wait_for_text(&page, "#order button:enabled", WAIT, |_| true).await?;
        // Long enough for an upgrade to the WebSocket to finish, as it does while a person reads.
        tokio::time::sleep(Duration::from_secs(1)).await;
        type_into(&page, "#item", ITEM).await?;
        click(&page, "#order button").await?;
        wait_for_text(&page, "#orders", WAIT, |text| text.contains(CONFIRMATION)).await?;
        settle().await;
        stop_task(&popup, browser, data_dir).await
    }
}

/// `target/node-apps/node_modules`.
pub fn node_modules() -> PathBuf {
    Path::new(env!("CARGO_MANIFEST_DIR")).join("../target").join(NODE_PREFIX).join("node_modules")
}
