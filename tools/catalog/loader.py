"""Load ``CHATOPS_TOOLS_FILE``: all tools or none, every mistake named by file, tool and field.

The ``Catalog`` keeps the checked specs next to the tools built from them (for this host), so a
tool can be built again for a target: ``catalog.build_for_runner(catalog.specs[name], runner.run)``
gives the same tool (same name, schema, category and approval card) whose argv runs through
``runner`` (an ``SshRunner`` for an ``ssh`` target), with the environment and egress policy the
catalog was loaded with.
"""

from __future__ import annotations

import difflib
import re
from collections.abc import Collection, Mapping
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

import yaml
from pydantic import ValidationError

from tools.base import FunctionTool
from tools.catalog.build import build_tool, secret_values
from tools.catalog.checks import check_clashes, check_tool
from tools.catalog.spec import CheckSpec, HttpSpec, ParamSpec, TargetKind, ToolSpec
from tools.egress import EgressPolicy
from tools.errors import CatalogError, ToolConfigError
from tools.mcp.config import McpServer, parse_mcp_servers
from tools.process import CommandRunner

_KNOWN_KEYS = sorted(
    {*ToolSpec.model_fields, *ParamSpec.model_fields, *HttpSpec.model_fields, *CheckSpec.model_fields, "json"}
    - {"json_body"}
)
# Tags pydantic adds to error locations for the members of a union (after a union field or a
# list index); they are not field names.
_UNION_TAGS = {"list[str]", "HttpSpec", "str", "int", "float", "bool", "list[int]"}
_TOP_KEYS = ["tools", "mcp_servers"]
_UNION_FIELDS = {"dry_run", "default", "enum", "expect_status", "minimum", "maximum"}


@dataclass
class Catalog:
    """The tools of one catalog file, and what the registry needs to know about them."""

    path: Path
    tools: list[FunctionTool[Any]] = field(default_factory=list)
    overrides: set[str] = field(default_factory=set)
    """Names of built-in tools these tools replace (each with ``override: true``)."""
    secret_values: list[str] = field(default_factory=list)
    """Header values read from the environment, to redact from every output."""
    specs: dict[str, ToolSpec] = field(default_factory=dict)
    """The checked spec of every tool, by name, to build it again for a target."""
    env: Mapping[str, str] = field(default_factory=dict, repr=False)
    command_env: Mapping[str, str] = field(default_factory=dict, repr=False)
    egress: EgressPolicy = field(default_factory=EgressPolicy, repr=False)
    mcp_servers: list[McpServer] = field(default_factory=list)
    """The checked ``mcp_servers:`` entries (``tools.mcp``); their tools are built by the registry."""
    show_elapsed: bool = True
    """``CHATOPS_TOOL_ELAPSED``: a command's result says how long it ran."""

    def specs_for(self, target: TargetKind) -> list[ToolSpec]:
        """The specs whose ``targets`` list ``target`` (e.g. ``"ssh"``), in catalog order."""
        return [spec for spec in self.specs.values() if target in spec.targets]

    def build_for_runner(self, spec: ToolSpec, command_runner: CommandRunner) -> FunctionTool[Any]:
        """``spec``'s tool with its ``run``/``dry_run`` argv run by ``command_runner``.

        The caller picks a spec that lists the target's kind (``specs_for``); an ``http`` tool
        ignores the runner (its requests leave from this host, under the catalog's egress policy).
        """
        return build_tool(
            spec,
            env=self.env,
            command_env=self.command_env,
            egress=self.egress,
            command_runner=command_runner,
            show_elapsed=self.show_elapsed,
        )


def load_catalog(
    path: Path,
    *,
    env: Mapping[str, str],
    command_env: Mapping[str, str] | None = None,
    builtin_names: Collection[str] = (),
    egress: EgressPolicy | None = None,
    show_elapsed: bool = True,
) -> Catalog:
    """Read, check and build every tool of ``path``; raises ``CatalogError`` listing each problem.

    ``env`` resolves ``${NAME}`` in headers; ``command_env`` is the environment of ``run`` commands;
    ``egress`` is what ``http`` tools may reach besides their own fixed host (default: nothing).
    """
    where = str(path)
    data = _read_yaml(path)
    specs, problems = _parse_specs(data, where)
    servers, server_problems = parse_mcp_servers(
        data.get("mcp_servers") if isinstance(data, dict) else None, env
    )
    problems.extend(server_problems)
    for name, field_name, message in check_clashes(specs, builtin_names, where):
        problems.append(_problem(name, field_name, message))
    for spec in specs:
        problems.extend(_problem(spec.name, name, message) for name, message in check_tool(spec, env))
    if problems:
        raise CatalogError(where, problems)
    catalog = Catalog(
        path=path,
        env=env,
        command_env=command_env or env,
        egress=egress or EgressPolicy(),
        show_elapsed=show_elapsed,
    )
    catalog.mcp_servers = servers
    for spec in specs:
        try:
            catalog.tools.append(
                build_tool(
                    spec,
                    env=catalog.env,
                    command_env=catalog.command_env,
                    egress=catalog.egress,
                    show_elapsed=show_elapsed,
                )
            )
        except (ToolConfigError, ValueError, TypeError) as exc:  # the checks above should prevent these
            raise CatalogError(where, [_problem(spec.name, "(tool)", str(exc))]) from exc
        catalog.specs[spec.name] = spec
        catalog.secret_values.extend(secret_values(spec, env))
        if spec.override:
            catalog.overrides.add(spec.name)
    return catalog


