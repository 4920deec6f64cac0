"""``chatops handoff [--since 12h] [--channel C…] [--json]`` on a real Redis."""

from __future__ import annotations

import json
import time

import pytest
import redis

from agent.tooling import ToolCategory
from agent.types import Message, RunStatus, ToolCall
from bot.alerts.store import AlertStore, Group
from bot.keys import Keys
from bot.observability.audit import AuditKind, AuditLog
from bot.ops.cli import build_parser
from bot.ops.compose_changes import change_journal
from bot.ops.handoff_cli import run_cli
from bot.runs.approvals import Approvals
from bot.runs.record import RunRecord, RunRecords
from bot.settings import Settings
from tests.bot.postmortem.incident import SECRET, Clock
from tools.changes.record import DEPLOY, Change
from tools.inventory_types import Inventory


@pytest.fixture
def settings(redis_url: str, keys: Keys) -> Settings:
    return Settings(_env_file=None, redis_url=redis_url, chatops_redis_prefix=keys.prefix)  # type: ignore[call-arg]


def cli(settings: Settings, capsys: pytest.CaptureFixture[str], *argv: str) -> tuple[int, str, str]:
    status = run_cli(build_parser().parse_args(["handoff", *argv]), settings)
    captured = capsys.readouterr()
    return status, captured.out, captured.err


def shift(client: redis.Redis, keys: Keys) -> None:
    now = time.time()
    records = RunRecords(client, keys)
    for run_id, channel, status in (
        ("run-open", "C1", RunStatus.AWAITING_APPROVAL),
        ("run-sec", "CSEC", RunStatus.RUNNING),
    ):
        record = RunRecord(
            run_id=run_id,
            channel=channel,
            thread_ts=f"{now:.6f}",
            requester="U1",
            text=f"fix {run_id}\nforged line",
            status=status,
            created_at=now - 600,
        )
        records.create(record, Message.user("x"))
    call = ToolCall(id="c1", name="restart_service", arguments='{"unit":"nginx"}')
    Approvals(client, keys, retention_seconds=3600).create(
        "run-open", call, ToolCategory.MUTATING, requester="U1", timeout_seconds=600
    )
    store = AlertStore(client, keys)
    for gid, channel, state in (
        ("gfire", "C1", "firing"),
        ("gsec", "CSEC", "firing"),
        ("gdone", "C1", "resolved"),
    ):
        store.save(
            Group(
                id=gid,
                source="alertmanager",
                group_key=gid,
                channel=channel,
                root_ts=f"{now:.6f}",
                status=state,
                title=f"Disk {gid}",
            )
        )
    clock = Clock(now - 2 * 86400)
    audit = AuditLog(client, keys, max_len=10_000, clock=clock)
    audit.record(AuditKind.RUN_STARTED, "run-old", channel="C1", requester="U1")
    audit.record(AuditKind.TOOL_EXECUTED, "run-old", tool="old_change", category="mutating", outcome="ok")
    clock.now = now - 300
    for run_id, channel in (("run-done", "C1"), ("run-sec2", "CSEC")):
        audit.record(AuditKind.RUN_STARTED, run_id, channel=channel, requester="U1")
        audit.record(
            AuditKind.TOOL_EXECUTED,
            run_id,
            tool=f"change_{channel}",
            category="mutating",
            confirmed_by="U2",
            outcome="ok",
            target="web-03",
        )
        audit.record(AuditKind.TOOL_EXECUTED, run_id, tool="disk_usage", category="read_only", outcome="ok")
    audit.record(AuditKind.APPROVAL_DECIDED, "run-done", tool="rm_logs", status="expired", decided_by="")


