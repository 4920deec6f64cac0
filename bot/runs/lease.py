"""The lease a worker holds on a run while it works on it, with a fencing token.

Acquiring INCRs the run's fence counter and stores the new token in the lease key with a PX
TTL (one Lua script, only when the key is free), so tokens only ever grow. ``RedisMemory``
refuses any write whose token is not the one in the lease key: a worker that stalled past its
TTL, or crashed and came back, cannot write once it lost the lease, even if nobody took it yet.
This module owns the lease key and the fence counter; the same script names the holder in the
run record (through ``bot.runs.record``'s Lua, which owns those fields).

Renewal: a background thread (``Lease.keep_alive``) renews every third of the TTL, and every
memory write renews too. Renewing on writes alone is not enough: a model request or a tool may
run for minutes without a write, and a TTL that long would make crash recovery equally slow.
With the thread the TTL stays short (seconds) and a dead worker's run is picked up quickly.
"""

from __future__ import annotations

import contextlib
import threading
from collections.abc import Iterator, Sequence
from contextlib import contextmanager
from dataclasses import dataclass, field

import redis

from agent.redis_util import as_text
from bot.keys import Keys
from bot.runs.record import LEASE_HOLDER_LUA

# KEYS: 1 lease, 2 fence counter, 3 run hash (the record names the holder). ARGV: 1 ttl ms, 2 holder name.
_ACQUIRE = (
    LEASE_HOLDER_LUA
    + """
if redis.call('EXISTS', KEYS[1]) == 1 then return 0 end
local token = redis.call('INCR', KEYS[2])
redis.call('SET', KEYS[1], token, 'PX', ARGV[1])
record_lease_holder(KEYS[3], ARGV[2], token)
return token
"""
)
# KEYS: 1 lease. ARGV: 1 token, 2 ttl ms.
_RENEW = """
if redis.call('GET', KEYS[1]) ~= ARGV[1] then return 0 end
return redis.call('PEXPIRE', KEYS[1], ARGV[2])
"""
# KEYS: 1 lease. ARGV: 1 token.
_RELEASE = """
if redis.call('GET', KEYS[1]) ~= ARGV[1] then return 0 end
return redis.call('DEL', KEYS[1])
"""


@dataclass
class Lease:
    """A lease this process holds on ``run_id``; ``token`` is its fencing token."""

    client: redis.Redis
    keys: Keys
    run_id: str
    token: int
    ttl_seconds: float
    _lost: threading.Event = field(default_factory=threading.Event, repr=False)

    @classmethod
    def acquire(
        cls, redis_client: redis.Redis, keys: Keys, run_id: str, ttl_seconds: float, holder: str
    ) -> Lease | None:
        """Take the run's lease if nobody holds it; ``None`` when another worker does."""
        script = redis_client.register_script(_ACQUIRE)
        token = int(
            script(
                keys=[keys.lease(run_id), keys.fence(run_id), keys.run(run_id)],
                args=[_ms(ttl_seconds), holder],
            )
        )
        return cls(redis_client, keys, run_id, token, ttl_seconds) if token else None

    @staticmethod
    def held(redis_client: redis.Redis, keys: Keys, run_id: str) -> bool:
        """Whether a worker holds the run's lease (a live one renews it)."""
        return bool(redis_client.exists(keys.lease(run_id)))

    @staticmethod
    def held_many(redis_client: redis.Redis, keys: Keys, run_ids: Sequence[str]) -> set[str]:
        """Of ``run_ids``, those whose lease a worker holds, read in one round trip."""
        if not run_ids:
            return set()
        pipe = redis_client.pipeline(transaction=False)
        for run_id in run_ids:
            pipe.exists(keys.lease(run_id))
        return {run_id for run_id, held in zip(run_ids, pipe.execute(), strict=True) if held}

    @staticmethod
    def holder_token(redis_client: redis.Redis, keys: Keys, run_id: str) -> int | None:
        value = as_text(redis_client.get(keys.lease(run_id)))
        return int(value) if value else None

    @property
    def lost(self) -> bool:
        """True once a renewal found the lease gone or taken by another worker."""
        return self._lost.is_set()

    def renew(self) -> bool:
        script = self.client.register_script(_RENEW)
        ok = bool(script(keys=[self.keys.lease(self.run_id)], args=[self.token, _ms(self.ttl_seconds)]))
        if not ok:
            self._lost.set()
        return ok

    def release(self) -> bool:
        """Give the lease up (only if it is still ours), so the next job need not wait for the TTL."""
        script = self.client.register_script(_RELEASE)
        return bool(script(keys=[self.keys.lease(self.run_id)], args=[self.token]))

    @contextmanager
    def keep_alive(self) -> Iterator[Lease]:
        """Renew in a daemon thread while the block runs; release the lease when it ends."""
        stop = threading.Event()
        thread = threading.Thread(
            target=self._renew_until, args=(stop,), name=f"lease-{self.run_id}", daemon=True
        )
        thread.start()
        try:
            yield self
        finally:
            stop.set()
            thread.join(timeout=self.ttl_seconds)
            with contextlib.suppress(redis.RedisError):  # the TTL frees it anyway
                self.release()

    def _renew_until(self, stop: threading.Event) -> None:
        while not stop.wait(self.ttl_seconds / 3):
            try:
                if not self.renew():
                    return  # lost for good: writes will fail with LeaseLostError
            except redis.RedisError:
                continue  # Redis hiccup: try again; the fence protects us if the TTL runs out


def _ms(seconds: float) -> int:
    return max(1, int(seconds * 1000))
