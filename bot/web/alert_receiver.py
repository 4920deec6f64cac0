"""The web process's webhooks: a receiver (the alerts' ``AlertReceiver``, ``bot.alerts.receiver``;
the deploy markers' ``ChangeReceiver``, ``bot.web.change_receiver``) on each process's Redis.

The composition root (``bot.ops.compose_web``) reads the routes file and the inventory once, at
start-up (a mistake in either stops the web process with the file, the route and the field
named), and hands this a function building the receiver on a Redis connection; the receiver is
built again when the web runtime's Redis is (opened lazily per forked process).
"""

from __future__ import annotations

from collections.abc import Callable, Mapping
from typing import Protocol

import redis

from bot.alerts.receiver import Answer
from bot.errors import NotReplicatedError
from bot.slack.handlers.runtime import WebRuntime


class Receiver(Protocol):
    def receive(self, path: str, headers: Mapping[str, str], body: bytes) -> Answer: ...


class WebReceiver:
    """A receiver on the web runtime's per-process Redis."""

    def __init__(self, runtime: WebRuntime, receiver_on: Callable[[redis.Redis], Receiver]) -> None:
        self._runtime = runtime
        self._receiver_on = receiver_on
        self._cached: tuple[object, Receiver] | None = None

    def receive(self, path: str, headers: Mapping[str, str], body: bytes) -> Answer:
        """The receiver's answer; a 2xx only once a replica has what it stored (behind sentinels:
        ``bot.runs.replication``), else a 503 the sender retries."""
        answer = self._receiver().receive(path, headers, body)
        if 200 <= answer.status < 300:
            try:
                self._runtime.replication().confirm()
            except NotReplicatedError as error:
                return Answer(503, f"stored, not yet on a replica ({error.what}); retry later")
        return answer

    def _receiver(self) -> Receiver:
        """One per process and Redis connection (the web runtime opens Redis after the fork)."""
        client = self._runtime.redis()
        cached = self._cached
        if cached is not None and cached[0] is client:
            return cached[1]
        receiver = self._receiver_on(client)
        self._cached = (client, receiver)
        return receiver
