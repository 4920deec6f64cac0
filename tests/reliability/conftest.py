"""Fixtures of the reliability suite: the end-to-end fixtures (``tests.support.slack_fixtures``) plus whole clusters.

Every test runs on its own key prefix and RQ queue (and, when it stops or wipes Redis, on its own
``redis-server``), its own Slack emulator and web server on port 0, so the suite runs in parallel.
"""

from __future__ import annotations

import contextlib
from collections.abc import Callable, Iterator, Mapping
from dataclasses import replace
from pathlib import Path
from typing import Any

import pytest

from emulator.slack import SlackEmulator, SlackEmulatorClient, WorkspaceConfig
from tests.reliability.cluster import Cluster, cluster_settings, worker_environment
from tests.reliability.redis_proc import DURABLE, RedisProcess
from tests.support.slack_fixtures import bot, control, emulator, make_bot
from tests.support.slack_workspace import SECRET, TOKEN

__all__ = ["bot", "control", "emulator", "make_bot"]


@pytest.fixture
def own_redis(tmp_path: Path) -> Iterator[Callable[..., RedisProcess]]:
    """``own_redis(persist=False, config={...})``: a throwaway ``redis-server`` of this test (stopped at the end)."""
    started: list[RedisProcess] = []

    def start(persist: bool = False, config: Mapping[str, str] | None = None) -> RedisProcess:
        directory = tmp_path / f"redis-{len(started)}"
        server = RedisProcess(directory, persist=persist, config=dict(config or {})).start()
        started.append(server)
        return server

    yield start
    for server in started:
        server.stop()


@pytest.fixture
def durable_redis(own_redis: Callable[..., RedisProcess]) -> RedisProcess:
    """A ``redis-server`` configured as docs/OPERATIONS.md requires (AOF, ``appendfsync always``).

    ``durable_redis.kill()`` crashes it (SIGKILL) and ``durable_redis.start()`` brings it back on
    the same directory from its AOF; ``durable_redis.url`` is for worker processes, ``client()`` for the test.
    """
    return own_redis(config=DURABLE)


@pytest.fixture
def make_cluster(
    redis_url: str, key_prefix: str, queue_name: str, tmp_path: Path
) -> Iterator[Callable[..., Cluster]]:
    """``make_cluster(redis_url=..., retry_delays=..., worker_env={...}, users={...}, **settings)``: a
    served cluster (``users``: the workspace's people, Alice and Bob when not given).

    No worker is started: ``cluster.start_worker(**env)`` starts one.
    """
    with contextlib.ExitStack() as stack:

        def build(
            *,
            redis: str | None = None,
            retry_delays: tuple[float, ...] = (0.0, 0.3, 0.3),
            worker_env: dict[str, str] | None = None,
            users: dict[str, str] | None = None,
            **overrides: Any,
        ) -> Cluster:
            config = WorkspaceConfig(
                bot_token=TOKEN, signing_secret=SECRET, event_timeout=3.0, retry_delays=retry_delays
            )
            if users is not None:
                config = replace(config, users=dict(users))
            slack = stack.enter_context(SlackEmulator(config))
            settings = cluster_settings(slack, redis or redis_url, key_prefix, queue_name, **overrides)
            directory = tmp_path / f"cluster-{len(clusters)}"
            directory.mkdir()
            env = worker_environment(settings, directory, **(worker_env or {}))
            cluster = Cluster(settings, slack, SlackEmulatorClient(slack.url), directory, env).serve()
            clusters.append(cluster)
            stack.callback(cluster.close)
            return cluster

        clusters: list[Cluster] = []
        yield build
