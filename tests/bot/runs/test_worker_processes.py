"""Real ``chatops worker`` subprocesses: SIGKILL, SIGSTOP (fencing), crash loops, many waiting runs.

Tool executions are counted in files (``tests.bot.runtimes.FileTool``), so they survive the
processes that ran them. The workers use a 1 s lease and sweep for dead runs every second.
"""

from __future__ import annotations

import os
import signal
from collections.abc import Callable
from pathlib import Path

import pytest
import redis
from rq import Queue

from agent.redis_memory import RedisMemory
from agent.types import RunStatus
from bot.keys import Keys
from bot.observability.audit import AuditKind
from bot.runs.queueing import fetch_worker_job
from bot.runs.service import RunService
from tests.bot.runtimes import executions
from tests.support.harness import make_options
from tests.support.waiting import wait_for, wait_until
from tests.support.worker_process import WorkerProcess

pytestmark = pytest.mark.slow

OUTCOME_UNKNOWN = "Error: outcome unknown: the worker stopped while restart_service was running; verify the state before retrying"


@pytest.fixture
def service(redis_client: redis.Redis, keys: Keys, queue_name: str) -> RunService:
    return RunService(redis_client, keys, make_options(queue_name, lease_ttl_seconds=1.0))


def status(service: RunService, run_id: str) -> RunStatus | None:
    record = service.get(run_id)
    return record.status if record else None


def tool_messages(service: RunService, run_id: str) -> list[str]:
    return [m.content or "" for m in service.history(run_id) if m.role == "tool"]


def test_sigkill_during_a_mutating_tool_never_runs_it_twice(
    service: RunService, worker_processes: Callable[..., WorkerProcess], tmp_path: Path
) -> None:
    first = worker_processes(CHATOPS_TEST_SLEEP_FIRST="60")
    run_id = service.submit("C1", "1.1", requester="U_REQ", text="plan: restart_service").run_id
    # The decision below is the test's own step: it waits for the suspension to be audited (the
    # worker stores the status first, then the audit entry), so the order it asserts is the run's.
    wait_until(
        lambda: (
            status(service, run_id) is RunStatus.AWAITING_APPROVAL
            and AuditKind.RUN_SUSPENDED in [e.kind for e in service.audit.entries(run_id)]
        ),
        what="the approval",
    )
    (approval,) = service.approvals.for_run(run_id)
    service.lifecycle.decide(approval.id, user="U_APPROVER", approve=True)
    log = tmp_path / "restart_service.log"
    wait_until(lambda: executions(log), what="the tool to start")
    horse = int(executions(log)[0]["pid"])
    os.kill(horse, signal.SIGKILL)  # the work horse running the tool ...
    first.kill()  # ... and the worker (with its scheduler): the whole worker is gone
    state = RedisMemory(service.redis, service.keys, run_id).load_state()
    assert (
        state is not None and state.status is RunStatus.RUNNING and state.executing_call_id == "x00000001"
    )  # the runtime's id of the plan's call_0

    worker_processes()  # a fresh worker finds the run once the dead one's lease expired
    wait_until(lambda: status(service, run_id) is RunStatus.COMPLETED, timeout=30, what="recovery")
    assert len(executions(log)) == 1  # at most once
    assert tool_messages(service, run_id) == [OUTCOME_UNKNOWN]
    assert service.history(run_id)[-1].content == f"done: {OUTCOME_UNKNOWN}"
    # The run's end is stored before its job reports it: the audit's run_finished follows.
    wait_until(
        lambda: AuditKind.RUN_FINISHED in [e.kind for e in service.audit.entries(run_id)], what="the report"
    )
    kinds = [e.kind for e in service.audit.entries(run_id)]
    assert kinds == [
        AuditKind.RUN_STARTED,
        AuditKind.APPROVAL_REQUESTED,
        AuditKind.RUN_SUSPENDED,
        AuditKind.APPROVAL_DECIDED,
        AuditKind.TOOL_REFUSED,  # outcome unknown: told to the model, nothing ran again
        AuditKind.RUN_FINISHED,
    ]


def test_sigkill_of_the_work_horse_during_a_read_only_tool_just_runs_it_again(
    service: RunService, worker_processes: Callable[..., WorkerProcess], tmp_path: Path
) -> None:
    worker = worker_processes(CHATOPS_TEST_SLEEP_FIRST="60")
    run_id = service.submit("C1", "1.1", requester="U_REQ", text="plan: check_health").run_id
    log = tmp_path / "check_health.log"
    wait_until(lambda: executions(log), what="the tool to start")
    os.kill(int(executions(log)[0]["pid"]), signal.SIGKILL)
    # The worker sees its horse die and RQ retries the job once the lease has expired.
    wait_until(lambda: status(service, run_id) is RunStatus.COMPLETED, timeout=30, what="the retry")
    assert len(executions(log)) == 2
    assert tool_messages(service, run_id) == ["check_health ok"]
    assert "terminated unexpectedly" in worker.output()


