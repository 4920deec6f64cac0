"""Rate limits: Slack's tiers per method and ``chat.postMessage``'s one message a second per channel.

From Slack's rate-limit guide (docs.slack.dev/apis/web-api/rate-limits; api.slack.com/apis/rate-limits):
limits apply "per API method per app per workspace" in per-minute windows: Tier 1 "1+ per
minute", Tier 2 "20+ per minute", Tier 3 "50+ per minute", Tier 4 "100+ per minute"; posting
messages is "1 per second" per channel, "short bursts >1 allowed". Over the limit Slack answers
HTTP 429 with ``Retry-After`` (seconds) and ``{"ok": false, "error": "ratelimited"}``.

The emulator takes the lower bound of each tier as the whole allowance (a token bucket holding
one minute's worth, refilled evenly), and allows a burst of ``POST_BURST`` messages per channel:
stricter than Slack, which tolerates "occasional bursts" above the floor. The tier of each
method is the one on its reference page. ``WorkspaceConfig.rate_limits=False`` turns all of it
off, for the few tests that measure something else and say so explicitly.
"""

from __future__ import annotations

import math
import threading
import time
from collections.abc import Callable, Mapping
from dataclasses import dataclass

PER_MINUTE = {1: 1, 2: 20, 3: 50, 4: 100}
POST_PER_SECOND = 1.0
POST_BURST = 3  # messages in a row to one channel before the 1/s pace applies
# Methods that put a message in a channel, sharing its pace (a file shared with a comment is a post).
POSTING_METHODS = frozenset({"chat.postMessage", "files.completeUploadExternal"})

# method -> tier (docs.slack.dev/reference/methods/<method>, "Rate Limits").
METHOD_TIERS: dict[str, int] = {
    "api.test": 4,
    "auth.test": 4,  # "Special": thousands an hour; Tier 4 is the stricter stand-in
    "chat.postMessage": 4,  # workspace-wide; plus 1/s per channel (POST_PER_SECOND, POST_BURST)
    "chat.update": 3,
    "chat.postEphemeral": 4,
    "chat.delete": 3,
    "chat.getPermalink": 4,
    "reactions.add": 3,
    "reactions.remove": 2,
    "conversations.history": 3,  # internal apps; Tier 1 for non-Marketplace distributed apps (2025)
    "conversations.replies": 3,
    "conversations.info": 3,
    "users.conversations": 3,
    "users.info": 4,
    "users.list": 2,
    "usergroups.list": 2,
    "usergroups.users.list": 2,
    "assistant.threads.setStatus": 3,  # "Special"; stand-in
    "views.open": 4,
    "views.update": 4,
    "views.push": 4,
    "views.publish": 4,
    "files.getUploadURLExternal": 4,
    "files.completeUploadExternal": 4,
}
DEFAULT_TIER = 2  # a method not in the table (or a module's TIERS) gets a stingy tier


@dataclass
class _Bucket:
    capacity: float
    per_second: float
    tokens: float
    updated: float

    def take(self, now: float) -> float:
        """0.0 when a call may go now (and takes its token), else the seconds until one may."""
        self.tokens = min(self.capacity, self.tokens + (now - self.updated) * self.per_second)
        self.updated = now
        if self.tokens >= 1.0:
            self.tokens -= 1.0
            return 0.0
        return (1.0 - self.tokens) / self.per_second


class RateLimiter:
    """Token buckets per method and, for ``chat.postMessage``, per channel. Thread-safe."""

    def __init__(
        self, tiers: Mapping[str, int] = METHOD_TIERS, clock: Callable[[], float] = time.monotonic
    ) -> None:
        self.tiers = dict(tiers)
        self.clock = clock
        self._lock = threading.Lock()
        self._buckets: dict[tuple[str, str], _Bucket] = {}

    def reset(self) -> None:
        with self._lock:
            self._buckets.clear()

    def retry_after(self, method: str, channel: str = "") -> int | None:
        """``None`` when the call may go now, else the ``Retry-After`` Slack would answer (>= 1 s)."""
        now = self.clock()
        with self._lock:
            per_minute = PER_MINUTE[self.tiers.get(method, DEFAULT_TIER)]
            wait = self._bucket((method, ""), per_minute, per_minute / 60.0, now).take(now)
            if wait == 0.0 and method in POSTING_METHODS and channel:
                wait = self._bucket(("post", channel), POST_BURST, POST_PER_SECOND, now).take(now)
                if wait > 0.0:  # the workspace-wide token was not used after all
                    self._buckets[(method, "")].tokens += 1.0
        return None if wait == 0.0 else max(1, math.ceil(wait))

    def _bucket(self, key: tuple[str, str], capacity: float, per_second: float, now: float) -> _Bucket:
        bucket = self._buckets.get(key)
        if bucket is None:
            bucket = self._buckets[key] = _Bucket(capacity, per_second, capacity, now)
        return bucket
