"""An SSH target end to end: the web process, the Slack emulator, a worker and a real sshd.

An SSH target has no runner that could refuse a call on the host. A Redis writer who marks a
pending approval ``approved`` itself (no click, so no grant, or a grant it made up) and queues
the run's resume gets the worker to resume the run and hand the call to the SSH route; the worker
verifies the grant before it connects and nothing runs on the host. The same call approved by two
SRE leads on the card runs there.
"""

from __future__ import annotations

import json
from collections.abc import Callable, Iterator
from dataclasses import replace
from pathlib import Path

import pytest
import redis
import yaml

from agent.scripted import FunctionModel
from agent.types import RunStatus
from bot.keys import Keys
from bot.ops.fleet import build_fleet
from bot.runs.approvals import ApprovalStatus
from bot.settings import Settings
from tests.bot.slack.test_clicks import approval_id_of, status
from tests.bot.slack.test_policy_e2e import TargetPlanModel, approve, card_of, emulator, model, start
from tests.support.slack_bot import SlackBot
from tests.support.slack_workspace import CHANNEL, QUIET
from tests.support.sshd import SshServer, start_sshd
from tests.support.waiting import wait_for
from tools.registry import build_registry_from_settings

__all__ = ["emulator", "model"]  # the example policy's workspace (SRE leads: carol, dave) and plan model
SECRET = "ssh-approvals-secret-0123456789abcdef"
POLICY = """
policy:
  rules:
    - name: prod-two-leads
      match: {labels: {env: prod}}
      approve: {groups: [S_SRE_LEADS], approvals: 2, requester_may_approve: false}
"""


@pytest.fixture(scope="module")
def sshd(tmp_path_factory: pytest.TempPathFactory) -> Iterator[SshServer]:
    server = start_sshd(tmp_path_factory.mktemp("sshd"))
    yield server
    server.stop()


@pytest.fixture
def bot(
    make_bot: Callable[..., SlackBot],
    sshd: SshServer,
    tmp_path: Path,
    model: TargetPlanModel,
    redis_client: redis.Redis,
    key_prefix: str,
) -> Iterator[SlackBot]:
    catalog = {
        "tools": [
            {
                "name": "restart_app",
                "description": "Restart the app (it appends a line to the marks file on the host).",
                "category": "mutating",
                "targets": ["ssh"],
                "run": [
                    "sh",
                    "-c",
                    f'echo "restarted by $1" >> {tmp_path / "marks.log"}',
                    "sh",
                    "{confirmed_by}",
                ],
            }
        ]
    }
    (tmp_path / "tools.yaml").write_text(yaml.safe_dump(catalog))
    db = {
        "name": "db-01",
        "via": "ssh",
        "labels": {"env": "prod"},
        "ssh": {
            "host": "127.0.0.1",
            "port": sshd.port,
            "user": sshd.user,
            "key_file": str(sshd.key_file),
            "known_hosts": str(sshd.known_hosts),
        },
    }
    (tmp_path / "inventory.yaml").write_text(yaml.safe_dump({"targets": [db]}))
    (tmp_path / "policy.yaml").write_text(POLICY)
    files = {
        "chatops_inventory_file": tmp_path / "inventory.yaml",
        "chatops_tools_file": tmp_path / "tools.yaml",
        "chatops_policy_file": tmp_path / "policy.yaml",
        "chatops_runner_secret": SECRET,
    }
    settings = Settings(_env_file=None, **files)  # type: ignore[call-arg]
    registry = build_registry_from_settings(settings)
    fleet = build_fleet(settings, redis_client, Keys(key_prefix), registry)
    try:
        yield make_bot(
            models=[FunctionModel(model.step, model="plan")],
            tools=fleet.tools_for(CHANNEL),
            tuning=replace(QUIET, approver_cache_seconds=0),
            **{name: str(value) for name, value in files.items()},
        )
    finally:
        registry.close()


def outputs(bot: SlackBot, run_id: str) -> list[str]:
    return [m.content or "" for m in bot.service.history(run_id) if m.role == "tool"]


def test_an_approval_forged_in_redis_runs_nothing_on_an_ssh_target(bot: SlackBot, tmp_path: Path) -> None:
    marks = tmp_path / "marks.log"
    forgeries = {"no grant": "", "a made-up grant": json.dumps({"approval_id": "x", "mac": "0" * 64})}
    for forged in forgeries.values():
        ts, run_id = start(bot, "U_ALICE", "restart_app@db-01")
        approval_id = approval_id_of(card_of(bot, ts))
        # A Redis writer approves the record itself and queues the run's resume: no click, no web.
        fields = {"status": "approved", "decided_by": "U_CAROL", "reason": "approved", "grant": forged}
        bot.redis.hset(bot.keys.approval(approval_id), mapping=fields)
        bot.service.enqueue(run_id)
        bot.work()
        assert bot.status(run_id) is RunStatus.COMPLETED
        output = "\n".join(outputs(bot, run_id))
        assert "the worker refused restart_app on db-01" in output and "nothing was run" in output, output
        assert not marks.exists(), "the command ran on the SSH host"

    ts, run_id = start(bot, "U_ALICE", "restart_app@db-01")
    card = card_of(bot, ts)
    approve(bot, card, "U_CAROL")
    approve(bot, card, "U_DAVE")
    wait_for(lambda: status(bot, approval_id_of(card)) is ApprovalStatus.APPROVED, what="two SRE leads")
    bot.work()
    assert bot.status(run_id) is RunStatus.COMPLETED, outputs(bot, run_id)
    assert marks.read_text() == "restarted by U_DAVE\n"
