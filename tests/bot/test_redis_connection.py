"""``bot.redis_connection``: one factory, one set of timeouts, and room for commands that block by design."""

from __future__ import annotations

import contextlib
import socket
import threading
import time
import uuid
from collections.abc import Iterator

import pytest
import redis

from bot.ops.worker import default_runtime
from bot.redis_connection import REPLY_TIMEOUT_SECONDS, RedisTarget, open_redis
from bot.runs.durability import TIMEOUT_MS as DURABILITY_TIMEOUT_MS
from bot.settings import Settings
from tests.reliability.redis_proc import RedisProcess
from tests.support.sentinel_group import MASTER_NAME, SentinelGroup, sentinel_group


def test_a_redis_that_never_answers_fails_within_the_timeouts() -> None:
    """One reply timeout, not a retry loop that multiplies it: the silent server counts the
    connections it is offered (each retry would open another and wait another timeout)."""
    accepted: list[socket.socket] = []
    stop = threading.Event()
    with socket.create_server(("127.0.0.1", 0)) as silent:
        silent.settimeout(0.05)

        def hold() -> None:  # accept and never read nor answer
            while not stop.is_set():
                with contextlib.suppress(TimeoutError):
                    accepted.append(silent.accept()[0])

        holder = threading.Thread(target=hold, daemon=True)
        holder.start()
        client = open_redis(f"redis://127.0.0.1:{silent.getsockname()[1]}/0")
        started = time.monotonic()
        try:
            with pytest.raises(redis.TimeoutError):
                client.ping()
            elapsed = time.monotonic() - started
        finally:
            client.close()
            stop.set()
            holder.join(timeout=30)
            for connection in accepted:
                connection.close()
    assert len(accepted) == 1, f"{len(accepted)} connections: the client retried"
    assert elapsed >= REPLY_TIMEOUT_SECONDS - 0.1


def test_a_blocking_command_gets_its_block_on_top_of_the_reply_timeout(redis_url: str) -> None:
    block = REPLY_TIMEOUT_SECONDS + 0.3  # longer than a plain client waits for a reply
    client = open_redis(redis_url, blocking_seconds=block)
    key = f"test:{uuid.uuid4().hex}:stream"
    started = time.monotonic()
    assert client.xread({key: "$"}, block=int(block * 1000)) == []  # the block ran out: no entry
    assert time.monotonic() - started >= block - 0.1
    client.close()


def test_a_new_connection_costs_its_command_two_round_trips_more(private_redis: RedisProcess) -> None:
    """HELLO and the health check's PING, not redis-py 8's CLIENT SETINFO twice and maintenance opt-in
    as well: a work horse opens three connections a job. Counted by a server of the test's own."""
    probe = private_redis.client()
    client = open_redis(private_redis.url)
    try:
        before = int(probe.info("stats")["total_reads_processed"])
        client.get("anything")
        requests = int(probe.info("stats")["total_reads_processed"]) - before - 1  # the INFO itself
        assert requests == 3, f"{requests} requests for one command on a new connection"
    finally:
        client.close()
        probe.close()


def test_a_negative_block_is_refused() -> None:
    with pytest.raises(ValueError, match="blocking_seconds"):
        open_redis("redis://127.0.0.1:6379/0", blocking_seconds=-1)


def test_the_job_client_outwaits_the_durability_wait(redis_url: str) -> None:
    """A job's client sends WAITAOF / WAIT with ``bot.runs.durability.TIMEOUT_MS``: its reply may take that long."""
    settings = Settings(_env_file=None, redis_url=redis_url)  # type: ignore[call-arg]
    runtime = default_runtime(settings)
    try:
        timeout = runtime.redis.connection_pool.connection_kwargs["socket_timeout"]
        assert timeout == REPLY_TIMEOUT_SECONDS + DURABILITY_TIMEOUT_MS / 1000
    finally:
        runtime.redis.close()


# -- behind Redis Sentinel ------------------------------------------------------------------------------

NOBODY_LISTENS = "redis://127.0.0.1:9/3"  # behind sentinels only the database number (3) is used
PASSWORD = "data-secret"
SENTINEL_PASSWORD = "sentinel-secret"


@pytest.fixture(scope="module")
def group(tmp_path_factory: pytest.TempPathFactory) -> Iterator[SentinelGroup]:
    """Data servers and sentinels each behind a password of their own."""
    directory = tmp_path_factory.mktemp("sentinel")
    yield from sentinel_group(directory, password=PASSWORD, sentinel_password=SENTINEL_PASSWORD)


