"""The one way jobs reach the queue: each by its function's path in ``bot.runs.jobs``, delays by RQ's scheduler.

A run's job (``start`` for a new run, ``resume`` for every later segment: a decision, a reply, a
deferral, the recovery sweep) and an approval's expiry job (``expire_approval``) are enqueued here
and nowhere else (``JobQueue``), and so is an alert notification's job (``NotificationQueue``, on
the alerts' own queue). A job is named by the import path RQ stores with it, the same name that puts it
on the workers' allow-list (``WORKER_FUNCTIONS``): one name, checked once (a test resolves each to
its function), and nothing of the run engine is imported to enqueue (``bot.runs.jobs`` runs a
``RunJob``, whose service enqueues through this module); nor of the alerts, a package above this one
(``NOTIFICATION_JOB``). A delayed job goes to RQ's scheduled registry (``enqueue_in`` /
``enqueue_at``); the worker runs the scheduler.
"""

from __future__ import annotations

from collections.abc import Sequence
from datetime import UTC, datetime, timedelta
from typing import Any

import redis
from redis.client import Pipeline
from rq import Queue, Retry
from rq.job import Job, JobStatus
from rq.serializers import JSONSerializer

from agent.redis_util import as_text
from bot.job_worker import AllowListedJob

START = "bot.runs.jobs.start"
RESUME = "bot.runs.jobs.resume"
EXPIRE_APPROVAL = "bot.runs.jobs.expire_approval"
# The functions a worker runs, by the import path RQ stores with a job. Anything else a job names
# is refused before it is imported: a process that can write RQ's keys (a runner's Redis user)
# must not choose what a worker, which holds the Slack and model credentials, runs.
NOTIFICATION_JOB = "bot.alerts.jobs.handle_notification"  # applies one alert notification to its thread
WORKER_FUNCTIONS = frozenset({START, RESUME, EXPIRE_APPROVAL, NOTIFICATION_JOB})


class WorkerJob(AllowListedJob):
    """A worker's job: JSON arguments (``worker_queue``), and only ``WORKER_FUNCTIONS`` are called."""

    functions = WORKER_FUNCTIONS
    refusal = "workers run only their own jobs"


def fetch_worker_job(job_id: str, connection: redis.Redis) -> WorkerJob:
    """A worker queue's job by id (``doctor``, the CLI, tests), read as the workers read it."""
    job = WorkerJob.fetch(job_id, connection=connection, serializer=JSONSerializer)
    assert isinstance(job, WorkerJob)  # RQ builds the class it is called on
    return job


def worker_queue(name: str, connection: redis.Redis) -> Queue:
    """The queue ``name`` as every process uses a worker queue: jobs as JSON, never pickle (a
    forged pickle would run code as it is loaded, before any check), loaded as ``WorkerJob``."""
    return Queue(name, connection=connection, serializer=JSONSerializer, job_class=WorkerJob)


def alerts_queue_name(base: str) -> str:
    """The alert notifications' own queue (``chatops.alerts``), beside the runs' ``base`` queue."""
    return f"{base}.alerts"


def worker_queue_names(base: str) -> list[str]:
    """What every worker listens on, in the order RQ takes them: the alerts' queue first, so that a
    notification never waits behind thousands of queued runs (a mention flood), then the runs'."""
    return [alerts_queue_name(base), base]


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
        pipeline: Pipeline | None = None,
    ) -> Job:
        """The job that works on the run: ``start`` for a new run, else ``resume``; safe to enqueue one too many.

        ``job_id``: the id the run record already names (``RunService.submit`` stores it with the
        record). ``delay``: seconds from now, by RQ's scheduler. ``deferrals``: how often the run's
        jobs have found its lease taken (``RunJob``), carried to the next one. ``pipeline`` (not
        with ``delay``): the job goes out with the caller's other writes, when the caller executes it.
        """
        function = START if first else RESUME
        args = (run_id, deferrals) if deferrals else (run_id,)
        description = f"{'start' if first else 'resume'} run {run_id}"
        options = {**self._run_options, "description": description, "job_id": job_id}
        if delay:
            return self._queue.enqueue_in(timedelta(seconds=delay), function, *args, **options)
        if pipeline is not None:
            return self._queue.enqueue(function, *args, pipeline=pipeline, **options)
        # One round trip: RQ registers the queue and stores and pushes the job in one MULTI/EXEC.
        own = self._redis.pipeline()
        job = self._queue.enqueue(function, *args, pipeline=own, **options)
        own.execute()
        return job

    def statuses(self, job_ids: Sequence[str]) -> dict[str, JobStatus | None]:
        """Each job's RQ status, read in one round trip (the recovery sweep's look at every active
        run's last job). ``None``: no such job, or a status RQ does not know (a foreign writer's)."""
        if not job_ids:
            return {}
        pipe = self._redis.pipeline(transaction=False)
        for job_id in job_ids:
            pipe.hget(self._queue.job_class.key_for(job_id), "status")
        found: dict[str, JobStatus | None] = {}
        for job_id, raw in zip(job_ids, pipe.execute(), strict=True):
            try:
                found[job_id] = JobStatus(as_text(raw)) if raw else None
            except ValueError:
                found[job_id] = None
        return found

    def expiry_at(self, approval_id: str, expires_at: float) -> Job:
        """The approval's expiry job, due at ``expires_at`` (this host's clock: the job itself
        judges by Redis's, ``ApprovalLifecycle.expire``)."""
        when = datetime.fromtimestamp(expires_at, UTC)
        job: Job = self._queue.enqueue_at(when, EXPIRE_APPROVAL, approval_id, **_expiry(approval_id))
        return job

    def expiry_in(self, approval_id: str, seconds: float) -> Job:
        """The approval's expiry job again, ``seconds`` from now (it ran before it was due)."""
        return self._queue.enqueue_in(
            timedelta(seconds=seconds), EXPIRE_APPROVAL, approval_id, **_expiry(approval_id)
        )


def _expiry(approval_id: str) -> dict[str, Any]:
    return {"description": f"expire approval {approval_id}"}


class NotificationQueue:
    """The alert notifications' jobs (``NOTIFICATION_JOB``) on the alerts' own queue, which every
    worker takes before the runs' (``worker_queue_names``), with their timeout, retries and how long
    a failure stays."""

    JOB_TIMEOUT = 120
    RETRY_INTERVALS = (1, 5, 15)
    FAILURE_TTL = 7 * 24 * 3600

    def __init__(self, connection: redis.Redis, base: str) -> None:
        self.queue = worker_queue(alerts_queue_name(base), connection)

    def enqueue(
        self, notification_id: str, *, delay: float | None = None, pipeline: Pipeline | None = None
    ) -> None:
        """The notification's job, ``delay`` seconds from now (by RQ's scheduler) or at once; with
        ``pipeline`` it goes out with the caller's other writes (the receiver's store)."""
        options: dict[str, Any] = {
            "job_timeout": self.JOB_TIMEOUT,
            "retry": Retry(max=len(self.RETRY_INTERVALS), interval=list(self.RETRY_INTERVALS)),
            "description": f"alert notification {notification_id}",
            "failure_ttl": self.FAILURE_TTL,
        }
        if delay:
            self.queue.enqueue_in(timedelta(seconds=delay), NOTIFICATION_JOB, notification_id, **options)
        else:
            self.queue.enqueue(NOTIFICATION_JOB, notification_id, pipeline=pipeline, **options)
