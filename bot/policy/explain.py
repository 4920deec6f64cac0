"""``chatops policy explain``: what applies to one (user, channel, tool, target) and why.

The answer is computed by the same functions enforcement uses (``Policy.decide``,
``Policy.offered``, ``may_request``, ``may_approve``), and said in the operator's words, naming
the rule behind each part.
"""

from __future__ import annotations

import time
from dataclasses import dataclass

from bot.policy.rules import (
    DEFAULTS_RULE,
    Identity,
    Policy,
    Requirement,
    Subject,
    Verdict,
    may_approve,
    may_declare_break_glass,
    may_request,
)


@dataclass(frozen=True)
class Explanation:
    subject: Subject
    offered: bool  # the tool is in the model's list in this channel
    denied_by: str  # the deny rule ("" = none)
    request: Verdict  # may the user have this call made in a run they started
    request_rule: str
    requirement: Requirement
    approve: Verdict  # may the user approve it (someone else's request)
    lines: tuple[str, ...]


def _who(requirement: Requirement) -> str:
    if requirement.open:
        return "any full member of the workspace"
    return ", ".join([*requirement.users, *requirement.groups])


def explain(
    policy: Policy,
    subject: Subject,
    identity: Identity,
    *,
    requester: str = "",
    break_glass_until: float | None = None,
) -> Explanation:
    """``requester``: whose run it is when asking whether ``subject.user`` may approve (default:
    someone else). ``break_glass_until``: ``subject.user`` holds an active break-glass until then
    (``bot.policy.break_glass.BreakGlassLog.active_until``), which the approval click honours too."""
    decision = policy.decide(subject)
    hidden = policy.offered(subject.channel, subject.tool, subject.category)
    request = may_request(decision, identity)
    requirement = decision.requirement
    approve = (
        Verdict(False, decision.deny_reason)
        if decision.denied
        else may_approve(
            requirement,
            subject.user,
            requester=requester or "",
            involved=(),
            category=subject.category,
            identity=identity,
            break_glass=break_glass_until is not None,
        )
    )
    where = (
        f" on {subject.target} [{', '.join(f'{k}={v}' for k, v in subject.labels)}]" if subject.target else ""
    )
    lines = [
        f"policy: {policy.source or 'built-in defaults (no CHATOPS_POLICY_FILE)'}",
        f"call: {subject.tool} ({subject.category.value}){where} in {subject.channel or '(any channel)'}, "
        f"by {subject.user}",
    ]
    if hidden is not None:
        lines.append(f"offered: no: rule '{hidden.name}' removes it from the tool list in this channel")
    else:
        lines.append("offered: yes")
    if decision.denied_by is not None:
        lines.append(
            f"denied: yes, by rule '{decision.denied_by.name}': {decision.denied_by.reason or '(no reason)'}"
        )
    else:
        rule = decision.request_rule.name if decision.request_rule else DEFAULTS_RULE
        lines.append(
            f"request: rule '{rule}': " + ("allowed" if request.allowed else f"refused: {request.reason}")
        )
        lines.append(
            f"approve: rule '{requirement.rule}': {_who(requirement)}; "
            f"{requirement.approvals} distinct approval(s); requester "
            + ("may" if requirement.requester_may_approve else "may not")
            + " approve"
        )
        lines.append(
            f"{subject.user} may approve: " + ("yes" if approve.allowed else f"no: {approve.reason}")
        )
    lines.append(_break_glass_line(policy, subject.user, identity, break_glass_until))
    return Explanation(
        subject,
        hidden is None,
        decision.denied_by.name if decision.denied_by else "",
        request,
        decision.request_rule.name if decision.request_rule else DEFAULTS_RULE,
        requirement,
        approve,
        tuple(lines),
    )


def _break_glass_line(policy: Policy, user: str, identity: Identity, until: float | None) -> str:
    if until is not None:
        when = time.strftime("%Y-%m-%d %H:%M UTC", time.gmtime(until))
        return (
            f"break-glass: {user} holds it until {when}: their click approves any call at once, "
            "whatever its rule and count, but never their own destructive one"
        )
    glass = policy.break_glass
    if glass is None:
        return "break-glass: not configured"
    declare = may_declare_break_glass(glass, identity, user)
    if declare.allowed:
        return f"break-glass: {user} may declare it (/ops break-glass, {glass.minutes} minutes); not active"
    return f"break-glass: {user} may not declare it: {declare.reason or 'not named by the policy'}"
