"""The budget card's decisions: Extend or Stop, each written once, audited with its actor.

The record and its scripts are ``bot.runs.budget_asks``'s; who may decide is the caller's to
judge (``Deciders.decide(Action.EXTEND)`` in the web process). A decision this call made is audited
(``budget_decided``) and resumes the run (``resume``, the run service's enqueue), as a decided
approval does (``bot.runs.approval_lifecycle``).
"""

from __future__ import annotations

from collections.abc import Callable
from dataclasses import dataclass

from bot.observability.audit import AuditKind, AuditLog
from bot.runs.budget_asks import BudgetAsks, BudgetStatus, DecideOutcome


@dataclass
class BudgetLifecycle:
    """Decide a run's budget card (a click, the run card's Stop); ask whether one still waits."""

    asks: BudgetAsks
    audit: AuditLog
    resume: Callable[[str], object]

    def decide(
        self, run_id: str, user: str, status: BudgetStatus, card: tuple[str, str] | None, ask_id: str = ""
    ) -> bool:
        """Settle the run's pending card as ``status`` by ``user``; True when this call made the move.
        ``card``: the (channel, ts) clicked (``None``: the run card's Stop); ``ask_id``: the round
        the click names (a click on an older round's card decides nothing)."""
        ask = self.asks.get(run_id)
        if ask is None or (ask_id and ask.id != ask_id):
            return False
        if self.asks.decide(ask, status, user, card) is not DecideOutcome.WON:
            return False
        self.audit.record(
            AuditKind.BUDGET_DECIDED,
            run_id,
            ask_id=ask.id,
            decision=status.value,
            decided_by=user,
            budget=str(ask.budget),
            extend_by=str(ask.base),
        )
        self.resume(run_id)
        return True

    def still_waiting(self, run_id: str) -> bool:
        """A run suspended at its budget whose card is undecided: its decision will resume it."""
        ask = self.asks.get(run_id)
        return ask is not None and ask.status is BudgetStatus.PENDING
