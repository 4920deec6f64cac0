"""Every move of an approval is made by ``ApprovalLifecycle`` and audited exactly once, whoever races for it."""

from __future__ import annotations

import threading
import time
from collections.abc import Callable

import pytest
import redis

from agent.scripted import tool_call
from agent.tooling import ToolCategory
from bot.errors import NotAnApproverError
from bot.keys import Keys
from bot.observability.audit import AuditEntry, AuditKind
from bot.policy.deciders import Action, Deciders
from bot.policy.rules import AccountKind
from bot.runs.approvals import Approval, Approvals, ApprovalStatus, DecideOutcome
from bot.runs.service import RunService
from tests.support.harness import make_options


def service_for(client: redis.Redis, keys: Keys, queue_name: str, **overrides: object) -> RunService:
    return RunService(client, keys, make_options(queue_name, **overrides))


def requested(service: RunService, call_id: str = "c1", run_id: str = "r1") -> Approval:
    draft = Approvals.draft(
        run_id, tool_call("restart", call_id, service="api"), ToolCategory.MUTATING, requester="U1"
    )
    approval, created = service.lifecycle.request(draft, timeout_seconds=600)
    assert created
    return approval


def decided(service: RunService, approval_id: str) -> list[AuditEntry]:
    entries = service.audit.entries()
    return [
        e for e in entries if e.kind is AuditKind.APPROVAL_DECIDED and e.fields["approval_id"] == approval_id
    ]


def overdue(client: redis.Redis, keys: Keys, approval: Approval) -> None:
    """Past its expiry by Redis's clock (what the scripts judge by)."""
    seconds, _ = client.time()
    client.hset(keys.approval(approval.id), "expires_at", repr(seconds - 600.0))


def test_a_request_is_audited_and_its_expiry_scheduled_once(
    redis_client: redis.Redis, keys: Keys, queue_name: str
) -> None:
    service = service_for(redis_client, keys, queue_name)
    approval = requested(service)
    again, created = service.lifecycle.request(
        Approvals.draft(
            "r1", tool_call("restart", "c1", service="api"), ToolCategory.MUTATING, requester="U1"
        ),
        timeout_seconds=600,
    )
    assert not created and again.id == approval.id  # a resumed run asking again gets the same record
    kinds = [e.kind for e in service.audit.entries("r1")]
    assert kinds == [AuditKind.APPROVAL_REQUESTED]
    assert service.queue.scheduled_job_registry.count == 1  # its expiry


def test_racing_clicks_and_replies_leave_one_decision_and_one_audit_entry(
    redis_client: redis.Redis, keys: Keys, queue_name: str
) -> None:
    service = service_for(redis_client, keys, queue_name)
    approval = requested(service)
    barrier = threading.Barrier(12)
    moves: list[Callable[[], object]] = [
        *(
            (lambda n=n: service.lifecycle.decide(approval.id, user=f"U{n}", approve=n % 2 == 0))
            for n in range(8)
        ),
        *((lambda n=n: service.lifecycle.supersede("r1", f"U_REPLY{n}")) for n in range(4)),
    ]

    def race(move: Callable[[], object]) -> None:
        barrier.wait()
        move()

    threads = [threading.Thread(target=race, args=(move,)) for move in moves]
    for thread in threads:
        thread.start()
    for thread in threads:
        thread.join()
    record = service.approvals.get(approval.id)
    assert record is not None and record.status is not ApprovalStatus.PENDING
    (entry,) = decided(service, approval.id)
    assert (entry.fields["status"], entry.fields["decided_by"]) == (record.status.value, record.decided_by)
    # A click made outside the run resumes it; a supersede in the worker continues the run itself.
    clicked = record.status in (ApprovalStatus.APPROVED, ApprovalStatus.DECLINED)
    assert service.queue.count == (1 if clicked else 0)


def test_an_expiry_is_audited_and_resumes_the_run_once_whichever_path_comes_first(
    redis_client: redis.Redis, keys: Keys, queue_name: str
) -> None:
    service = service_for(redis_client, keys, queue_name)
    approval = requested(service)
    service.approvals.set_card(approval.id, "C1", "1.1")
    overdue(redis_client, keys, approval)
    late_click = service.lifecycle.decide(approval.id, user="U2", approve=True, card=("C1", "1.1"))
    assert late_click.outcome is DecideOutcome.EXPIRED and late_click.approval.decided_by == "chatops"
    assert service.queue.count == 1  # the run's resume
    job = service.lifecycle.expire(approval.id)  # the scheduled expiry job, when it comes due
    assert job is not None and job.outcome is DecideOutcome.LOST
    assert not service.lifecycle.still_waiting("r1")  # the sweep: nothing pending, nothing expired again
    gate = service.lifecycle.expire_if_due(approval.id)  # the gate, when the resumed run asks
    assert gate is not None and gate.approval.status is ApprovalStatus.EXPIRED
    (entry,) = decided(service, approval.id)
    assert entry.fields["status"] == "expired" and entry.fields["reason"] == "approval expired"
    assert service.queue.count == 1


