"""``TargetedTool``: one tool offered once, each call routed to the target it names.

With an inventory, every tool that acts on a machine takes a ``target`` argument. The model sees
one tool (``service_restart``) whose schema lists the targets it may name (an ``enum``, with each
target's labels in the description); a call is routed to that target's own implementation of the
tool, its *route*: the local tool (``via: local``), a dispatch to the target's runner
(``bot.fleet.dispatch``), the catalog command over SSH, or the Kubernetes tool with the target's
context and namespace. The route is chosen by code from the inventory, never guessed: a target
that is not in the list, or a missing one where the channel has no default, is an error the model
reads (it should ask in the thread).

The ``target`` stays in the call's arguments, so an approval (bound to the canonical arguments)
binds the target too; a route that verifies approvals itself (a runner) receives the arguments
exactly as the model wrote them (``receives_target``), every other route receives them without
``target``.

Every result names its target (``[web-03] ...`` and ``ToolResult.target``) and who executed it
(``ToolResult.executor``): the audit, the run card and the model all see where a call ran.

Which tools are routed so is their own declaration (``tools.placement``, read by
``bot.fleet.routing``). One call is asked for its refusal, category, target, command and
execution; its arguments are parsed once (``agent.arguments.checked_arguments``) and the route's
share of them worked out once (``arguments_without``), whichever part asks first.
"""

from __future__ import annotations

import dataclasses
import json
import os
import socket
from collections.abc import Collection, Mapping
from dataclasses import dataclass
from typing import Any

from agent.arguments import arguments_without, checked_arguments
from agent.errors import ArgumentsRejected
from agent.tooling import (
    CallCategory,
    CallTarget,
    Tool,
    ToolResult,
    WrapperTool,
    call_category,
    call_refusal,
    describe_call,
    enforces_own_timeout,
)
from agent.types import ToolDef
from agent.verification import Verification
from tools.base import error_result
from tools.errors import ToolConfigError
from tools.inventory import Target
from tools.verification import restart_health

TARGET_ARGUMENT = "target"


def local_executor() -> str:
    """This process, as an executor (``host:pid``); read at call time: workers fork."""
    return f"{socket.gethostname()}:{os.getpid()}"


@dataclass(frozen=True)
class Resolved:
    target: Target
    route: Tool
    arguments: str  # what the route receives


