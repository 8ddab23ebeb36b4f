//! AgentLab studies of TRACE tasks, as the end-to-end test and the benchmark run them: a dataset of tasks
//! that share one recorded bundle ([`dataset`]), and `tests/agentlab/study.py` run over it ([`run_study`])
//! with the scripted agent of `tests/agentlab/scripted_agent.py`, through AgentLab's own
//! `make_study(...).run` on the backend asked for, while every TCP socket its processes listen on is
//! noted ([`Listener`]). Everything runs from `target/agentlab-venv`, which `.ci/install` makes with the
//! README's command, with its offline copies of what AgentLab would download.

use std::collections::{BTreeMap, BTreeSet};
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
    /// The values of the `env.benchmark` column of AgentLab's results (`study.get_results()`).
    pub benchmark_column: Vec<String>,
    pub seconds: f64,
    pub driver_pid: u32,
    pub tasks: BTreeMap<String, Episode>,
    /// Every TCP socket a process of the study's (the driver and whatever it started) listened on while it
    /// ran, as often as it was seen.
    #[serde(skip)]
    pub listeners: BTreeSet<Listener>,
}

/// A TCP socket listening, and the process that held it.
#[derive(Debug, Clone, PartialEq, Eq, PartialOrd, Ord)]
pub struct Listener {
    /// The process's name (`/proc/PID/comm`: `gcs_server`, `raylet`, `ray::IDLE`, …).
    pub process: String,
    pub address: std::net::IpAddr,
    pub port: u16,
}

impl Listener {
    /// Whether only this machine can connect to it.
    pub fn is_loopback(&self) -> bool {
        match self.address {
            std::net::IpAddr::V4(address) => address.is_loopback(),
            std::net::IpAddr::V6(address) => {
                address.is_loopback() || address.to_ipv4_mapped().is_some_and(|mapped| mapped.is_loopback())
            }
        }
    }
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
    let child = command.stdout(Stdio::piped()).stderr(Stdio::piped()).spawn();
    let child = child.with_context(|| format!("cannot run {command:?}"))?;
    let driver = child.id();
    let (done, finished) = std::sync::mpsc::channel();
    let waiting = std::thread::spawn(move || {
        let output = child.wait_with_output();
        let _ = done.send(());
        output
    });
    let mut listeners = BTreeSet::new();
    while finished.recv_timeout(Duration::from_millis(250)).is_err() {
        listeners.extend(listening(driver));
    }
    let output = waiting.join().map_err(|_| anyhow::anyhow!("the study's waiter panicked"))??;
    let stderr = String::from_utf8_lossy(&output.stderr);
    ensure!(output.status.success(), "the study failed: {stderr}");
    let mut study: Study =
        serde_json::from_slice(&output.stdout).with_context(|| format!("what the study printed: {stderr}"))?;
    study.listeners = listeners;
    Ok(study)
}

/// The TCP sockets (IPv4 and IPv6) that `root` and its descendants listen on now, read from `/proc`.
pub fn listening(root: u32) -> Vec<Listener> {
    let mut sockets = BTreeMap::new();
    for (table, v6) in [("/proc/net/tcp", false), ("/proc/net/tcp6", true)] {
        let text = std::fs::read_to_string(table).unwrap_or_default();
        for line in text.lines().skip(1) {
            let fields: Vec<&str> = line.split_whitespace().collect();
            // local address, state (0A: listening), inode.
            let (Some(local), Some(&"0A"), Some(inode)) = (fields.get(1), fields.get(3), fields.get(9)) else {
                continue;
            };
            if let Some(address) = socket_address(local, v6) {
                sockets.insert(inode.to_string(), address);
            }
        }
    }
    let mut parents = BTreeMap::new();
    for entry in std::fs::read_dir("/proc").into_iter().flatten().flatten() {
        let Some(pid) = entry.file_name().to_str().and_then(|name| name.parse::<u32>().ok()) else { continue };
        let stat = std::fs::read_to_string(format!("/proc/{pid}/stat")).unwrap_or_default();
        // The parent follows the name, which is in parentheses and may hold anything.
        let parent = stat.rsplit_once(')').and_then(|(_, rest)| rest.split_whitespace().nth(1)?.parse::<u32>().ok());
        if let Some(parent) = parent {
            parents.insert(pid, parent);
        }
    }
    let descends = |mut pid: u32| {
        for _ in 0..64 {
            if pid == root {
                return true;
            }
            match parents.get(&pid) {
                Some(&parent) if parent != 0 => pid = parent,
                _ => return false,
            }
        }
        false
    };
    let mut found = Vec::new();
    for &pid in parents.keys().filter(|&&pid| descends(pid)) {
        let process = std::fs::read_to_string(format!("/proc/{pid}/comm")).unwrap_or_default().trim().to_owned();
        for fd in std::fs::read_dir(format!("/proc/{pid}/fd")).into_iter().flatten().flatten() {
            let Ok(target) = std::fs::read_link(fd.path()) else { continue };
            let target = target.to_string_lossy();
            let inode = target.strip_prefix("socket:[").and_then(|rest| rest.strip_suffix(']'));
            if let Some(&(address, port)) = inode.and_then(|inode| sockets.get(inode)) {
                found.push(Listener { process: process.clone(), address, port });
            }
        }
    }
    found
}

