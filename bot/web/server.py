"""The web process: a WSGI app (Slack's ``POST /slack/events``, the alert and deploy marker webhooks,
``GET /healthz``, ``GET /metrics``) and its server.

``chatops web`` binds one socket and forks ``WEB_WORKERS`` processes (``bot.web.prefork``);
each reads whole requests on an event loop and hands only complete ones to the app on
``WEB_THREADS`` threads (``bot.web.http_server``), so a slow client holds a socket, never a
thread, and is cut after ``WEB_HEADER_TIMEOUT_SECONDS`` / ``WEB_BODY_TIMEOUT_SECONDS``. Bolt's
sync ``App`` is served through its WSGI adapter, acks take milliseconds, and the lazy halves of
the listeners run on Bolt's thread pool inside each process. The app is built in each process
after the fork (by the composition root, ``bot.ops.compose.build_web``, which ``serve_http`` is
given), and ``WebRuntime`` opens Redis lazily per process, so no connection is shared.

``GET /healthz`` answers 200 when Redis answers PING, else 503: a web process that cannot store
events should be taken out of rotation (and Slack gets non-2xx from it anyway).
"""

from __future__ import annotations

import io
import json
import logging
import socket
import urllib.parse
from collections.abc import Callable, Iterable
from typing import Any

from slack_bolt.adapter.wsgi import SlackRequestHandler

from bot.errors import BotConfigurationError
from bot.observability.metrics_collector import MetricsEndpoint
from bot.settings import Settings
from bot.slack.handlers.app import PoolFactory, build_app, thread_pool
from bot.slack.handlers.runtime import WebRuntime
from bot.web import prefork
from bot.web.alert_receiver import WebReceiver
from bot.web.http_server import MAX_BODY_BYTES, Limits
from bot.web.paths import ALERTS_PREFIX, CHANGES_PATH, EVENTS_PATH, HEALTH_PATH, METRICS_PATH
from bot.web.startup import settle_garbage_collector
from bot.web.wsgi import StartResponse, WsgiApp

log = logging.getLogger(__name__)

_REASONS = {
    200: "OK",
    400: "Bad Request",
    401: "Unauthorized",
    404: "Not Found",
    413: "Content Too Large",
    422: "Unprocessable Content",
    503: "Service Unavailable",
}


def _body_refusal(environ: dict[str, Any]) -> tuple[str, str] | None:
    """``(status, text)`` when the request's declared body must not be read, else ``None``."""
    declared = str(environ.get("CONTENT_LENGTH") or "0").strip()
    if not declared.isdigit():
        return "400 Bad Request", "invalid Content-Length"
    if int(declared) > MAX_BODY_BYTES:
        return "413 Content Too Large", f"the body is over {MAX_BODY_BYTES} bytes"
    return None


def _shape_refusal(environ: dict[str, Any]) -> tuple[str, str] | None:
    """400 for a body that is no Slack payload at all (Bolt's own middleware fails on those with a
    500, which Slack would retry). The body (at most ``MAX_BODY_BYTES``) is read here and handed on."""
    length = int(str(environ.get("CONTENT_LENGTH") or "0").strip() or 0)
    if not length or "wsgi.input" not in environ:
        return None
    raw = environ["wsgi.input"].read(length)
    environ["wsgi.input"] = io.BytesIO(raw)
    content_type = str(environ.get("CONTENT_TYPE") or "")
    try:
        if content_type.startswith("application/x-www-form-urlencoded"):
            form = urllib.parse.parse_qs(raw.decode())
            payload = json.loads(form["payload"][0]) if "payload" in form else {}
        else:
            payload = json.loads(raw)
    except (ValueError, UnicodeDecodeError):
        return "400 Bad Request", "not a Slack request"
    if not isinstance(payload, dict) or not all(
        payload.get(name) is None or isinstance(payload[name], dict)
        for name in ("event", "view", "container")
    ):
        return "400 Bad Request", "not a Slack request"
    return None


def _plain(start_response: StartResponse, status: str, text: str) -> Iterable[bytes]:
    body = text.encode()
    start_response(status, [("Content-Type", "text/plain"), ("Content-Length", str(len(body)))])
    return [body]


