"""TRACE recordings as BrowserGym tasks.

`register(source)` registers every task of a TRACE bundle (zip or directory) or dataset (a folder with
`tasks.jsonl`) as the gym environment `browsergym/trace.<task id>`. An episode is served offline by
`trace-replay serve --proxy-port` to the browser BrowserGym launches, and scored by `trace-replay score`,
the scorer of `trace-replay eval`: nothing of BrowserGym is patched.
"""

from .tasks import TraceTask, TraceTaskSpec, env_name, read_source, register

__all__ = ["TraceTask", "TraceTaskSpec", "env_name", "read_source", "register"]