/// An address of `/proc/net/tcp` (`0100007F:1F90`: the address's 32-bit words in the machine's byte order,
/// then the port) or of `/proc/net/tcp6`.
fn socket_address(field: &str, v6: bool) -> Option<(std::net::IpAddr, u16)> {
    let (address, port) = field.split_once(':')?;
    let port = u16::from_str_radix(port, 16).ok()?;
    let mut bytes = Vec::new();
    for word in 0..address.len() / 8 {
        let word = u32::from_str_radix(address.get(word * 8..word * 8 + 8)?, 16).ok()?;
        bytes.extend(word.to_ne_bytes());
    }
    let address = if v6 {
        std::net::IpAddr::from(<[u8; 16]>::try_from(bytes).ok()?)
    } else {
        std::net::IpAddr::from(<[u8; 4]>::try_from(bytes).ok()?)
    };
    Some((address, port))
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
        // A cluster of this machine alone, every server of it on 127.0.0.1: the person's choice, as Ray asks.
        command.env("RAY_ENABLE_WINDOWS_OR_OSX_CLUSTER", "0");
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
        command.env("RAY_ENABLE_WINDOWS_OR_OSX_CLUSTER", "0");
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
/// environment has installed), no Playwright browser installed (as on a fresh machine), AgentLab's
/// downloads made beforehand (see `.ci/install`), Ray's files in `work` and no usage report sent, its token
/// (a cluster's processes show it to each other) given here rather than written into the home directory,
/// and the episodes' files in `work`. Nothing says where Ray listens: that is `browsergym-trace`'s default.
fn with_agentlab_environment(command: &mut Command, python: &Path, work: &Path) -> Result<()> {
    let venv = python.parent().and_then(Path::parent).context("the venv of the AgentLab interpreter")?;
    let here = Path::new(env!("CARGO_MANIFEST_DIR"));
    let path = std::env::join_paths([here.join("agentlab"), here.join("../integrations/browsergym/src")])?;
    command
        .env("PYTHONPATH", path)
        .env("PLAYWRIGHT_BROWSERS_PATH", work.join("no-playwright-browsers"))
        .env("TIKTOKEN_CACHE_DIR", venv.join("tiktoken-cache"))
        .env("NLTK_DATA", venv.join("nltk-data"))
        .env("RAY_TMPDIR", work.join("ray"))
        .env("RAY_USAGE_STATS_ENABLED", "0")
        .env("RAY_AUTH_MODE", "token")
        .env("RAY_AUTH_TOKEN", crate::site::random_token())
        .env("TRACE_EPISODES", work.join("episodes"));
    Ok(())
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn addresses_of_proc_net_tcp_are_read_in_the_machines_byte_order() {
        let loopback = socket_address("0100007F:1F90", false).unwrap();
        assert_eq!(loopback, ("127.0.0.1".parse().unwrap(), 8080));
        let mapped = socket_address("0000000000000000FFFF00000100007F:0050", true).unwrap();
        assert_eq!(mapped, ("::ffff:127.0.0.1".parse().unwrap(), 80));
        let every = socket_address("00000000000000000000000000000000:0050", true).unwrap();
        let listener = |(address, port)| Listener { process: "raylet".into(), address, port };
        assert!(listener(loopback).is_loopback() && listener(mapped).is_loopback());
        assert!(!listener(every).is_loopback());
        assert!(!listener(socket_address("020000C0:0050", false).unwrap()).is_loopback());
    }
}
