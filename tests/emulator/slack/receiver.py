"""A tiny stand-in for the bot's request URL: records every request and answers as told."""

from __future__ import annotations

import threading
import time
import urllib.parse
from collections.abc import Callable
from dataclasses import dataclass, field
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer
from typing import Any


@dataclass
class Received:
    """One request as the bot would see it."""

    path: str
    headers: dict[str, str]
    body: bytes
    at: float = field(default_factory=time.monotonic)

    @property
    def form_payload(self) -> str:
        """The ``payload`` field of a form-encoded interactivity request."""
        return urllib.parse.parse_qs(self.body.decode())["payload"][0]


@dataclass
class Answer:
    """How to answer: status, body, headers, after an optional delay."""

    status: int = 200
    body: bytes = b""
    headers: dict[str, str] = field(default_factory=dict)
    delay: float = 0.0


Behaviour = Callable[[Received, int], Answer]


def always_ok(_request: Received, _index: int) -> Answer:
    return Answer()


class Receiver:
    """Serves on 127.0.0.1:<free port>; ``behaviour(request, index)`` decides each answer."""

    def __init__(self, behaviour: Behaviour = always_ok) -> None:
        self.behaviour = behaviour
        self.requests: list[Received] = []
        self._lock = threading.Lock()
        receiver = self

        class Handler(BaseHTTPRequestHandler):
            def log_message(self, format: str, *args: Any) -> None:
                return None

            def do_POST(self) -> None:
                length = int(self.headers.get("Content-Length") or 0)
                request = Received(
                    self.path, {k.lower(): v for k, v in self.headers.items()}, self.rfile.read(length)
                )
                with receiver._lock:
                    index = len(receiver.requests)
                    receiver.requests.append(request)
                answer = receiver.behaviour(request, index)
                if answer.delay:
                    time.sleep(answer.delay)
                try:
                    self.send_response(answer.status)
                    for key, value in answer.headers.items():
                        self.send_header(key, value)
                    self.send_header("Content-Length", str(len(answer.body)))
                    self.end_headers()
                    self.wfile.write(answer.body)
                except (BrokenPipeError, ConnectionResetError):
                    pass  # the emulator gave up waiting, as Slack does

        self.server = ThreadingHTTPServer(("127.0.0.1", 0), Handler)
        self.server.daemon_threads = True
        self.thread = threading.Thread(
            target=self.server.serve_forever, kwargs={"poll_interval": 0.05}, daemon=True
        )
        self.thread.start()

    @property
    def url(self) -> str:
        host, port = self.server.server_address[:2]
        return f"http://{host!s}:{port}/slack/events"

    def wait_for(self, count: int, timeout: float = 30.0) -> list[Received]:
        """The first ``count`` requests, waiting for them to arrive."""
        deadline = time.monotonic() + timeout
        while time.monotonic() < deadline:
            with self._lock:
                if len(self.requests) >= count:
                    return list(self.requests)
            time.sleep(0.01)
        raise AssertionError(f"expected {count} requests, got {len(self.requests)}")

    def wait_for_matching(
        self, matches: Callable[[Received], bool], count: int = 1, timeout: float = 60.0
    ) -> list[Received]:
        """The requests ``matches`` accepts, once there are ``count`` of them (others, such as the
        events a posted message causes, may arrive before, after or between them)."""
        deadline = time.monotonic() + timeout
        while time.monotonic() < deadline:
            with self._lock:
                found = [request for request in self.requests if matches(request)]
            if len(found) >= count:
                return found
            time.sleep(0.01)
        raise AssertionError(f"expected {count} matching requests, got {len(found)} of {len(self.requests)}")

    def close(self) -> None:
        self.server.shutdown()
        self.server.server_close()
