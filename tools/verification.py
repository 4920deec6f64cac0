"""How a tool declares its check, its before-read and its undo (issue 34), and their load-time rules.

A declaration names other tools with templated arguments: ``{args.X}`` is the action's argument
``X``; ``{before.X}`` (an undo's only) is field ``X`` of the JSON object ``before`` printed just
before the action ran, filled in when the undo is asked for. A template that is exactly one
placeholder keeps the value's type (``replicas: "{args.replicas}"`` stays an integer); anything
else is text, rendered by ``tools.catalog.templates`` (a value is text in its slot, never re-parsed).

``Declared.derive(arguments)`` is the ``agent.verification.Verification`` of one call: the card
shows it, the approval binds it, the loop runs its check. ``declaration_problems`` checks a
declaration against the registry: the named tools exist, a check and a before-read are read-only,
an undo changes something, every ``{args.X}`` is a parameter of the action.
"""

from __future__ import annotations

import json
from collections.abc import Collection, Iterator, Mapping
from dataclasses import dataclass, field
from typing import Any

from agent.arguments import canonical_arguments
from agent.tooling import Tool, ToolCategory
from agent.verification import PlannedCall, Verification
from tools.templating import dotted_placeholders, render_dotted

ArgValue = bool | int | float | str
_ACTION_ROOTS = ("args",)
_UNDO_ROOTS = ("args", "before")


@dataclass(frozen=True)
class Check:
    """A read-only call whose success (and, with ``expect``, output) says the action worked."""

    tool: str
    args: Mapping[str, ArgValue] = field(default_factory=dict)
    expect: str | None = None
    expect_absent: str | None = None
    active_since_action: bool = False


@dataclass(frozen=True)
class Before:
    """A read-only call run just before the action; its JSON object output is ``{before.X}``."""

    tool: str
    args: Mapping[str, ArgValue] = field(default_factory=dict)


@dataclass(frozen=True)
class Undo:
    """The call that takes the action back (arguments from ``{args.X}`` and ``{before.X}``)."""

    tool: str
    args: Mapping[str, ArgValue] = field(default_factory=dict)


@dataclass(frozen=True)
class NoUndo:
    """The action cannot be taken back; the card says why."""

    reason: str


@dataclass(frozen=True)
class Declared:
    """What one tool declares; ``derive`` gives a call's ``Verification``."""

    check: Check | None = None
    before: Before | None = None
    undo: Undo | NoUndo | None = None

    def derive(self, arguments: Mapping[str, Any]) -> Verification:
        """The verification of a call with these (validated) ``arguments``."""
        values = {"args": {name: value for name, value in arguments.items() if value is not None}}
        check = before = undo = None
        if self.check is not None:
            expect = _text(self.check.expect, values) if self.check.expect is not None else None
            check = PlannedCall(
                self.check.tool,
                _arguments(self.check.args, values),
                expect=expect,
                expect_absent=self.check.expect_absent,
                active_since_action=self.check.active_since_action,
            )
        if self.before is not None:
            before = PlannedCall(self.before.tool, _arguments(self.before.args, values))
        no_undo = None
        if isinstance(self.undo, Undo):
            undo = PlannedCall(self.undo.tool, _arguments(self.undo.args, values))
        elif isinstance(self.undo, NoUndo):
            no_undo = self.undo.reason
        return Verification(check=check, before=before, undo=undo, no_undo=no_undo)


def declaration_problems(
    declared: Declared, action: Tool, params: Collection[str], tools: Mapping[str, Tool]
) -> Iterator[tuple[str, str]]:
    """(field, message) for each rule ``declared`` breaks as a declaration of ``action``."""
    if declared.check is not None:
        yield from _call_problems("check", declared.check.tool, declared.check.args, params, tools, False)
        if declared.check.expect is not None:
            yield from _template_problems("check.expect", declared.check.expect, _ACTION_ROOTS, params)
    if declared.before is not None:
        yield from _call_problems("before", declared.before.tool, declared.before.args, params, tools, False)
    if isinstance(declared.undo, Undo):
        yield from _call_problems("undo", declared.undo.tool, declared.undo.args, params, tools, True)
        uses_before = any(
            root == "before"
            for value in declared.undo.args.values()
            if isinstance(value, str)
            for root, _ in _safe_placeholders(value, _UNDO_ROOTS)
        )
        if uses_before and declared.before is None:
            yield "undo.args", "{before.<field>} needs a before: call whose output is a JSON object"
    if not action.category.requires_confirmation:
        yield "check", f"{action.definition.name} is read_only: only a change declares a check or an undo"


