"""The Web API front door: ``/api/<method>`` bodies, tokens, injected faults and the call log.

Slack answers HTTP 200 with ``{"ok": false, "error": ...}`` for almost every failure; only rate
limiting (429 + ``Retry-After``) and outages (5xx) change the status. Bodies may be form-encoded
or JSON; query parameters count too (slack_sdk sends reads as GET). Each call is checked in
Slack's order: token, rate limit (``emulator.slack.ratelimits``), scope (``emulator.slack.scopes``),
then the method itself.
"""

from __future__ import annotations

import json
import time
import urllib.parse
from collections.abc import Callable, Mapping
from dataclasses import dataclass, field
from typing import Any

from emulator.slack.blocks import (
    MAX_BLOCKS_TEXT,
    BlocksFormatError,
    block_errors,
    blocks_text_length,
    error_body,
    parse_blocks,
)
from emulator.slack.model import Fault
from emulator.slack.scopes import METHOD_SCOPES, missing_scope
from emulator.slack.state import Workspace


class SlackError(Exception):
    """A method's ``ok: false`` answer: the error code plus any extra fields Slack adds."""

    def __init__(self, error: str, **extra: Any) -> None:
        super().__init__(error)
        self.error = error
        self.extra = extra

    def body(self) -> dict[str, Any]:
        """The JSON Slack answers with."""
        return {"ok": False, "error": self.error, **self.extra}


class BlocksError(SlackError):
    """``invalid_blocks``: the reasons go in ``errors`` and ``response_metadata.messages``."""

    def __init__(self, reasons: list[str]) -> None:
        super().__init__("invalid_blocks")
        self.reasons = reasons

    def body(self) -> dict[str, Any]:
        return error_body("invalid_blocks", self.reasons)


@dataclass
class ApiResult:
    """What a method answers, plus the events it set off (delivered once the lock is released)."""

    body: dict[str, Any]
    status: int = 200
    headers: dict[str, str] = field(default_factory=dict)
    envelopes: list[dict[str, Any]] = field(default_factory=list)
    delay: float = 0.0  # seconds to hold the answer back, once done and recorded (a "slow" fault)


class Params:
    """A method's arguments, typed the way Slack reads them (strings from forms, values from JSON)."""

    def __init__(self, values: Mapping[str, Any]) -> None:
        self.values = dict(values)

    def text(self, name: str, default: str = "") -> str:
        """A string argument ("" when absent)."""
        value = self.values.get(name, default)
        return value if isinstance(value, str) else default if value is None else json.dumps(value)

    def required(self, name: str) -> str:
        """A string argument Slack insists on (``invalid_arguments`` when missing)."""
        value = self.text(name)
        if not value:
            raise SlackError(
                "invalid_arguments", response_metadata={"messages": [f"[ERROR] missing '{name}'"]}
            )
        return value

    def flag(self, name: str) -> bool:
        """A boolean: true/1 as strings or JSON true."""
        value = self.values.get(name)
        return value is True or (isinstance(value, str) and value.lower() in ("true", "1"))

    def number(self, name: str, default: int) -> int:
        """An integer argument; an unparsable one counts as absent."""
        try:
            return int(self.values.get(name, default))
        except (TypeError, ValueError):
            return default

    def json(self, name: str) -> Any:
        """An argument that is JSON: an object in a JSON body, a JSON string in a form body."""
        value = self.values.get(name)
        if isinstance(value, str):
            try:
                return json.loads(value)
            except json.JSONDecodeError:
                raise SlackError("invalid_arguments") from None
        return value

    def blocks(self, limit: int = 50) -> list[dict[str, Any]] | None:
        """``blocks``, checked against Block Kit's limits (``invalid_blocks``) and the total text
        a message's blocks may hold (``msg_blocks_too_long``, ``emulator.slack.blocks``)."""
        try:
            blocks = parse_blocks(self.values.get("blocks"))
        except BlocksFormatError:
            raise SlackError("invalid_blocks_format") from None
        if blocks is not None:
            reasons = block_errors(blocks, limit=limit)
            if reasons:
                raise BlocksError(reasons)
            if blocks_text_length(blocks) > MAX_BLOCKS_TEXT:
                raise SlackError("msg_blocks_too_long")
        return blocks

    def public(self) -> dict[str, Any]:
        """The arguments as recorded for tests: everything but the token."""
        return {k: v for k, v in self.values.items() if k != "token"}


Handler = Callable[[Workspace, Params], ApiResult]
NO_AUTH = frozenset({"api.test"})


