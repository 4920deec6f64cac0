"""Approval records bound to one execution, one card and Redis's clock (real Redis, real RQ jobs)."""

from __future__ import annotations

import time
from dataclasses import dataclass, field, replace
from pathlib import Path

import redis

from agent.scripted import tool_call
from agent.tooling import ToolCategory
from agent.types import RunStatus
from bot.keys import Keys
from bot.observability.audit import AuditKind
from bot.runs.approvals import CARD_FAILED_REASON, Approval, Approvals, ApprovalStatus, DecideOutcome
from bot.runs.presenter import InMemoryPresenter, RunRef
from bot.runs.queueing import fetch_worker_job
from bot.runs.runtime import Runtime
from tests.bot.runtimes import file_tools, plan_model
from tests.support.harness import Harness, make_options


def approvals(client: redis.Redis, keys: Keys) -> Approvals:
    return Approvals(client, keys, retention_seconds=3600)


def pending(client: redis.Redis, keys: Keys, timeout: float = 60) -> Approval:
    approval, _ = approvals(client, keys).create(
        "r1",
        tool_call("restart", "x00000001", service="api"),
        ToolCategory.MUTATING,
        requester="U1",
        timeout_seconds=timeout,
    )
    return approval


def test_an_approval_is_consumed_by_exactly_one_execution(redis_client: redis.Redis, keys: Keys) -> None:
    store = approvals(redis_client, keys)
    approval = pending(redis_client, keys)
    assert store.consume(approval.id) == "pending"  # nothing to consume before a decision
    store.decide(approval.id, ApprovalStatus.APPROVED, "U2")
    assert store.consume(approval.id) == "consumed"
    assert store.consume(approval.id) == "used"  # a second execution never rides on it
    consumed = store.get(approval.id)
    assert consumed is not None and consumed.consumed_at is not None


def test_a_click_decides_only_its_own_card(redis_client: redis.Redis, keys: Keys) -> None:
    store = approvals(redis_client, keys)
    approval = pending(redis_client, keys)
    # Before its card is posted, no click can decide it.
    assert (
        store.decide(approval.id, ApprovalStatus.APPROVED, "U2", card=("C1", "1.1")).outcome
        is DecideOutcome.MISMATCH
    )  # type: ignore[union-attr]
    store.set_card(approval.id, "C1", "1.1")
    for card in (("C_OTHER", "1.1"), ("C1", "9.9"), ("C1", ""), ("", "")):
        result = store.decide(approval.id, ApprovalStatus.APPROVED, "U2", card=card)
        assert result is not None and result.outcome is DecideOutcome.MISMATCH
    assert store.get(approval.id).status is ApprovalStatus.PENDING  # type: ignore[union-attr]
    result = store.decide(approval.id, ApprovalStatus.APPROVED, "U2", card=("C1", "1.1"))
    assert result is not None and result.won


def test_times_come_from_redis_not_from_a_skewed_host(redis_client: redis.Redis, keys: Keys) -> None:
    seconds, micros = redis_client.time()
    approval = pending(redis_client, keys, timeout=30)
    assert abs(approval.created_at - (seconds + micros / 1e6)) < 5
    assert approval.expires_at - approval.created_at == 30
    store = approvals(redis_client, keys)
    store.set_card(approval.id, "C1", "1.1")
    # Whatever a host's clock says, a click now is well inside the 30 s.
    result = store.decide(approval.id, ApprovalStatus.APPROVED, "U2", card=("C1", "1.1"))
    assert result is not None and result.won


def test_a_click_after_the_expiry_settles_it_as_expired(redis_client: redis.Redis, keys: Keys) -> None:
    store = approvals(redis_client, keys)
    approval = pending(redis_client, keys)
    store.set_card(approval.id, "C1", "1.1")
    redis_client.hset(keys.approval(approval.id), "expires_at", repr(time.time() - 600))
    result = store.decide(approval.id, ApprovalStatus.APPROVED, "U2", card=("C1", "1.1"))
    assert result is not None and result.outcome is DecideOutcome.EXPIRED
    assert result.approval.status is ApprovalStatus.EXPIRED and result.approval.decided_by == "chatops"


