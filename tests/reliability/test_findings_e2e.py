"""Evidence ids and findings through the real processes (issue 30): the Slack emulator, the web app,
``chatops`` worker subprocesses with the production runtime, a ``chatops runner`` for the target,
and the model the scripted OpenAI-compatible server over HTTP.

The model reads the run's results as the wire carries them (``[E<n>] `` before each output) and
builds its quotes from them, like a model would: some copied exactly, some fabricated, some citing
an id no result has, the refusal of an unknown tool, its own earlier findings, or two results at
once. In the middle the run suspends on an approval; the worker that ran it is killed, and a new
worker resumes it. The ids must go on where they stopped, and ``chatops runs show --json`` and the
audit stream (``chatops audit tail``, run as subprocesses) must show each claim as the rules say.
"""

from __future__ import annotations

import json
import os
import re
import subprocess
import sys
from collections.abc import Callable, Iterator
from pathlib import Path
from typing import Any

import pytest
import redis
import yaml

from agent.types import RunStatus
from bot.fleet.heartbeats import Heartbeats
from bot.keys import Keys
from bot.observability.audit import AuditKind
from bot.slack.rendering import render
from emulator.models.openai_server import OpenAIServer, Reply, ScriptedToolCall
from tests.reliability.cluster import ROOT, Cluster, Worker
from tests.support.runners import HEARTBEAT_SECONDS, SECRET, FleetSite
from tests.support.waiting import wait_for

pytestmark = [pytest.mark.reliability, pytest.mark.slow]

TARGET = "web-03"
MODEL = "gpt-test"
DISK = "Filesystem  Size Used Avail Use%\n/dev/sda1   20G  19G  1G   95% /\n"
BIG = "/var/log/api/api.log.4  1.2G\n/var/log/api/api.log.3  1.1G\n"
LABEL = re.compile(r"^\[(E[1-9][0-9]*)\] ")


def host_catalog(root: Path) -> dict[str, Any]:
    """What the host's runner (and the worker, for schemas and categories) offers."""
    (root / "df.txt").write_text(DISK)
    (root / "big.txt").write_text(BIG)
    log = root / "actions.log"
    return {
        "tools": [
            {
                "name": "root_df",
                "description": "df -h /.",
                "category": "read_only",
                "run": ["cat", str(root / "df.txt")],
            },
            {
                "name": "log_sizes",
                "description": "The biggest files.",
                "category": "read_only",
                "run": ["cat", str(root / "big.txt")],
            },
            {
                "name": "rotate_logs",
                "description": "Rotate and compress the api's logs.",
                "category": "mutating",
                "run": [
                    "sh",
                    "-c",
                    f'echo "rotated by $1" >> {log} && echo "rotated api.log.4, freed 1.2G"',
                    "sh",
                    "{confirmed_by}",
                ],
            },
        ]
    }


# -- the model: reads the wire, quotes what it read ------------------------------------------------------


def results(body: dict[str, Any]) -> dict[str, str]:
    """Each tool result the request carries, by its evidence id, without the label."""
    found = {}
    for message in body["messages"]:
        if message["role"] == "tool":
            label = LABEL.match(message["content"])
            assert label, f"a tool result without its evidence id on the wire: {message['content']!r}"
            found[label.group(1)] = message["content"][label.end() :]
    return found


def line_with(output: str, word: str) -> str:
    """The line of ``output`` holding ``word``, as the model would copy it."""
    return next(line.strip() for line in output.splitlines() if word in line)


def call(name: str, **arguments: Any) -> ScriptedToolCall:
    return ScriptedToolCall(name, json.dumps(arguments))


def evidence(ref: str, quote: str) -> dict[str, str]:
    return {"ref": ref, "quote": quote}


def findings(*hypotheses: dict[str, Any], conclusion: str, confidence: str) -> ScriptedToolCall:
    return call("update_findings", hypotheses=list(hypotheses), conclusion=conclusion, confidence=confidence)


def answer(body: dict[str, Any]) -> Reply:
    """One turn of the investigation, counted from the history (so a resumed run goes on)."""
    turn = sum(1 for m in body["messages"] if m["role"] == "assistant" and m.get("tool_calls"))
    seen = results(body)
    if turn == 0:  # E1, E2 and E3 (an unknown tool: refused, and still numbered)
        return Reply(
            tool_calls=[
                call("root_df", target=TARGET),
                call("log_sizes", target=TARGET),
                call("no_such_tool", target=TARGET),
            ]
        )
    if turn == 1:  # E4: a root cause with nothing verified
        supported = {
            "id": "H1",
            "statement": "rotated api logs fill /",
            "status": "supported",
            "evidence": [evidence("E1", "/dev/sda1 20G 20G 0 100% /"), evidence("E99", "api.log.4")],
        }
        return Reply(tool_calls=[findings(supported, conclusion="root_cause_found", confidence="high")])
    if turn == 2:  # E5, after an approval: on another worker
        return Reply(tool_calls=[call("rotate_logs", target=TARGET)])
    if turn == 3:  # E6: verified, fabricated and hostile evidence
        return Reply(tool_calls=[second_findings(seen)])
    return Reply(
        text=(
            f'The api\'s rotated logs filled / [E2: "{line_with(seen["E2"], "api.log.4")}"]; rotating them '
            f'freed the space [E5]. It was at [E1: "100% /"] (see [E42] and [E4]).'
        )
    )


