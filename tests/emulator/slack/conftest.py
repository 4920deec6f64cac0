"""Fixtures: an emulator per test on a free port, delivering to a local recording receiver."""

from __future__ import annotations

from collections.abc import Iterator

import pytest
from slack_sdk import WebClient

from emulator.slack import SlackEmulator, SlackEmulatorClient, WorkspaceConfig
from tests.emulator.slack.receiver import Receiver

SECRET = "test-signing-secret"
TOKEN = "xoxb-test-token"


def make_config(**overrides: object) -> WorkspaceConfig:
    """A config with fast event timeouts and retries, so retry tests take well under a second."""
    config = WorkspaceConfig(
        bot_token=TOKEN, signing_secret=SECRET, event_timeout=0.5, retry_delays=(0.0, 0.05, 0.05)
    )
    for key, value in overrides.items():
        setattr(config, key, value)
    return config


@pytest.fixture
def receiver() -> Iterator[Receiver]:
    bot = Receiver()
    yield bot
    bot.close()


@pytest.fixture
def emulator(receiver: Receiver) -> Iterator[SlackEmulator]:
    with SlackEmulator(make_config(events_url=receiver.url)) as slack:
        yield slack


@pytest.fixture
def web(emulator: SlackEmulator) -> WebClient:
    """slack_sdk's own client pointed at the emulator, without retries unless a test adds them."""
    return WebClient(token=TOKEN, base_url=emulator.api_url, timeout=5)


@pytest.fixture
def control(emulator: SlackEmulator) -> SlackEmulatorClient:
    return SlackEmulatorClient(emulator.url)
