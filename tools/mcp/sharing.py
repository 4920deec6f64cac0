"""MCP sessions shared by a forking worker's work horses: the worker owns them, horses call them.

RQ's ``Worker`` forks a work horse per job, and a pool made in the horse dies with it: every job
would start its stdio servers again and forget their restart backoff. ``McpHost`` (started by
``chatops worker`` before it forks) owns one ``McpPool`` in the worker process and serves it on a
Unix socket; in a horse, ``process_pool()`` is then a ``SharedPool`` whose connections forward
each listing and call there. Servers still start lazily, on a horse's first use, and live as long
as the worker.

Trust. The socket lives in a private directory (mode 0700), and the host answers only its own
children: the peer's uid (``SO_PEERCRED``) must be the worker's and its parent process the worker
itself. It answers only for servers it was given, by name: a horse sends no command, URL or
secret. A horse whose catalog entry for a server differs from the worker's (the file changed
since the worker started) keeps a session of its own for that server, with a warning, as before.
The approval gate stays in the horse (``McpTool.execute``); the host only calls.

Wire: one request per connection, a 4-byte big-endian length then JSON, each way. Requests are
``{"op": "list", "server", "timeout"}`` and ``{"op": "call", "server", "tool", "arguments",
"timeout", "budget"}``; answers carry ``tools`` or ``result`` (the SDK's models as JSON), or
``error`` (``unavailable``, ``timeout``, ``refused``) with what the horse raises.
"""

from __future__ import annotations

import contextlib
import json
import logging
import os
import shutil
import socket
import struct
import tempfile
import threading
from collections.abc import Sequence
from typing import Any

import mcp_types

from tools.errors import McpCallError, McpTimeoutError, McpUnavailableError
from tools.mcp.config import McpServer
from tools.mcp.pool import Connection, McpPool, set_child_pool

log = logging.getLogger(__name__)
MAX_FRAME_BYTES = 64 * 1024 * 1024  # a tool result is capped later; this only stops a runaway
REPLY_MARGIN_SECONDS = 5.0  # the host enforces the call's own timeout; this covers the wire
MAX_HANDLERS = 32
_LENGTH = struct.Struct(">I")
_PEER = struct.Struct("3i")  # struct ucred: pid, uid, gid


