"""The rules of a catalog tool that a schema alone cannot say; each problem names its field."""

from __future__ import annotations

import re
from collections.abc import Collection, Iterator, Mapping

from pydantic import TypeAdapter, ValidationError

from agent.tooling import ToolCategory
from tools.base import CONFIRMED_BY
from tools.catalog.params import param_annotation
from tools.catalog.spec import HttpSpec, ParamSpec, ToolSpec
from tools.catalog.templates import check_template, expand_env_in_template, is_single_placeholder
from tools.env_references import env_references
from tools.targets import TARGET_ARGUMENT

Problem = tuple[str, str]
"""(field, message), e.g. ``("run[0]", "the program must be fixed text")``."""

_TOOL_NAME = re.compile(r"[A-Za-z0-9_-]{1,64}")
_PARAM_NAME = re.compile(r"[a-z_][a-z0-9_]*")
_HEADER_NAME = re.compile(r"[A-Za-z0-9-]+")


def check_tool(spec: ToolSpec, env: Mapping[str, str]) -> list[Problem]:
    """Every rule broken by ``spec``; an empty list means it can be built."""
    problems: list[Problem] = []
    if not _TOOL_NAME.fullmatch(spec.name):
        problems.append(("name", "must be 1-64 letters, digits, '_' or '-'"))
    if (spec.run is None) == (spec.http is None):
        problems.append(("run", "give exactly one of run (an argv list) or http"))
    if spec.parallel and spec.category is not ToolCategory.READ_ONLY:
        problems.append(("parallel", "only read_only tools may run in parallel"))
    if spec.category is ToolCategory.DESTRUCTIVE and spec.dry_run is None:
        problems.append(("dry_run", "a destructive tool needs a dry_run (argv or http) to show the approver"))
    if spec.dry_run is not None and spec.category is not ToolCategory.DESTRUCTIVE:
        problems.append(("dry_run", "only destructive tools have a dry run"))
    problems.extend(_check_placement(spec))
    problems.extend(_check_declared(spec))
    if "ssh" in spec.targets and spec.run is None:
        problems.append(("targets", "ssh runs argv commands: only a run: tool can target ssh (not http)"))
    for name, param in spec.params.items():
        problems.extend(_check_param(name, param))
    if TARGET_ARGUMENT in spec.params and (spec.run is not None or spec.override):
        # A run: tool (or a built-in's override) is routed by target with an inventory.
        problems.append(
            (
                f"params.{TARGET_ARGUMENT}",
                f"{TARGET_ARGUMENT} is reserved: with an inventory, each call of a tool that acts on a "
                "machine names the target it runs on in it; rename the parameter",
            )
        )
    declared = set(spec.params)
    approved = declared | {CONFIRMED_BY} if spec.category.requires_confirmation else declared
    if spec.run is not None:
        problems.extend(_check_argv("run", spec.run, approved))
    if spec.http is not None:
        problems.extend(_check_http("http", spec.http, approved, env))
    if isinstance(spec.dry_run, list):
        problems.extend(_check_argv("dry_run", spec.dry_run, declared))
    elif isinstance(spec.dry_run, HttpSpec):
        problems.extend(_check_http("dry_run", spec.dry_run, declared, env))
    return problems


def _check_declared(spec: ToolSpec) -> Iterator[Problem]:
    """``before``/``check``/``undo``/``no_undo`` belong to a change; an undo or a reason, not both.
    What they name is checked against the registry (``tools.verification.declaration_problems``)."""
    if not spec.category.requires_confirmation:
        for key in ("before", "check", "undo", "no_undo"):
            if getattr(spec, key) is not None:
                yield key, f"only a mutating or destructive tool declares {key} (this one is read_only)"
    if spec.undo is not None and spec.no_undo is not None:
        yield "no_undo", "give undo (how to take the change back) or no_undo (why it cannot be), not both"


def _check_placement(spec: ToolSpec) -> Iterator[Problem]:
    """A claim that contradicts what the tool does: its commands run on the target, its requests
    leave from the worker (``tools.placement``); nothing here moves a command into the worker."""
    if spec.placement == "worker" and spec.run is not None:
        yield (
            "placement",
            "a run: tool runs its command on the call's target (its targets: kinds), never in the worker; "
            "leave placement out, or use an http: block for a tool that only calls an API",
        )
    if spec.placement == "target" and spec.http is not None:
        yield (
            "placement",
            "an http: tool's request leaves from the worker through the egress policy: it has no target "
            "to run on; leave placement out, or use a run: command for a tool that acts on a machine",
        )


