"""Replays against real runner processes, by someone who can write Redis but holds no runner secret.

A grant is spent once on the host (``bot.fleet.grant_ledger``): deleting its Redis mark and pushing
the same signed job again runs nothing, across a runner restart too. Every job is signed
(``bot.fleet.job_signing``): an unsigned, altered, foreign or expired one is refused, runs nothing
and gets no readable output; a signed read-only job replayed runs nothing either.
"""

from __future__ import annotations

import json
from pathlib import Path
from typing import Any

import pytest
import redis
import yaml
from rq import Queue
from rq.job import Job
from rq.serializers import JSONSerializer

from agent.redis_util import redis_now
from bot.fleet.dispatch import RUNNER_FUNCTION, Dispatcher
from bot.fleet.grants import execution_id
from bot.fleet.heartbeats import Heartbeats
from bot.fleet.job_signing import sign_job
from bot.fleet.runner_acl import target_queue_name
from bot.fleet.target_keys import target_key
from bot.keys import Keys
from bot.observability.audit import AuditKind
from bot.ops.worker import refusal_mover
from bot.runs.service import RunOptions, RunService
from bot.settings import Settings
from tests.bot.fleet.test_runner_defences import restart_arguments
from tests.support.runners import SECRET, FleetSite
from tests.support.waiting import wait_for, wait_until


def target_queue(redis_client: redis.Redis, site: FleetSite, target: str) -> Queue:
    return Queue(target_queue_name(site.queue, target), connection=redis_client, serializer=JSONSerializer)


def sent_payload(queue: Queue) -> dict[str, Any]:
    """The one job the dispatcher sent to ``queue``, as it is stored in Redis (readable to a runner)."""
    ids = wait_for(queue.finished_job_registry.get_job_ids, timeout=30, what="the job to finish in RQ")
    (job_id,) = ids
    job = Job.fetch(job_id, connection=queue.connection, serializer=JSONSerializer)
    payload = job.args[0]
    assert isinstance(payload, dict)
    return payload


def push(queue: Queue, payload: object) -> Job:
    """What the attacker does: a job for the runner's one function, straight into its queue."""
    return queue.enqueue_call(RUNNER_FUNCTION, args=(payload,), result_ttl=600, failure_ttl=600)


def answer(redis_client: redis.Redis, keys: Keys, target: str, execution: str) -> str:
    """The (sealed) result a runner pushed for ``execution``: its output text."""
    key = keys.execution_result(target, execution)
    raw = wait_for(lambda: redis_client.lpop(key), timeout=30, what=f"the answer for {execution}")
    sealed = json.loads(raw if isinstance(raw, bytes) else b"{}")
    return str(json.loads(sealed["result"])["output"])


@pytest.mark.parametrize("restart", [False, True], ids=["same runner", "after a runner restart"])
def test_a_replayed_grant_with_its_redis_mark_deleted_runs_nothing(
    site: FleetSite, heartbeats: Heartbeats, redis_client: redis.Redis, keys: Keys, restart: bool
) -> None:
    site.start("web-03", heartbeats)
    execution = execution_id("run1", "call1")
    send = Dispatcher(redis_client, keys, site.queue, heartbeats, SECRET.encode()).call
    first = send(
        "web-03", "execute", "restart_app", restart_arguments(execution=execution), timeout=120, mutating=True
    )
    assert "restarted api on web-03" in first.output, first.output
    queue = target_queue(redis_client, site, "web-03")
    payload = sent_payload(queue)  # signed, its grant inside: both still valid for minutes
    if restart:  # the host's disk outlives its runner
        site.kill("web-03")
        site.start("web-03", heartbeats)
    # The attacker erases what Redis knows of the execution and pushes the very same job again.
    redis_client.delete(keys.execution("web-03", execution), keys.execution_result("web-03", execution))
    push(queue, payload)
    replayed = answer(redis_client, keys, "web-03", execution)
    assert "was not run again on web-03" in replayed and "already spent on this host" in replayed, replayed
    assert site.actions("web-03") == ["api restarted by U_APPROVER"]  # the side effect happened once


def reads_catalog(site: FleetSite, target: str) -> Path:
    """Give ``target`` a read-only tool that leaves a trace on the host each time it runs."""
    catalog_file = site.catalog_file(target)
    catalog = yaml.safe_load(catalog_file.read_text())
    trace = site.root(target) / "reads.log"
    catalog["tools"].append(
        {
            "name": "tail_log",
            "override": True,
            "description": "Read the host's log (and leave a trace of the read).",
            "category": "read_only",
            "run": ["sh", "-c", f"echo read >> {trace} && echo 'db password=hunter2'"],
        }
    )
    catalog_file.write_text(yaml.safe_dump(catalog))
    return trace


def read_job(redis_client: redis.Redis, **changes: Any) -> dict[str, Any]:
    """A read-only job for db-01 as a dispatcher would write it, before signing."""
    payload: dict[str, Any] = {
        "target": "db-01",
        "execution": "ro-attacker",
        "op": "execute",
        "tool": "tail_log",
        "arguments": json.dumps({"target": "db-01"}),
        "deadline": redis_now(redis_client) + 60.0,
        "timeout": 20.0,
    }
    payload.update(changes)
    return payload


def refusals(site: FleetSite, target: str, job: Job) -> list[str]:
    return [line for line in site.output(target).splitlines() if f"refused runner job {job.id}" in line]


