"""Clicks on a card whose approval carries a sealed policy requirement (``CHATOPS_POLICY_FILE``).

The record says who may approve it (``Approval.policy``: the rule, its users and groups, whether
the requester may, how many distinct people must); this checks a clicker against that, with the
account and group lookups of ``bot.slack.approvers`` (fail-closed), and never against the file
as it is now: what the card was posted under is what holds.
"""

from __future__ import annotations

from dataclasses import dataclass

from bot.runs import policy
from bot.runs.approvals import Approval, ApprovalStatus
from bot.runs.break_glass import BreakGlassLog
from bot.runs.policy import Requirement, Verdict
from bot.slack.approvers import USER_ID, ApproverPolicy
from bot.slack.mrkdwn import escape, mention
from bot.slack.policy_identity import SlackIdentity


def requirement_of(approval: Approval) -> Requirement | None:
    """The requirement sealed into ``approval`` (``None``: no policy file when it was created)."""
    return Requirement.from_json(approval.policy) if approval.policy else None


@dataclass(frozen=True)
class SealedPolicy:
    """``may_approve`` / ``may_decline`` for records with a sealed requirement."""

    lookups: ApproverPolicy
    glass: BreakGlassLog | None = None  # who holds an active break-glass (``bot.runs.break_glass``)

    def holds_glass(self, user: str) -> bool:
        return self.glass is not None and self.glass.active_until(user) is not None

    def may_approve(self, user: str, approval: Approval) -> Verdict:
        requirement = requirement_of(approval)
        if requirement is None:
            return self.lookups.may_approve(user, approval)
        verdict = policy.may_approve(
            requirement,
            user,
            requester=approval.requester,
            involved=approval.involved,
            category=approval.category,
            identity=SlackIdentity(self.lookups),
            break_glass=self.holds_glass(user),
        )
        return Verdict(verdict.allowed, verdict.reason)

    def may_decline(self, user: str, approval: Approval) -> Verdict:
        """The requester (a full member) or anyone who may approve it; saying no is safe."""
        requirement = requirement_of(approval)
        if requirement is None:
            return self.lookups.may_decline(user, approval)
        identity = SlackIdentity(self.lookups)
        if user and user == approval.requester:
            account = policy.account_verdict(identity, user, named=user in requirement.users)
            return Verdict(account.allowed, account.reason)
        approve = self.may_approve(user, approval)
        if approve.allowed or policy.TRY_AGAIN in approve.reason:
            return approve
        return Verdict(
            False, f"Only someone who may approve it or the person who asked may decline. {approve.reason}"
        )


def approvers_field(approval: Approval) -> str | None:
    """The card's "Who may approve" field for a record with a sealed requirement."""
    requirement = requirement_of(approval)
    if requirement is None:
        return None
    who = ", ".join(
        [*(mention(u) for u in requirement.users), *(f"<!subteam^{g}>" for g in requirement.groups)]
    )
    count = f"{requirement.approvals} distinct approvals" if requirement.approvals > 1 else "1 approval"
    others = "" if requirement.requester_may_approve else "; not the requester"
    field = f"*Who may approve*\n{count} from {who or 'any full member'}{others} (rule `{escape(requirement.rule)}`)"
    if approval.approved_by and requirement.approvals > 1:
        done = ", ".join(mention(u) for u in approval.approved_by if USER_ID.fullmatch(u))
        field += f"\nSo far: {done} ({len(approval.approved_by)} of {requirement.approvals})"
    return field


def sealed_supersede(lookups: ApproverPolicy, approvals: list[Approval], user: str) -> Verdict:
    """Whether ``user``'s thread reply may cancel the run's pending cards that carry a sealed
    policy: only if they may decline every one of them (the requester, or who may approve it)."""
    checks = SealedPolicy(lookups)
    for approval in approvals:
        if approval.status is ApprovalStatus.PENDING and approval.policy:
            verdict = checks.may_decline(user, approval)
            if not verdict.allowed:
                return verdict
    return Verdict(True)
