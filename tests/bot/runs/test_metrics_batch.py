"""A run job's metrics go to Redis in one round trip (``MetricsStore.batched``).

Round trips are counted on the client side by a real redis-py connection that keeps what it
sends (``CountingConnection``): every write to the socket is one request of a round trip. The
commands reach the real Redis of the suite, and the numbers are read back from it.
"""

from __future__ import annotations

import logging
from collections.abc import Iterator
from typing import Any

import pytest
import redis

from bot.keys import Keys
from bot.observability.metrics import (
    APPROVAL_WAIT,
    LLM_TOKENS,
    RUNS_FINISHED,
    RUNS_STARTED,
    TOOL_CALLS,
    TOOL_DURATION,
    MetricsStore,
    Spec,
)
from tests.bot.runtimes import file_tools, plan_model
from tests.support.harness import Harness, make_options


class Sent:
    """What a ``CountingConnection`` pool sent: one entry per write (a command or a whole pipeline)."""

    def __init__(self) -> None:
        self.requests: list[bytes] = []

    @property
    def writes(self) -> list[bytes]:
        """The requests that add to a metric (not a connection's handshake, not a read)."""
        return [r for r in self.requests if b"HINCRBY" in r and b":metrics:chatops_" in r]


def counting_client(redis_url: str, sent: Sent) -> redis.Redis:
    class CountingConnection(redis.Connection):
        def send_packed_command(self, command: Any, check_health: bool = True) -> None:
            chunks = [command] if isinstance(command, (bytes, str)) else command
            sent.requests.append(b"".join(c.encode() if isinstance(c, str) else bytes(c) for c in chunks))
            super().send_packed_command(command, check_health)

    pool = redis.ConnectionPool.from_url(redis_url, connection_class=CountingConnection)
    return redis.Redis(connection_pool=pool)


@pytest.fixture
def sent() -> Sent:
    return Sent()


@pytest.fixture
def counted(redis_url: str, key_prefix: str, sent: Sent) -> Iterator[redis.Redis]:
    client = counting_client(redis_url, sent)
    yield client
    client.close()


def record_a_run(store: MetricsStore) -> None:
    """The recordings of a run with one tool call and two model answers."""
    store.inc(RUNS_STARTED)
    for tokens in (120, 80):
        store.inc(LLM_TOKENS, tokens, model="plan", kind="prompt")
    store.inc(TOOL_CALLS, tool="check_health", outcome="ok")
    store.observe(TOOL_DURATION, 0.3, tool="check_health")
    store.observe(APPROVAL_WAIT, 42.0, decision="approved")
    store.inc(RUNS_FINISHED, status="completed")


def test_a_batch_is_one_round_trip_without_multi_and_reads_back_as_writes_one_by_one(
    counted: redis.Redis, redis_client: redis.Redis, keys: Keys, sent: Sent
) -> None:
    one_by_one = Keys(f"{keys.prefix}one-by-one:")
    record_a_run(MetricsStore(redis_client, one_by_one))
    store = MetricsStore(counted, keys)
    with store.batched():
        record_a_run(store)
        assert sent.writes == []  # nothing sent while the job works
    (request,) = sent.writes
    assert b"MULTI" not in request and request.count(b"HINCRBY") == 11  # 5 counters, 2 histograms of 3
    assert store.read() == MetricsStore(redis_client, one_by_one).read()


def test_outside_a_batch_every_recording_is_written_at_once_in_its_own_transaction(
    counted: redis.Redis, keys: Keys, sent: Sent
) -> None:
    store = MetricsStore(counted, keys)
    store.inc(RUNS_STARTED)
    assert len(sent.writes) == 1 and store.read()[RUNS_STARTED] == {"[]": "1"}
    store.observe(TOOL_DURATION, 0.3, tool="check_health")
    assert len(sent.writes) == 2
    assert all(w.startswith(b"*1\r\n$5\r\nMULTI\r\n") for w in sent.writes)


def test_nested_and_empty_batches_send_nothing_of_their_own(
    counted: redis.Redis, keys: Keys, sent: Sent
) -> None:
    store = MetricsStore(counted, keys)
    with store.batched():
        pass
    assert sent.writes == []  # nothing recorded: no round trip
    with store.batched():
        store.inc(RUNS_STARTED)
        with store.batched():
            store.inc(RUNS_STARTED)
        assert sent.writes == []  # the inner block is part of the outer one
        store.inc(RUNS_STARTED)
    assert len(sent.writes) == 1
    assert store.read()[RUNS_STARTED] == {"[]": "3"}
    store.flush()
    assert len(sent.writes) == 1  # a batch is sent once


