"""The BrowserGym task of one TRACE recording, and the registration of a bundle's or dataset's tasks.

Everything that decides what an agent may reach is `trace-replay`'s, as in `trace-replay eval`: which tasks
a bundle or dataset holds, where their bundles are and where each starts (`trace-replay list`, which refuses
a bundle outside its dataset, a link, a FIFO, a start page that is no web page), the flags of the browser
(`trace-replay chromium`, which Playwright's executable is pointed at: the task's browser through
BrowserGym's `pw_chromium_kwargs`, its chat window's as Playwright's own build), serving and scoring. What
is done here is only what BrowserGym's own browser needs from inside: its local files refused (`file:`
requests failed through DevTools' `Fetch`) and a page that is no web page (`chrome://`) replaced by a blank
one before the agent's observation; the proxy stopped with the process that started it, and an episode
whose start failed leaves no folder behind.

Resets are warm: an environment keeps one proxy (`trace-replay serve --episodes-on-stdin`, which gives each
episode a matcher, clock and start cookies of its own and scores it) and the browsers BrowserGym launches,
for all its episodes. Each episode still gets browser contexts of its own from BrowserGym, which share
nothing with the last one's: cookies, storage, cache, service workers.
"""

from __future__ import annotations

import atexit
import contextlib
import json
import os
import queue
import re
import shlex
import shutil
import signal
import socket
import subprocess
import tempfile
import threading
import time
import warnings
import zipfile
from dataclasses import dataclass
from functools import partial
from pathlib import Path

import gymnasium as gym
import browsergym.core
import playwright
import playwright.sync_api
from browsergym.core import _get_global_playwright
from browsergym.core.env import BrowserEnv
from browsergym.core.task import AbstractBrowserTask

# How long `trace-replay serve` may take to open a bundle and listen, to write and score an episode, and to
# stop.
SERVE_START_SECONDS = 60
SERVE_ANSWER_SECONDS = 60
SERVE_STOP_SECONDS = 60
# The chat roles that end an episode: the agent's answer, and its report that the task cannot be done.
ENDING_ROLES = ("assistant", "infeasible")
# The schemes a page of the episode may show: the replayed site's, blank and generated pages, and the
# browser's page for a navigation that failed. Another (chrome://, view-source:, file:) is replaced by a blank
# page before the agent sees it.
WEB_SCHEMES = ("http", "https", "about", "data", "blob", "chrome-error")
# The most a bundle's `credentials.json` may hold: a few secrets, never megabytes.
MAX_CREDENTIALS_BYTES = 1 << 20
# What a harness calls in the page before it scores (`trace-replay`'s page/report.js): the page as it is
# then, reported to the proxy's episode, so that text the page's scripts drew a moment ago is judged.
REPORT_NOW = "__trace_replay_report_now__"
# Requests the browser's own DevTools fails: a page of the browser's disk, however it is asked for.
LOCAL_URL_PATTERNS = ("file:*", "filesystem:*")


@dataclass(frozen=True)
class TraceTaskSpec:
    """One recorded task, as its bundle or dataset describes it."""

    task_id: str
    bundle: Path
    description: str
    start_url: str
    task_type: str
    # The paths its audit proved it on ("devtools", "proxy"); empty when never audited or invalid.
    paths: tuple[str, ...] = ()


def read_credentials(bundle: Path) -> dict[str, str]:
    """The task's credentials as `trace-replay eval` gives them to an agent (`TRACE_CREDENTIALS`): each
    placeholder's name (`shop.test.password` for `{{credentials.shop.test.password}}`) and the value that
    signs in to the replayed site (in a redacted bundle, its stand-in). Empty when the bundle has none."""
    if bundle.is_dir():
        path = bundle / "credentials.json"
        if not path.is_file() or path.stat().st_size > MAX_CREDENTIALS_BYTES:
            return {}
        text = path.read_bytes()
    else:
        with zipfile.ZipFile(bundle) as archive:
            try:
                entry = archive.getinfo("credentials.json")
            except KeyError:
                return {}
            if entry.file_size > MAX_CREDENTIALS_BYTES:
                return {}
            text = archive.read(entry)
    names = {}
    for credential in json.loads(text):
        name = credential["placeholder"].removeprefix("{{").removesuffix("}}").removeprefix("credentials.")
        names[name] = credential["value"]
    return names


