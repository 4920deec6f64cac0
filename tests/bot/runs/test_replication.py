"""``bot.runs.replication``: WAIT 1 behind sentinels, fail closed, and nothing at all without them."""

from __future__ import annotations

import time
from collections.abc import Iterator
from pathlib import Path

import pytest
import redis

from bot.errors import NotReplicatedError
from bot.keys import Keys
from bot.redis_connection import open_redis
from bot.runs.replication import Replication
from bot.settings import Settings
from tests.support.sentinel_group import MASTER_NAME, SentinelGroup, sentinel_group

TIMEOUT_MS = 300


@pytest.fixture
def group(tmp_path: Path) -> Iterator[SentinelGroup]:
    yield from sentinel_group(tmp_path / "sentinel")


def settings_of(group: SentinelGroup) -> Settings:
    return Settings(  # type: ignore[call-arg]
        _env_file=None,
        redis_url="redis://127.0.0.1:9/0",
        redis_sentinels=group.addresses,
        redis_sentinel_master=MASTER_NAME,
    )


def wait_calls(server: redis.Redis) -> int:
    """How many WAIT commands ``server`` has run."""
    return int(server.info("commandstats").get("cmdstat_wait", {}).get("calls", 0))


def test_without_sentinels_nothing_is_waited_for(redis_url: str) -> None:
    settings = Settings(_env_file=None, redis_url=redis_url)  # type: ignore[call-arg]
    client = open_redis(settings)
    replication = Replication.from_settings(client, Keys("test:"), settings)
    assert replication.replicas == 0
    replication.confirm()  # the shared Redis has no replica: nothing is asked of it
    client.close()


def test_a_write_a_replica_has_is_confirmed_and_is_on_the_replica(
    group: SentinelGroup, key_prefix: str
) -> None:
    settings = settings_of(group)
    client = open_redis(settings, blocking_seconds=TIMEOUT_MS / 1000)
    replication = Replication.from_settings(client, Keys(key_prefix), settings, timeout_ms=TIMEOUT_MS)
    client.set(f"{key_prefix}decision", "approved", ex=60)
    replication.confirm()
    replica = group.replica.client()
    assert replica.get(f"{key_prefix}decision") == b"approved"  # on the replica before the caller goes on
    replica.close()
    client.close()


def test_with_no_replica_the_write_is_not_confirmed_within_the_timeout(
    group: SentinelGroup, key_prefix: str
) -> None:
    settings = settings_of(group)
    client = open_redis(settings, blocking_seconds=TIMEOUT_MS / 1000)
    replication = Replication.from_settings(client, Keys(key_prefix), settings, timeout_ms=TIMEOUT_MS)
    group.replica.kill()
    group.wait_replicas(group.master, 0)
    client.set(f"{key_prefix}decision", "approved", ex=60)
    master = group.master.client()
    waits_before = wait_calls(master)
    started = time.monotonic()
    with pytest.raises(NotReplicatedError, match=f"WAIT 1 confirmed 0 replica\\(s\\) within {TIMEOUT_MS} ms"):
        replication.confirm()
    assert time.monotonic() - started >= TIMEOUT_MS / 1000 - 0.05  # it did wait the timeout out
    assert wait_calls(master) == waits_before + 1  # once: not retried into a longer wait
    master.close()
    group.replica.start(replica_of=group.master.port)
    group.wait_replicas(group.master, 1)
    replication.confirm()  # the returning replica synced everything, the unconfirmed write too
    client.close()


def test_a_failing_redis_is_not_a_confirmation(tmp_path: Path) -> None:
    client = redis.Redis(unix_socket_path=str(tmp_path / "nothing.sock"), socket_timeout=1)
    replication = Replication(client, "test:probe", replicas=1, timeout_ms=TIMEOUT_MS)
    with pytest.raises(NotReplicatedError, match="Redis failed"):
        replication.confirm()


def test_nonsense_parameters_are_refused(redis_url: str) -> None:
    client = redis.Redis.from_url(redis_url)
    with pytest.raises(ValueError):
        Replication(client, "test:probe", replicas=-1, timeout_ms=100)
    with pytest.raises(ValueError):
        Replication(client, "test:probe", replicas=1, timeout_ms=0)  # WAIT 1 0 would block forever
