"""Hostile requests to the web app: signatures, replays, huge bodies, malformed payloads.

Only requests signed with the signing secret, less than five minutes old, reach the handlers;
everything else is refused with 401 and stores nothing. A body over 1 MB is refused with 413
before it is read. A signed payload of the wrong shape is ignored with a 2xx (a 5xx would make
Slack retry the same garbage three times) and the app keeps serving.
"""

from __future__ import annotations

import io
import json
import socket
import time
import urllib.parse
from typing import Any
from wsgiref.util import setup_testing_defaults

import pytest
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from bot.slack.handlers.app import Click
from bot.slack.handlers.runtime import WebRuntime
from bot.slack.rendering import render
from bot.web.server import MAX_BODY_BYTES, WebApp
from emulator.slack import signature
from tests.support.slack_bot import SlackBot
from tests.support.slack_http import event_envelope, http, signed_post
from tests.support.slack_workspace import BOT_USER, CHANNEL, SECRET

pytestmark = pytest.mark.reliability


def mention_body(ts: str, event_id: str, text: str = "plan: check_health") -> bytes:
    event = {
        "type": "app_mention",
        "user": "U_ALICE",
        "text": f"<@{BOT_USER}> {text}",
        "ts": ts,
        "channel": CHANNEL,
    }
    return json.dumps(event_envelope(event, event_id)).encode()


def new_ts() -> str:
    return f"{time.time():.6f}"


def stored_keys(bot: SlackBot) -> list[bytes]:
    return list(bot.redis.scan_iter(match=f"{bot.settings.chatops_redis_prefix}*"))


def runs(bot: SlackBot) -> int:
    return int(bot.redis.zcard(bot.keys.active_runs()))


# -- signatures ----------------------------------------------------------------------------------------


def test_forged_missing_and_stale_signatures_are_refused_and_store_nothing(bot: SlackBot) -> None:
    body = mention_body(new_ts(), "EvHostile1")
    stamp = str(int(time.time()))
    attempts = {
        "forged": signed_post(bot.events_url, body, secret="guessed-secret"),
        "missing": http(bot.events_url, body, {"Content-Type": "application/json"}),
        "no timestamp": http(
            bot.events_url,
            body,
            {"Content-Type": "application/json", "X-Slack-Signature": signature(SECRET, stamp, body)},
        ),
        "replayed after 5 minutes": signed_post(bot.events_url, body, timestamp=int(time.time()) - 301),
        "from the future": signed_post(bot.events_url, body, timestamp=int(time.time()) + 301),
        "body changed after signing": http(
            bot.events_url,
            body.replace(b"check_health", b"restart_service"),
            {
                "Content-Type": "application/json",
                "X-Slack-Request-Timestamp": stamp,
                "X-Slack-Signature": signature(SECRET, stamp, body),
            },
        ),
    }
    assert {name: result.status for name, result in attempts.items()} == dict.fromkeys(attempts, 401)
    assert stored_keys(bot) == [] and runs(bot) == 0
    assert signed_post(bot.events_url, body).status == 200  # the genuine request still works
    assert runs(bot) == 1


def test_a_replayed_genuine_request_within_five_minutes_starts_nothing_twice(bot: SlackBot) -> None:
    body = mention_body(new_ts(), "EvReplay")
    stamp = int(time.time())
    first = signed_post(bot.events_url, body, timestamp=stamp)
    replays = [signed_post(bot.events_url, body, timestamp=stamp) for _ in range(5)]
    assert first.status == 200 and all(r.status == 200 for r in replays)
    assert runs(bot) == 1
    bot.work()
    assert len(bot.executions("check_health")) == 1


# -- huge bodies ---------------------------------------------------------------------------------------


def raw_request(url: str, head: bytes, body_part: bytes, timeout: float = 60.0) -> bytes:
    """Send headers and part of a body, then read whatever the server answers (``timeout``: a hang)."""
    parsed = urllib.parse.urlsplit(url)
    with socket.create_connection((parsed.hostname, parsed.port), timeout=timeout) as sock:
        sock.sendall(head + body_part)
        return sock.recv(4096)


def test_a_body_over_1_mb_is_refused_before_it_is_read(bot: SlackBot) -> None:
    path = urllib.parse.urlsplit(bot.events_url).path
    stamp = str(int(time.time()))
    head = (
        f"POST {path} HTTP/1.1\r\nHost: localhost\r\nContent-Type: application/json\r\n"
        f"Content-Length: {50 * 1024 * 1024}\r\nX-Slack-Request-Timestamp: {stamp}\r\n"
        "X-Slack-Signature: v0=00\r\n\r\n"
    ).encode()
    # 1 KB of the promised 50 MB, and the rest never comes: a 413 is answered without waiting for it
    # (a server that waited would answer nothing, or time the body out with a 408).
    answer = raw_request(bot.events_url, head, b"{" + b"x" * 1000)
    assert answer.startswith(b"HTTP/1.") and b" 413 " in answer.split(b"\r\n")[0], answer[:200]
    assert stored_keys(bot) == []


