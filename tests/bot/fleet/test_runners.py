"""Runs whose calls go to real ``chatops runner`` processes, one per target, over real Redis.

Each runner has its own simulated root and catalog (``tests.support.runners``): a tool's output
proves where it ran. The worker side is the engine's in-process worker with the fleet's tools.
"""

from __future__ import annotations

import json
from pathlib import Path

import redis
import yaml

from agent.scripted import FunctionModel, ScriptItem, tool_call
from agent.types import Request, RunStatus
from bot.fleet.heartbeats import Heartbeats
from bot.keys import Keys
from bot.observability.audit import AuditKind
from bot.ops.audit_cli import entry_json
from bot.ops.fleet import build_fleet
from bot.runs.presenter import InMemoryPresenter
from bot.settings import Settings
from tests.support.harness import Harness, make_options
from tests.support.runners import HEARTBEAT_SECONDS, SECRET, FleetSite


def turns_model(*turns: ScriptItem) -> FunctionModel:
    """Answers turn N of the run with ``turns[N]`` (counted from the history: resumable)."""

    def answer(request: Request) -> ScriptItem:
        done = sum(1 for m in request.messages if m.role == "assistant" and m.tool_calls)
        return turns[done] if done < len(turns) else "done"

    return FunctionModel(answer, model="turns")


def where(result: str) -> tuple[str, str]:
    """The target a result names (``[web-03] ...``) and the last line its command printed."""
    assert result.startswith("["), result
    return result[1 : result.index("]")], result.rstrip().splitlines()[-1]


def settings_for(site: FleetSite, worker_catalog: Path | None = None) -> Settings:
    return Settings(
        _env_file=None,  # type: ignore[call-arg]
        redis_url=site.redis_url,
        chatops_redis_prefix=site.prefix,
        chatops_queue=site.queue,
        chatops_inventory_file=site.inventory_file,
        chatops_tools_file=worker_catalog or site.catalog_file("web-03"),  # the worker's: schemas, categories
        chatops_runner_secret=SECRET,
        chatops_runner_heartbeat_seconds=HEARTBEAT_SECONDS,
    )


def harness_for(
    site: FleetSite,
    redis_client: redis.Redis,
    keys: Keys,
    tmp_path: Path,
    *turns: ScriptItem,
    worker_catalog: Path | None = None,
) -> Harness:
    from tools.registry import build_registry_from_settings

    settings = settings_for(site, worker_catalog)
    fleet = build_fleet(settings, redis_client, keys, build_registry_from_settings(settings))
    options = make_options(site.queue, runner_secret=SECRET)
    return Harness(
        redis_client,
        keys,
        options,
        tmp_path,
        [turns_model(*turns)],
        fleet.tools_for("C1"),
        InMemoryPresenter(),
    )


def test_each_call_runs_on_its_target_before_and_after_an_approval(
    site: FleetSite, heartbeats: Heartbeats, redis_client: redis.Redis, keys: Keys, tmp_path: Path
) -> None:
    web = site.start("web-03", heartbeats)
    db = site.start("db-01", heartbeats)
    harness = harness_for(
        site,
        redis_client,
        keys,
        tmp_path,
        [tool_call("whereami", "c1", target="web-03"), tool_call("whereami", "c2", target="db-01")],
        tool_call("restart_app", "c3", target="db-01", service="api"),
        tool_call("whereami", "c4", target="db-01"),
    )
    run_id = harness.submit("check both, restart the api on db-01")
    harness.work()
    assert harness.status(run_id) is RunStatus.AWAITING_APPROVAL
    assert [where(result) for result in harness.tool_results(run_id)] == [
        ("web-03", "web-03"),
        ("db-01", "db-01"),
    ]
    assert site.actions("db-01") == [] and site.actions("web-03") == []
    (approval,) = harness.service.approvals.for_run(run_id)
    assert (approval.target, approval.target_via, approval.production) == ("db-01", "runner", True)
    assert approval.command.startswith("on db-01: sh -c")

    harness.service.lifecycle.decide(approval.id, user="U_APPROVER", approve=True)
    harness.work()
    assert harness.status(run_id) is RunStatus.COMPLETED
    results = harness.tool_results(run_id)
    assert results[2].startswith("[db-01] ") and "\nrestarted api on db-01\n" in results[2]
    assert where(results[3]) == ("db-01", "db-01")
    assert site.actions("db-01") == ["api restarted by U_APPROVER"]
    assert site.actions("web-03") == []  # the approval bound the target: nothing ran on web-03
    executed = [e for e in harness.service.audit.entries(run_id) if e.kind is AuditKind.TOOL_EXECUTED]
    first, second, restart, _last = (e.fields for e in executed)
    assert (first["target"], second["target"], restart["target"]) == ("web-03", "db-01", "db-01")
    assert first["executor"].endswith(f":{web.pid}") and restart["executor"].endswith(f":{db.pid}")
    assert restart["tool"] == "restart_app" and restart["confirmed_by"] == "U_APPROVER"
    shown = json.loads(entry_json(executed[2], lambda text: text))  # ``chatops audit tail --json``
    assert (shown["target"], shown["executor"]) == ("db-01", restart["executor"])


