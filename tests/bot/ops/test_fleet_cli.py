"""``chatops targets``: the inventory with each runner's last heartbeat; ``chatops runner`` refusals."""

from __future__ import annotations

import json
from pathlib import Path

import pytest
import redis

from bot.errors import BotConfigurationError
from bot.fleet.heartbeats import Heartbeats
from bot.keys import Keys
from bot.ops.cli import build_parser
from bot.ops.compose import build_runner
from bot.ops.fleet_cli import run_targets
from bot.settings import Settings
from tests.support.runners import runner_settings

INVENTORY = {
    "targets": [
        {"name": "web-03", "via": "runner", "labels": {"env": "prod"}},
        {"name": "web-04", "via": "runner"},
        {"name": "box", "via": "local"},
    ]
}


@pytest.fixture
def settings(tmp_path: Path, redis_url: str, keys: Keys, queue_name: str) -> Settings:
    return runner_settings(tmp_path, redis_url, keys.prefix, queue_name, INVENTORY)


def test_targets_lists_the_inventory_with_each_runners_last_heartbeat(
    settings: Settings, redis_client: redis.Redis, keys: Keys, capsys: pytest.CaptureFixture[str]
) -> None:
    Heartbeats(redis_client, keys, 15).beat("web-03", "host-a:4242")
    assert run_targets(build_parser().parse_args(["targets", "--json"]), settings) == 0
    rows = {row["name"]: row for row in map(json.loads, capsys.readouterr().out.splitlines())}
    assert rows["web-03"]["runner"] == "host-a:4242" and rows["web-03"]["reachable"] is True
    assert rows["web-03"]["labels"] == {"env": "prod"}
    assert rows["web-04"]["runner"] is None and rows["web-04"]["reachable"] is False
    assert "runner" not in rows["box"]
    assert run_targets(build_parser().parse_args(["targets"]), settings) == 0
    text = capsys.readouterr().out
    assert "web-04" in text and "runner: never seen" in text and "host-a:4242" in text


@pytest.mark.parametrize(
    ("target", "error"),
    [
        ("web-99", "'web-99' is not in the inventory"),
        ("box", "target box is reached via local, not by a runner"),
    ],
)
def test_a_runner_for_a_target_it_cannot_serve_does_not_start(
    settings: Settings, redis_client: redis.Redis, target: str, error: str
) -> None:
    with pytest.raises(BotConfigurationError, match=error):
        build_runner(settings, redis_client, target)


def test_a_runner_without_the_secret_does_not_start(settings: Settings, redis_client: redis.Redis) -> None:
    with pytest.raises(BotConfigurationError, match="CHATOPS_RUNNER_SECRET"):
        build_runner(settings.model_copy(update={"chatops_runner_secret": ""}), redis_client, "web-03")


def test_doctor_says_which_runner_targets_have_no_live_runner(
    settings: Settings, redis_client: redis.Redis, keys: Keys, tmp_path: Path
) -> None:
    from bot.ops.doctor import Outcome
    from bot.ops.doctor_targets import check_targets

    Heartbeats(redis_client, keys, 15).beat("web-03", "host-a:1")
    check = check_targets(settings)
    assert check.outcome is Outcome.WARN and "no live runner for web-04" in check.summary
    Heartbeats(redis_client, keys, 15).beat("web-04", "host-b:1")
    assert check_targets(settings).outcome is Outcome.PASS
    broken = tmp_path / "broken.yaml"
    broken.write_text("targets:\n  - name: web 03\n    via: runner\n")
    failed = check_targets(settings.model_copy(update={"chatops_inventory_file": broken}))
    assert failed.outcome is Outcome.FAIL and "broken.yaml" in failed.summary
