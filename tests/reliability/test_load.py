"""Load: concurrent runs on 2 workers, runs awaiting approval at once, replies into running runs.

Everything goes the production way: mentions, replies and clicks are sent by the Slack emulator
to the web app, two worker subprocesses run the jobs, Redis is a ``redis-server`` of the test's
own (so its memory can be measured). Each test counts what people would see: every run card and
answer lands exactly once, every reply reaches its run exactly once (and gets :eyes:), and the
audit stream tells each run's story once. Memory is measured, not guessed: Redis' used memory per
finished run and the worker processes' resident memory per run, from after a warm-up of the same
runs (``warm_up``): what a worker's main process grows by once (its first job of a kind, its
allocator's first high water under a burst) is not a run's, and a leak of a run's size is still
many times the bound.

Each test is sized to what it shows, not to a throughput: ``CONCURRENT`` runs are many times the
workers' two, ``WAITING`` runs awaiting approval are many times what any worker could hold, and
10 runs take 20 replies each. Its waits fail only when the work stops moving (``wait_for_progress``),
so a busy machine makes a test slower, never red. ``CHATOPS_LOAD_SCALE=2`` and ``=5`` run them at
the sizes of docs/RELIABILITY.md's figures (100 concurrent runs, 500 awaiting approval).
"""

from __future__ import annotations

import json
import os
import time
from collections import Counter
from collections.abc import Callable, Iterable
from concurrent.futures import ThreadPoolExecutor
from typing import Any, TypeVar

import pytest

from agent.redis_util import as_text
from agent.types import RunStatus
from bot.observability.audit import AuditKind
from bot.slack.rendering import render
from tests.bot.runtimes import executions
from tests.reliability.cluster import Cluster, Worker
from tests.reliability.redis_proc import RedisProcess
from tests.support.waiting import wait_for, wait_for_progress

# A load test takes a minute on two idle cores, several on a busy machine: the suite's 120 s
# per-test timeout would cut it short of its own waits, which catch a stall themselves.
pytestmark = [pytest.mark.reliability, pytest.mark.slow, pytest.mark.timeout(1800)]

SCALE = int(os.environ.get("CHATOPS_LOAD_SCALE") or 1)
CONCURRENT = 50 * SCALE  # 25 times the workers (and enough runs to measure memory per run)
WAITING = 100 * SCALE  # fifty times the workers: a run that held one would stop the others

WARM_UP = 20  # runs of the test's own kind before a worker's memory is read (both workers take some)
# A worker's main process only dequeues, forks and sweeps (each job runs in a forked work horse):
# after the warm-up the two grow by a few KB a run together (docs/RELIABILITY.md). A leak of
# 100 KB a run is three times this bound.
RSS_PER_RUN = 32 * 1024

T = TypeVar("T")
Record = Callable[[str, object], None]  # pytest's ``record_testsuite_property``: figures in --junitxml
# Slack retries an event not answered 2xx in 3 s at once, after 1 and after 5 minutes; a burst this
# big (on two cores shared with the workers) is retried here after 1, 5 and 15 seconds.
SLACK_RETRIES = (1.0, 5.0, 15.0)
# One person starting hundreds of runs in one channel is what the limits are there to refuse.
NO_LIMITS = {
    "chatops_user_runs_per_window": 0,
    "chatops_channel_runs_per_window": 0,
    "chatops_channel_max_active_runs": 0,
}  # printed at the end of each test (``-s``) for docs/RELIABILITY.md


def in_parallel(function: Callable[[T], Any], items: Iterable[T], threads: int = 10) -> list[Any]:
    with ThreadPoolExecutor(threads) as pool:
        return list(pool.map(function, items))


def statuses(cluster: Cluster, run_ids: list[str]) -> list[RunStatus | None]:
    pipe = cluster.redis.pipeline()
    for run_id in run_ids:
        pipe.hget(cluster.keys.run(run_id), "status")
    return [RunStatus(as_text(raw) or "") if raw else None for raw in pipe.execute()]


def wait_all(cluster: Cluster, run_ids: list[str], status: RunStatus) -> None:
    """Until every run is ``status``; fails only when none has got there for two minutes."""

    def done() -> int:
        return sum(1 for s in statuses(cluster, run_ids) if s is status)

    wait_for_progress(done, len(run_ids), what=f"{len(run_ids)} runs to be {status.value}")


def run_ids_of(cluster: Cluster, threads: list[str]) -> list[str]:
    return [cluster.run_id(ts, timeout=120) for ts in threads]


def wait_answers(cluster: Cluster, threads: list[str]) -> None:
    """Until each thread has its one answer; fails only when none has come for two minutes."""

    def answered() -> int:
        return sum(1 for ts in threads if len(cluster.answers(ts)) == 1)

    wait_for_progress(answered, len(threads), what="every answer")


