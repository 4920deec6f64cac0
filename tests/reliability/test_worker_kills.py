"""Workers killed at every step of a run, and stopped gracefully with SIGTERM.

Real worker subprocesses (forking RQ workers, 1 s leases, a recovery sweep every second) run the
plan model and file-logging tools, and show the run in the Slack emulator. After each kill a
fresh worker must finish the run with what a person expects: one run card, one answer, no side
effect twice, and an audit stream that tells the whole story.
"""

from __future__ import annotations

import json
import os
import signal
import time
from collections import Counter
from collections.abc import Callable

import pytest

from agent.types import RunStatus
from bot.observability.audit import AuditKind
from bot.slack.rendering import render
from tests.bot.runtimes import executions
from tests.reliability.cluster import Cluster
from tests.reliability.runtimes import logged_requests
from tests.support.waiting import wait_for

pytestmark = [pytest.mark.reliability, pytest.mark.slow]

OUTCOME_UNKNOWN = (
    "Error: outcome unknown: the worker stopped while restart_service was running; "
    "verify the state before retrying"
)


def model_asked(cluster: Cluster, step: int) -> dict[str, object] | None:
    return next((e for e in logged_requests(cluster.directory) if e["step"] == step), None)


def kill_horse_and_worker(cluster: Cluster, pid: int) -> None:
    """SIGKILL the process running the run (the work horse) and its worker: the machine is gone."""
    os.kill(pid, signal.SIGKILL)
    for worker in cluster.workers:
        worker.kill()


def assert_one_card_and_one_answer(cluster: Cluster, ts: str, answer: str) -> None:
    wait_for(lambda: cluster.answers(ts), what="the answer")
    wait_for(lambda: "Done" in json.dumps(cluster.bot_replies(ts)[0]["blocks"]), what="the final card")
    replies = cluster.bot_replies(ts)
    cards = [m for m in replies if "run for" in str(m["text"]) and "Approval" not in str(m["text"])]
    assert len(cards) == 1, [m["text"] for m in replies]
    assert cluster.answers(ts) == [answer], [m["text"] for m in replies]
    assert "Done" in json.dumps(cards[0]["blocks"])


def approve(cluster: Cluster, ts: str, user: str = "U_BOB") -> None:
    card = cluster.approval_card(ts)
    assert cluster.control.click(str(card["ts"]), user, action_id=render.ACTION_APPROVE)["status"] == 200


def test_sigkill_during_the_model_request_asks_again_and_answers_once(
    make_cluster: Callable[..., Cluster],
) -> None:
    cluster = make_cluster()
    cluster.start_worker(CHATOPS_TEST_SLOW_STEP="0")
    ts = cluster.mention("plan: check_health")
    run_id = cluster.run_id(ts)
    asked = wait_for(lambda: model_asked(cluster, 0), what="the first model request")
    kill_horse_and_worker(cluster, int(str(asked["pid"])))

    cluster.start_worker()
    cluster.wait_status(run_id, RunStatus.COMPLETED)
    assert_one_card_and_one_answer(cluster, ts, "done: check_health ok")
    assert [e["attempt"] for e in logged_requests(cluster.directory) if e["step"] == 0] == [1, 2]
    assert len(executions(cluster.directory / "check_health.log")) == 1
    assert cluster.audit_kinds(run_id) == [
        AuditKind.RUN_STARTED,
        AuditKind.TOOL_EXECUTED,
        AuditKind.RUN_FINISHED,
    ]


def test_sigkill_during_a_read_only_tool_runs_it_again_and_answers_once(
    make_cluster: Callable[..., Cluster],
) -> None:
    cluster = make_cluster()
    cluster.start_worker(CHATOPS_TEST_SLEEP_FIRST="60")
    ts = cluster.mention("plan: check_health")
    run_id = cluster.run_id(ts)
    log = cluster.directory / "check_health.log"
    wait_for(lambda: executions(log), what="the tool to start")
    kill_horse_and_worker(cluster, int(executions(log)[0]["pid"]))

    cluster.start_worker()
    cluster.wait_status(run_id, RunStatus.COMPLETED)
    assert_one_card_and_one_answer(cluster, ts, "done: check_health ok")
    assert len(executions(log)) == 2  # read-only: running it again changes nothing
    assert cluster.audit_kinds(run_id).count(AuditKind.TOOL_EXECUTED) == 1


def test_sigkill_during_a_mutating_tool_never_runs_it_twice_and_says_so(
    make_cluster: Callable[..., Cluster],
) -> None:
    cluster = make_cluster()
    cluster.start_worker(CHATOPS_TEST_SLEEP_FIRST="60")
    ts = cluster.mention("plan: restart_service")
    run_id = cluster.run_id(ts)
    approve(cluster, ts)
    log = cluster.directory / "restart_service.log"
    wait_for(lambda: executions(log), what="the tool to start")
    kill_horse_and_worker(cluster, int(executions(log)[0]["pid"]))

    cluster.start_worker()
    cluster.wait_status(run_id, RunStatus.COMPLETED)
    story = [(e.kind.value, e.fields) for e in cluster.audit(run_id)]  # printed when an assert fails
    assert len(executions(log)) == 1, (executions(log), story)  # at most once
    assert wait_for(lambda: cluster.answers(ts)) == [f"done: {OUTCOME_UNKNOWN}"], story
    # The click may land while the run is still suspending, so only the order of the run's own
    # steps is fixed; every entry is there exactly once.
    assert Counter(cluster.audit_kinds(run_id)) == Counter(
        [
            AuditKind.RUN_STARTED,
            AuditKind.APPROVAL_REQUESTED,
            AuditKind.RUN_SUSPENDED,
            AuditKind.APPROVAL_DECIDED,
            AuditKind.TOOL_REFUSED,  # outcome unknown: the model is told, nothing runs again
            AuditKind.RUN_FINISHED,
        ]
    ), story


