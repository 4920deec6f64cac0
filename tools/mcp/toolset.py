"""Build the MCP tools of a run: list each server's tools, filter, name, check, categorize.

Called when the registry is built (per job in the worker); a run keeps the list its first segment
was offered (``bot.runs.run_tools``), so a server's changed list is picked up by the next run. A server that
cannot be listed now offers its last known list (its tools answer ``unavailable`` until it is
back); one never listed in this process offers nothing, with an error in the log. A server tool
whose name or schema cannot be offered (``tools.mcp.schemas``: on a server bound to a target, a
schema with its own ``target`` too) is skipped with a warning naming server, tool and reason;
two offered names that collide (with each other, or with built-in and catalog tools) are a
start-up error naming both.
"""

from __future__ import annotations

import fnmatch
import logging
from collections.abc import Collection, Sequence

import mcp_types

from tools.errors import McpToolsetError, McpUnavailableError
from tools.mcp.adapter import McpTool
from tools.mcp.categories import decide
from tools.mcp.config import McpServer
from tools.mcp.listing import McpToolset, ServerStatus
from tools.mcp.pool import Connection, Pool
from tools.mcp.schemas import SchemaProblem, checked_schema, offered_name

__all__ = ["McpToolset", "ServerStatus", "build_toolset"]

log = logging.getLogger(__name__)


def build_toolset(servers: Sequence[McpServer], pool: Pool, taken: Collection[str] = ()) -> McpToolset:
    """The tools of ``servers`` (``taken``: names of built-in and catalog tools, for collisions)."""
    toolset = McpToolset()
    owners: dict[str, str] = {name: f"tool {name!r} (built-in or catalog)" for name in taken}
    for server in servers:
        toolset.secret_values.extend(server.secret_values)
        connection = pool.connection(server)
        listed, error = _listing(connection)
        offered, skipped = [], []
        for remote in listed:
            if not _selected(server, remote.name):
                continue
            try:
                tool = _adapt(connection, remote)
            except SchemaProblem as exc:
                skipped.append(f"{remote.name}: {exc}")
                log.warning("MCP server %s: tool %r is not offered: %s", server.name, remote.name, exc)
                continue
            name = tool.definition.name
            owner = f"tool {remote.name!r} of MCP server {server.name!r}"
            if name in owners:
                raise McpToolsetError(f"{owner} and {owners[name]} are both offered as {name!r}")
            owners[name] = owner
            offered.append(name)
            if server.target is None:
                toolset.tools.append(tool)
            else:
                toolset.by_target.setdefault(server.target, []).append(tool)
        toolset.statuses.append(
            ServerStatus(server.name, server.transport, len(listed), offered, error, skipped)
        )
    return toolset


def _listing(connection: Connection) -> tuple[list[mcp_types.Tool], str | None]:
    server = connection.server.name
    try:
        return connection.list_tools(), None
    except McpUnavailableError as exc:
        known = connection.known_tools
        if known is not None:
            log.warning(
                "MCP server %s is down (%s): offering its last known %d tools", server, exc.reason, len(known)
            )
            return known, exc.reason
        log.error(
            "MCP server %s is down and was never listed: none of its tools is offered (%s)",
            server,
            exc.reason,
        )
        return [], exc.reason


def _selected(server: McpServer, tool: str) -> bool:
    allowed = any(fnmatch.fnmatchcase(tool, pattern) for pattern in server.allow)
    return allowed and not any(fnmatch.fnmatchcase(tool, pattern) for pattern in server.deny)


def _adapt(connection: Connection, remote: mcp_types.Tool) -> McpTool:
    server = connection.server
    name = offered_name(server.name, remote.name)
    schema = checked_schema(remote.input_schema, bound_to=server.target)
    override = server.overrides.get(remote.name)
    description = (override.description if override else None) or remote.description or remote.title
    if not description or not description.strip():
        description = f"The {remote.name} tool of the MCP server {server.name}."
    decision = decide(remote.annotations, server.trust, override)
    timeout = override.timeout if override is not None and override.timeout else server.timeout
    text = " ".join(description.split())
    return McpTool(connection, remote.name, name, f"[MCP {server.name}] {text}", schema, decision, timeout)
