"""Undo: the check line's button asks for an executed change's stored undo (``bot.runs.undo_offers``).

Decided before Slack is answered, like an Approve click. Nothing in the payload is trusted but
what Slack signs: the clicker, the channel and the message the click came from. The button's value
names an offer; the click counts only

* from the offer's own message (the check line whose ts the worker recorded) in its channel, in
  a channel the bot serves, on an offer whose seal holds (``FORGED`` otherwise);
* from a person the policy lets request the undo's call in that channel (``Action.REQUEST``:
  the policy file's ``request:`` rule, as for a mention's run);
* while no run is going on in the thread (refused without claiming: click again once it ended);
* within the offer's window, once: the first click claims it atomically (``UndoOffers.claim``),
  every later one is told who asked.

Then the undo's run starts in the thread (``bot.runs.undo_requests``), requested by the clicker,
with the stored call pending: its approval card follows and the policy applies, as for any change.
The clicker alone is told what the click did.
"""

from __future__ import annotations

from dataclasses import dataclass

from agent.tooling import ToolCategory
from bot.policy.deciders import Action
from bot.policy.rules import Subject
from bot.runs.undo_offers import ClaimOutcome, UndoOffer
from bot.runs.undo_requests import start_undo
from bot.slack.handlers.runtime import WebRuntime
from bot.slack.rendering.blockkit import slack_date

NOTHING_DONE = "Nothing was done."
FORGED = f"This Undo button does not belong to this change's check message. {NOTHING_DONE}"
RUN_GOING_ON = "A run is going on in this thread; undo once it has finished."
STARTED = "Undo asked for: its approval card follows in the thread."


@dataclass(frozen=True)
class UndoClick:
    """Where a click came from, as Slack's signed payload says."""

    user: str
    channel: str
    message_ts: str


@dataclass(frozen=True)
class UndoAnswer:
    """What the clicker alone is told; ``run_id``: the undo's run, when one started."""

    note: str
    run_id: str = ""


class UndoClicks:
    """The ack half of an Undo click (see the module)."""

    def __init__(self, runtime: WebRuntime) -> None:
        self._rt = runtime

    def click(self, offer_id: str, click: UndoClick) -> UndoAnswer:
        if not offer_id or not self._rt.channel_allowed(click.channel):
            return UndoAnswer(FORGED)
        service = self._rt.service()
        offers = service.undo_offers
        judged = offers.judge(offer_id, channel=click.channel, ts=click.message_ts)
        if judged.outcome is not ClaimOutcome.CLAIMED or judged.offer is None:
            return UndoAnswer(refusal(judged.outcome, judged.offer, judged.by))
        offer = judged.offer
        verdict = self._rt.deciders.decide(click.user, Action.REQUEST, subject=self._subject(offer))
        if not verdict.allowed:
            return UndoAnswer(f"You may not ask for this undo here: {verdict.reason} {NOTHING_DONE}")
        if service.active_run(offer.channel, offer.thread_ts) is not None:
            return UndoAnswer(RUN_GOING_ON)
        claim = offers.claim(offer_id, channel=click.channel, ts=click.message_ts, by=click.user)
        if not claim.won or claim.offer is None:
            return UndoAnswer(refusal(claim.outcome, claim.offer, claim.by))
        started = start_undo(service, claim.offer, click.user)
        if not started.created:  # a run started in the thread since: the claim is given back
            offers.release(offer_id, click.user)
            return UndoAnswer(RUN_GOING_ON)
        return UndoAnswer(STARTED, started.run_id)

    def _subject(self, offer: UndoOffer) -> Subject:
        """The undo's call as the policy sees it: its tool and target; its kind and the target's
        labels are the action's (the undo acts on the same target; the worker checks the call
        again, as proposed, before its card)."""
        action = self._rt.service().approvals.get(offer.approval_id)
        category = action.category if action is not None else ToolCategory.MUTATING
        labels = tuple(sorted(action.labels)) if action is not None else ()
        return Subject("", offer.channel, offer.tool, category, offer.target, labels)


def refusal(outcome: ClaimOutcome, offer: UndoOffer | None, by: str) -> str:
    """Why a click claimed nothing, for the clicker alone."""
    if outcome is ClaimOutcome.EXPIRED and offer is not None:
        return f"Undo expired: it could be asked for until {slack_date(offer.expires_at)}. {NOTHING_DONE}"
    if outcome is ClaimOutcome.TAKEN:
        return f"This undo was already asked for by <@{by}>. {NOTHING_DONE}"
    if outcome is ClaimOutcome.TAMPERED:
        return f"This undo was changed after it was offered, so it cannot be asked for. {NOTHING_DONE}"
    if outcome is ClaimOutcome.MISSING:
        return f"This undo is not known (any more). {NOTHING_DONE}"
    return FORGED
