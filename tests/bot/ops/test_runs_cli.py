"""``chatops runs list`` and ``chatops runs cancel``; ``rq info`` against our queue and worker."""

from __future__ import annotations

import json
import os
import re
import signal
import subprocess
import sys
from collections.abc import Callable
from pathlib import Path

import pytest

from agent.types import RunStatus
from bot.observability.audit import AuditKind
from bot.ops.cli import build_parser
from bot.ops.runs_cli import run_cli
from bot.runs.approvals import ApprovalStatus
from bot.settings import Settings
from tests.support.harness import Harness
from tests.support.leftover_processes import family_environment, kill_family
from tests.support.waiting import wait_until
from tests.support.worker_process import WorkerProcess

RQ = str(Path(sys.executable).with_name("rq"))
CHATOPS = str(Path(sys.executable).with_name("chatops"))


@pytest.fixture
def settings(harness: Harness, redis_url: str) -> Settings:
    return Settings(
        _env_file=None,  # type: ignore[call-arg]
        redis_url=redis_url,
        chatops_redis_prefix=harness.keys.prefix,
        chatops_queue=harness.options.queue_name,
    )


def runs(settings: Settings, capsys: pytest.CaptureFixture[str], *argv: str) -> tuple[int, str, str]:
    status = run_cli(build_parser().parse_args(["runs", *argv]), settings)
    out, err = capsys.readouterr()
    return status, out, err


def test_runs_list_shows_newest_first_and_filters_by_status_and_channel(
    harness: Harness, settings: Settings, capsys: pytest.CaptureFixture[str]
) -> None:
    done = harness.submit("plan: check_health", thread_ts="1.1")
    harness.work()
    waiting = harness.submit("plan: restart_service", thread_ts="2.1")
    harness.work()
    other = harness.service.submit("C_OTHER", "3.1", requester="U_BOB", text="plan: check_health").run_id

    status, out, _ = runs(settings, capsys, "list")
    assert status == 0
    header, *rows = out.splitlines()
    assert header.split()[:4] == ["RUN", "STATUS", "CREATED", "CHANNEL"]
    assert [row.split()[0] for row in rows] == [other, waiting, done]
    assert rows[1].split()[1] == "awaiting_approval" and rows[2].split()[1] == "completed"

    _, out, _ = runs(settings, capsys, "list", "--status", "active", "--json")
    assert [json.loads(line)["run_id"] for line in out.splitlines()] == [other, waiting]
    _, out, _ = runs(settings, capsys, "list", "--status", "completed", "--json")
    (line,) = out.splitlines()
    assert json.loads(line)["run_id"] == done and json.loads(line)["iterations"] == 2
    _, out, _ = runs(settings, capsys, "list", "--channel", "C_OTHER", "--json")
    assert [json.loads(line)["requester"] for line in out.splitlines()] == ["U_BOB"]
    _, out, err = runs(settings, capsys, "list", "--channel", "C_NONE")
    assert out == "" and err == "no runs\n"


def test_runs_cancel_stops_a_run_waiting_for_approval(
    harness: Harness, settings: Settings, capsys: pytest.CaptureFixture[str]
) -> None:
    run_id = harness.submit("plan: restart_service")
    harness.work()
    status, out, _ = runs(settings, capsys, "cancel", run_id, "--by", "cli:oncall")
    assert status == 0 and out == f"asked run {run_id} to stop; it ends after the step in progress\n"
    harness.work()
    assert harness.status(run_id) is RunStatus.CANCELLED
    (approval,) = harness.service.approvals.for_run(run_id)
    assert (approval.status, approval.decided_by) == (ApprovalStatus.DECLINED, "cli:oncall")
    assert harness.executions("restart_service") == []
    assert AuditKind.RUN_FINISHED in harness.audit_kinds(run_id)

    status, _, err = runs(settings, capsys, "cancel", run_id)
    assert status == 1 and err == f"run {run_id} already ended (cancelled); nothing to stop\n"


def test_runs_cancel_wait_reports_the_end_once_a_worker_stops_it(
    harness: Harness,
    settings: Settings,
    worker_processes: Callable[..., WorkerProcess],
    capsys: pytest.CaptureFixture[str],
) -> None:
    worker_processes(CHATOPS_QUEUE=harness.options.queue_name, CHATOPS_TEST_SLEEP_FIRST="2")
    run_id = harness.submit("plan: check_health check_health check_health")
    wait_until(lambda: harness.executions("check_health"), what="the first tool call")
    status, out, _ = runs(settings, capsys, "cancel", run_id, "--wait", "30")
    assert status == 0
    assert out.splitlines()[-1] == f"run {run_id} ended: cancelled"
    assert len(harness.executions("check_health")) == 1  # stopped after the step in progress


def test_redis_down_is_a_clear_error(settings: Settings, capsys: pytest.CaptureFixture[str]) -> None:
    down = settings.model_copy(update={"redis_url": "redis://:s3cretpass@127.0.0.1:1/0"})
    status, out, err = runs(down, capsys, "list")
    assert status == 2 and out == ""
    assert err.startswith("error: cannot reach Redis at redis://:[REDACTED]@127.0.0.1:1/0: ")
    assert "s3cretpass" not in err


@pytest.mark.slow
def test_rq_info_lists_our_queue_and_worker(
    redis_url: str, queue_name: str, worker_processes: Callable[..., WorkerProcess], harness: Harness
) -> None:
    """The operator's view: ``rq info --url $REDIS_URL --by-queue $CHATOPS_QUEUE`` (docs/OPERATIONS.md)."""
    worker_name = f"ops-{queue_name}"
    worker_processes()  # a worker on our queue, as the tests start them (random name)
    harness.service.submit("C1", "1.1", requester="U_REQ", text="plan: check_health")
    env, family = family_environment(
        {**os.environ, "REDIS_URL": redis_url, "CHATOPS_REDIS_PREFIX": harness.keys.prefix}
    )
    named = subprocess.Popen(
        [CHATOPS, "worker", "--queue", queue_name, "--name", worker_name],
        env=env,
        stdout=subprocess.DEVNULL,
        stderr=subprocess.DEVNULL,
        start_new_session=True,
    )
    try:
        output = ""

        def both_workers_listed() -> bool:
            nonlocal output
            done = subprocess.run(
                [RQ, "info", "--url", redis_url, "--by-queue", queue_name],
                capture_output=True,
                text=True,
                timeout=30,
            )
            assert done.returncode == 0, done.stderr
            output = done.stdout
            taken = re.search(rf"^{re.escape(queue_name)}\s+\| 0, ", output, re.MULTILINE)  # the job left
            # A worker shows "started" until its first maintenance (the recovery sweep) is done.
            ready = re.search(
                rf"^{re.escape(queue_name)}: .*{re.escape(worker_name)} \((idle|busy)\)", output, re.MULTILINE
            )
            return bool(taken) and bool(ready) and "2 workers, 1 queues" in output

        wait_until(both_workers_listed, what="rq info to list both workers, ours ready, and an empty queue")
    finally:
        os.killpg(named.pid, signal.SIGKILL)
        kill_family(family)  # a work horse it forked has a session of its own
        named.wait(timeout=10)
