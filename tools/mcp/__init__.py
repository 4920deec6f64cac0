"""MCP toolsets: any Model Context Protocol server's tools behind the same approval gate.

Modules, in the order data flows:

* ``config``: the catalog's ``mcp_servers:`` entries, checked and resolved (``${VAR}`` secrets);
* ``bridge``: the one event-loop thread between the synchronous runtime and the async SDK;
* ``pool``: one session per server per process, started lazily, restarted with backoff;
* ``schemas`` and ``categories``: offered names, input schemas, and each tool's category (why);
* ``adapter``: ``McpTool``, the ``agent.tooling.Tool`` the loop calls; ``results``: its results;
* ``toolset``: builds a run's MCP tools when the registry is built.

See docs/TOOLS.md "MCP servers".
"""

from tools.mcp.config import McpServer, parse_mcp_servers
from tools.mcp.pool import McpPool, process_pool
from tools.mcp.toolset import McpToolset, build_toolset

__all__ = ["McpPool", "McpServer", "McpToolset", "build_toolset", "parse_mcp_servers", "process_pool"]
