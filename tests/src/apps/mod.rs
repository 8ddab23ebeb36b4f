//! Real web applications that nobody on this team wrote, installed from the package registries, for the
//! end-to-end tests to record through the extension and replay offline: what real sites do (redirect to a
//! login, rotate CSRF tokens, reuse one URL for different states, fill pages from script) is what the
//! demo shop only imitates.
//!
//! Each application runs from a fresh temporary directory on a free port of 127.0.0.1 and is stopped (and
//! its directory removed) when dropped. Python applications run from the virtual environment that
//! `.ci/install` makes (`target/apps-venv`, pinned by `tests/apps/requirements.txt`); `TRACE_APPS_PYTHON`
//! names another interpreter. Without one, a test says so in a line and skips, unless
//! `TRACE_E2E_REQUIRED` is set, which makes it fail.
//!
//! # Layout
//! - [`django_admin`]: Django's admin site (login with CSRF, a dashboard that redirects before the login,
//!   a form whose widget is built by script), and the demonstration recorded on it.
//! - [`datasette`]: Datasette on a database of its own (a CodeMirror SQL editor, a query run by a form),
//!   and the demonstration recorded on it.
//! - [`sphinx_docs`]: a Sphinx documentation site (client-side search whose results appear on a timer),
//!   and the demonstration recorded on it.
//! - [`pywebio_app`]: a PyWebIO application (every form and result over one WebSocket), and the
//!   demonstration recorded on it.
//! - [`trac_tickets`]: Trac, the issue tracker (a form with a token tied to a cookie, a redirect to the
//!   ticket made, a site frame on every page), and the demonstration recorded on it.
//! - [`dash_app`]: a Dash application (Plotly's, React in the page), a single-page application over a
//!   JSON API, and the demonstration recorded on it.
//! - [`lighthouse_stores`]: an ordering application under Node over Socket.IO (long-polling, then the
//!   upgrade to a WebSocket) or SockJS (ids made in the page in the socket's URL), from npm, and the
//!   demonstration recorded on it.
//! - [`jupyter_lab`]: JupyterLab (a notebook whose kernel speaks over a WebSocket with ids the page makes),
//!   and the demonstration recorded on it.
//! - [`rustdoc_search`]: a crate's documentation made by rustdoc (a search box whose code and index load
//!   only once it is opened), and the demonstration recorded on it.
//! - [`docsify_handbook`]: a docsify site (a single-page application whose routes are URL fragments, its
//!   pages' Markdown fetched by script), from npm, and the demonstration recorded on it.
//! - [`nicegui_slider`]: a NiceGUI application (a server-driven interface over one socket, a throttled
//!   slider and a button that sends at once), and the demonstration recorded on it.
//! - [`wagtail_pages`]: Wagtail, the content management system (an editor that saves by itself and then
//!   moves to the new page's edit URL), and the demonstration recorded on it.
//! - [`node_red_flows`]: Node-RED, the flow editor (nodes dragged from a palette onto an SVG canvas and
//!   wired by dragging, a deploy over HTTP whose notifications the server pushes over a socket), from npm,
//!   and the demonstration recorded on it.
//! - [`tinymce_notes`]: Django's admin with a rich-text field in TinyMCE (an editor in an iframe the page
//!   writes itself), and the demonstration recorded on it.
//! - [`person`]: how the demonstrations act at a person's pace: pauses, keys a hand presses, drags.

pub mod dash_app;
pub mod datasette;
pub mod django_admin;
pub mod docsify_handbook;
pub mod jupyter_lab;
pub mod lighthouse_stores;
pub mod nicegui_slider;
pub mod node_red_flows;
pub mod person;
pub mod pywebio_app;
pub mod rustdoc_search;
pub mod sphinx_docs;
pub mod tinymce_notes;
pub mod trac_tickets;
pub mod wagtail_pages;

use std::net::{TcpListener, TcpStream};
use std::path::{Path, PathBuf};
use std::process::{Child, Command, Stdio};
use std::time::{Duration, Instant};

use anyhow::{Context, Result, bail, ensure};

use crate::browser::REQUIRED_ENV;

/// Names the Python interpreter the applications run under, instead of `target/apps-venv`'s.
pub const PYTHON_ENV: &str = "TRACE_APPS_PYTHON";

/// Which Python environment an application runs from.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Environment {
    /// `target/apps-venv` (`tests/apps/requirements.txt`), or `TRACE_APPS_PYTHON`.
    Apps,
    /// `target/trac-venv` (`tests/apps/trac-requirements.txt`): Trac imports a module named `multipart`
    /// when one is installed, and the other applications bring `python-multipart`'s, which is another.
    Trac,
    /// `target/jupyter-venv` (`tests/apps/jupyter-requirements.txt`): JupyterLab's server pins its own
    /// Tornado and friends.
    Jupyter,
    /// `target/browsergym-venv`: BrowserGym and this repository's `browsergym-trace`, installed as its
    /// README says (`integrations/browsergym/constraints.txt`), for the harnesses that drive replayed tasks
    /// rather than applications.
    BrowserGym,
    /// `target/agentlab-venv`: AgentLab, Ray and `browsergym-trace`, installed as the README says, and
    /// `tests/agentlab/requirements.txt`.
    AgentLab,
}

