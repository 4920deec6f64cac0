"""Approval records: created once per call, decided once, the loser told who won."""

from __future__ import annotations

import threading
import time

import redis

from agent.scripted import tool_call
from agent.tooling import ToolCategory
from agent.types import DecisionStatus
from bot.keys import Keys
from bot.runs.approvals import Approvals, ApprovalStatus, DecideResult


def make(client: redis.Redis, keys: Keys) -> Approvals:
    return Approvals(client, keys, retention_seconds=3600)


def test_a_record_is_created_once_per_call(redis_client: redis.Redis, keys: Keys) -> None:
    approvals = make(redis_client, keys)
    call = tool_call("restart", "call_1", service="web")
    first, created = approvals.create("r1", call, ToolCategory.MUTATING, requester="U1", timeout_seconds=60)
    again, created_again = approvals.create(
        "r1", call, ToolCategory.MUTATING, requester="U1", timeout_seconds=60
    )
    assert created and not created_again and again == first
    stored = approvals.get(first.id)
    assert stored == first
    assert stored.status is ApprovalStatus.PENDING and stored.args_sha256 == call.arguments_sha256()
    assert 3600 < redis_client.ttl(keys.approval(first.id)) <= 3660
    assert approvals.for_call("r1", "call_1") == first
    assert first.decision(call).status is DecisionStatus.PENDING


def test_racing_decisions_have_exactly_one_winner(redis_client: redis.Redis, keys: Keys) -> None:
    approvals = make(redis_client, keys)
    approval, _ = approvals.create(
        "r1", tool_call("restart", "c1"), ToolCategory.MUTATING, requester="U0", timeout_seconds=60
    )
    results: list[DecideResult | None] = []
    barrier = threading.Barrier(16)

    def click(user: str, status: ApprovalStatus) -> None:
        barrier.wait()
        results.append(make(redis_client, keys).decide(approval.id, status, user))

    threads = [
        threading.Thread(
            target=click, args=(f"U{i}", ApprovalStatus.APPROVED if i % 2 else ApprovalStatus.DECLINED)
        )
        for i in range(16)
    ]
    for thread in threads:
        thread.start()
    for thread in threads:
        thread.join()
    decided = [r for r in results if r is not None]
    winners = [r for r in decided if r.won]
    assert len(decided) == 16 and len(winners) == 1
    winner = winners[0].approval
    for loser in decided:
        # Every loser sees the same first decision: who, what and when.
        assert (loser.approval.decided_by, loser.approval.status) == (winner.decided_by, winner.status)
    assert approvals.get(approval.id) == winner


def test_decisions_map_to_what_the_model_is_told(redis_client: redis.Redis, keys: Keys) -> None:
    approvals = make(redis_client, keys)
    call = tool_call("restart", "c1", service="web")
    approval, _ = approvals.create("r1", call, ToolCategory.MUTATING, requester="U0", timeout_seconds=60)
    result = approvals.decide(approval.id, ApprovalStatus.APPROVED, "U9")
    assert result is not None and result.won and "approved by U9" in result.describe()
    decision = result.approval.decision(call)
    assert decision.approved and decision.confirmed_by == "U9"
    changed = tool_call("restart", "c1", service="db")
    assert result.approval.decision(changed).status is DecisionStatus.DECLINED
    assert result.approval.decision(changed).reason == "the arguments changed after approval"
    late = approvals.decide(approval.id, ApprovalStatus.EXPIRED, "chatops", "approval expired")
    assert late is not None and not late.won and late.approval.status is ApprovalStatus.APPROVED


def test_expired_and_declined_records_decline_the_call(redis_client: redis.Redis, keys: Keys) -> None:
    approvals = make(redis_client, keys)
    before = time.time()
    a, _ = approvals.create(
        "r1", tool_call("x", "c1"), ToolCategory.MUTATING, requester="U", timeout_seconds=1
    )
    after = time.time()
    b, _ = approvals.create(
        "r1", tool_call("x", "c2"), ToolCategory.MUTATING, requester="U", timeout_seconds=1
    )
    approvals.decide(a.id, ApprovalStatus.EXPIRED, "chatops", "approval expired")
    approvals.decide(b.id, ApprovalStatus.DECLINED, "U7")
    assert approvals.get(a.id).decision(tool_call("x", "c1")).reason == "approval expired"  # type: ignore[union-attr]
    assert "U7" in (approvals.get(b.id).decision(tool_call("x", "c2")).reason or "")  # type: ignore[union-attr]
    assert approvals.decide("missing", ApprovalStatus.APPROVED, "U1") is None
    assert [r.call_id for r in approvals.for_run("r1")] == ["c1", "c2"]
    assert before - 1 <= a.created_at <= after + 1  # when it was created (Redis' clock: the same host's)
