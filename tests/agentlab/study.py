"""An AgentLab study of TRACE tasks, run by the end-to-end test `tests/tests/agentlab.rs`: the scripted agent
of `scripted_agent.py` over every task of a dataset (`browsergym_trace.trace_benchmark`), through AgentLab's
own `make_study(...).run`, on the backend and with the workers the test names.

Usage: python study.py CONFIG_JSON, with {dataset, trace_replay, chromium, scripts: {task name: [actions]},
backend, n_jobs, results}. The backend is one of AgentLab's ("sequential", "ray": a Ray cluster `run` starts
with n_jobs CPUs), or "ray-cluster": the Ray cluster already running at RAY_ADDRESS, through
`browsergym_trace.benchmark.run_on_cluster`. Prints one JSON line: {benchmark, benchmark_column (the values
of the `env.benchmark` column of `study.get_results()`), seconds, driver_pid, tasks: {task name: {reward,
terminated, error, pids, started, ended}}}.
"""

import json
import logging
import os
import sys
import time

from agentlab.experiments.loop import yield_all_exp_results
from agentlab.experiments.study import make_study

from browsergym_trace import trace_benchmark
from browsergym_trace.benchmark import run_on_cluster
from scripted_agent import ScriptedAgentArgs

config = json.loads(sys.argv[1])
benchmark = trace_benchmark(config["dataset"], trace_replay=config["trace_replay"], chromium=config["chromium"])
agent = ScriptedAgentArgs(scripts=tuple((task, tuple(actions)) for task, actions in config["scripts"].items()))
study = make_study(agent, benchmark, logging_level_stdout=logging.WARNING)
started = time.monotonic()
if config["backend"] == "ray-cluster":
    run_on_cluster(study, exp_root=config["results"])
else:
    # One trial: a relaunch would hide an episode that failed.
    study.run(n_jobs=config["n_jobs"], parallel_backend=config["backend"], n_relaunch=1, exp_root=config["results"])
seconds = time.monotonic() - started

tasks = {}
for result in yield_all_exp_results(study.dir, progress_fn=None):
    summary = result.summary_info
    extras = [step.agent_info.get("extra_info") or {} for step in result.steps_info if step.agent_info]
    tasks[result.exp_args.env_args.task_name] = {
        "reward": summary.get("cum_reward"),
        "terminated": summary.get("terminated"),
        "error": summary.get("err_msg"),
        "pids": sorted({extra["pid"] for extra in extras if "pid" in extra}),
        "started": min((extra["time"] for extra in extras if "time" in extra), default=None),
        "ended": max((extra["time"] for extra in extras if "time" in extra), default=None),
    }
result_df, _, _ = study.get_results()
benchmark_column = sorted(set(result_df.reset_index()["env.benchmark"]))
print(json.dumps({"benchmark": benchmark.name, "benchmark_column": benchmark_column, "seconds": seconds, "driver_pid": os.getpid(), "tasks": tasks}))
