"""What a runner refuses, with real runner processes: forged approvals, foreign jobs, second runs.

An attacker here can write to Redis (the threat the grant exists for) but does not hold
``CHATOPS_RUNNER_SECRET``; the runner must not act for them.
"""

from __future__ import annotations

import json
import threading
import time
from pathlib import Path
from typing import Any

import pytest
import redis
import yaml
from rq import Queue
from rq.job import Job
from rq.serializers import JSONSerializer

from agent.redis_util import redis_now
from agent.scripted import tool_call
from agent.types import RunStatus
from bot.fleet.dispatch import Dispatcher, target_queue_name
from bot.fleet.executions import RemoteResult
from bot.fleet.grants import GRANT_LIFETIME_SECONDS, Grant, GrantSigner, arguments_sha256, execution_id
from bot.fleet.heartbeats import Heartbeats
from bot.fleet.job_signing import sign_job
from bot.fleet.target_keys import target_key
from bot.keys import Keys
from bot.runs.approvals import Approval, ApprovalStatus
from bot.runs.service import RunService
from tests.bot.fleet.test_runners import harness_for
from tests.support.harness import Harness
from tests.support.runners import SECRET, FleetSite
from tests.support.waiting import wait_for, wait_until


def dispatcher(redis_client: redis.Redis, keys: Keys, site: FleetSite, heartbeats: Heartbeats) -> Dispatcher:
    return Dispatcher(redis_client, keys, site.queue, heartbeats, SECRET.encode())


def restart_arguments(*, grant_secret: str = SECRET, execution: str, pause: int = 0, **changes: Any) -> str:
    """``restart_app`` on web-03 as an approved call, with a grant signed by ``grant_secret``."""
    arguments: dict[str, object] = {"target": "web-03", "service": "api", "pause": pause}
    signer = GrantSigner(grant_secret.encode(), 600)
    grant = signer.sign(
        approval_id="a1",
        execution=execution,
        tool="restart_app",
        args_sha256=arguments_sha256(arguments),
        target="web-03",
        confirmed_by="U_APPROVER",
    )
    arguments.update(confirmed_by="U_APPROVER", approval_grant=grant)
    arguments.update(changes)
    return json.dumps(arguments)


def restart_waiting_for_approval(
    site: FleetSite, heartbeats: Heartbeats, redis_client: redis.Redis, keys: Keys, tmp_path: Path
) -> tuple[Harness, str, Approval]:
    """A run whose model asked to restart the api on web-03 (a live runner), waiting for its card."""
    site.start("web-03", heartbeats)
    harness = harness_for(
        site, redis_client, keys, tmp_path, tool_call("restart_app", "c1", target="web-03", service="api")
    )
    run_id = harness.submit("restart the api on web-03")
    harness.work()
    (approval,) = harness.service.approvals.for_run(run_id)
    return harness, run_id, approval


def test_an_approval_forged_into_redis_is_refused_by_the_runner(
    site: FleetSite, heartbeats: Heartbeats, redis_client: redis.Redis, keys: Keys, tmp_path: Path
) -> None:
    harness, run_id, approval = restart_waiting_for_approval(site, heartbeats, redis_client, keys, tmp_path)
    # Someone with write access to Redis, but without the runner secret, approves it themselves.
    assert harness.service.approvals.decide(approval.id, ApprovalStatus.APPROVED, "U_ATTACKER").won  # type: ignore[union-attr]
    harness.service.enqueue(run_id)
    harness.work()
    assert harness.status(run_id) is RunStatus.COMPLETED
    (result,) = harness.tool_results(run_id)
    assert "the runner of web-03 refused restart_app: it carries no approval grant" in result
    assert site.actions("web-03") == []


@pytest.mark.parametrize(
    ("secret", "changes", "why"),
    [
        ("not-the-secret", {}, "is not signed with this runner's secret"),
        (SECRET, {"service": "db"}, "is for another arguments"),  # the card showed "api"
        (SECRET, {"confirmed_by": "U_SOMEONE_ELSE"}, "is for another approver"),
        (SECRET, {"approval_grant": "{not json"}, "carries no approval grant"),
    ],
)
def test_a_grant_that_does_not_match_the_call_is_refused(
    site: FleetSite,
    heartbeats: Heartbeats,
    redis_client: redis.Redis,
    keys: Keys,
    secret: str,
    changes: dict[str, Any],
    why: str,
) -> None:
    site.start("web-03", heartbeats)
    execution = execution_id("run1", "call1")
    arguments = restart_arguments(grant_secret=secret, execution=execution, **changes)
    result = dispatcher(redis_client, keys, site, heartbeats).call(
        "web-03", "execute", "restart_app", arguments, timeout=20, mutating=True
    )
    assert result.is_error and why in result.output, result.output
    assert site.actions("web-03") == []


