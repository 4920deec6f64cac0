"""The operator's Prometheus and Alertmanager APIs, as the observability tools reach them.

An ``Endpoint`` is built once at start-up from ``CHATOPS_PROMETHEUS_URL`` / ``..._HEADERS`` (or
the Alertmanager pair) and is the only place those tools send requests:

* **where**: the configured base URL and nothing else. The model supplies queries and matchers,
  never a URL: they travel as query parameters or in a JSON body, percent-encoded, so no value can
  change the path, the host or the port. The endpoint's egress policy holds exactly one entry,
  the configured ``host:port`` (``fixed_url_entry``, as a catalog http tool with a fixed host is
  allowed): reachable whatever ``CHATOPS_EGRESS_ALLOW`` says, and nothing else is, not even a
  redirect (none is followed);
* **how much**: every request goes through ``tools.http_client`` (one deadline, a body cap). A
  body cut at the cap is not thrown away: ``salvage_array`` decodes the complete items before the
  cut, so 100,000 series cost the cap in memory and still answer with the first ones;
* **secrets**: header values may be ``${ENV_NAME}`` references (the catalog's helpers, read once
  at start-up); every value is a secret, redacted from what the tools return and never shown on
  an approval card (``describe_headers`` names the headers only).

Label sets are written the way PromQL writes them (``up{instance="web-03:9100", job="node"}``),
values escaped (quotes, backslashes, newlines, invisible characters) so a hostile label cannot
forge a line, and shortened.
"""

from __future__ import annotations

import json
import re
from collections.abc import Callable, Iterable, Mapping, Sequence
from dataclasses import dataclass, replace
from typing import Any, TypeVar
from urllib.parse import urlencode, urlsplit

import httpx

from agent.tooling import ToolResult
from tools import http_client
from tools.base import ToolContext, error_result
from tools.egress import EgressPolicy, fixed_url_entry, parse_entry
from tools.env_references import env_references, expand_env
from tools.errors import ToolCallError, ToolConfigError
from tools.safety import Redactor
from tools.text import human_bytes, shorten

MAX_BODY_BYTES = 2 * 1024 * 1024
MAX_LABELS_SHOWN = 30
MAX_LABEL_VALUE_CHARS = 120
# RFC 9110 token characters: a header name from the settings is checked before any request.
_HEADER_NAME = re.compile(r"[!#$%&'*+.^_`|~0-9A-Za-z-]+")
_LABEL_NAME = re.compile(r"[A-Za-z_][A-Za-z0-9_]*")
_EMPTY_CREDENTIALS = ("", "bearer", "basic", "token", "apikey")
ArgsT = TypeVar("ArgsT")
Step = Callable[["Endpoint", ArgsT, ToolContext], ToolResult]


@dataclass(frozen=True)
class Endpoint:
    """One configured HTTP API: its base URL, its headers (secrets) and the policy reaching it."""

    service: str
    """``Prometheus`` or ``Alertmanager``: how results and errors name it."""
    setting: str
    """The setting holding the URL, named in errors (``CHATOPS_PROMETHEUS_URL``)."""
    base_url: str
    """Without a trailing slash; API paths are appended to it."""
    headers: Mapping[str, str]
    egress: EgressPolicy
    redactor: Redactor

    def url(self, path: str, params: Sequence[tuple[str, str]] = ()) -> str:
        """``base_url + path``, with ``params`` percent-encoded into the query string."""
        query = urlencode(list(params))
        return f"{self.base_url}{path}?{query}" if query else f"{self.base_url}{path}"

    def request(
        self,
        method: str,
        path: str,
        *,
        timeout: float,
        params: Sequence[tuple[str, str]] = (),
        payload: Any = None,
        max_body_bytes: int = MAX_BODY_BYTES,
        tool_timeout: float | None = None,
    ) -> http_client.HttpResponse:
        """One bounded request, ending within ``timeout`` seconds; a network failure is a
        ``ToolCallError`` naming the service (and ``tool_timeout``, the tool's whole time, when
        the request ran out of it)."""
        headers = dict(self.headers)
        body = None
        if payload is not None:
            body = json.dumps(payload)
            headers["Content-Type"] = "application/json"
        try:
            return http_client.request(
                method,
                self.url(path, params),
                timeout=max(0.1, timeout),
                egress=self.egress,
                headers=headers,
                body=body,
                max_body_bytes=max_body_bytes,
            )
        except httpx.HTTPError as exc:
            reason = http_client.describe_http_error(exc, tool_timeout or timeout)
            raise ToolCallError(f"{self.service} ({self.setting}) did not answer: {reason}") from None

    def redact(self, text: str) -> str:
        return self.redactor.redact(text)

    def describe_headers(self) -> str | None:
        """The headers sent, by name only (their values are secrets)."""
        return f"headers: {', '.join(self.headers)} (values not shown)" if self.headers else None


