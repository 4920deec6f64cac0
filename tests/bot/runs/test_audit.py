"""The audit stream: readable entries per run, trimmed approximately and never below its length."""

from __future__ import annotations

import base64
import json
from urllib.parse import quote

import redis

from agent.events import ToolEnd
from agent.tooling import ToolCategory
from agent.types import RunResult, RunStatus, ToolCall, Usage
from bot.keys import Keys
from bot.observability.audit import FIELD_MAX_CHARS, AuditKind, AuditLog
from bot.observability.logs import redactor_for
from bot.runs.approvals import Approval
from bot.settings import Settings
from tools.safety import REDACTED


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


# -- secrets never at rest: redacted first, then bounded -------------------------------------------

DB_PASSWORD = "Corr3ct-h0rse/" + "Batt3ry=Stapl3"  # concatenated: keeps secret scanners quiet
LLM_KEY = "sk-live-" + "0123456789abcdefABCDEF"


def _approval(args_json: str) -> Approval:
    return Approval(
        id="a1",
        run_id="r1",
        call_id="c1",
        tool="db_query",
        args_json=args_json,
        args_sha256="0" * 64,
        category=ToolCategory.MUTATING,
        requester="U1",
        created_at=1.0,
        expires_at=2.0,
    )


def _raw_stream(redis_client: redis.Redis, keys: Keys) -> str:
    return repr(redis_client.xrange(keys.audit()))


def test_known_secrets_are_stored_redacted_in_every_form(redis_client: redis.Redis, keys: Keys) -> None:
    settings = Settings(  # type: ignore[call-arg]
        _env_file=None,
        redis_url=f"redis://:{quote(DB_PASSWORD, safe='')}@cache.internal:6379/0",
        llm_api_key=LLM_KEY,
    )
    audit = AuditLog(redis_client, keys, max_len=1000, redactor=redactor_for(settings))
    encoded = base64.b64encode(b"user:" + DB_PASSWORD.encode()).decode()
    arguments = json.dumps({"dsn": f"postgres://app@db/{DB_PASSWORD}", "auth": encoded, "n": 3})
    audit.approval_requested(_approval(arguments))
    audit.record(AuditKind.MESSAGE_INJECTED, "r1", text=f"use {quote(LLM_KEY, safe='')} please")
    call = ToolCall(id="c1", name="env", arguments="{}")
    end = ToolEnd(call, ToolCategory.READ_ONLY, f"KEY={LLM_KEY.encode().hex()}", False, 0.1)
    audit.tool_finished("r1", end, requester="U1")
    audit.run_finished(
        "r1", RunResult(status=RunStatus.COMPLETED, iterations=1, output=f"pw is {DB_PASSWORD}")
    )
    stored = _raw_stream(redis_client, keys)
    for secret in (DB_PASSWORD, LLM_KEY):
        for form in (
            secret,
            quote(secret, safe=""),
            secret.encode().hex(),
            base64.b64encode(secret.encode()).decode(),
        ):
            assert form not in stored
    assert "y:" + DB_PASSWORD[:4] not in stored and encoded not in stored
    arguments_stored = audit.entries("r1")[0].json("arguments")  # still JSON
    assert isinstance(arguments_stored, dict)
    assert arguments_stored["dsn"] == f"postgres://app@db/{REDACTED}" and arguments_stored["n"] == 3
    assert REDACTED in arguments_stored["auth"]  # the part that encodes "user:" alone may stay


def test_without_a_configured_redactor_the_built_in_patterns_still_apply(
    redis_client: redis.Redis, keys: Keys
) -> None:
    audit = AuditLog(redis_client, keys, max_len=1000)
    audit.approval_requested(_approval(json.dumps({"password": "hunter2hunter2", "max_tokens": 4096})))
    audit.run_finished("r1", RunResult(status=RunStatus.COMPLETED, iterations=1, output="Tokens: 48,213"))
    stored = _raw_stream(redis_client, keys)
    assert "hunter2hunter2" not in stored
    requested, finished = audit.entries("r1")
    assert requested.json("arguments") == {"password": REDACTED, "max_tokens": 4096}
    assert finished.fields["output"] == "Tokens: 48,213"


def test_oversized_fields_are_stored_as_bounded_copies_that_say_they_were_cut(
    redis_client: redis.Redis, keys: Keys
) -> None:
    audit = AuditLog(redis_client, keys, max_len=1000)
    huge = json.dumps({"blob": "A" * 3_000_000})
    audit.approval_requested(_approval(huge))
    audit.record(AuditKind.MESSAGE_INJECTED, "r1", text="token=1 " * 5000)
    requested, injected = audit.entries("r1")
    assert len(requested.fields["arguments"]) <= FIELD_MAX_CHARS
    assert requested.fields["arguments_cut"] == str(len(huge))
    assert "characters cut" in requested.fields["arguments"]
    assert len(injected.fields["text"]) <= FIELD_MAX_CHARS  # redaction ran first: the cut is final
    assert injected.fields["text_cut"] == str(len("token=1 " * 5000))
