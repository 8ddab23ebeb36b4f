//! AgentLab studies of TRACE tasks, as the end-to-end test and the benchmark run them: a dataset of tasks
//! that share one recorded bundle ([`dataset`]), and `tests/agentlab/study.py` run over it ([`run_study`])
//! with the scripted agent of `tests/agentlab/scripted_agent.py`, through AgentLab's own
//! `make_study(...).run` on the backend asked for. Everything runs from `target/agentlab-venv`, which
//! `.ci/install` makes, with its offline copies of what AgentLab would download.

use std::collections::BTreeMap;
use std::io::{BufRead, BufReader};
use std::net::TcpListener;
use std::path::Path;
use std::process::{Child, Command, Stdio};
use std::time::Duration;

use anyhow::{Context, Result, ensure};
use serde::Deserialize;
use serde_json::json;

use crate::apps::{Environment, python_of};
use crate::browser::Build;

/// Where AgentLab runs the episodes: in the driver's process one after another, on a Ray cluster that
/// AgentLab's `run` starts with this many workers (its `n_jobs`), or on a Ray cluster already running
/// ([`RayCluster`]), through `browsergym_trace.benchmark.run_on_cluster`.
#[derive(Debug, Clone, Copy)]
pub enum Backend<'a> {
    Sequential,
    Ray { workers: usize },
    RayCluster(&'a RayCluster),
}

/// One episode of a study, as `study.py` reports it.
#[derive(Debug, Deserialize)]
pub struct Episode {
    pub reward: Option<f64>,
    pub terminated: Option<bool>,
    pub error: Option<String>,
    /// The processes the agent acted in.
    pub pids: Vec<u32>,
    /// When the agent chose its first and its last action (Unix seconds).
    pub started: Option<f64>,
    pub ended: Option<f64>,
}

/// A finished study: how long `run` took, the driver's process, each episode by task name (`trace.<id>`).
#[derive(Debug, Deserialize)]
pub struct Study {
    pub benchmark: String,
    pub seconds: f64,
    pub driver_pid: u32,
    pub tasks: BTreeMap<String, Episode>,
}

impl Study {
    /// Each task's reward, by task name.
    pub fn rewards(&self) -> BTreeMap<&str, Option<f64>> {
        self.tasks.iter().map(|(task, episode)| (task.as_str(), episode.reward)).collect()
    }

    /// Whether any two episodes had their agents acting at the same time.
    pub fn overlapped(&self) -> bool {
        let spans: Vec<(f64, f64)> =
            self.tasks.values().filter_map(|episode| Some((episode.started?, episode.ended?))).collect();
        spans.iter().enumerate().any(|(i, a)| spans[i + 1..].iter().any(|b| a.0 < b.1 && b.0 < a.1))
    }

    /// Episodes per minute of the whole `run`, backend start-up included.
    pub fn episodes_per_minute(&self) -> f64 {
        self.tasks.len() as f64 * 60.0 / self.seconds
    }
}

/// Writes a dataset folder at `dir` whose tasks (`task_ids`) all share `bundle` (a zip or a directory,
/// copied into `bundles/`), with the demonstration's description and website.
pub fn dataset(dir: &Path, bundle: &Path, origin: &str, description: &str, task_ids: &[&str]) -> Result<()> {
    let shared = if bundle.is_dir() { "bundles/shop" } else { "bundles/shop.zip" };
    std::fs::create_dir_all(dir.join("bundles"))?;
    if bundle.is_dir() {
        crate::bench::copy_dir(bundle, &dir.join(shared))?;
    } else {
        std::fs::copy(bundle, dir.join(shared))?;
    }
    let mut lines = String::new();
    for task_id in task_ids {
        let line = json!({
            "task_id": task_id, "task_description": description, "task_type": "action",
            "website_url": format!("{origin}/"), "num_steps": 0, "duration_seconds": 0.0, "tool_calls": [],
            "credentials": [], "checkpoints": [], "checkpoints_reasoning": "", "ignored": [],
            "bundle": shared, "redacted": true
        });
        // The line is what `trace-host dataset` writes: checked against the format's own type.
        let _: trace_manifest::dataset::TaskLine = serde_json::from_value(line.clone())?;
        lines.push_str(&format!("{line}\n"));
    }
    std::fs::write(dir.join("tasks.jsonl"), lines)?;
    Ok(())
}

/// Runs one AgentLab study of the scripted agent over every task of `dataset`, with `scripts` (each task's
/// actions, Playwright code ending with its answer, by task name), on `backend`; the study's files go to
/// `work`.
pub fn run_study(
    build: &Build,
    dataset: &Path,
    scripts: &BTreeMap<String, Vec<String>>,
    backend: Backend<'_>,
    work: &Path,
) -> Result<Study> {
    let (backend_name, n_jobs) = match backend {
        Backend::Sequential => ("sequential", 1),
        Backend::Ray { workers } => ("ray", workers),
        Backend::RayCluster(_) => ("ray-cluster", 0),
    };
    let config = json!({
        "dataset": dataset,
        "trace_replay": build.trace_replay,
        "chromium": build.chromium,
        "scripts": scripts,
        "backend": backend_name,
        "n_jobs": n_jobs,
        "results": work.join("results"),
    });
    let mut command = python_command(work)?;
    command.arg(Path::new(env!("CARGO_MANIFEST_DIR")).join("agentlab/study.py")).arg(config.to_string());
    if let Backend::RayCluster(cluster) = backend {
        cluster.join(&mut command);
    }
    let output = command.output().with_context(|| format!("cannot run {command:?}"))?;
    let stderr = String::from_utf8_lossy(&output.stderr);
    ensure!(output.status.success(), "the study failed: {stderr}");
    serde_json::from_slice(&output.stdout).with_context(|| format!("what the study printed: {stderr}"))
}