def test_a_grant_for_one_target_does_not_work_on_another(
    site: FleetSite, heartbeats: Heartbeats, redis_client: redis.Redis, keys: Keys
) -> None:
    site.start("db-01", heartbeats)
    arguments = restart_arguments(execution=execution_id("run1", "call1"))  # granted for web-03
    result = dispatcher(redis_client, keys, site, heartbeats).call(
        "db-01", "execute", "restart_app", arguments, timeout=20, mutating=True
    )
    assert result.is_error and "this call is for target 'web-03', not db-01" in result.output
    assert site.actions("db-01") == []


def test_a_valid_grant_runs_once_and_a_replay_runs_nothing(
    site: FleetSite, heartbeats: Heartbeats, redis_client: redis.Redis, keys: Keys
) -> None:
    site.start("web-03", heartbeats)
    arguments = restart_arguments(execution=execution_id("run1", "call1"))
    send = dispatcher(redis_client, keys, site, heartbeats).call
    first = send("web-03", "execute", "restart_app", arguments, timeout=20, mutating=True)
    assert not first.is_error and "restarted api on web-03" in first.output
    again = send("web-03", "execute", "restart_app", arguments, timeout=20, mutating=True)
    assert again.is_error and "outcome unknown" in again.output and "not run again" in again.output
    assert site.actions("web-03") == ["api restarted by U_APPROVER"]


def test_a_mutating_call_killed_mid_run_runs_at_most_once(
    site: FleetSite, heartbeats: Heartbeats, redis_client: redis.Redis, keys: Keys
) -> None:
    site.start("web-03", heartbeats)
    execution = execution_id("run1", "call1")
    arguments = restart_arguments(execution=execution, pause=30)
    answers: list[RemoteResult] = []
    send = dispatcher(redis_client, keys, site, heartbeats).call
    waiting = threading.Thread(
        target=lambda: answers.append(
            send("web-03", "execute", "restart_app", arguments, timeout=50, mutating=True)
        )
    )
    waiting.start()
    wait_until(lambda: site.actions("web-03"), timeout=20, what="the restart to start on web-03")
    site.kill("web-03")  # mid-run: the command sleeps after its side effect
    waiting.join(timeout=30)
    (answer,) = answers
    assert answer.is_error and answer.output.startswith(
        "Error: outcome unknown: target web-03 is unreachable"
    )
    # The runner comes back and RQ hands it the same job again: it must not run it a second time.
    site.start("web-03", heartbeats)
    queue = Queue(target_queue_name(site.queue, "web-03"), connection=redis_client, serializer=JSONSerializer)
    payload = {"target": "web-03", "execution": execution, "op": "execute", "tool": "restart_app"}
    payload.update(arguments=arguments, deadline=redis_client.time()[0] + 60.0, timeout=20.0)
    signed = sign_job(target_key(SECRET.encode(), "web-03"), payload)  # as its dispatcher signed it
    queue.enqueue_call("bot.fleet.runner_job.perform", args=(signed,), result_ttl=0)
    result_key = keys.execution_result("web-03", execution)
    retried = wait_for(lambda: redis_client.lpop(result_key), timeout=20, what="the retried job's answer")
    sealed = json.loads(retried if isinstance(retried, bytes) else b"{}")
    assert "outcome unknown" in json.loads(sealed["result"])["output"]
    assert site.actions("web-03") == ["api restarted by U_APPROVER"]  # exactly once


def test_a_runner_runs_no_other_function_a_job_names(
    site: FleetSite, heartbeats: Heartbeats, redis_client: redis.Redis, keys: Keys, tmp_path: Path
) -> None:
    site.start("web-03", heartbeats)
    pwned = tmp_path / "pwned"
    queue = Queue(target_queue_name(site.queue, "web-03"), connection=redis_client, serializer=JSONSerializer)
    job = queue.enqueue_call("os.system", args=(f"touch {pwned}",), result_ttl=0, failure_ttl=600)
    wait_until(
        lambda: Job.fetch(job.id, connection=redis_client, serializer=JSONSerializer).is_failed, timeout=20
    )
    refused = Job.fetch(job.id, connection=redis_client, serializer=JSONSerializer)
    latest = refused.latest_result()
    assert latest is not None and "a runner runs only bot.fleet.runner_job.perform" in (
        latest.exc_string or ""
    )
    assert not pwned.exists()


