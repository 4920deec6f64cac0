"""``chatops audit tail``: the newest entries, filters, and ``-f`` following new ones as they come."""

from __future__ import annotations

import json
import os
import queue
import subprocess
import sys
import threading
from pathlib import Path

import pytest

from bot.observability.audit import AuditKind
from bot.ops.audit_cli import run_cli
from bot.ops.cli import build_parser
from bot.settings import Settings
from tests.support.harness import Harness

CHATOPS = str(Path(sys.executable).with_name("chatops"))


@pytest.fixture
def settings(harness: Harness, redis_url: str) -> Settings:
    return Settings(
        _env_file=None,  # type: ignore[call-arg]
        redis_url=redis_url,
        chatops_redis_prefix=harness.keys.prefix,
        chatops_queue=harness.options.queue_name,
    )


def tail(settings: Settings, capsys: pytest.CaptureFixture[str], *argv: str) -> list[str]:
    assert run_cli(build_parser().parse_args(["audit", "tail", *argv]), settings) == 0
    return capsys.readouterr().out.splitlines()


def test_tail_prints_the_newest_entries_oldest_first(
    harness: Harness, settings: Settings, capsys: pytest.CaptureFixture[str]
) -> None:
    first = harness.submit("plan: check_health", thread_ts="1.1")
    harness.work()
    second = harness.submit("plan: check_health", thread_ts="2.1")
    harness.work()
    lines = tail(settings, capsys, "-n", "4")
    kinds = [line.split()[3] for line in lines]
    assert kinds == ["run_finished", "run_started", "tool_executed", "run_finished"]
    assert [line.split()[4] for line in lines] == [first[:12], second[:12], second[:12], second[:12]]
    assert "tool=check_health" in lines[2] and "outcome=ok" in lines[2]
    (only,) = tail(settings, capsys, "--run", first[:10], "--kind", "tool_executed", "--json")
    entry = json.loads(only)
    assert (entry["run_id"], entry["kind"], entry["tool"]) == (first, "tool_executed", "check_health")


def test_secrets_in_audit_values_are_redacted(
    harness: Harness, settings: Settings, capsys: pytest.CaptureFixture[str]
) -> None:
    harness.service.audit.record(AuditKind.MESSAGE_INJECTED, "r1", text="use api_key=sk-live-0123456789 now")
    (line,) = tail(settings, capsys, "-n", "1")
    assert "text=use api_key=[REDACTED] now" in line and "sk-live" not in line


def test_control_characters_in_audit_values_are_shown_escaped(
    harness: Harness, settings: Settings, capsys: pytest.CaptureFixture[str]
) -> None:
    """A tool's output may carry terminal escapes: printed raw, one could rewrite the lines above it."""
    harness.service.audit.record(AuditKind.TOOL_EXECUTED, "r1", output="ok\x1b[1A\x1b[2K\u202eforged")
    (line,) = tail(settings, capsys, "-n", "1")
    assert "output=ok\\u001b[1A\\u001b[2K\\u202eforged" in line and "\x1b" not in line


def test_follow_prints_new_entries_as_they_arrive(harness: Harness, redis_url: str, tmp_path: Path) -> None:
    env_file = tmp_path / "audit.env"
    env_file.write_text(f"REDIS_URL={redis_url}\nCHATOPS_REDIS_PREFIX={harness.keys.prefix}\n")
    harness.service.audit.record(AuditKind.RUN_STARTED, "old-run", requester="U1")
    process = subprocess.Popen(
        [CHATOPS, "--env-file", str(env_file), "audit", "tail", "-n", "1", "-f"],
        stdout=subprocess.PIPE,
        stderr=subprocess.DEVNULL,
        text=True,
        env={k: v for k, v in os.environ.items() if not k.startswith("CHATOPS_")},
    )
    lines: queue.Queue[str] = queue.Queue()
    assert process.stdout is not None
    reader = threading.Thread(target=lambda: [lines.put(line) for line in process.stdout], daemon=True)  # type: ignore[union-attr]
    reader.start()
    try:
        assert "old-run" in lines.get(timeout=20)
        harness.service.audit.record(AuditKind.RUN_FINISHED, "new-run", status="completed")
        followed = lines.get(timeout=20)
        assert followed.split()[3:6] == ["run_finished", "new-run", "status=completed"]
        assert process.poll() is None  # still following
    finally:
        process.terminate()
        process.wait(timeout=10)


def test_actor_and_target_filters_keep_what_that_person_did_or_that_target_saw(
    harness: Harness, settings: Settings, capsys: pytest.CaptureFixture[str]
) -> None:
    audit = harness.service.audit
    audit.record(AuditKind.RUN_STARTED, "r1", requester="U_ALICE")
    audit.record(AuditKind.APPROVAL_VOTED, "r1", approved_by="U_CAROL", target="web-03")
    audit.record(AuditKind.APPROVAL_DECIDED, "r1", decided_by="U_DAVE", target="web-03")
    audit.record(AuditKind.TOOL_EXECUTED, "r1", confirmed_by="U_DAVE", target="web-03", requester="U_ALICE")
    audit.record(AuditKind.STOP_REQUESTED, "r2", stopped_by="U_CAROL")
    audit.record(AuditKind.TOOL_EXECUTED, "r2", target="db-01", requester="U_BOB")
    kinds = [line.split()[3] for line in tail(settings, capsys, "--actor", "U_CAROL")]
    assert kinds == ["approval_voted", "stop_requested"]
    kinds = [line.split()[3] for line in tail(settings, capsys, "--actor", "U_DAVE")]
    assert kinds == ["approval_decided", "tool_executed"]
    assert len(tail(settings, capsys, "--actor", "U_ALICE")) == 2
    assert len(tail(settings, capsys, "--target", "web-03")) == 3
    (line,) = tail(settings, capsys, "--target", "db-01", "--actor", "U_BOB")
    assert "requester=U_BOB" in line
    assert tail(settings, capsys, "--target", "web-03", "--actor", "U_BOB") == []