class McpHost:
    """The worker process's pool, served to its work horses (see the module)."""

    def __init__(self, servers: Sequence[McpServer], pool: McpPool | None = None) -> None:
        self.servers = {server.name: server for server in servers}
        self.pool = pool or McpPool()
        self._directory = tempfile.mkdtemp(prefix="chatops-mcp-")  # 0700: only this user
        self.address = os.path.join(self._directory, "sessions.sock")
        self._listener = socket.socket(socket.AF_UNIX, socket.SOCK_STREAM)
        self._listener.bind(self.address)
        self._listener.listen(64)
        self._handlers = threading.BoundedSemaphore(MAX_HANDLERS)
        self._closed = threading.Event()
        self._thread = threading.Thread(target=self._accept, name="chatops-mcp-host", daemon=True)
        self._thread.start()
        global _current_host
        _current_host = self
        set_child_pool(lambda: SharedPool(self.address, self.servers), host_pid=os.getpid())

    def close(self) -> None:
        """Stop serving, end the sessions and remove the socket."""
        if self._closed.is_set():
            return
        self._closed.set()
        global _current_host
        if _current_host is self:
            _current_host = None
            set_child_pool(None, host_pid=None)
        self._shutdown_listener()
        self._thread.join(timeout=5)
        self.pool.close()
        shutil.rmtree(self._directory, ignore_errors=True)

    # -- serving ---------------------------------------------------------------------------------

    def _accept(self) -> None:
        while not self._closed.is_set():
            try:
                peer, _ = self._listener.accept()
            except OSError:
                return  # closed
            self._handlers.acquire()
            threading.Thread(target=self._serve, args=(peer,), name="chatops-mcp-call", daemon=True).start()

    def _serve(self, peer: socket.socket) -> None:
        try:
            with peer:
                # Who it is comes first: a stranger gets no read of its frame, only the refusal.
                answer = self._answer(_receive(peer, timeout=10.0)) if is_own_child(peer) else _refusal()
                peer.settimeout(10.0)
                _send(peer, answer)
        except (OSError, ValueError) as exc:  # a horse that died mid-request, or a bad frame
            log.warning("MCP host: a request from a work horse failed: %s", exc)
        finally:
            self._handlers.release()

    def _answer(self, request: dict[str, Any]) -> dict[str, Any]:
        server = self.servers.get(str(request.get("server")))
        if server is None:
            return {"error": "unavailable", "reason": "the worker has no such MCP server"}
        connection = self.pool.connection(server)
        try:
            if request.get("op") == "list":
                tools = connection.list_tools(float(request["timeout"]))
                return {"tools": [_dump(tool) for tool in tools]}
            if request.get("op") == "call":
                result = connection.call(
                    str(request["tool"]),
                    dict(request["arguments"]),
                    timeout=float(request["timeout"]),
                    budget=float(request["budget"]),
                )
                return {"result": _dump(result)}
            return {"error": "unavailable", "reason": f"unknown request {request.get('op')!r}"}
        except McpTimeoutError as exc:
            return {"error": "timeout", "tool": exc.tool, "seconds": exc.timeout}
        except McpUnavailableError as exc:
            known = connection.known_tools
            return {
                "error": "unavailable",
                "reason": exc.reason,
                "known": None if known is None else [_dump(tool) for tool in known],
            }
        except (KeyError, TypeError, ValueError) as exc:
            return {"error": "unavailable", "reason": f"malformed request: {exc}"}

    def _shutdown_listener(self) -> None:
        with contextlib.suppress(OSError):  # never connected: nothing to shut down
            self._listener.shutdown(socket.SHUT_RDWR)
        self._listener.close()

    def close_inherited(self) -> None:
        """In a forked child: drop the copy of the listening socket (the path stays the host's)."""
        self._listener.close()


class SharedPool:
    """A work horse's pool: the worker's sessions for the servers it has, its own for the rest."""

    def __init__(self, address: str, servers: dict[str, McpServer]) -> None:
        self.address = address
        self._servers = servers
        self._own: McpPool | None = None
        self._lock = threading.Lock()

    def connection(self, server: McpServer) -> Connection:
        if self._servers.get(server.name) == server:
            return SharedConnection(server, self.address)
        log.warning(
            "MCP server %s: its catalog entry changed since the worker started; this job starts "
            "its own session (restart the worker to share it again)",
            server.name,
        )
        with self._lock:
            if self._own is None:
                self._own = McpPool()
            return self._own.connection(server)

    def close(self) -> None:
        with self._lock:
            own, self._own = self._own, None
        if own is not None:
            own.close()