def bot_messages(cluster: Cluster) -> list[dict[str, Any]]:
    """Every message the bot has in the channel's threads, as people see them now."""
    found = []
    for parent in cluster.control.messages("C_INCIDENT"):
        for message in cluster.control.thread("C_INCIDENT", str(parent["ts"]))[1:]:
            if message.get("user") == "U_OPS":
                found.append({**message, "thread_ts": parent["ts"]})
    return found


def warm_up(cluster: Cluster, plan: str, approve: bool = False) -> None:
    """``WARM_UP`` runs of ``plan`` at once, through to their answers (approved by U_BOB when they
    ask): the workers' first jobs of the kind the test measures, so that what a worker's process
    grows by once is behind it when its memory is read."""
    threads = in_parallel(lambda n: cluster.mention(f"plan: {plan} #warm-up-{n}"), range(WARM_UP))
    run_ids = run_ids_of(cluster, threads)
    if approve:
        cards = in_parallel(lambda ts: cluster.approval_card(ts, timeout=120), threads)
        clicked = in_parallel(
            lambda c: cluster.control.click(str(c["ts"]), "U_BOB", action_id=render.ACTION_APPROVE), cards
        )
        assert all(c["status"] == 200 for c in clicked)
    wait_all(cluster, run_ids, RunStatus.COMPLETED)
    wait_answers(cluster, threads)
    service = cluster.service
    wait_for(
        lambda: service.queue.started_job_registry.count == 0 and service.queue.count == 0,
        120,
        "idle workers",
    )


def rss_per_run(workers: list[Worker], before: list[int], runs: int) -> float:
    """What the workers' main processes grew by together since ``before`` (read after the warm-up),
    per run: a leak of so much a job shows whole, however the jobs were shared out."""
    return sum(w.rss() - b for w, b in zip(workers, before, strict=True)) / runs


def used_memory(server: RedisProcess) -> int:
    return int(server.client().info("memory")["used_memory"])


def keys_without_ttl(cluster: Cluster) -> list[str]:
    """Our keys that would live forever and grow with the runs. The audit stream is capped instead,
    the metrics are one hash per metric (their fields are label values, not runs), and the data
    marker is one key that says Redis kept its data (``bot.runs.lost_runs``)."""
    client, prefix = cluster.redis, cluster.settings.chatops_redis_prefix
    forever = []
    for key in client.scan_iter(match=f"{prefix}*", count=1000):
        name = as_text(key) or ""
        if (
            client.ttl(key) == -1
            and name not in (cluster.keys.audit(), cluster.keys.data_marker())
            and not name.startswith(f"{prefix}metrics:")
        ):
            forever.append(name)
    return forever


def assert_audit_once(cluster: Cluster, run_ids: list[str], *kinds: AuditKind) -> None:
    entries = cluster.service.audit.entries()
    by_run: dict[str, Counter[AuditKind]] = {}
    for entry in entries:
        by_run.setdefault(entry.run_id, Counter())[entry.kind] += 1
    for run_id in run_ids:
        for kind in kinds:
            assert by_run.get(run_id, Counter())[kind] == 1, (run_id, kind, by_run.get(run_id))


def report(record: Record, name: str, **figures: Any) -> None:
    """The figures docs/RELIABILITY.md quotes: in the JUnit XML, and printed (``-s``)."""
    record(name, json.dumps(figures))
    print(f"\nRELIABILITY {name}: {json.dumps(figures)}")


