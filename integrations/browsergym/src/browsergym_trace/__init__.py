"""TRACE recordings as BrowserGym tasks.

`register(source)` registers every task of a TRACE bundle (zip or directory) or dataset (a folder with
`tasks.jsonl`) as the gym environment `browsergym/trace.<task id>`. An episode is served offline by
`trace-replay serve --proxy-port` to the browser BrowserGym launches, and scored as `trace-replay score`
scores, the scorer of `trace-replay eval`. An environment keeps its proxy and its browsers from one episode
to the next: the one thing changed of BrowserGym is that, while its own environment resets, Playwright's
`launch` lends the kept browser. `trace_benchmark(source)` (in
`browsergym_trace.benchmark`, which needs AgentLab) makes the same tasks an AgentLab benchmark.
"""

from .tasks import TraceTask, TraceTaskSpec, env_name, read_source, register

__all__ = ["TraceTask", "TraceTaskSpec", "env_name", "read_source", "register", "trace_benchmark"]


def __getattr__(name: str):
    # Imported on first use only: AgentLab is needed by the benchmark alone, not by BrowserGym's tasks.
    if name == "trace_benchmark":
        from .benchmark import trace_benchmark

        return trace_benchmark
    raise AttributeError(f"module {__name__!r} has no attribute {name!r}")