def goal_with_credentials(description: str, credentials: dict[str, str]) -> str:
    """The task as the agent reads it: its description, and the credentials it is given, which sign in to
    the replayed site (a wrong one does not)."""
    if not credentials:
        return description
    given = "\n".join(f"- {name}: {value}" for name, value in credentials.items())
    return f"{description}\n\nUse these credentials where the site asks for them:\n{given}"


def env_name(task_id: str) -> str:
    """The gym environment name of a task, without `browsergym/`: `trace.<id>` with every character outside
    `[A-Za-z0-9_.-]` made `-`, and a trailing `_` where the id would end like a gym version (`-v2`), which
    gymnasium would read as one."""
    name = "trace." + re.sub(r"[^\w.-]", "-", task_id, flags=re.ASCII)
    if re.search(r"-v\d+$", name):
        name += "_"
    return name


def read_source(source: str | os.PathLike, trace_replay: str | None = None) -> list[TraceTaskSpec]:
    """The tasks of a dataset folder (its `tasks.jsonl`) or of one bundle (a zip or a directory), as
    `trace-replay list` reads them for `trace-replay eval`: the one reading of a dataset, which refuses a
    bundle outside it and a task that starts at no web page."""
    listed = subprocess.run(
        [_trace_replay(trace_replay), "list", str(source), "--json"], capture_output=True, text=True
    )
    if listed.returncode != 0:
        raise ValueError(f"trace-replay refused {source}: {listed.stderr.strip()[-2000:]}")
    return [
        TraceTaskSpec(
            task_id=task["task_id"],
            bundle=Path(task["bundle"]),
            description=task["description"],
            start_url=task["start_url"],
            task_type=task["task_type"],
            paths=tuple(task.get("paths", ())),
        )
        for task in json.loads(listed.stdout)
    ]


def _trace_replay(given: str | None) -> str:
    """The `trace-replay` binary: `given`, else `TRACE_REPLAY`, else the one on PATH."""
    found = given or os.environ.get("TRACE_REPLAY") or shutil.which("trace-replay")
    if not found:
        raise FileNotFoundError("trace-replay was not found: put it on PATH or name it with TRACE_REPLAY")
    return found


def register(
    source: str | os.PathLike,
    trace_replay: str | None = None,
    chromium: str | None = None,
    warm: bool = True,
) -> list[str]:
    """Registers every task of `source` (a bundle or a dataset folder) as `browsergym/trace.<task id>` and
    returns the environment ids. `trace_replay` is the `trace-replay` binary (default: `TRACE_REPLAY`, else
    the one on PATH); `chromium` the browser BrowserGym launches (default: `TRACE_CHROMIUM`, else Debian's
    `/usr/bin/chromium` when present, else Playwright's own). With `warm` (the default) an environment
    keeps its proxy and browsers from one episode to the next; without, each episode starts its own, as
    BrowserGym does alone."""
    trace_replay = _trace_replay(trace_replay)
    if chromium is None:
        chromium = os.environ.get("TRACE_CHROMIUM") or (
            "/usr/bin/chromium" if Path("/usr/bin/chromium").is_file() else None
        )
    env_ids = []
    specs = read_source(source, trace_replay)
    # Tasks served here as their audit never saw them served: a score through this path may differ from
    # `trace-replay eval`'s. Said once per call, naming them.
    unproven = [spec.task_id for spec in specs if "devtools" in spec.paths and "proxy" not in spec.paths]
    if unproven:
        warnings.warn(
            f"the audit did not prove {len(unproven)} task(s) through the proxy this package serves from "
            f"(see `proxy_problems` in their audit.json): {', '.join(unproven)}",
            stacklevel=2,
        )
    for spec in specs:
        env_id = f"browsergym/{env_name(spec.task_id)}"
        # Registered again (a second call, a Ray worker importing twice) it is the same task.
        gym.registry.pop(env_id, None)
        gym.register(
            id=env_id,
            entry_point=partial(_make_env, spec=spec, trace_replay=trace_replay, chromium=chromium, warm=warm),
            nondeterministic=False,
        )
        env_ids.append(env_id)
    return env_ids


