"""Scenarios through the real processes (``emulator.eval.runner``): the reference agents pass, and
each run leaves no process and no Redis key behind. One no-fault control, one that needs an
approved destructive fix (its dry run on the card, clicked by the simulated approver)."""

from __future__ import annotations

import json
from pathlib import Path

import pytest
import redis

from bot.ops.cli import build_parser
from bot.ops.eval_cli import harness_command
from emulator.eval.loading import find_scenario
from emulator.eval.results import write_results
from emulator.eval.runner import ScenarioOutcome, run_scenario

ENTRY_KEYS = {
    "name",
    "tags",
    "agent",
    "repeat",
    "passed",
    "scores",
    "iterations",
    "tool_calls",
    "tokens",
    "seconds",
    "replay",
}


def leftovers(redis_url: str, outcome: ScenarioOutcome) -> list[bytes]:
    client = redis.Redis.from_url(redis_url)
    try:
        keys = list(client.scan_iter(match=f"{outcome.key_prefix}*"))
        keys += list(client.scan_iter(match=f"*{outcome.queue}*"))
        return keys
    finally:
        client.close()


@pytest.mark.parametrize("name", ["db-01-quiet", "disk-full-rotations"])
def test_a_reference_agent_passes_through_the_real_processes(
    name: str, redis_url: str, tmp_path: Path
) -> None:
    outcome = run_scenario(find_scenario(name), tmp_path / name, redis_url=redis_url)
    assert outcome.score.scores() == {"rca": 1.0, "grounding": 1.0, "safety": 1.0}, outcome.score
    assert outcome.score.passed
    assert outcome.score.efficiency.tool_calls >= 4 and outcome.score.efficiency.tokens.prompt > 0
    assert leftovers(redis_url, outcome) == []

    written = write_results(tmp_path / "out", [outcome], outcome.total_seconds)
    data = json.loads(written.read_text())
    [entry] = data["scenarios"]
    assert set(entry) == ENTRY_KEYS and entry["replay"] == "none" and entry["agent"] == "reference"
    assert set(entry["scores"]) == {"rca", "grounding", "safety"}
    assert set(entry["tokens"]) == {"prompt", "completion", "cache_read"}
    assert data["summary"]["passed"] == data["summary"]["total"] == 1
    assert set(data["summary"]["by_tag"]) == set(entry["tags"])
    assert f"| {name} | reference | 1 | yes |" in (tmp_path / "out" / "report.md").read_text()
    if name == "disk-full-rotations":  # the approved clean-up ran on the injected host
        assert not (tmp_path / name / "hosts" / "web-03" / "var" / "log" / "api" / "api.log.9").exists()


def test_chatops_eval_run_hands_its_options_to_the_harness() -> None:
    args = build_parser().parse_args(
        ["eval", "run", "--scenario", "x.yaml", "--tag", "no-fault", "--repeat", "2", "--out", "/tmp/o"]
    )
    command = harness_command(args)
    assert command[1:4] == ["-m", "emulator.eval", "run"]
    assert command[4:] == [
        "--out",
        "/tmp/o",
        "--agent",
        "reference",
        "--repeat",
        "2",
        "--scenario",
        "x.yaml",
        "--tag",
        "no-fault",
    ]
