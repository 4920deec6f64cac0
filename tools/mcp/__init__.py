"""MCP toolsets: any Model Context Protocol server's tools behind the same approval gate.

Modules, in the order data flows:

* ``config``: the catalog's ``mcp_servers:`` entries, checked and resolved (``${VAR}`` secrets);
* ``bridge``: the one event-loop thread between the synchronous runtime and the async SDK;
* ``pool``: one session per server per process, started lazily;
* ``connection``: one server's session, restarted in the background with backoff when it is lost;
  ``failures``: an error answer (one call's result) from a lost session; ``http``: the HTTP
  client that keeps an error's status;
* ``sharing``: a forking worker's sessions, served to its work horses so they outlive a job;
* ``schemas`` and ``categories``: offered names, input schemas, and each tool's category (why);
* ``adapter``: ``McpTool``, the ``agent.tooling.Tool`` the loop calls; ``results``: its results;
* ``toolset``: builds a run's MCP tools when the registry is built.

See docs/TOOLS.md "MCP servers".
"""

from tools.mcp.config import McpServer, parse_mcp_servers
from tools.mcp.pool import McpPool, Pool, process_pool
from tools.mcp.sharing import McpHost
from tools.mcp.toolset import McpToolset, build_toolset

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