class SharedConnection:
    """One server's session in the worker process, used from a work horse."""

    def __init__(self, server: McpServer, address: str) -> None:
        self.server = server
        self.address = address
        self.known_tools: list[mcp_types.Tool] | None = None
        self.last_error: str | None = None

    def list_tools(self, timeout: float | None = None) -> list[mcp_types.Tool]:
        budget = timeout if timeout is not None else self.server.connect_timeout
        answer = self._ask({"op": "list", "server": self.server.name, "timeout": budget}, budget)
        if "tools" not in answer:
            known = answer.get("known")
            if isinstance(known, list):
                self.known_tools = [mcp_types.Tool.model_validate(tool) for tool in known]
            raise self._error(answer, "list_tools")
        self.known_tools = [mcp_types.Tool.model_validate(tool) for tool in answer["tools"]]
        return self.known_tools

    def call(
        self, tool: str, arguments: dict[str, Any], timeout: float, budget: float | None = None
    ) -> mcp_types.CallToolResult:
        overall = budget if budget is not None else timeout
        request = {
            "op": "call",
            "server": self.server.name,
            "tool": tool,
            "arguments": arguments,
            "timeout": timeout,
            "budget": overall,
        }
        answer = self._ask(request, overall)
        if "result" not in answer:
            raise self._error(answer, tool)
        return mcp_types.CallToolResult.model_validate(answer["result"])

    def _ask(self, request: dict[str, Any], seconds: float) -> dict[str, Any]:
        wait = seconds + REPLY_MARGIN_SECONDS
        try:
            with socket.socket(socket.AF_UNIX, socket.SOCK_STREAM) as sock:
                sock.settimeout(wait)
                sock.connect(self.address)
                _send_unless_refused(sock, request)
                return _receive(sock, timeout=wait)
        except TimeoutError:  # the host cuts a call at its own timeout: this is the wire's margin
            raise McpTimeoutError(self.server.name, str(request.get("tool", "tools/list")), wait) from None
        except (OSError, ValueError) as exc:
            raise McpUnavailableError(
                self.server.name, f"the worker's MCP sessions did not answer: {exc}"
            ) from exc

    def _error(self, answer: dict[str, Any], tool: str) -> McpCallError:
        if answer.get("error") == "timeout":
            return McpTimeoutError(
                self.server.name, str(answer.get("tool") or tool), float(answer["seconds"])
            )
        reason = str(answer.get("reason") or "no reason given")
        self.last_error = reason
        return McpUnavailableError(self.server.name, reason)


_current_host: McpHost | None = None


def _after_fork_in_child() -> None:
    global _current_host
    if _current_host is not None:
        _current_host.close_inherited()
        _current_host = None


os.register_at_fork(after_in_child=_after_fork_in_child)


def is_own_child(peer: socket.socket) -> bool:
    """Whether the process at the other end runs as this user and is a child of this process."""
    try:
        pid, uid, _ = _PEER.unpack(peer.getsockopt(socket.SOL_SOCKET, socket.SO_PEERCRED, _PEER.size))
        with open(f"/proc/{pid}/stat", encoding="ascii", errors="replace") as stat:
            parent = int(stat.read().rsplit(")", 1)[1].split()[1])  # after "pid (comm)": state, ppid
    except (OSError, ValueError, IndexError, AttributeError):
        return False
    return uid == os.getuid() and parent == os.getpid()


def _refusal() -> dict[str, Any]:
    return {"error": "refused", "reason": "refused by the worker's MCP host: not one of its work horses"}


def _dump(model: mcp_types.Tool | mcp_types.CallToolResult) -> dict[str, Any]:
    return model.model_dump(mode="json", by_alias=True, exclude_none=True)


def _send(sock: socket.socket, message: dict[str, Any]) -> None:
    body = json.dumps(message, separators=(",", ":")).encode()
    sock.sendall(_LENGTH.pack(len(body)) + body)


def _send_unless_refused(sock: socket.socket, message: dict[str, Any]) -> None:
    """Send a request; a host that refused us without reading it has its answer waiting.

    The host writes its refusal and closes before reading a stranger's frame, so our write can
    meet a closed socket (EPIPE or ECONNRESET) while the refusal sits in our receive queue: the
    reader after this call gets the host's reason, or a closed-connection error if there is none.
    """
    with contextlib.suppress(BrokenPipeError, ConnectionResetError):
        _send(sock, message)


def _receive(sock: socket.socket, timeout: float) -> dict[str, Any]:
    sock.settimeout(timeout)
    (length,) = _LENGTH.unpack(_exactly(sock, _LENGTH.size))
    if length > MAX_FRAME_BYTES:
        raise ValueError(f"a frame of {length} bytes is over the {MAX_FRAME_BYTES}-byte limit")
    message = json.loads(_exactly(sock, length))
    if not isinstance(message, dict):
        raise ValueError("a frame is not a JSON object")
    return message


def _exactly(sock: socket.socket, size: int) -> bytes:
    chunks, left = [], size
    while left:
        chunk = sock.recv(min(left, 1 << 20))
        if not chunk:
            raise ValueError("the other end closed the connection mid-frame")
        chunks.append(chunk)
        left -= len(chunk)
    return b"".join(chunks)
