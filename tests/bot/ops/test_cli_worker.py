"""``chatops worker``: the console script starts an RQ worker from the same settings as everything else."""

from __future__ import annotations

import subprocess
from pathlib import Path

import pytest

from bot.errors import BotConfigurationError
from bot.ops.cli import SUBCOMMANDS, build_parser
from bot.ops.compose import load_runtime_factory
from bot.runs.jobs import start

ROOT = Path(__file__).resolve().parents[3]


def test_worker_is_a_registered_subcommand_with_its_options() -> None:
    assert "worker" in SUBCOMMANDS
    args = build_parser().parse_args(["worker", "--burst", "--queue", "q1", "--runtime", "m:f"])
    assert (args.command, args.burst, args.queue, args.runtime) == ("worker", True, "q1", "m:f")


def test_chatops_worker_runs_a_burst_from_the_environment(
    redis_url: str, queue_name: str, tmp_path: Path
) -> None:
    env_file = tmp_path / "test.env"
    env_file.write_text(f"REDIS_URL={redis_url}\nCHATOPS_QUEUE={queue_name}\n")
    done = subprocess.run(
        [str(ROOT / ".venv/bin/chatops"), "--env-file", str(env_file), "worker", "--burst"],
        capture_output=True,
        text=True,
        timeout=60,
    )
    assert done.returncode == 0, done.stderr
    assert f"Listening on {queue_name}" in done.stderr


def test_a_bad_runtime_path_is_a_configuration_error() -> None:
    with pytest.raises(BotConfigurationError):
        load_runtime_factory("no_such_module:build")
    with pytest.raises(BotConfigurationError):
        load_runtime_factory("missing-colon")


def test_job_functions_only_run_inside_a_chatops_worker() -> None:
    with pytest.raises(BotConfigurationError, match="inside a chatops worker"):
        start("some-run")