def second_findings(seen: dict[str, str]) -> ScriptedToolCall:
    spanning = f"{seen['E1'].rstrip().splitlines()[-1]} {seen['E2'].splitlines()[0]}"
    return findings(
        {
            "id": "H1",
            "statement": "rotated api logs fill /",
            "status": "supported",
            "evidence": [
                evidence("E2", line_with(seen["E2"], "api.log.4")),
                evidence("E5", line_with(seen["E5"], "freed")),
                evidence("E1", "inode table full"),
            ],
        },
        {
            "id": "H2",
            "statement": "inodes ran out",
            "status": "supported",
            "evidence": [evidence("E1", "IUse% 100%")],
        },
        {
            "id": "H3",
            "statement": "the disk is healthy",
            "status": "refuted",
            "evidence": [evidence("E1", line_with(seen["E1"], "/dev/sda1"))],
        },
        {
            "id": "H4",
            "statement": "hostile quotes",
            "status": "supported",
            "evidence": [
                evidence("E3", seen["E3"][:40]),  # the refusal: the runtime's text, nothing ran
                evidence("E4", seen["E4"].splitlines()[0]),  # its own earlier findings
                evidence("E1", spanning),  # the end of one result and the start of the next
            ],
        },
        conclusion="root_cause_found",
        confidence="high",
    )


# -- the deployment --------------------------------------------------------------------------------------


@pytest.fixture
def llm() -> Iterator[OpenAIServer]:
    with OpenAIServer(model=MODEL, fallback=answer) as server:
        yield server


@pytest.fixture
def site(tmp_path: Path, key_prefix: str, queue_name: str, redis_url: str) -> Iterator[FleetSite]:
    fleet = FleetSite(tmp_path / "fleet", redis_url, key_prefix, queue_name, {TARGET: {"env": "prod"}})
    fleet.catalog_file(TARGET).write_text(yaml.safe_dump(host_catalog(fleet.root(TARGET))))
    yield fleet
    fleet.stop_all()


def production_worker(cluster: Cluster, site: FleetSite, llm: OpenAIServer) -> Worker:
    """A worker subprocess with the production runtime: the model over HTTP, the fleet's tools."""
    return cluster.start_worker(**site.worker_env(TARGET, llm.url, MODEL))


def chatops(cluster: Cluster, *argv: str) -> str:
    """The CLI as an operator runs it: a process of its own, on the cluster's Redis."""
    env = {k: v for k, v in os.environ.items() if not k.startswith(("CHATOPS_", "SLACK_", "LLM_"))}
    env |= {
        "REDIS_URL": cluster.settings.redis_url,
        "CHATOPS_REDIS_PREFIX": cluster.settings.chatops_redis_prefix,
        "CHATOPS_QUEUE": cluster.settings.chatops_queue,
        "PYTHONPATH": str(ROOT),
    }
    empty = cluster.directory / "cli.env"
    empty.write_text("")
    done = subprocess.run(
        [sys.executable, "-m", "bot.ops.cli", "--env-file", str(empty), *argv],
        cwd=ROOT,
        env=env,
        capture_output=True,
        text=True,
        timeout=120,
    )
    assert done.returncode == 0, done.stderr
    return done.stdout


def wire_ids(llm: OpenAIServer) -> list[dict[str, str]]:
    """Per model request, each tool result's evidence id by the id of the call it answers."""
    found = []
    for request in llm.requests:
        ids = {}
        for message in request.body["messages"]:
            if message["role"] == "tool":
                label = LABEL.match(message["content"])
                assert label, message["content"]
                ids[message["tool_call_id"]] = label.group(1)
        found.append(ids)
    return found


# -- the test ------------------------------------------------------------------------------------------


