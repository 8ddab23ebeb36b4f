"""The BrowserGym task of one TRACE recording, and the registration of a bundle's or dataset's tasks.

What a task knows of its recording (id, description, start URL, bundle) is read from the bundle's own
files (`manifest.json`, `trajectory.json`) or the dataset's `tasks.jsonl`; everything else, serving and
scoring, is `trace-replay`'s.
"""

from __future__ import annotations

import json
import os
import queue
import re
import shutil
import signal
import socket
import subprocess
import tempfile
import threading
import time
import zipfile
from dataclasses import dataclass
from functools import partial
from pathlib import Path

import gymnasium as gym
import playwright.sync_api
from browsergym.core.env import BrowserEnv
from browsergym.core.task import AbstractBrowserTask

# How long `trace-replay serve` may take to open a bundle and listen, and to write its episode when stopped.
SERVE_START_SECONDS = 60
SERVE_STOP_SECONDS = 60
# The chat roles that end an episode: the agent's answer, and its report that the task cannot be done.
ENDING_ROLES = ("assistant", "infeasible")


@dataclass(frozen=True)
class TraceTaskSpec:
    """One recorded task, as its bundle or dataset describes it."""

    task_id: str
    bundle: Path
    description: str
    start_url: str
    task_type: str


def env_name(task_id: str) -> str:
    """The gym environment name of a task, without `browsergym/`: `trace.<id>` with every character outside
    `[A-Za-z0-9_.-]` made `-`, and a trailing `_` where the id would end like a gym version (`-v2`), which
    gymnasium would read as one."""
    name = "trace." + re.sub(r"[^\w.-]", "-", task_id, flags=re.ASCII)
    if re.search(r"-v\d+$", name):
        name += "_"
    return name


def read_source(source: str | os.PathLike) -> list[TraceTaskSpec]:
    """The tasks of a dataset folder (its `tasks.jsonl`) or of one bundle (a zip or a directory)."""
    path = Path(source)
    tasks_file = path / "tasks.jsonl"
    if tasks_file.is_file():
        specs = []
        for line in tasks_file.read_text(encoding="utf-8").splitlines():
            if not line.strip():
                continue
            task = json.loads(line)
            specs.append(
                TraceTaskSpec(
                    task_id=task["task_id"],
                    bundle=(path / task["bundle"]).resolve(),
                    description=task["task_description"],
                    start_url=_start_url(task.get("tool_calls", []), task["website_url"]),
                    task_type=task.get("task_type", "action"),
                )
            )
        return specs
    manifest = json.loads(_bundle_file(path, "manifest.json"))
    try:
        calls = json.loads(_bundle_file(path, "trajectory.json")).get("tool_calls", [])
    except KeyError:
        calls = []
    task = manifest["task"]
    return [
        TraceTaskSpec(
            task_id=task["id"],
            bundle=path.resolve(),
            description=task["description"],
            start_url=_start_url(calls, task["website"]),
            task_type=task.get("task_type", "action"),
        )
    ]


def _start_url(calls: list[dict], website: str) -> str:
    """Where the demonstration started: its first navigation, else the task's website."""
    for call in calls:
        if call.get("name") == "navigate" and call.get("params", {}).get("url"):
            return call["params"]["url"]
    return website


def _bundle_file(bundle: Path, name: str) -> bytes:
    if bundle.is_dir():
        file = bundle / name
        if not file.is_file():
            raise KeyError(name)
        return file.read_bytes()
    with zipfile.ZipFile(bundle) as archive:
        return archive.read(name)


def register(
    source: str | os.PathLike,
    trace_replay: str | None = None,
    chromium: str | None = None,
) -> list[str]:
    """Registers every task of `source` (a bundle or a dataset folder) as `browsergym/trace.<task id>` and
    returns the environment ids. `trace_replay` is the `trace-replay` binary (default: `TRACE_REPLAY`, else
    the one on PATH); `chromium` the browser BrowserGym launches (default: `TRACE_CHROMIUM`, else Debian's
    `/usr/bin/chromium` when present, else Playwright's own)."""
    trace_replay = trace_replay or os.environ.get("TRACE_REPLAY") or shutil.which("trace-replay")
    if not trace_replay:
        raise FileNotFoundError("trace-replay was not found: put it on PATH or name it with TRACE_REPLAY")
    if chromium is None:
        chromium = os.environ.get("TRACE_CHROMIUM") or (
            "/usr/bin/chromium" if Path("/usr/bin/chromium").is_file() else None
        )
    env_ids = []
    for spec in read_source(source):
        env_id = f"browsergym/{env_name(spec.task_id)}"
        # Registered again (a second call, a Ray worker importing twice) it is the same task.
        gym.registry.pop(env_id, None)
        gym.register(
            id=env_id,
            entry_point=partial(_make_env, spec=spec, trace_replay=trace_replay, chromium=chromium),
            nondeterministic=False,
        )
        env_ids.append(env_id)
    return env_ids


