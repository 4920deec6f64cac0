"""A runner's Redis user (``bot.fleet.runner_acl``) with a real ``ACL SETUSER`` user and real runners.

The attacker holds one host, so its runner's credentials: with them they must reach neither the
runs nor another target (its queue, its jobs, its execution marks and results, its heartbeat),
and the runner must still work with exactly those rights.
"""

from __future__ import annotations

import json
from collections.abc import Callable, Iterator
from pathlib import Path
from urllib.parse import urlsplit, urlunsplit

import pytest
import redis
from rq import Queue
from rq.serializers import JSONSerializer

from agent.scripted import tool_call
from bot.changes.journal import ChangeJournal
from bot.fleet.dispatch import Dispatcher
from bot.fleet.grants import execution_id
from bot.fleet.heartbeats import Heartbeats
from bot.fleet.runner_acl import runner_acl_command, runner_acl_rules, target_queue_name
from bot.fleet.target_keys import target_key
from bot.keys import Keys
from tests.bot.fleet.test_runner_defences import restart_arguments
from tests.bot.fleet.test_runners import harness_for
from tests.support.runners import SECRET, FleetSite
from tests.support.waiting import wait_for
from tools.changes.record import Change

RunnerUrl = Callable[[str], str]


@pytest.fixture
def runner_url(
    site: FleetSite, redis_client: redis.Redis, redis_url: str, keys: Keys, queue_name: str
) -> Iterator[RunnerUrl]:
    """``runner_url(target)``: a Redis URL with a new ACL user holding exactly that runner's rules
    (deleted after the site's runners stopped)."""
    made: list[str] = []

    def make(target: str) -> str:
        name = f"runner-{keys.prefix.strip(':').replace(':', '-')}-{target}"
        password = "runner-password-0123456789"
        rules = runner_acl_rules(keys, queue_name, target)
        try:
            redis_client.execute_command("ACL", "SETUSER", name, "reset", f">{password}", *rules)  # type: ignore[no-untyped-call]
        except redis.ResponseError as error:
            pytest.skip(f"this Redis has no ACLs: {error}")
        made.append(name)
        parts = urlsplit(redis_url)
        return urlunsplit(parts._replace(netloc=f"{name}:{password}@{parts.hostname}:{parts.port}"))

    yield make
    for name in made:
        redis_client.execute_command("ACL", "DELUSER", name)  # type: ignore[no-untyped-call]


def denied(action: Callable[[], object]) -> bool:
    try:
        action()
    except redis.exceptions.NoPermissionError:
        return True
    return False


def test_a_runner_works_with_its_acl_and_cannot_read_runs_approvals_or_inboxes(
    site: FleetSite,
    heartbeats: Heartbeats,
    redis_client: redis.Redis,
    keys: Keys,
    tmp_path: Path,
    runner_url: RunnerUrl,
) -> None:
    url = runner_url("web-03")
    site.start("web-03", heartbeats, redis_url=url)
    harness = harness_for(site, redis_client, keys, tmp_path, tool_call("whereami", "c1", target="web-03"))
    run_id = harness.submit("where is web-03?")
    harness.work()
    assert harness.tool_results(run_id)[0].rstrip().endswith("web-03")  # the runner works with its ACL
    as_runner = redis.Redis.from_url(url)
    try:
        for key in (
            keys.run(run_id),
            keys.messages(run_id),
            keys.inbox(run_id),
            keys.approval("a1"),
            keys.audit(),
        ):
            assert denied(lambda key=key: as_runner.type(key)), key
        assert denied(lambda: as_runner.keys("*"))
    finally:
        as_runner.close()


