"""Runs through real RQ jobs (in-process worker, real Redis): finish, suspend, approve, decline, expire, redirect."""

from __future__ import annotations

import time

from agent.types import RunStatus
from bot.observability.audit import AuditKind
from bot.runs.approvals import Approval, ApprovalStatus
from bot.runs.inbox import DeliveryStatus
from bot.runs.lease import Lease
from bot.runs.presenter import InMemoryPresenter, StopNotice
from bot.runs.queueing import fetch_worker_job
from bot.runs.service import JOB_TIMEOUT_MARGIN_SECONDS
from tests.support.harness import Harness, make_options


def presenter(harness: Harness) -> InMemoryPresenter:
    assert isinstance(harness.presenter, InMemoryPresenter)
    return harness.presenter


def test_a_run_completes_and_the_thread_hears_the_answer(harness: Harness) -> None:
    run_id = harness.submit("plan: check_health")
    record = harness.service.get(run_id)
    assert record is not None and record.status is RunStatus.QUEUED
    job = fetch_worker_job(record.job_id, harness.redis)
    assert job.timeout == 60 + JOB_TIMEOUT_MARGIN_SECONDS  # the job timeout follows the run deadline
    harness.work()
    assert harness.status(run_id) is RunStatus.COMPLETED
    assert [m.role for m in harness.history(run_id)] == ["system", "user", "assistant", "tool", "assistant"]
    assert presenter(harness).of("post_answer", run_id) == ["done: check_health ok"]
    assert len(presenter(harness).of("post_run_card", run_id)) == 1
    assert presenter(harness).of("update_run_card", run_id)[-1].status is RunStatus.COMPLETED
    assert harness.audit_kinds(run_id) == [
        AuditKind.RUN_STARTED,
        AuditKind.TOOL_EXECUTED,
        AuditKind.RUN_FINISHED,
    ]
    # Finished: the thread is free again, and the run's keys expire after the retention.
    assert harness.service.active_run("C1", "100.1") is None
    assert 0 < harness.redis.ttl(harness.keys.run(run_id)) <= 3600


def test_one_active_run_per_thread(harness: Harness) -> None:
    first = harness.submit("plan: check_health")
    again = harness.service.submit("C1", "100.1", requester="U2", text="me too")
    assert not again.created and again.run_id == first
    other = harness.service.submit("C1", "200.1", requester="U2", text="plan: check_health")
    assert other.created and other.run_id != first


def test_a_confirm_tool_suspends_the_run_and_frees_the_worker(harness: Harness) -> None:
    run_id = harness.submit("plan: restart_service")
    harness.work()
    assert harness.status(run_id) is RunStatus.AWAITING_APPROVAL
    assert harness.queue.started_job_registry.count == 0 and harness.queue.count == 0
    assert not harness.redis.exists(harness.keys.lease(run_id))  # no worker holds it
    asked: list[Approval] = presenter(harness).of("ask_approval", run_id)
    assert len(asked) == 1 and asked[0].tool == "restart_service" and asked[0].requester == "U_REQ"
    stored = harness.service.approvals.get(asked[0].id)
    assert stored is not None and stored.card_ts  # the card's ts is on the record, for updating it later
    assert harness.executions("restart_service") == []

    result = harness.service.lifecycle.decide(asked[0].id, user="U_APPROVER", approve=True)
    assert result.won
    harness.work()
    assert harness.status(run_id) is RunStatus.COMPLETED
    runs = harness.executions("restart_service")
    assert len(runs) == 1 and runs[0]["arguments"] == {"step": 0, "confirmed_by": "U_APPROVER"}
    assert harness.audit_kinds(run_id) == [
        AuditKind.RUN_STARTED,
        AuditKind.APPROVAL_REQUESTED,
        AuditKind.RUN_SUSPENDED,
        AuditKind.APPROVAL_DECIDED,
        AuditKind.TOOL_EXECUTED,
        AuditKind.RUN_FINISHED,
    ]
    executed = harness.service.audit.entries(run_id)[4].fields
    assert executed["confirmed_by"] == "U_APPROVER" and executed["requester"] == "U_REQ"


def test_a_declined_call_never_runs_and_the_model_is_told(harness: Harness) -> None:
    run_id = harness.submit("plan: restart_service")
    harness.work()
    (approval,) = presenter(harness).of("ask_approval", run_id)
    harness.service.lifecycle.decide(approval.id, user="U_BOSS", approve=False, reason="not during the sale")
    harness.work()
    assert harness.status(run_id) is RunStatus.COMPLETED
    assert harness.tool_results(run_id) == ["Error: declined: not during the sale"]
    assert harness.executions("restart_service") == []
    late = harness.service.lifecycle.decide(approval.id, user="U_OTHER", approve=True)
    assert not late.won and late.approval.decided_by == "U_BOSS" and "declined by U_BOSS" in late.describe()


