"""One bounded HTTP request, shared by ``http_check`` and catalog ``http`` tools."""

from __future__ import annotations

import time
from collections.abc import Mapping
from dataclasses import dataclass
from urllib.parse import urlsplit

import httpx

from tools.errors import ToolCallError

DEFAULT_MAX_BODY_BYTES = 64 * 1024


@dataclass(frozen=True)
class HttpResponse:
    status: int
    reason: str
    elapsed: float
    """Seconds until the response headers arrived."""
    body: str
    body_bytes: int
    """How many body bytes were read (at most the limit)."""
    truncated: bool
    location: str | None


def check_url(url: str) -> None:
    """Only absolute http(s) URLs with a host; raises ``ToolCallError`` otherwise."""
    parts = urlsplit(url)
    if parts.scheme not in ("http", "https") or not parts.hostname:
        raise ToolCallError(f"not an http(s) URL with a host: {url!r}")


def request(
    method: str,
    url: str,
    *,
    timeout: float,
    headers: Mapping[str, str] | None = None,
    body: str | None = None,
    follow_redirects: bool = False,
    max_body_bytes: int = DEFAULT_MAX_BODY_BYTES,
) -> HttpResponse:
    """Send one request and read at most ``max_body_bytes`` of the answer.

    Proxy variables are ignored (``trust_env=False``): health checks target hosts directly.
    Network failures raise ``httpx.HTTPError`` for the caller to describe.
    """
    check_url(url)
    started = time.perf_counter()
    with (
        httpx.Client(timeout=timeout, follow_redirects=follow_redirects, trust_env=False) as client,
        client.stream(method, url, headers=dict(headers or {}), content=body) as response,
    ):
        elapsed = time.perf_counter() - started
        collected = bytearray()
        truncated = False
        for chunk in response.iter_bytes():
            collected += chunk
            if len(collected) >= max_body_bytes:
                truncated = True
                del collected[max_body_bytes:]
                break
        encoding = response.encoding or "utf-8"
        return HttpResponse(
            status=response.status_code,
            reason=response.reason_phrase,
            elapsed=elapsed,
            body=collected.decode(encoding, errors="replace"),
            body_bytes=len(collected),
            truncated=truncated,
            location=response.headers.get("location"),
        )


def describe_http_error(exc: httpx.HTTPError, timeout: float) -> str:
    """A short reason a person reads: refused, timed out, TLS, DNS..."""
    if isinstance(exc, httpx.TimeoutException):
        return f"no answer within {timeout:g} s"
    if isinstance(exc, httpx.ConnectError):
        return f"cannot connect: {exc}"
    return f"{type(exc).__name__}: {exc}"
