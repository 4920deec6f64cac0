"""The audit stream: readable entries per run, trimmed approximately and never below its length."""

from __future__ import annotations

import json

import redis

from agent.events import ToolEnd
from agent.keys import Keys
from agent.tooling import ToolCategory
from agent.types import RunResult, RunStatus, ToolCall, Usage
from bot.audit import AuditKind, AuditLog


def test_entries_tell_a_runs_story(redis_client: redis.Redis, keys: Keys) -> None:
    audit = AuditLog(redis_client, keys, max_len=1000)
    audit.run_started("r1", requester="U1", channel="C1", thread_ts="1.0", text="restart web")
    audit.run_started("r2", requester="U2", channel="C1", thread_ts="2.0", text="other")
    call = ToolCall(id="c1", name="restart", arguments=json.dumps({"service": "web", "confirmed_by": "U9"}))
    audit.tool_finished("r1", ToolEnd(call, ToolCategory.MUTATING, "restarted", False, 1.5), requester="U1")
    audit.run_finished(
        "r1", RunResult(status=RunStatus.COMPLETED, iterations=2, usage=Usage(prompt_tokens=10))
    )
    entries = audit.entries("r1")
    assert [e.kind for e in entries] == [
        AuditKind.RUN_STARTED,
        AuditKind.TOOL_EXECUTED,
        AuditKind.RUN_FINISHED,
    ]
    tool = entries[1].fields
    assert tool["confirmed_by"] == "U9" and tool["requester"] == "U1" and tool["category"] == "mutating"
    assert tool["outcome"] == "ok" and float(tool["duration_seconds"]) == 1.5
    assert entries[2].fields["status"] == "completed" and entries[2].fields["iterations"] == "2"


def test_trimming_is_approximate_and_never_below_the_length(redis_client: redis.Redis, keys: Keys) -> None:
    audit = AuditLog(redis_client, keys, max_len=100)
    for n in range(1000):
        audit.record(AuditKind.MESSAGE_INJECTED, "r1", n=n)
        assert audit.length() >= min(n + 1, 100)
    assert 100 <= audit.length() < 1000
    assert audit.entries()[-1].fields["n"] == "999"
