"""The worker runtime of the suite's ``chatops`` worker subprocesses, configured by ``CHATOPS_TEST_*``.

``CHATOPS_RUNTIME=tests.reliability.runtimes:reliability_runtime``. The model follows the first
user message (``tests.bot.runtimes.plan_step``: ``plan: check_health restart_service``; words
starting with ``#`` are labels), or collects replies (``collect: N`` calls ``check_health`` with
a new argument each turn until N thread replies are in its history, then answers), or asks
Prometheus (``range: QUERY`` calls ``prometheus_range`` over the last minute, then answers; the
tool is there when ``CHATOPS_PROMETHEUS_URL`` is set). Every request
is logged to ``{CHATOPS_TEST_DIR}/model.log`` (pid, text, step) before the model "thinks", so a
test can kill the process mid-request. The tools are ``tests.bot.runtimes``' file-logging tools,
the output filter and the Slack presenter are the production ones (``SLACK_API_URL`` points at the
emulator).

Variables: ``CHATOPS_TEST_MODEL_SLEEP`` seconds every request takes; ``CHATOPS_TEST_SLOW_STEP`` a
step whose first attempt in each run takes ``CHATOPS_TEST_SLOW_SECONDS`` (default 60);
``CHATOPS_TEST_SLEEP_FIRST`` the first execution's sleep of each tool (of the tool named by
``CHATOPS_TEST_SLEEP_TOOL`` only, when set); ``CHATOPS_TEST_CARD_INTERVAL`` the
presenter's card throttle; ``CHATOPS_TEST_FINAL_CARD_DELAY`` seconds the final card update of a
finished run waits (it first writes ``final_card.log``), so a test can act during the report.
"""

from __future__ import annotations

import json
import os
import time
from pathlib import Path
from typing import Any

from agent.scripted import FunctionModel, ScriptItem, last_tool_output, tool_call
from agent.tooling import Tool, ToolCategory
from agent.types import Request
from bot.alerts.jobs import AlertJobs
from bot.alerts.presenter import LoggingAlertPresenter
from bot.keys import Keys
from bot.redis_connection import open_redis
from bot.runs.durability import TIMEOUT_MS as DURABILITY_TIMEOUT_MS
from bot.runs.durability import Durability
from bot.runs.presenter import CardView, RunRef
from bot.runs.runtime import Runtime
from bot.runs.service import RunOptions
from bot.settings import Settings
from bot.slack.delivery.client import make_client
from bot.slack.delivery.presenter import SlackPresenter
from tests.bot.runtimes import FileTool
from tools.builtin.observability import observability_endpoints, observability_tools
from tools.egress import EgressPolicy
from tools.registry import build_output_filter

COLLECT = "collect:"
PLAN = "plan:"
RANGE = "range:"


def first_text(request: Request) -> str:
    return next((m.content or "" for m in request.messages if m.role == "user"), "")


def replies_seen(request: Request) -> list[str]:
    """Thread replies in the history (user messages after the first)."""
    users = [m.content or "" for m in request.messages if m.role == "user"]
    return users[1:]


def steps_done(request: Request) -> int:
    return sum(1 for m in request.messages if m.role == "assistant" and m.tool_calls)


def model_log(directory: Path) -> Path:
    return directory / "model.log"


def logged_requests(directory: Path) -> list[dict[str, Any]]:
    path = model_log(directory)
    if not path.exists():
        return []
    return [json.loads(line) for line in path.read_text().splitlines() if line]


def _log(directory: Path, entry: dict[str, Any]) -> None:
    with open(model_log(directory), "a") as handle:
        handle.write(json.dumps(entry) + "\n")
        handle.flush()
        os.fsync(handle.fileno())


def answer(request: Request, directory: Path) -> ScriptItem:
    text, step = first_text(request), steps_done(request)
    earlier = [e for e in logged_requests(directory) if e["text"] == text and e["step"] == step]
    _log(directory, {"pid": os.getpid(), "text": text, "step": step, "attempt": len(earlier) + 1})
    time.sleep(float(os.environ.get("CHATOPS_TEST_MODEL_SLEEP", "0")))
    slow = os.environ.get("CHATOPS_TEST_SLOW_STEP")
    if slow is not None and int(slow) == step and not earlier:
        time.sleep(float(os.environ.get("CHATOPS_TEST_SLOW_SECONDS", "60")))
    if text.startswith(COLLECT):
        wanted = int(text.removeprefix(COLLECT).split()[0])
        seen = replies_seen(request)
        if len(seen) < wanted:
            return tool_call("check_health", f"collect_{step}", round=step)
        return f"got {len(seen)} replies"
    if text.startswith(RANGE):
        if step == 0:
            return tool_call("prometheus_range", "range_0", query=text.removeprefix(RANGE).strip(), minutes=1)
        return f"done: {(last_tool_output(request.messages) or '')[:300]}"
    plan = [word for word in text.removeprefix(PLAN).split() if not word.startswith("#")]
    if step < len(plan):
        return tool_call(plan[step], f"call_{step}", step=step)
    return f"done: {last_tool_output(request.messages)}"


def tools(directory: Path, settings: Settings) -> list[Tool]:
    sleep = float(os.environ.get("CHATOPS_TEST_SLEEP_FIRST", "0"))
    only = os.environ.get("CHATOPS_TEST_SLEEP_TOOL")
    prometheus, _ = observability_endpoints(
        prometheus_url=settings.chatops_prometheus_url,
        prometheus_headers={},
        alertmanager_url="",
        alertmanager_headers={},
        env=os.environ,
        egress=EgressPolicy(),
    )
    files = [
        FileTool(name, category, directory, sleep if only in (None, name) else 0.0)
        for name, category in (
            ("restart_service", ToolCategory.MUTATING),
            ("check_health", ToolCategory.READ_ONLY),
        )
    ]
    return [*files, *observability_tools(prometheus, None)]


class SlowReportPresenter(SlackPresenter):
    """The Slack presenter, taking its time over a finished run's final card (the report's start)."""

    directory: Path = Path()
    delay: float = 0.0

    def update_run_card(self, run: RunRef, card: CardView) -> None:
        if card.status.terminal and self.delay:
            (self.directory / "final_card.log").write_text(run.run_id)
            time.sleep(self.delay)
        super().update_run_card(run, card)


def reliability_runtime(settings: Settings) -> Runtime:
    directory = Path(os.environ["CHATOPS_TEST_DIR"])
    # As ``default_runtime``: through ``open_redis`` (behind sentinels, the master they name) with room
    # for the durability wait, which behind sentinels also waits for a replica.
    client = open_redis(settings, blocking_seconds=DURABILITY_TIMEOUT_MS / 1000)
    keys = Keys(settings.chatops_redis_prefix)
    presenter = SlowReportPresenter(
        make_client(settings),
        client,
        keys,
        min_interval=float(os.environ.get("CHATOPS_TEST_CARD_INTERVAL", "1")),
    )
    presenter.directory = directory
    presenter.delay = float(os.environ.get("CHATOPS_TEST_FINAL_CARD_DELAY", "0"))
    return Runtime(
        redis=client,
        keys=keys,
        options=RunOptions.from_settings(settings),
        models=[FunctionModel(lambda request: answer(request, directory), model="plan")],
        tools=tools(directory, settings),
        presenter=presenter,
        tool_output_filter=build_output_filter(settings),
        alerts=AlertJobs(LoggingAlertPresenter()),
        owns_connection=True,
        durability=Durability.from_settings(client, keys, settings),
    )
