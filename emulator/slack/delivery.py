"""Signed HTTP requests to the bot, the way Slack sends them: Events API with retries, interactivity without.

Slack signs ``v0:{timestamp}:{raw body}`` with HMAC-SHA256 under the app's signing secret and sends
``X-Slack-Signature: v0=<hex>`` and ``X-Slack-Request-Timestamp``. An event not answered 2xx within
3 seconds is retried (``X-Slack-Retry-Num`` 1..3, ``X-Slack-Retry-Reason``) with the same
``event_id``; a timed-out request is not waited for. A non-2xx answer carrying
``X-Slack-No-Retry: 1`` stops the retries.
"""

from __future__ import annotations

import hashlib
import hmac
import json
import threading
import time
import urllib.error
import urllib.parse
import urllib.request
from dataclasses import dataclass, field
from email.message import Message as Headers
from typing import Any

from emulator.slack.state import Workspace

USER_AGENT = "Slackbot 1.0 (+https://api.slack.com/robots)"
# Ignore any proxy settings: the bot is always on this machine.
_OPENER = urllib.request.build_opener(urllib.request.ProxyHandler({}))


def signature(secret: str, timestamp: str, body: bytes) -> str:
    """Slack's request signature: ``v0=`` + hex HMAC-SHA256 of ``v0:{timestamp}:{body}``."""
    base = b"v0:" + timestamp.encode() + b":" + body
    return "v0=" + hmac.new(secret.encode(), base, hashlib.sha256).hexdigest()


@dataclass
class Attempt:
    """What one POST to the bot came to."""

    status: int | None
    body: bytes = b""
    headers: dict[str, str] = field(default_factory=dict)
    reason: str | None = None  # Slack's retry reason when the attempt failed
    duration: float = 0.0

    @property
    def ok(self) -> bool:
        """True for a 2xx answer."""
        return self.status is not None and 200 <= self.status < 300

    def json(self) -> Any:
        """The answer's body as JSON, or None when it is empty or not JSON."""
        try:
            return json.loads(self.body) if self.body.strip() else None
        except ValueError:
            return None


def post_signed(
    url: str, body: bytes, content_type: str, secret: str, timeout: float, extra: dict[str, str] | None = None
) -> Attempt:
    """POST ``body`` to ``url`` signed with ``secret``; never raises for network trouble."""
    timestamp = str(int(time.time()))
    headers = {
        "Content-Type": content_type,
        "User-Agent": USER_AGENT,
        "Accept": "*/*",
        "X-Slack-Request-Timestamp": timestamp,
        "X-Slack-Signature": signature(secret, timestamp, body),
        **(extra or {}),
    }
    request = urllib.request.Request(url, data=body, headers=headers, method="POST")
    started = time.monotonic()
    try:
        with _OPENER.open(request, timeout=timeout) as response:
            return Attempt(
                response.status, response.read(), _flat(response.headers), None, time.monotonic() - started
            )
    except urllib.error.HTTPError as exc:
        return Attempt(exc.code, exc.read(), _flat(exc.headers), "http_error", time.monotonic() - started)
    except urllib.error.URLError as exc:
        timed_out = isinstance(exc.reason, TimeoutError)
        reason = "http_timeout" if timed_out else "connection_failed"
        return Attempt(None, reason=reason, duration=time.monotonic() - started)
    except TimeoutError:  # socket.timeout is an alias
        return Attempt(None, reason="http_timeout", duration=time.monotonic() - started)
    except OSError:
        return Attempt(None, reason="connection_failed", duration=time.monotonic() - started)


def _flat(headers: Headers) -> dict[str, str]:
    return {key.lower(): value for key, value in headers.items()}


