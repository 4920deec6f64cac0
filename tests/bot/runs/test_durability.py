"""``bot.runs.durability`` against real ``redis-server`` processes of each persistence configuration.

Every test starts servers of its own (unix sockets in the test's directory; a TCP port only
where a replica needs one), so the shared Redis is never reconfigured.
"""

from __future__ import annotations

import logging
import os
import signal
import socket
from collections.abc import Callable, Iterator, Mapping
from pathlib import Path

import pydantic
import pytest
import redis
from redis.backoff import NoBackoff
from redis.retry import Retry

from bot.errors import DurabilityError, DurabilityUnconfirmedError, NotDurableError
from bot.keys import Keys
from bot.runs.durability import (
    TIMEOUT_MS,
    Durability,
    DurabilityMode,
    Persistence,
    findings,
    plan_wait,
    read_persistence,
)
from bot.settings import Settings
from tests.reliability.redis_proc import DURABLE, RDB_DEFAULT, RedisProcess
from tests.support.waiting import wait_until

EVERYSEC = {**DURABLE, "appendfsync": "everysec"}
PRIMARY = {**DURABLE, "repl-diskless-sync-delay": "0"}  # a replica's first sync starts at once
PROBE = "test:durability:probe"

Start = Callable[..., RedisProcess]


@pytest.fixture
def server(tmp_path: Path) -> Iterator[Start]:
    """``server(config)``: a ``redis-server`` of this test with those settings (stopped at the end)."""
    started: list[RedisProcess] = []

    def start(config: Mapping[str, str]) -> RedisProcess:
        process = RedisProcess(tmp_path / f"redis-{len(started)}", config=dict(config)).start()
        started.append(process)
        return process

    yield start
    for process in started:
        if process.proc is not None:
            os.kill(process.proc.pid, signal.SIGCONT)  # a test may have stopped it
    for process in reversed(started):  # replicas first: a primary's shutdown waits for lagging ones
        process.stop()


def durability(
    process: RedisProcess, mode: DurabilityMode = DurabilityMode.STRICT, **kwargs: object
) -> Durability:
    return Durability(process.client(), PROBE, mode=mode, **kwargs)  # type: ignore[arg-type]


def calls(client: redis.Redis, command: str) -> int:
    """How many times the server ran ``command`` (its own statistics, not a mock)."""
    stats = client.info("commandstats").get(f"cmdstat_{command}")
    return int(stats["calls"]) if stats else 0


def free_port() -> int:
    with socket.socket() as probe:
        probe.bind(("127.0.0.1", 0))
        return int(probe.getsockname()[1])


def test_aof_always_is_durable_as_soon_as_the_write_is_answered(server: Start) -> None:
    process = server(DURABLE)
    client = process.client()
    client.set("mark", "executing")
    durability(process).wait()
    assert calls(client, "wait") == 0 and not client.exists(PROBE)  # the reply already meant "fsynced"
    assert findings(read_persistence(client)) == []


def test_strict_refuses_rdb_only_and_names_the_window(server: Start) -> None:
    process = server(RDB_DEFAULT)
    with pytest.raises(NotDurableError) as refused:
        durability(process).wait()
    assert refused.value.risk == (
        "RDB snapshots only (save 3600 1 300 100 60 10000): a crash loses up to 3600 s of writes"
    )
    assert isinstance(refused.value, DurabilityError)


def test_strict_refuses_a_server_that_persists_nothing(server: Start) -> None:
    with pytest.raises(NotDurableError, match="nothing is persisted"):
        durability(server({})).wait()


def test_everysec_without_waitaof_is_refused_in_strict_mode(server: Start) -> None:
    process = server(EVERYSEC)
    persistence = read_persistence(process.client())
    if persistence.has_waitaof:
        pytest.skip(f"Redis {persistence.version} has WAITAOF")
    with pytest.raises(NotDurableError, match=r"appendfsync everysec .* up to 1 s of writes"):
        durability(process).wait()


def test_waitaof_confirms_everysec_where_the_server_has_it(server: Start) -> None:
    process = server(EVERYSEC)
    client = process.client()
    if not read_persistence(client).has_waitaof:
        pytest.skip("WAITAOF needs Redis 7.2 (this redis-server is older)")
    client.set("mark", "executing")
    durability(process).wait()
    assert calls(client, "waitaof") == 1


def test_warn_mode_logs_once_and_goes_on(server: Start, caplog: pytest.LogCaptureFixture) -> None:
    process = server(RDB_DEFAULT)
    with caplog.at_level(logging.WARNING, logger="bot.runs.durability"):
        for _ in range(3):
            durability(process, DurabilityMode.WARN).wait()
    warnings = [r.getMessage() for r in caplog.records if r.name == "bot.runs.durability"]
    assert len(warnings) == 1
    assert "a crash loses up to 3600 s of writes" in warnings[0]
    assert "CHATOPS_DURABILITY=strict" in warnings[0]


def test_settings_that_cannot_be_read_count_as_not_durable(server: Start) -> None:
    # As on managed Redis: CONFIG is not permitted, so appendfsync is unknown even though it is "always".
    process = server(DURABLE)
    process.client().acl_setuser("default", enabled=True, nopass=True, commands=["-config"])
    persistence = read_persistence(process.client())
    assert persistence.aof_enabled is True and persistence.appendfsync is None
    assert persistence.maxmemory_policy == "noeviction"  # INFO memory still says
    if persistence.has_waitaof:
        durability(process).wait()  # WAITAOF does not need to know appendfsync
        return
    with pytest.raises(NotDurableError, match=r"appendfsync cannot be read \(CONFIG GET refused\)"):
        durability(process).wait()


