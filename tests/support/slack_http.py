"""Requests to the bot as Slack sends them (signed), and plain HTTP without any proxy."""

from __future__ import annotations

import json
import time
import urllib.error
import urllib.request
from dataclasses import dataclass
from typing import Any

from emulator.slack import signature
from tests.support.slack_workspace import BOT_USER, SECRET

_OPENER = urllib.request.build_opener(urllib.request.ProxyHandler({}))


@dataclass(frozen=True)
class HttpResult:
    status: int
    body: bytes

    def json(self) -> Any:
        return json.loads(self.body)


def http(url: str, body: bytes | None = None, headers: dict[str, str] | None = None) -> HttpResult:
    request = urllib.request.Request(url, data=body, headers=headers or {}, method="POST" if body else "GET")
    try:
        with _OPENER.open(request, timeout=10) as response:
            return HttpResult(response.status, response.read())
    except urllib.error.HTTPError as error:
        return HttpResult(error.code, error.read())


def signed_post(
    url: str,
    body: bytes,
    *,
    secret: str = SECRET,
    timestamp: int | None = None,
    content_type: str = "application/json",
    extra: dict[str, str] | None = None,
) -> HttpResult:
    """POST as Slack does: ``X-Slack-Signature`` over ``v0:{timestamp}:{body}``."""
    stamp = str(int(time.time()) if timestamp is None else timestamp)
    headers = {
        "Content-Type": content_type,
        "X-Slack-Request-Timestamp": stamp,
        "X-Slack-Signature": signature(secret, stamp, body),
        **(extra or {}),
    }
    return http(url, body, headers)


def event_envelope(event: dict[str, Any], event_id: str) -> dict[str, Any]:
    """An ``event_callback`` as Slack posts it (for requests a test sends itself)."""
    return {
        "token": "unused",
        "team_id": "T_EMULATOR",
        "api_app_id": "A_OPS",
        "event": event,
        "type": "event_callback",
        "event_id": event_id,
        "event_time": int(time.time()),
        "authorizations": [{"team_id": "T_EMULATOR", "user_id": BOT_USER, "is_bot": True}],
    }
