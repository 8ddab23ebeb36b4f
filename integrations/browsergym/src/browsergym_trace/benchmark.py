"""A TRACE dataset as an AgentLab benchmark: `trace_benchmark(source)` is a `bgym.Benchmark` whose
`env_args_list` are the source's tasks, named after the benchmark in AgentLab's results, for
`agentlab.experiments.study.make_study(...).run(n_jobs=N, parallel_backend="ray")`, which starts a Ray
cluster of this machine, listening on 127.0.0.1 alone unless the person says otherwise;
`run_on_cluster(study, address)` runs the same study on a Ray cluster already running.

AgentLab pickles each experiment's environment arguments to the process that runs it (a Ray worker, a joblib
process). A worker has never seen the driver's `register` call, so the arguments are `TraceEnvArgs`, which
carry their source and register it in whichever process makes the environment: unpickling them imports this
package there. Needs `agentlab` (which brings `browsergym-experiments`); the rest of the package does not.
"""

from __future__ import annotations

import hashlib
import os
import re
import sys
import warnings
from dataclasses import dataclass
from importlib.metadata import version
from pathlib import Path

import bgym
from agentlab.experiments.loop import EnvArgs

from .tasks import env_name, read_source, register

# How AgentLab reads a benchmark's name: one that starts with one of these is taken for that benchmark (its
# version looked up, its tasks' packages imported), and one that contains "webarena" anywhere is run one
# agent at a time, since WebArena's servers need a reset between agents.
RESERVED_PREFIXES = ("miniwob", "workarena", "webarena", "visualwebarena", "weblinx", "assistantbench")

# BrowserGym's high-level actions a TRACE task offers an agent that uses them (`set_benchmark`): the page's
# elements by bid, navigation and tabs (a recording may open tabs), the chat for the answer, and reporting
# a task infeasible.
ACTION_SUBSETS = ("chat", "infeas", "bid", "nav", "tab")

# Sources this process has registered, so that a worker running many episodes registers each once.
_registered: set[tuple[str, str | None, str | None]] = set()


@dataclass
class TraceEnvArgs(EnvArgs):
    """AgentLab's environment arguments for one TRACE task, with what registering it needs: the bundle or
    dataset it is in, and the `trace-replay` and Chromium to serve it with (None: as `register` chooses);
    and the name of its benchmark, which AgentLab's results show as `env.benchmark` (without it, AgentLab
    takes the task name's first word: "trace" for every TRACE task)."""

    source: str = ""
    benchmark: str | None = None
    trace_replay: str | None = None
    chromium: str | None = None

    def make_env(self, action_mapping, exp_dir, exp_task_kwargs: dict = {}, use_raw_page_output=True):
        key = (self.source, self.trace_replay, self.chromium)
        if key not in _registered:
            register(self.source, trace_replay=self.trace_replay, chromium=self.chromium)
            _registered.add(key)
        return super().make_env(action_mapping, exp_dir, exp_task_kwargs, use_raw_page_output)


@dataclass
class TraceBenchmark(bgym.Benchmark):
    """A `bgym.Benchmark` of TRACE tasks, whose version (for AgentLab's reproducibility record) names this
    package and the source's contents."""

    source_digest: str = ""

    def get_version(self) -> str:
        return f"browsergym-trace {version('browsergym-trace')}, source {self.source_digest}"

    def prepare_backends(self, local_ray_on_loopback: bool = True) -> None:
        """What AgentLab's `study.run` calls just before it runs the experiments, starting a Ray of this
        machine for `parallel_backend="ray"` (`ray.init(num_cpus=N)`): that Ray listens on 127.0.0.1 alone
        (`_ray_on_loopback`). `run_on_cluster`, which joins a cluster, says False."""
        super().prepare_backends()
        if local_ray_on_loopback:
            _ray_on_loopback()


def _ray_on_loopback() -> None:
    """Makes the Ray that this process starts next listen on 127.0.0.1 alone, unless the person chose where
    (`RAY_ENABLE_WINDOWS_OR_OSX_CLUSTER` set, or `RAY_ADDRESS` naming a cluster). On Linux a Ray started by
    `ray.init()` listens on every interface (its GCS server, raylet and workers on `*`, its agents on the
    machine's address) so that other machines may join it; with `RAY_ENABLE_WINDOWS_OR_OSX_CLUSTER=0`, read
    when Ray is imported and passed to every process it starts, it is a cluster of this machine alone, as on
    macOS and Windows. A Ray imported before, without it, cannot be changed: a warning says so."""
    if "RAY_ENABLE_WINDOWS_OR_OSX_CLUSTER" in os.environ or os.environ.get("RAY_ADDRESS"):
        return
    os.environ["RAY_ENABLE_WINDOWS_OR_OSX_CLUSTER"] = "0"
    constants = sys.modules.get("ray._private.ray_constants")
    if constants is not None and getattr(constants, "ENABLE_RAY_CLUSTER", False):
        warnings.warn(
            "Ray was imported before the study started: the Ray it starts listens on every interface. Set "
            "RAY_ENABLE_WINDOWS_OR_OSX_CLUSTER=0 before importing ray to keep it on 127.0.0.1",
            stacklevel=3,
        )


