"""``chatops doctor``'s check of Redis Sentinel (only with ``REDIS_SENTINELS``): the sentinels' view.

What each listed sentinel says about ``REDIS_SENTINEL_MASTER`` (its address, its replicas, the
other sentinels it knows), whether they agree, whether the master they name answers as a master,
and whether ``WAIT 1`` is possible: a probe write (``Keys.durability_probe``, expiring in a
minute) confirmed by a replica within ``REPLICA_WAIT_MS`` (``bot.runs.replication``). Without that, every click,
reply and new run is answered with an error (``bot.runs.replication``) and every mutating tool
refused: a failure. A sentinel that does not answer, sentinels that disagree, or a single
replica (a failover leaves none until the old master is back) are warnings.
"""

from __future__ import annotations

import time
from dataclasses import dataclass
from typing import Any, cast

import redis
from redis.backoff import NoBackoff
from redis.retry import Retry

from bot.errors import NotReplicatedError
from bot.keys import Keys
from bot.ops.doctor_check import Check, Outcome
from bot.redis_connection import CONNECT_TIMEOUT_SECONDS, REPLY_TIMEOUT_SECONDS, RedisTarget, open_redis
from bot.runs.replication import REPLICA_WAIT_MS, Replication
from bot.settings import Settings

NAME = "sentinel"
FIX = "check REDIS_SENTINELS, REDIS_SENTINEL_MASTER and the sentinels' credentials (docs/OPERATIONS.md)"


@dataclass(frozen=True)
class SentinelView:
    """One sentinel's answer about the master (``error`` when it gave none)."""

    address: str
    master: str = ""  # host:port
    replicas: tuple[str, ...] = ()  # host:port of the replicas it holds up
    others: int = 0  # other sentinels it knows
    quorum: int = 0
    error: str = ""


def sentinel_views(target: RedisTarget) -> list[SentinelView]:
    views = []
    for host, port in target.sentinels:
        client = redis.Redis(
            host,
            port,
            username=target.sentinel_username or None,
            password=target.sentinel_password or None,
            socket_connect_timeout=CONNECT_TIMEOUT_SECONDS,
            socket_timeout=REPLY_TIMEOUT_SECONDS,
            retry=Retry(NoBackoff(), 0),  # one answer or none: the next sentinel is asked anyway
            **target.tls_options(target.sentinel_tls),  # as every process asks them
        )
        address = f"{host}:{port}"
        try:
            views.append(_view(client, address, target.master))
        except redis.RedisError as error:
            views.append(SentinelView(address, error=str(error) or type(error).__name__))
        finally:
            client.close()
    return views


def _view(client: redis.Redis, address: str, master: str) -> SentinelView:
    state = cast(dict[str, Any], client.sentinel_master(master))
    flags = str(state.get("flags", ""))
    if "s_down" in flags or "o_down" in flags:
        return SentinelView(address, error=f"it holds the master {master!r} down ({flags})")
    replicas = client.sentinel_slaves(master)
    up = tuple(
        f"{r['ip']}:{r['port']}"
        for r in replicas
        if not r.get("is_sdown") and not r.get("is_odown") and r.get("master-link-status") == "ok"
    )
    return SentinelView(
        address,
        master=f"{state['ip']}:{state['port']}",
        replicas=up,
        others=int(state.get("num-other-sentinels", 0)),
        quorum=int(state.get("quorum", 0)),
    )


def check_sentinel(settings: Settings) -> Check:
    target = RedisTarget.from_settings(settings)
    views = sentinel_views(target)
    answered = [view for view in views if not view.error]
    lines = [
        f"{view.address}: " + (f"no answer ({view.error})" if view.error else _describe(view))
        for view in views
    ]
    if not answered:
        return Check(
            NAME, Outcome.FAIL, "\n".join([f"no sentinel names the master {target.master!r}", *lines]), FIX
        )
    problems, warnings = [], [f"{view.address} gave no answer" for view in views if view.error]
    masters = sorted({view.master for view in answered})
    if len(masters) > 1:
        warnings.append(f"the sentinels disagree on the master ({', '.join(masters)}): a failover under way?")
    replicas = max(len(view.replicas) for view in answered)
    if replicas == 1:
        warnings.append(
            "one replica: after a failover none is left until the old master is back, and WAIT 1 fails"
        )
    try:
        role, wait = _master_and_wait(settings)
    except (redis.RedisError, NotReplicatedError) as error:
        problems.append(f"WAIT 1 is not possible: {error}")
        role, wait = "", 0.0
    if role and role != "master":
        problems.append(f"the server the sentinels name answers as {role}, not master")
    summary = [f"master {target.master!r} at {', '.join(masters)}; {replicas} replica(s) online", *lines]
    if not problems:
        summary.insert(1, f"WAIT 1 confirmed by a replica in {wait * 1000:.0f} ms")
    if problems:
        return Check(NAME, Outcome.FAIL, "\n".join([*problems, *warnings, *summary]), FIX)
    if warnings:
        return Check(NAME, Outcome.WARN, "\n".join([*warnings, *summary]))
    return Check(NAME, Outcome.PASS, "\n".join(summary))


def _describe(view: SentinelView) -> str:
    replicas = ", ".join(view.replicas) or "none"
    return f"master {view.master}, replicas {replicas}, {view.others} other sentinel(s), quorum {view.quorum}"


def _master_and_wait(settings: Settings) -> tuple[str, float]:
    """The role of the server ``master_for`` reaches, and how long ``WAIT 1`` took there."""
    client = open_redis(settings, blocking_seconds=REPLICA_WAIT_MS / 1000)
    try:
        role = str(client.info("replication").get("role", ""))
        started = time.monotonic()
        keys = Keys(settings.chatops_redis_prefix)
        Replication(client, keys.durability_probe(), replicas=1, timeout_ms=REPLICA_WAIT_MS).confirm()
        return role, time.monotonic() - started
    finally:
        client.close()
