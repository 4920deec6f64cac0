"""Clicks on an approval card judged by the policy file as it is now (``CHATOPS_POLICY_FILE``).

Who may approve a call and how many must are computed *here, at the click*, by ``Policy.decide``
(``bot.policy.rules``, the one place it is decided) from the current file, never read from the
approval record: a Redis writer who lowers the record's count, rule or category gains nothing.
The facts the policy is judged on (tool, category, target and labels, requester, the people
involved, channel) are the record's, and are trusted only under the worker's seal
(``bot.runs.approval_seal``, HMAC with a key from ``CHATOPS_RUNNER_SECRET``), with the channel the
click's own card is in. A record whose seal does not verify decides nothing; neither does a call
the file now denies, or a file that cannot be read (fail closed).

The current file decides, not the one the card was posted under: the worker and the runner read
the current file before the call runs, so a stricter file refuses there anyway, and a click
judged by an older one would only let people decide what can no longer run (or refuse what
can). The account and group lookups are ``bot.slack.approvers``' (fail-closed).
"""

from __future__ import annotations

from dataclasses import dataclass
from pathlib import Path

from bot.errors import PolicyConfigError
from bot.policy import rules as policy
from bot.policy.break_glass import BreakGlassLog
from bot.policy.file import current_policy
from bot.policy.rules import Requirement, Subject, Verdict
from bot.runs.approval_seal import ApprovalSeal
from bot.runs.approvals import Approval, ApprovalStatus
from bot.settings import Settings
from bot.slack.approvers import ApproverPolicy
from bot.slack.policy_identity import SlackIdentity

UNREADABLE = "The access policy file cannot be read just now, so nothing can be approved."


@dataclass(frozen=True)
class Judged:
    """What a click on one record is judged by: the requirement the policy file has for it now
    (``None``: no policy file, ``CHATOPS_APPROVERS`` decides), or why it cannot be decided at all."""

    requirement: Requirement | None = None
    refusal: str = ""

    def shown(self, approval: Approval) -> Approval:
        """``approval`` as its card should show it: with the requirement the click was judged by."""
        if self.requirement is None:
            return approval
        return approval.model_copy(update={"policy": self.requirement.to_json()})


@dataclass(frozen=True)
class ClickRules:
    """The policy file and the seal key a web process judges clicks with."""

    policy_file: Path | None = None
    approvers: tuple[str, ...] = ()
    seal: ApprovalSeal | None = None  # ``None`` only without a policy file (start-up refuses it)

    @classmethod
    def from_settings(cls, settings: Settings) -> ClickRules:
        return cls(
            settings.chatops_policy_file,
            tuple(settings.chatops_approvers),
            ApprovalSeal.from_secret(settings.chatops_runner_secret),
        )

    @property
    def policed(self) -> bool:
        return self.policy_file is not None

    def judge(self, approval: Approval, channel: str) -> Judged:
        """The requirement for a click on ``approval`` through its card in ``channel``."""
        if self.seal is not None:
            problem = self.seal.problem(approval, channel)
            if problem is not None:
                return Judged(refusal=problem)
        if self.policy_file is None:
            return Judged()
        try:
            current = current_policy(self.policy_file, self.approvers)
        except (OSError, PolicyConfigError):
            return Judged(refusal=UNREADABLE)
        subject = Subject(
            approval.requester,
            channel,
            approval.tool,
            approval.category,
            approval.target,
            tuple(sorted(approval.labels)),
        )
        decision = current.decide(subject)
        if decision.denied:
            return Judged(refusal=f"The access policy now refuses this call: {decision.deny_reason}.")
        return Judged(decision.requirement)


@dataclass(frozen=True)
class ClickPolicy:
    """``may_approve`` / ``may_decline`` for a click: the policy file's requirement when there is
    one, ``CHATOPS_APPROVERS`` (``ApproverPolicy``) otherwise, on facts the seal vouches for."""

    lookups: ApproverPolicy
    rules: ClickRules
    glass: BreakGlassLog | None = None  # who holds an active break-glass (``bot.policy.break_glass``)

    def holds_glass(self, user: str) -> bool:
        return self.glass is not None and self.glass.active_until(user) is not None

    def judge(self, approval: Approval) -> Judged:
        """Through its own card (the caller checked the click came from it)."""
        return self.rules.judge(approval, approval.card_channel)

    def may_approve(self, user: str, approval: Approval, judged: Judged | None = None) -> Verdict:
        judged = judged or self.judge(approval)
        if judged.refusal:
            return Verdict(False, judged.refusal)
        requirement = judged.requirement
        if requirement is None:
            return self.lookups.may_approve(user, approval)
        return policy.may_approve(
            requirement,
            user,
            requester=approval.requester,
            involved=approval.involved,
            category=approval.category,
            identity=SlackIdentity(self.lookups),
            break_glass=self.holds_glass(user),
        )

    def may_decline(self, user: str, approval: Approval) -> Verdict:
        """The requester (a full member) or anyone who may approve it; saying no is safe, so a
        record that cannot be decided (altered, denied now) may still be declined by its requester."""
        judged = self.judge(approval)
        requirement = judged.requirement
        if requirement is None and not judged.refusal:
            return self.lookups.may_decline(user, approval)
        if user and user == approval.requester:
            named = requirement is not None and user in requirement.users
            account = policy.account_verdict(SlackIdentity(self.lookups), user, named=named)
            return Verdict(account.allowed, account.reason)
        approve = self.may_approve(user, approval, judged)
        if approve.allowed or policy.TRY_AGAIN in approve.reason:
            return approve
        return Verdict(
            False, f"Only someone who may approve it or the person who asked may decline. {approve.reason}"
        )


def policed_supersede(clicks: ClickPolicy, approvals: list[Approval], user: str) -> Verdict:
    """Whether ``user``'s thread reply may cancel the run's pending cards under a policy file:
    only if they may decline every one of them (the requester, or who may approve it)."""
    if not clicks.rules.policed:
        return Verdict(True)
    for approval in approvals:
        if approval.status is ApprovalStatus.PENDING:
            verdict = clicks.may_decline(user, approval)
            if not verdict.allowed:
                return verdict
    return Verdict(True)
