"""A scripted AgentLab agent for the end-to-end test `tests/tests/agentlab.rs`: no model, a fixed list of
actions per task (Playwright code, BrowserGym's `PythonActionSet`), the last of them its answer. It has to
be importable by AgentLab's workers (Ray's processes unpickle it), so the test puts this folder on
PYTHONPATH.
"""

import os
import time
from dataclasses import dataclass

import bgym
from agentlab.agents.agent_args import AgentArgs
from browsergym.core.action.python import PythonActionSet


class ScriptedAgent(bgym.Agent):
    def __init__(self, scripts: dict[str, tuple[str, ...]]) -> None:
        self.action_set = PythonActionSet()
        self.scripts = scripts
        self.actions: list[str] = []

    def set_task_name(self, task_name: str) -> None:
        # AgentLab names the task to the agent it made for it (`trace.<id>`).
        self.actions = list(self.scripts[task_name])

    def get_action(self, obs: dict) -> tuple[str, dict]:
        # Where and when it acted, so that the test can tell the processes that ran the episodes apart.
        info = {"extra_info": {"pid": os.getpid(), "time": time.time()}}
        if not self.actions:
            return "send_message_to_user('Nothing left to do.')", info
        return self.actions.pop(0), info


@dataclass
class ScriptedAgentArgs(AgentArgs):
    """The actions of every task, by its task name (`trace.<id>`), as pairs so that the arguments hash."""

    agent_name: str = "scripted"
    scripts: tuple[tuple[str, tuple[str, ...]], ...] = ()

    def make_agent(self) -> ScriptedAgent:
        return ScriptedAgent(dict(self.scripts))
