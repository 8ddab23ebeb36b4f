"""BrowserGym resets of a TRACE task, warm (the environment keeps its proxy and browsers) against cold
(each reset launches its own, as BrowserGym does alone), run by the benchmark `tests/benches/browsergym.rs`.
Each way makes one environment and runs `episodes` episodes of an agent that answers at once (its score
included); the rounds alternate which way goes first. Doing nothing must earn 0 on both.

Usage: python resets.py CONFIG_JSON, with {bundle, trace_replay, chromium, episodes, rounds}. Prints one
JSON line: per way ("warm", "cold"), `resets` (`env.reset()` to the first observation, the first of each
environment left out: it launches either way) and `episodes` (seconds for each environment's whole run).
"""

import json
import sys
import time

import gymnasium as gym

import browsergym_trace

config = json.loads(sys.argv[1])
measured = {"warm": {"resets": [], "episodes": []}, "cold": {"resets": [], "episodes": []}}
for round_number in range(config["rounds"]):
    ways = ["warm", "cold"] if round_number % 2 == 0 else ["cold", "warm"]
    for way in ways:
        env_id = browsergym_trace.register(
            config["bundle"], trace_replay=config["trace_replay"], chromium=config["chromium"], warm=way == "warm"
        )[0]
        env = gym.make(env_id, action_mapping=None, headless=True)
        started = time.monotonic()
        for episode in range(config["episodes"]):
            reset_started = time.monotonic()
            env.reset()
            if episode > 0:
                measured[way]["resets"].append(time.monotonic() - reset_started)
            obs, reward, terminated, truncated, info = env.step("send_message_to_user('Done.')")
            result = info["task_info"]["trace_result"]
            if not terminated or reward != 0.0 or result["checkpoints"]["reached_any_order"] != 0:
                raise SystemExit(f"{way} episode {episode}: doing nothing must earn 0, got {reward}: {result}")
        env.close()
        measured[way]["episodes"].append(time.monotonic() - started)
print(json.dumps(measured))
