"""A local HTTP listener (127.0.0.1, port 0) that counts every TCP connection and request.

``GET /redirect?to=URL`` answers 302 to ``URL``; a path of ``pages`` its (content type, body);
anything else 200 with a short body.

For egress tests: "never contacted" is ``connections == 0`` read after the fact (nothing needs
waiting for: a refused call never opens a socket), and "contacted exactly once, only after the
click" is the count read before and after the click.
"""

from __future__ import annotations

import threading
from collections.abc import Iterator
from contextlib import contextmanager
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer
from typing import Any


class CountingServer(ThreadingHTTPServer):
    daemon_threads = True

    def __init__(self) -> None:
        self.connections = 0
        self.paths: list[str] = []
        self.pages: dict[str, tuple[str, bytes]] = {}
        self._lock = threading.Lock()
        super().__init__(("127.0.0.1", 0), _Handler)

    @property
    def port(self) -> int:
        return int(self.server_address[1])

    def verify_request(self, request: Any, client_address: Any) -> bool:
        with self._lock:  # every accepted connection, with or without a request on it
            self.connections += 1
        return True

    def record(self, path: str) -> None:
        with self._lock:
            self.paths.append(path)


class _Handler(BaseHTTPRequestHandler):
    server: CountingServer

    def do_GET(self) -> None:
        self.server.record(self.path)
        if self.path.startswith("/redirect?to="):
            self.send_response(302)
            self.send_header("Location", self.path.split("=", 1)[1])
            self.send_header("Content-Length", "0")
            self.end_headers()
            return
        content_type, body = self.server.pages.get(self.path, ("text/plain", b"partner status: operational"))
        self.send_response(200)
        self.send_header("Content-Type", content_type)
        self.send_header("Content-Length", str(len(body)))
        self.end_headers()
        self.wfile.write(body)

    def log_message(self, format: str, *args: Any) -> None:
        return None


@contextmanager
def counting_server() -> Iterator[CountingServer]:
    server = CountingServer()
    thread = threading.Thread(target=server.serve_forever, kwargs={"poll_interval": 0.05}, daemon=True)
    thread.start()
    try:
        yield server
    finally:
        server.shutdown()
        server.server_close()
        thread.join(timeout=5)
