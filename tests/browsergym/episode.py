"""One BrowserGym episode of a TRACE task, run by the end-to-end test `tests/tests/browsergym.rs` inside
BrowserGym's own loop (`gym.make`, `reset`, `step`): a scripted agent, no model, whose actions are Playwright
code (the environment made with `action_mapping=None`) and whose last action is its answer.

Usage: python episode.py CONFIG_JSON, with {bundle, trace_replay, chromium, actions} and, optionally,
`then` (a list of further episodes' actions, each run after a `reset` of the same environment) and
`kill_after_reset` (the process kills itself with SIGKILL once the episode has started, as a crashed or
killed harness would end). Prints one JSON line: {env_id, goal, rewards, terminated, result,
reset_seconds, page_at_reset, seen, browsers, browser_pids, then} (`reset_seconds`: `env.reset()` to the
first observation; `page_at_reset`: the first page's clock, cookies and stored items then; `seen`, per step,
the URL of the page observed and the text of its accessibility tree, as the agent is shown it; `browsers`,
the command line of every browser this process started, as running once the episode has started; `then`,
the same for each further episode).
"""

import json
import os
import signal
import sys
import time

import gymnasium as gym
from browsergym.utils.obs import flatten_axtree_to_str

import browsergym_trace

config = json.loads(sys.argv[1])
env_ids = browsergym_trace.register(config["bundle"], trace_replay=config["trace_replay"], chromium=config["chromium"])
env = gym.make(env_ids[0], action_mapping=None, headless=True)


def browsers() -> dict[int, list[str]]:
    """The browsers (Playwright's: `--remote-debugging-pipe`, no `--type=` of a browser's own child) among
    this process's descendants: their command lines by process id."""
    parents, commands = {}, {}
    for entry in os.listdir("/proc"):
        if entry.isdigit():
            try:
                stat = open(f"/proc/{entry}/stat").read()
                parents[int(entry)] = int(stat.rsplit(")", 1)[1].split()[1])
                commands[int(entry)] = open(f"/proc/{entry}/cmdline", "rb").read().decode(errors="replace").split("\0")
            except (OSError, IndexError, ValueError):
                pass

    def descends(pid: int) -> bool:
        while pid in parents and pid != os.getpid():
            pid = parents[pid]
        return pid == os.getpid()

    return {
        pid: command
        for pid, command in commands.items()
        if descends(pid) and "--remote-debugging-pipe" in command and not any(a.startswith("--type=") for a in command)
    }


def run_episode(actions: list[str]) -> dict:
    """Resets the environment and runs `actions`; what the agent was shown and what it earned."""
    started = time.monotonic()
    obs, info = env.reset()
    reset_seconds = time.monotonic() - started
    # What the episode's first page holds of anything before it: its clock, cookies and storage.
    page_at_reset = env.unwrapped.page.evaluate(
        "() => ({now: Date.now(), cookie: document.cookie, stored: localStorage.length + sessionStorage.length})"
    )
    page_at_reset["since_reset_ms"] = (time.monotonic() - started) * 1000
    running = browsers()
    if config.get("kill_after_reset"):
        os.kill(os.getpid(), signal.SIGKILL)
    rewards, terminated, result, seen = [], False, None, []
    for action in actions:
        obs, reward, terminated, truncated, info = env.step(action)
        rewards.append(reward)
        seen.append({"url": obs["url"], "open_pages": obs["open_pages_urls"], "text": flatten_axtree_to_str(obs["axtree_object"])})
        if obs.get("last_action_error"):
            print(json.dumps({"error": obs["last_action_error"], "action": action}), file=sys.stderr)
        if terminated or truncated:
            result = info.get("task_info", {}).get("trace_result")
            break
    return {
        "goal": obs["goal"],
        "rewards": rewards,
        "terminated": terminated,
        "result": result,
        "reset_seconds": reset_seconds,
        "page_at_reset": page_at_reset,
        "seen": seen,
        "browsers": list(running.values()),
        "browser_pids": sorted(running),
    }


report = run_episode(config["actions"])
report["then"] = [run_episode(actions) for actions in config.get("then", [])]
env.close()
report["env_id"] = env_ids[0]
print(json.dumps(report))