class Deliverer:
    """Sends events (in the background, with Slack's retries) and interactions (synchronously)."""

    def __init__(self, workspace: Workspace) -> None:
        self.ws = workspace
        self._stop = threading.Event()
        self._threads: list[threading.Thread] = []
        self._threads_lock = threading.Lock()

    def close(self) -> None:
        """Stop waiting to retry; deliveries under way finish their current attempt."""
        self._stop.set()

    def deliver_event(self, envelope: dict[str, Any]) -> None:
        """Deliver an ``event_callback`` envelope in the background."""
        thread = threading.Thread(target=self._deliver, args=(envelope,), name="slack-event", daemon=True)
        # Started under the lock so that wait_idle never sees (and joins) a thread not yet started.
        with self._threads_lock:
            thread.start()
            self._threads = [t for t in self._threads if t.is_alive()] + [thread]

    def wait_idle(self, timeout: float) -> bool:
        """Wait for every background delivery to finish; False when some were still running."""
        deadline = time.monotonic() + timeout
        with self._threads_lock:
            threads = list(self._threads)
        for thread in threads:
            thread.join(max(0.0, deadline - time.monotonic()))
        return not any(t.is_alive() for t in threads)

    def _deliver(self, envelope: dict[str, Any]) -> None:
        body = json.dumps(envelope).encode()
        cfg = self.ws.config
        attempt = self._send_event(envelope, body, retry_num=0, reason=None)
        for retry_num, delay in enumerate(cfg.retry_delays, start=1):
            if attempt.ok or attempt.headers.get("x-slack-no-retry") == "1" or attempt.reason == "no_url":
                return
            if self._stop.wait(delay):
                return
            extra = {
                "X-Slack-Retry-Num": str(retry_num),
                "X-Slack-Retry-Reason": attempt.reason or "unknown_error",
            }
            attempt = self._send_event(
                envelope, body, retry_num=retry_num, reason=extra["X-Slack-Retry-Reason"]
            )

    def _send_event(
        self, envelope: dict[str, Any], body: bytes, retry_num: int, reason: str | None
    ) -> Attempt:
        cfg = self.ws.config
        url = cfg.events_url
        extra = {"X-Slack-Retry-Num": str(retry_num), "X-Slack-Retry-Reason": reason} if reason else None
        if not url:
            attempt = Attempt(None, reason="no_url")
        else:
            attempt = post_signed(url, body, "application/json", cfg.signing_secret, cfg.event_timeout, extra)
        self._record(
            kind="event",
            event_id=envelope["event_id"],
            event_type=envelope["event"]["type"],
            retry_num=retry_num,
            retry_reason=reason,
            attempt=attempt,
            url=url,
        )
        return attempt

    def verify_url(self, challenge: str) -> Attempt:
        """Slack's ``url_verification`` handshake: a signed JSON POST the app must echo ``challenge`` to."""
        cfg = self.ws.config
        body = json.dumps(
            {"token": cfg.verification_token, "challenge": challenge, "type": "url_verification"}
        )
        if not cfg.events_url:
            return Attempt(None, reason="no_url")
        return post_signed(
            cfg.events_url, body.encode(), "application/json", cfg.signing_secret, cfg.event_timeout
        )

    def send_app_rate_limited(self, minute_rate_limited: int) -> Attempt:
        """The ``app_rate_limited`` callback Slack sends when the app's events pass 30,000 an hour
        in a workspace (docs.slack.dev/reference/events/app_rate_limited): not an
        ``event_callback``, no ``event``; Slack does not retry it. The app should answer 200."""
        cfg = self.ws.config
        body = {
            "token": cfg.verification_token,
            "type": "app_rate_limited",
            "team_id": cfg.team_id,
            "minute_rate_limited": minute_rate_limited,
            "api_app_id": cfg.app_id,
        }
        if cfg.enterprise_id:
            body["enterprise_id"] = cfg.enterprise_id
        url = cfg.events_url
        if not url:
            attempt = Attempt(None, reason="no_url")
        else:
            attempt = post_signed(
                url, json.dumps(body).encode(), "application/json", cfg.signing_secret, cfg.event_timeout
            )
        self._record(
            kind="callback",
            event_id=None,
            event_type="app_rate_limited",
            retry_num=0,
            retry_reason=None,
            attempt=attempt,
            url=url,
        )
        return attempt

    def send_interaction(self, payload: dict[str, Any]) -> Attempt:
        """POST an interactivity payload (form-encoded ``payload=<json>``) and return the bot's answer.

        Slack does not retry these: the person sees an error when the app does not answer in 3 s.
        """
        cfg = self.ws.config
        url = cfg.interactivity_url or cfg.events_url
        body = urllib.parse.urlencode({"payload": json.dumps(payload)}).encode()
        if not url:
            attempt = Attempt(None, reason="no_url")
        else:
            attempt = post_signed(
                url, body, "application/x-www-form-urlencoded", cfg.signing_secret, cfg.event_timeout
            )
        self._record(
            kind="interaction",
            event_id=None,
            event_type=payload["type"],
            retry_num=0,
            retry_reason=None,
            attempt=attempt,
            url=url,
        )
        return attempt

    def _record(
        self,
        *,
        kind: str,
        event_id: str | None,
        event_type: str,
        retry_num: int,
        retry_reason: str | None,
        attempt: Attempt,
        url: str | None,
    ) -> None:
        record = {
            "kind": kind,
            "event_id": event_id,
            "type": event_type,
            "retry_num": retry_num,
            "retry_reason": retry_reason,
            "status": attempt.status,
            "outcome": "ok" if attempt.ok else attempt.reason,
            "url": url,
            "time": time.time(),
            "duration": round(attempt.duration, 4),
        }
        with self.ws.lock:
            self.ws.deliveries.append(record)
        self.ws.publish({"type": "delivery", "kind": kind})
