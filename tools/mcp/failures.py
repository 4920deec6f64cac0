"""What an exception from the MCP SDK means: the server answered one call with an error, or the
session itself failed.

A JSON-RPC error answer (unknown tool, invalid params, a tool that raises a protocol error, an
HTTP 4xx that says the credentials are wrong) is *that call's* result: the model reads it as
``Error: ...`` and the session stays up for every other call. Only a failure of the transport
(the process exited, the stream closed, the connection was refused or reset, an HTTP 5xx or 404
"session gone" on the transport) means the session is lost and the server must be restarted.

Every text made here is redacted (the server's own secrets and the built-in patterns) and capped
before it is shown or logged: a server chooses its error messages, and may put a token, a Slack
mention or a megabyte in one.
"""

from __future__ import annotations

import json
from typing import Any
from urllib.parse import urlsplit, urlunsplit

import httpx2
import mcp_types
from mcp.shared.exceptions import MCPError
from mcp_types import CONNECTION_CLOSED, REQUEST_TIMEOUT
from pydantic import ValidationError

from tools.safety import Redactor

MAX_ERROR_CHARS = 2000
"""An error answer is cut here: what a model needs of it is its first lines."""

HTTP_STATUS_ERROR = -32010
"""The code ``tools.mcp.http`` gives an HTTP error status without a JSON-RPC body (the SDK's
implementation-defined band; the SDK itself uses -32000 and -32001); ``data`` holds the status."""


def describe_error(exc: BaseException) -> str:
    """A short reason; exception groups (anyio's) are unwrapped to their first leaf."""
    while isinstance(exc, BaseExceptionGroup) and exc.exceptions:
        exc = exc.exceptions[0]
    if isinstance(exc, MCPError):
        return _mcp_error_text(exc)
    if isinstance(exc, httpx2.HTTPStatusError):  # the SSE transport's connect; its text shows the query
        status = exc.response.status_code
        return f"HTTP {status} {httpx2.codes.get_reason_phrase(status)} from {shown_url(exc.request.url)}"
    text = str(exc).strip().splitlines()[0] if str(exc).strip() else ""
    return f"{type(exc).__name__}: {text}" if text else type(exc).__name__


def shown_url(url: str | httpx2.URL) -> str:
    """``url`` without user info, query or fragment (where tokens are put)."""
    parts = urlsplit(str(url))
    host = parts.hostname or ""
    netloc = f"[{host}]" if ":" in host else host
    if parts.port is not None:
        netloc += f":{parts.port}"
    return urlunsplit((parts.scheme, netloc, parts.path, "", ""))


def http_status(exc: MCPError) -> int | None:
    """The HTTP status of an error made from one (``tools.mcp.http``), else ``None``."""
    data = exc.data
    if exc.code == HTTP_STATUS_ERROR and isinstance(data, dict) and isinstance(data.get("status"), int):
        return int(data["status"])
    return None


def is_error_answer(exc: BaseException) -> bool:
    """Whether ``exc`` is the server's (or its HTTP front's) answer to one call, not a lost session.

    A malformed result (pydantic's ``ValidationError``, or structured content the SDK finds does
    not match the tool's listed output schema) is an answer too: the server is there."""
    if isinstance(exc, ValidationError) or breaks_output_schema(exc):
        return True
    if not isinstance(exc, MCPError):
        return False
    if exc.code == CONNECTION_CLOSED:
        return False
    status = http_status(exc)
    return status is None or not (status >= 500 or status == 404)


def breaks_output_schema(exc: BaseException) -> bool:
    """The SDK's ``RuntimeError`` for a result that does not match the tool's listed output schema
    (``ClientSession.validate_tool_result``; it has no exception type of its own)."""
    text = str(exc)
    return isinstance(exc, RuntimeError) and (
        text.startswith(("Invalid structured content returned by tool", "Invalid schema for tool"))
        or "has an output schema but did not return structured content" in text
    )


def is_timeout(exc: BaseException) -> bool:
    """The SDK's own read timeout of one request (a call that took too long, not a lost session)."""
    return isinstance(exc, MCPError) and exc.code == REQUEST_TIMEOUT


def error_answer(server: str, tool: str, exc: BaseException, redactor: Redactor) -> mcp_types.CallToolResult:
    """The ``isError`` result the model reads for an error answer to one call."""
    if isinstance(exc, ValidationError):
        said = f"its answer to {tool} is not a valid MCP result: {exc.error_count()} problem(s)"
    elif breaks_output_schema(exc):
        said = f"its answer to {tool} does not match the output schema it lists: {exc}"
    else:
        said = f"it answered {tool} with {describe_error(exc)}"
    text = shown(f"MCP server {server}: {said}", redactor)
    return mcp_types.CallToolResult(content=[mcp_types.TextContent(type="text", text=text)], is_error=True)


def shown(text: str, redactor: Redactor, limit: int = MAX_ERROR_CHARS) -> str:
    """``text`` redacted, then cut to ``limit`` characters (redacting first: a cut must not split a
    secret and leave half of it readable)."""
    redacted = redactor.redact(text)
    if len(redacted) <= limit:
        return redacted
    return f"{redacted[:limit]} ... [cut: {len(redacted)} characters in all]"


def _mcp_error_text(exc: MCPError) -> str:
    if exc.code == CONNECTION_CLOSED:
        return "the connection to the server closed"
    if exc.code == REQUEST_TIMEOUT:
        return "the server did not answer in time"
    if http_status(exc) is not None:
        return exc.message  # already "HTTP 401 Unauthorized from ...", made by tools.mcp.http
    text = f"JSON-RPC error {exc.code}: {exc.message}"
    if exc.data is not None:
        text += f" (data: {_compact(exc.data)})"
    return text


def _compact(data: Any) -> str:
    return json.dumps(data, ensure_ascii=False, sort_keys=True, default=str)[: MAX_ERROR_CHARS + 1]
