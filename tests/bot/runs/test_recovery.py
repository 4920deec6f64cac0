"""The recovery sweep's decisions (``bot.runs.recovery``), case by case, and its cost in round trips.

Every run is made as the web makes it (``RunService.submit``: record, first message, start job);
what a worker would have written since (a status, a lease, its job's state) is written as that
worker writes it. Each test asks ``RunService.recover`` what it resumes.
"""

from __future__ import annotations

import secrets
import time

import pytest
import redis
from rq.job import Job, JobStatus

from agent.types import RunStatus
from bot.keys import Keys
from bot.runs import recovery
from bot.runs.lease import Lease
from bot.runs.service import RunService
from tests.bot.runs.test_approval_lifecycle import overdue, requested
from tests.reliability.redis_proc import RedisProcess
from tests.support.harness import make_options


def new_run(service: RunService) -> str:
    ts = f"{int(time.time())}.{secrets.randbelow(10**6):06d}"
    return service.submit("C1", ts, requester="U_ALICE", text="web-03 is out of disk").run_id


def with_status(service: RunService, run_id: str, status: RunStatus) -> None:
    service.redis.hset(service.keys.run(run_id), "status", status.value)  # as the loop's state write


def last_job(service: RunService, run_id: str) -> Job:
    record = service.get(run_id)
    assert record is not None
    return Job.fetch(record.job_id, connection=service.redis)


def job_in(service: RunService, run_id: str, status: JobStatus) -> None:
    job = last_job(service, run_id)
    service.queue.remove(job.id)  # a worker took it off the queue
    job.set_status(status)


@pytest.fixture
def service(redis_client: redis.Redis, keys: Keys, queue_name: str) -> RunService:
    return RunService(redis_client, keys, make_options(queue_name))


def test_a_queued_run_whose_job_waits_in_the_queue_is_left_alone(service: RunService) -> None:
    new_run(service)
    assert service.recover() == []


def test_a_running_run_whose_worker_holds_the_lease_is_left_alone(service: RunService) -> None:
    run_id = new_run(service)
    with_status(service, run_id, RunStatus.RUNNING)
    job_in(service, run_id, JobStatus.STARTED)
    lease = Lease.acquire(service.redis, service.keys, run_id, 30, "w1")
    assert lease is not None
    assert service.recover() == []


def test_a_started_job_without_a_lease_is_a_dead_workers_and_its_run_resumes(service: RunService) -> None:
    run_id = new_run(service)
    with_status(service, run_id, RunStatus.RUNNING)
    job_in(service, run_id, JobStatus.STARTED)
    assert service.recover() == [run_id]
    assert service.queue.count == 1


@pytest.mark.parametrize(
    "status", [JobStatus.FINISHED, JobStatus.FAILED, JobStatus.STOPPED, JobStatus.CANCELED]
)
def test_a_run_whose_last_job_ended_while_the_run_did_not_resumes(
    service: RunService, status: JobStatus
) -> None:
    run_id = new_run(service)
    with_status(service, run_id, RunStatus.RUNNING)
    job_in(service, run_id, status)
    assert service.recover() == [run_id]


def test_a_run_whose_job_is_gone_resumes(service: RunService) -> None:
    run_id = new_run(service)
    job = last_job(service, run_id)
    service.queue.remove(job.id)
    job.delete()
    assert service.recover() == [run_id]


def test_a_scheduled_job_is_waited_for_until_it_is_overdue(service: RunService) -> None:
    run_id = new_run(service)
    first = last_job(service, run_id)
    service.queue.remove(first.id)
    first.delete()
    later = service.enqueue(run_id, delay=60)  # a deferred resume, due in a minute
    assert service.recover() == []
    registry = service.queue.scheduled_job_registry
    service.redis.zadd(registry.key, {later.id: time.time() - 3600})  # no scheduler enqueued it
    assert service.recover() == [run_id]


def test_a_run_whose_record_is_gone_is_dropped_from_the_active_set(service: RunService) -> None:
    run_id = new_run(service)
    service.redis.delete(service.keys.run(run_id))
    assert service.recover() == []
    assert run_id not in service.records.active_ids()


def test_a_run_waiting_for_an_approval_is_left_alone_until_the_approval_expires(service: RunService) -> None:
    run_id = new_run(service)
    with_status(service, run_id, RunStatus.AWAITING_APPROVAL)
    job_in(service, run_id, JobStatus.FINISHED)  # the job that suspended it ended
    approval = requested(service, run_id=run_id)
    assert service.recover() == []
    overdue(service.redis, service.keys, approval)
    # The sweep expires it, and the expiry resumes the run (its own job): the sweep need not.
    assert service.recover() == [run_id]  # nothing pending any more: resumed in case that was lost


def test_a_finished_run_whose_report_nobody_finishes_resumes_and_a_gone_one_is_forgotten(
    service: RunService,
) -> None:
    run_id, gone = new_run(service), new_run(service)
    for each in (run_id, gone):
        with_status(service, each, RunStatus.COMPLETED)
        job_in(service, each, JobStatus.FINISHED)
        service.records.start_reporting(each, time.time(), None)
    service.redis.delete(service.keys.run(gone))
    assert service.recover() == [run_id]
    assert service.records.reporting_ids() == [run_id]


def test_a_foreign_writers_statuses_neither_stop_the_sweep_nor_make_it_skip_a_dead_run(
    service: RunService,
) -> None:
    """A hostile Redis writer: a run status no run has is left as it is (nothing can be decided
    about it), a job status RQ does not know counts as no live job (resuming is harmless)."""
    odd, dead = new_run(service), new_run(service)
    service.redis.hset(service.keys.run(odd), "status", "pwned")
    with_status(service, dead, RunStatus.RUNNING)
    service.redis.hset(Job.key_for(last_job(service, dead).id), "status", "\u202escheduled")
    assert service.recover() == [dead]
    assert odd in service.records.active_ids()


# -- cost --------------------------------------------------------------------------------------------


def test_the_sweeps_round_trips_do_not_grow_with_the_number_of_runs(private_redis: RedisProcess) -> None:
    """A burst leaves thousands of queued runs; a look run by run cost 4 round trips each (2 s of the
    sweeping worker's time for 3,000), counted here by the server (``total_reads_processed``: one
    per request read, a pipeline being read in as few reads as its size allows)."""
    client = redis.Redis.from_url(private_redis.url)
    try:
        service = RunService(client, Keys("sweep:"), make_options("sweep-cost"))
        runs = 3 * recovery.CHUNK // 2  # two chunks
        for _ in range(runs):
            new_run(service)
        before = int(client.info("stats")["total_reads_processed"])
        assert service.recover() == []
        reads = int(client.info("stats")["total_reads_processed"]) - before
        assert reads < runs // 20, f"{reads} requests for {runs} queued runs"
    finally:
        client.close()
