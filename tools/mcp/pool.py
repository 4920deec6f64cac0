"""``McpPool``: one live session per configured MCP server, per process, reused by every run.

Lifecycle. The pool is per *process*: ``process_pool()`` gives this process's pool, servers start
lazily on first use, every run of the process reuses them, and the pool closes at interpreter
exit. A forked child cannot use its parent's pool (the loop thread does not exist after
``fork``): it gets a new, empty one, except a work horse of ``chatops worker``, whose
``process_pool()`` forwards to the worker's own pool (``tools.mcp.sharing``), so sessions outlive
the job that started them.

Each server's session is owned by one long-lived task on the bridge's loop (anyio requires the
task that entered the SDK's ``Client`` to leave it); calls are separate tasks on the same loop.
A call races the owner's end, so a server that exits mid-call answers the call at once with
``McpUnavailableError`` instead of leaving it to its timeout.

Restarts: a server that failed (did not start, crashed, timed out listing) is marked down; the
next use restarts it at once the first time, then waits 1, 2, 4 ... 30 s between attempts; within
a wait every call is refused at once (``Error: MCP server git is unavailable: ...``). One
successful call resets the count. Each server's last good tool list is kept for the process, so a
run built while its server is down still offers its tools (which then answer unavailable).
"""

from __future__ import annotations

import asyncio
import atexit
import concurrent.futures
import contextlib
import logging
import os
import threading
import time
from collections.abc import Callable, Coroutine
from contextlib import AsyncExitStack
from typing import Any, Protocol, TypeVar

import mcp_types
from mcp import Client
from mcp.client.stdio import StdioServerParameters, stdio_client

from tools.errors import McpTimeoutError, McpUnavailableError
from tools.mcp.bridge import Bridge
from tools.mcp.config import McpServer
from tools.mcp.stderr import StderrRelay

log = logging.getLogger(__name__)
BACKOFF_CAP_SECONDS = 30.0
Clock = Callable[[], float]
T = TypeVar("T")


def restart_delay(failures: int) -> float:
    """Seconds to wait before restarting after ``failures`` failures in a row: 0, 1, 2, 4 ... 30."""
    return 0.0 if failures <= 1 else min(BACKOFF_CAP_SECONDS, 2.0 ** (failures - 2))


def describe_error(exc: BaseException) -> str:
    """A short reason; exception groups (anyio's) are unwrapped to their first leaf."""
    while isinstance(exc, BaseExceptionGroup) and exc.exceptions:
        exc = exc.exceptions[0]
    text = str(exc).strip().splitlines()[0] if str(exc).strip() else ""
    return f"{type(exc).__name__}: {text}" if text else type(exc).__name__


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


