//! Issue #31: an agent under evaluation is an untrusted program. Each test runs `trace-replay eval` with an
//! agent that does what a security probe did to the release binary, and checks that the episode still ends
//! within its `--timeout`, in bounded memory and disk, with nothing of the agent's left running and the
//! fault reported as the agent's; and that a well-behaved agent's log and answer are kept whole.
//!
//! Every process a test starts carries a marker in its environment (inherited by Chromium and by the
//! agent's descendants, whatever they detach), so that what is left of a run can be found in `/proc`.

use std::path::{Path, PathBuf};
use std::process::{Child, Command, Stdio};
use std::time::{Duration, Instant};

use serde_json::{Value, json};

use crate::common::{har, har_entry, stored_body, write_bundle};

const TASK_ID: &str = "task_agents";
/// What the agent's log may hold at most: its first and last 2 MiB, and the line saying what was cut.
const LOG_CAP: u64 = (4 << 20) + 1024;
/// The environment variable that marks the processes of one test's run.
const RUN_MARKER: &str = "TRACE_AGENTS_TEST_RUN";

/// A bundle of one page, the start of the task.
fn bundle() -> (tempfile::TempDir, PathBuf) {
    let scratch = tempfile::tempdir().unwrap();
    let dir = scratch.path().join("bundle");
    let page = b"<!doctype html><title>Shop</title><h1>Shop</h1>";
    let entry = har_entry("http://shop.test/", stored_body(&dir, page, "text/html"));
    write_bundle(&dir, TASK_ID, &har(vec![entry]), &json!({ "snapshots": [] }));
    (scratch, dir)
}

/// A run of `trace-replay eval` of the bundle with `agent`: its outputs, and what was measured of it.
struct Run {
    out: PathBuf,
    stderr: String,
    elapsed: Duration,
    /// trace-replay's peak resident memory (`VmHWM`), in bytes.
    peak_memory: u64,
    marker: String,
}

impl Run {
    fn task_dir(&self) -> PathBuf {
        self.out.join(TASK_ID)
    }

    /// The episode's result, as the run's `results.jsonl` has it (also when the episode could not run).
    fn result(&self) -> Value {
        let path = self.out.join("results.jsonl");
        let text = std::fs::read_to_string(&path)
            .unwrap_or_else(|error| panic!("no {} ({error}); trace-replay said:\n{}", path.display(), self.stderr));
        let result: Value = serde_json::from_str(text.lines().next().unwrap()).unwrap();
        let error = result["error"].as_str().unwrap_or_default();
        assert!(!error.contains("the episode could not run"), "{error}\ntrace-replay said:\n{}", self.stderr);
        result
    }

    fn log(&self) -> PathBuf {
        self.task_dir().join("agent/agent.log")
    }

    /// The processes of this run still there, a moment after it ended (Chromium's helpers take that long to
    /// notice their browser is gone), as `pid command`.
    fn left_running(&self) -> Vec<String> {
        left_running(&self.marker)
    }
}

/// Runs `trace-replay eval` of `bundle` with `agent` and `--timeout timeout`, and kills it, failing the test,
/// if it takes longer than `limit` or holds more than `max_memory` bytes.
fn eval(scratch: &Path, bundle: &Path, agent: &str, timeout: u64, limit: Duration, max_memory: u64) -> Run {
    let out = scratch.join("run");
    let marker = format!("{}-{}", std::process::id(), scratch.display());
    let child = Command::new(env!("CARGO_BIN_EXE_trace-replay"))
        .args(["eval", path_str(bundle), "--agent", agent, "--out", path_str(&out), "--headless"])
        .args(["--timeout", &timeout.to_string()])
        .env(RUN_MARKER, &marker)
        .env_remove("TRACE_LOG")
        .stdin(Stdio::null())
        .stdout(Stdio::null())
        .stderr(Stdio::piped())
        .spawn()
        .expect("trace-replay starts");
    let (stderr, elapsed, peak_memory) = watch(child, limit, max_memory);
    Run { out, stderr, elapsed, peak_memory, marker }
}

/// Waits for `child`, polling its memory; kills it and fails if it passes `limit` or `max_memory`.
fn watch(mut child: Child, limit: Duration, max_memory: u64) -> (String, Duration, u64) {
    let started = Instant::now();
    let mut stderr = child.stderr.take().unwrap();
    let reader = std::thread::spawn(move || {
        let mut text = String::new();
        let _ = std::io::Read::read_to_string(&mut stderr, &mut text);
        text
    });
    let mut peak = 0;
    loop {
        if child.try_wait().unwrap().is_some() {
            break;
        }
        let (resident, high_water) = memory(child.id());
        peak = peak.max(high_water);
        let over = if started.elapsed() > limit {
            Some(format!("ran longer than {limit:?}"))
        } else if resident > max_memory {
            Some(format!("held {resident} bytes, more than {max_memory}"))
        } else {
            None
        };
        if let Some(over) = over {
            child.kill().unwrap();
            child.wait().unwrap();
            panic!("trace-replay {over}; it said:\n{}", reader.join().unwrap());
        }
        std::thread::sleep(Duration::from_millis(50));
    }
    (reader.join().unwrap(), started.elapsed(), peak)
}

