"""Make an execution's "executing" mark crash-safe before its side effect starts.

A mutating tool runs at most once because an "executing" mark is stored before it starts: a
resumed run that finds the mark without a result reports "outcome unknown" instead of running
the tool again. That only holds if the mark survives a Redis crash. Redis answers a write once
it is in memory; whether it is on disk depends on the server's persistence:

* ``appendonly yes`` + ``appendfsync always``: the write is fsynced to the AOF before Redis
  answers it, so the mark is already durable when the caller's write returns;
* Redis >= 7.2: ``WAITAOF 1 N`` blocks until the write is fsynced locally and on ``N`` replicas,
  whatever ``appendfsync`` says (with ``appendonly yes``);
* replicas on older servers: ``WAIT N`` until every connected replica has the write (so a
  failover to one of them keeps it);
* behind Redis Sentinel (``min_replicas=1``, ``REDIS_SENTINELS``): a failover promotes a replica,
  so the master's own disk is not enough: at least one replica must confirm, and with none
  online the wait still goes out, falls short and the tool is refused (``bot.runs.replication``
  is the same rule for what the web process acknowledges to Slack);
* anything else (RDB snapshots only, ``everysec`` or ``no`` before 7.2, settings that cannot be
  read) can lose the mark: ``strict`` mode refuses the tool, ``warn`` logs once and goes on.

``WAIT`` and ``WAITAOF`` wait for the writes *of the connection they are sent on*, and a pooled
client's next command may use another connection than the caller's write did. So the wait is
sent behind a small write of its own on the same connection (``Keys.durability_probe``):
Redis's replication stream and AOF are ordered, so once that write is confirmed, every write
answered before it (the caller's mark) is too.

The server's settings are read with ``INFO`` (and ``CONFIG GET``, which managed Redis services
often refuse: then ``appendfsync`` and ``save`` are unknown, and unknown counts as not durable)
and kept for ``refresh_seconds``, since an operator can change them at runtime.
"""

from __future__ import annotations

import logging
import time
from collections.abc import Callable
from dataclasses import dataclass
from enum import StrEnum

import redis

from agent.redis_util import as_text
from bot.errors import DurabilityUnconfirmedError, NotDurableError
from bot.keys import Keys
from bot.settings import DEFAULTS, Settings

log = logging.getLogger(__name__)

WAITAOF_SINCE = (7, 2)
REFRESH_SECONDS = 60.0
# Milliseconds WAITAOF / WAIT may take to confirm an execution's mark before the tool runs. A constant
# since 0.2.0 (it was CHATOPS_DURABILITY_TIMEOUT_MS): ``appendfsync everysec`` fsyncs within about
# 1.1 s, so 2 s confirms a healthy server with room to spare; a server that needs longer is stalled,
# and the tool is refused rather than run on luck.
TIMEOUT_MS = 2000
PROBE_TTL_MS = 60_000
CONFIG_NAMES = ("appendfsync", "save", "maxmemory-policy")

# (server run_id, risk) pairs already warned about by this process: warn mode logs each once.
_warned: set[tuple[str, str]] = set()


class DurabilityMode(StrEnum):
    STRICT = "strict"  # refuse a mutating tool when a crash could lose its mark
    WARN = "warn"  # log that risk once per process (and server) and run the tool


DEFAULT_MODE = DurabilityMode(DEFAULTS.chatops_durability)


@dataclass(frozen=True)
class Persistence:
    """What a Redis server reported about keeping writes; ``None`` where it would not say."""

    version: str
    run_id: str
    aof_enabled: bool | None
    appendfsync: str | None
    save: str | None  # the RDB schedule, "" when snapshots are off
    maxmemory_policy: str | None
    replicas: int  # online ones (syncing replicas cannot acknowledge yet)

    @property
    def version_tuple(self) -> tuple[int, ...]:
        return tuple(int(part) for part in self.version.split(".") if part.isdigit())

    @property
    def has_waitaof(self) -> bool:
        return self.version_tuple >= WAITAOF_SINCE

    @property
    def fsyncs_every_write(self) -> bool:
        """The AOF is fsynced before Redis answers a write."""
        return self.aof_enabled is True and self.appendfsync == "always"

    def crash_loss(self) -> str | None:
        """What a crash of this server can lose (a sentence), or ``None`` when a waited-for write survives."""
        if self.fsyncs_every_write or (self.has_waitaof and self.aof_enabled):
            return None
        if self.aof_enabled is None:
            return (
                "Redis does not say whether the AOF is on (INFO persistence): a crash may lose recent writes"
            )
        if self.aof_enabled:
            return self._aof_loss()
        return self._rdb_loss()

    def _aof_loss(self) -> str:
        before = f"Redis {self.version} has no WAITAOF (7.2+)"
        if self.appendfsync == "everysec":
            return f"AOF with appendfsync everysec and {before}: a crash loses up to 1 s of writes (2 s if fsync stalls)"
        if self.appendfsync == "no":
            return (
                f"AOF with appendfsync no and {before}: a crash loses what the kernel has not flushed yet "
                "(typically up to 30 s of writes)"
            )
        return (
            f"AOF is on but appendfsync cannot be read (CONFIG GET refused) and {before}: "
            "a crash may lose up to 1 s of writes, or more"
        )

    def _rdb_loss(self) -> str:
        if self.save is None:
            return "no AOF, and the RDB schedule cannot be read (CONFIG GET refused): a crash loses every write since the last snapshot"
        window = rdb_window(self.save)
        if window is None:
            return "no AOF and no RDB save points: nothing is persisted, a crash loses every write"
        return f"RDB snapshots only (save {self.save}): a crash loses up to {window} s of writes"

    def summary(self) -> str:
        """How this server keeps writes, in a few words (for doctor's PASS line)."""
        if self.fsyncs_every_write:
            how = "AOF with appendfsync always"
        elif self.has_waitaof and self.aof_enabled:
            how = f"AOF with appendfsync {self.appendfsync or '(unknown)'}, confirmed by WAITAOF"
        elif self.aof_enabled:
            how = f"AOF with appendfsync {self.appendfsync or '(unknown)'}"
        else:
            how = "no AOF"
        return f"{how}; maxmemory-policy {self.maxmemory_policy or '(unknown)'}; {self.replicas} replica(s)"


