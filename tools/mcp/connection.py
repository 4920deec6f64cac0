"""``ServerConnection``: the session with one MCP server, owned on the bridge's loop.

Each server's session is owned by one long-lived task on the bridge's loop (anyio requires the
task that entered the SDK's ``Client`` to leave it); calls are separate tasks on the same loop.
A call races the owner's end, so a server that exits mid-call answers the call at once with
``McpUnavailableError`` instead of leaving it to its timeout.

Errors and restarts (``tools.mcp.failures`` decides which is which). A JSON-RPC error answer to
a call (unknown tool, invalid params, an HTTP 401 from the server's front) is that call's
``isError`` result; the session stays up and parallel calls on it go on. Only a lost session
(the process exited, the stream closed, the connection was refused or reset, an HTTP 5xx or 404
on the transport, a listing that timed out, a start past ``connect_timeout``) marks the server
down. The call that saw it gets its error at once; the first time, a restart begins in the
background with its own ``connect_timeout``, and the next call waits for it within its own budget
(a caller that stops waiting leaves the start running). After that the restarts wait 1, 2, 4 ...
30 s apart; within a wait every call is refused at once (``Error: MCP server git is unavailable:
...``). One answered call resets the count. Each server's last good tool list is kept for the
process, so a run built while its server is down still offers its tools (which then answer
unavailable).
"""

from __future__ import annotations

import asyncio
import concurrent.futures
import contextlib
import logging
import threading
import time
from collections.abc import Callable, Coroutine
from contextlib import AsyncExitStack
from typing import Any, TypeVar

import httpx2
import mcp_types
from mcp import Client
from mcp.client.stdio import StdioServerParameters, stdio_client

from tools.errors import McpTimeoutError, McpUnavailableError
from tools.mcp.bridge import Bridge
from tools.mcp.config import McpServer
from tools.mcp.failures import describe_error, error_answer, is_error_answer, is_timeout, shown
from tools.mcp.http import client as http_client
from tools.mcp.stderr import StderrRelay
from tools.safety import Redactor

log = logging.getLogger(__name__)
BACKOFF_CAP_SECONDS = 30.0
Clock = Callable[[], float]
T = TypeVar("T")


def restart_delay(failures: int) -> float:
    """Seconds to wait before restarting after ``failures`` failures in a row: 0, 1, 2, 4 ... 30."""
    return 0.0 if failures <= 1 else min(BACKOFF_CAP_SECONDS, 2.0 ** (failures - 2))


class _Session:
    """One start of a server: the future its client arrives on, the task that owns it, and the
    loop-side events that stop it and say it ended."""

    def __init__(self) -> None:
        self.ready: concurrent.futures.Future[Client] = concurrent.futures.Future()
        self.owner: concurrent.futures.Future[None] | None = None
        self.stop = asyncio.Event()
        self.gone = asyncio.Event()
        self.expired = False

    def over(self) -> bool:
        """Whether this start failed or its session ended (a live or starting one is not)."""
        if self.owner is not None and self.owner.done():
            return True
        return self.ready.done() and (self.ready.cancelled() or self.ready.exception() is not None)


