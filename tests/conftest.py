"""Shared fixtures: a real Redis (local server or embedded), isolated per test by key prefix and RQ queue."""

from __future__ import annotations

import os
import uuid
from collections.abc import Iterator

import pytest
import redis

from bot.keys import Keys
from emulator.embedded_redis import RedisServer, ensure_redis

# The workers the tests start keep the priority they are started with (a worker lowers itself to
# nice 10 by default, bot/ops/priority.py): on a machine busy with other work a lowered worker
# would wait for CPU it never gets. tests/bot/ops/test_worker_priority.py tests the default.
os.environ.setdefault("CHATOPS_WORKER_NICE", "0")


@pytest.fixture(scope="session")
def redis_server() -> Iterator[RedisServer]:
    server = ensure_redis()
    yield server
    server.stop()


@pytest.fixture
def redis_url(redis_server: RedisServer) -> str:
    return redis_server.url


@pytest.fixture
def key_prefix() -> str:
    """A prefix no other test uses, so tests can share one Redis in parallel."""
    return f"test:{uuid.uuid4().hex[:12]}:"


@pytest.fixture
def keys(key_prefix: str) -> Keys:
    return Keys(key_prefix)


@pytest.fixture
def queue_name() -> str:
    """An RQ queue no other test uses (RQ's own keys are not under our prefix)."""
    return f"test-{uuid.uuid4().hex[:12]}"


@pytest.fixture
def redis_client(redis_url: str, key_prefix: str) -> Iterator[redis.Redis]:
    client = redis.Redis.from_url(redis_url)
    yield client
    for key in client.scan_iter(match=f"{key_prefix}*", count=1000):
        client.delete(key)
    client.close()
