"""``WebServer``: a WSGI app on 127.0.0.1 (port 0) in a background thread."""

from __future__ import annotations

import threading
from socketserver import ThreadingMixIn
from typing import Any
from wsgiref.simple_server import WSGIRequestHandler, WSGIServer, make_server


class _ThreadingServer(ThreadingMixIn, WSGIServer):
    daemon_threads = True
    request_queue_size = 128  # as a real server's backlog: Slack delivers many events at once


class QuietHandler(WSGIRequestHandler):
    def log_message(self, format: str, *args: Any) -> None:
        return None


class WebServer:
    """A WSGI app on 127.0.0.1 (port 0) in a background thread, for fast tests of the web app.

    The production server (``chatops web``) is exercised by ``test_web_process`` and
    ``tests/reliability/test_slow_clients.py``.
    """

    def __init__(self, app: Any, server: WSGIServer | None = None) -> None:
        """Serve ``app``; ``server`` replaces the default thread-per-request server (already bound)."""
        if server is None:
            server = make_server(
                "127.0.0.1", 0, app, server_class=_ThreadingServer, handler_class=QuietHandler
            )
        else:
            server.set_app(app)
        self._server = server
        self._thread = threading.Thread(target=self._server.serve_forever, kwargs={"poll_interval": 0.05})
        self._thread.daemon = True
        self._thread.start()

    @property
    def url(self) -> str:
        host, port = self._server.server_address[:2]
        return f"http://{host!s}:{port}"

    def close(self) -> None:
        self._server.shutdown()
        self._server.server_close()
        self._thread.join(timeout=5)
