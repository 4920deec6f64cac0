"""Runtimes for the worker tests: a plan-following scripted model and tools that log every execution.

``subprocess_runtime`` is what worker subprocesses load (``CHATOPS_RUNTIME=tests.bot.runtimes:subprocess_runtime``);
in-process tests build ``Runtime`` objects directly with ``plan_model`` and ``FileTool``s.
Executions are counted in files, so they survive a SIGKILLed worker and span processes.
"""

from __future__ import annotations

import json
import os
import signal
import time
from dataclasses import dataclass, replace
from pathlib import Path
from typing import Any

import redis

from agent.scripted import FunctionModel, ScriptItem, last_tool_output, tool_call
from agent.tooling import ToolCategory, ToolResult
from agent.types import Request, ToolCall, ToolDef
from bot.keys import Keys
from bot.runs.presenter import LoggingPresenter
from bot.runs.runtime import Runtime
from bot.runs.service import MAX_RUN_ATTEMPTS, RunOptions
from bot.settings import Settings

PLAN_PREFIX = "plan:"


@dataclass
class FileTool:
    """Appends one JSON line per execution to ``{directory}/{name}.log``; can sleep on its first one."""

    name: str
    category: ToolCategory
    directory: Path
    sleep_first: float = 0.0
    parallel: bool = False
    timeout: float = 60.0

    @property
    def definition(self) -> ToolDef:
        return ToolDef(name=self.name, description=f"The {self.name} test tool.")

    @property
    def log(self) -> Path:
        return self.directory / f"{self.name}.log"

    def execute(self, arguments: str, *, timeout: float) -> ToolResult:
        line = json.dumps({"pid": os.getpid(), "arguments": json.loads(arguments)}) + "\n"
        with open(self.log, "a") as handle:
            handle.write(line)
            handle.flush()
            os.fsync(handle.fileno())
        if os.environ.get("CHATOPS_TEST_CRASH") == self.name:
            os.kill(os.getpid(), signal.SIGKILL)  # the worker dies with the tool, every time
        if self.sleep_first and len(executions(self.log)) == 1:
            time.sleep(self.sleep_first)
        return ToolResult(f"{self.name} ok")

    def preview(self, arguments: str, *, timeout: float) -> ToolResult | None:
        return None


def executions(log: Path) -> list[dict[str, Any]]:
    """Every logged execution of a ``FileTool``, oldest first."""
    if not log.exists():
        return []
    return [json.loads(line) for line in log.read_text().splitlines() if line]


def plan_step(request: Request) -> ScriptItem:
    """Follow the plan in the first user message: ``plan: tool_a tool_b`` calls them one per turn, then answers.

    Calls get ids ``call_0``, ``call_1``, ... in plan order, so a resumed run continues where it was.
    """
    first = next(m for m in request.messages if m.role == "user")
    plan = (first.content or "").removeprefix(PLAN_PREFIX).split()
    done = sum(1 for m in request.messages if m.role == "assistant" and m.tool_calls)
    if done < len(plan):
        return tool_call(plan[done], f"call_{done}", step=done)
    return f"done: {last_tool_output(request.messages)}"


def plan_model() -> FunctionModel:
    return FunctionModel(plan_step, model="plan")


def file_tools(directory: Path, sleep_first: float = 0.0) -> list[FileTool]:
    return [
        FileTool("restart_service", ToolCategory.MUTATING, directory, sleep_first),
        FileTool("check_health", ToolCategory.READ_ONLY, directory, sleep_first),
    ]


def hello_step(request: Request) -> ScriptItem:
    """Call the hostile MCP server's ``hello`` once (``tests.support.mcp_servers``), then answer."""
    if any(m.role == "tool" for m in request.messages):
        return f"done: {last_tool_output(request.messages)}"
    return ToolCall(id="call_0", name="hostile_hello", arguments=json.dumps({"name": "run"}))


def mcp_runtime(settings: Settings) -> Runtime:
    """A worker subprocess's runtime with the real tool registry (``CHATOPS_TOOLS_FILE``: its MCP
    servers) and a model that calls ``hostile_hello``."""
    from tools.registry import build_registry_from_settings

    registry = build_registry_from_settings(settings)
    return Runtime(
        redis=redis.Redis.from_url(settings.redis_url),
        keys=Keys(settings.chatops_redis_prefix),
        options=RunOptions.from_settings(settings),
        models=[FunctionModel(hello_step, model="hello")],
        tools=registry.tools(),
        on_close=registry.close,
        presenter=LoggingPresenter(),
        owns_connection=True,
    )


def subprocess_runtime(settings: Settings) -> Runtime:
    """The runtime of worker subprocesses in tests (configured by ``CHATOPS_TEST_*`` variables)."""
    directory = Path(os.environ["CHATOPS_TEST_DIR"])
    sleep_first = float(os.environ.get("CHATOPS_TEST_SLEEP_FIRST", "0"))
    # Fewer attempts than the constant, for a test that crashes every worker a run reaches.
    attempts = int(os.environ.get("CHATOPS_TEST_MAX_RUN_ATTEMPTS", MAX_RUN_ATTEMPTS))
    return Runtime(
        redis=redis.Redis.from_url(settings.redis_url),
        keys=Keys(settings.chatops_redis_prefix),
        options=replace(RunOptions.from_settings(settings), max_attempts=attempts),
        models=[plan_model()],
        tools=file_tools(directory, sleep_first),
        presenter=LoggingPresenter(),
        owns_connection=True,
    )
