"""``chatops tools list [--json]``: every tool the model is offered, its category and where it came from.

Origin is ``built-in``, the catalog file (``CHATOPS_TOOLS_FILE``), the catalog file overriding a
built-in of the same name, or an MCP server (with why its category; a server bound to an
inventory target says which: its tools are offered only for that target). A catalog with
mistakes prints them (file, tool, field) and exits 1.
"""

from __future__ import annotations

import argparse
import json
import sys
from dataclasses import asdict, dataclass

from agent.tooling import Tool
from bot.settings import Settings
from tools.builtin import builtin_tools
from tools.catalog import load_catalog
from tools.config import ToolsConfig
from tools.errors import ToolConfigError
from tools.registry import build_registry

BUILT_IN = "built-in"


@dataclass(frozen=True)
class ToolRow:
    name: str
    category: str
    parallel: bool
    timeout: float
    origin: str
    description: str
    target: str = ""  # an MCP server bound to one inventory target (``target:``): only there


def _origin(tool: Tool, from_catalog: dict[str, str]) -> str:
    """Built in, a catalog tool (its file), or an MCP server's (its name, and why its category)."""
    server = getattr(tool, "server", None)
    if isinstance(server, str):
        decision = getattr(tool, "decision", None)
        reason = getattr(decision, "reason", "")
        return f"MCP server {server}" + (f" ({reason})" if reason else "")
    return from_catalog.get(tool.definition.name, BUILT_IN)


def tool_rows(settings: Settings) -> list[ToolRow]:
    """The registry as the worker builds it, each tool with its origin (raises ``ToolConfigError``)."""
    config = ToolsConfig.from_settings(settings)
    registry = build_registry(config)
    from_catalog: dict[str, str] = {}
    if config.tools_file is not None:
        builtin = {tool.definition.name for tool in builtin_tools(config)}
        catalog = load_catalog(
            config.tools_file,
            env=config.environment(),
            command_env=config.command_env(),
            builtin_names=builtin,
        )
        for tool in catalog.tools:
            name = tool.definition.name
            overrides = " (overrides the built-in)" if name in catalog.overrides else ""
            from_catalog[name] = f"{config.tools_file}{overrides}"
    everywhere = [(tool, "") for tool in registry.tools()]
    bound = [(tool, target) for target, tools in registry.mcp.by_target.items() for tool in tools]
    return [
        ToolRow(
            name=tool.definition.name,
            category=tool.category.value,
            parallel=tool.parallel,
            timeout=tool.timeout,
            origin=_origin(tool, from_catalog) + (f", only on target {target}" if target else ""),
            description=" ".join(tool.definition.description.split()),
            target=target,
        )
        for tool, target in [*everywhere, *bound]
    ]


def format_rows(rows: list[ToolRow]) -> str:
    width = max([len(r.name) for r in rows] + [4])
    lines = [f"{'TOOL':<{width}}  {'CATEGORY':<11}  ORIGIN"]
    lines += [f"{r.name:<{width}}  {r.category:<11}  {r.origin}" for r in rows]
    return "\n".join(lines)


def configure_cli(parser: argparse.ArgumentParser) -> None:
    actions = parser.add_subparsers(dest="action", required=True, metavar="ACTION")
    listing = actions.add_parser(
        "list", help="each tool: name, category, origin (built-in or the catalog file)"
    )
    listing.add_argument("--json", action="store_true", help="one JSON object per tool, with its description")


def run_cli(args: argparse.Namespace, settings: Settings) -> int:
    try:
        rows = tool_rows(settings)
    except ToolConfigError as error:
        print(f"error: the tools cannot be loaded:\n{error}", file=sys.stderr)
        return 1
    if args.json:
        for row in rows:
            print(json.dumps(asdict(row)))
    else:
        print(format_rows(rows))
    return 0