def sentinel_settings(group: SentinelGroup, **overrides: object) -> Settings:
    values: dict[str, object] = {
        "redis_url": NOBODY_LISTENS,
        "redis_sentinels": group.addresses,
        "redis_sentinel_master": MASTER_NAME,
        "redis_password": PASSWORD,
        "redis_sentinel_password": SENTINEL_PASSWORD,
        **overrides,
    }
    return Settings(_env_file=None, **values)  # type: ignore[call-arg, arg-type]


def test_without_sentinels_the_client_is_redis_urls_as_before(redis_url: str) -> None:
    client = open_redis(Settings(_env_file=None, redis_url=redis_url))  # type: ignore[call-arg]
    assert type(client.connection_pool) is redis.ConnectionPool
    assert client.connection_pool.connection_kwargs["socket_timeout"] == REPLY_TIMEOUT_SECONDS
    assert client.ping()
    client.close()


def test_behind_sentinels_every_client_reaches_the_master_they_name(group: SentinelGroup) -> None:
    client = open_redis(sentinel_settings(group))
    key = f"test:{uuid.uuid4().hex}"
    try:
        assert client.info("replication")["role"] == "master"
        assert client.connection_pool.get_master_address() == ("127.0.0.1", group.master.port)  # type: ignore[attr-defined]
        client.set(key, "1", ex=60)
        direct = redis.Redis("127.0.0.1", group.master.port, db=3, password=PASSWORD)
        assert direct.get(key) == b"1"  # REDIS_URL's database number, on the master; its host unused
        direct.close()
    finally:
        client.close()


def test_the_sentinels_refuse_a_client_without_their_password(group: SentinelGroup) -> None:
    client = open_redis(sentinel_settings(group, redis_sentinel_password="guess"))
    with pytest.raises(redis.ConnectionError, match="No master found"):
        client.ping()  # every sentinel refused it: no address, nothing reached
    client.close()


def test_the_master_refuses_a_client_without_its_password(group: SentinelGroup) -> None:
    client = open_redis(sentinel_settings(group, redis_password=""))  # nor in REDIS_URL
    with pytest.raises(redis.AuthenticationError):
        client.ping()
    client.close()


def test_the_master_password_may_come_from_redis_url(group: SentinelGroup) -> None:
    client = open_redis(
        sentinel_settings(group, redis_password="", redis_url=f"redis://:{PASSWORD}@127.0.0.1:9/0")
    )
    assert client.ping()
    client.close()


def test_a_target_shows_no_credentials() -> None:
    settings = Settings(  # type: ignore[call-arg]
        _env_file=None,
        redis_url="redis://u:url-secret@127.0.0.1:6379/0",
        redis_sentinels=["10.0.0.1:26379", "[::1]:26380"],
        redis_password=PASSWORD,
        redis_sentinel_password=SENTINEL_PASSWORD,
    )
    target = RedisTarget.from_settings(settings)
    assert target.sentinels == (("10.0.0.1", 26379), ("::1", 26380))
    for text in (repr(target), target.describe()):
        assert PASSWORD not in text and SENTINEL_PASSWORD not in text and "url-secret" not in text
    assert {PASSWORD, SENTINEL_PASSWORD} <= set(settings.secret_values())  # redacted everywhere
    plain = RedisTarget.from_settings(Settings(_env_file=None, redis_url="redis://u:url-secret@h:1/0"))  # type: ignore[call-arg]
    assert "url-secret" not in plain.describe()


@pytest.mark.parametrize(
    "address", ["10.0.0.1", "host:", ":26379", "host:0", "host:65536", "a@b:1", "h/x:1", "h:1x"]
)
def test_a_mistyped_sentinel_address_is_refused_at_start(address: str) -> None:
    with pytest.raises(ValueError, match="host:port"):
        Settings(_env_file=None, redis_sentinels=[address])  # type: ignore[call-arg]


def test_sentinels_need_a_tcp_redis_url() -> None:
    with pytest.raises(ValueError, match="REDIS_SENTINELS needs a redis://"):
        Settings(_env_file=None, redis_url="unix:///tmp/redis.sock", redis_sentinels=["h:1"])  # type: ignore[call-arg]


def test_sentinel_lists_take_commas_and_spaces(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setenv("REDIS_SENTINELS", "s1:26379, s2:26379 s3:26379")
    assert Settings(_env_file=None).redis_sentinels == ["s1:26379", "s2:26379", "s3:26379"]  # type: ignore[call-arg]
