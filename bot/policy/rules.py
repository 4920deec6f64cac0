"""The access policy: who may request a tool call, who may approve it, what is denied (issue 20).

A policy is a list of rules (``CHATOPS_POLICY_FILE``, read by ``bot.policy.file``). A rule
*matches* a call by the target's labels and name, the tool's name (``fnmatch`` patterns), the
call's category and the run's channel; every condition a rule states must hold, an absent one
matches anything. For one call (a ``Subject``) ``Policy.decide`` answers, in one place:

* **deny**: the first matching rule with ``deny: true`` makes the call unavailable. A deny rule
  that names no labels and no targets removes the tool from the model's list in that channel
  (``offered``); one that depends on the target refuses the call with the rule's reason.
* **request**: the first matching rule with a ``request:`` section says who may start a run that
  makes this call (users, user groups, channels). No such rule: anyone (today's behaviour).
* **derived** (issue 36): a call with an argument value taken only from what the bot read
  (``agent.provenance``) is judged by the first matching rule with a ``derived:`` key: ``deny``
  refuses it (nobody is asked), ``{approvals: N}`` makes it need N approvals in total (never fewer
  than its ``approve:`` asks). No such rule in a policy file: a destructive call whose target, path
  or service is derived needs one approval more than its rule asks (without a file: flagged only).
* **approve**: the first matching rule with an ``approve:`` section says who may approve (users,
  user groups), whether the requester may (``requester_may_approve``) and how many distinct
  people must (``approvals``). No such rule: the defaults (``CHATOPS_APPROVERS``; a mutating call
  may be approved by its requester). That answer, a ``Requirement``, is computed by whoever
  decides, from its own copy of the file: the web process at the click
  (``bot.policy.deciders``), the runner and the worker before a call runs on a target
  (``bot.fleet.grants.PolicyNeed``); never read back from the approval record in Redis.

Two rules no file can change: a destructive call is never approved by its requester or by anyone
whose thread message led to it (four-eyes), and guests, bots, deactivated and external accounts
may neither request nor approve unless a rule names their user ID explicitly (``CHATOPS_APPROVERS``
is no rule: it chooses among full members). Who is who comes from an ``Identity``
(``bot.slack.policy_identity`` asks Slack); an answer it cannot give denies.
"""

from __future__ import annotations

import json
from collections.abc import Sequence
from dataclasses import dataclass, field, replace
from enum import StrEnum
from fnmatch import fnmatchcase
from typing import Protocol

from agent.tooling import ToolCategory

DEFAULTS_RULE = "defaults"
TRY_AGAIN = "Nothing was decided; try again in a moment."


@dataclass(frozen=True)
class Verdict:
    """``allowed``, or the sentence the person (or the model) reads about why not."""

    allowed: bool
    reason: str = ""


ALLOWED = Verdict(True)


class AccountKind(StrEnum):
    """What Slack says an account is (``users.info``)."""

    MEMBER = "member"  # a full member of the bot's own workspace
    GUEST = "guest"
    BOT = "bot"  # a bot or an app user
    EXTERNAL = "external"  # another team (Slack Connect)
    DEACTIVATED = "deactivated"
    UNKNOWN = "unknown"  # Slack does not know the ID
    NOT_A_PERSON = "not_a_person"  # not a user ID at all (a bot ID ``B…``, Slackbot): never decides
    UNDECLARED = "undeclared"  # Slack's answer did not say whether it is a guest: counts as one
    NO_WORKSPACE = "no_workspace"  # the bot's own workspace is not known yet: nobody can be judged now


KIND_REFUSALS = {
    AccountKind.GUEST: "Guest accounts may not decide; only full members of the workspace may.",
    AccountKind.BOT: "Bots and apps may not decide; a person must.",
    AccountKind.EXTERNAL: "Only members of the bot's own workspace may decide (not Slack Connect guests).",
    AccountKind.DEACTIVATED: "This account is deactivated.",
    AccountKind.UNKNOWN: "Slack does not know this account in the bot's workspace.",
    AccountKind.NOT_A_PERSON: "Only a person's Slack account may decide.",
    AccountKind.UNDECLARED: "Slack did not say whether this account is a guest, so it may not decide.",
    AccountKind.NO_WORKSPACE: f"The bot does not know its own workspace yet (auth.test). {TRY_AGAIN}",
}
# What a rule that lists the user ID explicitly lets decide all the same (``CHATOPS_APPROVERS`` never does).
NAMEABLE = frozenset({AccountKind.GUEST, AccountKind.BOT, AccountKind.EXTERNAL, AccountKind.UNDECLARED})
NOT_LISTED = "You are not on this bot's approvers list (CHATOPS_APPROVERS)."


