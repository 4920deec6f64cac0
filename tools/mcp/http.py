"""The HTTP client of a streamable HTTP MCP session, which keeps an error's HTTP status.

The SDK turns a POST answered with an HTTP error and no JSON-RPC body (a proxy's or an auth
layer's ``401 Unauthorized`` page) into "Server returned an error response": the status is lost,
and an operator reading "MCP server tickets is unavailable" cannot tell a wrong token from a
crashed server. ``StatusNamingTransport`` sits under the SDK's client and rewrites such a response
into the JSON-RPC error the SDK passes on: code ``HTTP_STATUS_ERROR``, message ``HTTP 401
Unauthorized from https://mcp.example/mcp: <the body's first line>``, ``data.status`` the number
(``tools.mcp.failures`` decides from it whether the session is lost). A body that already is a
JSON-RPC error (a spec-correct server's 400 for invalid params) is passed on as the server wrote
it. The URL is shown without its query and user info, where a token may sit.
"""

from __future__ import annotations

import json
from collections.abc import Mapping

import httpx2

from tools.mcp.failures import HTTP_STATUS_ERROR, shown_url

MAX_BODY_BYTES = 64 * 1024
"""Of an error page, only this much is read (its first line is shown)."""
BODY_EXCERPT_CHARS = 200


def client(headers: Mapping[str, str], connect_timeout: float, read_timeout: float) -> httpx2.AsyncClient:
    """The SDK's HTTP client for one session: the server's headers, bounded connects, statuses kept.

    For the SSE transport too: there the SDK raises ``HTTPStatusError`` on the stream's GET (shown
    by ``tools.mcp.failures.describe_error``), and a POST's error status ends the session."""
    return httpx2.AsyncClient(
        headers=dict(headers),
        timeout=httpx2.Timeout(connect_timeout, read=read_timeout),
        transport=StatusNamingTransport(httpx2.AsyncHTTPTransport()),
    )


class StatusNamingTransport(httpx2.AsyncBaseTransport):
    """Wraps the real transport; a JSON-RPC request's HTTP error answer names its status."""

    def __init__(self, inner: httpx2.AsyncBaseTransport) -> None:
        self._inner = inner

    async def handle_async_request(self, request: httpx2.Request) -> httpx2.Response:
        response = await self._inner.handle_async_request(request)
        if request.method != "POST" or response.status_code < 400:
            return response
        request_id = _request_id(request)
        if request_id is None:  # a notification: nobody waits for its answer
            return response
        body = await _bounded_body(response)
        seen = httpx2.Response(response.status_code, headers=response.headers, content=body, request=request)
        if _is_jsonrpc_error(seen):
            return seen
        status = {"status": response.status_code}
        error = {"code": HTTP_STATUS_ERROR, "message": _status_text(request, seen), "data": status}
        return httpx2.Response(
            response.status_code,
            json={"jsonrpc": "2.0", "id": request_id, "error": error},
            request=request,
        )

    async def aclose(self) -> None:
        await self._inner.aclose()


def _request_id(request: httpx2.Request) -> str | int | None:
    try:
        message = json.loads(request.content)
    except (httpx2.RequestNotRead, ValueError):
        return None
    found = message.get("id") if isinstance(message, dict) else None
    return found if isinstance(found, str | int) and not isinstance(found, bool) else None


async def _bounded_body(response: httpx2.Response) -> bytes:
    chunks: list[bytes] = []
    size = 0
    try:
        async for chunk in response.aiter_raw():
            chunks.append(chunk)
            size += len(chunk)
            if size >= MAX_BODY_BYTES:
                break
    finally:
        await response.aclose()
    return b"".join(chunks)[:MAX_BODY_BYTES]


def _is_jsonrpc_error(response: httpx2.Response) -> bool:
    if not response.headers.get("content-type", "").lower().startswith("application/json"):
        return False
    try:
        message = response.json()
    except (ValueError, httpx2.DecodingError):
        return False
    return isinstance(message, dict) and isinstance(message.get("error"), dict) and "id" in message


def _status_text(request: httpx2.Request, response: httpx2.Response) -> str:
    status = response.status_code
    text = f"HTTP {status} {httpx2.codes.get_reason_phrase(status)} from {shown_url(request.url)}"
    try:
        first = next((line.strip() for line in response.text.splitlines() if line.strip()), "")
    except (ValueError, httpx2.DecodingError):
        first = ""
    if first:
        cut = " ..." if len(first) > BODY_EXCERPT_CHARS else ""
        text += f": {first[:BODY_EXCERPT_CHARS]}{cut}"
    return text
