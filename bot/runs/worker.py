"""The chatops worker classes: RQ workers that bind each job's ``Runtime`` and sweep for dead runs.

Both are ``bot.job_worker.AllowListedWorker`` (the runners' class too): JSON jobs, only
``WORKER_FUNCTIONS`` called (``bot.runs.queueing.WorkerJob``), the runtime bound around each job.

* ``ChatopsWorker`` forks a work horse per job (RQ's ``Worker``): the runtime factory is called
  inside the horse, so every job opens its own Redis connection after the fork.
* ``ChatopsSimpleWorker`` runs jobs in its own process (RQ's ``SimpleWorker``), for tests and
  embedding. It times jobs out with a timer thread instead of ``SIGALRM``, which the host
  process (pytest-timeout, a web server) may be using.

Both run a ``sweep`` (``RunService.recover`` and the lost-run check, composed by
``bot.ops.compose``) with RQ's maintenance tasks, so a run whose worker died is resumed by any live
worker once its lease has expired.

Both end whatever their scheduler process does. RQ 3.0 stops the scheduler at a warm shutdown
requested during a job, then, after the job, runs its maintenance (which starts a new scheduler when
the old one is gone) before it looks at the stop request; its teardown then signals that new process
before the process has its own handlers, and waits for it with no bound: a deploy's SIGTERM could
leave the worker running for ever. So a worker asked to stop does no more maintenance, and its wait
for the scheduler is bounded (SIGKILL after ``SCHEDULER_STOP_SECONDS``; its locks then expire).
"""

from __future__ import annotations

import contextlib
import logging
import os
import signal
from collections.abc import Callable
from functools import partial
from typing import Any

import redis
from rq.timeouts import TimerDeathPenalty
from rq.worker import SimpleWorker, Worker

from bot.job_worker import AllowListedWorker
from bot.runs.queueing import WorkerJob
from bot.runs.runtime import RuntimeFactory, bound_runtime

log = logging.getLogger(__name__)

Sweep = Callable[[], list[str]]  # resumes what needs resuming; returns the run ids it resumed

# The scheduler looks at its stop flag once a second (RQ's interval): a generous bound, never reached
# by one that got the signal.
SCHEDULER_STOP_SECONDS = 10.0


class _RuntimeWorker(AllowListedWorker):
    """Builds and binds a runtime around every job (in the work horse for ``Worker``, after the
    fork; in-process for ``SimpleWorker``) and adds the dead-run sweep to RQ's maintenance."""

    def __init__(
        self, *args: Any, runtime_factory: RuntimeFactory, sweep: Sweep | None = None, **kwargs: Any
    ):
        bind = partial(bound_runtime, runtime_factory)
        super().__init__(*args, job_class=WorkerJob, bind=bind, **kwargs)
        self.sweep = sweep

    def run_maintenance_tasks(self) -> None:
        if self._stop_requested:
            return  # leaving: RQ's maintenance would start a scheduler only to stop it (above)
        super().run_maintenance_tasks()  # type: ignore[no-untyped-call]
        if self.sweep is None:
            return
        try:
            resumed = self.sweep()
        except redis.RedisError:
            log.exception("the recovery sweep failed; trying again at the next maintenance")
            return
        if resumed:
            log.warning("resumed %d run(s) whose worker stopped: %s", len(resumed), ", ".join(resumed))

    def stop_scheduler(self) -> None:
        """RQ's, bounded: SIGTERM, wait, then SIGKILL (one that missed the signal keeps running)."""
        process = self.scheduler._process if self.scheduler is not None else None
        if process is None or process.pid is None:
            return
        with contextlib.suppress(OSError):
            os.kill(process.pid, signal.SIGTERM)
        process.join(SCHEDULER_STOP_SECONDS)
        if process.is_alive():
            log.warning(
                "the scheduler (pid %s) did not stop within %.0f s of SIGTERM; killed (its locks expire)",
                process.pid,
                SCHEDULER_STOP_SECONDS,
            )
            process.kill()
            process.join()


class ChatopsWorker(_RuntimeWorker, Worker):
    """RQ's forking worker with a per-job runtime and the recovery sweep."""


class ChatopsSimpleWorker(_RuntimeWorker, SimpleWorker):
    """RQ's in-process worker with a per-job runtime and the recovery sweep."""

    death_penalty_class = TimerDeathPenalty
