"""The durable approval gate: the run's confirm callback for mutating and destructive calls.

The first time a call asks, the gate refuses what nobody should be asked about (the run's cap on
mutating actions, a call the card cannot show completely), stores the approval record
(``pending``), posts the card and answers ``pending``: the run stops as ``awaiting_approval`` and
the job ends. Each call's argument values are classified first (``agent.provenance``, from the
run's texts: ``bot.runs.provenance``): a derived call the policy denies (``derived: deny``) is
refused before anyone is asked, and the model is told why; one it asks more for is proposed
with that requirement and its provenance, sealed with the record, and the model is told why
with the call's result. When the run is resumed the gate answers from the record: approved exactly once
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
from agent.provenance import Provenance
from agent.types import Decision, DecisionStatus
from bot.errors import DurabilityError
from bot.observability.run_metrics import RunMetrics
from bot.policy.rules import Decision as PolicyDecision
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
    # The policy's decision on a proposed call, its provenance included (bot.policy.proposals).
    propose: Callable[[ConfirmRequest, Provenance], PolicyDecision] | None = None
    # Where the call's argument values came from (bot.runs.provenance); ``None``: nothing checked.
    provenance: Callable[[ConfirmRequest], Provenance] | None = None

    def __call__(self, request: ConfirmRequest) -> Decision:
        approvals = self.service.approvals
        approval = approvals.for_call(self.run.run_id, request.call.id)
        if approval is None:
            provenance = self.provenance(request) if self.provenance is not None else Provenance()
            proposed = self.propose(request, provenance) if self.propose is not None else None
            refusal = self._refusal(request, provenance, proposed)
            if refusal is not None:
                return Decision.decline(refusal)
            approval = self._create(request, provenance, proposed)
        if approval.status is ApprovalStatus.PENDING:
            approval = self._expire_if_due(approval)
        if approval.status is ApprovalStatus.PENDING:
            if not approval.card_ts:  # also after a crash between creating the record and posting
                return self._show_card(approval)
            return Decision.pending()
        present(self.presenter.show_decision, self.run, approval)
        self.metrics.approval_decided(approval.status.value, approval.created_at, approval.decided_at)
        decision = approval.decision(request.call)
        decision = self._consume(approval) if decision.approved else decision
        note = derived_note(approval)
        if note and decision.status is DecisionStatus.DECLINED:
            return decision.model_copy(update={"reason": f"{decision.reason}. {note}"})
        return decision.model_copy(update={"note": note}) if note and decision.approved else decision

    def _refusal(
        self, request: ConfirmRequest, provenance: Provenance, proposed: PolicyDecision | None
    ) -> str | None:
        """Why nobody is asked (the run's cap, a derived call the policy denies, a call the card
        cannot show), for the model."""
        denied_by = proposed.denied_by if proposed is not None else None
        if proposed is not None and denied_by is not None and denied_by.deny:  # the file changed since
            return f"Error: {proposed.deny_reason}; it was not run and nobody was asked"
        if proposed is not None and denied_by is not None:  # its ``derived: deny``
            rule = denied_by.name
            self.service.audit.derived_refused(
                self.run.run_id,
                call_id=request.call.id,
                tool=request.call.name,
                arguments=request.call.arguments,
                provenance=provenance.to_json(),
                rule=rule,
                requester=self.run.requester,
            )
            shown = ", ".join(f"`{v.value}`" for v in provenance.derived)
            return (
                f"Error: {proposed.deny_reason}. The values {shown} {_came_from(provenance)}, "
                "not from anyone's request; it was not run and nobody was asked"
            )
        approvals = self.service.approvals
        if self.max_mutating_actions:
            over_cap = mutating_cap_reason(approvals.for_run(self.run.run_id), self.max_mutating_actions)
            if over_cap is not None:
                return over_cap
        draft = self._draft(request, provenance, proposed)
        problem = present(self.presenter.approval_problem, self.run, draft)
        return f"{problem}; it was not run and nobody was asked" if problem else None

    def _draft(
        self,
        request: ConfirmRequest,
        provenance: Provenance | None = None,
        proposed: PolicyDecision | None = None,
    ) -> Approval:
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
            policy=proposed.requirement.to_json() if proposed is not None else "",
            rationale=request.rationale,
            verify=request.verification.to_json() if request.verification is not None else "",
            provenance=provenance.to_json() if provenance is not None and provenance.values else "",
        )

    def _create(
        self, request: ConfirmRequest, provenance: Provenance, proposed: PolicyDecision | None
    ) -> Approval:
        draft = self._draft(request, provenance, proposed)
        approval, created = self.service.lifecycle.request(draft, self.timeout_seconds)
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


def _came_from(provenance: Provenance) -> str:
    refs = provenance.evidence
    return (
        f"came from tool output ({', '.join(refs)})" if refs else "came from what you read or wrote yourself"
    )


def derived_note(approval: Approval) -> str:
    """What the model is told about a derived call's approval ("" for any other call)."""
    provenance = approval.derived
    if not provenance.is_derived:
        return ""
    shown = ", ".join(f"`{v.value}`" for v in provenance.derived)
    needed = approval.approvals_proposed
    more = f", so it needed {needed} approvals" if needed > 1 else ""
    return (
        f"Note: the values {shown} of this call {_came_from(provenance)}, not from anyone's request; "
        f"the approver was shown that{more}."
    )