class Identity(Protocol):
    """Who a Slack user is and which groups hold whom. ``None``: the answer cannot be had now
    (a failed or timed-out lookup): the caller denies."""

    def kind(self, user: str) -> AccountKind | None: ...

    def members(self, group: str) -> frozenset[str] | None: ...


@dataclass(frozen=True)
class Subject:
    """One call as the policy sees it: who asked, where, which tool, what kind, on which target."""

    user: str
    channel: str
    tool: str
    category: ToolCategory
    target: str = ""  # "" without an inventory (the worker's own host)
    labels: tuple[tuple[str, str], ...] = ()
    derived: bool = False  # an argument value came only from what the bot read (``agent.provenance``)
    derived_key: bool = False  # ... its target, path or service among them


@dataclass(frozen=True)
class Match:
    """A rule's conditions; an empty one matches anything."""

    labels: tuple[tuple[str, str], ...] = ()
    targets: tuple[str, ...] = ()
    tools: tuple[str, ...] = ()
    categories: frozenset[ToolCategory] = frozenset()
    channels: frozenset[str] = frozenset()

    @property
    def target_free(self) -> bool:
        """Matches without looking at the target: can be judged when the tool list is built."""
        return not self.labels and not self.targets

    def matches(self, subject: Subject, *, ignore_target: bool = False) -> bool:
        if self.categories and subject.category not in self.categories:
            return False
        if self.channels and subject.channel not in self.channels:
            return False
        if self.tools and not any(fnmatchcase(subject.tool, pattern) for pattern in self.tools):
            return False
        if ignore_target:
            return True
        labels = dict(subject.labels)
        if any(labels.get(key) != value for key, value in self.labels):
            return False
        return not self.targets or any(fnmatchcase(subject.target, pattern) for pattern in self.targets)


@dataclass(frozen=True)
class Audience:
    """Who: user IDs, user groups (``S…``) and, for requests, channels. Empty: nobody is named."""

    users: frozenset[str] = frozenset()
    groups: tuple[str, ...] = ()
    channels: frozenset[str] = frozenset()


@dataclass(frozen=True)
class Approve:
    """A rule's ``approve:`` section."""

    who: Audience
    requester_may_approve: bool = True
    approvals: int = 1


@dataclass(frozen=True)
class Derived:
    """A rule's ``derived:`` key: ``deny``, or ``approvals`` in total for a derived call."""

    deny: bool = False
    approvals: int = 1


@dataclass(frozen=True)
class Rule:
    name: str
    match: Match = field(default_factory=Match)
    request: Audience | None = None
    approve: Approve | None = None
    deny: bool = False
    reason: str = ""
    derived: Derived | None = None


@dataclass(frozen=True)
class BreakGlass:
    """Members of ``groups`` (or listed ``users``) may approve anything for ``minutes`` after they
    declare it (still never their own destructive call)."""

    groups: tuple[str, ...] = ()
    users: frozenset[str] = frozenset()
    minutes: int = 30


@dataclass(frozen=True)
class Requirement:
    """Who may approve one call and how many must (``Approval.policy`` keeps the worker's, for the
    first card and the audit; deciders compute their own)."""

    rule: str = DEFAULTS_RULE
    users: tuple[str, ...] = ()
    groups: tuple[str, ...] = ()
    requester_may_approve: bool = True
    approvals: int = 1

    @property
    def open(self) -> bool:
        """Nobody is named: every full member of the workspace may approve."""
        return not self.users and not self.groups

    def names(self, user: str) -> bool:
        """A policy rule lists ``user``'s ID, which lets a guest, bot or external account approve.
        ``CHATOPS_APPROVERS`` (the defaults) never does: it lists who, among full members."""
        return self.rule != DEFAULTS_RULE and user in self.users

    def to_json(self) -> str:
        return json.dumps(
            {
                "rule": self.rule,
                "users": list(self.users),
                "groups": list(self.groups),
                "requester_may_approve": self.requester_may_approve,
                "approvals": self.approvals,
            },
            separators=(",", ":"),
        )

    @classmethod
    def from_json(cls, text: str) -> Requirement:
        data = json.loads(text)
        return cls(
            rule=str(data["rule"]),
            users=tuple(str(u) for u in data["users"]),
            groups=tuple(str(g) for g in data["groups"]),
            requester_may_approve=bool(data["requester_may_approve"]),
            approvals=max(1, int(data["approvals"])),
        )