def test_concurrent_runs_on_two_workers_land_every_message_once(
    own_redis: Callable[..., RedisProcess],
    make_cluster: Callable[..., Cluster],
    record_testsuite_property: Record,
) -> None:
    server = own_redis()
    cluster = make_cluster(redis=server.url, retry_delays=SLACK_RETRIES, **NO_LIMITS)
    # Exactly once under concurrency, not Slack's pace: at its rate tiers one channel takes a post a
    # second, and hundreds of cards would outlast the test (429s have their own tests).
    cluster.control.set_rate_limits(False)
    env = {
        "CHATOPS_TEST_MODEL_SLEEP": "0.2",
        "CHATOPS_TEST_CARD_INTERVAL": "0.25",
        "CHATOPS_LEASE_TTL_SECONDS": "5",
    }
    workers = [cluster.start_worker(**env) for _ in range(2)]
    warm_up(cluster, "check_health")
    memory_before = used_memory(server)
    rss_before = [w.rss() for w in workers]
    started = time.monotonic()

    threads = in_parallel(lambda n: cluster.mention(f"plan: check_health #{n}"), range(CONCURRENT))
    run_ids = run_ids_of(cluster, threads)
    wait_all(cluster, run_ids, RunStatus.COMPLETED)
    wait_answers(cluster, threads)
    elapsed = time.monotonic() - started
    cluster.settle()  # nothing left under way: a duplicate would be there

    messages = [m for m in bot_messages(cluster) if m["thread_ts"] in set(threads)]
    per_thread = Counter(str(m["thread_ts"]) for m in messages)
    answers = Counter(str(m["thread_ts"]) for m in messages if str(m["text"]) == "done: check_health ok")
    cards = [m for m in messages if "run for" in str(m["text"])]
    lost = sum(1 for ts in threads if answers[ts] == 0) + sum(1 for ts in threads if per_thread[ts] < 2)
    duplicated = sum(count - 2 for count in per_thread.values() if count > 2)
    assert lost == 0 and duplicated == 0, (lost, duplicated)
    assert len(cards) == CONCURRENT and all("Done" in json.dumps(c["blocks"]) for c in cards)
    assert (
        len(executions(cluster.directory / "check_health.log")) == CONCURRENT + WARM_UP
    )  # the warm-up's, then one each
    assert_audit_once(
        cluster, run_ids, AuditKind.RUN_STARTED, AuditKind.TOOL_EXECUTED, AuditKind.RUN_FINISHED
    )
    assert cluster.redis.zcard(cluster.keys.active_runs()) == 0
    assert keys_without_ttl(cluster) == []

    memory_per_run = (used_memory(server) - memory_before) / CONCURRENT
    rss_growth = rss_per_run(workers, rss_before, CONCURRENT)
    assert memory_per_run < 64 * 1024, memory_per_run  # history, state, audit: a few KB a run
    assert rss_growth < RSS_PER_RUN, rss_growth  # each job runs in a forked work horse
    report(
        record_testsuite_property,
        f"{CONCURRENT} concurrent runs",
        runs=CONCURRENT,
        messages=len(messages),
        lost=lost,
        duplicated=duplicated,
        seconds=round(elapsed, 1),
        redis_bytes_per_run=int(memory_per_run),
        worker_rss_bytes_per_run=int(rss_growth),
    )


def test_runs_awaiting_approval_hold_no_worker_and_all_finish_once_approved(
    own_redis: Callable[..., RedisProcess],
    make_cluster: Callable[..., Cluster],
    record_testsuite_property: Record,
) -> None:
    server = own_redis()
    cluster = make_cluster(redis=server.url, retry_delays=SLACK_RETRIES, **NO_LIMITS)
    # Exactly once under concurrency, not Slack's pace: at its rate tiers one channel takes a post a
    # second, and hundreds of cards would outlast the test (429s have their own tests).
    cluster.control.set_rate_limits(False)
    env = {"CHATOPS_TEST_CARD_INTERVAL": "0.05", "CHATOPS_LEASE_TTL_SECONDS": "5"}
    workers = [cluster.start_worker(**env) for _ in range(2)]
    warm_up(cluster, "restart_service", approve=True)
    rss_before = [w.rss() for w in workers]
    memory_before = used_memory(server)
    started = time.monotonic()

    threads = in_parallel(lambda n: cluster.mention(f"plan: restart_service #{n}"), range(WAITING))
    run_ids = run_ids_of(cluster, threads)
    wait_all(cluster, run_ids, RunStatus.AWAITING_APPROVAL)
    waiting_after = time.monotonic() - started
    service = cluster.service
    # The last jobs finish their report; then no job runs while the runs wait for people.
    wait_for(
        lambda: service.queue.started_job_registry.count == 0 and service.queue.count == 0,
        120,
        "idle workers",
    )
    assert not any(cluster.redis.exists(cluster.keys.lease(r)) for r in run_ids)
    waiting_memory = (used_memory(server) - memory_before) / WAITING

    probe = time.monotonic()
    quick = cluster.mention("plan: check_health #while-the-others-wait")
    cluster.wait_status(cluster.run_id(quick, timeout=120), RunStatus.COMPLETED, timeout=120)
    new_run_seconds = time.monotonic() - probe  # a figure for RELIABILITY.md, not a bound

    def approval_card(ts: str) -> dict[str, Any]:
        return cluster.approval_card(ts, timeout=120)

    cards = in_parallel(approval_card, threads)
    clicked = in_parallel(
        lambda card: cluster.control.click(str(card["ts"]), "U_BOB", action_id=render.ACTION_APPROVE), cards
    )
    assert all(c["status"] == 200 for c in clicked)
    wait_all(cluster, run_ids, RunStatus.COMPLETED)
    wait_answers(cluster, threads)
    elapsed = time.monotonic() - started
    cluster.settle()  # nothing left under way: a duplicate would be there

    runs = executions(cluster.directory / "restart_service.log")
    assert len(runs) == WARM_UP + WAITING and {r["arguments"]["confirmed_by"] for r in runs} == {"U_BOB"}
    messages = [m for m in bot_messages(cluster) if m["thread_ts"] in set(threads)]
    per_thread = Counter(str(m["thread_ts"]) for m in messages)
    lost = sum(1 for ts in threads if per_thread[ts] < 3)
    duplicated = sum(count - 3 for count in per_thread.values() if count > 3)  # card, approval, answer
    assert lost == 0 and duplicated == 0, (lost, duplicated)
    assert_audit_once(
        cluster,
        run_ids,
        AuditKind.RUN_STARTED,
        AuditKind.APPROVAL_REQUESTED,
        AuditKind.APPROVAL_DECIDED,
        AuditKind.TOOL_EXECUTED,
        AuditKind.RUN_FINISHED,
    )
    assert keys_without_ttl(cluster) == []
    rss_growth = rss_per_run(workers, rss_before, WAITING)
    assert rss_growth < RSS_PER_RUN, rss_growth
    assert waiting_memory < 64 * 1024, waiting_memory
    report(
        record_testsuite_property,
        f"{WAITING} runs awaiting approval",
        runs=WAITING,
        messages=len(messages),
        lost=lost,
        duplicated=duplicated,
        all_waiting_after_seconds=round(waiting_after, 1),
        new_run_while_waiting_seconds=round(new_run_seconds, 1),
        seconds=round(elapsed, 1),
        redis_bytes_per_waiting_run=int(waiting_memory),
        worker_rss_bytes_per_run=int(rss_growth),
    )


