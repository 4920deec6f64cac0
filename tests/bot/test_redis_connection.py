"""``bot.redis_connection``: one factory, one set of timeouts, and room for commands that block by design."""

from __future__ import annotations

import socket
import time
import uuid

import pytest
import redis

from bot.ops.worker import default_runtime
from bot.redis_connection import CONNECT_TIMEOUT_SECONDS, REPLY_TIMEOUT_SECONDS, open_redis
from bot.settings import Settings


def test_a_redis_that_never_answers_fails_within_the_timeouts() -> None:
    # The kernel completes the handshake from the listen backlog; nothing ever reads or answers.
    with socket.create_server(("127.0.0.1", 0)) as silent:
        client = open_redis(f"redis://127.0.0.1:{silent.getsockname()[1]}/0")
        started = time.monotonic()
        with pytest.raises(redis.TimeoutError):
            client.ping()
        elapsed = time.monotonic() - started
        client.close()
    assert REPLY_TIMEOUT_SECONDS - 0.1 <= elapsed < CONNECT_TIMEOUT_SECONDS + REPLY_TIMEOUT_SECONDS + 0.5


def test_a_blocking_command_gets_its_block_on_top_of_the_reply_timeout(redis_url: str) -> None:
    block = REPLY_TIMEOUT_SECONDS + 0.3  # longer than a plain client waits for a reply
    client = open_redis(redis_url, blocking_seconds=block)
    key = f"test:{uuid.uuid4().hex}:stream"
    started = time.monotonic()
    assert client.xread({key: "$"}, block=int(block * 1000)) == []  # the block ran out: no entry
    assert time.monotonic() - started >= block - 0.1
    client.close()


def test_a_negative_block_is_refused() -> None:
    with pytest.raises(ValueError, match="blocking_seconds"):
        open_redis("redis://127.0.0.1:6379/0", blocking_seconds=-1)


def test_the_job_client_outwaits_the_durability_wait(redis_url: str) -> None:
    """A job's client sends WAITAOF / WAIT with ``CHATOPS_DURABILITY_TIMEOUT_MS``: its reply may take that long."""
    settings = Settings(_env_file=None, redis_url=redis_url, chatops_durability_timeout_ms=9000)  # type: ignore[call-arg]
    runtime = default_runtime(settings)
    try:
        timeout = runtime.redis.connection_pool.connection_kwargs["socket_timeout"]
        assert timeout == REPLY_TIMEOUT_SECONDS + 9.0
    finally:
        runtime.redis.close()