def test_the_settings_are_read_again_after_the_refresh_interval(server: Start) -> None:
    process = server(DURABLE)
    now = [0.0]
    checker = durability(process, refresh_seconds=60.0, clock=lambda: now[0])
    checker.wait()
    process.client().config_set("appendonly", "no")
    now[0] = 59.0
    checker.wait()  # still the cached reading
    now[0] = 60.0
    with pytest.raises(NotDurableError, match="no AOF and no RDB save points"):
        checker.wait()


def test_a_connected_replica_is_waited_for(server: Start) -> None:
    port = free_port()
    primary = server({**PRIMARY, "port": str(port)})
    replica = server({**DURABLE, "replicaof": f"127.0.0.1 {port}"})
    client = primary.client()
    wait_until(lambda: read_persistence(client).replicas == 1, 10, "the replica to connect")
    client.set("mark", "executing")
    durability(primary).wait()
    assert calls(client, "waitaof" if read_persistence(client).has_waitaof else "wait") == 1
    assert replica.client().get(PROBE) == b"1"  # the probe, written after the mark, reached it


def test_a_replica_that_does_not_acknowledge_refuses_the_tool(server: Start) -> None:
    port = free_port()
    primary = server({**PRIMARY, "port": str(port)})
    replica = server({**DURABLE, "replicaof": f"127.0.0.1 {port}"})
    client = primary.client()
    wait_until(lambda: read_persistence(client).replicas == 1, 10, "the replica to connect")
    assert replica.proc is not None
    os.kill(replica.proc.pid, signal.SIGSTOP)  # connected, but it will not acknowledge anything
    with pytest.raises(
        DurabilityUnconfirmedError, match=r"confirmed .*0 replica\(s\) of .*1 replica\(s\) within 200 ms"
    ):
        durability(primary, DurabilityMode.WARN, timeout_ms=200).wait()


def test_redis_failing_is_an_unconfirmed_mark(server: Start) -> None:
    process = server(DURABLE)
    no_retries = redis.Redis(unix_socket_path=str(process.socket), retry=Retry(NoBackoff(), 0))
    checker = Durability(no_retries, PROBE, mode=DurabilityMode.STRICT)
    process.kill()
    with pytest.raises(DurabilityUnconfirmedError, match="Redis failed"):
        checker.wait()


def test_eviction_and_appendfsync_no_are_findings(server: Start) -> None:
    persistence = read_persistence(server({**DURABLE, "maxmemory-policy": "allkeys-lru"}).client())
    assert findings(persistence) == [
        "maxmemory-policy is allkeys-lru: under memory pressure Redis may evict an approval or an executing mark"
    ]


def test_the_plan_for_each_server() -> None:
    def on(version: str, replicas: int = 0, **fields: object) -> Persistence:
        values: dict[str, object] = {
            "aof_enabled": True,
            "appendfsync": "always",
            "save": "",
            "maxmemory_policy": "noeviction",
            **fields,
        }
        return Persistence(version=version, run_id="r", replicas=replicas, **values)  # type: ignore[arg-type]

    assert plan_wait(on("7.0.15"), 500).command is None
    assert plan_wait(on("7.0.15", replicas=2), 500).command == ("WAIT", 2, 500)
    assert plan_wait(on("7.2.4", appendfsync="everysec"), 500).command == ("WAITAOF", 1, 0, 500)
    assert plan_wait(on("7.2.4", replicas=1), 500).command == ("WAITAOF", 1, 1, 500)
    assert plan_wait(on("7.2.4", appendfsync="everysec"), 500).risk is None
    no_aof = plan_wait(on("8.0.1", replicas=1, aof_enabled=False, save="900 1"), 500)
    assert no_aof.command == ("WAITAOF", 0, 1, 500)
    assert no_aof.risk == "RDB snapshots only (save 900 1): a crash loses up to 900 s of writes"
    # Behind sentinels (min_replicas=1) a replica must have the mark: with none online the wait is
    # still sent (and falls short: the tool is refused), never skipped.
    assert plan_wait(on("7.0.15"), 500, min_replicas=1).command == ("WAIT", 1, 500)
    assert plan_wait(on("7.0.15", replicas=2), 500, min_replicas=1).command == ("WAIT", 2, 500)
    assert plan_wait(on("7.2.4"), 500, min_replicas=1).command == ("WAIT", 1, 500)
    assert plan_wait(on("7.2.4", replicas=1), 500, min_replicas=1).command == ("WAITAOF", 1, 1, 500)


def test_from_settings_reads_the_mode_and_the_timeout_is_the_constant(server: Start) -> None:
    process = server(DURABLE)
    settings = Settings(_env_file=None, chatops_durability="strict")  # type: ignore[call-arg]
    checker = Durability.from_settings(process.client(), Keys("test:"), settings)
    assert (checker.mode, checker.timeout_ms) == (DurabilityMode.STRICT, TIMEOUT_MS)
    assert checker.min_replicas == 0  # REDIS_URL alone: as before
    behind = settings.model_copy(update={"redis_sentinels": ["127.0.0.1:26379"]})
    assert Durability.from_settings(process.client(), Keys("test:"), behind).min_replicas == 1
    assert Settings(_env_file=None).chatops_durability == "warn"  # type: ignore[call-arg]
    with pytest.raises(pydantic.ValidationError):
        Settings(_env_file=None, chatops_durability="sometimes")  # type: ignore[call-arg]
    with pytest.raises(ValueError, match="timeout_ms"):
        Durability(process.client(), Keys("test:").durability_probe(), timeout_ms=0)