class CountingInput(io.BytesIO):
    """A request body that counts how much of it the app read."""

    consumed = 0

    def read(self, size: int | None = -1) -> bytes:
        data = super().read(size)
        self.consumed += len(data)
        return data


def call_app(bot: SlackBot, body: bytes) -> tuple[str, CountingInput]:
    app = WebApp(WebRuntime(bot.settings, tuning=bot.tuning))
    stream = CountingInput(body)
    stamp = str(int(time.time()))
    environ = {
        "REQUEST_METHOD": "POST",
        "PATH_INFO": "/slack/events",
        "CONTENT_TYPE": "application/json",
        "CONTENT_LENGTH": str(len(body)),
        "HTTP_X_SLACK_REQUEST_TIMESTAMP": stamp,
        "HTTP_X_SLACK_SIGNATURE": signature(SECRET, stamp, body),
        "wsgi.input": stream,
    }
    setup_testing_defaults(environ)
    statuses: list[str] = []
    b"".join(app(environ, lambda status, headers, *rest: statuses.append(status)))
    return statuses[0], stream


def test_a_signed_body_just_over_the_limit_gets_413_with_nothing_read(bot: SlackBot) -> None:
    body = mention_body(new_ts(), "EvBig")
    big = body[:-1] + b" " * (MAX_BODY_BYTES + 1 - len(body)) + b"}"
    status, stream = call_app(bot, big)
    assert status.startswith("413") and stream.consumed == 0
    small = body[:-1] + b" " * (MAX_BODY_BYTES - len(body)) + b"}"
    status, stream = call_app(bot, small)
    assert status.startswith("200") and stream.consumed == MAX_BODY_BYTES
    assert runs(bot) == 1


# -- payloads of the wrong shape --------------------------------------------------------------------------

BAD_EVENTS: dict[str, Any] = {
    "event is a list": [],
    "event is a string": "app_mention",
    "no channel": {"type": "app_mention", "user": "U_ALICE", "text": "hi", "ts": "1.1"},
    "no ts": {"type": "app_mention", "user": "U_ALICE", "text": "hi", "channel": CHANNEL},
    "user is an object": {
        "type": "app_mention",
        "user": {"id": "U1"},
        "text": "hi",
        "ts": "1.1",
        "channel": CHANNEL,
    },
    "ts is a number": {"type": "app_mention", "user": "U_ALICE", "text": "hi", "ts": 1.5, "channel": CHANNEL},
    "channel is a list": {
        "type": "app_mention",
        "user": "U_ALICE",
        "text": "hi",
        "ts": "1.1",
        "channel": [CHANNEL],
    },
    "channel with a space": {
        "type": "app_mention",
        "user": "U_ALICE",
        "text": "hi",
        "ts": "1.1",
        "channel": "C 1",
    },
    "files is a string": {
        "type": "message",
        "user": "U_BOB",
        "text": "x",
        "ts": "2.2",
        "thread_ts": "1.1",
        "channel": CHANNEL,
        "files": "f",
    },
    "reply without channel": {
        "type": "message",
        "user": "U_BOB",
        "text": "x",
        "ts": "2.2",
        "thread_ts": "1.1",
    },
    "reply thread_ts is a dict": {
        "type": "message",
        "user": "U_BOB",
        "text": "x",
        "ts": "2.2",
        "thread_ts": {},
        "channel": CHANNEL,
    },
}


@pytest.mark.parametrize("case", sorted(BAD_EVENTS))
def test_a_signed_event_of_the_wrong_shape_is_ignored_without_a_5xx(bot: SlackBot, case: str) -> None:
    envelope = event_envelope({}, f"EvBad{abs(hash(case))}")
    envelope["event"] = BAD_EVENTS[case]
    status = signed_post(bot.events_url, json.dumps(envelope).encode()).status
    assert status < 500, f"{case}: {status} (Slack would retry it)"
    assert runs(bot) == 0
    assert signed_post(bot.events_url, mention_body(new_ts(), "EvAfter")).status == 200
    assert runs(bot) == 1