def test_evidence_ids_and_findings_through_the_real_processes(
    make_cluster: Callable[..., Cluster],
    site: FleetSite,
    llm: OpenAIServer,
    redis_client: redis.Redis,
    keys: Keys,
) -> None:
    cluster = make_cluster(chatops_runner_secret=SECRET)  # the web signs the grant of an approval
    site.start(TARGET, Heartbeats(redis_client, keys, HEARTBEAT_SECONDS))
    first = production_worker(cluster, site, llm)
    ts = cluster.mention("web-03 is out of disk, find out why")
    run_id = cluster.run_id(ts)

    # Suspended on the approval of rotate_logs: the worker that ran the run so far is killed.
    card = cluster.approval_card(ts, timeout=60)
    wait_for(lambda: AuditKind.RUN_SUSPENDED in cluster.audit_kinds(run_id), what="the suspension audited")
    first.kill()
    assert first.proc.poll() is not None
    before = len(llm.requests)
    assert before == 3  # turns 0, 1 and 2: the approval's call has no result yet
    second = production_worker(cluster, site, llm)
    clicked = cluster.control.click(str(card["ts"]), "U_BOB", action_id=render.ACTION_APPROVE)
    assert clicked["status"] == 200
    cluster.wait_status(run_id, RunStatus.COMPLETED, timeout=90)
    assert f"resume run {run_id}" in second.output()
    assert site.actions(TARGET) == ["rotated by U_BOB"]

    # On the wire: every result labelled, each id for one call in every request, 1..6 in order.
    per_request = wire_ids(llm)
    final = per_request[-1]
    assert list(final.values()) == ["E1", "E2", "E3", "E4", "E5", "E6"]
    for ids in per_request:
        assert all(final[call_id] == ref for call_id, ref in ids.items())  # never renumbered
    assert set(per_request[before].values()) - set(per_request[before - 1].values()) == {"E5"}

    shown = json.loads(chatops(cluster, "runs", "show", run_id[:12], "--json"))
    calls = [(c["tool"], c["evidence"], c["outcome"]) for s in shown["steps"] for c in s["calls"]]
    assert calls == [
        ("root_df", "E1", "ok"),
        ("log_sizes", "E2", "ok"),
        ("no_such_tool", "E3", "refused"),
        ("update_findings", "E4", "ok"),
        ("rotate_logs", "E5", "ok"),
        ("update_findings", "E6", "ok"),
    ]
    assert_final_findings(shown["findings"])
    citations = [(c["ref"], c["verified"], c["problem"]) for c in shown["citations"]]
    assert citations == [
        ("E2", True, None),
        ("E5", True, None),
        ("E1", False, "the quote does not occur in E1's output"),
        ("E42", False, "E42 names no tool result of this run"),
        ("E4", False, "E4 cannot be cited (it repeats your own findings)"),
    ]

    # The audit stream: every update as shown, and each tool step's id.
    updates = [e for e in cluster.audit(run_id) if e.kind is AuditKind.FINDINGS_UPDATED]
    first_update: Any = updates[0].json("findings")
    assert (first_update["conclusion"], first_update["claimed_conclusion"]) == (
        "inconclusive",
        "root_cause_found",
    )
    assert (first_update["confidence"], first_update["claimed_confidence"]) == ("medium", "high")
    (h1,) = first_update["hypotheses"]
    assert (h1["status"], h1["claimed_status"]) == ("open", "supported")
    assert [(e["ref"], e["verified"]) for e in h1["evidence"]] == [("E1", False), ("E99", False)]
    assert updates[1].json("findings") == shown["findings"]
    steps = [
        e.fields.get("evidence")
        for e in cluster.audit(run_id)
        if e.kind in (AuditKind.TOOL_EXECUTED, AuditKind.TOOL_REFUSED)
    ]
    assert steps == ["E1", "E2", "E3", "E4", "E5", "E6"]
    tail = chatops(cluster, "audit", "tail", "--run", run_id, "--kind", "findings_updated").splitlines()
    assert len(tail) == 2
    assert (
        "update=1 conclusion=inconclusive (claimed root_cause_found) confidence=medium (claimed high)"
        in tail[0]
    )
    assert 'H1 open (claimed supported) "rotated api logs fill /": E1 unverified, E99 unverified' in tail[0]
    assert "update=2 conclusion=root_cause_found confidence=high" in tail[1]
    assert 'H2 open (claimed supported) "inodes ran out": E1 unverified' in tail[1]


def assert_final_findings(found: dict[str, Any]) -> None:
    """The second update as shown: code's verdicts, the model's claims beside them."""
    assert (found["conclusion"], found["claimed_conclusion"]) == ("root_cause_found", "root_cause_found")
    assert (found["confidence"], found["claimed_confidence"]) == ("high", "high")  # E2 and E5 verified
    statuses = {h["id"]: (h["status"], h["claimed_status"]) for h in found["hypotheses"]}
    assert statuses == {
        "H1": ("supported", "supported"),
        "H2": ("open", "supported"),  # fabricated evidence only
        "H3": ("refuted", "refuted"),
        "H4": ("open", "supported"),  # nothing it cites may be cited or occurs there
    }
    verdicts = {
        h["id"]: [(e["ref"], e["verified"], e["problem"]) for e in h["evidence"]] for h in found["hypotheses"]
    }
    assert verdicts["H1"] == [
        ("E2", True, None),
        ("E5", True, None),
        ("E1", False, "the quote does not occur in E1's output"),
    ]
    assert verdicts["H2"] == [("E1", False, "the quote does not occur in E1's output")]
    assert verdicts["H3"] == [("E1", True, None)]
    assert verdicts["H4"] == [
        ("E3", False, "E3 cannot be cited (nothing ran)"),
        ("E4", False, "E4 cannot be cited (it repeats your own findings)"),
        ("E1", False, "the quote does not occur in E1's output"),
    ]
    h1 = found["hypotheses"][0]
    assert [e["tool"] for e in h1["evidence"]] == ["log_sizes", "rotate_logs", "root_df"]
    assert found["checked"] == []  # listed for a "no fault found" only
