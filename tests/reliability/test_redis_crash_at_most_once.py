"""A real ``redis-server`` SIGKILLed while an approved restart runs: at most once with AOF, twice without.

Issue 12, item 7. Real worker subprocesses, the web app and the Slack emulator run against a
``redis-server`` of the test's own. A run asks for ``restart_service`` (mutating), a person
clicks Approve on the card, and a worker starts the tool (``FileTool`` logs every execution to a
file, so executions are counted across processes; it sleeps on its first one). The moment the
execution's log line appears, Redis is SIGKILLed, stays down past the worker's 1 s lease (so the
run has to be picked up again from what Redis kept, not carried on from the worker's memory) and
is started again on the same directory.

Both scenarios take the same steps; only the persistence differs. The click lands while no
worker runs (the first worker is stopped with SIGTERM, a deploy, once the run waits), and a
snapshot (``SAVE``) is taken right after it: the snapshot holds the approval approved and not yet
consumed, as an RDB schedule's last snapshot before a crash would. With the AOF
(``appendfsync always``) the snapshot is irrelevant: Redis restarts from the AOF.
"""

from __future__ import annotations

import json
import signal
import time
from collections.abc import Callable
from dataclasses import dataclass
from typing import Any

import pytest

from agent.tool_step import OUTCOME_UNKNOWN
from agent.types import RunStatus
from bot.observability.audit import AuditKind
from bot.ops.doctor import Outcome, check_persistence
from bot.runs.approvals import Approval, ApprovalStatus
from bot.slack.rendering import render
from tests.bot.runtimes import executions
from tests.reliability.cluster import Cluster
from tests.reliability.redis_proc import RDB_DEFAULT, RedisProcess
from tests.support.waiting import wait_for

pytestmark = [pytest.mark.reliability, pytest.mark.slow]

# How long Redis stays down: past the 1 s lease (CHATOPS_LEASE_TTL_SECONDS in the cluster), so
# the worker running the tool loses the run and it resumes from the restored state.
OUTAGE_SECONDS = 2.0
# The first execution's sleep: the tool outlasts the outage, so it is running through the crash.
TOOL_SECONDS = "5"


@dataclass
class Crash:
    run_id: str
    thread_ts: str
    status: RunStatus
    executions: list[dict[str, Any]]
    answers: list[str]
    consumed_before: float | None  # the approval's ``consumed_at`` while the tool ran, before the kill
    approval: Approval  # the record at the end
    story: list[tuple[str, dict[str, str]]]  # the audit stream, printed when an assert fails
    card: str  # the run card's final blocks


def crash_while_the_restart_runs(server: RedisProcess, cluster: Cluster) -> Crash:
    first = cluster.start_worker()
    ts = cluster.mention("plan: restart_service")
    run_id = cluster.run_id(ts)
    cluster.wait_status(run_id, RunStatus.AWAITING_APPROVAL)
    first.signal(signal.SIGTERM)  # the waiting run holds no worker: it exits at once
    assert first.proc.wait(timeout=30) == 0
    card = cluster.approval_card(ts)
    assert cluster.control.click(str(card["ts"]), "U_BOB", action_id=render.ACTION_APPROVE)["status"] == 200
    server.client().save()  # the last snapshot before the crash: approved, not consumed

    cluster.start_worker(CHATOPS_TEST_SLEEP_FIRST=TOOL_SECONDS, CHATOPS_TEST_SLEEP_TOOL="restart_service")
    log = cluster.directory / "restart_service.log"
    wait_for(lambda: executions(log), what="the restart to start")
    [approval] = cluster.service.approvals.for_run(run_id)
    consumed_before = approval.consumed_at  # consumed before the tool started
    server.kill()
    time.sleep(OUTAGE_SECONDS)  # the outage's length (a fault parameter), not a wait for an outcome
    server.start()

    def ended() -> RunStatus | None:
        status = cluster.status(run_id)
        return status if status is not None and status.terminal else None

    status = wait_for(ended, 40, "the run to end")
    answers = wait_for(lambda: cluster.answers(ts), 20, "the answer in the thread")
    card = wait_for(lambda: final_card(cluster.bot_replies(ts)[0]), 20, "the final card")
    [approval] = cluster.service.approvals.for_run(run_id)
    story = [(e.kind.value, e.fields) for e in cluster.audit(run_id)]
    return Crash(run_id, ts, status, executions(log), answers, consumed_before, approval, story, card)


def final_card(card: dict[str, Any]) -> str | None:
    """The run card's blocks once it shows how the run finished (what it says is the test's to judge)."""
    shown = json.dumps(card["blocks"])
    return shown if any(word in shown for word in ("Done", "Finished", "Declined", "Answered")) else None


def test_a_redis_sigkill_while_an_approved_restart_runs_never_repeats_it_with_aof_always(
    durable_redis: RedisProcess, make_cluster: Callable[..., Cluster]
) -> None:
    """The consumed approval and the executing mark were fsynced before the tool started, so the
    restarted Redis has both: the resumed run does not run the restart again, and tells the model
    (and through it the thread) that the outcome is unknown."""
    cluster = make_cluster(redis=durable_redis.url)
    crash = crash_while_the_restart_runs(durable_redis, cluster)

    assert len(crash.executions) == 1, (crash.executions, crash.story)  # at most once
    assert crash.executions[0]["arguments"]["confirmed_by"] == "U_BOB"
    assert crash.status is RunStatus.COMPLETED, crash.story
    unknown = OUTCOME_UNKNOWN.format(tool="restart_service")
    assert crash.answers == [f"done: {unknown}"], crash.story  # the model was told, and said so
    assert crash.approval.status is ApprovalStatus.APPROVED
    assert crash.consumed_before is not None
    assert crash.approval.consumed_at == crash.consumed_before, crash.story  # the AOF kept the mark
    kinds = [AuditKind(kind) for kind, _ in crash.story]
    assert kinds.count(AuditKind.TOOL_REFUSED) == 1, crash.story  # outcome unknown: nothing ran again
    # The card does not claim the restart never happened: it says its outcome is unknown.
    assert "of unknown outcome" in crash.card and "nothing was changed" not in crash.card, crash.card
    assert kinds.count(AuditKind.RUN_FINISHED) == 1, crash.story
    assert check_persistence(cluster.settings, str).outcome is Outcome.PASS


def test_rdb_only_loses_the_consumed_approval_in_a_sigkill_and_the_restart_runs_twice(
    own_redis: Callable[..., RedisProcess], make_cluster: Callable[..., Cluster]
) -> None:
    """The control, and the reason ``chatops doctor`` warns about RDB-only persistence: the same
    crash on Redis's stock snapshots brings back the snapshot taken after the click, in which
    the approval is approved but not consumed and the run has no executing mark. The resumed run
    consumes the approval again and the approved restart runs a second time, reported as a
    plain success (the worker only logs the durability warning: ``CHATOPS_DURABILITY=warn``)."""
    server = own_redis(config=RDB_DEFAULT)
    cluster = make_cluster(redis=server.url)
    crash = crash_while_the_restart_runs(server, cluster)

    assert len(crash.executions) == 2, (crash.executions, crash.story)  # the rollback repeats it
    assert crash.status is RunStatus.COMPLETED, crash.story
    assert crash.answers == ["done: restart_service ok"], crash.story
    assert crash.consumed_before is not None
    assert crash.approval.consumed_at is not None
    assert crash.approval.consumed_at != crash.consumed_before  # consumed again after the restore
    check = check_persistence(cluster.settings, str)
    assert check.outcome is Outcome.WARN
    assert "RDB snapshots only" in check.summary
