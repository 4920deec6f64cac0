"""``Routes``: a local HTTP server's handler for the tools' tests, answering by path."""

from __future__ import annotations

import json
import threading
from http.server import BaseHTTPRequestHandler


class Routes(BaseHTTPRequestHandler):
    """Answers by path: /ok, /status/NNN, /slow, /echo-headers (headers and path as JSON)."""

    def do_GET(self) -> None:
        if self.path.startswith("/status/"):
            self._answer(int(self.path.rsplit("/", 1)[1]), b"status page")
        elif self.path == "/slow":
            threading.Event().wait(3)
            self._answer(200, b"late")
        elif self.path.startswith("/echo"):
            body = json.dumps({"path": self.path, "headers": dict(self.headers)}).encode()
            self._answer(200, body)
        else:
            self._answer(200, b"all systems operational")

    def do_POST(self) -> None:
        length = int(self.headers.get("Content-Length", "0"))
        received = self.rfile.read(length).decode()
        self._answer(201, json.dumps({"path": self.path, "body": received}).encode())

    def _answer(self, status: int, body: bytes) -> None:
        self.send_response(status)
        self.send_header("Content-Length", str(len(body)))
        self.end_headers()
        self.wfile.write(body)

    def log_message(self, format: str, *args: object) -> None:  # keep test output quiet
        pass
