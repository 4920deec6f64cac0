"""Who may decide: the one function every caller asks, ``Deciders.decide(user, action, ...)``.

Every "may this person ...?" of the product is answered here and nowhere else: an Approve or
Decline click, the Home tab's list, a thread reply that would cancel a pending card, the Stop and
Transcript buttons, ``/ops break-glass``, and the run engine before it settles an approval
(``bot.runs.approval_lifecycle``, which refuses a decision without this function's ruling).

=============  ==============================================================================
action         who may
=============  ==============================================================================
APPROVE        whom the requirement for the call names *now*: the policy file's first matching
               ``approve:`` rule, else ``CHATOPS_APPROVERS`` (empty: every full member), as many
               as a derived call needs (its sealed provenance, ``derived:``); an
               active break-glass approves alone (policy file only); four-eyes always holds
DECLINE        the requester, or someone who may approve it (saying no is safe: the four-eyes
               and requester rules do not apply to it)
SUPERSEDE      (a reply cancels the run's pending cards) the requester or someone on
               ``CHATOPS_APPROVERS``, and who may decline every pending card
STOP           the requester or someone on ``CHATOPS_APPROVERS``
TRANSCRIPT     someone on ``CHATOPS_APPROVERS`` (a transcript holds every tool output)
BREAK_GLASS    whom the policy file's ``break_glass:`` names
STEER          (Refute / Focus on the Findings message: a reply in one click) a person whose
               thread reply reaches the run: a full member, a guest, a Slack Connect user; never
               a bot or app, a deactivated or unknown account, a lookup that failed
FORGET         (a past incident's Forget button, ``bot.slack.handlers.forget_clicks``) who may
               approve a mutating call in that channel: the policy file's first ``approve:`` rule
               that matches the channel alone (no tool, label or target condition of its own),
               else ``CHATOPS_APPROVERS`` (empty: every full member)
EXTEND         (a budget card's Extend or Stop, ``bot.slack.handlers.budget_clicks``) who may
               approve a mutating call in that channel, as FORGET
REQUEST        (an Undo click, ``bot.slack.handlers.undo_clicks``: the undo's call asked for in
               a run of the clicker's) a person (as STEER) whom the policy file's ``request:``
               rule for that call in that channel lets request it (``may_request``)
=============  ==============================================================================

Always, first: only a full member of the bot's own workspace decides. Who is who comes from an
injected ``Identity`` (``bot.policy.rules``; Slack's is ``bot.slack.policy_identity``): a guest,
bot, deactivated, unknown or external account, or one that cannot be looked up now, is refused,
unless a policy file *rule* lists that user ID. ``CHATOPS_APPROVERS`` never does: it chooses
among full members. The facts a decision on an approval is judged on (tool, category, target and
labels, requester, the people involved, channel) are the record's, trusted only when the injected
``vouch`` (the worker's seal, ``bot.runs.approval_seal``) says so for the card clicked; the file is
read as it is at each decision (``current_policy``), and one that cannot be read decides nothing.
"""

from __future__ import annotations

from collections.abc import Callable, Sequence
from dataclasses import dataclass, replace
from enum import StrEnum
from pathlib import Path
from typing import Generic, Protocol, TypeVar

from agent.provenance import Provenance
from agent.tooling import ToolCategory
from bot.errors import PolicyConfigError
from bot.policy.file import current_policy
from bot.policy.rules import (
    ALLOWED,
    TRY_AGAIN,
    AccountKind,
    Identity,
    Policy,
    Requirement,
    Subject,
    Verdict,
    account_verdict,
    listed,
    may_approve,
    may_declare_break_glass,
    may_request,
)