def _make_env(spec: TraceTaskSpec, trace_replay: str, chromium: str | None, warm: bool, **env_kwargs) -> BrowserEnv:
    """A BrowserEnv whose browser goes through the proxy of its own port, chosen now: BrowserGym launches
    the browser before the task's `setup`, which starts the proxy there (at the first reset) or begins its
    next episode."""
    port = _free_port()
    given = dict(env_kwargs.pop("pw_chromium_kwargs", {}))
    # A browser of the caller's choosing runs through the same script, with the same flags.
    executable = given.pop("executable_path", None) or chromium
    offline = _offline_chromium(trace_replay, executable)
    if executable is not None:
        _as_playwrights_chromium(offline)
    chromium_kwargs = {"proxy": {"server": f"http://127.0.0.1:{port}"}, "executable_path": offline}
    chromium_kwargs |= given
    # The proxy's certificates are its own for each HTTPS host of the recording.
    context_kwargs = {"ignore_https_errors": True} | env_kwargs.pop("pw_context_kwargs", {})
    proxy = _KeptProxy(trace_replay, spec, port, kept=warm)
    return TraceBrowserEnv(
        proxy=proxy,
        warm=warm,
        task_entrypoint=partial(TraceTask, spec=spec, proxy=proxy),
        pw_chromium_kwargs=chromium_kwargs,
        pw_context_kwargs=context_kwargs,
        **env_kwargs,
    )


class TraceBrowserEnv(BrowserEnv):
    """BrowserGym's environment, its resets warm: the proxy and the browsers are kept from one episode to
    the next (`_KeptBrowsers`), and both go when the environment is closed. Not `warm`, each reset launches
    its browsers, as BrowserGym does alone."""

    def __init__(self, *, proxy: _KeptProxy, warm: bool, **kwargs) -> None:
        super().__init__(**kwargs)
        self._proxy = proxy
        self._browsers = _KeptBrowsers() if warm else None

    def reset(self, *args, **kwargs):
        if self._browsers is None:
            return super().reset(*args, **kwargs)
        with self._browsers.lent():
            return super().reset(*args, **kwargs)

    def close(self) -> None:
        try:
            super().close()
        finally:
            if self._browsers is not None:
                self._browsers.close()
            self._proxy.stop()


class _KeptBrowsers:
    """The browsers BrowserGym launches at every reset (the task's and its chat window's), launched at an
    environment's first reset and lent to the resets after. BrowserGym closes both and launches them again
    at each reset, with no way to keep them: for the length of a reset, the Playwright `launch` it calls
    lends the kept browser launched with the same arguments instead (a new one if it has gone). BrowserGym
    still opens a new browser context for each episode, and closing the lent browser closes those: a
    context shares no cookies, storage, cache or service workers with another."""

    def __init__(self) -> None:
        self._kept: dict[str, playwright.sync_api.Browser] = {}

    @contextlib.contextmanager
    def lent(self):
        chromium = _get_global_playwright().chromium
        launch = chromium.launch

        def lend(**kwargs) -> _LentBrowser:
            key = json.dumps(kwargs, sort_keys=True, default=str)
            browser = self._kept.get(key)
            if browser is None or not browser.is_connected():
                browser = self._kept[key] = launch(**kwargs)
            return _LentBrowser(browser)

        # On this object alone, and only while the reset runs: every other launch is Playwright's own.
        chromium.launch = lend
        try:
            yield
        finally:
            del chromium.launch

    def close(self) -> None:
        browsers, self._kept = list(self._kept.values()), {}
        for browser in browsers:
            with contextlib.suppress(playwright.sync_api.Error):
                browser.close()


