"""A person's time zone from the emulated Slack (``users.info``: ``tz``, ``tz_offset``), cached."""

from __future__ import annotations

from collections.abc import Iterator

import pytest
from slack_sdk import WebClient

from bot.postmortem.zone import Zone
from bot.slack.user_zones import UserZones
from emulator.slack import SlackEmulator, SlackEmulatorClient, UserSpec
from tests.support.emulator_workspace import TOKEN, make_config


@pytest.fixture
def emulator() -> Iterator[SlackEmulator]:
    people: dict[str, str | UserSpec] = {
        "U_KIRAN": UserSpec("kiran", tz="Asia/Kathmandu"),
        "U_ALICE": "alice",  # the emulator's default zone: Etc/UTC
        "U_NOWHERE": UserSpec("nowhere", tz="Mars/Olympus_Mons"),
    }
    with SlackEmulator(make_config(users=people)) as slack:
        yield slack


@pytest.fixture
def web(emulator: SlackEmulator) -> WebClient:
    return WebClient(token=TOKEN, base_url=emulator.api_url, timeout=5)


def test_the_emulator_answers_a_zone_and_its_offset_now(web: WebClient) -> None:
    user = web.users_info(user="U_KIRAN")["user"]
    assert (user["tz"], user["tz_offset"]) == ("Asia/Kathmandu", 5 * 3600 + 45 * 60)
    assert web.users_info(user="U_ALICE")["user"]["tz_offset"] == 0


def test_zones_are_slacks_cached_and_utc_means_nothing_to_add(
    emulator: SlackEmulator, web: WebClient
) -> None:
    now = [0.0]
    zones = UserZones(lambda: web, ttl=60, clock=lambda: now[0])
    control = SlackEmulatorClient(emulator.url)
    assert zones.zone("U_KIRAN") == Zone("Asia/Kathmandu", 20700)
    assert zones.zone("U_KIRAN") == Zone("Asia/Kathmandu", 20700)
    assert len(control.calls("users.info")) == 1  # cached
    now[0] = 61
    zones.zone("U_KIRAN")
    assert len(control.calls("users.info")) == 2  # the cache's hour (here a minute) is over
    assert zones.zone("U_ALICE") is None  # UTC: nothing beside it
    assert zones.zone("U_NOWHERE") is None  # a zone nobody knows, offset 0: UTC only
    assert zones.zone("U_GHOST") is None  # user_not_found: UTC only, not cached
    assert zones.zone("not-a-user <!channel>") is None
    assert len([c for c in control.calls("users.info") if c["params"].get("user") == "U_GHOST"]) == 1
