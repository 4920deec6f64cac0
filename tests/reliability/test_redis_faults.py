"""Redis restarted in the middle of a run (its data gone), wiped under a waiting run, and stopped for ten seconds.

Each test has a ``redis-server`` of its own (the shared one is never touched). The web app,
the Slack emulator and real worker subprocesses run against it.
"""

from __future__ import annotations

import json
import time
from collections.abc import Callable

import pytest

from agent.types import RunStatus
from bot.observability.audit import AuditKind
from bot.runs.lost_runs import LOST_NOTICE
from bot.slack.rendering import render
from tests.bot.runtimes import executions
from tests.reliability.cluster import Cluster
from tests.reliability.redis_proc import RedisProcess
from tests.reliability.runtimes import logged_requests
from tests.support.slack_http import http
from tests.support.slack_workspace import buttons
from tests.support.waiting import wait_for

pytestmark = [pytest.mark.reliability, pytest.mark.slow]

OUTAGE_SECONDS = 10.0


def test_a_restart_that_loses_every_key_mid_run_says_so_in_the_thread_and_workers_go_on(
    own_redis: Callable[..., RedisProcess], make_cluster: Callable[..., Cluster]
) -> None:
    server = own_redis(persist=False)
    cluster = make_cluster(redis=server.url)
    worker = cluster.start_worker(CHATOPS_TEST_SLEEP_FIRST="3", CHATOPS_TEST_SLEEP_TOOL="check_health")
    ts = cluster.mention("plan: check_health")
    cluster.run_id(ts)
    log = cluster.directory / "check_health.log"
    wait_for(lambda: executions(log), what="the tool to start")
    server.restart()  # no persistence: the run, its history, the queue, the claims are gone

    def notice() -> str | None:
        return next((str(m["text"]) for m in cluster.bot_replies(ts)[1:] if "lost" in str(m["text"])), None)

    text = wait_for(notice, 30, "a notice in the thread")
    assert "mention me again" in text
    card = cluster.bot_replies(ts)[0]
    assert "Working" not in json.dumps(card["blocks"])  # the card no longer pretends to work
    assert cluster.answers(ts) == []

    # The same worker, reconnected, serves the next request (in the same thread: it is free again).
    again = cluster.mention("plan: check_health #again", thread_ts=ts)
    del again
    run_id = cluster.run_id(ts, timeout=30)
    cluster.wait_status(run_id, RunStatus.COMPLETED, timeout=30)
    assert wait_for(lambda: cluster.answers(ts), 30, "the answer") == ["done: check_health ok"]
    assert worker.proc.poll() is None


def stop_for(server: RedisProcess, seconds: float, meanwhile: Callable[[], object]) -> None:
    server.stop()
    stopped = time.monotonic()
    meanwhile()
    time.sleep(max(0.0, seconds - (time.monotonic() - stopped)))
    server.start()


def answered_once(cluster: Cluster, ts: str) -> None:
    def answers() -> list[str]:
        return cluster.answers(ts)

    assert wait_for(answers, 30, "the answer") == ["done: check_health ok"]
    cluster.settle()  # nothing left under way: a second answer would be there
    assert cluster.answers(ts) == ["done: check_health ok"]


def test_ten_seconds_without_redis_loses_no_event_and_workers_reconnect(
    own_redis: Callable[..., RedisProcess], make_cluster: Callable[..., Cluster]
) -> None:
    server = own_redis(persist=True)  # a restart that keeps its data (an RDB written before it stops)
    # Slack retries an event after 1, 4 and 12 s here (in Slack: at once, 1 and 5 minutes).
    cluster = make_cluster(redis=server.url, retry_delays=(1.0, 4.0, 12.0))
    workers = [
        cluster.start_worker(CHATOPS_TEST_SLOW_STEP="1", CHATOPS_TEST_SLOW_SECONDS="3") for _ in range(2)
    ]
    in_flight = cluster.mention("plan: check_health #in-flight")
    in_flight_run = cluster.run_id(in_flight)
    wait_for(
        lambda: [e for e in logged_requests(cluster.directory) if e["step"] == 1], what="the model thinking"
    )
    during: list[str] = []
    health: list[int] = []
    assert cluster.server is not None
    health_url = f"{cluster.server.url}/healthz"

    def meanwhile() -> None:
        # The in-flight run's model answers while Redis is down; a mention arrives meanwhile, and
        # the web app says it cannot store anything (a load balancer takes it out of rotation).
        during.append(cluster.mention("plan: check_health #during"))
        health.append(http(health_url).status)

    stop_for(server, OUTAGE_SECONDS, meanwhile)
    assert health == [503] and http(health_url).status == 200

    during_run = cluster.run_id(during[0], timeout=30)
    for run_id in (in_flight_run, during_run):
        cluster.wait_status(run_id, RunStatus.COMPLETED, timeout=60)
    answered_once(cluster, in_flight)
    answered_once(cluster, during[0])
    # Slack delivers the message twice: as app_mention, refused with a 5xx while Redis was down
    # (never acknowledged before it was stored) and stored on a retry; and as a plain message,
    # which the app ignores (mentions are the app_mention's) without needing Redis.
    deliveries = [
        d for d in cluster.control.deliveries(kind="event") if d["event_id"] in cluster.event_ids[during[0]]
    ]
    mention_attempts = [d for d in deliveries if d["type"] == "app_mention"]
    assert len(mention_attempts) >= 2 and mention_attempts[-1]["status"] == 200, mention_attempts
    assert all(a["status"] is None or a["status"] >= 500 for a in mention_attempts[:-1]), mention_attempts
    assert all(d["status"] == 200 for d in deliveries if d["type"] == "message"), deliveries
    assert all(w.proc.poll() is None for w in workers), "a worker quit with Redis"
    after = cluster.mention("plan: check_health #after")  # the same processes serve on
    cluster.wait_status(cluster.run_id(after), RunStatus.COMPLETED, timeout=30)


