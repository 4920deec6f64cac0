"""The end-to-end tests' Slack workspace: its token and signing secret, the incident channel, the
bot's user, the bot's ``Settings`` against an emulator, and the buttons of a message."""

from __future__ import annotations

from collections.abc import Callable
from typing import Any

import redis

from bot.keys import Keys
from bot.runs.presenter import RunRef
from bot.settings import Settings
from bot.slack.delivery.client import make_client
from bot.slack.delivery.presenter import SlackPresenter
from bot.slack.delivery.sender import SlackSender
from bot.slack.handlers.runtime import WebTuning
from emulator.slack import SlackEmulator, SlackEmulatorClient, WorkspaceConfig

SECRET = "e2e-signing-secret"
TOKEN = "xoxb-e2e-token"


def suite_workspace(**changes: Any) -> WorkspaceConfig:
    """The suite's emulated workspace (its token and secret, quick event retries), with ``changes``."""
    return WorkspaceConfig(
        bot_token=TOKEN, signing_secret=SECRET, event_timeout=3.0, retry_delays=(0.0, 0.3, 0.3), **changes
    )


CHANNEL = "C_INCIDENT"
BOT_USER = "U_OPS"


def buttons(message: dict[str, Any]) -> list[dict[str, Any]]:
    return [e for b in message.get("blocks") or [] if b["type"] == "actions" for e in b["elements"]]


# The web process's timings in these tests: they run the worker when they choose, so no "queued"
# note unless a test asks for one (``WebTuning(queued_note_seconds=...)``).
QUIET = WebTuning(queued_note_seconds=0.0)


def make_settings(
    emulator: SlackEmulator, redis: str, key_prefix: str, queue: str, **overrides: Any
) -> Settings:
    values: dict[str, Any] = {
        "slack_bot_token": TOKEN,
        "slack_signing_secret": SECRET,
        "slack_api_url": emulator.api_url,
        "redis_url": redis,
        "chatops_redis_prefix": key_prefix,
        "chatops_queue": queue,
        "chatops_retention_days": 1,
        "chatops_lease_ttl_seconds": 5.0,
        "chatops_approval_timeout_seconds": 600,
        "chatops_max_iterations": 10,
        "chatops_deadline_seconds": 60.0,
        "web_host": "127.0.0.1",
        # The end-to-end tests read answers as posted messages; tests/bot/slack/test_streaming.py
        # turns streaming on ("auto", the production default).
        "chatops_slack_streaming": "off",
    }
    values.update(overrides)
    return Settings(_env_file=None, **values)  # type: ignore[call-arg]


def presenter_on(
    emulator: SlackEmulator,
    redis_client: redis.Redis,
    redis_url: str,
    key_prefix: str,
    *,
    run_id: str = "r" * 32,
    sender: SlackSender | None = None,
    redact: Callable[[str], str] | None = None,
) -> tuple[SlackPresenter, RunRef]:
    """A worker's Slack presenter on the emulator, and a run in a new thread of the incident
    channel; ``sender`` replaces the process's."""
    settings = make_settings(emulator, redis_url, key_prefix, "unused")
    presenter = SlackPresenter(
        make_client(settings), redis_client, Keys(key_prefix), sender=sender, redact=redact
    )
    thread = SlackEmulatorClient(emulator.url).post_message(CHANNEL, "U_ALICE", "web-03 is full")["ts"]
    return presenter, RunRef(run_id, CHANNEL, str(thread), "U_ALICE")
