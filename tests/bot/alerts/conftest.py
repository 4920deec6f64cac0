"""Fixtures of the alert tests: the end-to-end bot (``tests.support.slack_fixtures``) in a workspace
whose alert channel has a real-looking id (the routes file accepts only those)."""

from __future__ import annotations

from collections.abc import Iterator

import pytest

from emulator.slack.server import SlackEmulator
from tests.support.slack_fixtures import control, make_bot
from tests.support.slack_workspace import suite_workspace

ALERT_CHANNEL = "C0ALERTS"

__all__ = ["control", "emulator", "make_bot"]


@pytest.fixture
def emulator() -> Iterator[SlackEmulator]:
    config = suite_workspace(
        channels={"C_INCIDENT": "incident", ALERT_CHANNEL: "alerts"},
        bot_channels=("C_INCIDENT", ALERT_CHANNEL),
    )
    with SlackEmulator(config) as slack:
        yield slack
