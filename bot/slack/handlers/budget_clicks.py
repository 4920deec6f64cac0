"""Extend and Stop on a budget card (``bot.slack.rendering.budget_card``), decided before the answer.

Like an approval: Slack does not retry clicks, so a 200 means "decided". Nothing in the payload is
trusted but what Slack signs (who clicked, in which channel, on which message):

* the value must name a run and a round (``{run_id}.{ask_id}``) and the message clicked must be
  that round's card (``bot.runs.budget_asks``: its channel and ts): a value forged to name another
  run, a button copied to another message or channel, an older round's card, decides nothing;
* the clicker must be someone who may decide in that channel (``Deciders.decide(EXTEND)``: who may
  approve there, under the policy file or ``CHATOPS_APPROVERS``); anyone else is told why, alone;
* the record leaves ``pending`` once, in one script (``bot.runs.budget_lifecycle``): of two clicks
  (a double click, a replay, Extend and Stop at once) only the first decides; it is audited
  (``budget_decided`` with its actor) and the run resumed. Extend past the channel's monthly
  token cap is refused (``bot.runs.monthly_tokens``).

The card is then redrawn with the decision and who made it; the clicker is told, alone, what it did.
"""

from __future__ import annotations

import logging
import re
from concurrent.futures import Executor
from dataclasses import dataclass
from typing import Any

import redis
from slack_bolt import Ack, App, BoltResponse

from bot.errors import NotReplicatedError
from bot.policy.deciders import Action
from bot.runs.budget_asks import BudgetAsk, BudgetStatus
from bot.slack.handlers.findings_clicks import Clicked
from bot.slack.handlers.forget_clicks import clicked_from, redraw_and_tell
from bot.slack.handlers.runtime import WebRuntime
from bot.slack.rendering.budget_card import ACTION_BUDGET_STOP, ACTION_EXTEND, decided_blocks

log = logging.getLogger(__name__)

_VALUE = re.compile(r"([0-9a-f]{32})\.([0-9a-f]{32})")
NOT_THIS_CARD = "This button does not belong to this run's budget card: nothing changed."
EXTENDED = "Extended: the investigation goes on with {extra:,} more tokens."
STOPPED = "Stopped: the investigation ends here."
ALREADY = "This budget card was already decided ({status} by <@{user}>): nothing changed."
CAP_REACHED = "Not extended: {refusal}"


@dataclass(frozen=True)
class BudgetClicked:
    """What a click did: ``decided`` (the card's record as clicked) and the note to the clicker."""

    note: str
    decided: BudgetAsk | None = None
    status: BudgetStatus = BudgetStatus.PENDING


class BudgetClicks:
    """The ack half of an Extend / Stop click (see the module)."""

    def __init__(self, runtime: WebRuntime) -> None:
        self._rt = runtime

    def click(self, value: str, click: Clicked, status: BudgetStatus) -> BudgetClicked:
        match = _VALUE.fullmatch(value)
        if match is None or not click.channel or not click.message_ts or not click.user:
            return BudgetClicked(NOT_THIS_CARD)
        if not self._rt.channel_allowed(click.channel):
            return BudgetClicked(NOT_THIS_CARD)
        run_id, ask_id = match.groups()
        service = self._rt.service()
        ask = service.budget_asks.get(run_id)
        if ask is None or (ask.id, ask.channel, ask.card_ts) != (ask_id, click.channel, click.message_ts):
            return BudgetClicked(NOT_THIS_CARD)
        if ask.status is not BudgetStatus.PENDING:
            return BudgetClicked(ALREADY.format(status=ask.status.value, user=ask.decided_by))
        verdict = self._rt.deciders.decide(click.user, Action.EXTEND, channel=click.channel)
        if not verdict.allowed:
            return BudgetClicked(f"{verdict.reason} Nothing changed.")
        if status is BudgetStatus.EXTENDED:
            over = service.monthly.over_cap(click.channel)
            if over is not None:
                return BudgetClicked(CAP_REACHED.format(refusal=over.refusal()))
        card = (click.channel, click.message_ts)
        if not service.budgets.decide(run_id, click.user, status, card, ask_id=ask_id):
            now = service.budget_asks.get(run_id) or ask  # another click was first
            return BudgetClicked(ALREADY.format(status=now.status.value, user=now.decided_by))
        log.info("run %s: budget card %s %s by %s", run_id, ask_id, status.value, click.user)
        note = EXTENDED.format(extra=ask.base) if status is BudgetStatus.EXTENDED else STOPPED
        return BudgetClicked(note, ask, status)


def register_budget(app: App, runtime: WebRuntime, after: Executor) -> None:
    """Extend and Stop: decided before the answer (an error answer when Redis cannot decide, or no
    replica confirms, so Slack tells the clicker it failed); then shown afterwards."""
    clicks = BudgetClicks(runtime)

    def handler(status: BudgetStatus) -> Any:
        def clicked(body: dict[str, Any], ack: Ack) -> BoltResponse | None:
            value, where = clicked_from(body)
            try:
                done = clicks.click(value, where, status)
                if done.decided is not None:
                    runtime.replication().confirm()
            except (redis.RedisError, NotReplicatedError):
                log.error(
                    "the budget click by %s could not be decided (or no replica confirmed it)", where.user
                )
                return BoltResponse(status=503, body="the click could not be decided; try again")
            ack()
            after.submit(_shown, runtime, done, where)
            return None

        return clicked

    app.action(ACTION_EXTEND)(handler(BudgetStatus.EXTENDED))
    app.action(ACTION_BUDGET_STOP)(handler(BudgetStatus.STOPPED))


def _shown(runtime: WebRuntime, done: BudgetClicked, where: Clicked) -> None:
    """The card redrawn with the decision and who made it; the clicker told (alone)."""
    blocks = decided_blocks(done.decided, done.status, where.user) if done.decided is not None else []
    redraw_and_tell(runtime, where, blocks, done.note, "budget")
