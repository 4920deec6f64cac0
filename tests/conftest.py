"""Shared fixtures: a real Redis (local server or embedded), isolated per test by key prefix and RQ queue.

A test leaves nothing behind, even when it fails: ``key_prefix`` deletes every key under the
prefix and ``queue_name`` every RQ key of the queue (and of the queues named after it) when the test
ends, after the fixtures that started processes on them have stopped them. At the end of the session
``redis_server`` fails if any key of a prefix or queue this process handed out is still there, and
``_no_process_left_behind`` if any process the session started is still running (both name what
they found, and remove it).
"""

from __future__ import annotations

import os
import uuid
from collections.abc import Iterator

import pytest
import redis
from hypothesis import HealthCheck, settings

from bot.keys import Keys
from emulator.embedded_redis import RedisServer, ensure_redis
from tests.support.leftover_processes import mark_session, processes_left_behind
from tests.support.redis_cleanup import ISSUED, forget_rq_cleaning_lock, leftovers_of, session_leftovers
from tools.mcp.pool import process_pool

# Hypothesis judges each example by wall-clock by default (a 200 ms deadline, a "too slow" health
# check): on a busy machine that fails tests whose code is right. Every property test of the suite
# runs without them; a test's own ``@settings`` still sets its example count.
settings.register_profile("chatops", deadline=None, suppress_health_check=[HealthCheck.too_slow])
settings.load_profile("chatops")


@pytest.fixture(scope="session", autouse=True)
def _no_process_left_behind() -> Iterator[None]:
    """Set up before every other fixture of the session (autouse), so torn down after all of them."""
    token = mark_session()
    yield
    # The MCP servers of this process's own pool (``chatops doctor``'s and the in-process worker
    # runtimes' tools) live as long as the process, as in any chatops process: closed here as they
    # would be at exit, before anything still running counts as left behind.
    process_pool().close()
    left = processes_left_behind(token)
    if left:
        pytest.fail("the tests left processes running (now killed):\n  " + "\n  ".join(left), pytrace=False)


# The workers the tests start keep the priority they are started with (a worker lowers itself to
# nice 10 by default, bot/ops/priority.py): on a machine busy with other work a lowered worker
# would wait for CPU it never gets. tests/bot/ops/test_worker_priority.py tests the default.
os.environ.setdefault("CHATOPS_WORKER_NICE", "0")


@pytest.fixture(scope="session")
def redis_server() -> Iterator[RedisServer]:
    server = ensure_redis()
    yield server
    try:
        client = redis.Redis.from_url(server.url)
        left = session_leftovers(client, ISSUED)
        left.remove(client)
        forget_rq_cleaning_lock(client)
        client.close()
    finally:
        server.stop()
    if left:
        names = [f"{name}  ({ISSUED.owner_of(name, left) or 'owner unknown'})" for name in left.names()]
        shown = "\n  ".join(names[:60]) + (f"\n  ... and {len(names) - 60} more" if len(names) > 60 else "")
        pytest.fail(f"the tests left {len(names)} Redis keys behind (now deleted):\n  {shown}", pytrace=False)


@pytest.fixture
def redis_url(redis_server: RedisServer) -> str:
    return redis_server.url


@pytest.fixture
def key_prefix(redis_url: str, request: pytest.FixtureRequest) -> Iterator[str]:
    """A prefix no other test uses, so tests can share one Redis in parallel; its keys are deleted
    when the test ends."""
    prefix = f"test:{uuid.uuid4().hex[:12]}:"
    ISSUED.add(prefix=prefix, owner=request.node.nodeid)
    yield prefix
    _delete_leftovers(redis_url, prefix=prefix)


@pytest.fixture
def keys(key_prefix: str) -> Keys:
    return Keys(key_prefix)


@pytest.fixture
def queue_name(redis_url: str, request: pytest.FixtureRequest) -> Iterator[str]:
    """An RQ queue no other test uses (RQ's own keys are not under our prefix); RQ's keys of it, and of
    the queues named after it (``.alerts``, ``.target.<name>``), are deleted when the test ends."""
    name = f"test-{uuid.uuid4().hex[:12]}"
    ISSUED.add(queue=name, owner=request.node.nodeid)
    yield name
    # The thorough look: a job whose work horse was SIGKILLed may be in no list or registry any
    # more, and only its record still names the queue.
    _delete_leftovers(redis_url, queue=name, thorough=True)


@pytest.fixture
def redis_client(redis_url: str, key_prefix: str) -> Iterator[redis.Redis]:
    client = redis.Redis.from_url(redis_url)
    yield client
    client.close()


def _delete_leftovers(
    redis_url: str, *, prefix: str | None = None, queue: str | None = None, thorough: bool = False
) -> None:
    client = redis.Redis.from_url(redis_url)
    try:
        leftovers_of(client, prefix=prefix, queue=queue, thorough=thorough).remove(client)
    finally:
        client.close()
