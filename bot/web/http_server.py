"""The web process's HTTP/1.1 server: whole requests are read on an event loop, then handed to a WSGI app.

One asyncio loop per process reads every connection (parsing with h11, a sans-I/O HTTP/1.1
parser); only a *complete* request (head and body, at most ``max_body_bytes``) is passed to the
WSGI app on a pool of ``threads``. A slow or stalled client therefore holds a socket, never a
thread, and is cut when its deadlines pass:

- ``header_timeout``: the whole request head must arrive within this many seconds (from the
  connection's accept, or from the first byte of a request on a kept-alive connection);
- ``body_timeout``: the whole declared body must arrive within this many seconds of the head,
  and writing the answer must finish within the same bound;
- ``keepalive``: an idle connection waits this long for its next request;
- a declared body over ``max_body_bytes`` gets 413 before a byte of it is read, a head over
  ``max_header_bytes`` gets 431;
- at ``max_connections`` a new connection evicts the oldest one still sending a request (a real
  request takes milliseconds to arrive; a slow-loris one is always the oldest), else the oldest
  idle one; only when every connection has a request in the app is the new one refused.

A connection cut for a timeout is closed without an answer (the client is not reading, or is not
a client). Answers are buffered whole: the app's bodies are small (acks, ``/healthz``, ``/metrics``).
"""

from __future__ import annotations

import asyncio
import contextlib
import enum
import logging
import time
from concurrent.futures import ThreadPoolExecutor
from dataclasses import dataclass, field
from typing import Any

import h11

from bot.settings import DEFAULTS
from bot.web.wsgi import WsgiApp, WsgiResponse, call_app, environ_for, plain

log = logging.getLogger(__name__)
access_log = logging.getLogger(f"{__name__}.access")

READ_BYTES = 64 * 1024
LINGER_SECONDS = 2.0  # after a refusal, how long the rest of the request is read and dropped
LINGER_BYTES = 4 * 1024 * 1024  # ... and how much of it at most
REPORT_EVERY = 60.0  # seconds between the summaries of connections cut for a timeout or evicted
# Slack's payloads are a few KB; Bolt reads a whole body into memory before it checks the signature,
# so anything bigger is refused from its Content-Length, before a byte of it is read.
MAX_BODY_BYTES = 1024 * 1024
# Constants since 0.2.0 (they were WEB_MAX_HEADER_BYTES and WEB_GRACEFUL_TIMEOUT_SECONDS):
# Slack's request heads are under 2 KB; 32 KiB is what common proxies accept too, so nothing real is
# refused, and a client cannot make a process hold more of a head than that (431).
MAX_HEADER_BYTES = 32 * 1024
# After SIGTERM, requests under way get this long to finish (an ack takes milliseconds; /metrics
# under a slow Redis is the long one). The shipped deploy files give a process 30 s before SIGKILL
# (terminationGracePeriodSeconds, TimeoutStopSec, stop_grace_period), above it.
GRACEFUL_TIMEOUT_SECONDS = 20.0


@dataclass(frozen=True)
class Limits:
    """What one connection may take (``WEB_*`` settings, whose defaults are these, and the constants above)."""

    header_timeout: float = DEFAULTS.web_header_timeout_seconds
    body_timeout: float = DEFAULTS.web_body_timeout_seconds
    keepalive: float = DEFAULTS.web_keepalive_seconds
    max_connections: int = DEFAULTS.web_max_connections
    max_header_bytes: int = MAX_HEADER_BYTES
    max_body_bytes: int = MAX_BODY_BYTES
    graceful_timeout: float = GRACEFUL_TIMEOUT_SECONDS


class State(enum.Enum):
    WAITING = "waiting"  # no byte of the next request yet
    RECEIVING = "receiving"  # part of a request head or body
    HANDLING = "handling"  # the request is in the app, or its answer is being written


@dataclass(eq=False)
class _Connection:
    writer: asyncio.StreamWriter
    task: asyncio.Task[None] | None = None
    state: State = State.WAITING
    since: float = field(default_factory=time.monotonic)

    def enter(self, state: State) -> None:
        self.state, self.since = state, time.monotonic()