/// The interpreter with the applications of `environment` installed.
pub fn python_of(environment: Environment) -> Result<PathBuf> {
    let venv = |name: &str| Path::new(env!("CARGO_MANIFEST_DIR")).join("../target").join(name).join("bin/python");
    let python = match environment {
        Environment::Apps => match std::env::var_os(PYTHON_ENV).filter(|value| !value.is_empty()) {
            Some(python) => PathBuf::from(python),
            None => venv("apps-venv"),
        },
        Environment::Trac => venv("trac-venv"),
        Environment::Jupyter => venv("jupyter-venv"),
        Environment::BrowserGym => venv("browsergym-venv"),
        Environment::AgentLab => venv("agentlab-venv"),
    };
    ensure!(
        python.exists(),
        "the tests' Python environment is not at {} (`bash .ci/install` makes it, or set {PYTHON_ENV})",
        python.display()
    );
    Ok(python)
}

/// The interpreter of [`Environment::Apps`].
pub fn python() -> Result<PathBuf> {
    python_of(Environment::Apps)
}

/// [`python`] for a test: `None`, said in one line, when it is missing, unless `TRACE_E2E_REQUIRED` is set,
/// which makes it fail.
pub fn python_for_tests(test: &str) -> Option<PathBuf> {
    python_of_for_tests(test, Environment::Apps)
}

/// [`python_of`] for a test, as [`python_for_tests`].
pub fn python_of_for_tests(test: &str, environment: Environment) -> Option<PathBuf> {
    match python_of(environment) {
        Ok(python) => Some(python),
        Err(error) if std::env::var_os(REQUIRED_ENV).is_some_and(|v| !v.is_empty()) => {
            panic!("{test}: {error:#} ({REQUIRED_ENV} is set)")
        }
        Err(error) => {
            eprintln!("skipped {test}: {error:#}");
            None
        }
    }
}

/// Runs a set-up command of an application to completion, failing with what it printed.
fn run(command: &mut Command) -> Result<()> {
    let output = command.output().with_context(|| format!("cannot run {command:?}"))?;
    if !output.status.success() {
        bail!(
            "{command:?} failed with {}: {}{}",
            output.status,
            String::from_utf8_lossy(&output.stdout),
            String::from_utf8_lossy(&output.stderr)
        );
    }
    Ok(())
}

/// A port of 127.0.0.1 that was free a moment ago.
fn free_port() -> Result<u16> {
    Ok(TcpListener::bind(("127.0.0.1", 0))?.local_addr()?.port())
}

/// An application's server process, on 127.0.0.1, and the temporary directory it runs from; killed when
/// stopped or dropped (the directory removed when dropped).
pub struct Server {
    child: Option<Child>,
    port: u16,
    log: PathBuf,
    _dir: tempfile::TempDir,
}

impl Server {
    /// Starts `command` (which must listen on `port`) and waits until it accepts connections; what it
    /// prints goes to `server.log` in `dir`, which the server keeps.
    fn start(command: &mut Command, port: u16, dir: tempfile::TempDir) -> Result<Server> {
        let log = dir.path().join("server.log");
        let output = std::fs::File::create(&log)?;
        let child = command
            .stdin(Stdio::null())
            .stdout(output.try_clone()?)
            .stderr(output)
            .spawn()
            .with_context(|| format!("cannot start {command:?}"))?;
        let mut server = Server { child: Some(child), port, log, _dir: dir };
        let deadline = Instant::now() + Duration::from_secs(60);
        while TcpStream::connect(("127.0.0.1", port)).is_err() {
            if let Some(status) = server.child.as_mut().and_then(|child| child.try_wait().ok().flatten()) {
                bail!("the server exited with {status}: {}", server.output());
            }
            if Instant::now() > deadline {
                bail!("the server did not listen on port {port} within a minute: {}", server.output());
            }
            std::thread::sleep(Duration::from_millis(100));
        }
        Ok(server)
    }

    /// Serves the files under `root` as static documentation is hosted, with Python's own HTTP server
    /// (`python -m http.server`); `dir` holds them and is kept with the server.
    pub(crate) fn static_files(
        python: impl AsRef<std::ffi::OsStr>,
        root: &Path,
        dir: tempfile::TempDir,
    ) -> Result<Server> {
        let port = free_port()?;
        Server::start(
            Command::new(python)
                .args(["-m", "http.server", "--bind", "127.0.0.1", "--directory"])
                .arg(root)
                .arg(port.to_string()),
            port,
            dir,
        )
    }

    pub fn port(&self) -> u16 {
        self.port
    }

    pub fn url(&self, path: &str) -> String {
        format!("http://127.0.0.1:{}{path}", self.port)
    }

    /// What the server printed so far.
    pub fn output(&self) -> String {
        std::fs::read_to_string(&self.log).unwrap_or_default()
    }

    /// Stops the server and waits for it to exit, so that its port is closed.
    pub fn stop(&mut self) {
        if let Some(mut child) = self.child.take() {
            let _ = child.kill();
            let _ = child.wait();
        }
    }
}

impl Drop for Server {
    fn drop(&mut self) {
        self.stop();
    }
}
