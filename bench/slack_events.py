"""Signed Slack event deliveries as a load generator sends them (``bench.loadgen``): the
benchmarks' workspace shares one signing secret, bot token and bot user."""

from __future__ import annotations

import json

from bench import loadgen
from emulator.slack import signature

SECRET = "bench-signing-secret"
TOKEN = "xoxb-bench-token"
BOT_USER = "U_OPS"


def mention_request(
    port: int, stamp: str, event_id: str, channel: str, ts: str, user: str, text: str
) -> bytes:
    """One signed ``app_mention`` delivery (an HTTP/1.1 request with keep-alive), as Slack sends it."""
    event = {"type": "app_mention", "user": user, "text": text, "ts": ts, "channel": channel, "event_ts": ts}
    body = json.dumps(
        {
            "token": "unused",
            "team_id": "T_EMULATOR",
            "api_app_id": "A_OPS",
            "event": event,
            "type": "event_callback",
            "event_id": event_id,
            "event_time": int(stamp),
            "authorizations": [{"team_id": "T_EMULATOR", "user_id": BOT_USER, "is_bot": True}],
        }
    ).encode()
    headers = {
        "Content-Type": "application/json",
        "X-Slack-Request-Timestamp": stamp,
        "X-Slack-Signature": signature(SECRET, stamp, body),
    }
    return loadgen.post("127.0.0.1", port, "/slack/events", body, headers)
