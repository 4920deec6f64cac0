"""The budget gate: the run's ``extend_budget`` callback, asked when its paid tokens passed its budget.

The first time a run passes a budget, the gate stores the round's record (``bot.runs.budget_asks``,
``pending``), audits ``budget_requested`` and posts the budget card ("This investigation used its
budget (N tokens, $X). Extend by N?", **Extend** / **Stop**); the loop then suspends the run as
``budget`` and the job ends: no worker waits. The click is decided in the web process
(``bot.slack.handlers.budget_clicks``), which resumes the run. Asked again (a resumed run), the gate
answers from the record: extended (the budget it passed plus the original budget: the worker's own
numbers, never the record's), stopped (the run ends ``cancelled``), or still pending. A decision
that is not authentic (written into Redis by anyone but the web process, or for another round)
counts for nothing: the run keeps waiting, and the worker's log says why.
"""

from __future__ import annotations

import logging
from dataclasses import dataclass, field

from agent.types import BudgetAnswer, RunState
from bot.observability.audit import AuditKind, AuditLog
from bot.prices import Prices, dollars
from bot.runs.budget_asks import BudgetAsk, BudgetAsks, BudgetStatus
from bot.runs.presenter import Presenter, RunRef
from bot.runs.runtime import present

log = logging.getLogger(__name__)


@dataclass
class BudgetGate:
    """``RunConfig.extend_budget`` for one run (see the module)."""

    asks: BudgetAsks
    audit: AuditLog
    presenter: Presenter
    run: RunRef
    base: int  # the original budget (``CHATOPS_TOKEN_BUDGET``): what Extend adds
    prices: Prices = field(default_factory=lambda: Prices({}))  # ``LLM_PRICES``: the card's cost

    def __call__(self, state: RunState, budget: int) -> BudgetAnswer:
        ask = self.asks.get(self.run.run_id)
        if ask is None or ask.budget != budget:
            ask = self._ask(state, budget)
        if ask.status is BudgetStatus.PENDING:
            if not ask.card_ts:  # also after a crash between storing the record and posting
                self._show_card(ask)
            return BudgetAnswer()
        if not self.asks.authentic(ask, budget):
            log.warning(
                "run %s: the budget card's decision (%s by %s) is not authentic; still waiting",
                self.run.run_id,
                ask.status.value,
                ask.decided_by,
            )
            return BudgetAnswer()
        if ask.status is BudgetStatus.STOPPED:
            return BudgetAnswer(stopped_by=ask.decided_by)
        return BudgetAnswer(budget=budget + self.base)

    def _ask(self, state: RunState, budget: int) -> BudgetAsk:
        ask = self.asks.ask(
            self.run.run_id,
            budget=budget,
            base=self.base,
            spent=state.usage.paid_tokens,
            cost=dollars(self.prices.cost(state.model, state.usage)),
            channel=self.run.channel,
        )
        self.audit.record(
            AuditKind.BUDGET_REQUESTED,
            self.run.run_id,
            ask_id=ask.id,
            budget=str(budget),
            spent=str(ask.spent),
            cost=ask.cost,
            extend_by=str(self.base),
        )
        return ask

    def _show_card(self, ask: BudgetAsk) -> None:
        """Post the card; one that could not be posted is tried again when the run is resumed (the
        run card's Stop still ends the run)."""
        card_ts = present(self.presenter.ask_budget, self.run, ask)
        if card_ts:
            self.asks.set_card(self.run.run_id, ask.id, card_ts)


def decided_meanwhile(asks: BudgetAsks, run_id: str, state: RunState | None, base: int | None) -> bool:
    """Whether the run's card was decided while the run was suspending (a click, then the job's last
    write): an authentic decision of the round at the run's budget (``BudgetAsks.authentic``)."""
    ask = asks.get(run_id)
    budget = (state.token_budget if state is not None else None) or base
    return ask is not None and budget is not None and asks.authentic(ask, budget)


def waiting_for(asks: BudgetAsks, run_id: str) -> str:
    """What a run suspended at its budget waits for (its ``run_suspended`` audit): the card's round."""
    ask = asks.get(run_id)
    return f"budget:{ask.id}" if ask is not None else "budget"