class ServerConnection:
    """The session with one server: started on demand, restarted with backoff, calls bounded."""

    def __init__(self, server: McpServer, bridge: Bridge, clock: Clock = time.monotonic) -> None:
        self.server = server
        self._bridge = bridge
        self._clock = clock
        self._lock = threading.Lock()
        self._client: Client | None = None
        self._owner: concurrent.futures.Future[None] | None = None
        self._stop: asyncio.Event | None = None
        self._gone: asyncio.Event | None = None
        self._failures = 0
        self._retry_at = 0.0
        self.last_error: str | None = None
        self.known_tools: list[mcp_types.Tool] | None = None
        """The last tool list the server gave (kept for the process)."""

    # -- the synchronous API ---------------------------------------------------------------------

    def list_tools(self, timeout: float | None = None) -> list[mcp_types.Tool]:
        """The server's tools now (every page); raises ``McpUnavailableError``."""
        budget = timeout if timeout is not None else self.server.connect_timeout
        deadline = self._clock() + budget
        client = self._connected(budget)
        try:
            tools = self._bridge.run(self._all_tools(client), max(0.1, deadline - self._clock()))
        except Exception as exc:
            raise self._failed(exc, "listing tools") from exc
        self.known_tools = tools
        return tools

    def call(
        self, tool: str, arguments: dict[str, Any], timeout: float, budget: float | None = None
    ) -> mcp_types.CallToolResult:
        """Call ``tool``; ``McpTimeoutError`` (cancelled) past ``timeout``, ``McpUnavailableError``
        when the server is down or goes away during the call.

        ``budget`` (default ``timeout``) bounds the whole call including a (re)start of the server,
        which may take up to ``connect_timeout``: the run's deadline, not the tool's own timeout."""
        overall = self._clock() + (budget if budget is not None else timeout)
        client = self._connected(max(0.01, min(overall - self._clock(), self.server.connect_timeout)))
        limit = min(timeout, overall - self._clock())
        try:
            result = self._bridge.run(self._call(client, tool, arguments), max(0.01, limit))
        except TimeoutError:
            raise McpTimeoutError(self.server.name, tool, max(0.01, limit)) from None
        except Exception as exc:  # the session went away, or the SDK failed: restart next time
            raise self._failed(exc, f"calling {tool}") from exc
        with self._lock:
            self._failures = 0
        return result

    def close(self, timeout: float = 5.0) -> None:
        with self._lock:
            owner, stop = self._owner, self._stop
            self._client = self._owner = None
        if owner is not None and stop is not None and not owner.done():
            self._bridge.loop_call(stop.set)
            with contextlib.suppress(BaseException):  # closing: how the session ended does not matter
                owner.result(timeout=timeout)

    # -- state -----------------------------------------------------------------------------------

    def _connected(self, timeout: float) -> Client:
        with self._lock:
            alive = self._owner is not None and not self._owner.done()
            if self._client is not None and alive and not (self._gone is not None and self._gone.is_set()):
                return self._client
            now = self._clock()
            if self._failures and now < self._retry_at:
                wait = self._retry_at - now
                raise McpUnavailableError(
                    self.server.name, f"{self.last_error} (next restart in {wait:.0f} s)"
                )
            if self._failures:
                log.warning("MCP server %s: restarting (attempt %d)", self.server.name, self._failures + 1)
            try:
                self._client = self._start(timeout)
            except Exception as exc:
                raise self._mark_down(exc, "starting") from exc
            return self._client

    def _start(self, timeout: float) -> Client:
        ready: concurrent.futures.Future[Client] = concurrent.futures.Future()
        self._owner = self._bridge.spawn(self._own(ready))
        try:
            return ready.result(timeout=timeout)
        except concurrent.futures.TimeoutError:
            self._owner.cancel()
            raise TimeoutError(f"no session within {timeout:.1f} s") from None

    def _failed(self, exc: BaseException, doing: str) -> McpUnavailableError:
        with self._lock:
            return self._mark_down(exc, doing)

    def _mark_down(self, exc: BaseException, doing: str) -> McpUnavailableError:
        """Record a failure (the lock is held) and the error to raise."""
        self._failures += 1
        self._retry_at = self._clock() + restart_delay(self._failures)
        reason = (
            exc.reason if isinstance(exc, McpUnavailableError) else f"{doing} failed: {describe_error(exc)}"
        )
        self.last_error = reason
        owner, self._client, self._owner = self._owner, None, None
        if owner is not None and not owner.done():
            owner.cancel()
        log.error("MCP server %s is down: %s", self.server.name, reason)
        return McpUnavailableError(self.server.name, reason)

    # -- on the bridge's loop --------------------------------------------------------------------

    async def _own(self, ready: concurrent.futures.Future[Client]) -> None:
        """Open the session, publish it, hold it until ``close``; it ends when the server does."""
        # This session's own events: an older session ending late must not mark this one gone.
        stop, gone = asyncio.Event(), asyncio.Event()
        self._stop, self._gone = stop, gone
        try:
            async with AsyncExitStack() as stack:
                client = await stack.enter_async_context(self._client_for(stack))
                ready.set_result(client)
                await stop.wait()
        except BaseException as exc:
            if not ready.done():
                ready.set_exception(exc if isinstance(exc, Exception) else RuntimeError(describe_error(exc)))
            elif not isinstance(exc, asyncio.CancelledError):
                log.warning("MCP server %s: session ended: %s", self.server.name, describe_error(exc))
            if not isinstance(exc, Exception | asyncio.CancelledError):
                raise
        finally:
            gone.set()

    def _client_for(self, stack: AsyncExitStack) -> Client:
        server = self.server
        if server.command is not None:
            params = StdioServerParameters(
                command=server.command[0], args=list(server.command[1:]), env=dict(server.env), cwd=server.cwd
            )
            relay = StderrRelay(server.name, server.secret_values)  # its stderr, redacted, into our log
            stack.callback(relay.close)
            return Client(stdio_client(params, errlog=relay.writer), cache=None)
        import httpx2  # the SDK's HTTP client; the project's own clients use httpx
        from mcp.client.streamable_http import streamable_http_client

        assert server.url is not None, "checked: a server has command or url"
        http = httpx2.AsyncClient(
            headers=dict(server.headers),
            timeout=httpx2.Timeout(server.connect_timeout, read=max(server.timeout, 300.0)),
        )
        stack.push_async_callback(http.aclose)
        return Client(streamable_http_client(server.url, http_client=http), cache=None)

    async def _all_tools(self, client: Client) -> list[mcp_types.Tool]:
        tools: list[mcp_types.Tool] = []
        cursor: str | None = None
        for _ in range(100):  # a server that pages forever is cut off
            page = await self._raced(client.list_tools(cursor=cursor))
            tools.extend(page.tools)
            cursor = page.next_cursor
            if not cursor:
                break
        return tools

    async def _call(self, client: Client, tool: str, arguments: dict[str, Any]) -> mcp_types.CallToolResult:
        return await self._raced(client.call_tool(tool, arguments))

    async def _raced(self, request: Coroutine[Any, Any, T]) -> T:
        """``request``'s result, or ``McpUnavailableError`` at once if the session ends first."""
        task = asyncio.ensure_future(request)
        gone = self._gone
        if gone is None:
            return await task
        watcher = asyncio.ensure_future(gone.wait())
        try:
            done, _ = await asyncio.wait({task, watcher}, return_when=asyncio.FIRST_COMPLETED)
        finally:
            watcher.cancel()
            if not task.done():
                task.cancel()
        if task in done:
            return task.result()
        raise McpUnavailableError(self.server.name, "the server went away during the call")


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