/// AgentLab's Python (`target/agentlab-venv`) in the environment AgentLab's processes need, its and its
/// episodes' files in `work`.
pub fn python_command(work: &Path) -> Result<Command> {
    let python = python_of(Environment::AgentLab)?;
    let mut command = Command::new(&python);
    with_agentlab_environment(&mut command, &python, work)?;
    Ok(command)
}

/// A Ray cluster of this machine, started as a person starts one (`ray start --head --block`), every
/// server of it on 127.0.0.1, with a token of its own that every process connecting to it must show;
/// stopped when dropped.
pub struct RayCluster {
    head: Child,
    port: u16,
    token: String,
}

impl RayCluster {
    /// Starts a cluster of `cpus` CPUs, its files in `work/ray`, and waits until it runs.
    pub fn start(cpus: usize, work: &Path) -> Result<RayCluster> {
        let python = python_of(Environment::AgentLab)?;
        let port = TcpListener::bind(("127.0.0.1", 0))?.local_addr()?.port();
        let token = crate::site::random_token();
        let ray = python.with_file_name("ray");
        let mut command = Command::new(&ray);
        command.args(["start", "--head", "--block", "--disable-usage-stats", "--node-ip-address", "127.0.0.1"]);
        command.args(["--dashboard-host", "127.0.0.1", "--port", &port.to_string(), "--num-cpus", &cpus.to_string()]);
        // Its workers get the environment it starts with, as a cluster's nodes are set up beforehand.
        with_agentlab_environment(&mut command, &python, work)?;
        command.arg("--temp-dir").arg(work.join("ray"));
        command.env("RAY_AUTH_TOKEN", &token);
        let head = command.stdout(Stdio::piped()).stderr(Stdio::null()).spawn()?;
        let mut cluster = RayCluster { head, port, token };
        let stdout = cluster.head.stdout.take().context("the head's output")?;
        let (started, ready) = std::sync::mpsc::channel();
        // Read to the end, so that the head never writes into a closed pipe.
        std::thread::spawn(move || {
            for line in BufReader::new(stdout).lines().map_while(Result::ok) {
                if line.contains("Ray runtime started") {
                    let _ = started.send(());
                }
            }
        });
        let ran = ready.recv_timeout(Duration::from_secs(120)).is_ok();
        ensure!(ran, "`ray start --head` did not start in 2 minutes");
        Ok(cluster)
    }

    /// Points `command` at the cluster (`RAY_ADDRESS`) with its token.
    fn join(&self, command: &mut Command) {
        command.env("RAY_ADDRESS", format!("127.0.0.1:{}", self.port)).env("RAY_AUTH_TOKEN", &self.token);
    }
}

impl std::fmt::Debug for RayCluster {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        // Not its token.
        f.debug_struct("RayCluster").field("port", &self.port).finish_non_exhaustive()
    }
}

impl Drop for RayCluster {
    fn drop(&mut self) {
        // SIGTERM, on which `ray start --block` stops every process of the cluster it started.
        let _ = Command::new("kill").args(["-TERM", &self.head.id().to_string()]).status();
        let _ = self.head.wait();
    }
}

/// What AgentLab's processes (the study's driver, a Ray cluster's workers) need from their environment:
/// the scripted agent and this repository's `browsergym-trace` importable (first, whichever copy the
/// environment has installed), Debian's Chromium where BrowserGym looks for Playwright's, AgentLab's
/// downloads made beforehand (see `.ci/install`), Ray on 127.0.0.1 alone with its files in `work` and no
/// usage report sent, its token (a cluster's processes show it to each other) given here rather than
/// written into the home directory, and the episodes' files in `work`.
fn with_agentlab_environment(command: &mut Command, python: &Path, work: &Path) -> Result<()> {
    let venv = python.parent().and_then(Path::parent).context("the venv of the AgentLab interpreter")?;
    let here = Path::new(env!("CARGO_MANIFEST_DIR"));
    let path = std::env::join_paths([here.join("agentlab"), here.join("../integrations/browsergym/src")])?;
    command
        .env("PYTHONPATH", path)
        .env("PLAYWRIGHT_BROWSERS_PATH", here.join("../target/ms-playwright"))
        .env("TIKTOKEN_CACHE_DIR", venv.join("tiktoken-cache"))
        .env("NLTK_DATA", venv.join("nltk-data"))
        .env("RAY_ENABLE_WINDOWS_OR_OSX_CLUSTER", "0")
        .env("RAY_TMPDIR", work.join("ray"))
        .env("RAY_USAGE_STATS_ENABLED", "0")
        .env("RAY_AUTH_MODE", "token")
        .env("RAY_AUTH_TOKEN", crate::site::random_token())
        .env("TRACE_EPISODES", work.join("episodes"));
    Ok(())
}
