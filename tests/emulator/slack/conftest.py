"""Fixtures: an emulator per test on a free port, delivering to a local recording receiver."""

from __future__ import annotations

from collections.abc import Iterator

import pytest
from slack_sdk import WebClient

from emulator.slack import SlackEmulator, SlackEmulatorClient
from tests.emulator.slack.receiver import Receiver
from tests.support.emulator_workspace import TOKEN, make_config


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
