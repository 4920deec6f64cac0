"""The durable approval gate: the run's confirm callback for mutating and destructive calls.

The first time a call asks, the gate refuses what nobody should be asked about (the run's cap on
mutating actions, a call the card cannot show completely), stores the approval record
(``pending``), posts the card and answers ``pending``: the run stops as ``awaiting_approval`` and
the job ends. When the run is resumed the gate answers from the record: approved exactly once
(``consume``, made durable before the tool runs), or declined, expired, superseded. Every move of
the record (create, expire, decline, consume) is ``bot.runs.approval_lifecycle``'s, audited there.
"""

from __future__ import annotations

import logging
import time
from collections.abc import Callable
from dataclasses import dataclass, field
from typing import TypeVar

from agent.config import ConfirmRequest
from agent.types import Decision
from bot.errors import DurabilityError
from bot.observability.metrics import RunMetrics
from bot.runs.approvals import (
    CARD_FAILED_REASON,
    SYSTEM_DECIDER,
    Approval,
    ApprovalStatus,
    DecideOutcome,
)
from bot.runs.durability import Durability
from bot.runs.limits import mutating_cap_reason
from bot.runs.presenter import Presenter, RunRef
from bot.runs.runtime import CARD_RETRY_DELAYS, present
from bot.runs.service import RunService

log = logging.getLogger(__name__)
T = TypeVar("T")


CARD_FAILED_NOTICE = (
    ":warning: I could not post the approval card for `{tool}` in this thread, so I did not run it."
)


@dataclass
class ApprovalGate:
    """The durable confirm callback: one approval per execution, answered from its record.

    Asked about an execution for the first time, it checks the run's cap and that the card can
    show the call completely, stores a ``pending`` record and posts the card (retried; a card
    that cannot be posted declines the call: never a pending approval nobody can see). Asked again
    (a resumed run), it answers from the record; an approved record is consumed by the one
    execution it authorises, durably, before the side effect starts.
    """

    service: RunService
    presenter: Presenter
    run: RunRef
    timeout_seconds: float
    metrics: RunMetrics = field(default_factory=lambda: RunMetrics(None))
    max_mutating_actions: int = 0
    involved: Callable[[], tuple[str, ...]] = tuple
    durability: Durability | None = None
    card_retry_delays: tuple[float, ...] = CARD_RETRY_DELAYS
    sleep: Callable[[float], None] = time.sleep
    seal: Callable[[ConfirmRequest], str] | None = None  # the policy's requirement (bot.policy.proposals)

    def __call__(self, request: ConfirmRequest) -> Decision:
        approvals = self.service.approvals
        approval = approvals.for_call(self.run.run_id, request.call.id)
        if approval is None:
            refusal = self._refusal(request)
            if refusal is not None:
                return Decision.decline(refusal)
            approval = self._create(request)
        if approval.status is ApprovalStatus.PENDING:
            approval = self._expire_if_due(approval)
        if approval.status is ApprovalStatus.PENDING:
            if not approval.card_ts:  # also after a crash between creating the record and posting
                return self._show_card(approval)
            return Decision.pending()
        present(self.presenter.show_decision, self.run, approval)
        self.metrics.approval_decided(approval.status.value, approval.created_at, approval.decided_at)
        decision = approval.decision(request.call)
        return self._consume(approval) if decision.approved else decision

    def _refusal(self, request: ConfirmRequest) -> str | None:
        """Why nobody is asked (the run's cap, a call the card cannot show), for the model."""
        approvals = self.service.approvals
        if self.max_mutating_actions:
            over_cap = mutating_cap_reason(approvals.for_run(self.run.run_id), self.max_mutating_actions)
            if over_cap is not None:
                return over_cap
        problem = present(self.presenter.approval_problem, self.run, self._draft(request))
        return f"{problem}; it was not run and nobody was asked" if problem else None

    def _draft(self, request: ConfirmRequest) -> Approval:
        return self.service.approvals.draft(
            self.run.run_id,
            request.call,
            request.category,
            requester=self.run.requester,
            channel=self.run.channel,
            preview=request.preview,
            plan=request.plan,
            plan_created_at=request.plan_created_at,
            command=request.command,
            involved=self.involved(),
            why=request.reason,
            target=request.target,
            policy=self.seal(request) if self.seal is not None else "",
            rationale=request.rationale,
            verify=request.verification.to_json() if request.verification is not None else "",
        )

    def _create(self, request: ConfirmRequest) -> Approval:
        approval, created = self.service.lifecycle.request(self._draft(request), self.timeout_seconds)
        if created:
            self.metrics.approval_requested(approval.category.value)
        return approval

    def _expire_if_due(self, approval: Approval) -> Approval:
        """The scheduled expiry may not have run yet; Redis's clock says whether it is due."""
        result = self.service.lifecycle.expire_if_due(approval.id)
        if result is None or result.outcome is DecideOutcome.NOT_DUE:
            return approval
        return result.approval

    def _show_card(self, approval: Approval) -> Decision:
        """Post the card, retried; if it cannot be posted, nobody can decide: decline, say so."""
        for delay in (0.0, *self.card_retry_delays):
            if delay:
                self.sleep(delay)
            try:
                card_ts = self.presenter.ask_approval(self.run, approval)
            except Exception:
                log.exception(
                    "run %s: the approval card for %s was not posted", self.run.run_id, approval.tool
                )
                continue
            if card_ts:
                self.service.approvals.set_card(approval.id, self.run.channel, card_ts)
            return Decision.pending()  # a presenter without cards (headless): decided by other means
        self.service.lifecycle.decline(approval.id, SYSTEM_DECIDER, CARD_FAILED_REASON)
        present(self.presenter.post_notice, self.run, CARD_FAILED_NOTICE.format(tool=approval.tool))
        return Decision.decline(CARD_FAILED_REASON)

    def _consume(self, approval: Approval) -> Decision:
        """Use the approval for its one execution, durably, before the side effect starts."""
        outcome = self.service.lifecycle.consume(approval.id)
        if outcome == "used":
            return Decision.used()  # an execution already started on it: never a second one
        if outcome != "consumed":
            return Decision.decline(f"the approval is {outcome}")
        if self.durability is not None:
            try:
                self.durability.wait()
            except DurabilityError as error:
                return Decision.decline(f"not run: the approval could not be made durable ({error})")
        return Decision.approve(
            approval.decided_by,
            plan=approval.plan or None,
            grant=approval.grant or None,
            verify=approval.verify,
        )