def load_mcp_servers(path: Path, *, env: Mapping[str, str]) -> list[McpServer]:
    """Only the checked ``mcp_servers:`` of ``path``: what a forking worker needs to share their
    sessions with its work horses. Its tools are checked where they are built, in every job, with
    the built-in names they may override (which a check here, without them, would call unknown)."""
    data = _read_yaml(path)
    servers, problems = parse_mcp_servers(data.get("mcp_servers") if isinstance(data, dict) else None, env)
    if problems:
        raise CatalogError(str(path), problems)
    return servers


def _problem(tool: str, field_name: str, message: str) -> str:
    return f"tool {tool!r}, field {field_name!r}: {message}"


def _read_yaml(path: Path) -> Any:
    try:
        text = path.read_text(encoding="utf-8")
    except OSError as exc:
        raise CatalogError(str(path), [f"cannot read the file: {exc.strerror or exc}"]) from exc
    try:
        return yaml.safe_load(text)
    except yaml.YAMLError as exc:
        raise CatalogError(str(path), [_describe_yaml_error(exc, text)]) from exc


def _describe_yaml_error(exc: yaml.YAMLError, text: str) -> str:
    mark = getattr(exc, "problem_mark", None)
    problem = getattr(exc, "problem", None) or str(exc)
    if mark is None:
        return f"invalid YAML: {problem}"
    # The construct that broke (e.g. an unclosed "[") starts at the context mark, when there is one.
    context = getattr(exc, "context_mark", None) or mark
    lines = text.splitlines()[: context.line + 1]
    tool = _last_match(lines, r"^\s*-\s*name:\s*[\"']?([^\"'\s#,}]+)")
    key = _last_match(lines, r"^\s*(?:-\s*)?([A-Za-z_][\w-]*)\s*:")
    where = f"tool {tool!r}" if tool else "before the first tool"
    near = f", field {key!r}" if key else ""
    started = f", opened at line {context.line + 1}" if context is not mark else ""
    return (
        f"invalid YAML at line {mark.line + 1}, column {mark.column + 1} ({where}{near}{started}): {problem}"
    )


def _last_match(lines: list[str], pattern: str) -> str | None:
    for line in reversed(lines):
        match = re.match(pattern, line)
        if match:
            return match.group(1)
    return None


def _parse_specs(data: Any, where: str) -> tuple[list[ToolSpec], list[str]]:
    if data is None:
        return [], ["the file is empty; expected a top-level 'tools:' list"]
    if not isinstance(data, dict):
        return [], ["the top level must be a mapping with a 'tools:' list"]
    problems = [
        f"field {key!r}: unknown top-level key (only 'tools' and 'mcp_servers')"
        + (
            f" (did you mean {close[0]!r}?)"
            if (close := difflib.get_close_matches(str(key), _TOP_KEYS, n=1))
            else ""
        )
        for key in data
        if key not in _TOP_KEYS
    ]
    raw_tools = data.get("tools")
    if raw_tools is None and "mcp_servers" in data:
        return [], problems  # a catalog of MCP servers only
    if not isinstance(raw_tools, list):
        return [], [*problems, "field 'tools': must be a list of tools"]
    specs = []
    for index, raw in enumerate(raw_tools):
        label = _tool_label(raw, index)
        if not isinstance(raw, dict):
            problems.append(f"tool {label}: must be a mapping of keys (name, description, category...)")
            continue
        try:
            specs.append(ToolSpec.model_validate(raw))
        except ValidationError as exc:
            problems.extend(_problem(label, name, message) for name, message in _describe_errors(exc))
    return specs, problems


def _tool_label(raw: Any, index: int) -> str:
    if isinstance(raw, dict) and isinstance(raw.get("name"), str):
        return str(raw["name"])
    return f"#{index + 1}"


def _describe_errors(exc: ValidationError) -> list[tuple[str, str]]:
    """(field, message) per bad field; union alternatives of one field are merged."""
    by_field: dict[str, list[str]] = {}
    for error in exc.errors():
        parts = _without_union_tags(list(error["loc"]))
        name = _field_path(parts)
        if error["type"] == "extra_forbidden":
            key = str(parts[-1])
            close = difflib.get_close_matches(key, _KNOWN_KEYS, n=1)
            message = f"unknown key {key!r}" + (f" (did you mean {close[0]!r}?)" if close else "")
        elif error["type"] == "missing":
            message = "required key is missing"
        elif error["type"] == "literal_error" and isinstance(error.get("input"), str):
            allowed = re.findall(r"'([^']*)'", str((error.get("ctx") or {}).get("expected", "")))
            close = difflib.get_close_matches(error["input"], allowed, n=1)
            message = error["msg"] + (f" (did you mean {close[0]!r}?)" if close else "")
        else:
            message = error["msg"]
        by_field.setdefault(name, [])
        if message not in by_field[name]:
            by_field[name].append(message)
    return [(name, " or ".join(messages[:2])) for name, messages in by_field.items()]


def _without_union_tags(loc: list[Any]) -> list[Any]:
    kept: list[Any] = []
    for part in loc:
        after_union = bool(kept) and (isinstance(kept[-1], int) or kept[-1] in _UNION_FIELDS)
        if not (after_union and part in _UNION_TAGS):
            kept.append(part)
    return kept


def _field_path(parts: list[Any]) -> str:
    text = ""
    for part in parts:
        text += f"[{part}]" if isinstance(part, int) else (f".{part}" if text else str(part))
    return text or "(tool)"
