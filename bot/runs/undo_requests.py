"""An Undo click's run: a follow-up in the change's thread that starts with the stored undo call pending.

The click (``bot.slack.handlers.undo_clicks``) claims the offer (``bot.runs.undo_offers``); this
module turns the claimed offer into the run's first messages and starts it:

* a user message ``<@clicker> asked to undo <action> (approved by ...)``, the clicker's request;
* an assistant message holding exactly the offer's call (``UndoOffer.tool``, ``args_json``), under
  the call id ``undo_<offer id>``. The model never writes it: the loop finds the call unanswered
  (``agent.history.unanswered_calls``) and runs it through the approval gate like any change, so
  its card is posted, the policy applies to the clicker as requester, and after approval it runs
  once on the stored target; its own check follows. A model's calls get the runtime's ids
  (``agent.types.runtime_call_id``), never ``undo_...``: only this module's call is an undo's.

Audited: ``undo_requested`` when the run is started, ``undo_executed`` when its call ran, both
with the offer and the action's approval and call ids.
"""

from __future__ import annotations

from dataclasses import dataclass

from agent.events import ToolEnd
from agent.types import Message, ToolCall
from bot.observability.audit import AuditKind, AuditLog
from bot.runs.service import RunService
from bot.runs.undo_offers import UndoOffer, UndoOffers

UNDO_CALL_PREFIX = "undo_"


def undo_call_id(offer_id: str) -> str:
    return f"{UNDO_CALL_PREFIX}{offer_id}"


def request_text(offer: UndoOffer, clicker: str, approved_by: str) -> str:
    """What the undo run's first message says (the model reads it before the call's result)."""
    by = f" (approved by {approved_by})" if approved_by else ""
    return f"<@{clicker}> asked to undo {offer.action_tool} (call {offer.action_call_id}){by}"


@dataclass(frozen=True)
class UndoStart:
    run_id: str
    created: bool  # False: the thread had an active run meanwhile (``run_id`` is that one)


def start_undo(service: RunService, offer: UndoOffer, clicker: str) -> UndoStart:
    """Start the undo's run in the change's thread, requested by ``clicker``; audited."""
    action = service.approvals.get(offer.approval_id)
    approved_by = (
        ", ".join(f"<@{u}>" for u in action.approved_by or [action.decided_by] if u) if action else ""
    )
    text = request_text(offer, clicker, approved_by)
    call = ToolCall(id=undo_call_id(offer.id), name=offer.tool, arguments=offer.args_json)
    submission = service.submit(
        offer.channel,
        offer.thread_ts,
        requester=clicker,
        text=text,
        follows=offer.run_id,
        then=[Message.assistant(None, [call])],
        # The clicker asked for exactly this call (code derived it from the approved change):
        # its values are their request, not something the model read (``bot.runs.provenance``).
        requested=f"{text}\n{offer.args_json}",
    )
    if submission.created:
        service.audit.record(
            AuditKind.UNDO_REQUESTED,
            submission.run_id,
            user=clicker,
            offer_id=offer.id,
            approval_id=offer.approval_id,
            call_id=offer.action_call_id,
            action_run_id=offer.run_id,
            undo=offer.shown(),
        )
    return UndoStart(submission.run_id, submission.created)


def record_executed(offers: UndoOffers, audit: AuditLog, run_id: str, event: ToolEnd) -> None:
    """``undo_executed`` when an undo's own call ran (its id names a claimed offer)."""
    if not event.executed or not event.call.id.startswith(UNDO_CALL_PREFIX):
        return
    offer = offers.get(event.call.id.removeprefix(UNDO_CALL_PREFIX))
    if offer is None or not offer.claimed_by:
        return
    audit.record(
        AuditKind.UNDO_EXECUTED,
        run_id,
        offer_id=offer.id,
        call_id=event.call.id,
        action_run_id=offer.run_id,
        approval_id=offer.approval_id,
        action_call_id=offer.action_call_id,
        failed=event.is_error,
    )
