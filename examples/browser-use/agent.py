"""A browser-use agent for `trace-replay eval`: it drives the replayed site through the browser that
`trace-replay` serves, with the task and credentials the runner puts in its environment, and answers in
`TRACE_OUT/done.json` (browser-use's own `done`: its final text and whether it thinks it succeeded).

    pip install browser-use            # 0.7 or later
    export OPENAI_API_KEY=...          # and OPENAI_BASE_URL for any OpenAI-compatible endpoint
    trace-replay eval BUNDLE.zip --agent "python examples/browser-use/agent.py" --out runs/browser-use

The model is `TRACE_AGENT_MODEL` (default gpt-4.1-mini). Not run in CI: there is no model there.
"""

import asyncio
import json
import os
import pathlib

from browser_use import Agent, Browser, ChatOpenAI


async def main() -> None:
    task = os.environ["TRACE_TASK"]
    start_url = os.environ["TRACE_START_URL"]
    out = pathlib.Path(os.environ["TRACE_OUT"])
    # Placeholder name -> value: browser-use shows the model the names only and types the values itself.
    credentials = json.loads(pathlib.Path(os.environ["TRACE_CREDENTIALS"]).read_text())
    if os.environ.get("TRACE_TASK_TYPE") == "information_retrieval":
        task += "\nWhen you have the answer, finish with it as your final text, and nothing else."

    browser = Browser(cdp_url=os.environ["TRACE_CDP_URL"])
    agent = Agent(
        task=f"{task}\nStart at {start_url}.",
        llm=ChatOpenAI(model=os.environ.get("TRACE_AGENT_MODEL", "gpt-4.1-mini")),
        browser=browser,
        sensitive_data=credentials or None,
    )
    history = await agent.run(max_steps=int(os.environ.get("TRACE_AGENT_MAX_STEPS", "40")))
    if history.is_done():
        done = {"text": history.final_result() or "", "success": bool(history.is_successful())}
        (out / "done.json").write_text(json.dumps(done))


if __name__ == "__main__":
    asyncio.run(main())