class _LentBrowser:
    """A kept browser as one reset's: it is the browser, but closing it closes only the contexts opened
    through it, and the browser waits for the next reset."""

    def __init__(self, browser: playwright.sync_api.Browser) -> None:
        self._browser = browser
        self._contexts: list[playwright.sync_api.BrowserContext] = []

    def new_context(self, **kwargs) -> playwright.sync_api.BrowserContext:
        context = self._browser.new_context(**kwargs)
        self._contexts.append(context)
        return context

    def close(self, **_) -> None:
        contexts, self._contexts = self._contexts, []
        for context in contexts:
            with contextlib.suppress(playwright.sync_api.Error):
                context.close()

    def __getattr__(self, name: str):
        return getattr(self._browser, name)


class _KeptProxy:
    """`trace-replay serve BUNDLE --proxy-port P --episodes-on-stdin` of one environment: started at its first
    reset, it serves each episode, recording it into the folder `begin` names, and writes and scores it
    when asked (`end`), as `trace-replay score` would. Its standard input is a pipe this process alone
    holds: when this process ends, however (killed included), the proxy writes the episode it has and
    stops. One that has gone (crashed) is started again at the next reset; one not `kept` is stopped at
    the end of each episode, and each reset starts its own."""

    def __init__(self, trace_replay: str, spec: TraceTaskSpec, port: int, kept: bool = True) -> None:
        self.trace_replay = trace_replay
        self.spec = spec
        self.port = port
        self.kept = kept
        self.process: subprocess.Popen | None = None
        self.log: Path | None = None
        self._lines: queue.Queue[str | None] = queue.Queue()

    def begin(self, episode: Path) -> None:
        """Records what crosses the proxy from now on into `episode`, starting the proxy if it is not
        running."""
        if self.process is None or self.process.poll() is not None:
            self._start()
        self._ask({"begin": {"episode": str(episode)}})

    def end(self, answer: str | None = None, steps: int | None = None, score: bool = True) -> dict | None:
        """Ends the episode: written, and with `score` scored; returns its `result.json`."""
        ended = self._ask({"end": {"answer": answer, "steps": steps, "score": score}})
        if not self.kept:
            self.stop()
        return ended["ended"].get("result")

    def _ask(self, asked: dict) -> dict:
        try:
            self.process.stdin.write(json.dumps(asked) + "\n")
            self.process.stdin.flush()
            line = self._lines.get(timeout=SERVE_ANSWER_SECONDS)
        except (OSError, queue.Empty):
            line = None
        if line is None:
            self.stop()
            raise RuntimeError(f"trace-replay serve did not answer: {self._log_tail()}")
        answered = json.loads(line)
        if "error" in answered:
            raise RuntimeError(f"trace-replay serve refused {asked}: {answered['error']}")
        return answered

    def _start(self) -> None:
        episodes = os.environ.get("TRACE_EPISODES")
        log, name = tempfile.mkstemp(prefix=f"{env_name(self.spec.task_id)}-proxy-", suffix=".log", dir=episodes)
        self.log = Path(name)
        self.process = subprocess.Popen(
            [
                self.trace_replay,
                "serve",
                str(self.spec.bundle),
                "--proxy-port",
                str(self.port),
                "--episodes-on-stdin",
            ],
            stdin=subprocess.PIPE,
            stdout=subprocess.PIPE,
            stderr=log,
            text=True,
            # One log for all the environment's episodes: its warnings (each request's answer is in the
            # episode's session), unless TRACE_LOG asks for more; plain text, a file's.
            env=os.environ | {"TRACE_LOG": os.environ.get("TRACE_LOG", "warn"), "NO_COLOR": "1"},
        )
        os.close(log)
        # Its lines are read on a thread of their own, so that a server that says nothing is given up on.
        self._lines = lines = queue.Queue()

        def read(stdout) -> None:
            for line in stdout:
                lines.put(line)
            lines.put(None)

        threading.Thread(target=read, args=(self.process.stdout,), daemon=True).start()
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
        self.stop()
        error = f"trace-replay serve did not start: {self._log_tail()}"
        # Nothing of a proxy that never started is kept: what went wrong is in the error.
        self.log.unlink(missing_ok=True)
        raise RuntimeError(error)

    def _log_tail(self) -> str:
        return self.log.read_text(errors="replace")[-2000:] if self.log else ""

    def stop(self) -> None:
        """Stops the proxy, which writes the episode it records, if any. Its input closed, as when this
        process ends; SIGTERM if it does not stop, then SIGKILL."""
        process, self.process = self.process, None
        if process is None or process.poll() is not None:
            return
        with contextlib.suppress(OSError):
            process.stdin.close()
        try:
            process.wait(timeout=SERVE_STOP_SECONDS)
        except subprocess.TimeoutExpired:
            process.send_signal(signal.SIGTERM)
            try:
                process.wait(timeout=SERVE_STOP_SECONDS)
            except subprocess.TimeoutExpired:
                process.kill()
                process.wait()


