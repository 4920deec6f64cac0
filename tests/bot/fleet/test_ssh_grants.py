"""An SSH target has no runner in between: the worker verifies a changing call's grant itself.

The call runs over SSH on a real sshd (``tests/support/sshd.py``). Before it does, the worker
checks the grant the web process signed at the click, as a runner does (``bot.fleet.direct_grants``):
a call without a grant, with a forged one, one made for another call, or one whose approvals were
lowered below what the worker's own policy file needs on that target, runs nothing on the host
(the marker file the command would write stays absent); a properly approved call runs.
"""

from __future__ import annotations

import json
from collections.abc import Iterator, Sequence
from pathlib import Path

import pytest
import redis
import yaml

from agent.tooling import Tool
from bot.fleet.grants import GrantSigner, arguments_sha256, execution_id
from bot.keys import Keys
from bot.ops.fleet import build_fleet
from bot.settings import Settings
from tests.support.sshd import SshServer, start_sshd
from tools.registry import ToolRegistry, build_registry_from_settings

SECRET = "ssh-grants-secret-0123456789abcdef"
POLICY = """
policy:
  rules:
    - name: prod-two-leads
      match: {labels: {env: prod}, tools: [restart_app]}
      approve: {groups: [S_SRE_LEADS], approvals: 2, requester_may_approve: false}
"""


@pytest.fixture(scope="module")
def sshd(tmp_path_factory: pytest.TempPathFactory) -> Iterator[SshServer]:
    server = start_sshd(tmp_path_factory.mktemp("sshd"))
    yield server
    server.stop()


@pytest.fixture
def registry(sshd: SshServer, tmp_path: Path) -> Iterator[ToolRegistry]:
    marks = tmp_path / "marks.log"  # written on the SSH side by the command, only if it runs
    catalog = {
        "tools": [
            {
                "name": "restart_app",
                "description": "Restart an app (it appends a line to the marks file).",
                "category": "mutating",
                "targets": ["ssh"],
                "params": {"service": {"type": "string", "pattern": "^[a-z]+$"}},
                "run": [
                    "sh",
                    "-c",
                    f'echo "$1 restarted by $2" >> {marks}',
                    "sh",
                    "{service}",
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
    built = build_registry_from_settings(settings_for(tmp_path))
    yield built
    built.close()


def settings_for(tmp_path: Path) -> Settings:
    return Settings(
        _env_file=None,  # type: ignore[call-arg]
        chatops_inventory_file=tmp_path / "inventory.yaml",
        chatops_tools_file=tmp_path / "tools.yaml",
        chatops_policy_file=tmp_path / "policy.yaml",
        chatops_runner_secret=SECRET,
    )


@pytest.fixture
def restart(registry: ToolRegistry, tmp_path: Path, redis_client: redis.Redis, keys: Keys) -> Tool:
    fleet = build_fleet(settings_for(tmp_path), redis_client, keys, registry)
    return {tool.definition.name: tool for tool in fleet.tools_for("C1")}["restart_app"]


def approved(
    approvers: Sequence[str],
    needed: int,
    *,
    secret: str = SECRET,
    lifetime: float = 600,
    signed_service: str = "api",
) -> str:
    """``restart_app api`` on db-01 as the loop hands it to the tool: ``confirmed_by`` and a grant
    signed with ``secret`` by ``approvers`` for ``signed_service``."""
    signed: dict[str, object] = {"target": "db-01", "service": signed_service}
    grant = GrantSigner(secret.encode(), lifetime).sign(
        approval_id="a1",
        execution=execution_id("run1", "c1"),
        tool="restart_app",
        args_sha256=arguments_sha256(signed),
        target="db-01",
        confirmed_by=approvers[-1],
        approved_by=approvers,
        approvals_needed=needed,
        policy_rule="prod-two-leads",
    )
    return json.dumps(
        {"target": "db-01", "service": "api", "confirmed_by": approvers[-1], "approval_grant": grant}
    )


def test_the_worker_runs_a_changing_ssh_call_only_with_a_grant_its_own_policy_accepts(
    restart: Tool, tmp_path: Path
) -> None:
    marks = tmp_path / "marks.log"
    refused = {
        "no grant": (
            json.dumps({"target": "db-01", "service": "api", "confirmed_by": "U_DAVE"}),
            "it carries no approval grant",
        ),
        "forged": (
            approved(["U_CAROL", "U_DAVE"], 2, secret="a-redis-writer-guessing-it"),
            "not signed with this runner's secret",
        ),
        "lowered to one approval": (
            approved(["U_CAROL"], 1),  # what a web process fooled by a lowered record would have signed
            "its policy needs 2 distinct approvals, the grant has 1",
        ),
        "one of two": (approved(["U_CAROL"], 2), "its approval grant has 1 of 2 approvals"),
        "another call": (approved(["U_CAROL", "U_DAVE"], 2, signed_service="web"), "for another arguments"),
        "expired": (approved(["U_CAROL", "U_DAVE"], 2, lifetime=-1), "its approval grant has expired"),
    }
    for case, (arguments, reason) in refused.items():
        result = restart.execute(arguments, timeout=20)
        assert result.is_error and reason in result.output, (case, result.output)
        assert (
            "the worker refused restart_app on db-01" in result.output and "nothing was run" in result.output
        )
        assert not marks.exists(), f"{case}: the command ran on the SSH host"

    result = restart.execute(approved(["U_CAROL", "U_DAVE"], 2), timeout=20)
    assert not result.is_error and result.output.startswith("[db-01] "), result.output
    assert marks.read_text() == "api restarted by U_DAVE\n"  # it ran over SSH, with the approver
