"""``McpPool``: one live session per configured MCP server, per process, reused by every run.

Lifecycle. The pool is per *process*: ``process_pool()`` gives this process's pool, servers start
lazily on first use, every run of the process reuses them, and the pool closes at interpreter
exit. A forked child cannot use its parent's pool (the loop thread does not exist after
``fork``): it gets a new, empty one, except a work horse of ``chatops worker``, whose
``process_pool()`` forwards to the worker's own pool (``tools.mcp.sharing``), so sessions outlive
the job that started them.

The session of one server, its errors and restarts: ``tools.mcp.connection``.
"""

from __future__ import annotations

import atexit
import os
import threading
import time
from collections.abc import Callable
from typing import Any, Protocol

import mcp_types

from tools.fork_local import ForkLocal
from tools.mcp.bridge import Bridge
from tools.mcp.config import McpServer
from tools.mcp.connection import Clock, ServerConnection, restart_delay

__all__ = ["Connection", "McpPool", "Pool", "ServerConnection", "process_pool", "restart_delay"]


class Connection(Protocol):
    """A session with one server, as tools and the toolset use it (``ServerConnection`` here, or a
    work horse's ``tools.mcp.sharing.SharedConnection``)."""

    server: McpServer
    known_tools: list[mcp_types.Tool] | None
    last_error: str | None

    def list_tools(self, timeout: float | None = None) -> list[mcp_types.Tool]: ...

    def call(
        self, tool: str, arguments: dict[str, Any], timeout: float, budget: float | None = None
    ) -> mcp_types.CallToolResult: ...


class Pool(Protocol):
    """Where a registry build gets its sessions (``McpPool``, or a work horse's ``SharedPool``)."""

    def connection(self, server: McpServer) -> Connection: ...

    def close(self) -> None: ...


class McpPool:
    """The sessions of this process, by server name; ``close`` ends them and the bridge."""

    def __init__(self, bridge: Bridge | None = None, clock: Clock = time.monotonic) -> None:
        self.bridge = bridge or Bridge()
        self._clock = clock
        self._lock = threading.Lock()
        self._connections: dict[str, ServerConnection] = {}

    def connection(self, server: McpServer) -> ServerConnection:
        """The session with ``server``; a changed entry (same name) replaces the old session."""
        with self._lock:
            found = self._connections.get(server.name)
            if found is not None and found.server == server:
                return found
            replacement = ServerConnection(server, self.bridge, self._clock)
            self._connections[server.name] = replacement
        if found is not None:
            found.close()
        return replacement

    def close(self) -> None:
        with self._lock:
            connections = list(self._connections.values())
            self._connections.clear()
        for connection in connections:
            connection.close()
        self.bridge.close()


def _new_pool() -> Pool:
    # The parent's sessions when the parent serves them to its children (a worker's horses), else
    # a pool of its own. A grandchild never uses them: the parent's host answers its own children only.
    factory = _child_pool if _host_pid == os.getppid() else None
    return factory() if factory is not None else McpPool()


_process_pool: ForkLocal[Pool] = ForkLocal(_new_pool)
_child_pool: Callable[[], Pool] | None = None
_host_pid: int | None = None


def process_pool() -> Pool:
    """This process's pool, made on first use (again in a forked child) and closed at exit."""
    return _process_pool.get()


def set_child_pool(factory: Callable[[], Pool] | None, host_pid: int | None) -> None:
    """Give this process's direct children ``factory()`` as their pool (``None``: their own)."""
    global _child_pool, _host_pid
    _child_pool, _host_pid = factory, host_pid


def _close_process_pool() -> None:
    pool = _process_pool.peek()
    if pool is not None:
        pool.close()


atexit.register(_close_process_pool)