def test_a_pickled_job_is_not_unpickled_by_a_runner(
    site: FleetSite, heartbeats: Heartbeats, redis_client: redis.Redis, keys: Keys, tmp_path: Path
) -> None:
    site.start("web-03", heartbeats)
    pwned = tmp_path / "pwned-pickle"
    pickled = Queue(target_queue_name(site.queue, "web-03"), connection=redis_client)  # RQ's default: pickle
    pickled.enqueue_call("os.system", args=(f"touch {pwned}",), result_ttl=0)
    # A harmless job after it proves the runner read past the hostile one.
    arguments = json.dumps({"target": "web-03"})
    ok = dispatcher(redis_client, keys, site, heartbeats).call(
        "web-03", "execute", "whereami", arguments, timeout=20, mutating=False
    )
    assert ok.output.rstrip().endswith("web-03")
    assert not pwned.exists()


def test_a_runner_command_never_sees_the_runner_secret_or_the_redis_url(
    site: FleetSite, heartbeats: Heartbeats, redis_client: redis.Redis, keys: Keys, tmp_path: Path
) -> None:
    leak = {
        "name": "show_env",
        "description": "Print the environment (a careless catalog entry).",
        "category": "read_only",
        "run": ["env"],
    }
    catalog_file = site.catalog_file("web-03")
    catalog = yaml.safe_load(catalog_file.read_text())
    catalog["tools"].append(leak)
    catalog_file.write_text(yaml.safe_dump(catalog))
    site.start("web-03", heartbeats)
    result = dispatcher(redis_client, keys, site, heartbeats).call(
        "web-03", "execute", "show_env", json.dumps({"target": "web-03"}), timeout=20, mutating=False
    )
    assert "CHATOPS_INVENTORY_FILE=" in result.output  # it did print its environment
    assert SECRET not in result.output and "CHATOPS_RUNNER_SECRET" not in result.output
    assert "REDIS_URL" not in result.output


def test_a_result_written_into_redis_by_anyone_but_the_runner_is_ignored(
    site: FleetSite, heartbeats: Heartbeats, redis_client: redis.Redis, keys: Keys
) -> None:
    send = dispatcher(redis_client, keys, site, heartbeats)
    heartbeats.beat("web-03", "forged:1")  # a runner that looks alive, and is not (nobody serves the queue)
    execution = execution_id("run1", "call9")
    forged = json.dumps({"result": RemoteResult("disk usage 12%, all fine").encode(), "seal": "0" * 64})
    redis_client.rpush(keys.execution_result("web-03", execution), forged)
    arguments = restart_arguments(execution=execution)
    result = send.call("web-03", "execute", "restart_app", arguments, timeout=5, mutating=True)
    assert result.is_error and "not sealed by a runner" in result.output
    assert "all fine" not in result.output


@pytest.mark.parametrize("skew", [-86400.0, 86400.0], ids=["web clock a day behind", "a day ahead"])
def test_a_grant_expires_by_redis_clock_whatever_the_web_hosts_clock_says(
    site: FleetSite,
    heartbeats: Heartbeats,
    redis_client: redis.Redis,
    keys: Keys,
    tmp_path: Path,
    skew: float,
) -> None:
    """The web host signs the grant and the runner checks it, each against Redis's clock: a web
    clock behind cannot make every grant stale on arrival, nor one ahead stretch a grant's life."""
    harness, run_id, approval = restart_waiting_for_approval(site, heartbeats, redis_client, keys, tmp_path)
    web = RunService(redis_client, keys, harness.options, clock=lambda: time.time() + skew)
    web.lifecycle.decide(approval.id, user="U_APPROVER", approve=True)
    grant = Grant.decode(web.approvals.for_run(run_id)[0].grant)
    assert grant is not None
    remaining = grant.expires_at - redis_now(redis_client)
    # From the click to the runner's pick-up, not the approval timeout (600 s here).
    assert 0 < remaining <= GRANT_LIFETIME_SECONDS < harness.options.approval_timeout_seconds
    harness.work()
    assert harness.status(run_id) is RunStatus.COMPLETED
    assert site.actions("web-03") == ["api restarted by U_APPROVER"]
