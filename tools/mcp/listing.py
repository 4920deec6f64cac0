"""What one registry build found of its MCP servers: ``McpToolset`` and each server's ``ServerStatus``.

Apart from ``tools.mcp.toolset``, which builds them, so a registry without MCP servers holds an
empty ``McpToolset`` without importing the MCP SDK and jsonschema (about a second of imports in
every chatops process).
"""

from __future__ import annotations

from dataclasses import dataclass, field
from typing import TYPE_CHECKING

if TYPE_CHECKING:
    from tools.mcp.adapter import McpTool


@dataclass(frozen=True)
class ServerStatus:
    """What building found for one server (for ``doctor``-like checks and the log)."""

    server: str
    transport: str
    listed: int
    offered: list[str]
    error: str | None = None
    skipped: list[str] = field(default_factory=list)


@dataclass
class McpToolset:
    """The MCP tools of one registry build: unbound ones, and those bound to inventory targets."""

    tools: list[McpTool] = field(default_factory=list)
    by_target: dict[str, list[McpTool]] = field(default_factory=dict)
    statuses: list[ServerStatus] = field(default_factory=list)
    secret_values: list[str] = field(default_factory=list)

    def all_tools(self) -> list[McpTool]:
        return [*self.tools, *(tool for tools in self.by_target.values() for tool in tools)]