def trace_benchmark(
    source: str | os.PathLike,
    name: str | None = None,
    max_steps: int = 30,
    headless: bool = True,
    trace_replay: str | None = None,
    chromium: str | None = None,
) -> TraceBenchmark:
    """Every task of `source` (a dataset folder with `tasks.jsonl`, or one bundle) as an AgentLab benchmark,
    named `name` (default: `trace-` and the source's file name). Each task runs at most `max_steps` steps.

    The name may not start like one of AgentLab's own benchmarks, nor contain "webarena" (see
    `RESERVED_PREFIXES`): AgentLab would treat the study as that benchmark's."""
    path = Path(source).resolve()
    name = name or "trace-" + re.sub(r"[^\w.-]", "-", path.stem, flags=re.ASCII)
    lowered = name.lower()
    if lowered.startswith(RESERVED_PREFIXES) or "webarena" in lowered:
        raise ValueError(
            f"benchmark name {name!r}: AgentLab takes a name that starts with one of {RESERVED_PREFIXES} or "
            "contains 'webarena' for its own benchmark of that name; choose another with name="
        )
    specs = read_source(path, trace_replay)
    env_args_list = [
        TraceEnvArgs(
            task_name=env_name(spec.task_id),
            task_seed=0,
            max_steps=max_steps,
            headless=headless,
            source=str(path),
            benchmark=name,
            trace_replay=trace_replay,
            chromium=chromium,
        )
        for spec in specs
    ]
    return TraceBenchmark(
        name=name,
        high_level_action_set_args=bgym.HighLevelActionSetArgs(subsets=ACTION_SUBSETS),
        is_multi_tab=True,
        # A replay is deterministic: another seed is the same episode.
        supports_parallel_seeds=False,
        backends=[],
        env_args_list=env_args_list,
        source_digest=_digest(path),
    )


def run_on_cluster(study, address: str = "auto", exp_root: str | os.PathLike | None = None, **ray_init_kwargs):
    """Runs an AgentLab `study` (of any benchmark) on the Ray cluster at `address`, with AgentLab's own Ray
    runner, its files under `exp_root` (default: AgentLab's results folder), and returns
    `study.get_results()`.

    `study.run(parallel_backend="ray")` cannot: it starts a cluster of its own with `ray.init(num_cpus=N)`,
    which Ray refuses when `RAY_ADDRESS` names an existing one. Here the study is prepared and saved as
    `run` does, the driver connects to `address` (`ray_init_kwargs`, such as `runtime_env`, go to
    `ray.init`), and AgentLab's `execute_task_graph` gives each experiment to the cluster, which runs as
    many at once as it has CPUs. Experiments that failed are not launched again (`run` retries them)."""
    import ray
    from agentlab.experiments.graph_execution_ray import execute_task_graph

    study.set_reproducibility_info(strict_reproducibility=False, comment=study.comment)
    study.save(**({"exp_root": exp_root} if exp_root is not None else {}))
    if isinstance(study.benchmark, TraceBenchmark):
        # A cluster is the person's choice: where it listens is theirs.
        study.benchmark.prepare_backends(local_ray_on_loopback=False)
    else:
        study.benchmark.prepare_backends()
    for exp_args in study.exp_args_list:
        exp_args.agent_args.prepare()
        exp_args.prepare(exp_root=study.dir)
    ray.init(address=address, **ray_init_kwargs)
    try:
        execute_task_graph(study.exp_args_list, avg_step_timeout=study.avg_step_timeout)
    finally:
        ray.shutdown()
        for exp_args in study.exp_args_list:
            exp_args.agent_args.close()
    return study.get_results()


def _digest(path: Path) -> str:
    """The first 16 hex digits of the SHA-256 of the dataset's `tasks.jsonl`, or of the bundle itself (its
    manifest, for a directory)."""
    if path.is_dir():
        path = path / "tasks.jsonl" if (path / "tasks.jsonl").is_file() else path / "manifest.json"
    digest = hashlib.sha256()
    with open(path, "rb") as file:
        for block in iter(lambda: file.read(1 << 20), b""):
            digest.update(block)
    return digest.hexdigest()[:16]
