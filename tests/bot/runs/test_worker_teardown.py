"""A worker stops listening for RQ's commands at once, whatever its command thread was doing; and it
stops its scheduler process, whatever that process was doing.

Every RQ worker runs a thread on its ``rq:pubsub:<name>`` channel (``Worker.subscribe``:
``PubSub.run_in_thread(sleep_time=60)``) and stops it when it ends (``Worker.unsubscribe``: send
``UNSUBSCRIBE``, ``PubSubWorkerThread.stop()``, ``join(timeout=1)``). When the thread has read the
reply to that ``UNSUBSCRIBE`` before ``stop()`` clears its flag (a busy process often lets it), it
waits in ``PubSub.get_message`` for a subscription, up to its 60 s. RQ 3.0.0 bounds that wait at
1 s with its join; redis-py 8.2.0's ``stop()`` joins the thread itself, with no bound, so each end
of a worker (every burst of the end-to-end tests' in-process worker, every shutdown of a
``chatops worker``) could take a minute: the reason pyproject.toml keeps redis-py below 8.2.
"""

from __future__ import annotations

import contextlib
import multiprocessing
import signal
import threading
import time
from collections.abc import Iterator
from datetime import UTC, datetime

import pytest
import redis

from bot.redis_connection import open_redis
from bot.runs import worker as worker_module
from bot.runs.runtime import Runtime
from bot.runs.worker import ChatopsSimpleWorker, ChatopsWorker
from tests.support.waiting import wait_until

# A hang guard only: RQ itself bounds the wait at 1 s, the thread's own bound is 60 s.
HANG_SECONDS = 15.0


@pytest.fixture
def connection(redis_url: str, key_prefix: str) -> Iterator[redis.Redis]:
    client = open_redis(redis_url)
    yield client
    client.close()


def no_runtime() -> Runtime:
    raise AssertionError("no job runs in this test")


def test_a_worker_stops_its_command_thread_at_once_after_the_thread_read_its_unsubscribe(
    connection: redis.Redis, queue_name: str
) -> None:
    worker = ChatopsSimpleWorker([queue_name], connection=connection, runtime_factory=no_runtime)
    worker.subscribe()
    pubsub, thread = worker.pubsub, worker.pubsub_thread
    assert pubsub is not None and thread is not None
    wait_until(lambda: pubsub.subscribed, what="the worker's subscription")
    # The race a busy process often loses, made certain: the thread reads the reply to an
    # UNSUBSCRIBE and goes back to waiting before the worker stops it.
    pubsub.unsubscribe()
    wait_until(lambda: not pubsub.subscribed, what="the thread to read the UNSUBSCRIBE reply")

    stopped = threading.Event()
    threading.Thread(target=lambda: (worker.unsubscribe(), stopped.set()), daemon=True).start()
    assert stopped.wait(HANG_SECONDS), (
        f"Worker.unsubscribe() still waits for its command thread after {HANG_SECONDS} s "
        f"(redis-py {redis.__version__}: PubSubWorkerThread.stop() joins the thread without a bound)"
    )


def test_a_worker_asked_to_stop_starts_no_scheduler_in_its_last_maintenance(
    connection: redis.Redis, queue_name: str
) -> None:
    """RQ stops the scheduler when a warm shutdown is asked for during a job; after the job its
    maintenance found the scheduler gone and started a new one, which the teardown then signalled
    before it had its own handlers (the test suite's SIGTERM test hung so under load)."""
    from rq.scheduler import RQScheduler

    worker = ChatopsWorker([queue_name], connection=connection, runtime_factory=no_runtime)
    scheduler = RQScheduler(worker.queues, connection=connection)
    worker.scheduler = scheduler
    worker.last_cleaned_at = datetime.now(UTC)  # not the first maintenance: RQ restarts a scheduler
    worker._stop_requested = True  # the warm shutdown, its scheduler already stopped
    try:
        worker.run_maintenance_tasks()
        assert scheduler._process is None, "a worker leaving started a scheduler"
    finally:
        if scheduler._process is not None:
            scheduler._process.kill()
            scheduler._process.join()


def _deaf_scheduler(ready: threading.Event) -> None:  # the process a SIGTERM missed
    signal.signal(signal.SIGTERM, signal.SIG_IGN)
    ready.set()
    while True:
        time.sleep(1)


def test_a_scheduler_that_missed_its_sigterm_is_killed_and_the_worker_goes_on_stopping(
    connection: redis.Redis, queue_name: str
) -> None:
    from rq.scheduler import RQScheduler

    worker = ChatopsWorker([queue_name], connection=connection, runtime_factory=no_runtime)
    scheduler = RQScheduler(worker.queues, connection=connection)
    worker.scheduler = scheduler
    context = multiprocessing.get_context("fork")
    ready = context.Event()
    process = context.Process(target=_deaf_scheduler, args=(ready,), daemon=True)
    process.start()
    scheduler._process = process
    try:
        assert ready.wait(HANG_SECONDS), "the stand-in scheduler did not start"
        stopped = threading.Event()
        threading.Thread(target=lambda: (worker.stop_scheduler(), stopped.set()), daemon=True).start()
        # The worker waits SCHEDULER_STOP_SECONDS for it, then kills it: a bound, not a verdict.
        assert stopped.wait(worker_module.SCHEDULER_STOP_SECONDS + HANG_SECONDS), (
            "Worker.stop_scheduler() waits for ever for a scheduler that ignores SIGTERM"
        )
        assert not process.is_alive()
        assert process.exitcode == -signal.SIGKILL
    finally:
        with contextlib.suppress(OSError):
            process.kill()
        process.join()
