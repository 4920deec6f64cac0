"""The approval lifecycle: every transition of an approval record, each written once, with its audit.

::

    request (worker: the gate) --> pending
    pending --decide (web: a click the deciders allow, the first wins)-> approved | declined
    pending --decline (worker: the card was not posted; web: Stop)----> declined
    pending --supersede (web: a reply by someone who may decide;
                         worker: such a reply while the run suspended)-> superseded
    pending --expire (due by Redis's clock: the scheduled job, the
                      sweep, the gate; a click after the expiry)------> expired
    approved --consume (worker: the gate, before the side effect)----> consumed (once)

The record and its atomic scripts belong to ``bot.runs.approvals`` (the Lua transition runs once
per record: one caller wins). This module is the only code that moves a record: each transition
is one method, the audit entry of a move this call made is written in one place (``_audited``:
``approval_requested`` when created, ``approval_decided`` when it leaves ``pending``), and a
decision made outside the run resumes it (``resume``, the run service's enqueue). Consuming is
not audited: the execution it starts is (``tool_executed`` with ``confirmed_by``).

Who may decide is not judged here but by the one function every caller asks
(``bot.policy.deciders``): a person's decision or vote is settled only with its ``Ruling`` for this
user, record and action, the caller's or the one the lifecycle asks for itself (``deciders``);
the requirement and break-glass that go into the grant are the ruling's. A lifecycle without
deciders (a worker's, which decides no clicks) settles what its in-process caller ruled.
"""

from __future__ import annotations

import logging
import time
from collections.abc import Callable
from dataclasses import dataclass

from bot.errors import ApprovalNotFoundError, BotConfigurationError, NotAnApproverError
from bot.fleet.grants import GrantSigner, execution_id
from bot.observability.audit import AuditLog
from bot.policy.deciders import Action, Deciders, Ruling
from bot.policy.rules import Requirement
from bot.runs.approval_seal import ApprovalSeal
from bot.runs.approval_votes import ApprovalVotes, VoteOutcome, VoteResult
from bot.runs.approvals import (
    EXPIRED_REASON,
    SUPERSEDED_REASON,
    SYSTEM_DECIDER,
    Approval,
    Approvals,
    ApprovalStatus,
    DecideOutcome,
    DecideResult,
)
from bot.runs.queueing import JobQueue

log = logging.getLogger(__name__)


