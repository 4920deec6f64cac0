"""A restart on a real ``chatops runner`` whose inventory entry gives the service a health URL: the
card's grant signs the check with the URL, the runner (reading the same inventory) derives the same
and runs the restart, and the worker requests the URL through its egress policy (a real local HTTP
server answers). A grant that signed the check without the URL is refused by the runner."""

from __future__ import annotations

import json
import os
import stat
from collections.abc import Iterator
from pathlib import Path

import pytest
import redis
import yaml

from agent.scripted import tool_call
from agent.tooling import call_verification
from agent.types import RunStatus
from agent.verification import Verification
from bot.fleet.grants import GrantSigner, arguments_sha256
from bot.fleet.heartbeats import Heartbeats
from bot.keys import Keys
from bot.observability.audit import AuditKind
from bot.ops.fleet import build_fleet
from bot.runs.presenter import InMemoryPresenter
from tests.bot.fleet.test_runners import settings_for, turns_model
from tests.bot.slack.test_checks_e2e import SYSTEMCTL
from tests.bot.slack.test_health_check_e2e import HealthServer
from tests.support.harness import Harness, make_options
from tests.support.runners import SECRET, FleetSite


@pytest.fixture
def health() -> Iterator[HealthServer]:
    server = HealthServer(200)
    yield server
    server.close()


def test_a_runner_restart_is_checked_with_the_inventorys_health_url(
    site: FleetSite,
    heartbeats: Heartbeats,
    redis_client: redis.Redis,
    keys: Keys,
    tmp_path: Path,
    health: HealthServer,
) -> None:
    from tools.registry import build_registry_from_settings

    url = f"http://127.0.0.1:{health.port}/health"
    state = tmp_path / "systemctl"
    (state / "bin").mkdir(parents=True)
    program = state / "bin" / "systemctl"
    program.write_text(SYSTEMCTL)
    program.chmod(program.stat().st_mode | stat.S_IEXEC)
    (state / "mode").write_text("up")
    inventory = yaml.safe_load(site.inventory_file.read_text())
    for entry in inventory["targets"]:
        if entry["name"] == "web-03":
            entry["health"] = {"api": url}
    site.inventory_file.write_text(yaml.safe_dump(inventory))
    site.extra_env.update(
        PATH=f"{state / 'bin'}{os.pathsep}{os.environ['PATH']}", FAKE_SYSTEMCTL_DIR=str(state)
    )
    site.start("web-03", heartbeats)

    settings = settings_for(site).model_copy(update={"chatops_egress_allow": [f"127.0.0.1:{health.port}"]})
    fleet = build_fleet(settings, redis_client, keys, build_registry_from_settings(settings))
    tools = fleet.tools_for("C1")
    restart = next(t for t in tools if t.definition.name == "service_restart")

    # A grant that signed the plain check (a card that did not show the URL) is refused on the host.
    call = {"target": "web-03", "service": "api"}
    facts = {
        "approval_id": "a0",
        "execution": "run0:c0",
        "tool": "service_restart",
        "args_sha256": arguments_sha256(call),
        "target": "web-03",
        "confirmed_by": "U_DAVE",
    }
    carded = call_verification(restart, json.dumps(call))
    assert carded is not None and carded.health is not None
    plain = Verification(check=carded.check, before=carded.before, no_undo=carded.no_undo)
    grant = GrantSigner(SECRET.encode(), 600).sign(**facts, verify=plain.to_json())
    refused = restart.execute(
        json.dumps({**call, "confirmed_by": "U_DAVE", "approval_grant": grant}), timeout=30
    )
    assert refused.is_error and "another check and undo" in refused.output, refused.output
    assert not (state / "started").exists() and health.paths == []

    harness = Harness(
        redis_client,
        keys,
        make_options(site.queue, runner_secret=SECRET),
        tmp_path,
        [turns_model(tool_call("service_restart", "c1", target="web-03", service="api"))],
        tools,
        InMemoryPresenter(),
    )
    run_id = harness.submit("restart the api on web-03")
    harness.work()
    assert harness.status(run_id) is RunStatus.AWAITING_APPROVAL
    (approval,) = harness.service.approvals.for_run(run_id)
    assert url in approval.verify  # what the approval stores (and its grant signs)
    harness.service.lifecycle.decide(approval.id, user="U_APPROVER", approve=True)
    harness.work()
    assert harness.status(run_id) is RunStatus.COMPLETED
    [result] = harness.tool_results(run_id)
    assert result.startswith("[web-03] Restarted api") and f"Health: OK: GET {url} -> 200" in result
    assert health.paths == ["/health"]
    [check] = [e for e in harness.service.audit.entries(run_id) if e.kind is AuditKind.CHECK_ENDED]
    assert check.fields["passed"] == "1"
