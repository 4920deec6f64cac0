"""Break-glass: for a few minutes, a named person may approve anything (``policy.break_glass``).

Someone the policy names (``break_glass: {groups: [...], users: [...], minutes: N}``) declares it
explicitly (``/ops break-glass`` in a channel, ``bot.slack.handlers.break_glass``): this stores until when
(``policy:break_glass:{user}``, with a Redis expiry as well), audits it (``break_glass``) and the
channel is told. While it lasts, their click approves any pending card at once, whatever its rule
and count (never their own destructive call: four-eyes holds). It ends at ``until`` by the
injected clock, and never lasts longer than the Redis expiry.
"""

from __future__ import annotations

import time
from collections.abc import Callable

import redis

from agent.redis_util import as_text
from bot.keys import Keys
from bot.observability.audit import AuditKind, AuditLog


class BreakGlassLog:
    """Declare, read and end one person's break-glass (the only code that knows its key)."""

    def __init__(
        self, redis_client: redis.Redis, keys: Keys, audit: AuditLog, clock: Callable[[], float] = time.time
    ) -> None:
        self._redis = redis_client
        self._keys = keys
        self._audit = audit
        self._clock = clock

    def declare(self, user: str, minutes: int, channel: str) -> float:
        """``user`` may approve anything for ``minutes`` from now; audited. Returns until when."""
        until = self._clock() + minutes * 60
        self._redis.set(self._keys.break_glass(user), repr(until), px=minutes * 60_000)
        self._audit.record(
            AuditKind.BREAK_GLASS, "", user=user, channel=channel, until=until, minutes=minutes
        )
        return until

    def revoke(self, user: str, why: str) -> None:
        """End it now (e.g. the channel could not be told); audited."""
        if self._redis.delete(self._keys.break_glass(user)):
            self._audit.record(AuditKind.BREAK_GLASS, "", user=user, ended=why)

    def active_until(self, user: str) -> float | None:
        """Until when ``user``'s break-glass lasts, or ``None`` (none, or it ended)."""
        stored = as_text(self._redis.get(self._keys.break_glass(user)))
        if not stored:
            return None
        until = float(stored)
        return until if self._clock() < until else None