/// A process's resident memory now and at its peak (`VmRSS`, `VmHWM`), in bytes.
fn memory(pid: u32) -> (u64, u64) {
    let status = std::fs::read_to_string(format!("/proc/{pid}/status")).unwrap_or_default();
    let field = |name: &str| {
        status
            .lines()
            .find_map(|line| line.strip_prefix(name))
            .and_then(|rest| rest.trim().trim_end_matches("kB").trim().parse::<u64>().ok())
            .map_or(0, |kib| kib << 10)
    };
    (field("VmRSS:"), field("VmHWM:"))
}

/// The processes whose environment holds `marker`, after waiting up to five seconds for them to go.
fn left_running(marker: &str) -> Vec<String> {
    let deadline = Instant::now() + Duration::from_secs(5);
    loop {
        let left = left_running_now(marker);
        if left.is_empty() || Instant::now() > deadline {
            return left;
        }
        std::thread::sleep(Duration::from_millis(100));
    }
}

fn path_str(path: &Path) -> &str {
    path.to_str().unwrap()
}

/// Issue #31: `yes` as the agent wrote a 3.09 GB `agent.log` in 5 s. The log keeps the output's head and
/// tail, says how many bytes it cut between them, and never grows past its cap; the agent is never
/// blocked (it writes until it is stopped at its timeout).
#[test]
fn an_agent_that_floods_its_output_leaves_a_log_of_its_head_and_tail() {
    let (scratch, bundle) = bundle();
    let run = eval(scratch.path(), &bundle, "yes", 5, Duration::from_secs(90), 1 << 30);
    let result = run.result();
    assert_eq!(result["ended"]["kind"], "timeout", "{result}");
    let size = std::fs::metadata(run.log()).unwrap().len();
    assert!(size <= LOG_CAP, "the log is {size} bytes");
    let log = std::fs::read(run.log()).unwrap();
    assert!(log.starts_with(b"y\ny\ny\n"), "{:?}", String::from_utf8_lossy(&log[..64.min(log.len())]));
    assert!(log.ends_with(b"y\ny\ny\n"), "{:?}", String::from_utf8_lossy(&log[log.len().saturating_sub(64)..]));
    let text = String::from_utf8_lossy(&log);
    let note = text.lines().find(|line| line.contains("bytes of the agent's output cut here")).expect("a cut note");
    let cut: u64 = note.trim_start_matches("[trace-replay: ").split(' ').next().unwrap().parse().unwrap();
    // `yes` writes hundreds of megabytes a second: far more than the log keeps was cut.
    assert!(cut > 10 << 20, "{note}");
    assert!(run.left_running().is_empty(), "{:?}", run.left_running());
}

/// Issue #31: a child the agent started with `setsid` outlived the episode. Neither one detached into a
/// session of its own, nor one whose parent exited at once (a double fork), nor one that also emptied its
/// environment is left running once `eval` returns.
#[test]
fn an_agent_child_that_leaves_its_session_does_not_outlive_the_episode() {
    let (scratch, bundle) = bundle();
    let agent = r#"setsid sleep 1000 & (setsid sleep 1001 &) ; setsid env -i sleep 1002 & echo '{"text":"ok"}' > "$TRACE_OUT/done.json""#;
    let run = eval(scratch.path(), &bundle, agent, 30, Duration::from_secs(90), 1 << 30);
    let result = run.result();
    assert_eq!(result["answer"], "ok", "{result}");
    // The one that emptied its environment lost the marker too: it is found by its command line.
    let sleeps = |marker: &str| left_running(marker).into_iter().filter(|process| process.contains("sleep"));
    assert_eq!(sleeps(&run.marker).collect::<Vec<_>>(), Vec::<String>::new());
    let stray: Vec<String> = std::fs::read_dir("/proc")
        .unwrap()
        .filter_map(|entry| {
            let pid = entry.ok()?.file_name().to_str()?.to_owned();
            let command = std::fs::read(format!("/proc/{pid}/cmdline")).ok()?;
            (command == b"sleep\x001002\x00").then_some(pid)
        })
        .collect();
    assert!(stray.is_empty(), "sleep 1002 is still running: {stray:?}");
    assert!(run.left_running().is_empty(), "{:?}", run.left_running());
}

