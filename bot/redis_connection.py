"""The one way the bot opens Redis: ``open_redis(url)``, with one set of timeouts.

Every process (web, worker, the CLI commands, ``doctor``) reaches Redis through a client made
here, so a slow or unreachable Redis fails the same way everywhere: a connection within
``CONNECT_TIMEOUT_SECONDS``, each reply within ``REPLY_TIMEOUT_SECONDS``. The bound is the web
process's: a click or an event is decided in Redis before Slack's 3 s are up (connect, then one
reply, at worst). A client that sends a command which blocks on the server by design (``WAITAOF``
with its timeout, ``XREAD`` with ``BLOCK``) says for how long, and waits for replies that much longer.
RQ raises the socket timeout of its worker's connection itself to cover its blocking dequeue.

redis-py's pools are fork-aware (a child process never reuses its parent's sockets), and a client
opens no connection until its first command: a forking worker makes its job's client in the work
horse (``bot.ops.worker.default_runtime``), after the fork.
"""

from __future__ import annotations

import redis

CONNECT_TIMEOUT_SECONDS = 1.0
REPLY_TIMEOUT_SECONDS = 2.0
HEALTH_CHECK_SECONDS = 30  # a connection idle this long is pinged before it is used again


def open_redis(url: str, *, blocking_seconds: float = 0.0) -> redis.Redis:
    """A client of ``url`` (``REDIS_URL``); ``blocking_seconds``: how long the longest command it
    sends may block on the server by design."""
    if blocking_seconds < 0:
        raise ValueError(f"blocking_seconds must not be negative, got {blocking_seconds}")
    return redis.Redis.from_url(
        url,
        socket_connect_timeout=CONNECT_TIMEOUT_SECONDS,
        socket_timeout=REPLY_TIMEOUT_SECONDS + blocking_seconds,
        health_check_interval=HEALTH_CHECK_SECONDS,
    )
