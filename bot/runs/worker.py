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
"""

from __future__ import annotations

import logging
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


class ChatopsWorker(_RuntimeWorker, Worker):
    """RQ's forking worker with a per-job runtime and the recovery sweep."""


class ChatopsSimpleWorker(_RuntimeWorker, SimpleWorker):
    """RQ's in-process worker with a per-job runtime and the recovery sweep."""

    death_penalty_class = TimerDeathPenalty