@dataclass(frozen=True)
class Decision:
    """What applies to one ``Subject`` and why (the rules' names)."""

    subject: Subject
    denied_by: Rule | None
    request_rule: Rule | None
    requirement: Requirement
    derived_rule: Rule | None = None  # the rule whose ``derived:`` applied (a derived call only)
    escalated: bool = False  # the requirement asks for more because values are derived

    @property
    def denied(self) -> bool:
        return self.denied_by is not None

    @property
    def deny_reason(self) -> str:
        rule = self.denied_by
        if rule is None:
            return ""
        why = f": {rule.reason}" if rule.reason else ""
        if not rule.deny:  # denied by its ``derived: deny``
            return (
                f"`{self.subject.tool}` may not be called here with values taken from what was read "
                f"rather than from anyone's request (policy rule '{rule.name}', derived: deny{why})"
            )
        return f"`{self.subject.tool}` is not available here (policy rule '{rule.name}'{why})"


@dataclass(frozen=True)
class Policy:
    """The rules in file order, the defaults (``CHATOPS_APPROVERS``) and break-glass."""

    rules: tuple[Rule, ...] = ()
    default_approvers: tuple[str, ...] = ()
    break_glass: BreakGlass | None = None
    source: str = ""  # the file it came from ("" = the built-in defaults)

    def decide(self, subject: Subject) -> Decision:
        matching = [rule for rule in self.rules if rule.match.matches(subject)]
        denied = next((rule for rule in matching if rule.deny), None)
        request = next((rule for rule in matching if rule.request is not None), None)
        approve = next((rule for rule in matching if rule.approve is not None), None)
        requirement = self._requirement(approve, subject.category)
        if not subject.derived:
            return Decision(subject, denied, request, requirement)
        derived = next((rule for rule in matching if rule.derived is not None), None)
        if derived is not None and derived.derived is not None:
            if derived.derived.deny:
                return Decision(subject, denied or derived, request, requirement, derived)
            total = max(requirement.approvals, derived.derived.approvals)
            more = replace(requirement, approvals=total)
            return Decision(subject, denied, request, more, derived, total > requirement.approvals)
        if self.in_force and derived_extra(subject.category, key_derived=subject.derived_key):
            more = replace(requirement, approvals=requirement.approvals + 1)
            return Decision(subject, denied, request, more, None, True)
        return Decision(subject, denied, request, requirement)

    @property
    def in_force(self) -> bool:
        """A policy file's rules apply (not only the built-in defaults, ``CHATOPS_APPROVERS``)."""
        return bool(self.source or self.rules)

    def offered(self, channel: str, tool: str, category: ToolCategory) -> Rule | None:
        """The deny rule that removes ``tool`` from the list of a run in ``channel``, if any:
        one that applies whatever the target (it names no labels and no targets)."""
        subject = Subject("", channel, tool, category)
        return next(
            (
                rule
                for rule in self.rules
                if rule.deny and rule.match.target_free and rule.match.matches(subject, ignore_target=True)
            ),
            None,
        )

    def default_requirement(self, category: ToolCategory) -> Requirement:
        """``CHATOPS_APPROVERS`` (user IDs and ``S…`` groups; empty: every full member), one approval."""
        users = tuple(a for a in self.default_approvers if not a.startswith("S"))
        groups = tuple(a for a in self.default_approvers if a.startswith("S"))
        return Requirement(DEFAULTS_RULE, users, groups, category is not ToolCategory.DESTRUCTIVE, 1)

    def _requirement(self, rule: Rule | None, category: ToolCategory) -> Requirement:
        four_eyes = category is ToolCategory.DESTRUCTIVE
        if rule is None or rule.approve is None:
            return self.default_requirement(category)
        approve = rule.approve
        return Requirement(
            rule.name,
            tuple(sorted(approve.who.users)),
            approve.who.groups,
            approve.requester_may_approve and not four_eyes,
            approve.approvals,
        )


def derived_extra(category: ToolCategory, *, key_derived: bool) -> int:
    """Approvals a derived call needs beyond its rule's when no ``derived:`` key applies: one for
    a destructive call whose target, path or service is derived (``agent.provenance.KEY_ARGUMENTS``)."""
    return 1 if key_derived and category is ToolCategory.DESTRUCTIVE else 0


# -- who may request, who may approve -------------------------------------------------------------