def test_an_unanswered_approval_expires_through_the_scheduler(harness: Harness) -> None:
    harness.options = make_options(harness.options.queue_name, approval_timeout_seconds=1.0)
    run_id = harness.submit("plan: restart_service")
    harness.work()
    assert harness.status(run_id) is RunStatus.AWAITING_APPROVAL
    assert harness.queue.scheduled_job_registry.count == 1  # the expiry, waiting for its time
    time.sleep(1.2)
    harness.work()  # the scheduler enqueues the expiry, which enqueues the resume
    assert harness.status(run_id) is RunStatus.COMPLETED
    assert harness.tool_results(run_id) == ["Error: declined: approval expired"]
    (shown,) = presenter(harness).of("show_decision", run_id)
    assert shown.status is ApprovalStatus.EXPIRED
    assert harness.executions("restart_service") == []


def test_a_reply_supersedes_the_pending_approval_and_the_model_reads_it(harness: Harness) -> None:
    run_id = harness.submit("plan: restart_service")
    harness.work()
    delivery = harness.service.deliver(
        "C1", "100.1", user="U_REQ", text="wait, it recovered", ts="100.5", may_supersede=True
    )
    assert delivery.status is DeliveryStatus.STORED and len(delivery.superseded) == 1
    harness.work()
    assert harness.status(run_id) is RunStatus.COMPLETED
    history = harness.history(run_id)
    tool = next(m for m in history if m.role == "tool")
    assert tool.content == "Error: declined: superseded by a new message"
    assert history.index(tool) < next(i for i, m in enumerate(history) if m.content == "wait, it recovered")
    assert [m.content for m in presenter(harness).of("acknowledge", run_id)] == ["wait, it recovered"]
    assert harness.executions("restart_service") == []
    reply = harness.service.deliver("C1", "100.1", user="U_REQ", text="thanks", ts="100.9")
    assert reply.status is DeliveryStatus.NO_ACTIVE_RUN  # the run is finished: the Slack layer ignores it


def test_a_stopped_run_posts_a_stop_notice(harness: Harness) -> None:
    harness.options = make_options(
        harness.options.queue_name, limits=harness.options.limits.model_copy(update={"max_iterations": 1})
    )
    run_id = harness.submit("plan: check_health check_health")
    harness.work()
    assert harness.status(run_id) is RunStatus.ITERATION_LIMIT
    notices: list[StopNotice] = presenter(harness).of("post_stop_notice", run_id)
    assert len(notices) == 1 and notices[0].status is RunStatus.ITERATION_LIMIT
    assert notices[0].iterations == 1 and notices[0].tools_used == ("check_health",) and notices[0].tokens > 0
    finished = harness.service.audit.entries(run_id)[-1]
    assert finished.kind is AuditKind.RUN_FINISHED and finished.fields["status"] == "iteration_limit"


def test_a_retried_job_of_a_finished_run_does_nothing(harness: Harness) -> None:
    run_id = harness.submit("plan: check_health")
    harness.work()
    harness.service.enqueue(run_id)
    harness.work()
    assert len(harness.executions("check_health")) == 1
    assert harness.audit_kinds(run_id).count(AuditKind.RUN_FINISHED) == 1


def test_the_sweep_resumes_a_run_whose_resume_was_lost(harness: Harness) -> None:
    run_id = harness.submit("plan: restart_service")
    harness.work()
    (approval,) = harness.service.approvals.for_run(run_id)
    # Decided, but the resume job never made it to the queue (a web process died in between).
    harness.service.approvals.decide(approval.id, ApprovalStatus.APPROVED, "U_APPROVER")
    harness.redis.hdel(harness.keys.run(run_id), "job_id")
    assert harness.queue.count == 0
    harness.work()  # the worker's maintenance runs the sweep before it looks at the queue
    assert harness.status(run_id) is RunStatus.COMPLETED
    assert len(harness.executions("restart_service")) == 1


def test_a_job_for_a_run_another_worker_holds_defers_without_writing(harness: Harness) -> None:
    run_id = harness.submit("plan: check_health")
    assert Lease.acquire(harness.redis, harness.keys, run_id, 1.0, "another-worker") is not None
    harness.work()
    assert harness.status(run_id) is RunStatus.QUEUED and harness.history(run_id)[0].role == "user"
    assert harness.executions("check_health") == []
    assert harness.queue.scheduled_job_registry.count == 1  # it looks again in a second
    time.sleep(1.1)  # the other worker died: its lease lapses
    harness.work()
    assert harness.status(run_id) is RunStatus.COMPLETED
    assert len(harness.executions("check_health")) == 1


def test_a_thread_claimed_by_a_run_whose_record_vanished_takes_a_new_run(harness: Harness) -> None:
    harness.redis.set(harness.keys.thread("C1", "100.1"), "deleted-by-hand")
    run_id = harness.submit("plan: check_health")
    assert run_id != "deleted-by-hand" and harness.service.active_run("C1", "100.1") == run_id