_process_pool: Pool | None = None
_process_lock = threading.Lock()
_child_pool: Callable[[], Pool] | None = None
_host_pid: int | None = None


def process_pool() -> Pool:
    """This process's pool, made on first use and closed at exit."""
    global _process_pool
    with _process_lock:
        if _process_pool is None:
            _process_pool = McpPool()
        return _process_pool


def set_child_pool(factory: Callable[[], Pool] | None, host_pid: int | None) -> None:
    """Give this process's direct children ``factory()`` as their pool (``None``: their own)."""
    global _child_pool, _host_pid
    _child_pool, _host_pid = factory, host_pid


def _close_process_pool() -> None:
    pool = _process_pool
    if pool is not None:
        pool.close()


def _forget_after_fork() -> None:
    # The child has the parent's pool object but not its loop thread: start afresh (lazily), or
    # use the parent's sessions when the parent serves them to its children (a worker's horses).
    # A grandchild never does: the parent's host answers only its own children.
    global _process_pool, _process_lock, _child_pool, _host_pid
    factory = _child_pool if _host_pid == os.getppid() else None
    _process_pool = factory() if factory is not None else None
    _process_lock = threading.Lock()
    _child_pool, _host_pid = None, None


atexit.register(_close_process_pool)
if hasattr(os, "register_at_fork"):
    os.register_at_fork(after_in_child=_forget_after_fork)