def _call_problems(
    where: str,
    name: str,
    args: Mapping[str, ArgValue],
    params: Collection[str],
    tools: Mapping[str, Tool],
    changes: bool,
) -> Iterator[tuple[str, str]]:
    tool = tools.get(name)
    if tool is None:
        yield f"{where}.tool", f"no tool named {name!r} (built-in or catalog)"
        return
    if changes and not tool.category.requires_confirmation:
        yield f"{where}.tool", f"{name} is read_only: an undo must be a mutating or destructive tool"
    if not changes and tool.category is not ToolCategory.READ_ONLY:
        yield f"{where}.tool", f"{name} is {tool.category.value}: a {where} must be a read_only tool"
    known = set(tool.definition.parameters.get("properties", {}))
    roots = _UNDO_ROOTS if changes else _ACTION_ROOTS
    for key, value in args.items():
        if key not in known:
            yield (
                f"{where}.args.{key}",
                f"{name} has no parameter {key!r} (it has: {', '.join(sorted(known))})",
            )
        if isinstance(value, str):
            yield from _template_problems(f"{where}.args.{key}", value, roots, params)


def _template_problems(
    where: str, template: str, roots: tuple[str, ...], params: Collection[str]
) -> Iterator[tuple[str, str]]:
    try:
        found = dotted_placeholders(template, roots)
    except ValueError as exc:
        yield where, str(exc)
        return
    for root, name in found:
        if root == "args" and name not in params:
            declared = ", ".join(sorted(params)) or "none"
            yield where, f"{{args.{name}}} is not a parameter of the action (its parameters: {declared})"


def _safe_placeholders(template: str, roots: tuple[str, ...]) -> list[tuple[str, str]]:
    try:
        return dotted_placeholders(template, roots)
    except ValueError:
        return []


def _arguments(args: Mapping[str, ArgValue], values: Mapping[str, Mapping[str, Any]]) -> str:
    rendered: dict[str, Any] = {}
    for key, value in args.items():
        if not isinstance(value, str):
            rendered[key] = value
            continue
        single = _single(value)
        if single is not None and single[0] in values:
            found = values[single[0]].get(single[1])
            if found is None:
                continue  # an optional argument the action left out: the derived call leaves it out too
            rendered[key] = found
        else:
            rendered[key] = _text(value, values)
    return canonical_arguments(rendered)


def _text(template: str, values: Mapping[str, Mapping[str, Any]]) -> str:
    return render_dotted(template, {root: _texts(found) for root, found in values.items()})


def _texts(values: Mapping[str, Any]) -> dict[str, str]:
    return {
        name: value if isinstance(value, str) else json.dumps(value)
        for name, value in values.items()
        if value is not None
    }


def _single(template: str) -> tuple[str, str] | None:
    """(root, field) when ``template`` is exactly one ``{root.field}``."""
    if not (template.startswith("{") and template.endswith("}")) or template.count("{") != 1:
        return None
    root, dot, name = template[1:-1].partition(".")
    return (root, name) if dot and root in _UNDO_ROOTS and name.isidentifier() else None


HEALTH_CHECKED: Mapping[str, str] = {"service_restart": "service"}
"""The tools whose check also requests the inventory's health URL of a service, and the argument
that names the service (``Target.health``)."""


def restart_health(
    verification: Verification | None, tool: str, arguments: Mapping[str, Any], health: Mapping[str, str]
) -> Verification | None:
    """``verification`` with the health URL the target's inventory entry gives the service the
    call acts on (``tools.inventory_types.Target.health``; ``foo`` and ``foo.service`` are one
    unit), else as it is. The URL comes from the operator's inventory, never from the call: the
    call only names the service, and the egress policy still decides whether it may be requested."""
    key = HEALTH_CHECKED.get(tool)
    service = arguments.get(key) if key is not None else None
    if verification is None or not isinstance(service, str) or not health:
        return verification
    bare = service.removesuffix(".service")
    url = health.get(service) or health.get(bare) or health.get(f"{bare}.service")
    return verification.with_health(url) if url is not None else verification
