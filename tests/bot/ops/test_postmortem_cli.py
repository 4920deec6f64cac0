"""``chatops postmortem RUN_ID_OR_THREAD_LINK [--format md|json]`` on a real Redis."""

from __future__ import annotations

import json

import pytest
import redis

from agent.types import RunStatus
from bot.keys import Keys
from bot.ops.cli import build_parser
from bot.ops.postmortem_cli import run_cli
from bot.settings import Settings
from bot.slack.continuation import remember_last_run
from tests.bot.postmortem.incident import ROOT_TS, SECRET, write_incident


@pytest.fixture
def settings(redis_url: str, keys: Keys) -> Settings:
    return Settings(_env_file=None, redis_url=redis_url, chatops_redis_prefix=keys.prefix)  # type: ignore[call-arg]


def cli(settings: Settings, capsys: pytest.CaptureFixture[str], *argv: str) -> tuple[int, str, list[str]]:
    status = run_cli(build_parser().parse_args(["postmortem", *argv]), settings)
    captured = capsys.readouterr()
    return status, captured.out, captured.err.splitlines()


def test_by_run_id_prefix_in_markdown(
    redis_client: redis.Redis, keys: Keys, settings: Settings, capsys: pytest.CaptureFixture[str]
) -> None:
    write_incident(redis_client, keys)
    status, out, err = cli(settings, capsys, "run-pm")
    assert (status, err) == (0, [])
    assert out.startswith("# Postmortem") and "## Timeline (UTC)" in out and SECRET not in out


def test_by_thread_link_the_threads_last_run_in_json(
    redis_client: redis.Redis, keys: Keys, settings: Settings, capsys: pytest.CaptureFixture[str]
) -> None:
    write_incident(redis_client, keys)
    remember_last_run(redis_client, keys, "C1", ROOT_TS, "run-pm-1")
    reply = f"https://team.slack.com/archives/C1/p1790000099000100?thread_ts={ROOT_TS}&cid=C1"
    status, out, _ = cli(settings, capsys, reply, "--format", "json")
    assert status == 0 and json.loads(out)["run_id"] == "run-pm-1"
    root = f"<https://team.slack.com/archives/C1/p{ROOT_TS.replace('.', '')}>"
    assert json.loads(cli(settings, capsys, root, "--format", "json")[1])["run_id"] == "run-pm-1"


@pytest.mark.parametrize(
    "given",
    [
        "nope-no-such-run",
        "https://team.slack.com/archives/C1/p1790000000999999",  # a thread with no run
        "https://evil.example/archives/../../etc/passwd",
        "http://team.slack.com/archives/C1/p1790000000000000",
        "https://team.slack.com/archives/C1/p1790000000000000?thread_ts=1%0Aforged",
    ],
)
def test_errors_are_one_line_exit_2(
    redis_client: redis.Redis, keys: Keys, settings: Settings, capsys: pytest.CaptureFixture[str], given: str
) -> None:
    write_incident(redis_client, keys)
    status, out, err = cli(settings, capsys, given)
    assert status == 2 and out == "" and len(err) == 1 and err[0].startswith("error: ")


def test_a_run_still_going_has_no_postmortem(
    redis_client: redis.Redis, keys: Keys, settings: Settings, capsys: pytest.CaptureFixture[str]
) -> None:
    write_incident(redis_client, keys, status=RunStatus.AWAITING_APPROVAL)
    status, _, err = cli(settings, capsys, "run-pm-1")
    assert status == 2 and err == ["error: run run-pm-1 has not ended (awaiting_approval): no postmortem yet"]


def test_redis_unreachable_is_one_line(capsys: pytest.CaptureFixture[str]) -> None:
    down = Settings(_env_file=None, redis_url="redis://127.0.0.1:1/0")  # type: ignore[call-arg]
    status, _, err = cli(down, capsys, "run-pm-1")
    assert status == 2 and len(err) == 1 and "cannot reach Redis" in err[0]


def test_tz_adds_a_zone_to_the_timeline_and_an_unknown_one_is_one_line_exit_2(
    redis_client: redis.Redis, keys: Keys, settings: Settings, capsys: pytest.CaptureFixture[str]
) -> None:
    write_incident(redis_client, keys)
    status, out, err = cli(settings, capsys, "run-pm-1", "--tz", "Asia/Kolkata")
    assert (status, err) == (0, []) and "## Timeline (UTC, and Asia/Kolkata)" in out
    assert " UTC (2026-09-21 " in out and " Asia/Kolkata) · U1 · run started" in out
    for zone in ("Nowhere/Atlantis", "../../etc/passwd"):
        status, out, err = cli(settings, capsys, "run-pm-1", "--tz", zone)
        assert (status, out, len(err)) == (2, "", 1) and "--tz" in err[0]