def test_twenty_replies_into_each_of_ten_running_runs_arrive_exactly_once(
    own_redis: Callable[..., RedisProcess],
    make_cluster: Callable[..., Cluster],
    record_testsuite_property: Record,
) -> None:
    server = own_redis()
    cluster = make_cluster(redis=server.url, retry_delays=SLACK_RETRIES, **NO_LIMITS)
    # Exactly once under concurrency, not Slack's pace: at its rate tiers one channel takes a post a
    # second, and hundreds of cards would outlast the test (429s have their own tests).
    cluster.control.set_rate_limits(False)
    env = {
        "CHATOPS_TEST_MODEL_SLEEP": "0.05",
        "CHATOPS_TEST_CARD_INTERVAL": "0.25",
        "CHATOPS_MAX_ITERATIONS": "2000",
        "CHATOPS_LEASE_TTL_SECONDS": "5",
    }
    for _ in range(2):
        cluster.start_worker(**env)
    started = time.monotonic()
    threads = in_parallel(lambda n: cluster.mention(f"collect: 20 #{n}"), range(10))
    run_ids = run_ids_of(cluster, threads)

    def reply_twenty(ts: str) -> list[str]:
        return [cluster.say(f"reply {i} to {ts}", user="U_BOB", thread_ts=ts) for i in range(20)]

    replies = dict(zip(threads, in_parallel(reply_twenty, threads), strict=True))
    wait_all(cluster, run_ids, RunStatus.COMPLETED)
    elapsed = time.monotonic() - started

    stored = lost = duplicated = 0
    for ts, run_id in zip(threads, run_ids, strict=True):
        texts = [m.content or "" for m in cluster.service.history(run_id) if m.role == "user"][1:]
        wanted = [f"reply {i} to {ts}" for i in range(20)]
        stored += len(texts)
        lost += len(set(wanted) - set(texts))
        duplicated += len(texts) - len(set(texts))
        # Each exactly once. (In the order the web app received them, which for messages posted a
        # moment apart is not always the order they were posted in: Slack delivers concurrently.)
        assert sorted(texts) == sorted(wanted)
        assert wait_for(lambda ts=ts: cluster.answers(ts, "got"), 120) == ["got 20 replies"]  # type: ignore[misc]
    assert lost == 0 and duplicated == 0

    def eyes_on_every_reply() -> bool:
        for ts, posted in replies.items():
            seen = {m["ts"]: m for m in cluster.control.thread("C_INCIDENT", ts)}
            for reply_ts in posted:
                reactions = {r["name"]: r["users"] for r in seen[reply_ts].get("reactions") or []}
                if reactions.get("eyes") != ["U_OPS"]:
                    return False
        return True

    wait_for(eyes_on_every_reply, 120, ":eyes: on all 200 replies")
    kinds = Counter(e.kind for e in cluster.service.audit.entries() if e.run_id in set(run_ids))
    assert kinds[AuditKind.MESSAGE_INJECTED] == 200 and kinds[AuditKind.MESSAGE_UNREAD] == 0
    assert all(cluster.service.inbox.peek(r) == [] for r in run_ids)
    report(
        record_testsuite_property,
        "200 replies into 10 runs",
        runs=10,
        replies=200,
        stored=stored,
        lost=lost,
        duplicated=duplicated,
        seconds=round(elapsed, 1),
    )
