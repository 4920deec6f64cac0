"""Claims in Redis, each one ``SET NX``; the key is always the caller's, and so is its owner in
the key table (this module owns only how a key is claimed):

* ``Claims``: two-phase dedupe claims, ``pending`` while an event is being stored, ``done`` after,
  for Slack's events (``bot.slack.handlers.events``: event ids, message timestamps) and the alert
  webhooks (``bot.alerts.store``: one claim per delivery);
* ``claim_once``: the first caller wins, for a while (one :eyes:, one notice, one feedback vote);
* ``take_lock`` / ``release_lock``: a lock held by a random token and freed by its holder only
  (an alert group's, the lost-run scan's).

A plain ``SET NX`` claim taken before storing loses events: if storing then fails (Redis drops
mid-request), the claim stays and the sender's retry is answered "already seen" although nothing
was stored. So a claim starts ``pending`` with a short TTL and becomes ``done`` (with the long
TTL) only once the event is stored; a failed attempt releases it, and if even the release fails
the short TTL frees it before the sender's next retry (Slack's comes after about a minute). A
retry that finds a claim still ``pending`` is answered with a non-2xx, so the sender tries again
later instead of being told "done" for an attempt that may yet fail.
"""

from __future__ import annotations

import contextlib
import logging
import secrets
from collections.abc import Callable
from enum import StrEnum
from typing import Any

import redis

from agent.redis_util import as_text

log = logging.getLogger(__name__)

PENDING = "pending"
PENDING_SECONDS = 30
DONE_SECONDS = 24 * 3600


class ClaimState(StrEnum):
    NEW = "new"  # this request owns the event now: store it, then ``confirm``
    IN_PROGRESS = "in_progress"  # another request is storing it right now
    DONE = "done"  # stored before: a retry or a duplicate delivery


class Claims:
    """``take`` / ``confirm`` / ``release`` on dedupe keys (built by ``bot.keys.Keys``)."""

    def __init__(
        self,
        redis_client: Callable[[], redis.Redis],
        *,
        pending_seconds: float = PENDING_SECONDS,
        done_seconds: float = DONE_SECONDS,
    ) -> None:
        self._redis = redis_client
        self._pending = pending_seconds
        self._done = done_seconds

    def take(self, key: str) -> ClaimState:
        client = self._redis()
        if client.set(key, PENDING, nx=True, px=_milliseconds(self._pending)):
            return ClaimState.NEW
        return _state(client.get(key))

    def take_along(
        self, key: str, reads: Callable[[redis.client.Pipeline], object]
    ) -> tuple[ClaimState, list[Any]]:
        """``take``, with the reads ``reads`` queues on the same pipeline (their owners' commands,
        answered in that order): one round trip for the claim and what the caller reads with it.
        Not a transaction: the claim is the one atomic step, as in ``take``."""
        pipeline = self._redis().pipeline(transaction=False)
        pipeline.set(key, PENDING, nx=True, px=_milliseconds(self._pending))
        pipeline.get(key)
        reads(pipeline)
        taken, value, *read = pipeline.execute()
        return (ClaimState.NEW if taken else _state(value)), read

    def confirm(
        self,
        key: str,
        value: str = "done",
        *,
        pipeline: redis.client.Pipeline | None = None,
        seconds: float | None = None,
    ) -> None:
        """Mark the event stored (in ``pipeline`` when given: the caller executes it), remembered
        for ``seconds`` (the claims' ``done_seconds`` unless given)."""
        remember = _milliseconds(self._done if seconds is None else seconds)
        (pipeline if pipeline is not None else self._redis()).set(key, value, px=remember)

    def release(self, key: str) -> None:
        """Best effort: when Redis is what failed, the pending TTL frees the claim instead."""
        with contextlib.suppress(redis.RedisError):
            self._redis().delete(key)


def _state(value: bytes | str | None) -> ClaimState:
    """A claim this request did not take, by the value it holds. ``None``: the other attempt's
    pending claim expired or was released a moment ago; let the sender come back rather than
    racing it here."""
    return ClaimState.DONE if as_text(value) not in (None, PENDING) else ClaimState.IN_PROGRESS


def claim_once(client: redis.Redis, key: str, seconds: float, value: str = "1") -> bool:
    """Whether this caller is the first to claim ``key`` (for ``seconds``; ``value`` is kept)."""
    return bool(client.set(key, value, nx=True, px=_milliseconds(seconds)))


def take_lock(client: redis.Redis, key: str, seconds: float) -> str | None:
    """A token if this caller now holds the lock ``key`` for ``seconds`` (``None``: another does)."""
    token = secrets.token_hex(16)
    return token if claim_once(client, key, seconds, token) else None


# Compare and delete in one step: a holder whose lock expired never frees the next holder's.
_RELEASE = """
if redis.call('GET', KEYS[1]) == ARGV[1] then return redis.call('DEL', KEYS[1]) end
return 0
"""


def release_lock(client: redis.Redis, key: str, token: str) -> bool:
    """Free the lock if ``token`` still holds it; whether it did."""
    return bool(client.register_script(_RELEASE)(keys=[key], args=[token]))


def _milliseconds(seconds: float) -> int:
    return max(1, round(seconds * 1000))
