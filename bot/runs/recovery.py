"""The recovery sweep: which active runs nobody works on, decided from a few reads of the whole set.

Every worker sweeps once per lease (``bot.ops.compose.recovery_interval``), with RQ's maintenance,
and takes no job meanwhile. A run needs help when it is ``queued`` or ``running``, no worker holds
its lease and its last job is not queued, running, or scheduled and due within seconds: its worker
died. A run whose segment ended (finished, or waiting for a person) but whose report is not done
needs its job again too. Enqueuing a run that did not need it is harmless (the job finds the lease
taken or the run finished), so the reads need not be one snapshot.

The reads are pipelined over the whole set, whatever its size (in chunks of ``CHUNK`` runs): the
runs' status and last job, their leases, their jobs' status. A look run by run cost four round trips
a run: 2 s of a worker's time for 3,000 queued runs (a burst of mentions), every sweep of every
worker. Only the few runs that need a closer look are read one by one: a run waiting for a person
(its approvals may have expired) and a run whose job is scheduled (is it overdue?).
"""

from __future__ import annotations

import time
from collections.abc import Callable, Sequence
from dataclasses import dataclass, field

import redis
from rq import Queue
from rq.exceptions import NoSuchJobError
from rq.job import Job, JobStatus

from agent.types import RunStatus
from bot.keys import Keys
from bot.runs.approval_lifecycle import ApprovalLifecycle
from bot.runs.budget_lifecycle import BudgetLifecycle
from bot.runs.lease import Lease
from bot.runs.queueing import JobQueue
from bot.runs.record import RunRecords, SweepView

_LIVE_JOB = {JobStatus.QUEUED, JobStatus.SCHEDULED, JobStatus.DEFERRED, JobStatus.STARTED}
_SEGMENT_ENDED = {status for status in RunStatus if status.terminal or status.suspended}
# A scheduled job this late has no live scheduler: the one holding the queue's scheduler lock died,
# and RQ frees that lock only after a minute. Every live scheduler polls once a second.
OVERDUE_SCHEDULED_SECONDS = 5
CHUNK = 1000  # runs per pipelined read: bounds one reply's size, not the number of round trips


@dataclass
class Recovery:
    """Finds the runs to enqueue again; ``RunService.recover`` enqueues them."""

    redis: redis.Redis
    keys: Keys
    records: RunRecords
    jobs: JobQueue
    queue: Queue
    lifecycle: ApprovalLifecycle
    budgets: BudgetLifecycle
    clock: Callable[[], float] = field(default=time.time)

    def runs_to_resume(self) -> list[str]:
        """Active runs nobody works on, then runs whose report nobody finishes (ids may repeat)."""
        resume: list[str] = []
        for chunk in _chunks(self.records.active_ids()):
            resume += self._unworked(chunk)
        for chunk in _chunks(self.records.reporting_ids()):
            resume += self._unreported(chunk)
        return resume

    def _unworked(self, run_ids: Sequence[str]) -> list[str]:
        candidates: dict[str, SweepView] = {}
        for run_id, view in self.records.sweep_views(run_ids).items():
            if view is None:
                self.records.forget_active(run_id)
            elif not view.status.terminal and not self._waits(run_id, view):
                candidates[run_id] = view
        return self._abandoned(candidates)

    def _unreported(self, run_ids: Sequence[str]) -> list[str]:
        ended: dict[str, SweepView] = {}
        for run_id, view in self.records.sweep_views(run_ids).items():
            if view is None:
                self.records.done_reporting(run_id)
            elif view.status in _SEGMENT_ENDED:
                ended[run_id] = view
        return self._abandoned(ended)

    def _waits(self, run_id: str, view: SweepView) -> bool:
        """Still pending: its decision or expiry resumes it. Nothing pending any more but the run
        still waits: its resume was lost (a race with the job suspending it), so it is a candidate."""
        if view.status is RunStatus.AWAITING_APPROVAL:
            return self.lifecycle.still_waiting(run_id)
        if view.status is RunStatus.AWAITING_BUDGET:
            return self.budgets.still_waiting(run_id)
        return False

    def _abandoned(self, views: dict[str, SweepView]) -> list[str]:
        """Of ``views``' runs, those no worker holds and whose last job is not alive."""
        leased = Lease.held_many(self.redis, self.keys, list(views))
        unleased = [run_id for run_id in views if run_id not in leased]
        statuses = self.jobs.statuses([views[run_id].job_id for run_id in unleased if views[run_id].job_id])
        abandoned = []
        for run_id in unleased:
            job_id = views[run_id].job_id
            status = statuses.get(job_id) if job_id else None
            if status is JobStatus.SCHEDULED:
                if self._overdue(job_id):
                    abandoned.append(run_id)
            # A started job without a lease is a dead worker's: a live one renews its lease.
            elif status is None or status not in _LIVE_JOB or status is JobStatus.STARTED:
                abandoned.append(run_id)
        return abandoned

    def _overdue(self, job_id: str) -> bool:
        """A scheduled job (an RQ retry, a deferred resume) that no scheduler enqueued in time."""
        try:
            job = Job.fetch(job_id, connection=self.redis)
            due = self.queue.scheduled_job_registry.get_scheduled_time(job)
        except NoSuchJobError:
            return True
        return bool(due.timestamp() < self.clock() - OVERDUE_SCHEDULED_SECONDS)


def _chunks(run_ids: list[str]) -> list[list[str]]:
    return [run_ids[start : start + CHUNK] for start in range(0, len(run_ids), CHUNK)]