UNREADABLE = "The access policy file cannot be read just now, so nothing can be approved."
NO_BREAK_GLASS = "Break-glass is not configured (`break_glass:` in CHATOPS_POLICY_FILE)."
MAY_DECLINE = "Only someone who may approve it or the person who asked may decline."
MAY_SUPERSEDE = "Only an approver or the person who asked may cancel a pending approval."
MAY_STOP = "Only the person who asked or an approver may stop this run."
MAY_FORGET = "Only someone who may approve in this channel may make the bot forget a past incident."
MAY_EXTEND = "Only someone who may approve in this channel may extend or stop an investigation at its budget."
FORGET_SUBJECT = "forget_incident"  # what the policy is asked about: no tool has this name
MAY_STEER = (
    "Only a person's Slack account may steer a run (not a bot, an app, or an unknown or deactivated account)."
)


# Accounts whose thread replies reach a run, and so who may steer it by a click (``Action.STEER``).
PEOPLE = frozenset({AccountKind.MEMBER, AccountKind.GUEST, AccountKind.EXTERNAL, AccountKind.UNDECLARED})


class Action(StrEnum):
    APPROVE = "approve"
    DECLINE = "decline"
    SUPERSEDE = "supersede"
    STOP = "stop"
    TRANSCRIPT = "transcript"
    BREAK_GLASS = "break_glass"
    STEER = "steer"
    FORGET = "forget"
    REQUEST = "request"
    EXTEND = "extend"


class Proposal(Protocol):
    """What a decision reads of an approval record (``bot.runs.approvals.Approval``)."""

    @property
    def id(self) -> str: ...
    @property
    def tool(self) -> str: ...
    @property
    def category(self) -> ToolCategory: ...
    @property
    def requester(self) -> str: ...
    @property
    def involved(self) -> Sequence[str]: ...
    @property
    def target(self) -> str: ...
    @property
    def labels(self) -> Sequence[tuple[str, str]]: ...
    @property
    def card_channel(self) -> str: ...
    @property
    def provenance(self) -> str: ...


P = TypeVar("P", bound=Proposal)


@dataclass(frozen=True)
class Ruling(Verdict):
    """A verdict of ``Deciders.decide`` on one (user, action, approval), with what carrying it out
    needs: the policy file's requirement for an approval (``None`` without a file: one approval,
    nobody's rule) and whether break-glass allowed it (alone, whatever the count)."""

    user: str = ""
    action: Action | None = None
    approval_id: str = ""
    requirement: Requirement | None = None
    break_glass: bool = False
    undecidable: str = ""  # nobody may decide the record now: altered, denied by the file, unreadable file

    def about(self, user: str, action: Action, approval_id: str) -> bool:
        return (self.user, self.action, self.approval_id) == (user, action, approval_id)


@dataclass(frozen=True)
class _Judged:
    requirement: Requirement | None  # ``None``: nobody may decide the record now (``refusal`` says why)
    refusal: str = ""