def test_the_sweep_expires_an_overdue_approval_through_the_same_expiry(
    redis_client: redis.Redis, keys: Keys, queue_name: str
) -> None:
    service = service_for(redis_client, keys, queue_name)
    approval = requested(service)
    fresh = requested(service, call_id="c2")
    overdue(redis_client, keys, approval)
    assert service.lifecycle.still_waiting("r1")  # the fresh one still waits for a person
    assert service.approvals.get(approval.id).status is ApprovalStatus.EXPIRED  # type: ignore[union-attr]
    assert service.approvals.get(fresh.id).status is ApprovalStatus.PENDING  # type: ignore[union-attr]
    assert len(decided(service, approval.id)) == 1 and decided(service, fresh.id) == []
    assert service.queue.count == 1  # the expiry resumes the run


def test_a_decline_that_finds_the_approval_overdue_settles_and_audits_it_as_expired(
    redis_client: redis.Redis, keys: Keys, queue_name: str
) -> None:
    """The gate declines when the card cannot be posted; if the retries outlasted the expiry, the
    record expired in that same script, and that move is audited like any other."""
    service = service_for(redis_client, keys, queue_name)
    approval = requested(service)
    overdue(redis_client, keys, approval)
    result = service.lifecycle.decline(approval.id, "chatops", "the card could not be posted")
    assert result is not None and result.outcome is DecideOutcome.EXPIRED
    (entry,) = decided(service, approval.id)
    assert entry.fields["status"] == "expired"


def test_stop_declines_every_pending_approval_once_and_resumes_the_run(
    redis_client: redis.Redis, keys: Keys, queue_name: str
) -> None:
    service = service_for(redis_client, keys, queue_name)
    first, second = requested(service), requested(service, call_id="c2")
    service.lifecycle.run_stopped("r1", "U_STOP")
    service.lifecycle.run_stopped("r1", "U_STOP")  # a second click finds nothing pending
    for approval in (first, second):
        (entry,) = decided(service, approval.id)
        assert entry.fields["status"] == "declined" and entry.fields["decided_by"] == "U_STOP"
        assert entry.fields["reason"] == "the run was stopped by U_STOP"
    assert service.queue.count == 2  # one resume per Stop: enqueuing one too many is harmless


class Members:
    """Everyone a full member of the workspace, in no user group (the deciders' identity)."""

    def kind(self, user: str) -> AccountKind | None:
        return AccountKind.MEMBER

    def members(self, group: str) -> frozenset[str] | None:
        return frozenset()


def test_someone_outside_chatops_approvers_decides_nothing_and_nothing_is_audited(
    redis_client: redis.Redis, keys: Keys, queue_name: str
) -> None:
    everyone = Deciders[Approval](Members(), approvers=("U_BOSS",))  # CHATOPS_APPROVERS=U_BOSS
    service = RunService(redis_client, keys, make_options(queue_name), deciders=everyone)
    approval = requested(service)
    with pytest.raises(NotAnApproverError):
        service.lifecycle.decide(approval.id, user="U_INTRUDER", approve=True)
    assert service.approvals.get(approval.id).status is ApprovalStatus.PENDING  # type: ignore[union-attr]
    assert decided(service, approval.id) == [] and service.queue.count == 0
    before = time.time()
    assert service.lifecycle.decide(approval.id, user="U_BOSS", approve=True).won
    assert before - 1 <= decided(service, approval.id)[0].at <= time.time() + 1


def test_a_ruling_about_someone_else_or_another_card_decides_nothing(
    redis_client: redis.Redis, keys: Keys, queue_name: str
) -> None:
    """A caller that hands the lifecycle a ruling made for another person, card or action (a
    handler's mix-up, or a refused one) moves nothing: the ruling must be about this decision."""
    everyone = Deciders[Approval](Members(), approvers=("U_BOSS",))
    service = RunService(redis_client, keys, make_options(queue_name), deciders=everyone)
    approval, other = requested(service), requested(service, call_id="c2")
    boss = everyone.decide("U_BOSS", Action.APPROVE, approval)
    intruder = everyone.decide("U_INTRUDER", Action.APPROVE, approval)
    assert boss.allowed and not intruder.allowed
    for user, approval_id, approve, ruling in (
        ("U_INTRUDER", approval.id, True, boss),  # the boss's ruling, for someone else
        ("U_BOSS", other.id, True, boss),  # for another card
        ("U_BOSS", approval.id, False, boss),  # an approval's ruling used to decline
        ("U_INTRUDER", approval.id, True, intruder),  # a refusal
    ):
        with pytest.raises(NotAnApproverError):
            service.lifecycle.decide(approval_id, user=user, approve=approve, ruling=ruling)
    assert [service.approvals.get(a.id).status for a in (approval, other)] == [ApprovalStatus.PENDING] * 2  # type: ignore[union-attr]
    assert decided(service, approval.id) == decided(service, other.id) == [] and service.queue.count == 0
    assert service.lifecycle.decide(approval.id, user="U_BOSS", approve=True, ruling=boss).won