def test_a_run_whose_report_redis_interrupts_tells_the_thread_once_redis_is_back(
    own_redis: Callable[..., RedisProcess], make_cluster: Callable[..., Cluster]
) -> None:
    server = own_redis(persist=True)
    cluster = make_cluster(redis=server.url)
    cluster.start_worker(CHATOPS_TEST_FINAL_CARD_DELAY="2")
    ts = cluster.mention("plan: check_health")
    run_id = cluster.run_id(ts)
    wait_for(lambda: (cluster.directory / "final_card.log").exists(), what="the run to end")
    # The run's end is stored; its report (audit entry, answer) is under way when Redis goes.
    stop_for(server, 3.0, lambda: None)

    answered_once(cluster, ts)
    assert cluster.status(run_id) is RunStatus.COMPLETED
    assert cluster.audit_kinds(run_id).count(AuditKind.RUN_FINISHED) == 1


def lost_card(cluster: Cluster, ts: str, card_ts: str) -> bool:
    message = next(m for m in cluster.bot_replies(ts) if m["ts"] == card_ts)
    return not buttons(message) and "state was lost" in json.dumps(message["blocks"])


def lost_notices(cluster: Cluster, ts: str) -> list[str]:
    return [str(m["text"]) for m in cluster.bot_replies(ts) if m["text"] == LOST_NOTICE]


def test_a_run_waiting_for_approval_that_redis_lost_is_announced_by_a_click_on_its_card(
    own_redis: Callable[..., RedisProcess], make_cluster: Callable[..., Cluster]
) -> None:
    server = own_redis(persist=False)
    cluster = make_cluster(redis=server.url)
    worker = cluster.start_worker()
    ts = cluster.mention("plan: restart_service")
    card = cluster.approval_card(ts)
    run_card = cluster.bot_replies(ts)[0]
    worker.kill()  # no sweep: only the click can find the card
    server.client().flushdb()  # Redis came back without its data: no run, no approval, no job

    cluster.control.click(card["ts"], "U_BOB", action_id=render.ACTION_APPROVE)
    # The cards are redrawn before the thread is told (lost_cards.announce): wait for all three.
    wait_for(
        lambda: (
            lost_card(cluster, ts, card["ts"])
            and lost_card(cluster, ts, run_card["ts"])
            and lost_notices(cluster, ts)
        ),
        30,
        "the approval card and the run card redrawn as lost, and the thread told",
    )
    assert "Waiting for approval" not in json.dumps(cluster.bot_replies(ts)[0]["blocks"])
    assert lost_notices(cluster, ts) == [LOST_NOTICE]
    assert not (cluster.directory / "restart_service.log").exists()  # nothing ran for the click


def test_a_run_waiting_for_approval_that_redis_lost_is_announced_by_the_workers_sweep(
    own_redis: Callable[..., RedisProcess], make_cluster: Callable[..., Cluster]
) -> None:
    server = own_redis(persist=False)
    cluster = make_cluster(redis=server.url)
    worker = cluster.start_worker()
    ts = cluster.mention("plan: restart_service")
    card = cluster.approval_card(ts)
    run_card = cluster.bot_replies(ts)[0]
    server.client().flushdb()  # nobody clicks: the sweep notices the missing marker

    # The cards are redrawn before the thread is told (lost_cards.announce): wait for all three.
    wait_for(
        lambda: (
            lost_card(cluster, ts, card["ts"])
            and lost_card(cluster, ts, run_card["ts"])
            and lost_notices(cluster, ts)
        ),
        30,
        "the approval card and the run card redrawn as lost, and the thread told",
    )
    assert lost_notices(cluster, ts) == [LOST_NOTICE]
    # The thread is free again: a new mention there is a new run the same worker serves.
    cluster.mention("plan: check_health #again", thread_ts=ts)
    cluster.wait_status(cluster.run_id(ts), RunStatus.COMPLETED, timeout=30)
    assert lost_notices(cluster, ts) == [LOST_NOTICE] and worker.proc.poll() is None
