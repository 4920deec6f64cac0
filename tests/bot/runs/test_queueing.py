"""``JobQueue``: every job by its function, with the run's options; delays in RQ's scheduler."""

from __future__ import annotations

import math
import time

import redis

from bot.alerts import jobs as alert_jobs
from bot.keys import Keys
from bot.runs import jobs
from bot.runs.queueing import EXPIRE_APPROVAL, RESUME, START, WORKER_FUNCTIONS, fetch_worker_job
from bot.runs.service import RunService
from tests.support.harness import make_options


def service_for(client: redis.Redis, keys: Keys, queue_name: str) -> RunService:
    return RunService(client, keys, make_options(queue_name, job_retries=2, lease_ttl_seconds=4.5))


def test_a_run_job_is_its_function_with_the_runs_timeout_retries_and_id(
    redis_client: redis.Redis, keys: Keys, queue_name: str
) -> None:
    service = service_for(redis_client, keys, queue_name)
    started = service.jobs.run("r1", first=True, job_id="job-r1")
    resumed = service.jobs.run("r1")
    assert (started.func, resumed.func) == (jobs.start, jobs.resume)
    assert started.func_name == "bot.runs.jobs.start" and started.id == "job-r1"
    assert resumed.args == ("r1",)  # a first resume carries no deferral count
    for job in (
        fetch_worker_job(started.id, redis_client),
        fetch_worker_job(resumed.id, redis_client),
    ):
        assert job.timeout == service.options.job_timeout and job.failure_ttl == 3600
        assert job.retries_left == 2 and job.retry_intervals == [math.ceil(4.5)]
    assert service.queue.job_ids == ["job-r1", resumed.id]


def test_a_deferred_resume_waits_in_the_scheduler_and_carries_its_count(
    redis_client: redis.Redis, keys: Keys, queue_name: str
) -> None:
    service = service_for(redis_client, keys, queue_name)
    before = time.time()
    job = service.jobs.run("r1", delay=30, deferrals=3)
    assert job.func is jobs.resume and job.args == ("r1", 3)
    assert job.retries_left == 2  # the same retries as any run job
    assert service.queue.count == 0 and service.queue.scheduled_job_registry.get_job_ids() == [job.id]
    due = service.queue.scheduled_job_registry.get_scheduled_time(job).timestamp()
    assert before + 29 <= due <= time.time() + 31


def test_an_expiry_job_is_scheduled_for_its_time_and_again_when_it_came_early(
    redis_client: redis.Redis, keys: Keys, queue_name: str
) -> None:
    service = service_for(redis_client, keys, queue_name)
    expires_at = time.time() + 600
    first = service.jobs.expiry_at("a1", expires_at)
    again = service.jobs.expiry_in("a1", 5)
    registry = service.queue.scheduled_job_registry
    for job in (first, again):
        assert job.func is jobs.expire_approval and job.args == ("a1",)
        assert job.description == "expire approval a1"
    assert abs(registry.get_scheduled_time(first).timestamp() - expires_at) < 1
    assert registry.get_scheduled_time(again).timestamp() < expires_at - 500
    assert service.queue.count == 0


def test_every_job_a_worker_runs_is_named_by_the_path_of_its_function() -> None:
    # Jobs are enqueued by these names and allowed by them: a renamed or moved job function
    # must fail here, not in a worker that refuses it or cannot import it.
    named = {
        START: jobs.start,
        RESUME: jobs.resume,
        EXPIRE_APPROVAL: jobs.expire_approval,
        "bot.alerts.jobs.handle_notification": alert_jobs.handle_notification,
    }
    assert set(named) == WORKER_FUNCTIONS
    for name, function in named.items():
        assert f"{function.__module__}.{function.__qualname__}" == name