class TargetedTool(WrapperTool):
    """A tool whose calls each run on the target they name (see the module docstring).

    It wraps ``base`` (the category, parallelism and placement are its) and changes every part
    a call reaches: each goes to the route of the call's target."""

    def __init__(
        self,
        base: Tool,
        routes: Mapping[str, tuple[Target, Tool]],
        *,
        default: str | None = None,
    ) -> None:
        name = base.definition.name
        if not routes:
            raise ToolConfigError(f"tool {name}: no target can run it")
        if TARGET_ARGUMENT in base.definition.parameters.get("properties", {}):
            raise ToolConfigError(
                f"tool {name}: a parameter named {TARGET_ARGUMENT!r} clashes with the inventory's target"
            )
        if default is not None and default not in routes:
            default = None  # the channel's default cannot run this tool: the model must name one
        super().__init__(base)
        self._routes = dict(sorted(routes.items()))
        self._default = default
        self._definition = _with_target(base.definition, self._routes, default)

    @property
    def definition(self) -> ToolDef:
        return self._definition

    @property
    def timeout(self) -> float:
        return max(route.timeout for _, route in self._routes.values())

    @property
    def enforces_timeout(self) -> bool:
        """Only when every target's route returns by its timeout (``agent.tooling.enforces_own_timeout``)."""
        return all(enforces_own_timeout(route) for _, route in self._routes.values())

    @property
    def target_names(self) -> list[str]:
        return list(self._routes)

    @property
    def targets(self) -> list[Target]:
        return [target for target, _ in self._routes.values()]

    def without(self, names: Collection[str]) -> TargetedTool | None:
        """The same tool offered on fewer targets (an access policy denies it on ``names``);
        ``None`` when no target is left."""
        kept = {name: route for name, route in self._routes.items() if name not in names}
        return TargetedTool(self.inner, kept, default=self._default) if kept else None

    # -- the Tool protocol --------------------------------------------------------------------

    def execute(self, arguments: str, *, timeout: float) -> ToolResult:
        resolved = self._resolve(arguments)
        if isinstance(resolved, str):
            return error_result(resolved)
        result = resolved.route.execute(resolved.arguments, timeout=timeout)
        return _attributed(result, resolved.target)

    def preview(self, arguments: str, *, timeout: float) -> ToolResult | None:
        resolved = self._resolve(arguments)
        if isinstance(resolved, str):
            return error_result(resolved)
        result = resolved.route.preview(resolved.arguments, timeout=timeout)
        return _attributed(result, resolved.target) if result is not None else None

    def describe(self, arguments: str) -> str | None:
        resolved = self._resolve(arguments)
        if isinstance(resolved, str):
            return None
        command = describe_call(resolved.route, resolved.arguments)
        return f"on {resolved.target.name}: {command}" if command else None

    def category_for(self, arguments: str) -> CallCategory:
        resolved = self._resolve(arguments)
        if isinstance(resolved, str):
            return CallCategory(self.inner.category)
        return call_category(resolved.route, resolved.arguments)

    def refusal(self, arguments: str) -> str | None:
        """An unknown, missing or unreachable target: nobody is asked to approve the call."""
        resolved = self._resolve(arguments)
        if isinstance(resolved, str):
            return resolved
        return call_refusal(resolved.route, resolved.arguments)

    def verification_of(self, arguments: str) -> Verification | None:
        """The target's own tool's declaration (a Kubernetes target's restart declares a rollout
        check, not a systemd unit's), else the base tool's (a runner's proxy has none: the runner
        derives the same from its own tool and refuses a grant that signed another, bot.fleet.grants),
        its calls on the call's target, and a restart's check also requesting the service's health
        URL where the target's inventory entry gives one (the runner adds the same from its own)."""
        resolved = self._resolve(arguments)
        if isinstance(resolved, str):
            return None
        local = arguments_without(arguments, (TARGET_ARGUMENT,))
        found = None
        for tool in (resolved.route, self.inner):
            verification_of = getattr(tool, "verification_of", None)
            found = verification_of(local) if verification_of is not None else None
            if isinstance(found, Verification):
                break
        if not isinstance(found, Verification):
            return None
        found = restart_health(
            found, self.inner.definition.name, checked_arguments(arguments), resolved.target.health
        )
        return found.on_target({TARGET_ARGUMENT: resolved.target.name}) if found is not None else None

    def target_of(self, arguments: str) -> CallTarget | None:
        resolved = self._resolve(arguments)
        if isinstance(resolved, str):
            return None
        target = resolved.target
        return CallTarget(target.name, target.via, tuple(sorted(target.labels.items())))

    # -- resolution -----------------------------------------------------------------------------

    def _resolve(self, arguments: str) -> Resolved | str:
        """The call's target and route, and what the route receives; or why there is none. Every
        part of one call asks: the parse and the route's arguments are worked out once per text."""
        tool = self.inner.definition.name
        try:
            parsed = checked_arguments(arguments)
        except ArgumentsRejected as error:
            return f"invalid arguments for {tool}: {error}"
        name = parsed.get(TARGET_ARGUMENT, self._default)
        if name is None:
            return f"{tool} needs a target: one of {self._listed()}. Ask in the thread which one is meant."
        if not isinstance(name, str) or name not in self._routes:
            shown = name if isinstance(name, str) else json.dumps(name)
            return (
                f"no such target {shown[:80]!r} for {tool}; the targets are "
                f"{self._listed()}. Ask in the thread which one is meant; never guess."
            )
        target, route = self._routes[name]
        if getattr(route, "receives_target", False):
            return Resolved(target, route, arguments)
        return Resolved(target, route, arguments_without(arguments, (TARGET_ARGUMENT,)))

    def _listed(self) -> str:
        return ", ".join(self._routes)


def _with_target(
    definition: ToolDef, routes: Mapping[str, tuple[Target, Tool]], default: str | None
) -> ToolDef:
    """The definition with a ``target`` argument listing the targets (name and labels)."""
    parameters: dict[str, Any] = json.loads(json.dumps(definition.parameters))
    listed = "; ".join(target.describe() for target, _ in routes.values())
    text = f"Where to run it: {listed}."
    if default is not None:
        text += f" Default in this channel: {default}."
    properties = {TARGET_ARGUMENT: {"type": "string", "enum": list(routes), "description": text}}
    properties.update(parameters.get("properties", {}))
    parameters["properties"] = properties
    if default is None:
        parameters["required"] = [TARGET_ARGUMENT, *parameters.get("required", [])]
    return ToolDef(name=definition.name, description=definition.description, parameters=parameters)


def _attributed(result: ToolResult, target: Target) -> ToolResult:
    """The result, saying where it ran: the model reads ``[web-03] ...`` for each of many targets."""
    output = f"[{target.name}] {result.output}"
    if result.output.startswith(f"Error: target {target.name} "):
        output = result.output  # it names its target already ("Error: target web-03 is unreachable ...")
    elif result.is_error and result.output.startswith("Error: "):
        output = f"Error: [{target.name}] {result.output.removeprefix('Error: ')}"
    stable = result.stable_output
    return dataclasses.replace(
        result,
        output=output,
        stable_output=f"[{target.name}] {stable}" if stable is not None else None,
        target=target.name,
        executor=result.executor or local_executor(),
    )
