"""The one way jobs reach the queue: each by its function in ``bot.runs.jobs``, delays by RQ's scheduler.

A run's job (``start`` for a new run, ``resume`` for every later segment: a decision, a reply, a
deferral, the recovery sweep) and an approval's expiry job (``expire_approval``) are enqueued here
and nowhere else. Jobs are referenced by function, not named by string: RQ stores the function's
import path, and a renamed job fails here, at once, instead of in a worker. A delayed job goes to
RQ's scheduled registry (``enqueue_in`` / ``enqueue_at``); the worker runs the scheduler.
"""

from __future__ import annotations

from datetime import UTC, datetime, timedelta
from types import ModuleType
from typing import Any

import redis
from rq import Queue, Retry
from rq.job import Job


def _job_functions() -> ModuleType:
    """``bot.runs.jobs``, imported when the first ``JobQueue`` is built: the job functions run a
    ``RunJob``, whose service enqueues through this module (an import at the top would be a cycle)."""
    from bot.runs import jobs

    return jobs


class JobQueue:
    """Enqueue the run and expiry jobs with their options (timeouts, retries, how long a failure stays)."""

    def __init__(
        self,
        redis_client: redis.Redis,
        queue: Queue,
        *,
        job_timeout: int,
        retry: Retry | None,
        failure_ttl: int,
    ) -> None:
        self._redis = redis_client
        self._queue = queue
        # Imported now, when the service is built (at a process's start), not by the first enqueue:
        # the web process would otherwise import the whole agent runtime inside a mention's ack.
        self._jobs = _job_functions()
        self._run_options: dict[str, Any] = {
            "job_timeout": job_timeout,
            "retry": retry,
            "failure_ttl": failure_ttl,
        }

    def run(
        self,
        run_id: str,
        *,
        first: bool = False,
        job_id: str | None = None,
        delay: float | None = None,
        deferrals: int = 0,
    ) -> Job:
        """The job that works on the run: ``start`` for a new run, else ``resume``; safe to enqueue one too many.

        ``job_id``: the id the run record already names (``RunService.submit`` stores it with the
        record). ``delay``: seconds from now, by RQ's scheduler. ``deferrals``: how often the run's
        jobs have found its lease taken (``RunJob``), carried to the next one.
        """
        function = self._jobs.start if first else self._jobs.resume
        args = (run_id, deferrals) if deferrals else (run_id,)
        description = f"{'start' if first else 'resume'} run {run_id}"
        options = {**self._run_options, "description": description, "job_id": job_id}
        if delay:
            return self._queue.enqueue_in(timedelta(seconds=delay), function, *args, **options)
        # One round trip: RQ registers the queue and stores and pushes the job in one MULTI/EXEC.
        pipeline = self._redis.pipeline()
        job = self._queue.enqueue(function, *args, pipeline=pipeline, **options)
        pipeline.execute()
        return job

    def expiry_at(self, approval_id: str, expires_at: float) -> Job:
        """The approval's expiry job, due at ``expires_at`` (this host's clock: the job itself
        judges by Redis's, ``ApprovalLifecycle.expire``)."""
        when = datetime.fromtimestamp(expires_at, UTC)
        job: Job = self._queue.enqueue_at(
            when, self._jobs.expire_approval, approval_id, **_expiry(approval_id)
        )
        return job

    def expiry_in(self, approval_id: str, seconds: float) -> Job:
        """The approval's expiry job again, ``seconds`` from now (it ran before it was due)."""
        return self._queue.enqueue_in(
            timedelta(seconds=seconds), self._jobs.expire_approval, approval_id, **_expiry(approval_id)
        )


def _expiry(approval_id: str) -> dict[str, Any]:
    return {"description": f"expire approval {approval_id}"}
