"""``chatops web`` in Socket Mode (``SLACK_APP_TOKEN`` set): no public URL needed.

Slack delivers the same events and interactivity over a WebSocket. Bolt acknowledges an envelope
only when the app's answer is 200, so a Redis failure leaves it unacknowledged and Slack
retries, as it does for a non-2xx over HTTP. ``GET /healthz`` is still served on ``PORT`` for
orchestrators (a small thread; no Slack traffic goes through it).
"""

from __future__ import annotations

import logging
import threading
from collections.abc import Iterable
from typing import Any
from wsgiref.simple_server import WSGIRequestHandler, make_server

from slack_bolt.adapter.socket_mode import SocketModeHandler

from bot.settings import Settings
from bot.slack.handlers.app import build_app
from bot.slack.handlers.runtime import WebRuntime
from bot.web.paths import HEALTH_PATH
from bot.web.wsgi import StartResponse

log = logging.getLogger(__name__)


class _QuietHandler(WSGIRequestHandler):
    def log_message(self, format: str, *args: Any) -> None:
        log.debug(format, *args)


def health_app(runtime: WebRuntime) -> Any:
    """A WSGI app answering only ``/healthz``."""

    def app(environ: dict[str, Any], start_response: StartResponse) -> Iterable[bytes]:
        if environ.get("PATH_INFO") != HEALTH_PATH:
            start_response("404 Not Found", [("Content-Type", "text/plain")])
            return [b"not found"]
        healthy = runtime.healthy()
        start_response("200 OK" if healthy else "503 Service Unavailable", [("Content-Type", "text/plain")])
        return [b"ok" if healthy else b"redis unreachable"]

    return app


def serve_socket_mode(settings: Settings) -> None:
    runtime = WebRuntime(settings)
    app = build_app(runtime, socket_mode=True)
    server = make_server(settings.web_host, settings.port, health_app(runtime), handler_class=_QuietHandler)
    threading.Thread(target=server.serve_forever, name="chatops-health", daemon=True).start()
    threading.Thread(target=runtime.identity.lookup, name="chatops-identity", daemon=True).start()
    log.info("chatops web: Socket Mode (health on %s:%s)", settings.web_host, settings.port)
    SocketModeHandler(app, settings.slack_app_token).start()  # type: ignore[no-untyped-call]
