"""Changing calls the worker runs itself on SSH and Kubernetes targets, checked as a runner checks.

A runner target has a process on the host that verifies every changing call's grant before it
acts (``bot.fleet.runner_job``). An SSH or Kubernetes target has none: the worker opens the SSH
connection or runs ``kubectl`` itself. So the worker is that process. Right before a mutating or
destructive call runs there, ``GrantCheckedRoute`` verifies the grant the web process signed at
the click with ``CHATOPS_RUNNER_SECRET`` (``GrantSigner.problem``: the signature, the tool, the
arguments with their target, the approver, the plan, the expiry, enough distinct approvers for
the grant's own count) and what the worker's own reading of the policy file needs on that target
(``policy_problem`` with a ``PolicyNeed`` computed by ``Policy.decide`` in the composition,
``bot.ops.fleet``). An approval record whose grant is missing, forged, made for another call, or
whose requirement was lowered in Redis, runs nothing on the target. Read-only calls run as before.

As on a runner, the grant names its own execution (the dispatcher takes a runner job's execution
id from it too); that the one execution runs once is the approval's ``consume`` and the loop's
executing mark (``bot.runs.approval_gate``).
"""

from __future__ import annotations

import json
import logging
from collections.abc import Callable
from typing import Any

from agent.tooling import (
    APPROVAL_GRANT,
    Tool,
    ToolCategory,
    ToolResult,
    call_category,
    call_refusal,
    describe_call,
)
from agent.types import ToolDef
from bot.fleet.grants import Grant, GrantSigner, PolicyNeed, policy_problem

log = logging.getLogger(__name__)
TARGET_ARGUMENT = "target"

PolicyNeeds = Callable[[str, ToolCategory], PolicyNeed]
"""What the policy file needs for (tool, category) on one target (``bot.ops.fleet.target_policy``)."""


class GrantCheckedRoute:
    """The route of one tool on one SSH or Kubernetes target, its changing calls' grants checked."""

    receives_target = True  # the grant binds the arguments as the model wrote them, the target among them

    def __init__(self, inner: Tool, target: str, signer: GrantSigner, needs: PolicyNeeds | None) -> None:
        self._inner = inner
        self._target = target
        self._signer = signer
        self._needs = needs

    @property
    def definition(self) -> ToolDef:
        return self._inner.definition

    @property
    def category(self) -> ToolCategory:
        return self._inner.category

    @property
    def parallel(self) -> bool:
        return self._inner.parallel

    @property
    def timeout(self) -> float:
        return self._inner.timeout

    def execute(self, arguments: str, *, timeout: float) -> ToolResult:
        local = _without_target(arguments)
        category = call_category(self._inner, local).category
        if category.requires_confirmation:
            problem = self.problem(arguments, category)
            if problem is not None:
                name = self._inner.definition.name
                log.warning("refused %s on %s: %s", name, self._target, problem)
                return ToolResult(
                    f"Error: the worker refused {name} on {self._target}: {problem}; nothing was run",
                    is_error=True,
                )
        return self._inner.execute(local, timeout=timeout)

    def problem(self, arguments: str, category: ToolCategory) -> str | None:
        """Why this changing call may not run on the target (``None``: its grant holds)."""
        try:
            parsed: Any = json.loads(arguments)
        except ValueError:
            parsed = None
        if not isinstance(parsed, dict):
            return "its arguments are not a JSON object"
        text = parsed.get(APPROVAL_GRANT)
        text = text if isinstance(text, str) else None
        grant = Grant.decode(text) if text else None
        problem = self._signer.problem(
            text,
            tool=self._inner.definition.name,
            arguments=parsed,
            target=self._target,
            execution=grant.execution_id if grant is not None else "",
        )
        if problem is None and self._needs is not None:
            problem = policy_problem(text, self._needs(self._inner.definition.name, category))
        return problem

    def preview(self, arguments: str, *, timeout: float) -> ToolResult | None:
        return self._inner.preview(_without_target(arguments), timeout=timeout)

    def describe(self, arguments: str) -> str | None:
        return describe_call(self._inner, _without_target(arguments))

    def category_for(self, arguments: str) -> Any:
        return call_category(self._inner, _without_target(arguments))

    def refusal(self, arguments: str) -> str | None:
        return call_refusal(self._inner, _without_target(arguments))


def _without_target(arguments: str) -> str:
    """What the target's own tool receives: the call without ``target`` and the grant."""
    try:
        parsed = json.loads(arguments or "{}")
    except ValueError:
        return arguments
    if not isinstance(parsed, dict):
        return arguments
    return json.dumps({k: v for k, v in parsed.items() if k not in (TARGET_ARGUMENT, APPROVAL_GRANT)})