def account_verdict(identity: Identity, user: str, *, named: bool) -> Verdict:
    """A full member of the workspace; a guest, bot or external account only when a rule ``named``
    their user ID. A deactivated or unknown account never; a failed lookup denies."""
    kind = identity.kind(user)
    if kind is None:
        return Verdict(False, f"Could not check your Slack account just now. {TRY_AGAIN}")
    if kind is AccountKind.MEMBER:
        return ALLOWED
    if named and kind in NAMEABLE:
        return ALLOWED
    return Verdict(False, KIND_REFUSALS[kind])


def may_declare_break_glass(glass: BreakGlass, identity: Identity, user: str) -> Verdict:
    """Whether ``user`` may declare the policy's break-glass (``/ops break-glass``): it names them
    (a user ID) or a group of theirs, as a full member unless named by ID."""
    verdict = account_verdict(identity, user, named=user in glass.users)
    if verdict.allowed:
        verdict = in_audience(identity, user, tuple(glass.users), glass.groups)
    return verdict


def in_audience(
    identity: Identity, user: str, users: Sequence[str], groups: Sequence[str], *, noun: str = "user group"
) -> Verdict:
    """``user`` is listed or a member of a listed group; a group that cannot be read counts as
    "unknown", never as the stale list (someone who just left could pass)."""
    if user in users:
        return ALLOWED
    unreadable = []
    for group in groups:
        members = identity.members(group)
        if members is None:
            unreadable.append(group)
        elif user in members:
            return ALLOWED
    if unreadable:
        names = ", ".join(f"<!subteam^{g}>" for g in unreadable)
        return Verdict(False, f"Could not read the {noun} {names} just now. {TRY_AGAIN}")
    return Verdict(False, "")


def may_request(decision: Decision, identity: Identity) -> Verdict:
    """Whether the subject's user may have this call made in a run they started, in that channel."""
    if decision.denied:
        return Verdict(False, decision.deny_reason)
    rule = decision.request_rule
    if rule is None or rule.request is None:
        return ALLOWED
    subject, who = decision.subject, rule.request
    refusal = f"policy rule '{rule.name}' does not let <@{subject.user}> request `{subject.tool}` here"
    if who.channels and subject.channel not in who.channels:
        return Verdict(False, f"{refusal} (not from this channel)")
    account = account_verdict(identity, subject.user, named=subject.user in who.users)
    if not account.allowed:
        return Verdict(False, f"{refusal}: {account.reason}")
    if not who.users and not who.groups:
        return ALLOWED  # only channels were named: any full member there
    listed = in_audience(identity, subject.user, tuple(who.users), who.groups)
    return ALLOWED if listed.allowed else Verdict(False, f"{refusal}. {listed.reason}".rstrip(". ") + ".")


def may_approve(
    requirement: Requirement,
    user: str,
    *,
    requester: str,
    involved: Sequence[str],
    category: ToolCategory,
    identity: Identity,
    break_glass: bool = False,
) -> Verdict:
    """Whether ``user`` may approve a call sealed with ``requirement`` (one of its approvals).

    ``break_glass``: ``user`` holds an active break-glass (``bot.policy.break_glass``): any call,
    their own mutating one too, but never their own destructive one (four-eyes).
    """
    if category is ToolCategory.DESTRUCTIVE and user in {requester, *involved}:
        return Verdict(
            False,
            "A destructive call needs an approver other than the person who asked for it "
            "(or anyone whose thread message led to it).",
        )
    if not requirement.requester_may_approve and not break_glass and user in {requester, *involved}:
        return Verdict(False, f"Policy rule '{requirement.rule}' needs an approver other than the requester.")
    account = account_verdict(identity, user, named=requirement.names(user))
    if not account.allowed:
        return account
    if break_glass:
        return ALLOWED
    return listed(requirement, identity, user)


def listed(requirement: Requirement, identity: Identity, user: str) -> Verdict:
    """Whether the requirement's users and groups hold ``user`` (none named: everyone)."""
    if requirement.open:
        return ALLOWED
    found = in_audience(identity, user, requirement.users, requirement.groups, noun="approver group")
    if found.allowed or found.reason:
        return found
    if requirement.rule == DEFAULTS_RULE:
        return Verdict(False, NOT_LISTED)
    who = ", ".join(
        [*(f"<@{u}>" for u in requirement.users), *(f"<!subteam^{g}>" for g in requirement.groups)]
    )
    return Verdict(False, f"Policy rule '{requirement.rule}' lets only {who} approve this call.")