def redacting(endpoint: Endpoint, step: Step[ArgsT]) -> Callable[[ArgsT, ToolContext], ToolResult]:
    """A tool function running ``step`` on ``endpoint``, its result and its errors redacted with
    the endpoint's header values (a server may echo the token it was sent), the names of the
    series it carries for a chart too."""

    def run(args: ArgsT, ctx: ToolContext) -> ToolResult:
        try:
            result = step(endpoint, args, ctx)
        except ToolCallError as exc:
            result = error_result(str(exc))
        stable = None if result.stable_output is None else endpoint.redact(result.stable_output)
        series = None if result.series is None else result.series.redacted(endpoint.redact)
        return replace(result, output=endpoint.redact(result.output), stable_output=stable, series=series)

    return run


def configure_endpoint(
    service: str,
    setting: str,
    url: str,
    headers: Mapping[str, str],
    *,
    env: Mapping[str, str],
    egress: EgressPolicy,
) -> Endpoint | None:
    """The endpoint for ``url`` (``None`` when it is empty: the tools are not offered).

    Raises ``ToolConfigError`` for a URL that is not a plain http(s) base URL, a bad header name,
    or a ``${NAME}`` whose variable is not set (its value is never in the message).
    """
    base = url.strip()
    if not base:
        return None
    own_host = _check_base_url(setting, base)
    headers_setting = setting.replace("_URL", "_HEADERS")
    sent = {name: _header_value(headers_setting, name, value, env) for name, value in headers.items()}
    try:
        own_entry = parse_entry(own_host)
    except ToolConfigError as exc:
        raise ToolConfigError(f"{setting}: {exc}") from None
    # Exactly the configured host and port, nothing from the allow list, no approvals for others.
    own_policy = replace(egress, entries=(own_entry,), unlisted="refuse", approved=None)
    return Endpoint(
        service=service,
        setting=setting,
        base_url=base.rstrip("/"),
        headers=sent,
        egress=own_policy,
        redactor=Redactor(secrets=secret_parts(sent.values())),
    )


def secret_parts(values: Iterable[str]) -> list[str]:
    """Each header value, and its credential alone (``Bearer TOKEN`` -> ``TOKEN`` too): an answer
    may echo the token without its scheme."""
    given = list(values)
    parts = [*given, *(value.split()[-1] for value in given if len(value.split()) > 1)]
    return list(dict.fromkeys(parts))


def _check_base_url(setting: str, url: str) -> str:
    """The ``host:port`` entry of a base URL; ``ToolConfigError`` for anything but a plain one."""
    parts = urlsplit(url)
    own_host = fixed_url_entry(url)
    if own_host is None or not parts.hostname:
        raise ToolConfigError(f"{setting} must be an http:// or https:// URL with a host, got {url!r}")
    if parts.username is not None or parts.password is not None:
        raise ToolConfigError(
            f"{setting}: put credentials in {setting.replace('_URL', '_HEADERS')}, not in the URL"
        )
    if parts.query or parts.fragment or "?" in url or "#" in url:
        raise ToolConfigError(f"{setting} must be a base URL without a query or fragment, got {url!r}")
    return own_host


def _header_value(setting: str, name: str, value: str, env: Mapping[str, str]) -> str:
    if not _HEADER_NAME.fullmatch(name):
        raise ToolConfigError(f"{setting}: {name!r} is not a valid header name")
    for variable in env_references(value):
        if variable not in env:
            raise ToolConfigError(f"{setting}: header {name} uses ${{{variable}}}, which is not set")
    expanded = expand_env(value, env)
    if any(char in expanded for char in "\r\n\0"):
        raise ToolConfigError(f"{setting}: the value of header {name} holds a line break or NUL")
    if expanded.strip().lower() in _EMPTY_CREDENTIALS:
        # In .env, python-dotenv expands ${NAME} as it reads the file: an unset one becomes "".
        raise ToolConfigError(
            f"{setting}: header {name} has no value (in .env, a ${{NAME}} whose variable is not set "
            "is read as empty)"
        )
    return expanded


