"""MCP toolsets: any Model Context Protocol server's tools behind the same approval gate.

Modules, in the order data flows:

* ``config``: the catalog's ``mcp_servers:`` entries, checked and resolved (``${VAR}`` secrets);
* ``bridge``: the one event-loop thread between the synchronous runtime and the async SDK;
  ``spawning``: its loop creates a server process while no ``os.fork`` can happen (a horse forked
  meanwhile would stall the loop for its whole life);
* ``pool``: one session per server per process, started lazily;
* ``connection``: one server's session, restarted in the background with backoff when it is lost;
  ``failures``: an error answer (one call's result) from a lost session; ``http``: the HTTP
  client that keeps an error's status;
* ``sharing``: a forking worker's sessions, served to its work horses so they outlive a job;
* ``schemas`` and ``categories``: offered names, input schemas, and each tool's category (why);
* ``adapter``: ``McpTool``, the ``agent.tooling.Tool`` the loop calls; ``results``: its results;
* ``toolset``: builds a run's MCP tools when the registry is built (into ``listing``'s ``McpToolset``:
  what a registry without servers holds, without importing the SDK).

See docs/TOOLS.md "MCP servers".
"""

from __future__ import annotations

import importlib
from typing import TYPE_CHECKING

if TYPE_CHECKING:
    from tools.mcp.config import McpServer, parse_mcp_servers
    from tools.mcp.listing import McpToolset
    from tools.mcp.pool import McpPool, Pool, process_pool
    from tools.mcp.sharing import McpHost
    from tools.mcp.toolset import build_toolset

# Each name is imported from its module when first asked for: the MCP SDK (``mcp``, ``mcp_types``)
# takes about a second to import, and every chatops process imports this package (the catalog's
# ``mcp_servers:`` are checked by ``config``) whether or not a server is configured.
_HOME = {
    "McpHost": "tools.mcp.sharing",
    "McpPool": "tools.mcp.pool",
    "McpServer": "tools.mcp.config",
    "McpToolset": "tools.mcp.listing",
    "Pool": "tools.mcp.pool",
    "build_toolset": "tools.mcp.toolset",
    "parse_mcp_servers": "tools.mcp.config",
    "process_pool": "tools.mcp.pool",
}

__all__ = [
    "McpHost",
    "McpPool",
    "McpServer",
    "McpToolset",
    "Pool",
    "build_toolset",
    "parse_mcp_servers",
    "process_pool",
]


def __getattr__(name: str) -> object:
    """The names of ``__all__``, imported from their module when first asked for."""
    home = _HOME.get(name)
    if home is None:
        raise AttributeError(f"module 'tools.mcp' has no attribute {name!r}")
    value = getattr(importlib.import_module(home), name)
    globals()[name] = value
    return value
