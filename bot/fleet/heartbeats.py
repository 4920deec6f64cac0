"""Runner heartbeats: the one owner of ``{p}fleet:runner:{target}``.

A runner writes its heartbeat every ``CHATOPS_RUNNER_HEARTBEAT_SECONDS`` from a thread of its own
(a long tool call does not stop it; a dead or frozen process does). The time is Redis's, so
hosts with skewed clocks agree on a heartbeat's age. A target whose runner missed three
heartbeats is unreachable: a call to it is answered at once, and a mutating one is not put before
a person.
"""

from __future__ import annotations

import json
import logging
import threading
from dataclasses import dataclass

import redis

from agent.redis_util import as_text, redis_now, time_reply
from bot.keys import Keys

log = logging.getLogger(__name__)
MISSED_BEATS = 3  # a runner silent for this many intervals is gone
_RECORD_TTL_SECONDS = 7 * 24 * 3600  # kept for ``chatops targets`` ("last seen 2 days ago")


@dataclass(frozen=True)
class Heartbeat:
    target: str
    executor: str  # host:pid of the runner
    seen_at: float  # Redis's clock
    tools: tuple[str, ...] = ()
    scanned_at: float | None = None  # its last completed change scan (Redis's clock); None: none yet


class Heartbeats:
    """Write and read runners' heartbeats; judge a target reachable by their age."""

    def __init__(self, client: redis.Redis, keys: Keys, interval: float) -> None:
        self._redis = client
        self._keys = keys
        self.interval = interval

    def now(self) -> float:
        """Redis's clock, the one every heartbeat time is read on."""
        return redis_now(self._redis)

    def beat(
        self, target: str, executor: str, tools: tuple[str, ...] = (), scanned_at: float | None = None
    ) -> None:
        record = {"executor": executor, "seen_at": redis_now(self._redis), "tools": list(tools)}
        if scanned_at is not None:
            record["scanned_at"] = scanned_at
        self._redis.set(self._keys.runner_heartbeat(target), json.dumps(record), ex=_RECORD_TTL_SECONDS)

    def get(self, target: str) -> Heartbeat | None:
        return _decode(target, as_text(self._redis.get(self._keys.runner_heartbeat(target))))

    def unreachable(self, target: str) -> str | None:
        """Why ``target`` cannot be reached now (``None``: its runner beat recently enough)."""
        return self.check(target)[0]

    def check(self, target: str) -> tuple[str | None, float]:
        """``unreachable`` and Redis's clock now, in one round trip (a dispatch needs both)."""
        with self._redis.pipeline(transaction=False) as pipe:
            pipe.get(self._keys.runner_heartbeat(target))
            pipe.time()
            raw, reply = pipe.execute()
        now = time_reply(reply)
        beat = _decode(target, as_text(raw))
        if beat is None:
            return f"target {target} is unreachable: no runner has been seen", now
        age = now - beat.seen_at
        if age > MISSED_BEATS * self.interval:
            return f"target {target} is unreachable: no runner seen for {age:.0f} s", now
        return None, now


def _decode(target: str, raw: str | None) -> Heartbeat | None:
    if not raw:
        return None
    try:
        data = json.loads(raw)
        scanned = data.get("scanned_at")
        return Heartbeat(
            target,
            str(data["executor"]),
            float(data["seen_at"]),
            tuple(data.get("tools", ())),
            float(scanned) if scanned is not None else None,
        )
    except (ValueError, KeyError, TypeError):
        return None  # not ours: treated like no runner at all


class HeartbeatThread:
    """The runner's heartbeat, every ``interval`` seconds until ``stop``; Redis errors are logged
    and retried (the runner is unreachable meanwhile, which is the truth)."""

    def __init__(self, heartbeats: Heartbeats, target: str, executor: str, tools: tuple[str, ...]) -> None:
        self._heartbeats = heartbeats
        self._args = (target, executor, tools)
        self._scanned_at: float | None = None
        self._lock = threading.Lock()  # the scan thread's beat and the heartbeat's own
        self._stopped = threading.Event()
        self._thread = threading.Thread(target=self._run, name="chatops-heartbeat", daemon=True)

    def start(self) -> None:
        self._beat()  # the first one before any job is taken
        self._thread.start()

    def scanned(self) -> None:
        """A change scan completed: said at once (a demo or an eval waits for the first), and in
        every beat after (``recent_changes`` tells when the journal was last brought up to date)."""
        with self._lock:
            self._scanned_at = self._heartbeats.now()
        try:
            self._beat()
        except redis.RedisError as error:
            log.warning("heartbeat of %s failed: %s", self._args[0], error)

    def _beat(self) -> None:
        with self._lock:
            self._heartbeats.beat(*self._args, scanned_at=self._scanned_at)

    def stop(self) -> None:
        self._stopped.set()

    def _run(self) -> None:
        while not self._stopped.wait(self._heartbeats.interval):
            try:
                self._beat()
            except redis.RedisError as error:
                log.warning("heartbeat of %s failed: %s", self._args[0], error)