/// Issue #31: a FIFO as `done.json` hung `eval` past its `--timeout` (reading it waits for a writer that
/// never comes). It is refused without waiting, and said as the agent's fault.
#[test]
fn an_answer_that_is_a_fifo_is_refused_within_the_timeout() {
    let (scratch, bundle) = bundle();
    let agent = r#"mkfifo "$TRACE_OUT/done.json""#;
    let run = eval(scratch.path(), &bundle, agent, 20, Duration::from_secs(90), 1 << 30);
    let result = run.result();
    let error = result["error"].as_str().unwrap_or_default();
    assert!(error.contains("done.json") && error.contains("FIFO"), "{result}");
    assert_eq!(result["said_done"], false, "{result}");
    assert!(run.left_running().is_empty(), "{:?}", run.left_running());
}

/// Issue #31: a `done.json` linked to `/dev/zero` drove trace-replay past 3 GB. A link is not followed,
/// and an answer larger than the limit is refused: the episode ends in the memory of any other.
#[test]
fn an_answer_that_is_endless_or_huge_is_refused_in_bounded_memory() {
    const MAX_MEMORY: u64 = 512 << 20;
    let (scratch, bundle) = bundle();
    let agent =
        r#"ln -s /dev/zero "$TRACE_OUT/done.json"; head -c 100000000 /dev/zero > "$TRACE_OUT/agent_response.json""#;
    let run = eval(scratch.path(), &bundle, agent, 20, Duration::from_secs(90), MAX_MEMORY);
    let result = run.result();
    let error = result["error"].as_str().unwrap_or_default();
    assert!(error.contains("done.json is a symbolic link"), "{result}");
    assert!(error.contains("agent_response.json is larger than"), "{result}");
    assert!(run.peak_memory < MAX_MEMORY, "peak {} bytes", run.peak_memory);
    eprintln!("peak memory {} MiB in {:?}", run.peak_memory >> 20, run.elapsed);
}

/// The other side: a well-behaved agent's output and answer are kept whole.
#[test]
fn a_well_behaved_agents_log_and_answer_are_kept_whole() {
    let (scratch, bundle) = bundle();
    let agent = r#"i=0; while [ $i -lt 20000 ]; do echo "line $i"; i=$((i+1)); done; echo oops >&2; printf '%s' '{"text":"forty-two"}' > "$TRACE_OUT/done.json""#;
    let run = eval(scratch.path(), &bundle, agent, 60, Duration::from_secs(120), 1 << 30);
    let result = run.result();
    assert_eq!(result["answer"], "forty-two", "{result}");
    assert_eq!(result["said_done"], true, "{result}");
    let mut expected: String = (0..20000).map(|i| format!("line {i}\n")).collect();
    expected.push_str("oops\n");
    assert_eq!(std::fs::read_to_string(run.log()).unwrap(), expected);
    assert!(run.left_running().is_empty(), "{:?}", run.left_running());
}

/// Issue #31: a `trace-replay` killed by `SIGKILL` left its Chromium running. Chromium dies with it.
#[test]
fn chromium_dies_with_a_killed_trace_replay() {
    let (scratch, bundle) = bundle();
    let marker = format!("{}-{}", std::process::id(), scratch.path().display());
    let mut serving = Command::new(env!("CARGO_BIN_EXE_trace-replay"))
        .args(["serve", path_str(&bundle), "--headless"])
        .env(RUN_MARKER, &marker)
        .env_remove("TRACE_LOG")
        .stdin(Stdio::null())
        .stdout(Stdio::null())
        .stderr(Stdio::null())
        .spawn()
        .expect("trace-replay starts");
    let deadline = Instant::now() + Duration::from_secs(60);
    let chromium_of_run =
        || left_running_now(&marker).into_iter().filter(|process| process.contains("chrom")).collect::<Vec<_>>();
    while chromium_of_run().is_empty() {
        assert!(Instant::now() < deadline, "Chromium never started");
        assert!(serving.try_wait().unwrap().is_none(), "trace-replay serve exited");
        std::thread::sleep(Duration::from_millis(100));
    }
    // Serving: the browser is up and driven.
    std::thread::sleep(Duration::from_secs(3));
    serving.kill().unwrap();
    serving.wait().unwrap();
    assert_eq!(left_running(&marker), Vec::<String>::new());
}