def test_an_exception_inside_the_batch_still_sends_it(counted: redis.Redis, keys: Keys, sent: Sent) -> None:
    store = MetricsStore(counted, keys)
    with pytest.raises(RuntimeError, match="the job failed"), store.batched():
        store.inc(RUNS_STARTED)
        raise RuntimeError("the job failed")
    assert len(sent.writes) == 1
    assert store.read()[RUNS_STARTED] == {"[]": "1"}


def test_redis_down_when_the_batch_is_sent_is_logged_and_swallowed(
    keys: Keys, caplog: pytest.LogCaptureFixture
) -> None:
    down = redis.Redis.from_url("redis://127.0.0.1:1/0", socket_connect_timeout=0.5)
    store = MetricsStore(down, keys)
    with caplog.at_level(logging.WARNING, logger="bot.observability.metrics"), store.batched():
        record_a_run(store)
    assert [r.getMessage().split(":")[0] for r in caplog.records] == ["metrics not recorded (Redis failed)"]
    with store.batched():  # the dropped batch is not sent again with the next one
        pass
    assert len(caplog.records) == 1


def test_a_long_batch_sends_what_it_holds_every_flush_seconds(
    counted: redis.Redis, keys: Keys, sent: Sent
) -> None:
    now = [100.0]
    store = MetricsStore(counted, keys, clock=lambda: now[0], flush_seconds=10.0)
    with store.batched():
        store.inc(RUNS_STARTED)
        now[0] += 9.0
        store.inc(TOOL_CALLS, tool="check_health", outcome="ok")
        assert sent.writes == []
        now[0] += 1.0
        store.inc(TOOL_CALLS, tool="check_health", outcome="ok")
        assert len(sent.writes) == 1  # the three, at the recording that found the batch due
        assert store.read()[TOOL_CALLS] == {'["check_health", "ok"]': "2"}
        now[0] += 3.0
        store.inc(RUNS_FINISHED, status="completed")
    assert len(sent.writes) == 2  # the rest, when the batch ended
    assert store.read()[RUNS_FINISHED] == {'["completed"]': "1"}


def totals(store: MetricsStore, *specs: Spec) -> dict[str, dict[str, str]]:
    read = store.read()
    return {spec.name: read[spec] for spec in specs}


def test_a_run_jobs_metrics_are_one_round_trip_however_the_job_ends(
    counted: redis.Redis, keys: Keys, queue_name: str, tmp_path: Any, sent: Sent
) -> None:
    harness = Harness(counted, keys, make_options(queue_name), tmp_path, [plan_model()], file_tools(tmp_path))
    run_id = harness.submit("plan: check_health restart_service")
    harness.work()  # suspends: waits for an approval
    assert len(sent.writes) == 1
    (approval,) = harness.service.approvals.for_run(run_id)
    harness.service.lifecycle.decide(approval.id, user="U_APPROVER", approve=True)
    harness.work()  # resumes and finishes
    assert len(sent.writes) == 2
    store = MetricsStore(counted, keys)
    assert totals(store, RUNS_STARTED, RUNS_FINISHED, TOOL_CALLS) == {
        "chatops_runs_started": {"[]": "1"},
        "chatops_runs_finished": {'["completed"]': "1"},
        "chatops_tool_calls": {'["check_health", "ok"]': "1", '["restart_service", "ok"]': "1"},
    }


def test_a_hostile_writers_poisoned_fields_cost_only_their_own_increments(
    counted: redis.Redis, redis_client: redis.Redis, keys: Keys, caplog: pytest.LogCaptureFixture
) -> None:
    """Someone with write access puts text in a counter's field and a string where a histogram's
    hash is: those commands fail in Redis, the rest of the batch counts, the job never sees it."""
    redis_client.hset(keys.metrics(RUNS_STARTED.name), "[]", "not a number")
    redis_client.set(keys.metrics(TOOL_DURATION.name), "not a hash")
    store = MetricsStore(counted, keys)
    with caplog.at_level(logging.WARNING, logger="bot.observability.metrics"), store.batched():
        record_a_run(store)
    assert "metrics not recorded (Redis failed)" in caplog.text
    assert redis_client.hget(keys.metrics(RUNS_STARTED.name), "[]") == b"not a number"
    assert redis_client.get(keys.metrics(TOOL_DURATION.name)) == b"not a hash"
    assert redis_client.hgetall(keys.metrics(TOOL_CALLS.name)) == {b'["check_health", "ok"]': b"1"}
    assert redis_client.hgetall(keys.metrics(RUNS_FINISHED.name)) == {b'["completed"]': b"1"}
    assert redis_client.hget(keys.metrics(LLM_TOKENS.name), '["plan", "prompt"]') == b"200"