# The scripts Playwright runs as its browser, by (trace-replay, Chromium): made once per process.
_OFFLINE_CHROMIUMS: dict[tuple[str, str], str] = {}


def _offline_chromium(trace_replay: str, chromium: str | None) -> str:
    """A script that runs `chromium` (Playwright's own when None) through `trace-replay chromium`, which adds
    the flags `trace-replay` gives its own browser: no background traffic, WebRTC only through the proxy,
    no mDNS. Playwright takes no flags through BrowserGym (`args` is BrowserGym's), but it takes an
    executable."""
    chromium = chromium or _get_global_playwright().chromium.executable_path
    key = (trace_replay, chromium)
    if key not in _OFFLINE_CHROMIUMS:
        folder = tempfile.mkdtemp(prefix="browsergym-trace-")
        atexit.register(shutil.rmtree, folder, True)
        script = Path(folder) / "chromium"
        script.write_text(
            "#!/bin/sh\n"
            f"exec {shlex.quote(trace_replay)} chromium --chromium {shlex.quote(chromium)} -- \"$@\"\n"
        )
        script.chmod(0o755)
        _OFFLINE_CHROMIUMS[key] = str(script)
    return _OFFLINE_CHROMIUMS[key]


def _as_playwrights_chromium(executable: str) -> None:
    """Makes `executable` the Chromium Playwright calls its own, for the browser BrowserGym launches without
    naming one (its chat window: `Chat` takes no launch arguments), so that no browser of an episode needs
    `playwright install` or runs without TRACE's flags. Playwright looks for its build in
    `PLAYWRIGHT_BROWSERS_PATH`, read when its driver starts (BrowserGym's first `reset` in this process):
    a folder laid out as Playwright's (`chromium-<revision>/chrome-linux/chrome`) whose `chrome` is
    `executable`, named there for the driver to come."""
    folder = Path(executable).parent / "ms-playwright"
    if not folder.is_dir():
        browsers = json.loads((Path(playwright.__file__).parent / "driver/package/browsers.json").read_text())
        revision = next(browser["revision"] for browser in browsers["browsers"] if browser["name"] == "chromium")
        build = folder / f"chromium-{revision}"
        for layout in (("chrome-linux", "chrome"), ("chrome-mac", "Chromium.app", "Contents", "MacOS", "Chromium")):
            (build / Path(*layout)).parent.mkdir(parents=True, exist_ok=True)
            (build / Path(*layout)).symlink_to(executable)
        # Playwright checks the libraries of its own build once (`ldd`); this one is the system's.
        (build / "DEPENDENCIES_VALIDATED").touch()
    if os.environ.get("PLAYWRIGHT_BROWSERS_PATH") != str(folder):
        if browsergym.core._PLAYWRIGHT is not None:
            warnings.warn(
                "Playwright was started before this environment was made: BrowserGym's chat window runs "
                "Playwright's own Chromium (`playwright install chromium`), without TRACE's flags",
                stacklevel=3,
            )
        os.environ["PLAYWRIGHT_BROWSERS_PATH"] = str(folder)


def _free_port() -> int:
    with socket.socket(socket.AF_INET, socket.SOCK_STREAM) as probe:
        probe.bind(("127.0.0.1", 0))
        return probe.getsockname()[1]


