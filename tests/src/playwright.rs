//! Playwright, for the benchmarks that measure TRACE against it: `playwright-core` installed with npm
//! (pinned, so that figures of different runs compare; no browser is ever downloaded: it drives Debian's
//! Chromium) and a Node script of the benchmark's, started with a JSON configuration and commanded over
//! JSON lines, one answer a line. The scripts' side of both is `benches/playwright.mjs`.

use std::io::{BufRead, BufReader, Write};
use std::path::{Path, PathBuf};
use std::process::{Child, ChildStdin, Command, Stdio};
use std::time::{Duration, Instant};

use anyhow::{Context, Result, ensure};
use serde_json::{Value, json};
use tokio::sync::mpsc;

/// The Playwright measured against.
pub const PLAYWRIGHT_CORE: &str = "1.65.1";

/// `playwright-core` at [`PLAYWRIGHT_CORE`] in `prefix/node_modules`, installed there if it is not.
/// `prefix` is under `target/`, outside the sources.
pub fn install(prefix: &Path) -> Result<PathBuf> {
    let node_modules = prefix.join("node_modules");
    let installed = std::fs::read(node_modules.join("playwright-core/package.json"))
        .ok()
        .and_then(|bytes| serde_json::from_slice::<Value>(&bytes).ok())
        .is_some_and(|package| package["version"] == PLAYWRIGHT_CORE);
    if !installed {
        std::fs::create_dir_all(prefix)?;
        let package = format!("playwright-core@{PLAYWRIGHT_CORE}");
        eprintln!("installing {package} into {} (npm install; no browser download)", prefix.display());
        let status = Command::new("npm")
            .args(["install", "--no-audit", "--no-fund", "--prefix"])
            .arg(prefix)
            .arg(&package)
            .env("PLAYWRIGHT_SKIP_BROWSER_DOWNLOAD", "1")
            .stdout(Stdio::null())
            .status()
            .context("cannot run npm (Debian: apt-get install npm)")?;
        ensure!(status.success(), "npm install {package} failed with {status}");
    }
    Ok(node_modules)
}

/// A benchmark's Node script running, its answers read line by line on a thread of their own.
pub struct Script {
    name: String,
    child: Child,
    stdin: ChildStdin,
    lines: mpsc::Receiver<String>,
}

impl Script {
    /// Starts `node SCRIPT CONFIG` and waits for its first line, `{"ready": ...}`, which it returns.
    pub async fn start(script: &Path, config: &Value, wait: Duration) -> Result<(Script, Value)> {
        let name = script.file_name().map_or_else(String::new, |name| name.to_string_lossy().into_owned());
        let mut child = Command::new("node")
            .arg(script)
            .arg(config.to_string())
            .stdin(Stdio::piped())
            .stdout(Stdio::piped())
            .spawn()
            .context("cannot run node (Debian: apt-get install nodejs)")?;
        let stdin = child.stdin.take().context("node's stdin")?;
        let stdout = child.stdout.take().context("node's stdout")?;
        let (sender, lines) = mpsc::channel(16);
        std::thread::spawn(move || {
            for line in BufReader::new(stdout).lines() {
                let Ok(line) = line else { break };
                if sender.blocking_send(line).is_err() {
                    break;
                }
            }
        });
        let mut script = Script { name, child, stdin, lines };
        let ready = script.answer(wait).await?;
        let ready = ready.get("ready").cloned().with_context(|| format!("{} did not start: {ready}", script.name))?;
        Ok((script, ready))
    }

    /// Sends one command and waits up to `wait` for its answer.
    pub async fn ask(&mut self, command: &Value, wait: Duration) -> Result<Value> {
        writeln!(self.stdin, "{command}").with_context(|| format!("{} has stopped", self.name))?;
        self.stdin.flush()?;
        self.answer(wait).await
    }

    async fn answer(&mut self, wait: Duration) -> Result<Value> {
        let line = tokio::time::timeout(wait, self.lines.recv())
            .await
            .with_context(|| format!("{} did not answer in time", self.name))?
            .with_context(|| format!("{} has stopped (its error is above)", self.name))?;
        serde_json::from_str(&line).with_context(|| format!("{} said {line:?}", self.name))
    }

    /// Asks the script to close its browser (`{"close": true}`) and waits for it to end, killing it if
    /// it does not.
    pub fn close(mut self) {
        let _ = writeln!(self.stdin, "{}", json!({ "close": true }));
        let _ = self.stdin.flush();
        let deadline = Instant::now() + Duration::from_secs(10);
        while Instant::now() < deadline {
            if let Ok(Some(_)) = self.child.try_wait() {
                return;
            }
            std::thread::sleep(Duration::from_millis(50));
        }
        let _ = self.child.kill();
        let _ = self.child.wait();
    }
}
