"""One BrowserGym episode of a TRACE task, run by the end-to-end test `tests/tests/browsergym.rs` inside
BrowserGym's own loop (`gym.make`, `reset`, `step`): a scripted agent, no model, whose actions are Playwright
code (the environment made with `action_mapping=None`) and whose last action is its answer.

Usage: python episode.py CONFIG_JSON, with {bundle, trace_replay, chromium, actions}. Prints one JSON line:
{env_id, goal, rewards, terminated, result, reset_seconds} (`env.reset()` to the first observation).
"""

import json
import sys
import time

import gymnasium as gym

import browsergym_trace

config = json.loads(sys.argv[1])
env_ids = browsergym_trace.register(config["bundle"], trace_replay=config["trace_replay"], chromium=config["chromium"])
env = gym.make(env_ids[0], action_mapping=None, headless=True)
started = time.monotonic()
obs, info = env.reset()
reset_seconds = time.monotonic() - started
rewards, terminated, result = [], False, None
for action in config["actions"]:
    obs, reward, terminated, truncated, info = env.step(action)
    rewards.append(reward)
    if obs.get("last_action_error"):
        print(json.dumps({"error": obs["last_action_error"], "action": action}), file=sys.stderr)
    if terminated or truncated:
        result = info.get("task_info", {}).get("trace_result")
        break
env.close()
report = {
    "env_id": env_ids[0],
    "goal": obs["goal"],
    "rewards": rewards,
    "terminated": terminated,
    "result": result,
    "reset_seconds": reset_seconds,
}
print(json.dumps(report))
