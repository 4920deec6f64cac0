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

import logging
from collections.abc import Callable, Mapping

from agent.arguments import arguments_without, checked_arguments
from agent.errors import ArgumentsRejected
from agent.tooling import APPROVAL_GRANT, Tool, ToolCategory, ToolResult, WrapperTool, call_category
from bot.fleet.grants import Grant, GrantSigner, PolicyNeed, declared_verify, policy_problem

log = logging.getLogger(__name__)
TARGET_ARGUMENT = "target"

PolicyNeeds = Callable[[str, ToolCategory], PolicyNeed]
"""What the policy file needs for (tool, category) on one target (``bot.ops.fleet.target_policy``)."""


class GrantCheckedRoute(WrapperTool):
    """The route of one tool on one SSH or Kubernetes target, its changing calls' grants checked.

    It changes what the tool receives (the call without ``target`` and the grant) and its
    execution (the grant checked first); everything else is the tool's own (``WrapperTool``)."""

    receives_target = True  # the grant binds the arguments as the model wrote them, the target among them

    def __init__(
        self,
        inner: Tool,
        target: str,
        signer: GrantSigner,
        needs: PolicyNeeds | None,
        health: Mapping[str, str] | None = None,
    ) -> None:
        """``health``: the target's inventory health URLs (a restart's check requests its service's)."""
        super().__init__(inner)
        self._target = target
        self._health = dict(health or {})
        self._signer = signer
        self._needs = needs

    @property
    def enforces_timeout(self) -> bool:
        """Never: the grant check reads Redis's clock and the policy file before the tool runs, which
        its timeout does not bound, so the loop's pool keeps the wait."""
        return False

    def inner_arguments(self, arguments: str) -> str:
        """What the target's own tool receives: the call without ``target`` and the grant."""
        return arguments_without(arguments, (TARGET_ARGUMENT, APPROVAL_GRANT))

    def execute(self, arguments: str, *, timeout: float) -> ToolResult:
        local = self.inner_arguments(arguments)
        category = call_category(self.inner, local).category
        if category.requires_confirmation:
            problem = self.problem(arguments, category)
            if problem is not None:
                name = self.inner.definition.name
                log.warning("refused %s on %s: %s", name, self._target, problem)
                return ToolResult(
                    f"Error: the worker refused {name} on {self._target}: {problem}; nothing was run",
                    is_error=True,
                )
        return self.inner.execute(local, timeout=timeout)

    def problem(self, arguments: str, category: ToolCategory) -> str | None:
        """Why this changing call may not run on the target (``None``: its grant holds)."""
        try:
            parsed = checked_arguments(arguments)
        except ArgumentsRejected:
            return "its arguments are not a JSON object"
        text = parsed.get(APPROVAL_GRANT)
        text = text if isinstance(text, str) else None
        grant = Grant.decode(text) if text else None
        problem = self._signer.problem(
            text,
            tool=self.inner.definition.name,
            arguments=parsed,
            target=self._target,
            execution=grant.execution_id if grant is not None else "",
            verify=declared_verify(self.inner, parsed, self._target, self._health),
        )
        if problem is None and self._needs is not None:
            problem = policy_problem(text, self._needs(self.inner.definition.name, category))
        return problem