def test_one_targets_runner_credentials_reach_no_other_target(
    site: FleetSite,
    heartbeats: Heartbeats,
    redis_client: redis.Redis,
    keys: Keys,
    runner_url: RunnerUrl,
) -> None:
    web_url = runner_url("web-03")
    site.start("web-03", heartbeats, redis_url=web_url)
    site.start("db-01", heartbeats, redis_url=runner_url("db-01"))
    send = Dispatcher(redis_client, keys, site.queue, heartbeats, SECRET.encode()).call
    # Both runners work end to end with their own users: a read, and an approved restart.
    seen = send("db-01", "execute", "whereami", json.dumps({"target": "db-01"}), timeout=30, mutating=False)
    assert seen.output.rstrip().endswith("db-01"), seen.output
    restart = restart_arguments(execution=execution_id("run1", "c1"))
    restarted = send("web-03", "execute", "restart_app", restart, timeout=30, mutating=True)
    assert "restarted api on web-03" in restarted.output, restarted.output
    assert site.actions("web-03") == ["api restarted by U_APPROVER"]

    db_queue = Queue(
        target_queue_name(site.queue, "db-01"), connection=redis_client, serializer=JSONSerializer
    )
    finished = db_queue.finished_job_registry.get_job_ids
    (db_job,) = wait_for(finished, timeout=30, what="db-01's job to finish in RQ")
    db_mark = keys.execution("db-01", "ro-anything")
    attacker = redis.Redis.from_url(web_url)  # web-03's runner's credentials, off the host
    try:
        attempts: dict[str, Callable[[], object]] = {
            "read db-01's queue": lambda: attacker.lrange(db_queue.key, 0, -1),
            "push into db-01's queue": lambda: attacker.rpush(db_queue.key, "forged-job-id"),
            "read a db-01 job": lambda: attacker.hgetall(f"rq:job:{db_job}"),
            "write a db-01 job": lambda: attacker.hset(f"rq:job:{db_job}", "data", "{}"),
            "read a db-01 job's result": lambda: attacker.xrange(f"rq:results:{db_job}"),
            "read db-01's registries": lambda: attacker.zrange(db_queue.finished_job_registry.key, 0, -1),
            "read a db-01 execution mark": lambda: attacker.get(db_mark),
            "delete a db-01 execution mark": lambda: attacker.delete(db_mark),
            "read db-01's results": lambda: attacker.lpop(keys.execution_result("db-01", "ro-anything")),
            "write db-01's results": lambda: attacker.rpush(keys.execution_result("db-01", "ro-x"), "forged"),
            "fake db-01's heartbeat": lambda: attacker.set(keys.runner_heartbeat("db-01"), "{}"),
            "write db-01's change journal": lambda: attacker.zadd(keys.changes("db-01"), {"forged": 1.0}),
            "read db-01's change journal": lambda: attacker.zrange(keys.changes("db-01"), 0, -1),
            "list every key": lambda: attacker.scan(0, match="*"),
            "list every worker": lambda: attacker.smembers("rq:workers"),
            "read the workers' queue": lambda: attacker.lrange(f"rq:queue:{site.queue}", 0, -1),
        }
        allowed = [what for what, attempt in attempts.items() if not denied(attempt)]
        assert allowed == []
        # Its own target's keys it does reach (what the runner needs).
        assert attacker.llen(f"rq:queue:{target_queue_name(site.queue, 'web-03')}") == 0
        own_journal = ChangeJournal(attacker, keys, lambda target: target_key(SECRET.encode(), target))
        assert own_journal.append([Change("web-03", "reboot", 1.0, "rebooted")]) in (0, 1)
    finally:
        attacker.close()


def test_chatops_runner_print_acl_prints_the_tested_rules(capsys: pytest.CaptureFixture[str]) -> None:
    from bot.ops.cli import build_parser
    from bot.ops.fleet_cli import run_cli
    from bot.settings import Settings

    settings = Settings(_env_file=None, chatops_queue="chatops", chatops_redis_prefix="chatops:")  # type: ignore[call-arg]
    args = build_parser().parse_args(["runner", "--target", "web-03", "--print-acl"])
    assert run_cli(args, settings) == 0
    line = capsys.readouterr().out.strip()
    assert line == runner_acl_command(Keys("chatops:"), "chatops", "web-03")
    assert line.startswith("ACL SETUSER chatops-runner-web-03 reset >RUNNER_PASSWORD on resetkeys ")
    assert " ".join(runner_acl_rules(Keys("chatops:"), "chatops", "web-03")) in line
    assert "~rq:*:chatops_2etarget_2eweb-03__*" in line and "~chatops:fleet:exec:web-03:*" in line