def signed(payload: dict[str, Any], key_of: str | None = None) -> dict[str, Any]:
    """Signed as a dispatcher signs it: with the key of its target (or of ``key_of``)."""
    return sign_job(target_key(SECRET.encode(), key_of or payload["target"]), payload)


def altered(payload: dict[str, Any]) -> dict[str, Any]:
    job = signed(payload)
    job["arguments"] = json.dumps({"target": "db-01", "lines": 10000})
    return job


@pytest.mark.parametrize(
    ("make", "why"),
    [
        # Today's shape of a job, as anyone who can write the queue writes it: no signature.
        (lambda rc: {k: v for k, v in read_job(rc).items() if k != "target"}, "it is not signed"),
        (lambda rc: read_job(rc), "it is not signed"),
        (lambda rc: {**signed(read_job(rc)), "signature": "0" * 64}, "its signature does not match"),
        (lambda rc: altered(read_job(rc)), "its signature does not match"),
        (lambda rc: sign_job(b"not-the-secret", read_job(rc)), "its signature does not match"),
        # web-03's genuine job pushed into db-01's queue: signed with web-03's key.
        (lambda rc: signed(read_job(rc, target="web-03")), "its signature does not match"),
        # A compromised web-03 holds web-03's key only: what it signs is no job for db-01.
        (lambda rc: signed(read_job(rc), key_of="web-03"), "its signature does not match"),
        (
            lambda rc: signed(read_job(rc, target="web-03"), key_of="db-01"),
            "it is signed for target 'web-03'",
        ),
        (lambda rc: signed(read_job(rc, deadline=redis_now(rc) - 1)), "its signature has expired"),
    ],
    ids=[
        "unsigned, old shape",
        "unsigned",
        "forged signature",
        "altered",
        "other secret",
        "a web-03 job",
        "web-03's key",
        "db-01's key for web-03",
        "expired",
    ],
)
def test_a_runner_refuses_a_job_not_signed_for_it_now_and_runs_nothing(
    site: FleetSite, heartbeats: Heartbeats, redis_client: redis.Redis, keys: Keys, make: Any, why: str
) -> None:
    trace = reads_catalog(site, "db-01")
    site.start("db-01", heartbeats)
    queue = target_queue(redis_client, site, "db-01")
    job = push(queue, make(redis_client))
    wait_until(lambda: refusals(site, "db-01", job), timeout=30, what="the runner's refusal in its log")
    (line,) = refusals(site, "db-01", job)
    assert "WARNING" in line and why in line and "tail_log" in line, line
    assert not trace.exists()  # the tool never ran
    result_key = keys.execution_result("db-01", "ro-attacker")
    if why == "its signature has expired":  # a dispatcher signed it: it is told, sealed, that nothing ran
        assert "it was not run" in answer(redis_client, keys, "db-01", "ro-attacker")
    else:  # nobody authenticated it: no answer at all
        assert redis_client.exists(result_key) == 0
    assert "hunter2" not in json.dumps(
        Job.fetch(job.id, connection=redis_client, serializer=JSONSerializer).return_value()
    )
    # Audited: the worker's maintenance moves the runner's record into the audit stream, once.
    audited = moved_refusals(site, redis_client, keys)
    assert [(e.fields["target"], e.fields["job"]) for e in audited] == [("db-01", job.id)]
    assert why in audited[0].fields["problem"] and audited[0].fields["tool"] == "tail_log"
    assert moved_refusals(site, redis_client, keys) == []  # a second sweep reports nothing again


def moved_refusals(site: FleetSite, client: redis.Redis, keys: Keys) -> list[Any]:
    """What one worker sweep's refusal mover puts into the audit stream."""
    settings = Settings(  # type: ignore[call-arg]
        _env_file=None,
        chatops_redis_prefix=site.prefix,
        chatops_inventory_file=site.inventory_file,
        chatops_runner_secret=SECRET,
    )
    service = RunService(client, keys, RunOptions(queue_name=f"{site.prefix}unused"))
    before = {entry.id for entry in service.audit.entries()}
    refusal_mover(settings, client, service)()
    return [e for e in service.audit.entries() if e.id not in before and e.kind is AuditKind.RUNNER_REFUSED]


def test_a_signed_read_only_job_replayed_within_its_deadline_is_not_run_again(
    site: FleetSite, heartbeats: Heartbeats, redis_client: redis.Redis, keys: Keys
) -> None:
    trace = reads_catalog(site, "db-01")
    site.start("db-01", heartbeats)
    send = Dispatcher(redis_client, keys, site.queue, heartbeats, SECRET.encode()).call
    first = send("db-01", "execute", "tail_log", json.dumps({"target": "db-01"}), timeout=120, mutating=False)
    assert not first.is_error and trace.read_text() == "read\n"
    queue = target_queue(redis_client, site, "db-01")
    payload = sent_payload(queue)
    replay = push(queue, payload)
    wait_until(
        lambda: Job.fetch(replay.id, connection=redis_client, serializer=JSONSerializer).is_finished,
        timeout=30,
        what="the runner to take the replayed job",
    )
    assert trace.read_text() == "read\n"  # read once
    assert redis_client.exists(keys.execution_result("db-01", payload["execution"])) == 0
    assert "answered already" in site.output("db-01")