class TraceTask(AbstractBrowserTask):
    """One recorded task: its bundle served offline by the environment's kept proxy (`trace-replay serve
    --proxy-port --episodes-on-stdin`), the person's task as the goal, scored as `trace-replay score` scores
    an episode once the agent answers."""

    @classmethod
    def get_task_id(cls) -> str:
        return "trace"

    def __init__(self, seed: int, spec: TraceTaskSpec, proxy: _KeptProxy) -> None:
        super().__init__(seed)
        self.spec = spec
        self.proxy = proxy
        # A person's pace is the recording's; the agent's is its own.
        self.slow_mo = 0
        self.timeout = 10_000
        # The episode's folder, made when the episode starts (`setup`), which BrowserGym calls once its
        # browsers run: a reset that fails before or in it leaves none.
        self.episode: Path | None = None
        # Whether the proxy records this episode still: from `setup` until it is scored or torn down.
        self.recording = False
        self.result: dict | None = None
        # BrowserGym validates the task once after each action the agent takes: its actions, counted as
        # `trace-replay eval` counts an agent's (the answer not among them), for SPL.
        self.actions = 0
        # The browser's DevTools session that refuses its local files, held for the episode.
        self._local_files_refused: playwright.sync_api.CDPSession | None = None

    def setup(self, page: playwright.sync_api.Page) -> tuple[str, dict]:
        episodes = os.environ.get("TRACE_EPISODES")
        if episodes:
            Path(episodes).mkdir(parents=True, exist_ok=True)
        self.episode = Path(tempfile.mkdtemp(prefix=f"{env_name(self.spec.task_id)}-", dir=episodes))
        try:
            self.proxy.begin(self.episode / "episode")
            self.recording = True
            self._refuse_local_files(page.context.browser)
            page.goto(self.spec.start_url)
        except BaseException:
            # Nothing of an episode that never started is kept: what went wrong is in the error.
            self.teardown()
            shutil.rmtree(self.episode, ignore_errors=True)
            self.episode = None
            raise
        credentials = read_credentials(self.spec.bundle)
        goal = goal_with_credentials(self.spec.description, credentials)
        return goal, {"trace_task_id": self.spec.task_id, "episode": str(self.episode)}

    def _refuse_local_files(self, browser: playwright.sync_api.Browser) -> None:
        """Fails every request of the browser's disk (`file:`), in every tab: paused by DevTools' `Fetch` on
        the browser's own session, which sees all of them, and failed as a blocked one. The session is the
        episode's: the kept browser's next episode opens its own."""
        session = browser.new_browser_cdp_session()

        def refuse(event: dict) -> None:
            session.send("Fetch.failRequest", {"requestId": event["requestId"], "errorReason": "BlockedByClient"})

        session.on("Fetch.requestPaused", refuse)
        session.send("Fetch.enable", {"patterns": [{"urlPattern": pattern} for pattern in LOCAL_URL_PATTERNS]})
        self._local_files_refused = session

    def validate(self, page: playwright.sync_api.Page, chat_messages: list[dict]) -> tuple[float, bool, str, dict]:
        # Called after every step and before the observation: the agent never sees a browser's page.
        for shown in page.context.pages:
            if shown.url and shown.url.split(":", 1)[0].lower() not in WEB_SCHEMES:
                shown.goto("about:blank")
        if self.result is not None:
            return float(self.result["success"]), True, "", {"trace_result": self.result}
        self.actions += 1
        last = chat_messages[-1] if chat_messages else None
        if last is None or last.get("role") not in ENDING_ROLES:
            return 0.0, False, "", {}
        answer = last.get("message") if last["role"] == "assistant" else None
        for shown in page.context.pages:
            try:
                shown.evaluate("(name) => globalThis[name]?.()", REPORT_NOW)
            except playwright.sync_api.Error:
                pass  # A page gone or not the replay's: nothing of it to report.
        # The action that answered (or gave up) is not a step, as `done` is not one in `eval`.
        self.recording = False
        self.result = self.proxy.end(answer, steps=self.actions - 1)
        return float(self.result["success"]), True, "", {"trace_result": self.result}

    def teardown(self) -> None:
        session, self._local_files_refused = self._local_files_refused, None
        if session is not None:
            with contextlib.suppress(playwright.sync_api.Error):
                session.detach()
        if self.recording:
            # Given up before it answered: written as it is, not scored.
            self.recording = False
            with contextlib.suppress(RuntimeError):
                self.proxy.end(score=False)
