"""WSGI (PEP 3333) for ``bot.web.http_server``: a complete request in, a complete answer out.

The request's body has been read whole before the app is called, so ``wsgi.input`` is a
``BytesIO`` and ``CONTENT_LENGTH`` is its exact length (also for a chunked request). The answer
is buffered whole and framed with its own ``Content-Length``.
"""

from __future__ import annotations

import io
import logging
import sys
import urllib.parse
from collections.abc import Callable, Iterable
from dataclasses import dataclass
from email.utils import formatdate
from http import HTTPStatus
from typing import Any

import h11

log = logging.getLogger(__name__)

StartResponse = Callable[..., Any]
WsgiApp = Callable[[dict[str, Any], StartResponse], Iterable[bytes]]
# Framing is the server's: whatever the app says about these is dropped.
HOP_BY_HOP = frozenset(
    {b"connection", b"keep-alive", b"transfer-encoding", b"upgrade", b"proxy-connection", b"content-length"}
)


@dataclass(frozen=True)
class WsgiResponse:
    status: int
    reason: bytes
    headers: list[tuple[bytes, bytes]]
    body: bytes


def plain(status: int, text: str) -> WsgiResponse:
    """A ``text/plain`` answer the server gives itself (413, 431, 400, 500)."""
    body = text.encode()
    headers = [(b"content-type", b"text/plain"), *_date(), (b"content-length", str(len(body)).encode())]
    return WsgiResponse(status, _reason(status), headers, body)


def environ_for(
    request: h11.Request, body: bytes, peer: Any, sockname: Any, multiprocess: bool
) -> dict[str, Any]:
    target = request.target
    if not target.startswith(b"/"):  # absolute form (a proxy's request line): keep path and query
        parts = urllib.parse.urlsplit(target)
        target = (parts.path or b"/") + (b"?" + parts.query if parts.query else b"")
    path, _, query = target.partition(b"?")
    server = sockname if isinstance(sockname, tuple) else ("", 0)
    client = peer if isinstance(peer, tuple) else ("", 0)
    environ: dict[str, Any] = {
        "REQUEST_METHOD": request.method.decode("latin-1"),
        "SCRIPT_NAME": "",
        "PATH_INFO": urllib.parse.unquote_to_bytes(path).decode("latin-1"),
        "QUERY_STRING": query.decode("latin-1"),
        "SERVER_NAME": str(server[0]),
        "SERVER_PORT": str(server[1]),
        "SERVER_PROTOCOL": f"HTTP/{request.http_version.decode('latin-1')}",
        "REMOTE_ADDR": str(client[0]),
        "REMOTE_PORT": str(client[1]),
        "CONTENT_LENGTH": str(len(body)),
        "wsgi.version": (1, 0),
        "wsgi.url_scheme": "http",
        "wsgi.input": io.BytesIO(body),
        "wsgi.errors": sys.stderr,
        "wsgi.multithread": True,
        "wsgi.multiprocess": multiprocess,
        "wsgi.run_once": False,
        "wsgi.input_terminated": True,
    }
    for name, value in request.headers:
        if b"_" in name:
            # X-Slack_Signature and X-Slack-Signature would both become HTTP_X_SLACK_SIGNATURE: a header
            # that could shadow another one is dropped (as nginx does by default).
            continue
        text = value.decode("latin-1")
        if name == b"content-type":
            environ["CONTENT_TYPE"] = text
        elif name != b"content-length":
            key = "HTTP_" + name.decode("latin-1").upper().replace("-", "_")
            environ[key] = f"{environ[key]},{text}" if key in environ else text
    return environ


def call_app(app: WsgiApp, environ: dict[str, Any]) -> WsgiResponse:
    """Run the app on one request (in a pool thread); a failure is a 500, never a dropped connection."""
    started: list[tuple[str, list[tuple[str, str]]]] = []
    written: list[bytes] = []

    def start_response(status: str, headers: list[tuple[str, str]], exc_info: Any = None) -> Any:
        if exc_info is not None and started:
            raise exc_info[1].with_traceback(exc_info[2])
        started[:] = [(status, headers)]
        return written.append

    try:
        result = app(environ, start_response)
        try:
            chunks = [*written, *(bytes(chunk) for chunk in result)]
        finally:
            close = getattr(result, "close", None)
            if callable(close):
                close()
        if not started:
            raise RuntimeError("the app returned without calling start_response")
    except Exception:
        log.exception("the web app failed on %s %s", environ["REQUEST_METHOD"], environ["PATH_INFO"])
        return plain(500, "internal error")
    status, headers = started[0]
    code, _, reason = status.partition(" ")
    kept = [(k.lower().encode("latin-1"), v.encode("latin-1")) for k, v in headers]
    kept = [(k, v) for k, v in kept if k not in HOP_BY_HOP]
    if not any(k == b"date" for k, _ in kept):
        kept.extend(_date())
    body = b"".join(chunks)
    kept.append((b"content-length", str(len(body)).encode()))
    return WsgiResponse(int(code), reason.encode("latin-1"), kept, body)


def _reason(status: int) -> bytes:
    try:
        return HTTPStatus(status).phrase.encode()
    except ValueError:
        return b""


def _date() -> list[tuple[bytes, bytes]]:
    return [(b"date", formatdate(usegmt=True).encode())]
