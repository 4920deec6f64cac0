"""Fixtures for the bot's tests: an in-process harness, and real worker subprocesses.

The helpers they build on live in ``tests/support`` (``harness``, ``worker_process``); the keys
under the test's unique prefix and its unique queue are the root conftest's.
"""

from __future__ import annotations

import os
import subprocess
import sys
from collections.abc import Callable, Iterator
from pathlib import Path

import pytest
import redis

from bot.keys import Keys
from tests.bot.runtimes import file_tools, plan_model
from tests.reliability.redis_proc import RedisProcess
from tests.support.harness import Harness, make_options
from tests.support.leftover_processes import family_environment
from tests.support.worker_process import ROOT, WorkerProcess


@pytest.fixture
def harness(redis_client: redis.Redis, keys: Keys, queue_name: str, tmp_path: Path) -> Iterator[Harness]:
    yield Harness(
        redis_client, keys, make_options(queue_name), tmp_path, [plan_model()], file_tools(tmp_path)
    )


@pytest.fixture
def private_redis(tmp_path: Path) -> Iterator[RedisProcess]:
    """A ``redis-server`` of the test's own: what it counts (its requests) is the test's alone."""
    server = RedisProcess(tmp_path / "redis").start()
    try:
        yield server
    finally:
        server.stop()


@pytest.fixture
def worker_processes(
    redis_url: str, key_prefix: str, queue_name: str, tmp_path: Path
) -> Iterator[Callable[..., WorkerProcess]]:
    """Start worker subprocesses on this test's prefix and queue; all are killed at the end (horses too)."""
    started: list[WorkerProcess] = []
    env_file = tmp_path / "empty.env"
    env_file.write_text("")

    def start(**extra_env: str) -> WorkerProcess:
        env = {
            **os.environ,
            "REDIS_URL": redis_url,
            "CHATOPS_REDIS_PREFIX": key_prefix,
            "CHATOPS_QUEUE": queue_name,
            "CHATOPS_LEASE_TTL_SECONDS": "1",
            "CHATOPS_RETENTION_DAYS": "1",
            "CHATOPS_MAX_ITERATIONS": "40",
            "CHATOPS_DEADLINE_SECONDS": "120",
            "CHATOPS_RUNTIME": "tests.bot.runtimes:subprocess_runtime",
            "CHATOPS_TEST_DIR": str(tmp_path),
            **extra_env,
        }
        log = tmp_path / f"worker-{len(started)}.log"
        env, family = family_environment(env)
        proc = subprocess.Popen(
            [sys.executable, "-m", "bot.ops.cli", "--env-file", str(env_file), "worker"],
            cwd=ROOT,
            env=env,
            stdout=log.open("wb"),
            stderr=subprocess.STDOUT,
            start_new_session=True,
        )
        started.append(WorkerProcess(proc, log, family))
        return started[-1]

    yield start
    for worker in started:
        worker.kill()  # its work horses too