BAD_BODIES: dict[str, tuple[bytes, str]] = {
    "not json": (b"{not json", "application/json"),
    "json list": (b"[1, 2]", "application/json"),
    "event_id is a list": (
        json.dumps({"type": "event_callback", "event_id": ["x"], "event": {"type": "app_mention"}}).encode(),
        "application/json",
    ),
    "payload not json": (b"payload=%7Bnope", "application/x-www-form-urlencoded"),
    "payload is a list": (
        urllib.parse.urlencode({"payload": "[]"}).encode(),
        "application/x-www-form-urlencoded",
    ),
    "block_actions without actions": (
        urllib.parse.urlencode(
            {"payload": json.dumps({"type": "block_actions", "user": {"id": "U_BOB"}})}
        ).encode(),
        "application/x-www-form-urlencoded",
    ),
    "block_actions with odd types": (
        urllib.parse.urlencode(
            {
                "payload": json.dumps(
                    {
                        "type": "block_actions",
                        "user": "U_BOB",
                        "actions": [{"action_id": "chatops_approve", "value": 7}],
                        "container": [],
                    }
                )
            }
        ).encode(),
        "application/x-www-form-urlencoded",
    ),
    "view_submission with broken metadata": (
        urllib.parse.urlencode(
            {
                "payload": json.dumps(
                    {
                        "type": "view_submission",
                        "user": {"id": "U_BOB"},
                        "view": {
                            "type": "modal",
                            "callback_id": "chatops_decline_reason",
                            "private_metadata": "{oops",
                        },
                    }
                )
            }
        ).encode(),
        "application/x-www-form-urlencoded",
    ),
}


@pytest.mark.parametrize("case", sorted(BAD_BODIES))
def test_a_signed_body_of_the_wrong_shape_changes_nothing(bot: SlackBot, case: str) -> None:
    body, content_type = BAD_BODIES[case]
    result = signed_post(bot.events_url, body, content_type=content_type)
    assert result.status < 500 or result.status == 404, f"{case}: {result.status}"
    bot.settle()  # what the answer handed on, if anything, is done
    assert runs(bot) == 0
    assert bot.calls("chat.postMessage") == [] and bot.calls("chat.update") == []
    assert signed_post(bot.events_url, mention_body(new_ts(), "EvAfter2")).status == 200


# -- properties of the payload parsers ------------------------------------------------------------------

JSON = st.recursive(
    st.none() | st.booleans() | st.integers() | st.floats(allow_nan=False) | st.text(max_size=20),
    lambda children: (
        st.lists(children, max_size=4) | st.dictionaries(st.text(max_size=8), children, max_size=4)
    ),
    max_leaves=12,
)
FIELDS = ["type", "user", "text", "ts", "thread_ts", "channel", "subtype", "bot_id", "files", "event_ts"]


def events() -> st.SearchStrategy[dict[str, Any]]:
    """Event objects with the fields the handlers read, each of any JSON type (or missing)."""
    value = JSON | st.sampled_from(["U_ALICE", CHANNEL, "1.1", "2.2", f"<@{BOT_USER}> plan: check_health"])
    return st.fixed_dictionaries({}, optional={name: value for name in FIELDS}).map(
        lambda event: {
            **event,
            "type": event.get("type") if event.get("type") in ("message", "app_mention") else "app_mention",
        }
    )


@settings(max_examples=150, deadline=None, suppress_health_check=list(HealthCheck))
@given(event=events(), event_id=st.text(min_size=1, max_size=12) | JSON)
def test_any_event_shape_is_answered_without_a_5xx(
    bot: SlackBot, event: dict[str, Any], event_id: Any
) -> None:
    body = json.dumps({**event_envelope(event, "x"), "event_id": event_id}).encode()
    status = signed_post(bot.events_url, body).status
    # 503 is the one deliberate non-2xx: the same message is being stored by another request.
    assert status < 500 or status == 503, (status, event)


@settings(max_examples=300, deadline=None)
@given(
    body=st.dictionaries(
        st.sampled_from(["user", "actions", "container", "message", "channel", "trigger_id", "view"]), JSON
    )
)
def test_a_click_payload_of_any_shape_parses_to_strings_or_nothing(body: dict[str, Any]) -> None:
    click = Click.from_body(body)
    assert all(
        isinstance(value, str)
        for value in (click.user, click.value, click.channel, click.message_ts, click.trigger_id)
    )
    assert click.thread_ts is None or isinstance(click.thread_ts, str)


@settings(max_examples=300, deadline=None)
@given(view=st.dictionaries(st.sampled_from(["state", "private_metadata", "callback_id"]), JSON | st.text()))
def test_a_modal_of_any_shape_gives_a_reason_and_metadata_or_nothing(view: dict[str, Any]) -> None:
    reason = render.modal_reason(view)
    assert reason is None or (isinstance(reason, str) and reason == reason.strip() and reason)
    metadata = render.modal_metadata(view)
    assert all(isinstance(k, str) and isinstance(v, str) for k, v in metadata.items())
