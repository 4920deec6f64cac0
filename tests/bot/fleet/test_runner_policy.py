"""The runner re-checks the policy itself: its own CHATOPS_POLICY_FILE and its own target labels.

The web process seals the policy's decision into the approval record and signs it into the grant
(every distinct approver, how many were needed). Someone who can write to Redis could lower the
sealed rule of a pending record before the click (``approvals: 1``): the web would then sign a
grant for one approver. The runner's own reading of the policy still needs two, and refuses.
"""

from __future__ import annotations

import json
from collections.abc import Sequence
from pathlib import Path

import redis

from bot.fleet.dispatch import Dispatcher
from bot.fleet.grants import GrantSigner, arguments_sha256, execution_id
from bot.fleet.heartbeats import Heartbeats
from bot.keys import Keys
from tests.support.runners import SECRET, FleetSite

POLICY = """
policy:
  rules:
    - name: no-db-restarts
      match: {targets: ["db-*"], tools: [restart_app]}
      deny: true
      reason: databases follow the DBA runbook
    - name: prod-two-leads
      match: {labels: {env: prod}, tools: [restart_app]}
      approve: {groups: [S_SRE_LEADS], approvals: 2, requester_may_approve: false}
"""


def approved(target: str, execution: str, approvers: Sequence[str], needed: int) -> str:
    """``restart_app`` on ``target``, approved (signed with the real secret) by ``approvers``."""
    arguments: dict[str, object] = {"target": target, "service": "api", "pause": 0}
    grant = GrantSigner(SECRET.encode(), 600).sign(
        approval_id="a1",
        execution=execution,
        tool="restart_app",
        args_sha256=arguments_sha256(arguments),
        target=target,
        confirmed_by=approvers[-1],
        approved_by=approvers,
        approvals_needed=needed,
        policy_rule="prod-two-leads",
    )
    arguments.update(confirmed_by=approvers[-1], approval_grant=grant)
    return json.dumps(arguments)


def test_the_runner_needs_what_its_own_policy_needs(
    site: FleetSite, heartbeats: Heartbeats, redis_client: redis.Redis, keys: Keys, tmp_path: Path
) -> None:
    policy = tmp_path / "policy.yaml"
    policy.write_text(POLICY)
    site.extra_env["CHATOPS_POLICY_FILE"] = str(policy)
    site.start("web-03", heartbeats)
    site.start("db-01", heartbeats)
    send = Dispatcher(redis_client, keys, site.queue, heartbeats, SECRET.encode()).call

    lowered = approved("web-03", execution_id("run1", "c1"), ["U_CAROL"], 1)  # the sealed rule was lowered
    result = send("web-03", "execute", "restart_app", lowered, timeout=20, mutating=True)
    assert result.is_error and "its policy needs 2 distinct approvals, the grant has 1" in result.output
    short = approved("web-03", execution_id("run1", "c2"), ["U_CAROL"], 2)
    result = send("web-03", "execute", "restart_app", short, timeout=20, mutating=True)
    assert result.is_error and "its approval grant has 1 of 2 approvals" in result.output
    twice = approved("web-03", execution_id("run1", "c3"), ["U_CAROL", "U_CAROL"], 2)  # one person twice
    result = send("web-03", "execute", "restart_app", twice, timeout=20, mutating=True)
    assert result.is_error and "1 of 2 approvals" in result.output
    assert site.actions("web-03") == []

    both = approved("web-03", execution_id("run1", "c4"), ["U_CAROL", "U_DAVE"], 2)
    result = send("web-03", "execute", "restart_app", both, timeout=20, mutating=True)
    assert not result.is_error, result.output
    assert site.actions("web-03") == ["api restarted by U_DAVE"]

    denied = approved("db-01", execution_id("run1", "c5"), ["U_CAROL", "U_DAVE"], 2)
    result = send("db-01", "execute", "restart_app", denied, timeout=20, mutating=True)
    assert result.is_error and "its policy denies it here" in result.output and "DBA runbook" in result.output
    assert site.actions("db-01") == []
