"""The policy at proposal time: what a run is offered, what is refused (with the reason the model
reads), and the requirement each approval is proposed with (shown on its first card, audited;
the web process computes its own at the click, ``bot.policy.deciders``).

``RunPolicy.tools`` builds a run's tool list from the channel's: a tool a deny rule removes in
this channel whatever the target is not offered at all, and a tool routed by its target
(``TargetedTool``) is offered only on the targets no deny rule takes (applied to the build's list
in every job of a run: what the policy denies now is never offered from the run's recorded list,
``bot.runs.run_tools``). Every other tool is wrapped in a
``PolicedTool``, which asks ``Policy.decide`` about each call with the target the *inventory*
names for it (``call_target``: its labels are never the model's) and the call's real category
(``call_category``): a denied call, or one the requester may not have made, is refused before
anyone is asked (``refusal``, for mutating calls) or instead of running (``execute``, for
read-only ones). A hostile model naming a tool it was not offered gets "unknown tool" from the
loop; one naming a denied target gets the rule's reason.
"""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass

from agent.config import ConfirmRequest
from agent.provenance import Provenance
from agent.tooling import (
    Tool,
    ToolCategory,
    ToolResult,
    WrapperTool,
    call_category,
    call_refusal,
    call_target,
)
from bot.policy.rules import Decision, Identity, Policy, Subject, may_request
from tools.targets import TargetedTool


@dataclass(frozen=True)
class RunPolicy:
    """The policy and the identity lookups a worker enforces it with."""

    policy: Policy
    identity: Identity

    def tools(self, tools: Sequence[Tool], channel: str, requester: str) -> list[Tool]:
        """The run's list: denied-here tools left out, a targeted tool offered only on the targets
        no deny rule takes in this channel, and every call checked by the policy."""
        offered: list[Tool] = []
        for tool in tools:
            if self.policy.offered(channel, tool.definition.name, tool.category) is not None:
                continue
            narrowed = self._narrowed(tool, channel) if isinstance(tool, TargetedTool) else tool
            if narrowed is not None:
                offered.append(PolicedTool(narrowed, self, channel, requester))
        return offered

    def offers(self, channel: str, name: str, category: ToolCategory) -> bool:
        """Whether no deny rule removes a tool of this name and category from a run's list here."""
        return self.policy.offered(channel, name, category) is None

    def _narrowed(self, tool: TargetedTool, channel: str) -> Tool | None:
        name = tool.definition.name
        denied = [
            target.name
            for target in tool.targets
            if self.policy.decide(
                Subject("", channel, name, tool.category, target.name, tuple(sorted(target.labels.items())))
            ).denied
        ]
        return tool.without(denied) if denied else tool

    def subject(self, tool: Tool, arguments: str, channel: str, requester: str) -> Subject:
        target = call_target(tool, arguments)
        return Subject(
            requester,
            channel,
            tool.definition.name,
            call_category(tool, arguments).category,
            target.name if target else "",
            target.labels if target else (),
        )

    def refusal(self, tool: Tool, arguments: str, channel: str, requester: str) -> str | None:
        """Why this call may not be made in this run (``None``: it may, approvals aside)."""
        decision = self.policy.decide(self.subject(tool, arguments, channel, requester))
        verdict = may_request(decision, self.identity)
        return None if verdict.allowed else f"Error: {verdict.reason}"

    def proposal(
        self, request: ConfirmRequest, channel: str, requester: str, provenance: Provenance | None = None
    ) -> Decision:
        """The policy's decision on ``request`` as proposed, its values' ``provenance`` included."""
        target = request.target
        subject = Subject(
            requester,
            channel,
            request.call.name,
            request.category,
            target.name if target else "",
            target.labels if target else (),
            derived=provenance is not None and provenance.is_derived,
            derived_key=provenance is not None and provenance.key_derived,
        )
        return self.policy.decide(subject)

    def seal(
        self, request: ConfirmRequest, channel: str, requester: str, provenance: Provenance | None = None
    ) -> str:
        """The requirement an approval of ``request`` is proposed with (``Approval.policy``: the first
        card and the audit show it; nobody decides from it)."""
        return self.proposal(request, channel, requester, provenance).requirement.to_json()


class PolicedTool(WrapperTool):
    """A tool of one run, every call of which the policy checks first; the rest is the tool's own
    (``WrapperTool``: its target, command, category, an MCP tool's server, ...)."""

    def __init__(self, inner: Tool, policy: RunPolicy, channel: str, requester: str) -> None:
        super().__init__(inner)
        self._policy = policy
        self._channel = channel
        self._requester = requester

    def refusal(self, arguments: str) -> str | None:
        """The tool's own refusal (an unknown target), then the policy's."""
        own = call_refusal(self.inner, arguments)
        if own is not None:
            return own
        return self._policy.refusal(self.inner, arguments, self._channel, self._requester)

    def execute(self, arguments: str, *, timeout: float) -> ToolResult:
        # Checked again as it runs: the loop refused it before it was run or put before anyone,
        # but the policy file or the target's runner may have changed since (an approval waits).
        refused = self.refusal(arguments)
        if refused is not None:
            return ToolResult(refused, is_error=True)
        return self.inner.execute(arguments, timeout=timeout)
