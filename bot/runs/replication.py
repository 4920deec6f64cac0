"""Behind Redis Sentinel, what Slack is told was stored must be on a replica first (``WAIT 1``).

Redis replicates asynchronously: the master answers a write before any replica has it, and a
failover promotes a replica. A click decided, a thread reply stored or a run started that only
the old master had would be gone, after Slack was answered 200 (Slack does not send it again, the
person thinks it is done). So the web process calls ``Replication.confirm()`` after those writes
and before its answer: ``WAIT 1 <REPLICA_WAIT_MS>`` behind a probe write on one connection
(``bot.runs.durability.wait_behind_probe``: the replication stream is ordered, so a replica that
has the probe has every write the master answered before it, the caller's included).

Fail closed: no replica within the timeout (none online, a failover under way) or Redis failing
raises ``NotReplicatedError``, and the caller answers with an error instead of 200: Slack retries
an event (a retry of a stored one finds it a duplicate and waits again, so it is acknowledged
only once a replica has it), a person clicks again. The worker's half, the executing mark before
a tool runs, is ``bot.runs.durability.Durability`` with ``min_replicas=1``.

Without sentinels (``REDIS_URL`` alone) ``confirm()`` does nothing: behaviour is unchanged.
"""

from __future__ import annotations

import redis

from bot.errors import NotReplicatedError
from bot.keys import Keys
from bot.runs.durability import wait_behind_probe
from bot.settings import Settings

# Milliseconds ``WAIT 1`` may take before Slack is answered. A constant since 0.2.0 (it was
# REDIS_REPLICA_WAIT_MS): a healthy replica on the same network acknowledges within a few
# milliseconds, and Slack gives an event 3 s, so half a second leaves room for a busy replica and
# the rest of the request; short of it the answer is an error and Slack (or the person) retries.
REPLICA_WAIT_MS = 500


class Replication:
    """``confirm()``: the writes answered so far are on ``replicas`` replicas (0: nothing to wait for)."""

    def __init__(self, client: redis.Redis, probe_key: str, *, replicas: int, timeout_ms: int) -> None:
        if replicas < 0 or timeout_ms < 1:
            raise ValueError(f"replicas must be >= 0 and timeout_ms >= 1, got {replicas} and {timeout_ms}")
        self._client = client
        self._probe_key = probe_key
        self.replicas = replicas
        self.timeout_ms = timeout_ms  # the client's socket timeout must exceed it

    @classmethod
    def from_settings(
        cls, client: redis.Redis, keys: Keys, settings: Settings, *, timeout_ms: int = REPLICA_WAIT_MS
    ) -> Replication:
        """``WAIT 1`` with sentinels (``REDIS_SENTINELS``), nothing without."""
        return cls(
            client,
            keys.durability_probe(),
            replicas=1 if settings.redis_sentinels else 0,
            timeout_ms=timeout_ms,
        )

    def confirm(self) -> None:
        """Return once a replica has every write answered before this call; else ``NotReplicatedError``."""
        if not self.replicas:
            return
        try:
            reply = wait_behind_probe(self._client, self._probe_key, ("WAIT", self.replicas, self.timeout_ms))
        except redis.RedisError as error:
            raise NotReplicatedError(f"Redis failed: {error}") from error
        acked = int(str(reply))
        if acked < self.replicas:
            raise NotReplicatedError(
                f"WAIT {self.replicas} confirmed {acked} replica(s) within {self.timeout_ms} ms"
            )