def _check_param(name: str, param: ParamSpec) -> Iterator[Problem]:
    field = f"params.{name}"
    if not _PARAM_NAME.fullmatch(name):
        yield field, "a parameter name must be lower-case letters, digits and '_'"
    if name == CONFIRMED_BY:
        yield field, "confirmed_by is reserved: it is set to the approver's Slack user ID"
    if param.pattern is not None:
        if param.type != "string":
            yield f"{field}.pattern", "pattern is only for string parameters"
        try:
            re.compile(param.pattern)
        except re.error as exc:
            yield f"{field}.pattern", f"not a valid regular expression: {exc}"
            return
    if param.type not in ("integer", "number") and (param.minimum is not None or param.maximum is not None):
        yield f"{field}.minimum", "minimum/maximum are only for integer and number parameters"
    if param.minimum is not None and param.maximum is not None and param.minimum > param.maximum:
        yield f"{field}.minimum", "minimum is greater than maximum"
    for value in param.enum or []:
        if not _has_type(value, param.type):
            yield f"{field}.enum", f"{value!r} is not a {param.type}"
    if param.default is not None:
        try:
            TypeAdapter(param_annotation(param, in_argv=False)).validate_python(param.default)
        except ValidationError as exc:
            yield f"{field}.default", f"{param.default!r} is not a valid value: {exc.errors()[0]['msg']}"


def _has_type(value: object, kind: str) -> bool:
    if kind == "boolean":
        return isinstance(value, bool)
    if isinstance(value, bool):
        return False
    if kind == "integer":
        return isinstance(value, int)
    if kind == "number":
        return isinstance(value, int | float)
    return isinstance(value, str)


def _check_argv(field: str, argv: list[str], allowed: set[str]) -> Iterator[Problem]:
    for index, element in enumerate(argv):
        try:
            names = _check_template(element, allowed, field)
        except ValueError as exc:
            yield f"{field}[{index}]", str(exc)
            continue
        if index == 0 and names:
            yield f"{field}[0]", "the program must be fixed text, not a placeholder"


def _check_http(field: str, http: HttpSpec, allowed: set[str], env: Mapping[str, str]) -> Iterator[Problem]:
    try:
        _check_template(http.url, allowed, field)
    except ValueError as exc:
        yield f"{field}.url", str(exc)
    if is_single_placeholder(http.url) is None and not http.url.startswith(("http://", "https://")):
        yield f"{field}.url", "must start with http:// or https:// (or be a single {param})"
    for header, value in http.headers.items():
        where = f"{field}.headers.{header}"
        if not _HEADER_NAME.fullmatch(header):
            yield where, "not a valid header name"
        missing = [name for name in env_references(value) if name not in env]
        if missing:
            yield where, f"environment variable {missing[0]} is not set"
            continue
        try:
            _check_template(expand_env_in_template(value, env), allowed, field)
        except ValueError as exc:
            yield where, str(exc)
    for key, value in _json_strings(http.json_body or {}, f"{field}.json"):
        try:
            _check_template(value, allowed, field)
        except ValueError as exc:
            yield key, str(exc)
    statuses = http.expect_status if isinstance(http.expect_status, list) else [http.expect_status]
    if any(status is not None and not 100 <= status <= 599 for status in statuses):
        yield f"{field}.expect_status", "an HTTP status is between 100 and 599"


def _check_template(template: str, allowed: Collection[str], field: str) -> list[str]:
    try:
        return check_template(template, allowed)
    except ValueError:
        if CONFIRMED_BY in _names_loosely(template) and CONFIRMED_BY not in allowed:
            when = (
                "a dry run runs before approval" if field == "dry_run" else "read_only tools are not approved"
            )
            raise ValueError(f"{{{CONFIRMED_BY}}} is only set for approved calls ({when})") from None
        raise


def _names_loosely(template: str) -> list[str]:
    return re.findall(r"\{([A-Za-z_][A-Za-z0-9_]*)\}", template)


def _json_strings(value: object, path: str) -> Iterator[tuple[str, str]]:
    """Every string inside a JSON body, with its field path."""
    if isinstance(value, str):
        yield path, value
    elif isinstance(value, dict):
        for key, item in value.items():
            yield from _json_strings(item, f"{path}.{key}")
    elif isinstance(value, list):
        for index, item in enumerate(value):
            yield from _json_strings(item, f"{path}[{index}]")


def check_clashes(
    specs: list[ToolSpec], builtin_names: Collection[str], path: str
) -> Iterator[tuple[str, str, str]]:
    """(tool, field, message) for duplicate catalog names and unannounced clashes with built-ins."""
    seen: dict[str, int] = {}
    for index, spec in enumerate(specs):
        if spec.name in seen:
            yield spec.name, "name", f"tool #{index + 1} has the same name as tool #{seen[spec.name] + 1}"
            continue
        seen[spec.name] = index
        if spec.name in builtin_names and not spec.override:
            yield (
                spec.name,
                "name",
                f"catalog tool {spec.name!r} ({path}) clashes with the built-in tool {spec.name!r}; "
                "set 'override: true' on it to replace the built-in",
            )
        if spec.override and spec.name not in builtin_names:
            yield spec.name, "override", f"there is no built-in tool named {spec.name!r} to override"
