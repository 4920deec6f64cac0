"""Worker runtimes of the benchmarks (``CHATOPS_RUNTIME=bench.runtimes:<name>``).

* ``instant_runtime``: a zero-latency scripted model that answers at once (ingress: the workers
  drain what the web process enqueues).
* ``plan_runtime``: a zero-latency scripted model following ``plan: a b c`` in the first user
  message (one call per turn, then an answer); tools ``check`` (read-only, optionally slow:
  ``BENCH_TOOL_SECONDS``) and ``restart`` (mutating). The model and the tools stamp what they see
  into Redis (``BENCH_STAMPS``) so the benchmark can time the steps; the presenter is the real
  ``SlackPresenter`` when ``SLACK_BOT_TOKEN`` is set (talking to the emulator), else the log.
* ``http_runtime``: the production ``LLMClient`` against ``LLM_BASE_URL`` (the scripted OpenAI
  server of ``emulator.models.openai_server``) with the ``check`` tool (scale-out).
"""

from __future__ import annotations

import json
import os
import time
from collections.abc import Iterator
from typing import Any

import redis

from agent.scripted import FunctionModel, ScriptItem, last_tool_output, tool_call
from agent.tooling import ToolCategory, ToolResult
from agent.types import Choice, Message, Request, Response, ToolDef, Usage
from bot.keys import Keys
from bot.redis_connection import open_redis
from bot.runs.presenter import LoggingPresenter, Presenter
from bot.runs.runtime import Runtime
from bot.runs.service import RunOptions
from bot.settings import Settings

PLAN_PREFIX = "plan:"


def stamps_key(prefix: str) -> str:
    """The Redis list the model and the tools stamp into (JSON objects)."""
    return f"{prefix}bench:stamps"


class Stamper:
    def __init__(self, client: redis.Redis, prefix: str) -> None:
        self._client = client
        self._key = stamps_key(prefix)

    def __call__(self, kind: str, **fields: Any) -> None:
        self._client.rpush(self._key, json.dumps({"kind": kind, "time": time.time(), **fields}))


class BenchTool:
    def __init__(
        self, name: str, category: ToolCategory, stamp: Stamper | None, seconds: float = 0.0
    ) -> None:
        self._name = name
        self.category = category
        self._stamp = stamp
        self._seconds = seconds
        self.parallel = False
        self.timeout = 60.0

    @property
    def definition(self) -> ToolDef:
        return ToolDef(name=self._name, description=f"The {self._name} benchmark tool.")

    def execute(self, arguments: str, *, timeout: float) -> ToolResult:
        if self._stamp is not None:
            self._stamp("tool_started", tool=self._name, arguments=json.loads(arguments))
        if self._seconds:
            time.sleep(self._seconds)
        return ToolResult(f"{self._name} ok")

    def preview(self, arguments: str, *, timeout: float) -> ToolResult | None:
        return None


class InstantModel:
    """Answers every request at once with a final text."""

    model = "instant"

    def complete(self, request: Request) -> Response:
        message = Message.assistant("done")
        return Response(
            model=self.model, choices=[Choice(message=message, finish_reason="stop")], usage=Usage()
        )

    def stream(self, request: Request) -> Iterator[Any]:
        raise NotImplementedError


def plan_model(stamp: Stamper | None) -> FunctionModel:
    """Follow ``plan: a b c``: call them one per turn (ids ``call_0``, ...), then answer."""

    def step(request: Request) -> ScriptItem:
        first = next(m for m in request.messages if m.role == "user")
        if stamp is not None:
            users = [m.meta.get("ts") for m in request.messages if m.role == "user"]
            stamp("model_request", run_text=first.content, user_ts=users)
        plan = (first.content or "").removeprefix(PLAN_PREFIX).split()
        done = sum(1 for m in request.messages if m.role == "assistant" and m.tool_calls)
        if done < len(plan):
            return tool_call(plan[done], f"call_{done}", step=done)
        return f"done: {last_tool_output(request.messages)}"

    return FunctionModel(step, model="plan")


def _presenter(settings: Settings, client: redis.Redis, keys: Keys) -> Presenter:
    if not settings.slack_bot_token:
        return LoggingPresenter()
    from bot.slack.delivery.client import make_client
    from bot.slack.delivery.presenter import SlackPresenter

    return SlackPresenter(make_client(settings), client, keys)


def instant_runtime(settings: Settings) -> Runtime:
    return Runtime(
        redis=open_redis(settings),  # as the bot's own: REDIS_URL or the sentinels' master
        keys=Keys(settings.chatops_redis_prefix),
        options=RunOptions.from_settings(settings),
        models=[InstantModel()],
        tools=[],
        presenter=LoggingPresenter(),
        owns_connection=True,
    )


def _tools(stamp: Stamper | None) -> list[BenchTool]:
    seconds = float(os.environ.get("BENCH_TOOL_SECONDS", "0"))
    return [
        BenchTool("check", ToolCategory.READ_ONLY, stamp, seconds),
        BenchTool("restart", ToolCategory.MUTATING, stamp),
    ]


def plan_runtime(settings: Settings) -> Runtime:
    client = open_redis(settings)
    keys = Keys(settings.chatops_redis_prefix)
    stamp = Stamper(client, settings.chatops_redis_prefix) if os.environ.get("BENCH_STAMPS") else None
    return Runtime(
        redis=client,
        keys=keys,
        options=RunOptions.from_settings(settings),
        models=[plan_model(stamp)],
        tools=_tools(stamp),
        presenter=_presenter(settings, client, keys),
        owns_connection=True,
    )


def http_runtime(settings: Settings) -> Runtime:
    from agent.models.openai_client import LLMClient

    client = open_redis(settings)
    keys = Keys(settings.chatops_redis_prefix)
    model = LLMClient(settings.llm_base_url, settings.llm_api_key or "bench", settings.llm_model)
    return Runtime(
        redis=client,
        keys=keys,
        options=RunOptions.from_settings(settings),
        models=[model],
        tools=_tools(None),
        presenter=LoggingPresenter(),
        owns_connection=True,
    )