def test_the_handoff_lists_what_is_open_and_what_changed(
    redis_client: redis.Redis, keys: Keys, settings: Settings, capsys: pytest.CaptureFixture[str]
) -> None:
    shift(redis_client, keys)
    status, out, err = cli(settings, capsys, "--since", "12h", "--channel", "C1")
    assert (status, err) == (0, "")
    assert "alert firing: Disk gfire" in out and "gdone" not in out
    assert "approval of restart_service waiting" in out and "(run run-open, asked by U1)" in out
    assert "change_C1 on web-03, approved by U2: ok" in out and "disk_usage" not in out
    assert "approval of rm_logs expired" in out and "old_change" not in out
    assert "CSEC" not in out and "gsec" not in out and "change_CSEC" not in out  # another channel: left out
    assert "fix run-open forged line" in out  # one line per item, whatever the text holds
    data = json.loads(cli(settings, capsys, "--json")[1])
    assert {item["ref"] for item in data["firing"]} == {"gfire", "gsec"}
    assert len(data["changed"]) == 2 and len(data["in_progress"]) == 2


def test_a_bad_duration_is_one_line_exit_2(settings: Settings, capsys: pytest.CaptureFixture[str]) -> None:
    status, out, err = cli(settings, capsys, "--since", "yesterday")
    assert status == 2 and out == "" and err.count("\n") == 1


def test_follow_ups_left_in_threads_and_the_change_journal_are_listed(
    redis_client: redis.Redis, keys: Keys, redis_url: str, capsys: pytest.CaptureFixture[str]
) -> None:
    settings = Settings(  # type: ignore[call-arg]
        _env_file=None, redis_url=redis_url, chatops_redis_prefix=keys.prefix, chatops_runner_secret="s" * 32
    )
    audit = AuditLog(redis_client, keys, max_len=10_000)
    for run_id, channel, thread in (("run-q", "C1", "1.1"), ("run-a", "C1", "2.2"), ("run-s", "CSEC", "4.4")):
        audit.record(AuditKind.RUN_STARTED, run_id, channel=channel, thread_ts=thread, requester="U1")
        audit.record(
            AuditKind.RUN_FINISHED,
            run_id,
            status="completed",
            output=f"Disk full.\nShall I clean {run_id}?\n",
        )
    audit.record(AuditKind.RUN_STARTED, "run-b", channel="C1", thread_ts="2.2", requester="U2")  # answered
    audit.record(AuditKind.RUN_FINISHED, "run-b", status="completed", output="Cleaned. Anything else? Done.")
    audit.record(AuditKind.RUN_STARTED, "run-u", channel="C1", thread_ts="3.3", requester="U1")
    audit.record(AuditKind.MESSAGE_UNREAD, "run-u", user="U2", text=f"also check /tmp <!channel> {SECRET}")
    audit.record(AuditKind.RUN_FINISHED, "run-u", status="completed", output="Nothing found.")
    journal = change_journal(redis_client, settings, Inventory.implicit_local())
    journal.append(
        [Change("local", DEPLOY, time.time() - 60, f"deploy api 1.4.2 {SECRET}", who="ci", source="cli")]
    )
    journal.append(
        [Change("local", DEPLOY, time.time() - 86_400, "deploy api 1.4.1", who="ci", source="cli")]
    )

    status, out, err = cli(settings, capsys, "--since", "2h", "--channel", "C1")
    assert (status, err) == (0, "")
    follow_ups = out[out.index("Follow-ups asked for in threads:") : out.index("Changed during")]
    assert "run run-q asked, and nobody answered: Shall I clean run-q?  [" in follow_ups
    assert "U2's reply came as run run-u ended, unread: also check /tmp <!channel>" in follow_ups
    assert SECRET not in out  # redacted, whatever the audit or the journal holds
    assert "run-a" not in follow_ups and "run-b" not in follow_ups and "run-s" not in follow_ups
    assert (
        "deploy on local: deploy api 1.4.2 [REDACTED] (by ci, cli)" in out and "1.4.1" not in out
    )  # before the shift
    status, out, err = cli(settings, capsys, "--since", "90x")
    assert status == 2 and "not a duration" in err
