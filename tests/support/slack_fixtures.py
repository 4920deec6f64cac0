"""The end-to-end fixtures (``emulator``, ``control``, ``make_bot``, ``bot``), shared by the
conftests of ``tests/bot/slack`` and ``tests/reliability``, which import them.

Every test gets its own emulator, web server (port 0), Redis key prefix and RQ queue, so tests
run in parallel.
"""

from __future__ import annotations

import time
from collections.abc import Callable, Iterator, Sequence
from pathlib import Path
from typing import Any

import pytest
import redis

from agent.chat import ChatModel
from agent.tooling import Tool
from bot.slack.handlers.runtime import WebTuning
from emulator.slack import SlackEmulator, SlackEmulatorClient
from tests.bot.runtimes import file_tools, plan_model
from tests.support.slack_bot import PreviewedFileTool, SlackBot
from tests.support.slack_workspace import QUIET, make_settings, suite_workspace


@pytest.fixture
def emulator() -> Iterator[SlackEmulator]:
    config = suite_workspace()
    with SlackEmulator(config) as slack:
        yield slack


@pytest.fixture
def control(emulator: SlackEmulator) -> SlackEmulatorClient:
    return SlackEmulatorClient(emulator.url)


@pytest.fixture
def make_bot(
    emulator: SlackEmulator,
    control: SlackEmulatorClient,
    redis_client: redis.Redis,
    redis_url: str,
    key_prefix: str,
    queue_name: str,
    tmp_path: Path,
) -> Iterator[Callable[..., SlackBot]]:
    """``make_bot(**settings_overrides)``: a served bot with the plan model and file tools; ``tuning``:
    the web process's timings (default: no queued note)."""
    bots: list[SlackBot] = []

    def build(
        models: Sequence[ChatModel] | None = None,
        tools: Sequence[Tool] | None = None,
        clock: Callable[[], float] = time.time,
        tuning: WebTuning = QUIET,
        **overrides: Any,
    ) -> SlackBot:
        """``clock``: the web process's (``WebRuntime.clock``)."""
        settings = make_settings(emulator, redis_url, key_prefix, queue_name, **overrides)
        bot = SlackBot(
            settings,
            emulator,
            control,
            redis_client,
            tmp_path,
            models or [plan_model()],
            tools
            if tools is not None
            else [*file_tools(tmp_path), PreviewedFileTool("delete_files", tmp_path)],
            clock=clock,
            tuning=tuning,
        ).serve()
        bots.append(bot)
        return bot

    yield build
    for bot in bots:
        bot.close()


@pytest.fixture
def bot(make_bot: Callable[..., SlackBot]) -> SlackBot:
    return make_bot()