def _make_env(spec: TraceTaskSpec, trace_replay: str, chromium: str | None, **env_kwargs) -> BrowserEnv:
    """A BrowserEnv whose browser goes through the proxy of its own port, chosen now: BrowserGym launches
    the browser before the task's `setup`, which starts the proxy there."""
    port = _free_port()
    chromium_kwargs = {"proxy": {"server": f"http://127.0.0.1:{port}"}}
    if chromium:
        chromium_kwargs["executable_path"] = chromium
    chromium_kwargs |= env_kwargs.pop("pw_chromium_kwargs", {})
    # The proxy's certificates are its own for each HTTPS host of the recording.
    context_kwargs = {"ignore_https_errors": True} | env_kwargs.pop("pw_context_kwargs", {})
    task = partial(TraceTask, spec=spec, proxy_port=port, trace_replay=trace_replay)
    return BrowserEnv(
        task_entrypoint=task,
        pw_chromium_kwargs=chromium_kwargs,
        pw_context_kwargs=context_kwargs,
        **env_kwargs,
    )


def _free_port() -> int:
    with socket.socket(socket.AF_INET, socket.SOCK_STREAM) as probe:
        probe.bind(("127.0.0.1", 0))
        return probe.getsockname()[1]


class TraceTask(AbstractBrowserTask):
    """One recorded task: its bundle served offline by `trace-replay serve --proxy-port`, the person's task
    as the goal, scored by `trace-replay score` once the agent answers."""

    @classmethod
    def get_task_id(cls) -> str:
        return "trace"

    def __init__(self, seed: int, spec: TraceTaskSpec, proxy_port: int, trace_replay: str) -> None:
        super().__init__(seed)
        self.spec = spec
        self.proxy_port = proxy_port
        self.trace_replay = trace_replay
        # A person's pace is the recording's; the agent's is its own.
        self.slow_mo = 0
        self.timeout = 10_000
        episodes = os.environ.get("TRACE_EPISODES")
        if episodes:
            Path(episodes).mkdir(parents=True, exist_ok=True)
        self.episode = Path(tempfile.mkdtemp(prefix=f"{env_name(spec.task_id)}-", dir=episodes))
        self.server: subprocess.Popen | None = None
        self.result: dict | None = None
        # BrowserGym validates the task once after each action the agent takes: its actions, counted as
        # `trace-replay eval` counts an agent's (the answer not among them), for SPL.
        self.actions = 0

    def setup(self, page: playwright.sync_api.Page) -> tuple[str, dict]:
        self._serve()
        page.goto(self.spec.start_url)
        return self.spec.description, {"trace_task_id": self.spec.task_id, "episode": str(self.episode)}

    def validate(self, page: playwright.sync_api.Page, chat_messages: list[dict]) -> tuple[float, bool, str, dict]:
        if self.result is not None:
            return float(self.result["success"]), True, "", {"trace_result": self.result}
        self.actions += 1
        last = chat_messages[-1] if chat_messages else None
        if last is None or last.get("role") not in ENDING_ROLES:
            return 0.0, False, "", {}
        answer = last.get("message") if last["role"] == "assistant" else None
        # The action that answered (or gave up) is not a step, as `done` is not one in `eval`.
        self.result = self._score(answer, steps=self.actions - 1)
        return float(self.result["success"]), True, "", {"trace_result": self.result}

    def teardown(self) -> None:
        self._stop()

    def _serve(self) -> None:
        log = open(self.episode / "serve.log", "wb")
        self.server = subprocess.Popen(
            [
                self.trace_replay,
                "serve",
                str(self.spec.bundle),
                "--proxy-port",
                str(self.proxy_port),
                "--episode",
                str(self.episode / "episode"),
            ],
            stdout=subprocess.PIPE,
            stderr=log,
            text=True,
        )
        log.close()
        # Its lines are read on a thread of their own, so that a server that says nothing is given up on.
        lines: queue.Queue[str | None] = queue.Queue()

        def read(stdout) -> None:
            for line in stdout:
                lines.put(line)
            lines.put(None)

        threading.Thread(target=read, args=(self.server.stdout,), daemon=True).start()
        deadline = time.monotonic() + SERVE_START_SECONDS
        while (left := deadline - time.monotonic()) > 0:
            try:
                line = lines.get(timeout=left)
            except queue.Empty:
                break
            if line is None:
                break
            if line.startswith("press Ctrl+C"):
                return
        self._stop()
        raise RuntimeError(
            f"trace-replay serve did not start: {(self.episode / 'serve.log').read_text(errors='replace')[-2000:]}"
        )

    def _stop(self) -> None:
        """Stops the proxy, which then writes the episode. SIGTERM, not SIGINT: a Ray worker blocks SIGINT,
        and the proxy it starts inherits the blocked mask."""
        server, self.server = self.server, None
        if server is None or server.poll() is not None:
            return
        server.send_signal(signal.SIGTERM)
        # Its output is drained by the thread `_serve` started.
        try:
            server.wait(timeout=SERVE_STOP_SECONDS)
        except subprocess.TimeoutExpired:
            server.kill()
            server.wait()

    def _score(self, answer: str | None, steps: int) -> dict:
        self._stop()
        command = [self.trace_replay, "score", str(self.spec.bundle), "--episode", str(self.episode / "episode"), "--json"]
        command += ["--steps", str(steps)]
        if answer is not None:
            command += ["--answer", answer]
        scored = subprocess.run(command, capture_output=True, text=True)
        if scored.returncode != 0:
            raise RuntimeError(f"trace-replay score failed: {scored.stderr[-2000:]}")
        return json.loads(scored.stdout)
