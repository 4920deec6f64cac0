"""After an approved change ran and its check ended: store its undo as an offer (``bot.runs.undo_offers``).

The undo is the one the approval sealed (``Approval.verify``, as its card showed it), never one the
model or the loop derives again, with ``{before.X}`` filled from what the before-read printed just
before the change (``agent.verification.filled_undo``). A change whose record declares no undo, or
whose before-read did not give the fields its undo needs, gets no offer (the audit says why for the
second, and for a record whose seal no longer holds). Each offer is audited (``undo_offered``) with the change's approval and call ids, so the
audit links the action, its check (``tool_executed`` and the check's evidence) and its undo.
"""

from __future__ import annotations

import json
import logging

from agent.events import CheckEnded
from agent.verification import TARGET_KEY, PlannedCall, Verification, filled_undo
from bot.observability.audit import AuditKind, AuditLog
from bot.runs.approval_seal import TAMPERED, ApprovalSeal
from bot.runs.approvals import Approvals, ApprovalStatus
from bot.runs.presenter import RunRef
from bot.runs.undo_offers import UndoFacts, UndoOffer, UndoOffers

log = logging.getLogger(__name__)


def offer_undo(
    offers: UndoOffers,
    approvals: Approvals,
    audit: AuditLog,
    run: RunRef,
    event: CheckEnded,
    window_seconds: float,
    seal: ApprovalSeal | None = None,
) -> UndoOffer | None:
    """The change's undo offer, stored and audited; ``None`` when it has none. ``seal``: the
    approval record's (``CHATOPS_RUNNER_SECRET``): a record changed in Redis offers no undo."""
    approval = approvals.for_call(run.run_id, event.call.id)
    if approval is None or approval.status is not ApprovalStatus.APPROVED:
        return None
    verification = Verification.from_json(approval.verify)
    if verification is None or verification.undo is None:
        return None
    before = event.outcome.before
    filled: PlannedCall | str = TAMPERED
    if seal is None or seal.problem(approval, run.channel) is None:
        filled = filled_undo(verification.undo, before.fields if before is not None else None)
    if isinstance(filled, str):
        log.info("run %s: no undo offered for %s: %s", run.run_id, approval.tool, filled)
        audit.record(
            AuditKind.UNDO_OFFERED,
            run.run_id,
            approval_id=approval.id,
            call_id=approval.call_id,
            offer_id="",
            problem=filled,
        )
        return None
    target = json.loads(filled.arguments).get(TARGET_KEY)
    offer = offers.offer(
        UndoFacts(
            run_id=run.run_id,
            action_call_id=approval.call_id,
            approval_id=approval.id,
            channel=run.channel,
            thread_ts=run.thread_ts,
            action_tool=approval.tool,
            tool=filled.tool,
            args_json=filled.arguments,
            target=target if isinstance(target, str) else "",
        ),
        window_seconds,
    )
    audit.record(
        AuditKind.UNDO_OFFERED,
        run.run_id,
        approval_id=approval.id,
        call_id=approval.call_id,
        offer_id=offer.id,
        undo=offer.shown(),
        until=repr(offer.expires_at),
    )
    return offer