def test_a_stalled_worker_cannot_write_after_another_took_the_run(
    service: RunService, worker_processes: Callable[..., WorkerProcess], tmp_path: Path
) -> None:
    worker_processes(CHATOPS_TEST_SLEEP_FIRST="3")
    run_id = service.submit("C1", "1.1", requester="U_REQ", text="plan: check_health").run_id
    log = tmp_path / "check_health.log"
    wait_until(lambda: executions(log), what="the tool to start")
    stalled = int(executions(log)[0]["pid"])
    os.kill(stalled, signal.SIGSTOP)  # a GC pause, a frozen VM: its lease runs out
    try:
        worker_processes()
        wait_until(lambda: status(service, run_id) is RunStatus.COMPLETED, timeout=30, what="the takeover")
    finally:
        os.kill(stalled, signal.SIGCONT)
    wait_until(
        lambda: AuditKind.LEASE_LOST in [e.kind for e in service.audit.entries(run_id)],
        timeout=15,
        what="the stalled worker to wake up and be fenced off",
    )
    history = service.history(run_id)
    assert [m.role for m in history] == ["system", "user", "assistant", "tool", "assistant"]
    assert len(executions(log)) == 2  # both ran the read-only tool; only one could record it
    assert [e.kind for e in service.audit.entries(run_id)] == [
        AuditKind.RUN_STARTED,
        AuditKind.TOOL_EXECUTED,  # by the worker that took over
        AuditKind.RUN_FINISHED,
        # The stalled one woke up and its tool finished: that execution happened and is audited,
        # but its result was refused (the write is confirmed one step later) and it stopped.
        AuditKind.TOOL_EXECUTED,
        AuditKind.LEASE_LOST,
    ]


def test_a_run_that_kills_every_worker_is_given_up(
    service: RunService, worker_processes: Callable[..., WorkerProcess], tmp_path: Path
) -> None:
    worker_processes(CHATOPS_TEST_MAX_RUN_ATTEMPTS="3", CHATOPS_TEST_CRASH="check_health")
    run_id = service.submit("C1", "1.1", requester="U_REQ", text="plan: check_health").run_id
    wait_until(lambda: status(service, run_id) is RunStatus.FAILED, timeout=60, what="giving up")
    assert len(executions(tmp_path / "check_health.log")) == 3
    # The status is stored first and the audit entry just after, by the same job: wait for it.
    finished = wait_for(
        lambda: next((e for e in service.audit.entries(run_id) if e.kind is AuditKind.RUN_FINISHED), None),
        what="the run_finished entry",
    )
    assert "gave up after 3 attempts" in finished.fields["error"]
    assert service.active_run("C1", "1.1") is None  # the thread is free for a new mention


def test_fifty_runs_awaiting_approval_do_not_delay_a_new_run(
    service: RunService, worker_processes: Callable[..., WorkerProcess]
) -> None:
    worker_processes()  # one worker
    waiting = [
        service.submit("C1", f"{n}.1", requester="U_REQ", text="plan: restart_service").run_id
        for n in range(50)
    ]
    wait_until(
        lambda: all(status(service, r) is RunStatus.AWAITING_APPROVAL for r in waiting),
        timeout=90,
        what="50 runs to wait for approval",
    )
    # The last job to suspend may still be finishing its report (the final card) when its run's
    # status changes: wait for it to end, then nothing may be running or leased for the 50.
    wait_until(
        lambda: (
            service.queue.started_job_registry.count == 0
            and not any(service.redis.exists(service.keys.lease(r)) for r in waiting)
        ),
        timeout=30,
        what="the suspending jobs to end",
    )
    assert all(status(service, r) is RunStatus.AWAITING_APPROVAL for r in waiting)
    # With the only worker free (no job running, no lease held), the new run is simply the next
    # job: how fast it finishes is measured in bench/approvals.py, not asserted here.
    new = service.submit("C1", "999.1", requester="U_REQ", text="plan: check_health").run_id
    wait_until(lambda: status(service, new) is RunStatus.COMPLETED, timeout=30, what="the new run")
    assert all(status(service, r) is RunStatus.AWAITING_APPROVAL for r in waiting)


def test_a_forged_job_in_the_workers_queue_runs_nothing(
    service: RunService, worker_processes: Callable[..., WorkerProcess], tmp_path: Path
) -> None:
    """Whoever can write RQ's keys (a runner host's Redis user) writes jobs into the workers'
    queue: a pickle is never unpickled and a JSON job naming any other function is refused
    unimported, while the runs queued after them are worked as usual."""
    worker_processes()
    pickled, forged = tmp_path / "pwned-pickle", tmp_path / "pwned-json"
    Queue(service.queue.name, connection=service.redis).enqueue_call(  # RQ's default: pickle
        "os.system", args=(f"touch {pickled}",), failure_ttl=600
    )
    job = service.queue.enqueue_call("os.system", args=(f"touch {forged}",), failure_ttl=600)
    run_id = service.submit("C1", "1.1", requester="U_REQ", text="plan: check_health").run_id
    wait_until(lambda: status(service, run_id) is RunStatus.COMPLETED, what="the run queued after them")
    wait_until(lambda: fetch_worker_job(job.id, service.redis).is_failed, what="the forged job refused")
    latest = fetch_worker_job(job.id, service.redis).latest_result()
    assert latest is not None and "workers run only their own jobs, not 'os.system'" in (
        latest.exc_string or ""
    )
    assert not pickled.exists() and not forged.exists()
