"""Several approvals on one card: distinct people, counted once each, the last one approves, atomically."""

from __future__ import annotations

import dataclasses
import threading
import uuid

import pytest
import redis

from agent.scripted import tool_call
from agent.tooling import ToolCategory
from bot.errors import BotConfigurationError
from bot.keys import Keys
from bot.observability.audit import AuditKind
from bot.policy.deciders import Action, Ruling
from bot.policy.rules import Requirement
from bot.runs.approval_votes import ApprovalVotes, VoteOutcome, VoteResult
from bot.runs.approvals import Approvals, ApprovalStatus
from bot.runs.service import RunService
from tests.support.harness import make_options

CARD = ("C1", "111.222")


def approving(user: str, approval_id: str, requirement: Requirement) -> Ruling:
    """What the deciders rule when ``user`` may approve under ``requirement`` (a web click's ruling)."""
    return Ruling(True, user=user, action=Action.APPROVE, approval_id=approval_id, requirement=requirement)


def pending(client: redis.Redis, keys: Keys, timeout: float = 60) -> str:
    """A new pending record (a run of its own) with its card posted at ``CARD``."""
    approvals = Approvals(client, keys, retention_seconds=3600)
    approval, created = approvals.create(
        uuid.uuid4().hex,
        tool_call("delete", "c1"),
        ToolCategory.DESTRUCTIVE,
        requester="U0",
        timeout_seconds=timeout,
    )
    assert created
    approvals.set_card(approval.id, *CARD)
    return approval.id


def test_two_people_racing_to_be_second_approve_exactly_once(redis_client: redis.Redis, keys: Keys) -> None:
    votes = ApprovalVotes(redis_client, keys)
    for _ in range(20):
        approval_id = pending(redis_client, keys)
        assert votes.vote(approval_id, "U_A", 2, CARD).outcome is VoteOutcome.COUNTED  # type: ignore[union-attr]
        results: list[VoteOutcome] = []
        barrier = threading.Barrier(2)

        def click(
            user: str,
            approval_id: str = approval_id,
            barrier: threading.Barrier = barrier,
            results: list[VoteOutcome] = results,
        ) -> None:
            barrier.wait()
            result = votes.vote(approval_id, user, 2, CARD)
            assert result is not None
            results.append(result.outcome)

        threads = [threading.Thread(target=click, args=(u,)) for u in ("U_B", "U_C")]
        for thread in threads:
            thread.start()
        for thread in threads:
            thread.join()
        assert sorted(results) == [VoteOutcome.LOST, VoteOutcome.WON]  # the other came too late
        record = Approvals(redis_client, keys, retention_seconds=3600).get(approval_id)
        assert record is not None and record.status is ApprovalStatus.APPROVED
        assert record.reason in ("approved by U_A, U_B", "approved by U_A, U_C")


def test_the_same_person_counts_once_and_another_card_or_a_late_click_counts_nothing(
    redis_client: redis.Redis, keys: Keys
) -> None:
    votes = ApprovalVotes(redis_client, keys)
    approval_id = pending(redis_client, keys)
    assert votes.vote(approval_id, "U_A", 2, CARD).outcome is VoteOutcome.COUNTED  # type: ignore[union-attr]
    again = votes.vote(approval_id, "U_A", 2, CARD)
    assert again is not None and (again.outcome, again.count) == (VoteOutcome.REPEAT, 1)
    other = votes.vote(approval_id, "U_B", 2, ("C1", "999.000"))  # a forged card: nothing counted
    assert other is not None and other.outcome is VoteOutcome.MISMATCH
    assert votes.voters(approval_id) == ["U_A"]
    assert (
        0 < redis_client.ttl(keys.approval_votes(approval_id)) <= redis_client.ttl(keys.approval(approval_id))
    )
    assert votes.vote("0" * 32, "U_A", 2, CARD) is None

    late = pending(redis_client, keys, timeout=0)  # due at once by Redis's own clock
    expired = votes.vote(late, "U_A", 1, CARD)
    assert expired is not None and expired.outcome is VoteOutcome.EXPIRED
    record = Approvals(redis_client, keys, retention_seconds=3600).get(late)
    assert record is not None and record.status is ApprovalStatus.EXPIRED


def test_the_lifecycle_never_settles_a_several_approvals_record_with_one_decision(
    redis_client: redis.Redis, keys: Keys, queue_name: str
) -> None:
    service = RunService(redis_client, keys, make_options(queue_name))
    needs_two = Requirement("prod-destructive", (), ("S_SRE_LEADS",), False, 2)
    draft = Approvals.draft(
        "r9", tool_call("delete", "c1"), ToolCategory.DESTRUCTIVE, requester="U0", policy=needs_two.to_json()
    )
    approval, _ = service.lifecycle.request(draft, timeout_seconds=600)
    service.approvals.set_card(approval.id, *CARD)
    with pytest.raises(BotConfigurationError, match="needs several approvals"):
        service.lifecycle.decide(approval.id, user="U_A", approve=True, card=CARD)
    first, _ = service.lifecycle.vote(
        approval.id, user="U_A", card=CARD, ruling=approving("U_A", approval.id, needs_two)
    )
    assert first.outcome is VoteOutcome.COUNTED and service.queue.count == 0  # nothing to resume yet
    second, result = service.lifecycle.vote(
        approval.id, user="U_B", card=CARD, ruling=approving("U_B", approval.id, needs_two)
    )
    assert second.outcome is VoteOutcome.WON and result.approval.status is ApprovalStatus.APPROVED
    kinds = [e.kind for e in service.audit.entries("r9")]
    assert kinds == [
        AuditKind.APPROVAL_REQUESTED,
        AuditKind.APPROVAL_VOTED,
        AuditKind.APPROVAL_VOTED,
        AuditKind.APPROVAL_DECIDED,
    ]
    assert service.queue.count == 1  # the run resumes once, after the last approval


class RacingVotes(ApprovalVotes):
    """A Redis writer who adds a vote for someone right before the count (after the lifecycle
    dropped the votes nobody cast): the race the grant's own check is for."""

    def vote(
        self, approval_id: str, user: str, needed: int, card: tuple[str, str], *, member: str = ""
    ) -> VoteResult | None:
        self._redis.sadd(self._keys.approval_votes(approval_id), "U_FORGED")
        return super().vote(approval_id, user, needed, card, member=member)


def test_a_vote_nobody_cast_is_never_signed_into_a_grant(
    redis_client: redis.Redis, keys: Keys, queue_name: str
) -> None:
    options = dataclasses.replace(make_options(queue_name), runner_secret="votes-secret-0123456789")
    service = RunService(redis_client, keys, options)
    lifecycle = dataclasses.replace(service.lifecycle, votes=RacingVotes(redis_client, keys))
    needs_two = Requirement("prod-destructive", (), ("S_SRE_LEADS",), False, 2)
    draft = Approvals.draft("r8", tool_call("delete", "c1"), ToolCategory.DESTRUCTIVE, requester="U0")
    approval, _ = lifecycle.request(draft, timeout_seconds=600)
    service.approvals.set_card(approval.id, *CARD)
    vote, _ = lifecycle.vote(
        approval.id, user="U_A", card=CARD, ruling=approving("U_A", approval.id, needs_two)
    )
    assert vote.outcome is VoteOutcome.WON  # Redis's script counted the forged member...
    record = service.approvals.get(approval.id)
    assert record is not None and record.status is ApprovalStatus.APPROVED
    assert record.grant == ""  # ...but no grant was signed: no runner, SSH or Kubernetes target acts on it
