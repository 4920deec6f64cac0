"""``chatops memory list|show|forget`` on a real Redis."""

from __future__ import annotations

import json
import time

import pytest
import redis

from bot.keys import Keys
from bot.memory.store import IncidentStore
from bot.ops.cli import build_parser
from bot.ops.memory_cli import run_cli
from bot.settings import Settings
from tests.bot.memory.test_store import NOW, incident


@pytest.fixture
def settings(redis_url: str, keys: Keys) -> Settings:
    return Settings(_env_file=None, redis_url=redis_url, chatops_redis_prefix=keys.prefix)  # type: ignore[call-arg]


@pytest.fixture
def store(redis_client: redis.Redis, keys: Keys) -> IncidentStore:
    made = IncidentStore(redis_client, keys, retention_days=36500)
    made.save(incident(1, question="disk full\n\x1b[2Kforged line"))
    made.save(incident(48, alert_name="", labels={}, channel="CSECRET", private=True))
    return made


def cli(settings: Settings, capsys: pytest.CaptureFixture[str], *argv: str) -> tuple[int, list[str]]:
    status = run_cli(build_parser().parse_args(["memory", *argv]), settings)
    return status, capsys.readouterr().out.splitlines()


def test_list_prints_one_incident_per_line_starting_with_its_id(
    store: IncidentStore, settings: Settings, capsys: pytest.CaptureFixture[str]
) -> None:
    status, lines = cli(settings, capsys, "list")
    assert status == 0 and [line.split()[0] for line in lines] == ["run1", "run48"]
    assert "alert HighDiskUsage" in lines[0] and "CSECRET (private)" in lines[1]
    assert "\x1b" not in "".join(lines)


def test_show_prints_the_incident(
    store: IncidentStore, settings: Settings, capsys: pytest.CaptureFixture[str]
) -> None:
    status, lines = cli(settings, capsys, "show", "run1")
    text = "\n".join(lines)
    assert status == 0 and "logrotate_force on web-03 approved by U1" in text and "> /var 100% used" in text
    status, lines = cli(settings, capsys, "show", "run1", "--json")
    assert json.loads("\n".join(lines))["id"] == "run1"
    assert cli(settings, capsys, "show", "nope")[0] == 1


def test_forget_one_and_before_a_date(
    store: IncidentStore,
    settings: Settings,
    capsys: pytest.CaptureFixture[str],
    redis_client: redis.Redis,
    keys: Keys,
) -> None:
    assert cli(settings, capsys, "forget", "run1") == (0, ["forgot incident run1"])
    assert store.get("run1") is None and cli(settings, capsys, "forget", "run1")[0] == 1
    day = time.strftime("%Y-%m-%d", time.gmtime(NOW))
    assert cli(settings, capsys, "forget", "--before", day)[1] == [
        f"forgot 1 incident(s) that ended before {day}"
    ]
    assert list(redis_client.scan_iter(match=f"{keys.prefix}memory:*")) == []
    assert cli(settings, capsys, "forget", "--before", "yesterday")[0] == 2
    assert cli(settings, capsys, "forget")[0] == 2