@dataclass
class FlakyPresenter(InMemoryPresenter):
    """Slack refusing the approval card ``failures`` times (a 5xx after the client's own retries)."""

    failures: int = 0
    attempts: list[str] = field(default_factory=list)

    def ask_approval(self, run: RunRef, approval: Approval) -> str | None:
        self.attempts.append(approval.id)
        if len(self.attempts) <= self.failures:
            raise OSError("chat.postMessage failed: internal_error")
        return super().ask_approval(run, approval)


def harness_with(base: Harness, presenter: InMemoryPresenter, **runtime: object) -> Harness:
    harness = replace(base, presenter=presenter)
    original = harness.runtime

    def build() -> Runtime:
        return replace(original(), card_retry_delays=(0.01, 0.01), **runtime)  # type: ignore[arg-type]

    object.__setattr__(harness, "runtime", build)
    return harness


def test_a_card_post_that_fails_is_retried(harness: Harness) -> None:
    flaky = FlakyPresenter(failures=2)
    bot = harness_with(harness, flaky)
    run_id = bot.submit("plan: restart_service")
    bot.work()
    assert bot.status(run_id) is RunStatus.AWAITING_APPROVAL and len(flaky.attempts) == 3
    (approval,) = bot.service.approvals.for_run(run_id)
    assert approval.status is ApprovalStatus.PENDING and approval.card_ts


def test_a_card_that_cannot_be_posted_is_never_a_pending_approval(harness: Harness) -> None:
    flaky = FlakyPresenter(failures=99)
    bot = harness_with(harness, flaky)
    run_id = bot.submit("plan: restart_service")
    bot.work()
    assert bot.status(run_id) is RunStatus.COMPLETED
    (approval,) = bot.service.approvals.for_run(run_id)
    assert approval.status is ApprovalStatus.DECLINED and approval.reason == CARD_FAILED_REASON
    assert bot.tool_results(run_id) == [f"Error: declined: {CARD_FAILED_REASON}"]
    assert bot.executions("restart_service") == []
    (notice,) = flaky.of("post_notice", run_id)
    assert "could not post the approval card" in notice
    assert AuditKind.APPROVAL_DECIDED in bot.audit_kinds(run_id)


def test_a_worker_clock_minutes_behind_does_not_expire_a_fresh_approval(
    redis_client: redis.Redis, keys: Keys, queue_name: str, tmp_path: Path
) -> None:
    """The expiry job is scheduled by the worker's clock (150 s behind: due at once); it runs, finds
    the approval not due by Redis's clock, and schedules itself again instead of expiring it."""
    options = make_options(queue_name, approval_timeout_seconds=60.0)
    base = Harness(redis_client, keys, options, tmp_path, [plan_model()], file_tools(tmp_path))
    bot = harness_with(base, InMemoryPresenter(), clock=lambda: time.time() - 150)
    run_id = bot.submit("plan: restart_service")
    bot.work()
    bot.work()  # the scheduler finds the expiry due (by the worker's clock) and runs it
    (approval,) = bot.service.approvals.for_run(run_id)
    assert approval.status is ApprovalStatus.PENDING
    finished = [fetch_worker_job(i, redis_client) for i in bot.queue.finished_job_registry.get_job_ids()]
    assert "not_due" in [job.return_value() for job in finished if job.func_name.endswith("expire_approval")]
    assert bot.queue.scheduled_job_registry.count == 1  # the expiry, again, for when it is due
    assert bot.service.lifecycle.decide(approval.id, user="U_APPROVER", approve=True).won
    bot.work()
    assert bot.status(run_id) is RunStatus.COMPLETED and len(bot.executions("restart_service")) == 1