/// The processes whose environment holds `marker`, now.
fn left_running_now(marker: &str) -> Vec<String> {
    let needle = format!("{RUN_MARKER}={marker}");
    std::fs::read_dir("/proc")
        .unwrap()
        .filter_map(|entry| {
            let pid: u32 = entry.ok()?.file_name().to_str()?.parse().ok()?;
            let environ = std::fs::read(format!("/proc/{pid}/environ")).ok()?;
            environ.split(|byte| *byte == 0).any(|entry| entry == needle.as_bytes()).then(|| {
                let command = std::fs::read(format!("/proc/{pid}/cmdline")).unwrap_or_default();
                format!("{pid} {}", String::from_utf8_lossy(&command).replace('\0', " "))
            })
        })
        .collect()
}

/// Issue #45: `trace-replay` killed by `SIGKILL` during an episode took its Chromium with it, but the
/// agent kept running, and so did what it had detached. The agent runs under a keeper that reads a pipe
/// only trace-replay writes to: nothing of the agent outlives trace-replay, however it ends.
#[test]
fn nothing_of_an_agent_outlives_a_killed_trace_replay() {
    let (scratch, bundle) = bundle();
    let out = scratch.path().join("run");
    let marker = format!("{}-{}", std::process::id(), scratch.path().display());
    let agent = r#"setsid sleep 1101 & (setsid sleep 1102 &) ; TRACE_EPISODE=browser setsid sleep 1103 & sleep 1104"#;
    let mut eval = Command::new(env!("CARGO_BIN_EXE_trace-replay"))
        .args(["eval", path_str(&bundle), "--agent", agent, "--out", path_str(&out), "--headless"])
        .args(["--timeout", "120"])
        .env(RUN_MARKER, &marker)
        .env_remove("TRACE_LOG")
        .stdin(Stdio::null())
        .stdout(Stdio::null())
        .stderr(Stdio::null())
        .spawn()
        .expect("trace-replay starts");
    let deadline = Instant::now() + Duration::from_secs(90);
    let sleeps = || {
        let running = left_running_now(&marker);
        running
            .iter()
            .filter(|process| process.split_once(' ').is_some_and(|(_, command)| command.starts_with("sleep 110")))
            .count()
    };
    while sleeps() < 4 {
        assert!(Instant::now() < deadline, "the agent never started: {:?}", left_running_now(&marker));
        assert!(eval.try_wait().unwrap().is_none(), "trace-replay eval exited");
        std::thread::sleep(Duration::from_millis(100));
    }
    eval.kill().unwrap();
    eval.wait().unwrap();
    assert_eq!(left_running(&marker), Vec::<String>::new());
}

/// Issue #45: an agent's child that put Chromium's mark in its environment (`TRACE_EPISODE=browser`) and
/// left its session was spared as one of Chromium's helpers, and ran on into the next task's episode.
/// What an agent leaves is ended with its episode, whatever mark it carries: the second episode of a
/// run sees nothing of the first's.
#[test]
fn a_child_that_takes_the_browsers_mark_does_not_outlive_its_episode() {
    let (scratch, _) = bundle();
    let dataset = scratch.path().join("dataset");
    let mut lines = String::new();
    for task in ["task_a", "task_b"] {
        let dir = dataset.join("bundles").join(task);
        let page = b"<!doctype html><title>Shop</title><h1>Shop</h1>";
        let entry = har_entry("http://shop.test/", stored_body(&dir, page, "text/html"));
        write_bundle(&dir, task, &har(vec![entry]), &json!({ "snapshots": [] }));
        let line = json!({
            "task_id": task, "task_description": "Look at the shop", "task_type": "action",
            "website_url": "http://shop.test/", "num_steps": 0, "duration_seconds": 0.0, "answer": null,
            "tool_calls": [], "credentials": [], "checkpoints": [], "checkpoints_reasoning": "", "ignored": [],
            "bundle": format!("bundles/{task}"), "redacted": false,
        });
        lines.push_str(&format!("{line}\n"));
    }
    std::fs::write(dataset.join("tasks.jsonl"), lines).unwrap();
    let agent = r#"ps -eo args > "$TRACE_OUT/ps.txt"; TRACE_EPISODE=browser setsid sleep 1105 & echo '{"text":"ok"}' > "$TRACE_OUT/done.json""#;
    let run = eval(scratch.path(), &dataset, agent, 30, Duration::from_secs(180), 1 << 30);
    let seen = std::fs::read_to_string(run.out.join("task_b/agent/ps.txt")).unwrap();
    let child_of_the_first = seen.lines().any(|command| command.trim() == "sleep 1105");
    assert!(!child_of_the_first, "the first episode's child ran into the second:\n{seen}");
    assert!(run.left_running().is_empty(), "{:?}", run.left_running());
}
