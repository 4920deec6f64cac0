"""Approval grants: what a runner checks before it executes a mutating or destructive call.

When an approver clicks Approve, the web process signs a grant (HMAC-SHA256 with the target's
key, derived from ``CHATOPS_RUNNER_SECRET``: ``bot.fleet.target_keys``) over exactly what the card showed: the approval and execution ids, the
tool, the SHA-256 of the call's canonical arguments (its target among them), the approver, the
dry run's plan and an expiry. The grant travels with the call (``agent.tooling.APPROVAL_GRANT``)
to the runner, which recomputes every bound value from the call it was handed and refuses on any
difference. Write access to Redis alone therefore cannot make a runner act: an approval record
forged into Redis has no valid grant, and a grant cannot be moved to another call, target or
approver. One grant authorises one execution: the runner spends it in a file on its host before
it runs (``bot.fleet.grant_ledger``: a Redis writer cannot undo that), then claims the execution's
mark in Redis (``bot.fleet.executions``).

A grant lives ``GRANT_LIFETIME_SECONDS`` from the click (or the approval timeout, if shorter): long
enough for a worker to resume the run and the runner to pick the call up, short enough that the
host's record of it is small and a captured grant soon useless. A runner down for longer than that
(or than the call's own deadline) leaves the call refused: the dispatcher reports the target
unreachable, or the runner, back up, refuses the expired grant, and the run needs a new approval.

With an access policy (``CHATOPS_POLICY_FILE``) the grant also carries the policy's decision:
every distinct approver, how many the sealed rule needed, the rule's name, and whether the
approver held break-glass. The runner checks that the approvers are enough for the grant's own
count and, with its own copy of the policy (``PolicyNeed``: its target's labels from its
inventory), for what *its* policy needs: an approval record whose sealed rule was lowered in
Redis before the click is still refused on the host.
"""

from __future__ import annotations

import hashlib
import hmac
import json
import time
from collections.abc import Callable, Mapping, Sequence
from dataclasses import asdict, dataclass

from agent.arguments import canonical_arguments
from agent.tooling import Tool, call_verification
from agent.verification import TARGET_KEY as TARGET_ARGUMENT
from bot.fleet.target_keys import target_key
from tools.verification import restart_health

_VERSION = 1
GRANT_LIFETIME_SECONDS = 300.0  # click -> resumed run -> the runner's pick-up, with room for a busy queue
_RESERVED = ("confirmed_by", "approved_plan", "approval_grant")


@dataclass(frozen=True)
class Grant:
    """The signed facts of one approved execution."""

    approval_id: str
    execution_id: str
    tool: str
    args_sha256: str
    target: str
    confirmed_by: str
    plan_sha256: str
    expires_at: float
    mac: str = ""
    approved_by: str = ""  # every distinct approver, comma-separated ("" = confirmed_by alone)
    approvals_needed: int = 1
    policy_rule: str = ""
    break_glass: bool = False
    verify_sha256: str = ""  # the SHA-256 of the check and undo the card showed ("" = none declared)

    @property
    def approvers(self) -> frozenset[str]:
        return frozenset(a for a in self.approved_by.split(",") if a) or frozenset({self.confirmed_by})

    def payload(self) -> bytes:
        facts = asdict(self)
        facts.pop("mac")
        for name, default in _POLICY_DEFAULTS.items():  # a grant without a policy signs as before
            if facts[name] == default:
                facts.pop(name)
        facts["v"] = _VERSION
        return canonical_arguments(facts).encode()

    def encode(self) -> str:
        return json.dumps(asdict(self), sort_keys=True, separators=(",", ":"))

    @classmethod
    def decode(cls, text: str) -> Grant | None:
        """The grant in ``text``; ``None`` when it is not one (the caller refuses the call)."""
        try:
            raw = json.loads(text)
            grant = cls(**raw)
        except (TypeError, ValueError):
            return None
        typed = {"expires_at", "approvals_needed", "break_glass"}
        if not all(isinstance(value, str) for key, value in asdict(grant).items() if key not in typed):
            return None
        if not isinstance(grant.expires_at, int | float) or isinstance(grant.expires_at, bool):
            return None
        if type(grant.approvals_needed) is not int or not isinstance(grant.break_glass, bool):
            return None
        return grant


_POLICY_DEFAULTS: dict[str, object] = {
    "approved_by": "",
    "approvals_needed": 1,
    "policy_rule": "",
    "break_glass": False,
    "verify_sha256": "",
}


@dataclass(frozen=True)
class PolicyNeed:
    """What the runner's own policy says about a call on its target: denied (the reason), how many
    distinct approvals it needs, and whether break-glass exists in it at all."""

    denied: str = ""
    approvals: int = 1
    break_glass: bool = False


def policy_problem(text: str | None, need: PolicyNeed) -> str | None:
    """Why a (verified) grant falls short of the runner's own policy (``None``: it does not)."""
    grant = Grant.decode(text) if text else None
    if grant is None:
        return "it carries no approval grant"
    if need.denied:
        return f"its policy denies it here ({need.denied})"
    if grant.break_glass and need.break_glass:
        return None
    if len(grant.approvers) < need.approvals:
        return f"its policy needs {need.approvals} distinct approvals, the grant has {len(grant.approvers)}"
    return None