class _Cut(Exception):
    """The connection is to be closed without an answer; ``reason`` is counted."""

    def __init__(self, reason: str) -> None:
        super().__init__(reason)
        self.reason = reason


class _Refuse(Exception):
    """Answer ``status`` and close (the request cannot be read or served)."""

    def __init__(self, status: int, text: str) -> None:
        super().__init__(text)
        self.status, self.text = status, text


class HttpServer:
    """Serves one WSGI app on an already listening socket (see ``serve``)."""

    def __init__(self, app: WsgiApp, limits: Limits, threads: int, *, multiprocess: bool = False) -> None:
        self.app = app
        self.limits = limits
        self.multiprocess = multiprocess
        self._pool = ThreadPoolExecutor(threads, thread_name_prefix="chatops-web")
        self._connections: dict[_Connection, None] = {}  # in accept order
        self._draining = False
        self._counts: dict[str, int] = {}

    async def serve(self, sock: Any, stopping: asyncio.Event) -> None:
        """Accept on ``sock`` until ``stopping`` is set, then drain: stop accepting, close idle
        connections, let requests under way finish (within their own deadlines and the graceful
        timeout), close the rest."""
        server = await asyncio.start_server(self._accept, sock=sock)
        reporter = asyncio.create_task(self._report_periodically())
        try:
            await stopping.wait()
        finally:
            server.close()
            reporter.cancel()
            await self._drain()
            self._report()
            self._pool.shutdown(wait=False, cancel_futures=True)

    async def _drain(self) -> None:
        self._draining = True
        for connection in list(self._connections):
            if connection.state is State.WAITING and connection.task is not None:
                connection.task.cancel()
        tasks = [c.task for c in self._connections if c.task is not None]
        if tasks:
            _, late = await asyncio.wait(tasks, timeout=self.limits.graceful_timeout)
            for task in late:
                task.cancel()
            if late:
                log.warning("closed %d connection(s) still busy after the graceful timeout", len(late))
                await asyncio.wait(late, timeout=1.0)

    # -- connections ------------------------------------------------------------------------------

    async def _accept(self, reader: asyncio.StreamReader, writer: asyncio.StreamWriter) -> None:
        connection = _Connection(writer, asyncio.current_task())
        if len(self._connections) >= self.limits.max_connections and not self._evict():
            self._count("refused at the connection limit (every connection has a request in the app)")
            writer.transport.abort()
            return
        self._connections[connection] = None
        try:
            await self._converse(connection, reader, writer)
        except _Cut as cut:
            self._count(cut.reason)
        except (ConnectionError, asyncio.IncompleteReadError):
            pass
        except h11.LocalProtocolError:  # an answer HTTP cannot carry (a header with a newline, say)
            log.exception("could not send the app's answer; closed the connection")
        except asyncio.CancelledError:
            if not self._draining:
                self._count("evicted at the connection limit")
        finally:
            self._connections.pop(connection, None)
            if writer.transport.get_write_buffer_size():
                writer.transport.abort()  # an answer the client does not read: never wait to flush it
            else:
                writer.close()

    def _evict(self) -> bool:
        """Cancel the oldest connection still sending a request, else the oldest idle one."""
        for state in (State.RECEIVING, State.WAITING):
            candidates = [c for c in self._connections if c.state is state and c.task is not None]
            if candidates:
                victim = min(candidates, key=lambda c: c.since)
                assert victim.task is not None
                victim.task.cancel()
                self._connections.pop(victim)  # it no longer counts; its task closes it
                return True
        return False

    async def _converse(
        self, connection: _Connection, reader: asyncio.StreamReader, writer: asyncio.StreamWriter
    ) -> None:
        """Requests one after another on one connection (keep-alive), each read whole first."""
        parser = h11.Connection(h11.SERVER, max_incomplete_event_size=self.limits.max_header_bytes)
        peer = writer.get_extra_info("peername") or ("", 0)
        first = True
        while True:
            try:
                request = await self._receive_head(parser, reader, connection, first)
                if request is None:
                    return
                body = await self._receive_body(parser, reader, writer, connection, request)
            except _Refuse as refusal:
                await self._answer_refusal(parser, reader, writer, refusal)
                return
            except h11.RemoteProtocolError as error:
                invalid = _Refuse(error.error_status_hint, str(error))
                await self._answer_refusal(parser, reader, writer, invalid)
                return
            connection.enter(State.HANDLING)
            started = time.monotonic()
            environ = environ_for(request, body, peer, writer.get_extra_info("sockname"), self.multiprocess)
            response = await asyncio.get_running_loop().run_in_executor(
                self._pool, call_app, self.app, environ
            )
            await self._send(parser, writer, request, response)
            self._log_access(peer, request, response, time.monotonic() - started)
            if parser.our_state is not h11.DONE or parser.their_state is not h11.DONE or self._draining:
                return
            parser.start_next_cycle()
            connection.enter(State.WAITING)
            first = False

    async def _receive_head(
        self, parser: h11.Connection, reader: asyncio.StreamReader, connection: _Connection, first: bool
    ) -> h11.Request | None:
        """The next request's head, or ``None`` when the client closed or an idle connection timed out."""
        loop = asyncio.get_running_loop()
        if first:
            deadline = loop.time() + self.limits.header_timeout  # from the accept: nothing sent is a stall
        elif not parser.trailing_data[0]:  # nothing of the next request buffered yet: idle keep-alive
            try:
                data = await asyncio.wait_for(reader.read(READ_BYTES), self.limits.keepalive)
            except TimeoutError:
                return None
            if not data:
                return None
            connection.enter(State.RECEIVING)
            parser.receive_data(data)
            deadline = loop.time() + self.limits.header_timeout
        else:
            deadline = loop.time() + self.limits.header_timeout
        try:
            async with asyncio.timeout_at(deadline):
                event = await self._next_event(parser, reader, connection)
        except TimeoutError:
            raise _Cut("cut: request head not received within WEB_HEADER_TIMEOUT_SECONDS") from None
        if isinstance(event, h11.ConnectionClosed):
            return None
        if not isinstance(event, h11.Request):
            raise _Refuse(400, "expected a request")
        if _head_size(event) > self.limits.max_header_bytes:
            # h11 checks its limit only while a head is incomplete: one that arrived in one read is not.
            raise _Refuse(431, f"the request head is over {self.limits.max_header_bytes} bytes")
        return event

    async def _receive_body(
        self,
        parser: h11.Connection,
        reader: asyncio.StreamReader,
        writer: asyncio.StreamWriter,
        connection: _Connection,
        request: h11.Request,
    ) -> bytes:
        declared = _header(request, b"content-length")
        if declared is not None and int(declared) > self.limits.max_body_bytes:
            raise _Refuse(413, f"the body is over {self.limits.max_body_bytes} bytes")
        if parser.they_are_waiting_for_100_continue:
            writer.write(parser.send(h11.InformationalResponse(status_code=100, headers=[])) or b"")
        chunks: list[bytes] = []
        size = 0
        try:
            async with asyncio.timeout(self.limits.body_timeout):
                while True:
                    event = await self._next_event(parser, reader, connection)
                    if isinstance(event, h11.EndOfMessage):
                        return b"".join(chunks)
                    if isinstance(event, h11.ConnectionClosed):
                        raise ConnectionResetError("closed mid-body")
                    if isinstance(event, h11.Data):
                        size += len(event.data)
                        if size > self.limits.max_body_bytes:  # a chunked body has no length to check first
                            raise _Refuse(413, f"the body is over {self.limits.max_body_bytes} bytes")
                        chunks.append(event.data)
        except TimeoutError:
            raise _Cut("cut: request body not received within WEB_BODY_TIMEOUT_SECONDS") from None

    async def _next_event(
        self, parser: h11.Connection, reader: asyncio.StreamReader, connection: _Connection
    ) -> Any:
        while True:
            event = parser.next_event()
            if event is not h11.NEED_DATA:
                return event
            data = await reader.read(READ_BYTES)
            if not data:  # the client closed: between requests that is ConnectionClosed, else gone
                parser.receive_data(b"")
                try:
                    return parser.next_event()
                except h11.RemoteProtocolError:
                    raise ConnectionResetError("the client closed mid-request") from None
            if connection.state is State.WAITING:
                connection.enter(State.RECEIVING)
            parser.receive_data(data)

    # -- answers --------------------------------------------------------------------------------------

    async def _send(
        self,
        parser: h11.Connection,
        writer: asyncio.StreamWriter,
        request: h11.Request,
        response: WsgiResponse,
    ) -> None:
        headers = list(response.headers)
        if self._draining:
            headers.append((b"connection", b"close"))
        data = parser.send(h11.Response(status_code=response.status, headers=headers, reason=response.reason))
        if request.method != b"HEAD" and response.body:
            data = (data or b"") + (parser.send(h11.Data(data=response.body)) or b"")
        data = (data or b"") + (parser.send(h11.EndOfMessage()) or b"")
        writer.write(data)
        try:
            async with asyncio.timeout(self.limits.body_timeout):
                await writer.drain()
        except TimeoutError:
            raise _Cut("cut: the answer was not read within WEB_BODY_TIMEOUT_SECONDS") from None

    async def _answer_refusal(
        self,
        parser: h11.Connection,
        reader: asyncio.StreamReader,
        writer: asyncio.StreamWriter,
        refusal: _Refuse,
    ) -> None:
        """Answer ``refusal`` (when the protocol state still allows an answer), then close."""
        self._count(f"refused with {refusal.status}")
        log.debug("refused a request with %s: %s", refusal.status, refusal.text)
        response = plain(refusal.status, refusal.text)
        try:
            data = parser.send(
                h11.Response(
                    status_code=response.status,
                    headers=[*response.headers, (b"connection", b"close")],
                    reason=response.reason,
                )
            )
            data = (data or b"") + (parser.send(h11.Data(data=response.body)) or b"")
            data = (data or b"") + (parser.send(h11.EndOfMessage()) or b"")
        except h11.LocalProtocolError:
            return
        writer.write(data)
        with contextlib.suppress(TimeoutError, ConnectionError):
            async with asyncio.timeout(LINGER_SECONDS):
                await writer.drain()
                # A lingering close: closing with unread bytes (the rest of a refused 50 MB body) would
                # reset the connection, and the client might lose the answer before reading it. So the
                # client is told we are done, and what it still sends is read and dropped, briefly.
                if writer.can_write_eof():
                    writer.write_eof()
                dropped = 0
                while dropped < LINGER_BYTES and (chunk := await reader.read(READ_BYTES)):
                    dropped += len(chunk)

    def _log_access(self, peer: Any, request: h11.Request, response: WsgiResponse, seconds: float) -> None:
        if access_log.isEnabledFor(logging.INFO):
            access_log.info(
                '%s "%s %s" %d %d %.1fms',
                peer[0] if isinstance(peer, tuple) else peer,
                request.method.decode("latin-1"),
                request.target.decode("latin-1").split("?", 1)[0],
                response.status,
                len(response.body),
                seconds * 1000,
            )

    # -- what was cut, refused or evicted: summed, not one line each (a slow-loris would flood the log) --

    def _count(self, reason: str) -> None:
        self._counts[reason] = self._counts.get(reason, 0) + 1

    async def _report_periodically(self) -> None:
        while True:
            await asyncio.sleep(REPORT_EVERY)
            self._report()

    def _report(self) -> None:
        if self._counts:
            summary = "; ".join(f"{count} {reason}" for reason, count in sorted(self._counts.items()))
            log.warning("connections since the last report (every %.0f s): %s", REPORT_EVERY, summary)
            self._counts.clear()


def _head_size(request: h11.Request) -> int:
    """The request head's size as sent (request line, ``name: value`` lines, the blank line)."""
    line = len(request.method) + len(request.target) + 12  # two spaces, "HTTP/1.1", CRLF
    return line + sum(len(name) + len(value) + 4 for name, value in request.headers.raw_items()) + 2


def _header(request: h11.Request, name: bytes) -> bytes | None:
    for key, value in request.headers:
        if key == name:
            return bytes(value)
    return None