def test_one_turns_read_only_calls_to_two_runners_run_at_the_same_time(
    site: FleetSite, heartbeats: Heartbeats, redis_client: redis.Redis, keys: Keys, tmp_path: Path
) -> None:
    site.start("web-03", heartbeats)
    site.start("db-01", heartbeats)
    harness = harness_for(
        site,
        redis_client,
        keys,
        tmp_path,
        [tool_call("meet", "m1", target="web-03"), tool_call("meet", "m2", target="db-01")],
    )
    run_id = harness.submit("check both hosts at once")
    harness.work()
    assert harness.status(run_id) is RunStatus.COMPLETED
    # Each call waited at the meeting point for the other: one after the other, the first would
    # have given up alone ("met 1") after 20 s.
    assert [where(result) for result in harness.tool_results(run_id)] == [
        ("web-03", "met 2"),
        ("db-01", "met 2"),
    ]


def test_an_unknown_target_is_an_error_the_model_reads_never_a_guess(
    site: FleetSite, heartbeats: Heartbeats, redis_client: redis.Redis, keys: Keys, tmp_path: Path
) -> None:
    harness = harness_for(
        site,
        redis_client,
        keys,
        tmp_path,
        tool_call("whereami", "c1", target="web-99"),
        tool_call("restart_app", "c2", target="web-99", service="api"),
        tool_call("restart_app", "c3", service="api"),
    )
    run_id = harness.submit("what about web-99?")
    harness.work()
    assert harness.status(run_id) is RunStatus.COMPLETED
    unknown, unknown_mutating, missing = harness.tool_results(run_id)
    assert unknown.startswith("Error: no such target 'web-99'") and "db-01, web-03" in unknown
    assert unknown_mutating.startswith("Error: no such target 'web-99'")
    assert missing.startswith("Error: restart_app needs a target: one of db-01, web-03")
    assert harness.service.approvals.for_run(run_id) == []  # nobody was asked about any of them


def test_a_killed_runner_makes_its_target_unreachable_at_once_and_asks_nobody(
    site: FleetSite, heartbeats: Heartbeats, redis_client: redis.Redis, keys: Keys, tmp_path: Path
) -> None:
    site.start("web-03", heartbeats)
    site.start("db-01", heartbeats)
    site.kill("web-03")
    # Within the heartbeat window (three missed beats) the target is known to be gone.
    from tests.support.waiting import wait_until

    wait_until(
        lambda: heartbeats.unreachable("web-03"), timeout=5 * HEARTBEAT_SECONDS + 5, what="unreachable"
    )
    harness = harness_for(
        site,
        redis_client,
        keys,
        tmp_path,
        [tool_call("whereami", "c1", target="web-03"), tool_call("whereami", "c2", target="db-01")],
        tool_call("restart_app", "c3", target="web-03", service="api"),
    )
    run_id = harness.submit("check both")
    harness.work()
    assert harness.status(run_id) is RunStatus.COMPLETED
    down, up, restart = harness.tool_results(run_id)
    assert down.startswith("Error: target web-03 is unreachable: no runner seen for ")
    assert where(up) == ("db-01", "db-01")
    assert restart.startswith("Error: target web-03 is unreachable")
    assert harness.service.approvals.for_run(run_id) == []  # a card for a dead target is never posted


def test_a_mutating_tool_the_targets_runner_does_not_have_is_refused_before_anyone_is_asked(
    site: FleetSite, heartbeats: Heartbeats, redis_client: redis.Redis, keys: Keys, tmp_path: Path
) -> None:
    site.start("web-03", heartbeats)
    catalog = yaml.safe_load(site.catalog_file("web-03").read_text())
    catalog["tools"].append(
        {"name": "drain_node", "description": "Drain the node.", "category": "mutating", "run": ["true"]}
    )
    worker_catalog = tmp_path / "worker-tools.yaml"
    worker_catalog.write_text(yaml.safe_dump(catalog))
    harness = harness_for(
        site,
        redis_client,
        keys,
        tmp_path,
        tool_call("drain_node", "c1", target="web-03"),
        worker_catalog=worker_catalog,
    )
    run_id = harness.submit("drain web-03")
    harness.work()
    (result,) = harness.tool_results(run_id)
    assert result == "Error: the runner of web-03 has no tool drain_node; it was not run"
    assert harness.service.approvals.for_run(run_id) == []
