"""An executed change's undo offer (issue 34, part 4): the undo its approval sealed, with the state
read just before the change, stored and audited with the change's approval and call ids; a record
changed in Redis, or a before-read without the field, offers nothing."""

from __future__ import annotations

import json

import redis

from agent.checks import Before, CheckOutcome
from agent.events import CheckEnded
from agent.scripted import tool_call
from agent.tooling import ToolCategory
from agent.verification import PlannedCall, Verification
from bot.keys import Keys
from bot.observability.audit import AuditKind, AuditLog
from bot.runs.approval_seal import ApprovalSeal
from bot.runs.approvals import Approvals, ApprovalStatus
from bot.runs.presenter import RunRef
from bot.runs.undo_offering import offer_undo
from bot.runs.undo_offers import ClaimOutcome, UndoOffers, UndoSeal

SECRET = "s" * 32
RUN = RunRef("r1", "C1", "100.1", "U_ALICE")
STATUS = PlannedCall("pool_status", '{"pool":"web","target":"web-03"}')
VERIFY = Verification(
    check=PlannedCall("pool_status", '{"pool":"web","target":"web-03"}', expect='"state": "running"'),
    before=STATUS,
    undo=PlannedCall("pool_scale", '{"pool":"web","replicas":"{before.replicas}","target":"web-03"}'),
)


def approved(client: redis.Redis, keys: Keys, seal: ApprovalSeal) -> tuple[Approvals, str]:
    approvals = Approvals(client, keys, retention_seconds=600)
    call = tool_call("pool_scale", "c1", pool="web", replicas=8, target="web-03")
    draft = Approvals.draft(
        "r1", call, ToolCategory.MUTATING, requester="U_ALICE", channel="C1", verify=VERIFY.to_json()
    )
    approvals.store(seal.sealed(draft), 600)
    approvals.decide(draft.id, ApprovalStatus.APPROVED, "U_BOB")
    return approvals, draft.id


def ended(before_output: str, fields: dict[str, object] | None) -> CheckEnded:
    assert VERIFY.check is not None
    before = Before(STATUS, before_output, fields)
    outcome = CheckOutcome(VERIFY.check, True, False, '{"state": "running"}', 1, 0.1, 60.0, before)
    return CheckEnded(tool_call("pool_scale", "c1", pool="web", replicas=8, target="web-03"), outcome, "E2")


def test_the_offer_is_the_sealed_undo_with_the_state_read_before(
    redis_client: redis.Redis, keys: Keys
) -> None:
    seal = ApprovalSeal.from_secret(SECRET)
    assert seal is not None
    approvals, approval_id = approved(redis_client, keys, seal)
    offers = UndoOffers(redis_client, keys, UndoSeal.from_secret(SECRET))
    audit = AuditLog(redis_client, keys, max_len=100)
    event = ended('{"replicas": 3, "state": "running"}', {"replicas": 3, "state": "running"})
    offer = offer_undo(offers, approvals, audit, RUN, event, 3600.0, seal)
    assert offer is not None and offer.tool == "pool_scale" and offer.target == "web-03"
    assert json.loads(offer.args_json) == {"pool": "web", "replicas": 3, "target": "web-03"}
    assert (offer.approval_id, offer.action_call_id, offer.channel, offer.thread_ts) == (
        approval_id,
        "c1",
        "C1",
        "100.1",
    )
    [entry] = [e for e in audit.entries("r1") if e.kind is AuditKind.UNDO_OFFERED]
    assert entry.fields["approval_id"] == approval_id and entry.fields["call_id"] == "c1"
    assert entry.fields["offer_id"] == offer.id and '"replicas":3' in entry.fields["undo"]
    offers.set_message(offer.id, "C1", "200.2")
    assert offers.claim(offer.id, channel="C1", ts="200.2", by="U_CAROL").outcome is ClaimOutcome.CLAIMED


def test_no_offer_without_the_field_or_from_a_record_changed_in_redis(
    redis_client: redis.Redis, keys: Keys
) -> None:
    seal = ApprovalSeal.from_secret(SECRET)
    assert seal is not None
    approvals, approval_id = approved(redis_client, keys, seal)
    offers = UndoOffers(redis_client, keys, UndoSeal.from_secret(SECRET))
    audit = AuditLog(redis_client, keys, max_len=100)
    assert offer_undo(offers, approvals, audit, RUN, ended("{}", {}), 3600.0, seal) is None
    [entry] = [e for e in audit.entries("r1") if e.kind is AuditKind.UNDO_OFFERED]
    assert entry.fields["problem"] == "the state read before the change has no replicas"
    # A Redis writer swaps the sealed undo for another call: the record offers nothing.
    hostile = Verification(
        check=VERIFY.check, before=STATUS, undo=PlannedCall("pool_scale", '{"pool":"web","replicas":0}')
    )
    redis_client.hset(keys.approval(approval_id), "verify", hostile.to_json())
    event = ended('{"replicas": 3}', {"replicas": 3})
    assert offer_undo(offers, approvals, audit, RUN, event, 3600.0, seal) is None
    assert not list(redis_client.scan_iter(match=keys.undo_offer("*").replace("\\*", "*")))