def rdb_window(save: str) -> int | None:
    """The longest interval of a ``save`` schedule ("3600 1 300 100" -> 3600); ``None`` when empty."""
    numbers = [int(n) for n in save.split() if n.isdigit()]
    seconds = numbers[0::2]
    return max(seconds) if seconds else None


def findings(persistence: Persistence) -> list[str]:
    """Every way this server can lose an approval or an executing mark (empty when none)."""
    found = []
    loss = persistence.crash_loss()
    if loss is not None:
        found.append(loss)
    if persistence.has_waitaof and persistence.aof_enabled and persistence.appendfsync == "no":
        found.append(
            "appendfsync no: the kernel flushes the AOF when it likes (typically within 30 s); "
            "WAITAOF waits for that flush and may time out, refusing the tool"
        )
    policy = persistence.maxmemory_policy
    if policy != "noeviction":
        what = "cannot be read" if policy is None else f"is {policy}"
        found.append(
            f"maxmemory-policy {what}: under memory pressure Redis may evict an approval or an executing mark"
        )
    return found


def read_persistence(client: redis.Redis) -> Persistence:
    """Ask the server (one round trip for INFO, one for CONFIG GET). Raises ``redis.RedisError``."""
    with client.pipeline(transaction=False) as pipe:
        for section in ("server", "persistence", "replication", "memory"):
            pipe.info(section)
        server, persistence, replication, memory = pipe.execute()
    config = _config(client)
    aof = persistence.get("aof_enabled")
    return Persistence(
        version=str(server.get("redis_version", "0")),
        run_id=str(server.get("run_id", "")),
        aof_enabled=None if aof is None else bool(int(aof)),
        appendfsync=config.get("appendfsync"),
        save=config.get("save"),
        maxmemory_policy=config.get("maxmemory-policy") or _text(memory.get("maxmemory_policy")),
        replicas=_online_replicas(replication),
    )


def _online_replicas(replication: dict[str, object]) -> int:
    """Replicas past their initial sync (``slaveN:...,state=online``): only those acknowledge writes."""
    count = int(str(replication.get("connected_slaves", 0)))
    entries = [replication.get(f"slave{n}") for n in range(count)]
    return sum(1 for entry in entries if isinstance(entry, dict) and entry.get("state") == "online")


def _config(client: redis.Redis) -> dict[str, str]:
    """The settings CONFIG GET gives (one name per call: multi-name GET is 7.0+); refused ones are missing."""
    with client.pipeline(transaction=False) as pipe:
        for name in CONFIG_NAMES:
            pipe.config_get(name)
        replies = pipe.execute(raise_on_error=False)
    found: dict[str, str] = {}
    for reply in replies:
        if isinstance(reply, redis.ResponseError):  # CONFIG renamed, disabled or not permitted
            continue
        for name, value in dict(reply).items():
            key, text = as_text(name), as_text(value)
            if key is not None and text is not None:
                found[key] = text
    return found


def _text(value: object) -> str | None:
    return None if value is None else str(value)


@dataclass(frozen=True)
class WaitPlan:
    """What ``Durability.wait`` does on a server: the risk it accepts or refuses, and the command it waits with."""

    risk: str | None
    command: tuple[str | int, ...] | None  # WAITAOF / WAIT with its arguments, or nothing to wait for
    wanted: tuple[int, ...] = ()  # the acknowledgements the reply must reach, in its order


def plan_wait(persistence: Persistence, timeout_ms: int, min_replicas: int = 0) -> WaitPlan:
    """``min_replicas``: behind sentinels 1, since a failover keeps only what a replica has; with
    fewer replicas online the wait is still sent, and falls short (the tool is refused)."""
    risk = persistence.crash_loss()
    replicas = persistence.replicas
    if persistence.has_waitaof and replicas >= min_replicas:
        local = 1 if persistence.aof_enabled else 0
        if replicas or (local and not persistence.fsyncs_every_write):
            return WaitPlan(risk, ("WAITAOF", local, replicas, timeout_ms), (local, replicas))
    elif replicas or min_replicas:
        wanted = max(replicas, min_replicas)
        return WaitPlan(risk, ("WAIT", wanted, timeout_ms), (wanted,))
    return WaitPlan(risk, None)  # the reply to the caller's write already meant "on disk"