def execution_id(run_id: str, call_id: str) -> str:
    """The id of one execution: the runtime's own call id within its run (never the model's)."""
    return f"{run_id}:{call_id}"


def bound_arguments(arguments: dict[str, object]) -> str:
    """The call's arguments as the approval bound them: without the keys written in after it."""
    return canonical_arguments({key: value for key, value in arguments.items() if key not in _RESERVED})


def declared_verify(
    tool: Tool, arguments: dict[str, object], target: str, health: Mapping[str, str] | None = None
) -> str:
    """The check, before-read and undo ``tool``'s own declaration derives from the call on
    ``target`` (canonical JSON, "" for none), as the worker derived it for the card
    (``tools.targets.TargetedTool.verification_of``): what its grant must have signed. ``health``:
    the target's inventory health URLs (a restart's check requests its service's)."""
    local = {key: value for key, value in arguments.items() if key != TARGET_ARGUMENT}
    found = call_verification(tool, bound_arguments(local))
    found = restart_health(found, tool.definition.name, local, health or {})
    return found.on_target({TARGET_ARGUMENT: target}).to_json() if found is not None else ""


def sha256_text(text: str) -> str:
    return hashlib.sha256(text.encode()).hexdigest()


def arguments_sha256(arguments: dict[str, object]) -> str:
    """What an approval record binds (``ToolCall.arguments_sha256``): the model's arguments,
    without the keys the loop writes in after the approval."""
    return sha256_text(bound_arguments(arguments))


@dataclass(frozen=True)
class GrantSigner:
    """Signs and checks grants with the shared secret, under each grant's target's key;
    ``lifetime``: how long a grant is valid after the click (the run must be resumed and the call
    executed within it). ``own_target``: ``secret`` is already that one target's key (a runner's),
    and grants for any other target are refused."""

    secret: bytes
    lifetime: float
    clock: Callable[[], float] = time.time
    own_target: str | None = None

    def sign(
        self,
        *,
        approval_id: str,
        execution: str,
        tool: str,
        args_sha256: str,
        target: str,
        confirmed_by: str,
        plan: str = "",
        approved_by: Sequence[str] = (),
        approvals_needed: int = 1,
        policy_rule: str = "",
        break_glass: bool = False,
        verify: str = "",
    ) -> str:
        grant = Grant(
            approval_id=approval_id,
            execution_id=execution,
            tool=tool,
            args_sha256=args_sha256,
            target=target,
            confirmed_by=confirmed_by,
            plan_sha256=sha256_text(plan) if plan else "",
            expires_at=round(self.clock() + self.lifetime, 3),
            approved_by=",".join(sorted(set(approved_by))),
            approvals_needed=approvals_needed,
            policy_rule=policy_rule,
            break_glass=break_glass,
            verify_sha256=sha256_text(verify) if verify else "",
        )
        return Grant(**{**asdict(grant), "mac": self._mac(grant)}).encode()

    def problem(
        self,
        text: str | None,
        *,
        tool: str,
        arguments: dict[str, object],
        target: str,
        execution: str,
        verify: str | None = None,
    ) -> str | None:
        """Why the grant does not authorise this execution (``None``: it does).

        ``arguments`` are the call's as received, ``confirmed_by`` and ``approved_plan`` in them.
        ``verify``: the check, before-read and undo this host's own declaration of the tool derives
        from the call (``bound_verification``; "" for none): the grant must have signed exactly
        that, so a card cannot have shown another check or undo than the host's tool declares.
        ``None``: the caller has no declaration to compare (not checked).
        """
        grant = Grant.decode(text) if text else None
        if grant is None:
            return "it carries no approval grant"
        if self.own_target is not None and grant.target != self.own_target:
            return "its approval grant is for another target"
        if not hmac.compare_digest(grant.mac, self._mac(grant)):
            return "its approval grant is not signed with this runner's secret"
        plan = arguments.get("approved_plan")
        expected = {
            "execution": (grant.execution_id, execution),
            "tool": (grant.tool, tool),
            "target": (grant.target, target),
            "arguments": (grant.args_sha256, arguments_sha256(arguments)),
            "approver": (grant.confirmed_by, arguments.get("confirmed_by")),
            "plan": (grant.plan_sha256, sha256_text(plan) if isinstance(plan, str) and plan else ""),
        }
        if verify is not None:
            expected["check and undo"] = (grant.verify_sha256, sha256_text(verify) if verify else "")
        for what, (granted, given) in expected.items():
            if granted != given:
                return f"its approval grant is for another {what}"
        if grant.confirmed_by not in grant.approvers:
            return "its approval grant is for another approver"
        if len(grant.approvers) < grant.approvals_needed and not grant.break_glass:
            return f"its approval grant has {len(grant.approvers)} of {grant.approvals_needed} approvals"
        if grant.expires_at < self.clock():
            return "its approval grant has expired"
        return None

    def _mac(self, grant: Grant) -> str:
        key = self.secret if self.own_target is not None else target_key(self.secret, grant.target)
        return hmac.new(key, grant.payload(), hashlib.sha256).hexdigest()
