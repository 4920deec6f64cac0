"""The web process's alert webhooks: the ``AlertReceiver`` (``bot.alerts.receiver``) on each process's Redis.

The composition root (``bot.ops.compose``) reads the routes file and the inventory's target
names once, at start-up (a mistake in either stops the web process with the file, the route and
the field named), and hands this a function building the receiver on a Redis connection; the
receiver is built again when the web runtime's Redis is (opened lazily per forked process).
"""

from __future__ import annotations

from collections.abc import Callable, Mapping

import redis

from bot.alerts.receiver import AlertReceiver, Answer
from bot.errors import NotReplicatedError
from bot.slack.handlers.runtime import WebRuntime


class WebAlerts:
    """The receiver on the web runtime's per-process Redis."""

    def __init__(self, runtime: WebRuntime, receiver_on: Callable[[redis.Redis], AlertReceiver]) -> None:
        self._runtime = runtime
        self._receiver_on = receiver_on
        self._cached: tuple[object, AlertReceiver] | None = None

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

    def _receiver(self) -> AlertReceiver:
        """One per process and Redis connection (the web runtime opens Redis after the fork)."""
        client = self._runtime.redis()
        cached = self._cached
        if cached is not None and cached[0] is client:
            return cached[1]
        receiver = self._receiver_on(client)
        self._cached = (client, receiver)
        return receiver