class Durability:
    """``wait()`` right after the write that marks an execution as started, before the tool runs.

    ``client`` is any client of the Redis that took the write (its ``socket_timeout`` must
    exceed ``timeout_ms``); ``probe_key`` is ``Keys.durability_probe()``.
    """

    def __init__(
        self,
        client: redis.Redis,
        probe_key: str,
        *,
        mode: DurabilityMode = DEFAULT_MODE,
        timeout_ms: int = TIMEOUT_MS,
        min_replicas: int = 0,
        refresh_seconds: float = REFRESH_SECONDS,
        clock: Callable[[], float] = time.monotonic,
    ) -> None:
        if timeout_ms < 1:  # WAIT / WAITAOF with 0 block for ever
            raise ValueError(f"timeout_ms must be at least 1, got {timeout_ms}")
        self._client = client
        self._probe_key = probe_key
        self.mode = mode
        self.timeout_ms = timeout_ms
        self.min_replicas = min_replicas
        self._refresh_seconds = refresh_seconds
        self._clock = clock
        self._cached: tuple[float, Persistence] | None = None

    @classmethod
    def from_settings(cls, client: redis.Redis, keys: Keys, settings: Settings) -> Durability:
        return cls(
            client,
            keys.durability_probe(),
            mode=DurabilityMode(settings.chatops_durability),
            min_replicas=1 if settings.redis_sentinels else 0,  # a failover keeps what a replica has
        )

    def persistence(self) -> Persistence:
        """The server's settings, read at most every ``refresh_seconds``."""
        now = self._clock()
        if self._cached is None or now - self._cached[0] >= self._refresh_seconds:
            self._cached = (now, read_persistence(self._client))
        return self._cached[1]

    def wait(self) -> None:
        """Return once every write answered before this call survives a crash (or the risk is accepted).

        Call it after the mark's reply has been read (not with a write still in flight on a
        pipelined connection): only answered writes are covered.

        Raises ``NotDurableError`` (strict mode, weak persistence) or ``DurabilityUnconfirmedError``
        (the acknowledgements fell short of the server's replicas and disk, or Redis failed):
        either way the tool must not run.
        """
        try:
            persistence = self.persistence()
            plan = plan_wait(persistence, self.timeout_ms, self.min_replicas)
            if plan.risk is not None:
                self._accept(persistence, plan.risk)
            if plan.command is not None:
                self._confirm(plan)
        except redis.RedisError as error:
            self._cached = None  # a changed server (restarted, reconfigured) is re-read next time
            raise DurabilityUnconfirmedError(f"Redis failed: {error}") from error

    def _accept(self, persistence: Persistence, risk: str) -> None:
        if self.mode is DurabilityMode.STRICT:
            raise NotDurableError(risk)
        if (persistence.run_id, risk) in _warned:
            return
        _warned.add((persistence.run_id, risk))
        log.warning(
            "Redis may lose an executing mark in a crash, and an approved call could then run again: %s. "
            "Set appendonly yes and appendfsync always (docs/OPERATIONS.md, Redis persistence), "
            "or CHATOPS_DURABILITY=strict to refuse such calls.",
            risk,
        )

    def _confirm(self, plan: WaitPlan) -> None:
        assert plan.command is not None
        reply = wait_behind_probe(self._client, self._probe_key, plan.command)
        acked = tuple(int(n) for n in reply) if isinstance(reply, list | tuple) else (int(str(reply)),)
        if all(got >= want for got, want in zip(acked, plan.wanted, strict=True)):
            return
        self._cached = None  # a replica may have gone: re-read before the next wait
        raise DurabilityUnconfirmedError(
            f"{plan.command[0]} confirmed {_acks(acked)} of {_acks(plan.wanted)} within {self.timeout_ms} ms"
        )


def wait_behind_probe(client: redis.Redis, probe_key: str, command: tuple[str | int, ...]) -> object:
    """Write the probe, then send ``command`` (``WAIT`` / ``WAITAOF``) on the same connection; its reply.

    The wait covers that connection's writes; the probe's place in the server's ordered replication
    stream and AOF makes it cover every write the server answered before it. Raises ``redis.RedisError``.
    """
    with client.pipeline(transaction=False) as pipe:  # one connection: the probe, then the wait
        pipe.set(probe_key, b"1", px=PROBE_TTL_MS)
        pipe.execute_command(*command)  # type: ignore[no-untyped-call]
        _, reply = pipe.execute()
    return reply


def _acks(counts: tuple[int, ...]) -> str:
    if len(counts) == 2:
        return f"{counts[0]} local fsync(s) and {counts[1]} replica(s)"
    return f"{counts[0]} replica(s)"
