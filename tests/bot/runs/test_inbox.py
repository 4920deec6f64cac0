"""The inbox: stored before acknowledged, drained exactly once in order, supersedes a pending approval."""

from __future__ import annotations

import redis

from agent.redis_memory import RedisMemory
from agent.scripted import tool_call
from agent.tooling import ToolCategory
from agent.types import RunState, RunStatus
from bot.keys import Keys
from bot.runs.approvals import Approvals, ApprovalStatus
from bot.runs.inbox import DeliveryStatus, Inbox


def active_run(client: redis.Redis, keys: Keys, run_id: str, status: str = "running") -> None:
    """What ``bot.runs.service`` writes for an active run in thread C1/1.0."""
    client.hset(keys.run(run_id), mapping={"status": status, "channel": "C1", "thread_ts": "1.0"})
    client.set(keys.thread("C1", "1.0"), run_id)


def test_a_reply_without_an_active_run_is_refused(redis_client: redis.Redis, keys: Keys) -> None:
    inbox = Inbox(redis_client, keys)
    delivery = inbox.deliver("C1", "1.0", user="U1", text="hello?", ts="2.0")
    assert delivery.status is DeliveryStatus.NO_ACTIVE_RUN and not delivery.stored
    active_run(redis_client, keys, "r1", status="completed")  # a stale claim of a finished run
    assert inbox.deliver("C1", "1.0", user="U1", text="hi", ts="2.1").status is DeliveryStatus.NO_ACTIVE_RUN
    assert redis_client.llen(keys.inbox("r1")) == 0


def test_replies_are_stored_in_order_once_each(redis_client: redis.Redis, keys: Keys) -> None:
    active_run(redis_client, keys, "r1")
    inbox = Inbox(redis_client, keys)
    for n in range(3):
        delivery = inbox.deliver("C1", "1.0", user="U1", text=f"msg {n}", ts=f"2.{n}")
        assert delivery.status is DeliveryStatus.STORED and delivery.run_id == "r1"
        # Acknowledging is allowed now: the reply is already in Redis.
        assert [i.text for i in inbox.peek("r1")][-1] == f"msg {n}"
    retry = inbox.deliver("C1", "1.0", user="U1", text="msg 1", ts="2.1")  # Slack retried the event
    assert retry.status is DeliveryStatus.DUPLICATE and retry.stored
    messages = inbox.messages("r1")
    assert [m.content for m in messages] == ["msg 0", "msg 1", "msg 2"]
    assert all(m.meta["slack_user"] == "U1" for m in messages)
    RedisMemory(redis_client, keys, "r1").append(messages[:2], RunState(status=RunStatus.RUNNING))
    assert [m.content for m in inbox.messages("r1")] == ["msg 2"]


def test_a_reply_supersedes_a_pending_approval(redis_client: redis.Redis, keys: Keys) -> None:
    active_run(redis_client, keys, "r1", status="awaiting_approval")
    approvals = Approvals(redis_client, keys, retention_seconds=60)
    approval, _ = approvals.create(
        "r1", tool_call("restart", "c1"), ToolCategory.MUTATING, requester="U1", timeout_seconds=60
    )
    delivery = Inbox(redis_client, keys).deliver(
        "C1", "1.0", user="U2", text="wait, not web", ts="3.0", may_supersede=True
    )
    assert delivery.status is DeliveryStatus.STORED and delivery.superseded == [approval.id]
    stored = approvals.get(approval.id)
    assert stored is not None and stored.status is ApprovalStatus.SUPERSEDED and stored.decided_by == "U2"
    late = approvals.decide(approval.id, ApprovalStatus.APPROVED, "U3")
    assert late is not None and not late.won and late.approval.decided_by == "U2"


def test_a_reply_by_someone_who_may_not_decide_is_stored_and_leaves_the_approval_pending(
    redis_client: redis.Redis, keys: Keys
) -> None:
    active_run(redis_client, keys, "r1", status="awaiting_approval")
    approvals = Approvals(redis_client, keys, retention_seconds=60)
    approval, _ = approvals.create(
        "r1", tool_call("restart", "c1"), ToolCategory.MUTATING, requester="U1", timeout_seconds=60
    )
    inbox = Inbox(redis_client, keys)
    delivery = inbox.deliver("C1", "1.0", user="U_GUEST", text="cancel it", ts="3.0")  # the default: no
    assert delivery.status is DeliveryStatus.STORED and delivery.superseded == []
    assert [m.content for m in inbox.messages("r1")] == ["cancel it"]
    stored = approvals.get(approval.id)
    assert stored is not None and stored.status is ApprovalStatus.PENDING and not stored.decided_by


def test_a_click_is_claimed_by_its_own_key_and_parks_nothing(redis_client: redis.Redis, keys: Keys) -> None:
    inbox = Inbox(redis_client, keys)
    claim = "findings:r1:U1:refute:H2:1"
    early = inbox.deliver("C1", "1.0", user="U1", text="refutes H2", ts="", claim=claim, park=True)
    assert early.status is DeliveryStatus.NO_ACTIVE_RUN  # no run yet: never kept for one
    assert redis_client.llen(keys.early_replies("C1", "1.0")) == 0
    active_run(redis_client, keys, "r1")
    first = inbox.deliver("C1", "1.0", user="U1", text="refutes H2", ts="", claim=claim)
    again = inbox.deliver("C1", "1.0", user="U1", text="refutes H2", ts="", claim=claim)  # a double click
    other = inbox.deliver(
        "C1", "1.0", user="U1", text="focus H1", ts="", claim=claim.replace("refute", "focus")
    )
    assert (first.status, again.status, other.status) == (
        DeliveryStatus.STORED,
        DeliveryStatus.DUPLICATE,
        DeliveryStatus.STORED,
    )
    [refute, focus] = inbox.messages("r1")
    assert (refute.content, refute.meta["ts"], focus.content) == ("refutes H2", "", "focus H1")
    assert redis_client.exists(keys.seen_message("C1", claim))
