"""``chatops runs show``: the transcript of a run with tool calls, an approval and an injected reply."""

from __future__ import annotations

import json
import re

import pytest

from agent.types import RunStatus
from bot.ops.cli import build_parser
from bot.ops.runs_cli import run_cli
from bot.settings import Settings
from tests.support.harness import Harness

EXPECTED_MARKDOWN = """\
# Run RUN

| | |
|---|---|
| Status | completed |
| Channel | C1 (thread 100.1) |
| Requested by | U_REQ |
| Created | TIME |
| Finished | TIME (took S, S working) |
| Iterations | 3 |
| Tokens | PROMPT prompt, COMPLETION completion, PAID paid |
| Model | plan |
| Tools used | check_health, restart_service |

## Timeline

### 1. Request from U_REQ (+S)

> plan: check_health restart_service

### 2. Assistant (plan)

- Tool call `check_health` (read_only): `{"step": 0}`
  - Result [E1]: ok, S at +S

    ~~~
    check_health ok
    ~~~

### 3. Assistant (plan)

- Tool call `restart_service` (mutating): `{"confirmed_by": "U_APPROVER", "step": 1}`
  - Approval: approved by U_APPROVER after S
  - Result [E2]: ok, S, confirmed by U_APPROVER at +S

    ~~~
    restart_service ok
    ~~~

### 4. Reply injected from U_ALICE (+S)

> also look at the disk, the db password=hunter2hunter2 is in the vault

### 5. Assistant (plan)

done: restart_service ok

## Approvals

| Tool | Category | Decision | Requested | Decided |
|---|---|---|---|---|
| `restart_service` | mutating | approved by U_APPROVER after S | TIME | TIME |
"""


@pytest.fixture
def settings(harness: Harness, redis_url: str) -> Settings:
    return Settings(
        _env_file=None,  # type: ignore[call-arg]
        redis_url=redis_url,
        chatops_redis_prefix=harness.keys.prefix,
        chatops_queue=harness.options.queue_name,
    )


@pytest.fixture
def run_id(harness: Harness) -> str:
    """A finished run: a read-only call, an approved mutating call, then a reply read before the answer."""
    run_id = harness.submit("plan: check_health restart_service")
    harness.work()
    (approval,) = harness.service.approvals.for_run(run_id)
    harness.service.lifecycle.decide(approval.id, user="U_APPROVER", approve=True)
    reply = "also look at the disk, the db password=hunter2hunter2 is in the vault"
    harness.service.deliver("C1", "100.1", user="U_ALICE", text=reply, ts="100.5")
    harness.work()
    assert harness.status(run_id) is RunStatus.COMPLETED
    return run_id


def show(settings: Settings, capsys: pytest.CaptureFixture[str], *argv: str) -> tuple[int, str, str]:
    status = run_cli(build_parser().parse_args(["runs", "show", *argv]), settings)
    out, err = capsys.readouterr()
    return status, out, err


def normalize(markdown: str, run_id: str) -> str:
    text = markdown.replace(run_id, "RUN")
    text = re.sub(r"\d{4}-\d\d-\d\d \d\d:\d\d:\d\d UTC", "TIME", text)
    return re.sub(r"\d+\.\ds\b", "S", text)


def test_runs_show_markdown_tells_the_whole_run(
    harness: Harness, settings: Settings, run_id: str, capsys: pytest.CaptureFixture[str]
) -> None:
    status, markdown, _ = show(settings, capsys, run_id[:8], "--format", "markdown")  # a prefix is enough
    assert status == 0
    state = harness.service.get(run_id)
    assert state is not None
    usage = json.loads(harness.redis.hget(harness.keys.run(run_id), "usage") or "{}")
    expected = (
        EXPECTED_MARKDOWN.replace("PROMPT", f"{usage['prompt_tokens']:,}")
        .replace("COMPLETION", f"{usage['completion_tokens']:,}")
        .replace("PAID", f"{usage['prompt_tokens'] + usage['completion_tokens']:,}")
        .replace("password=hunter2hunter2", "password=[REDACTED]")
    )
    assert normalize(markdown, run_id) == expected
    assert "hunter2hunter2" not in markdown


def test_runs_show_json_has_every_step_with_its_timing(
    settings: Settings, run_id: str, capsys: pytest.CaptureFixture[str]
) -> None:
    status, out, _ = show(settings, capsys, run_id, "--format", "json")
    assert status == 0
    data = json.loads(out)
    assert [s["kind"] for s in data["steps"]] == [
        "system",
        "request",
        "assistant",
        "assistant",
        "reply",
        "assistant",
    ]
    calls = [c for s in data["steps"] for c in s["calls"]]
    assert [(c["tool"], c["outcome"], c["confirmed_by"], c["evidence"]) for c in calls] == [
        ("check_health", "ok", None, "E1"),
        ("restart_service", "ok", "U_APPROVER", "E2"),  # the id continues across the approval
    ]
    assert data["findings"] is None and data["citations"] == []  # the model kept no findings
    assert all(c["finished_at"] >= data["started_at"] for c in calls)
    (approval,) = data["approvals"]
    assert approval["status"] == "approved" and approval["decided_at"] >= approval["requested_at"]
    assert data["steps"][4]["author"] == "U_ALICE" and data["steps"][4]["at"] is not None
    assert data["iterations"] == 3 and data["usage"]["prompt_tokens"] > 0


def test_runs_show_text_is_one_line_per_step(
    settings: Settings, run_id: str, capsys: pytest.CaptureFixture[str]
) -> None:
    status, text, _ = show(settings, capsys, run_id)
    assert status == 0
    assert f"run {run_id}\n  status        completed\n" in text
    assert '  call restart_service {"confirmed_by": "U_APPROVER", "step": 1}\n' in text
    assert "    approval: approved by U_APPROVER after " in text
    assert re.search(r"\n    \[E1\] ok in \S+: check_health ok\n", text)  # the id the model read
    assert re.search(r"\n    \[E2\] ok in \S+: restart_service ok\n", text)
    assert "reply (injected) from U_ALICE: also look at the disk, the db password=[REDACTED]" in text
    assert text.rstrip().endswith("assistant: done: restart_service ok")


def test_a_run_waiting_for_approval_shows_the_pending_call(
    harness: Harness, settings: Settings, capsys: pytest.CaptureFixture[str]
) -> None:
    run_id = harness.submit("plan: restart_service")
    harness.work()
    status, markdown, _ = show(settings, capsys, run_id, "--format", "markdown")
    assert status == 0
    assert "| Status | awaiting_approval |" in markdown and "| Finished | not yet |" in markdown
    assert "  - Approval: pending\n  - Result: none yet\n" in markdown


def test_an_unknown_run_is_an_error_that_says_so(
    settings: Settings, capsys: pytest.CaptureFixture[str]
) -> None:
    status, out, err = show(settings, capsys, "0123456789abcdef")
    assert status == 1 and out == ""
    assert err == "error: no run 0123456789abcdef (never created, or its retention expired)\n"