class ServerConnection:
    """The session with one server: started on demand, restarted in the background, calls bounded."""

    def __init__(self, server: McpServer, bridge: Bridge, clock: Clock = time.monotonic) -> None:
        self.server = server
        self._bridge = bridge
        self._clock = clock
        self._lock = threading.Lock()
        self._session: _Session | None = None
        self._failures = 0
        self._retry_at = 0.0
        self._redactor = Redactor(secrets=server.secret_values)
        self.last_error: str | None = None
        self.known_tools: list[mcp_types.Tool] | None = None
        """The last tool list the server gave (kept for the process)."""

    # -- the synchronous API ---------------------------------------------------------------------

    def list_tools(self, timeout: float | None = None) -> list[mcp_types.Tool]:
        """The server's tools now (every page); raises ``McpUnavailableError``."""
        budget = timeout if timeout is not None else self.server.connect_timeout
        deadline = self._clock() + budget
        session, client = self._connected(budget)
        try:
            tools = self._bridge.run(self._all_tools(session, client), max(0.1, deadline - self._clock()))
        except Exception as exc:
            if is_error_answer(exc):  # the server is there and said no: its session stays
                said = self._shown(f"listing tools: {describe_error(exc)}")
                raise McpUnavailableError(self.server.name, said) from exc
            raise self._lost(session, exc, "listing tools") from exc
        self._succeeded()
        self.known_tools = tools
        return tools

    def call(
        self, tool: str, arguments: dict[str, Any], timeout: float, budget: float | None = None
    ) -> mcp_types.CallToolResult:
        """Call ``tool``: its result, or an ``isError`` result when the server answered with an error
        (the session stays up); ``McpTimeoutError`` (cancelled) past ``timeout``;
        ``McpUnavailableError`` when the server is down or its session is lost during the call.

        ``budget`` (default ``timeout``) bounds the whole call including waiting for a (re)start of
        the server: the run's deadline, not the tool's own timeout. A start is never bounded by a
        caller's budget (it has ``connect_timeout``, and goes on when the caller stops waiting)."""
        overall = self._clock() + (budget if budget is not None else timeout)
        session, client = self._connected(min(overall - self._clock(), self.server.connect_timeout))
        limit = max(0.01, min(timeout, overall - self._clock()))
        try:
            result = self._bridge.run(self._call(session, client, tool, arguments), limit)
        except TimeoutError:
            raise McpTimeoutError(self.server.name, tool, limit) from None
        except Exception as exc:
            if is_timeout(exc):
                raise McpTimeoutError(self.server.name, tool, limit) from None
            if not is_error_answer(exc):
                raise self._lost(session, exc, f"calling {tool}") from exc
            result = error_answer(self.server.name, tool, exc, self._redactor)
            log.info("MCP server %s answered %s with an error (its session stays up)", self.server.name, tool)
        self._succeeded()
        return result

    def close(self, timeout: float = 5.0) -> None:
        with self._lock:
            session, self._session = self._session, None
        owner = session.owner if session is not None else None
        if session is None or owner is None or owner.done():
            return
        if session.ready.done():
            self._bridge.loop_call(session.stop.set)
        else:
            owner.cancel()  # still starting: nothing to leave cleanly
        with contextlib.suppress(BaseException):  # closing: how the session ended does not matter
            owner.result(timeout=timeout)

    # -- state -----------------------------------------------------------------------------------

    def _connected(self, wait: float) -> tuple[_Session, Client]:
        """The live session, waiting up to ``wait`` seconds for one that is starting."""
        with self._lock:
            session = self._current_or_start()
        try:
            return session, session.ready.result(timeout=max(0.01, wait))
        except concurrent.futures.TimeoutError:
            raise McpUnavailableError(
                self.server.name,
                f"it is still starting (it has {self.server.connect_timeout:.0f} s; this call waited "
                f"{max(0.01, wait):.1f} s; the start goes on)",
            ) from None
        except concurrent.futures.CancelledError:
            raise McpUnavailableError(self.server.name, "its session was closed") from None
        except McpUnavailableError:
            raise
        except Exception as exc:  # _own sets McpUnavailableError; anything else is a bug shown as is
            raise McpUnavailableError(self.server.name, self._shown(describe_error(exc))) from exc

    def _current_or_start(self) -> _Session:
        """The live or starting session, or a new start (the lock is held)."""
        session = self._session
        if session is not None and not session.over():
            return session
        now = self._clock()
        if self._failures and now < self._retry_at:
            wait = self._retry_at - now
            raise McpUnavailableError(self.server.name, f"{self.last_error} (next restart in {wait:.0f} s)")
        if self._failures:
            log.warning("MCP server %s: restarting (attempt %d)", self.server.name, self._failures + 1)
        return self._spawn()

    def _spawn(self) -> _Session:
        """Start a session in the background (the lock is held); it is bounded by ``connect_timeout``."""
        session = _Session()
        self._session = session
        session.owner = self._bridge.spawn(self._own(session))
        return session

    def _lost(self, session: _Session, exc: BaseException, doing: str) -> McpUnavailableError:
        """``session`` failed: mark the server down, restart it in the background the first time,
        and return the error for the call that saw it (which does not wait for the restart)."""
        reason = (
            exc.reason if isinstance(exc, McpUnavailableError) else f"{doing} failed: {describe_error(exc)}"
        )
        reason = self._shown(reason)
        with self._lock:
            if self._session is not session:  # a parallel call already reported it
                return McpUnavailableError(self.server.name, reason)
            self._record_failure(reason)
            owner, self._session = session.owner, None
            if owner is not None and not owner.done() and not session.gone.is_set():
                owner.cancel()
            if restart_delay(self._failures) == 0.0:
                self._spawn()
                reason += " (restarting it in the background)"
        return McpUnavailableError(self.server.name, reason)

    def _start_failed(self, session: _Session, exc: BaseException) -> None:
        if session.expired:
            reason = f"no session within {self.server.connect_timeout:.1f} s (its connect_timeout)"
        else:
            reason = self._shown(f"starting failed: {describe_error(exc)}")
        with self._lock:
            if self._session is session:
                self._record_failure(reason)
        session.ready.set_exception(McpUnavailableError(self.server.name, reason))

    def _record_failure(self, reason: str) -> None:
        """Count a failure (the lock is held): the next start waits out its backoff."""
        self._failures += 1
        self._retry_at = self._clock() + restart_delay(self._failures)
        self.last_error = reason
        log.error("MCP server %s is down: %s", self.server.name, reason)

    def _succeeded(self) -> None:
        with self._lock:
            self._failures = 0

    def _shown(self, text: str) -> str:
        return shown(text, self._redactor)

    # -- on the bridge's loop --------------------------------------------------------------------

    async def _own(self, session: _Session) -> None:
        """Open the session, publish it, hold it until ``close``; it ends when the server does.

        The start has ``connect_timeout``, whoever waits for it: a caller that stops waiting
        leaves it running for the next call."""
        task = asyncio.current_task()
        expiry = asyncio.get_running_loop().call_later(
            self.server.connect_timeout, self._expire, session, task
        )
        try:
            async with AsyncExitStack() as stack:
                client = await stack.enter_async_context(self._client_for(stack))
                expiry.cancel()
                session.ready.set_result(client)
                await session.stop.wait()
        except BaseException as exc:
            expiry.cancel()
            if not session.ready.done():
                self._start_failed(session, exc)
            elif not session.stop.is_set() and not isinstance(exc, asyncio.CancelledError):
                session.gone.set()
                self._lost(session, exc, "the session")
            if not isinstance(exc, Exception | asyncio.CancelledError):
                raise
        finally:
            session.gone.set()

    @staticmethod
    def _expire(session: _Session, task: asyncio.Task[Any] | None) -> None:
        if not session.ready.done() and task is not None:
            session.expired = True
            task.cancel()

    def _client_for(self, stack: AsyncExitStack) -> Client:
        server = self.server
        if server.command is not None:
            params = StdioServerParameters(
                command=server.command[0], args=list(server.command[1:]), env=dict(server.env), cwd=server.cwd
            )
            relay = StderrRelay(server.name, server.secret_values)  # its stderr, redacted, into our log
            stack.callback(relay.close)
            return Client(stdio_client(params, errlog=relay.writer), cache=None)
        assert server.url is not None, "checked: a server has command or url"
        read = max(server.timeout, 300.0)
        if server.http_transport == "sse":
            from mcp.client.sse import sse_client

            def made(headers: Any = None, timeout: Any = None, auth: Any = None) -> httpx2.AsyncClient:
                return http_client(server.headers, server.connect_timeout, read_timeout=read)

            transport = sse_client(server.url, httpx_client_factory=made, sse_read_timeout=read)
            return Client(transport, cache=None)
        from mcp.client.streamable_http import streamable_http_client

        http = http_client(server.headers, server.connect_timeout, read_timeout=read)
        stack.push_async_callback(http.aclose)
        return Client(streamable_http_client(server.url, http_client=http), cache=None)

    async def _all_tools(self, session: _Session, client: Client) -> list[mcp_types.Tool]:
        tools: list[mcp_types.Tool] = []
        cursor: str | None = None
        for _ in range(100):  # a server that pages forever is cut off
            page = await self._raced(session, client.list_tools(cursor=cursor))
            tools.extend(page.tools)
            cursor = page.next_cursor
            if not cursor:
                break
        return tools

    async def _call(
        self, session: _Session, client: Client, tool: str, arguments: dict[str, Any]
    ) -> mcp_types.CallToolResult:
        return await self._raced(session, client.call_tool(tool, arguments))

    async def _raced(self, session: _Session, request: Coroutine[Any, Any, T]) -> T:
        """``request``'s result, or ``McpUnavailableError`` at once if the session ends first."""
        task = asyncio.ensure_future(request)
        watcher = asyncio.ensure_future(session.gone.wait())
        try:
            done, _ = await asyncio.wait({task, watcher}, return_when=asyncio.FIRST_COMPLETED)
        finally:
            watcher.cancel()
            if not task.done():
                task.cancel()
        if task in done:
            return task.result()
        raise McpUnavailableError(self.server.name, "the server went away during the call")
