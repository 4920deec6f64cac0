"""What the emulator's local HTTP servers share: a threaded HTTP server that can drop its open
connections, served on a background thread from construction until ``close()``.

Closing a scripted server must also end the answers still being written (a delayed reply, a slow
stream), so the server keeps the sockets it serves and shuts them down on ``drop_connections``.
"""

from __future__ import annotations

import contextlib
import socket
import sys
import threading
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer
from types import TracebackType
from typing import Any, Self


class ClientGone(Exception):
    """The client closed the connection (or the server is closing) while we answered."""


class TrackingHTTPServer(ThreadingHTTPServer):
    """``ThreadingHTTPServer`` with an ``owner`` (the scripted server) and its connections tracked."""

    daemon_threads = True

    def __init__(self, address: tuple[str, int], handler: type[BaseHTTPRequestHandler], owner: Any) -> None:
        self.owner = owner
        self._connections: set[socket.socket] = set()
        self._connections_lock = threading.Lock()
        super().__init__(address, handler)

    def process_request(self, request: Any, client_address: Any) -> None:
        with self._connections_lock:
            self._connections.add(request)
        super().process_request(request, client_address)

    def shutdown_request(self, request: Any) -> None:
        with self._connections_lock:
            self._connections.discard(request)
        super().shutdown_request(request)

    def drop_connections(self) -> None:
        with self._connections_lock:
            connections, self._connections = list(self._connections), set()
        for connection in connections:
            with contextlib.suppress(OSError):  # already gone
                connection.shutdown(socket.SHUT_RDWR)

    def handle_error(self, request: Any, client_address: Any) -> None:
        """Clients that hang up (timeouts, cancelled streams) are normal here: no traceback."""
        if isinstance(sys.exc_info()[1], OSError):
            return
        super().handle_error(request, client_address)


class BackgroundServer:
    """A ``TrackingHTTPServer`` (its ``owner`` is this object) on a daemon thread, listening from
    construction until ``close()``; ``stopping`` is set when it closes, to end waits early."""

    def __init__(self, handler: type[BaseHTTPRequestHandler], host: str, port: int, *, name: str) -> None:
        self.stopping = threading.Event()
        self._httpd = TrackingHTTPServer((host, port), handler, self)
        self._thread = threading.Thread(
            target=self._httpd.serve_forever, kwargs={"poll_interval": 0.01}, name=name, daemon=True
        )
        self._thread.start()

    @property
    def root_url(self) -> str:
        """``http://HOST:PORT``."""
        host, port = self._httpd.server_address[:2]
        return f"http://{host!s}:{port}"

    def close(self) -> None:
        """Stop serving, wake waiting answers and drop open connections."""
        self.stopping.set()
        self._httpd.shutdown()
        self._httpd.server_close()
        self._httpd.drop_connections()
        self._thread.join(timeout=5)

    def __enter__(self) -> Self:
        return self

    def __exit__(
        self, exc_type: type[BaseException] | None, exc: BaseException | None, tb: TracebackType | None
    ) -> None:
        self.close()
