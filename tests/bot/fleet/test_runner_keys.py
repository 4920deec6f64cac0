"""A runner holding only its own target's key (``CHATOPS_RUNNER_KEY``), with real runner processes.

Web and workers hold ``CHATOPS_RUNNER_SECRET`` and derive each target's key; a runner given only
web-03's key works for web-03, and whatever it signs is worth nothing on db-01.
"""

from __future__ import annotations

import json

import pytest
import redis

from bot.fleet.dispatch import Dispatcher
from bot.fleet.grants import GrantSigner, arguments_sha256, execution_id
from bot.fleet.heartbeats import Heartbeats
from bot.keys import Keys
from bot.ops.cli import build_parser
from bot.ops.fleet_cli import run_cli
from bot.settings import Settings
from tests.bot.fleet.test_runner_defences import restart_arguments
from tests.support.runners import SECRET, FleetSite


def printed_key(target: str, capsys: pytest.CaptureFixture[str]) -> str:
    """``chatops runner --target NAME --print-key``, run where the secret is."""
    settings = Settings(_env_file=None, chatops_runner_secret=SECRET)  # type: ignore[call-arg]
    assert run_cli(build_parser().parse_args(["runner", "--target", target, "--print-key"]), settings) == 0
    return capsys.readouterr().out.strip()


def test_a_runner_with_only_its_targets_key_works_and_signs_nothing_for_another_target(
    site: FleetSite,
    heartbeats: Heartbeats,
    redis_client: redis.Redis,
    keys: Keys,
    capsys: pytest.CaptureFixture[str],
) -> None:
    web_key = printed_key("web-03", capsys)
    assert len(web_key) == 64 and web_key != printed_key("db-01", capsys)
    site.extra_env = {"CHATOPS_RUNNER_SECRET": "", "CHATOPS_RUNNER_KEY": web_key}
    site.start("web-03", heartbeats)
    site.extra_env = {}
    site.start("db-01", heartbeats)
    send = Dispatcher(redis_client, keys, site.queue, heartbeats, SECRET.encode()).call
    seen = send("web-03", "execute", "whereami", json.dumps({"target": "web-03"}), timeout=30, mutating=False)
    assert seen.output.rstrip().endswith("web-03"), seen.output  # its results sealed with its key
    restart = restart_arguments(execution=execution_id("run1", "c1"))  # granted by the web (master)
    done = send("web-03", "execute", "restart_app", restart, timeout=30, mutating=True)
    assert "restarted api on web-03" in done.output, done.output

    # Holding web-03's key, the attacker forges a grant for db-01: db-01's runner refuses it.
    arguments: dict[str, object] = {"target": "db-01", "service": "api", "pause": 0}
    forged = GrantSigner(bytes.fromhex(web_key), 600, own_target="web-03").sign(
        approval_id="a1",
        execution=execution_id("run1", "c2"),
        tool="restart_app",
        args_sha256=arguments_sha256(arguments),
        target="db-01",
        confirmed_by="U_APPROVER",
    )
    arguments.update(confirmed_by="U_APPROVER", approval_grant=forged)
    refused = send("db-01", "execute", "restart_app", json.dumps(arguments), timeout=30, mutating=True)
    assert refused.is_error and "is not signed with this runner's secret" in refused.output, refused.output
    assert site.actions("db-01") == [] and site.actions("web-03") == ["api restarted by U_APPROVER"]