def test_a_retry_scheduled_by_a_worker_that_then_died_is_picked_up_in_seconds(
    make_cluster: Callable[..., Cluster],
) -> None:
    """The worker sees its work horse die and schedules RQ's retry, then the machine dies too. Its
    scheduler held the queue's scheduler lock, which RQ frees only after a minute: the recovery
    sweep of the next worker must not wait for that."""
    cluster = make_cluster()
    first = cluster.start_worker(CHATOPS_TEST_SLEEP_FIRST="60")
    ts = cluster.mention("plan: check_health")
    run_id = cluster.run_id(ts)
    log = cluster.directory / "check_health.log"
    wait_for(lambda: executions(log), what="the tool to start")
    os.kill(int(executions(log)[0]["pid"]), signal.SIGKILL)
    wait_for(lambda: "Work horse killed" in first.output(), 10, "the worker to schedule the retry")
    first.kill()
    # The dead scheduler's lock is made to outlive the test, however slow the machine: the run must
    # finish while it is still held, i.e. without RQ's scheduler, by the next worker's sweep.
    lock = f"rq:scheduler-lock:{cluster.settings.chatops_queue}"
    holder = cluster.redis.get(lock)
    assert holder is not None and cluster.redis.expire(lock, 3600)

    cluster.start_worker()
    cluster.wait_status(run_id, RunStatus.COMPLETED, timeout=120)
    assert cluster.redis.get(lock) == holder
    assert_one_card_and_one_answer(cluster, ts, "done: check_health ok")


def test_sigkill_after_a_mutating_tool_keeps_its_result_and_does_not_run_it_again(
    make_cluster: Callable[..., Cluster],
) -> None:
    cluster = make_cluster()
    cluster.start_worker(CHATOPS_TEST_SLOW_STEP="1")
    ts = cluster.mention("plan: restart_service")
    run_id = cluster.run_id(ts)
    approve(cluster, ts)
    asked = wait_for(lambda: model_asked(cluster, 1), what="the request after the tool")
    kill_horse_and_worker(cluster, int(str(asked["pid"])))

    cluster.start_worker()
    cluster.wait_status(run_id, RunStatus.COMPLETED)
    [run] = executions(cluster.directory / "restart_service.log")
    assert run["arguments"]["confirmed_by"] == "U_BOB"
    assert wait_for(lambda: cluster.answers(ts)) == ["done: restart_service ok"]
    assert cluster.audit_kinds(run_id).count(AuditKind.TOOL_EXECUTED) == 1


def test_sigkill_while_suspended_loses_nothing_and_the_click_resumes_on_another_worker(
    make_cluster: Callable[..., Cluster],
) -> None:
    cluster = make_cluster()
    first = cluster.start_worker()
    ts = cluster.mention("plan: restart_service")
    run_id = cluster.run_id(ts)
    cluster.wait_status(run_id, RunStatus.AWAITING_APPROVAL)
    first.kill()  # nothing runs: the waiting run holds no worker
    approve(cluster, ts)  # the click is stored and the resume enqueued with no worker alive

    cluster.start_worker()
    cluster.wait_status(run_id, RunStatus.COMPLETED)
    [run] = executions(cluster.directory / "restart_service.log")
    assert run["arguments"]["confirmed_by"] == "U_BOB"
    assert wait_for(lambda: cluster.answers(ts)) == ["done: restart_service ok"]


def test_sigterm_lets_the_current_step_finish_then_the_worker_exits(
    make_cluster: Callable[..., Cluster],
) -> None:
    cluster = make_cluster()
    worker = cluster.start_worker(CHATOPS_TEST_SLEEP_FIRST="3")
    ts = cluster.mention("plan: check_health")
    run_id = cluster.run_id(ts)
    log = cluster.directory / "check_health.log"
    wait_for(lambda: executions(log), what="the tool to start")
    worker.signal(signal.SIGTERM)  # a deploy: warm shutdown

    assert worker.proc.wait(timeout=30) == 0
    assert cluster.status(run_id) is RunStatus.COMPLETED  # finished before the worker left
    assert_one_card_and_one_answer(cluster, ts, "done: check_health ok")
    assert len(executions(log)) == 1


def test_a_second_sigterm_stops_at_once_and_another_worker_resumes_from_the_checkpoint(
    make_cluster: Callable[..., Cluster],
) -> None:
    cluster = make_cluster()
    worker = cluster.start_worker(CHATOPS_TEST_SLEEP_FIRST="60", CHATOPS_TEST_SLEEP_TOOL="check_health")
    ts = cluster.mention("plan: restart_service check_health")
    run_id = cluster.run_id(ts)
    approve(cluster, ts)
    log = cluster.directory / "check_health.log"
    wait_for(lambda: executions(log), what="the second step to start")
    worker.signal(signal.SIGTERM)
    wait_for(lambda: "warm shut down requested" in worker.output().lower(), 10, "the warm shutdown")
    time.sleep(1.2)  # RQ ignores a second signal within a second of the first (a duplicate)
    worker.signal(signal.SIGTERM)  # impatient: cold shutdown, the horse is killed
    worker.proc.wait(timeout=30)

    cluster.start_worker()
    cluster.wait_status(run_id, RunStatus.COMPLETED)
    assert len(executions(cluster.directory / "restart_service.log")) == 1  # the checkpoint kept it
    assert wait_for(lambda: cluster.answers(ts)) == ["done: check_health ok"]
    assert cluster.audit_kinds(run_id).count(AuditKind.RUN_FINISHED) == 1