def parse_request(content_type: str, query: str, raw: bytes) -> tuple[dict[str, Any], list[str]]:
    """The arguments of a request and the warnings Slack would add about its Content-Type."""
    values: dict[str, Any] = {k: v[-1] for k, v in urllib.parse.parse_qs(query).items()}
    warnings: list[str] = []
    media, _, options = content_type.partition(";")
    media = media.strip().lower()
    has_charset = "charset" in options.lower()
    if not raw.strip():
        return values, warnings
    if media == "application/json":
        if not has_charset:
            warnings.append("missing_charset")
        try:
            body = json.loads(raw)
        except ValueError:
            raise SlackError("invalid_json") from None
        if not isinstance(body, dict):
            raise SlackError("json_not_object")
        values.update(body)
    elif media in ("application/x-www-form-urlencoded", ""):
        if has_charset:
            warnings.append("superfluous_charset")
        try:
            form = urllib.parse.parse_qs(raw.decode("utf-8"), keep_blank_values=True, strict_parsing=True)
        except (UnicodeDecodeError, ValueError):
            raise SlackError("invalid_form_data") from None
        values.update({k: v[-1] for k, v in form.items()})
    else:
        raise SlackError("invalid_post_type")
    return values, warnings


class WebApi:
    """Dispatches ``/api/<method>`` calls to handlers, applying auth, faults and recording."""

    def __init__(
        self,
        workspace: Workspace,
        handlers: Mapping[str, Handler],
        scopes: Mapping[str, tuple[str, ...]] = METHOD_SCOPES,
    ) -> None:
        self.ws = workspace
        self.handlers = dict(handlers)
        self.scopes = dict(scopes)

    def call(
        self, method: str, http_method: str, headers: Mapping[str, str], query: str, raw: bytes
    ) -> ApiResult:
        """Answer one Web API request."""
        started = time.time()
        values: dict[str, Any] = {}
        try:
            values, warnings = parse_request(headers.get("content-type", ""), query, raw)
            result = self._answer(method, headers, Params(values))
        except SlackError as exc:
            warnings, result = [], ApiResult(exc.body())
        if warnings and result.status == 200:
            result.body["warning"] = ",".join(warnings)
            result.body.setdefault("response_metadata", {})["warnings"] = warnings
        self._record(method, http_method, Params(values), result, started)
        if result.delay:
            time.sleep(result.delay)
        return result

    def _answer(self, method: str, headers: Mapping[str, str], params: Params) -> ApiResult:
        handler = self.handlers.get(method)
        if handler is None:
            return ApiResult({"ok": False, "error": "unknown_method", "req_method": method})
        if method not in NO_AUTH:
            self._authenticate(headers, params)
        fault = self._take_fault(method)
        if isinstance(fault, Fault):  # "slow": done now, answered late (a client's read timeout)
            result = self._perform(method, params)
            result.delay = fault.delay
            return result
        if fault is not None:
            return fault
        return self._perform(method, params)

    def _perform(self, method: str, params: Params) -> ApiResult:
        handler = self.handlers[method]
        limited = self._rate_limited(method, params)
        if limited is not None:
            return limited
        if method not in NO_AUTH:
            missing = missing_scope(method, self.ws.config.scopes, self.scopes)
            if missing is not None:
                raise SlackError("missing_scope", **missing)
        with self.ws.lock:
            try:
                result = handler(self.ws, params)
            except SlackError as exc:
                result = ApiResult(exc.body())
        if method not in NO_AUTH:
            result.headers.setdefault("x-oauth-scopes", ",".join(self.ws.config.scopes))
        return result

    def _authenticate(self, headers: Mapping[str, str], params: Params) -> None:
        auth = headers.get("authorization", "")
        token = auth[len("Bearer ") :].strip() if auth.lower().startswith("bearer ") else params.text("token")
        if not token:
            raise SlackError("not_authed")
        if token != self.ws.config.bot_token:
            raise SlackError("invalid_auth")

    def _rate_limited(self, method: str, params: Params) -> ApiResult | None:
        """429 with ``Retry-After`` once the method's tier (or the channel's pace) is used up."""
        if not self.ws.config.rate_limits:
            return None
        channel = params.text("channel_id" if method == "files.completeUploadExternal" else "channel")
        wait = self.ws.limiter.retry_after(method, channel)
        if wait is None:
            return None
        return ApiResult(
            {"ok": False, "error": "ratelimited"}, status=429, headers={"Retry-After": str(wait)}
        )

    def _take_fault(self, method: str) -> ApiResult | Fault | None:
        with self.ws.lock:
            fault = next((f for f in self.ws.faults if f.method in (method, "*") and f.remaining > 0), None)
            if fault is None:
                return None
            fault.remaining -= 1
            if fault.remaining == 0:
                self.ws.faults.remove(fault)
        if fault.kind == "slow":
            return fault
        if fault.kind == "ratelimited":
            return ApiResult(
                {"ok": False, "error": "ratelimited"},
                status=429,
                headers={"Retry-After": str(fault.retry_after)},
            )
        if fault.kind == "http_error":
            return ApiResult({"ok": False, "error": fault.error}, status=fault.status)
        return ApiResult({"ok": False, "error": fault.error})

    def _record(
        self, method: str, http_method: str, params: Params, result: ApiResult, started: float
    ) -> None:
        record = {
            "method": method,
            "http_method": http_method,
            "params": params.public(),
            "time": started,
            "status": result.status,
            "ok": bool(result.body.get("ok")),
            "error": result.body.get("error"),
            "response": result.body,
        }
        with self.ws.lock:
            self.ws.calls.append(record)
        self.ws.publish({"type": "call", "method": method})