@dataclass
class ApprovalLifecycle:
    """Create, decide, decline, supersede, expire and consume approvals; audit each move once."""

    approvals: Approvals
    audit: AuditLog
    jobs: JobQueue
    resume: Callable[[str], object]  # enqueue the run's resume job (``RunService.enqueue``)
    deciders: Deciders[Approval] | None = None  # who may decide: asked when a caller brings no ruling
    clock: Callable[[], float] = time.time
    grants: GrantSigner | None = None  # ``CHATOPS_RUNNER_SECRET`` set: sign a grant at each approval
    votes: ApprovalVotes | None = None  # records whose policy needs several approvals
    seal: ApprovalSeal | None = None  # ``CHATOPS_RUNNER_SECRET`` set: seal each proposed record's facts

    # -- create -----------------------------------------------------------------------------------

    def request(self, draft: Approval, timeout_seconds: float) -> tuple[Approval, bool]:
        """The execution's record: ``draft`` stored ``pending`` (``True``: audited, its expiry job
        scheduled) or the record it already has (a resumed run asking again). Sealed first
        (``bot.runs.approval_seal``): the web process decides a click only on facts it can verify."""
        if self.seal is not None:
            draft = self.seal.sealed(draft)
        approval, created = self.approvals.store(draft, timeout_seconds)
        if created:
            self.audit.approval_requested(approval)
            self.jobs.expiry_at(approval.id, self.clock() + timeout_seconds)
        return approval, created

    # -- decide -----------------------------------------------------------------------------------

    def decide(
        self,
        approval_id: str,
        *,
        user: str,
        approve: bool,
        reason: str = "",
        card: tuple[str, str] | None = None,
        ruling: Ruling | None = None,
    ) -> DecideResult:
        """A person's decision (the first one wins); a decision this call made resumes the run.

        ``card``: the (channel, ts) of the message a click came from; a click decides only its
        own card, and one after the expiry (by Redis's clock) settles it as expired. ``ruling``:
        ``Deciders.decide``'s on this user approving (declining) this record, if the caller asked;
        else the lifecycle asks. Refused: ``NotAnApproverError``, nothing moves. Its requirement
        (the policy file's, computed at the click, never read from the record) and break-glass go
        into the grant.
        """
        ruling = self._ruled(approval_id, user, Action.APPROVE if approve else Action.DECLINE, ruling)
        requirement, break_glass = ruling.requirement, ruling.break_glass
        # One click never settles what needs several people.
        if approve and not break_glass and _needed(requirement, self.approvals.get(approval_id)) > 1:
            raise BotConfigurationError(
                f"approval {approval_id} needs several approvals: count them with vote()"
            )
        status = ApprovalStatus.APPROVED if approve else ApprovalStatus.DECLINED
        if not approve and not reason:
            reason = f"not approved by {user}"
        result = self.approvals.decide(approval_id, status, user, reason, card=card)
        if result is None:
            raise ApprovalNotFoundError(approval_id)
        if self._audited(result):
            self._sign(result, requirement, break_glass=break_glass)
            self.resume(result.approval.run_id)
        return result

    def vote(
        self, approval_id: str, *, user: str, card: tuple[str, str], ruling: Ruling | None = None
    ) -> tuple[VoteResult, DecideResult]:
        """One of the distinct approvals the ruling's requirement needs (the same person twice
        counts once), audited; the vote that completes them approves the record (signed, resumed)."""
        requirement = self._ruled(approval_id, user, Action.APPROVE, ruling).requirement
        if self.votes is None or requirement is None:
            raise ValueError("this lifecycle counts no votes, or the policy needs none")
        needed = requirement.approvals
        self._drop_forged_votes(approval_id)
        member = self.seal.vote(approval_id, user) if self.seal is not None else user
        vote = self.votes.vote(approval_id, user, needed, card, member=member)
        approval = self.approvals.get(approval_id) if vote is not None else None
        if vote is None or approval is None:
            raise ApprovalNotFoundError(approval_id)
        outcome = {
            VoteOutcome.WON: DecideOutcome.WON,
            VoteOutcome.EXPIRED: DecideOutcome.EXPIRED,
            VoteOutcome.MISMATCH: DecideOutcome.MISMATCH,
        }.get(vote.outcome, DecideOutcome.LOST)
        if vote.outcome in (VoteOutcome.WON, VoteOutcome.COUNTED, VoteOutcome.REPEAT):
            repeat = vote.outcome is VoteOutcome.REPEAT
            self.audit.approval_voted(approval, user, vote.count, needed, repeat=repeat)
        result = DecideResult(outcome, approval)
        if self._audited(result):
            self._sign(result, requirement)
            self.resume(approval.run_id)
        return vote, result

    def _sign(
        self, result: DecideResult, requirement: Requirement | None, *, break_glass: bool = False
    ) -> None:
        """The grant a runner verifies (``bot.fleet.grants``), signed here, where the click was
        decided, before the run resumes: a record written into Redis by anyone else has none.
        If this process dies before it is stored, the runner refuses the call: it fails closed."""
        approval = result.approval
        if self.grants is None or not result.won or approval.status is not ApprovalStatus.APPROVED:
            return
        voters = self._authentic_voters(approval.id) if requirement else []
        approvers = sorted({*voters, approval.decided_by})
        if requirement is not None and not break_glass and len(approvers) < requirement.approvals:
            # A vote written into the set between the drop and the count: no grant, so no runner
            # and no SSH or Kubernetes target acts on it.
            log.error("approval %s: not signed, only %s are authentic votes", approval.id, approvers)
            return
        grant = self.grants.sign(
            approval_id=approval.id,
            execution=execution_id(approval.run_id, approval.call_id),
            tool=approval.tool,
            args_sha256=approval.args_sha256,
            target=approval.target,
            confirmed_by=approval.decided_by,
            plan=approval.plan,
            approved_by=approvers if requirement else (),
            approvals_needed=requirement.approvals if requirement else 1,
            policy_rule=requirement.rule if requirement else "",
            break_glass=break_glass,
            verify=approval.verify,
        )
        self.approvals.set_grant(approval.id, grant)

    def _drop_forged_votes(self, approval_id: str) -> None:
        """Members of the vote set that are no authentic vote (written into Redis by someone else)."""
        if self.votes is None or self.seal is None:
            return
        forged = [m for m in self.votes.members(approval_id) if self.seal.voter(approval_id, m) is None]
        if forged:
            log.warning("approval %s: dropped %d vote(s) nobody cast: %s", approval_id, len(forged), forged)
            self.votes.forget(approval_id, forged)

    def _authentic_voters(self, approval_id: str) -> list[str]:
        if self.votes is None:
            return []
        if self.seal is None:
            return self.votes.voters(approval_id)
        found = (self.seal.voter(approval_id, m) for m in self.votes.members(approval_id))
        return sorted({user for user in found if user})

    def decline(self, approval_id: str, by: str, reason: str) -> DecideResult | None:
        """Decline a pending approval without a click: its card could not be posted, the run stopped."""
        result = self.approvals.decide(approval_id, ApprovalStatus.DECLINED, by, reason)
        self._audited(result)
        return result

    def run_stopped(self, run_id: str, user: str) -> None:
        """The Stop button on a run that waits: decline what it waits for and resume it, so it
        ends now rather than at the expiry."""
        for approval in self._pending(run_id):
            self.decline(approval.id, user, f"the run was stopped by {user}")
        self.resume(run_id)

    # -- supersede --------------------------------------------------------------------------------

    def superseded(self, run_id: str, approval_ids: list[str]) -> None:
        """A reply superseded these approvals (the inbox's delivery script, ``SUPERSEDE_LUA``, made
        the move in the same script that stored the reply): audit them and resume the run."""
        for approval_id in approval_ids:
            approval = self.approvals.get(approval_id)
            if approval is not None:
                self._audited(DecideResult(DecideOutcome.WON, approval))  # the script reported it won
        self.resume(run_id)

    def supersede(self, run_id: str, by: str) -> bool:
        """A reply by ``by`` (who may decide) arrived while the run was suspending, before the
        inbox could supersede anything: supersede its pending approvals now; True if any moved."""
        moved = False
        for approval in self._pending(run_id):
            result = self.approvals.decide(approval.id, ApprovalStatus.SUPERSEDED, by, SUPERSEDED_REASON)
            moved = self._audited(result) or moved
        return moved

    # -- expire -----------------------------------------------------------------------------------

    def expire_if_due(self, approval_id: str) -> DecideResult | None:
        """The one expiry: a pending approval past its expiry by Redis's clock becomes ``expired``.

        Every path comes here: the scheduled job and the recovery sweep (``expire``), and the gate
        when a resumed run asks before the job ran. (A click after the expiry is settled as
        expired by the same branch of the same decide script, and audited by the same ``_audited``.)
        """
        result = self.approvals.decide(
            approval_id, ApprovalStatus.EXPIRED, SYSTEM_DECIDER, EXPIRED_REASON, only_if_due=True
        )
        self._audited(result)
        return result

    def expire(self, approval_id: str) -> DecideResult | None:
        """The scheduled expiry job and the recovery sweep: expire if due and resume the run.

        Due by Redis's clock, not the scheduler's: a job that ran early (its host's clock is ahead)
        is scheduled again for the rest of the time and decides nothing now.
        """
        result = self.expire_if_due(approval_id)
        if result is None:
            return None
        if result.outcome is DecideOutcome.NOT_DUE:
            remaining = self.approvals.seconds_until_expiry(approval_id)
            if remaining is not None:
                self.jobs.expiry_in(approval_id, max(1.0, remaining))
        elif result.settled:
            self.resume(result.approval.run_id)
        return result

    def still_waiting(self, run_id: str) -> bool:
        """The sweep: expire the run's approvals overdue by this host's clock (``expire`` checks
        Redis's); True while one is still pending (its decision or expiry will resume the run)."""
        waiting = False
        for approval in self._pending(run_id):
            if approval.expires_at < self.clock():
                self.expire(approval.id)
            else:
                waiting = True
        return waiting

    # -- consume ----------------------------------------------------------------------------------

    def consume(self, approval_id: str) -> str:
        """Start the one execution an approved record authorises: ``consumed`` means go ahead,
        ``used`` that one already started (never run it again); else the record's status."""
        return self.approvals.consume(approval_id)

    # -- helpers ----------------------------------------------------------------------------------

    def _ruled(self, approval_id: str, user: str, action: Action, ruling: Ruling | None) -> Ruling:
        """The one decision function's ruling on ``user``'s ``action`` on this record: the caller's
        (it must be about this user, action and record) or asked now; refused: ``NotAnApproverError``."""
        if ruling is None:
            if self.deciders is None:
                return Ruling(True, user=user, action=action, approval_id=approval_id)
            record = self.approvals.get(approval_id)
            if record is None:
                raise ApprovalNotFoundError(approval_id)
            ruling = self.deciders.decide(user, action, record)
        if not ruling.allowed or not ruling.about(user, action, approval_id):
            raise NotAnApproverError(user, ruling.reason)
        return ruling

    def _pending(self, run_id: str) -> list[Approval]:
        return [a for a in self.approvals.for_run(run_id) if a.status is ApprovalStatus.PENDING]

    def _audited(self, result: DecideResult | None) -> bool:
        """Audit a move out of ``pending`` that this call made (only one call can make it); True if it did."""
        if result is None or not result.settled:
            return False
        self.audit.approval_decided(result.approval)
        return True


def _needed(requirement: Requirement | None, record: Approval | None) -> int:
    """How many approvals the decision needs: the caller's requirement, computed from the policy
    file at the click; a caller without one (no policy file: one approval) is checked against the
    record, which can only make it refuse (the web process always passes its requirement)."""
    if requirement is not None:
        return requirement.approvals
    return Requirement.from_json(record.policy).approvals if record is not None and record.policy else 1
