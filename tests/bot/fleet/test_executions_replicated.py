"""``Executions.claim`` behind sentinels: a changing call's mark is on a replica before it runs, or it never runs."""

from __future__ import annotations

import time
import uuid
from collections.abc import Iterator
from pathlib import Path

import pytest
import redis

from agent.redis_util import as_text
from bot.fleet.executions import ABANDONED, UNREPLICATED, Executions
from bot.keys import Keys
from tests.support.sentinel_group import SentinelGroup, sentinel_group

WAIT_MS = 300


@pytest.fixture
def group(tmp_path: Path) -> Iterator[SentinelGroup]:
    yield from sentinel_group(tmp_path / "sentinel")


def test_a_changing_calls_mark_is_on_the_replica_when_the_claim_returns(group: SentinelGroup) -> None:
    keys = Keys(f"test:{uuid.uuid4().hex[:8]}:")
    executions = Executions(
        group.master.client(), keys, b"secret", "web-03", replicas=1, replica_wait_ms=WAIT_MS
    )
    assert executions.claim("e1", "runner:1", time.time() + 60, replicated=True) is None
    assert (as_text(group.replica.client().get(keys.execution("web-03", "e1"))) or "").startswith("executing")


def test_with_no_replica_the_mark_is_abandoned_and_the_call_never_runs(group: SentinelGroup) -> None:
    keys = Keys(f"test:{uuid.uuid4().hex[:8]}:")
    executions = Executions(
        group.master.client(), keys, b"secret", "web-03", replicas=1, replica_wait_ms=WAIT_MS
    )
    group.replica.kill()
    group.wait_replicas(group.master, 0)
    assert executions.claim("e2", "runner:1", time.time() + 60, replicated=True) == UNREPLICATED
    assert executions.state("e2") == ABANDONED
    # A retried job finds it abandoned: it does not run either (its dispatcher is told it did not run).
    assert executions.claim("e2", "runner:1", time.time() + 60, replicated=True) == ABANDONED
    # A read-only call is not held up: running it twice changes nothing.
    assert executions.claim("e3", "runner:1", time.time() + 60) is None


def test_without_sentinels_nothing_is_waited_for(redis_url: str, key_prefix: str) -> None:
    executions = Executions(
        redis.Redis.from_url(redis_url), Keys(key_prefix), b"secret", "web-03"
    )  # replicas=0
    assert (
        executions.claim("e4", "runner:1", time.time() + 60, replicated=True) is None
    )  # no replica asked for