@dataclass(frozen=True)
class Deciders(Generic[P]):
    """Who may decide, from ``CHATOPS_APPROVERS``, ``CHATOPS_POLICY_FILE`` and break-glass.

    ``vouch``: why a record's facts cannot be trusted through a card in a channel (``None``: they
    can); ``glass``: until when a user holds an active break-glass (``BreakGlassLog.active_until``).
    """

    identity: Identity
    approvers: tuple[str, ...] = ()
    policy_file: Path | None = None
    vouch: Callable[[P, str], str | None] | None = None
    glass: Callable[[str], float | None] | None = None

    def decide(
        self,
        user: str,
        action: Action,
        approval: P | None = None,
        *,
        requester: str = "",
        pending: Sequence[P] = (),
        channel: str = "",
        subject: Subject | None = None,
    ) -> Ruling:
        """May ``user`` do ``action``? ``approval``: the card decided on (APPROVE, DECLINE);
        ``requester``: whose run it is (SUPERSEDE, STOP); ``pending``: the run's pending cards a
        reply would cancel (SUPERSEDE); ``channel``: where it is asked (FORGET, EXTEND); ``subject``: the call
        asked for (REQUEST; its ``user`` is replaced by ``user``)."""
        if action is Action.APPROVE:
            return self._approve(user, _needs(approval, action))
        if action is Action.DECLINE:
            found = _needs(approval, action)
            return _ruling(self._decline(user, found), user, action, found.id)
        if action is Action.SUPERSEDE:
            verdict = self._requester_or_listed(user, requester, MAY_SUPERSEDE)
            for card in pending:
                verdict = self._decline(user, card) if verdict.allowed else verdict
            return _ruling(verdict, user, action)
        if action is Action.STOP:
            return _ruling(self._requester_or_listed(user, requester, MAY_STOP), user, action)
        if action is Action.STEER:
            return _ruling(self._steer(user), user, action)
        if action is Action.FORGET:
            return _ruling(self._in_channel(user, channel, MAY_FORGET), user, action)
        if action is Action.EXTEND:
            return _ruling(self._in_channel(user, channel, MAY_EXTEND), user, action)
        if action is Action.REQUEST:
            return _ruling(self._request(user, subject), user, action)
        if action is Action.TRANSCRIPT:
            account = account_verdict(self.identity, user, named=False)
            verdict = account if not account.allowed else listed(self._defaults, self.identity, user)
            return _ruling(verdict, user, action)
        return _ruling(self._break_glass(user), user, action)

    # -- approvals --------------------------------------------------------------------------------

    def _approve(self, user: str, approval: P) -> Ruling:
        judged = self._judged(approval)
        requirement = judged.requirement
        if requirement is None:
            return Ruling(
                False, judged.refusal, user, Action.APPROVE, approval.id, undecidable=judged.refusal
            )
        glass = self._holds_glass(user)
        verdict = may_approve(
            requirement,
            user,
            requester=approval.requester,
            involved=approval.involved,
            category=approval.category,
            identity=self.identity,
            break_glass=glass,
        )
        shown = requirement if self.policy_file is not None else None
        return Ruling(
            verdict.allowed,
            verdict.reason,
            user,
            Action.APPROVE,
            approval.id,
            shown,
            glass and verdict.allowed,
        )

    def _decline(self, user: str, approval: P) -> Verdict:
        """The requester (as an account), or who may approve it, four-eyes and requester rule aside;
        a record nobody may approve now (altered, denied) may still be declined by its requester."""
        judged = self._judged(approval)
        requirement = judged.requirement
        if user and user == approval.requester:
            named = requirement is not None and requirement.names(user)
            return account_verdict(self.identity, user, named=named)
        if requirement is None:
            return Verdict(False, f"{MAY_DECLINE} {judged.refusal}")
        return self._may_approve_any(requirement, user, approval.category, MAY_DECLINE)

    def _may_approve_any(
        self, requirement: Requirement, user: str, category: ToolCategory, refusal: str
    ) -> Verdict:
        """Whether ``user`` is one who may approve under ``requirement``, whoever asked and whoever
        is involved (saying no, forgetting); refused with ``refusal`` first."""
        verdict = may_approve(
            requirement,
            user,
            requester="",
            involved=(),
            category=category,
            identity=self.identity,
            break_glass=self._holds_glass(user),
        )
        if verdict.allowed or TRY_AGAIN in verdict.reason:
            return verdict
        return Verdict(False, f"{refusal} {verdict.reason}")

    def _judged(self, approval: P) -> _Judged:
        """The requirement for a decision on ``approval`` through its own card, from the policy as it
        is now, on facts the seal vouches for; or why nobody may decide it now."""
        if self.vouch is not None:
            problem = self.vouch(approval, approval.card_channel)
            if problem is not None:
                return _Judged(None, problem)
        try:
            policy = current_policy(self.policy_file, self.approvers)
        except (OSError, PolicyConfigError):
            return _Judged(None, UNREADABLE)
        provenance = Provenance.from_json(approval.provenance)  # sealed with the record's other facts
        subject = Subject(
            approval.requester,
            approval.card_channel,
            approval.tool,
            approval.category,
            approval.target,
            tuple(sorted(approval.labels)),
            derived=provenance.is_derived,
            derived_key=provenance.key_derived,
        )
        decision = policy.decide(subject)
        if decision.denied:
            return _Judged(None, f"The access policy now refuses this call: {decision.deny_reason}.")
        return _Judged(decision.requirement)

    def _holds_glass(self, user: str) -> bool:
        """Break-glass is the policy file's: without one, a leftover declaration in Redis counts for nothing."""
        return self.policy_file is not None and self.glass is not None and self.glass(user) is not None

    # -- runs and the rest ------------------------------------------------------------------------

    @property
    def _defaults(self) -> Requirement:
        """``CHATOPS_APPROVERS`` as a requirement (stop, supersede, transcript are not per call)."""
        return Policy(default_approvers=self.approvers).default_requirement(ToolCategory.READ_ONLY)

    def _requester_or_listed(self, user: str, requester: str, refusal: str) -> Verdict:
        account = account_verdict(self.identity, user, named=False)
        if not account.allowed or (user and user == requester):
            return account
        verdict = listed(self._defaults, self.identity, user)
        return verdict if verdict.allowed or TRY_AGAIN in verdict.reason else Verdict(False, refusal)

    def _steer(self, user: str) -> Verdict:
        """A thread reply reaches the run from any person in the thread (Slack vouches that its
        author posted it); a click carries only an ID, so the account behind it is looked up:
        people steer, accounts that are no person (or none) do not."""
        kind = self.identity.kind(user)
        if kind is None:
            return Verdict(False, f"Could not check your Slack account just now. {TRY_AGAIN}")
        if kind in PEOPLE:
            return ALLOWED
        return Verdict(False, MAY_STEER)

    def _request(self, user: str, subject: Subject | None) -> Verdict:
        """A person, whom the policy lets request ``subject``'s call in its channel."""
        if subject is None:
            raise ValueError("REQUEST needs the call's subject")
        person = self._steer(user)
        if not person.allowed:
            return person
        try:
            policy = current_policy(self.policy_file, self.approvers)
        except (OSError, PolicyConfigError):
            return Verdict(False, UNREADABLE)
        return may_request(policy.decide(replace(subject, user=user)), self.identity)

    def _in_channel(self, user: str, channel: str, refusal: str) -> Verdict:
        """Who may approve in ``channel`` (see the table), judged as for a mutating call nobody
        requested: only a rule matching the channel alone applies, no tool, label or target does."""
        if not channel:
            return Verdict(False, refusal)
        try:
            policy = current_policy(self.policy_file, self.approvers)
        except (OSError, PolicyConfigError):
            return Verdict(False, UNREADABLE)
        subject = Subject("", channel, FORGET_SUBJECT, ToolCategory.MUTATING)
        rule = next(
            (
                r
                for r in policy.rules
                if r.approve is not None
                and not (r.match.tools or r.match.categories or r.match.labels or r.match.targets)
                and r.match.matches(subject)
            ),
            None,
        )
        own = Policy(rules=(rule,) if rule is not None else (), default_approvers=policy.default_approvers)
        return self._may_approve_any(own.decide(subject).requirement, user, ToolCategory.MUTATING, refusal)

    def _break_glass(self, user: str) -> Verdict:
        try:
            glass = current_policy(self.policy_file, self.approvers).break_glass
        except (OSError, PolicyConfigError):
            return Verdict(False, UNREADABLE)
        if glass is None:
            return Verdict(False, NO_BREAK_GLASS)
        return may_declare_break_glass(glass, self.identity, user)


def _needs(approval: P | None, action: Action) -> P:
    if approval is None:
        raise ValueError(f"deciding {action.value} needs the approval it is about")
    return approval


def _ruling(verdict: Verdict, user: str, action: Action, approval_id: str = "") -> Ruling:
    return Ruling(verdict.allowed, verdict.reason, user, action, approval_id)