# -- answers ----------------------------------------------------------------------------------------


def cut_note(response: http_client.HttpResponse) -> str:
    """What a result says when the answer was larger than the cap."""
    return f"the answer was larger than {human_bytes(response.body_bytes)} and was cut there"


def salvage_array(text: str, start: int) -> list[Any]:
    """The complete JSON values of the array whose items start at ``text[start]`` (just after
    its ``[``), up to the end of the array or the first item cut off (a truncated body)."""
    decoder = json.JSONDecoder()
    items: list[Any] = []
    position = start
    while True:
        position = _skip_space(text, position)
        if position >= len(text) or text[position] == "]":
            return items
        try:
            item, position = decoder.raw_decode(text, position)
        except (ValueError, RecursionError):  # the item the cut went through, or a hostile nesting
            return items
        items.append(item)
        position = _skip_space(text, position)
        if position < len(text) and text[position] == ",":
            position += 1


def _skip_space(text: str, position: int) -> int:
    while position < len(text) and text[position] in " \t\r\n":
        position += 1
    return position


def error_text(response: http_client.HttpResponse) -> str:
    """The message of an error answer: a JSON string or ``{"error": ...}``, else the body's start."""
    body = response.body.strip()
    try:
        parsed = json.loads(body)
    except (ValueError, RecursionError):
        parsed = None
    if isinstance(parsed, str):
        body = parsed
    elif isinstance(parsed, dict) and isinstance(parsed.get("error"), str):
        body = parsed["error"]
    detail = shorten(" ".join(body.split()), 500)
    return f"HTTP {response.status} {response.reason}" + (f": {detail}" if detail else "")


# -- labels and numbers -------------------------------------------------------------------------------


def quote(value: object, limit: int = MAX_LABEL_VALUE_CHARS) -> str:
    """A value as a double-quoted string: shortened, then escaped (``"``, ``\\``, newlines and every
    invisible character), so it stays on its line and cannot pass for another label."""
    text = value if isinstance(value, str) else json.dumps(value)
    escaped = json.dumps(shorten(text, limit), ensure_ascii=False)
    return "".join(char if char.isprintable() else f"\\u{ord(char):04x}" for char in escaped)


def format_labels(labels: object, skip: Iterable[str] = ()) -> str:
    """``{instance="web-03:9100", job="node"}``, sorted by name; at most ``MAX_LABELS_SHOWN``."""
    if not isinstance(labels, Mapping):
        return "{}"
    skipped = set(skip)
    pairs = sorted((str(name), value) for name, value in labels.items() if name not in skipped)
    shown = [f"{_label_name(name)}={quote(value)}" for name, value in pairs[:MAX_LABELS_SHOWN]]
    if len(pairs) > MAX_LABELS_SHOWN:
        shown.append(f"... {len(pairs) - MAX_LABELS_SHOWN} more labels")
    return "{" + ", ".join(shown) + "}"


def series_name(labels: object) -> str:
    """A series as PromQL writes it: ``up{instance="...", job="..."}`` (a name that is no metric
    name, e.g. from a hostile server, stays a quoted label)."""
    if not isinstance(labels, Mapping):
        return "{}"
    name = labels.get("__name__")
    if isinstance(name, str) and _LABEL_NAME.fullmatch(name) and len(name) <= MAX_LABEL_VALUE_CHARS:
        return name + format_labels(labels, skip=("__name__",))
    return format_labels(labels)


def _label_name(name: str) -> str:
    return name if _LABEL_NAME.fullmatch(name) and len(name) <= MAX_LABEL_VALUE_CHARS else quote(name)


def parse_number(value: object) -> float | None:
    """A sample value (Prometheus sends ``"1.5"``, ``"NaN"``, ``"+Inf"``); ``None`` if it is none."""
    if not isinstance(value, str | int | float) or isinstance(value, bool):
        return None
    try:
        return float(value)
    except ValueError:
        return None


def format_number(value: float) -> str:
    """``1``, ``0.00123``, ``1.5e+09``, ``NaN``, ``+Inf``: six significant digits at most."""
    if value != value:
        return "NaN"
    if value in (float("inf"), float("-inf")):
        return "+Inf" if value > 0 else "-Inf"
    if value == int(value) and abs(value) < 1e15:
        return str(int(value))
    return f"{value:.6g}"