class WebApp:
    """WSGI: ``/healthz`` here, everything else to Bolt (which answers 404 off its path)."""

    def __init__(
        self,
        runtime: WebRuntime,
        alerts: WebReceiver,
        metrics: MetricsEndpoint,
        pools: PoolFactory = thread_pool,
        changes: WebReceiver | None = None,
    ) -> None:
        """Built by ``bot.ops.compose.build_web``. ``pools``: see ``bot.slack.handlers.app.build_app``."""
        self.runtime = runtime
        self._slack = SlackRequestHandler(build_app(runtime, pools=pools), path=EVENTS_PATH)
        self._alerts = alerts
        self._changes = changes
        self._metrics = metrics

    def __call__(self, environ: dict[str, Any], start_response: StartResponse) -> Iterable[bytes]:
        if environ.get("PATH_INFO") == HEALTH_PATH and environ.get("REQUEST_METHOD") in ("GET", "HEAD"):
            return self._health(start_response)
        if environ.get("PATH_INFO") == METRICS_PATH and environ.get("REQUEST_METHOD") in ("GET", "HEAD"):
            return self._metrics(environ, start_response)
        path = str(environ.get("PATH_INFO", ""))
        if path.startswith(ALERTS_PREFIX):
            return self._webhook(self._alerts, environ, start_response)
        if self._changes is not None and (path == CHANGES_PATH or path.startswith(CHANGES_PATH + "/")):
            return self._webhook(self._changes, environ, start_response)
        refusal = _body_refusal(environ) or _shape_refusal(environ)
        if refusal is not None:
            return _plain(start_response, *refusal)
        try:
            return self._slack(environ, start_response)
        except (ValueError, TypeError, AttributeError, KeyError) as error:
            # Bolt parses the body before it checks the signature; listener errors (Redis down)
            # never get here (Bolt answers them 500 itself, and Slack retries). A body that cannot
            # be parsed into a Slack payload is the sender's fault, and retrying it changes nothing.
            log.warning("refused a request Bolt could not read: %s: %s", type(error).__name__, error)
            return _plain(start_response, "400 Bad Request", "not a Slack request")

    def _webhook(
        self, receiver: WebReceiver, environ: dict[str, Any], start_response: StartResponse
    ) -> Iterable[bytes]:
        if environ.get("REQUEST_METHOD") != "POST":
            return _plain(start_response, "405 Method Not Allowed", "POST only")
        refusal = _body_refusal(environ)
        if refusal is not None:
            return _plain(start_response, *refusal)
        length = int(str(environ.get("CONTENT_LENGTH") or "0").strip() or 0)
        body = environ["wsgi.input"].read(length) if length else b""
        headers = {
            key[5:].replace("_", "-").lower(): str(value)
            for key, value in environ.items()
            if key.startswith("HTTP_")
        }
        answer = receiver.receive(str(environ["PATH_INFO"]), headers, body)
        return _plain(start_response, f"{answer.status} {_REASONS.get(answer.status, 'Error')}", answer.text)

    def _health(self, start_response: StartResponse) -> Iterable[bytes]:
        healthy = self.runtime.healthy()
        body = json.dumps({"ok": healthy, "redis": "ok" if healthy else "unreachable"}).encode()
        status = "200 OK" if healthy else "503 Service Unavailable"
        start_response(status, [("Content-Type", "application/json"), ("Content-Length", str(len(body)))])
        return [body]


def limits_for(settings: Settings) -> Limits:
    return Limits(
        header_timeout=settings.web_header_timeout_seconds,
        body_timeout=settings.web_body_timeout_seconds,
        keepalive=settings.web_keepalive_seconds,
        max_connections=settings.web_max_connections,
        max_body_bytes=MAX_BODY_BYTES,
    )


def serve_http(
    settings: Settings, app_factory: Callable[[Settings], WsgiApp], listening: socket.socket | None = None
) -> int:
    """Bind ``WEB_HOST:PORT`` (or serve ``listening``, a socket bound by whoever started us), fork
    ``WEB_WORKERS`` children that each build the app (after the fork) and serve it with
    ``WEB_THREADS`` threads; returns when SIGTERM or SIGINT has stopped them."""
    limits = limits_for(settings)
    sock = listening if listening is not None else prefork.listen(settings.web_host, settings.port)
    host, port = sock.getsockname()[:2]
    log.info(
        "chatops web: listening on %s:%s, %d worker(s) x %d thread(s); head within %.0f s, body within "
        "%.0f s, %d connections per worker",
        host,
        port,
        settings.web_workers,
        settings.web_threads,
        limits.header_timeout,
        limits.body_timeout,
        limits.max_connections,
    )

    def child() -> int:
        try:
            app = app_factory(settings)
        except BotConfigurationError as error:  # one line: the cause, not a JSON-escaped traceback
            log.error("chatops web: configuration error: %s", " ".join(str(error).split()))
            return prefork.BOOT_FAILED
        except Exception:
            log.exception("chatops web: the app could not be built")
            return prefork.BOOT_FAILED
        settle_garbage_collector()
        return prefork.run_worker(
            sock, app, limits, settings.web_threads, multiprocess=settings.web_workers > 1
        )

    try:
        return prefork.Supervisor(settings.web_workers, child, limits.graceful_timeout).run()
    finally:
        sock.close()


def check_configuration(settings: Settings) -> None:
    """What ``chatops web`` checks of the Slack settings before it builds anything: a mistake here
    would otherwise surface in each forked worker, after "listening", as a traceback. Raises
    ``BotConfigurationError`` (one line naming the setting and the fix)."""
    if not settings.slack_bot_token:
        raise BotConfigurationError(
            "SLACK_BOT_TOKEN is empty; fix: set it to the app's Bot User OAuth Token (xoxb-..., "
            "OAuth & Permissions page)"
        )
    if not settings.slack_app_token and not settings.slack_signing_secret:
        raise BotConfigurationError(
            "SLACK_SIGNING_SECRET is empty, and Slack's requests cannot be verified without it; fix: set "
            "it to the app's Signing Secret (Basic Information page), or set SLACK_APP_TOKEN for Socket Mode"
        )
