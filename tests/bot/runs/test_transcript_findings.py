"""``chatops runs show`` and ``chatops audit tail`` show a run's findings as code verified them (issue 30).

A run on the in-process worker whose scripted model reads two results, records findings twice
(first a root cause with nothing verified, then verified and fabricated evidence, a ``supported``
hypothesis resting on fabrications only, an unknown id, a hostile statement) and answers with
citations, some of them false. Each view must show code's verdicts, the model's claims beside them
and the model's text inert.
"""

from __future__ import annotations

import json
import re
from pathlib import Path
from typing import Any

import pytest
import redis

from agent.findings import Checked, Conclusion, Confidence, Findings, Hypothesis, HypothesisStatus
from agent.scripted import ScriptedModel, tool_call
from agent.types import RunStatus
from bot.keys import Keys
from bot.observability.audit import AuditKind
from bot.observability.findings_view import findings_lines, findings_summary
from bot.ops.audit_cli import run_cli as audit_cli
from bot.ops.cli import build_parser
from bot.ops.runs_cli import run_cli as runs_cli
from bot.settings import Settings
from tests.support.harness import Harness, make_options
from tests.support.tools import RecordingTool

DISK = "Filesystem  Size Used Avail Use%\n/dev/sda1   20G  19G  1G   95% /\n"
LOGS = "/var/log/api/api.log.4  1.2G\n/var/log/api/api.log.3  1.1G\n"
# One line that, printed raw, would pass for a verified piece of evidence of its own.
HOSTILE = 'logs" [E1] verified "95% /" (disk_usage) H9 supported'
ANSWER = (
    'Disk is full [E1: "95% /"] because of rotated api logs [E2: "api.log.4 1.2G"]; '
    'see [E9] and [E1: "\x1b[2K\u202efake"].'
)


def findings(*hypotheses: dict[str, Any], conclusion: str, confidence: str) -> Any:
    return tool_call(
        "update_findings", hypotheses=list(hypotheses), conclusion=conclusion, confidence=confidence
    )


def hypothesis(hid: str, status: str, *evidence: tuple[str, str], statement: str = "logs fill /") -> Any:
    return {
        "id": hid,
        "statement": statement,
        "status": status,
        "evidence": [{"ref": r, "quote": q} for r, q in evidence],
    }


SCRIPT = [
    tool_call("disk_usage"),
    tool_call("big_files"),
    findings(
        hypothesis("H1", "supported", ("E2", "api.log.9  9.9G")),
        conclusion="root_cause_found",
        confidence="high",
    ),
    findings(
        hypothesis(
            "H1",
            "supported",
            ("E2", "api.log.4\n 1.2G"),
            ("E1", "api.log.9 9.9G"),
            statement="rotated api logs fill /var/log",
        ),
        hypothesis("H2", "supported", ("E1", "inode table full"), statement="inodes ran out"),
        hypothesis("H3", "refuted", ("E1", "95% /"), statement="the disk is healthy"),
        hypothesis("H4", "open", ("E42", "x"), statement=HOSTILE),
        conclusion="root_cause_found",
        confidence="high",
    ),
    ANSWER,
]


@pytest.fixture
def harness(redis_client: redis.Redis, keys: Keys, queue_name: str, tmp_path: Path) -> Harness:
    tools = [
        RecordingTool("disk_usage", respond=lambda a: DISK),
        RecordingTool("big_files", respond=lambda a: LOGS),
    ]
    return Harness(redis_client, keys, make_options(queue_name), tmp_path, [ScriptedModel(SCRIPT)], tools)


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
    run_id = harness.submit("web-03 is out of disk")
    harness.work()
    assert harness.status(run_id) is RunStatus.COMPLETED
    return run_id


def cli(main: Any, settings: Settings, capsys: pytest.CaptureFixture[str], *argv: str) -> str:
    assert main(build_parser().parse_args(list(argv)), settings) == 0
    return capsys.readouterr().out


def test_runs_show_json_has_the_findings_as_shown_and_the_model_s_claims(
    settings: Settings, run_id: str, capsys: pytest.CaptureFixture[str]
) -> None:
    data = json.loads(cli(runs_cli, settings, capsys, "runs", "show", run_id, "--json"))
    calls = [c for s in data["steps"] for c in s["calls"]]
    assert [(c["tool"], c["evidence"]) for c in calls] == [
        ("disk_usage", "E1"),
        ("big_files", "E2"),
        ("update_findings", "E3"),
        ("update_findings", "E4"),
    ]
    found = data["findings"]
    assert (found["conclusion"], found["claimed_conclusion"]) == ("root_cause_found", "root_cause_found")
    assert (found["confidence"], found["claimed_confidence"]) == ("medium", "high")  # one verified result
    assert found["version"] == 2
    shown = {h["id"]: (h["status"], h["claimed_status"]) for h in found["hypotheses"]}
    assert shown == {
        "H1": ("supported", "supported"),
        "H2": ("open", "supported"),  # only fabricated evidence: not shown as established
        "H3": ("refuted", "refuted"),
        "H4": ("open", "open"),
    }
    evidence = {
        h["id"]: [(e["ref"], e["quote"], e["verified"], e["problem"]) for e in h["evidence"]]
        for h in found["hypotheses"]
    }
    assert evidence["H1"] == [
        ("E2", "api.log.4\n 1.2G", True, None),  # whitespace runs collapsed on both sides
        ("E1", "api.log.9 9.9G", False, "the quote does not occur in E1's output"),
    ]
    assert evidence["H2"] == [("E1", "inode table full", False, "the quote does not occur in E1's output")]
    assert evidence["H4"] == [("E42", "x", False, "E42 names no tool result of this run")]
    assert found["checked"] == []  # listed for a "no fault found" only
    citations = [(c["ref"], c["quote"], c["verified"], c["problem"]) for c in data["citations"]]
    assert citations == [
        ("E1", "95% /", True, None),
        ("E2", "api.log.4 1.2G", True, None),
        ("E9", None, False, "E9 names no tool result of this run"),
        ("E1", "\x1b[2K\u202efake", False, "the quote does not occur in E1's output"),
    ]


def test_runs_show_text_shows_each_verdict_and_keeps_the_model_s_text_inert(
    settings: Settings, run_id: str, capsys: pytest.CaptureFixture[str]
) -> None:
    text = cli(runs_cli, settings, capsys, "runs", "show", run_id)
    block = text[text.index("findings (update 2)") : text.index("\n\n", text.index("findings (update 2)"))]
    assert block.splitlines() == [
        "findings (update 2)",
        "  conclusion    root_cause_found",
        "  confidence    medium (claimed high: high needs verified evidence from 2 different tool results)",
        '  H1 supported: "rotated api logs fill /var/log"',
        '    [E2] verified    "api.log.4\\n 1.2G" (big_files)',
        '    [E1] unverified  "api.log.9 9.9G": the quote does not occur in E1\'s output',
        '  H2 open (claimed supported: no verified evidence): "inodes ran out"',
        '    [E1] unverified  "inode table full": the quote does not occur in E1\'s output',
        '  H3 refuted (struck through: kept, not deleted): "the disk is healthy"',
        '    [E1] verified    "95% /" (disk_usage)',
        '  H4 open: "logs\\" [E1] verified \\"95% /\\" (disk_usage) H9 supported"',
        '    [E42] unverified  "x": E42 names no tool result of this run',
        "citations in the answer",
        '  [E1] verified  "95% /" (disk_usage)',
        '  [E2] verified  "api.log.4 1.2G" (big_files)',
        "  [E9] unverified: E9 names no tool result of this run",
        '  [E1] unverified "\\u001b[2K\\u202efake": the quote does not occur in E1\'s output',
    ]
    # Nothing the model wrote reaches the terminal as a control: not in the findings, not in its answer
    # (an escape sequence there could move the cursor up and overwrite a verdict).
    assert "\x1b" not in text and "\u202e" not in text
    assert text.rstrip().endswith('see [E9] and [E1: "\\u001b[2K\\u202efake"].')
    assert re.search(r"\n    \[E3\] ok in \S+: Findings recorded \(update 1\)", text)


def test_runs_show_markdown_fences_the_findings(
    settings: Settings, run_id: str, capsys: pytest.CaptureFixture[str]
) -> None:
    markdown = cli(runs_cli, settings, capsys, "runs", "show", run_id, "--format", "markdown")
    section = markdown[markdown.index("## Findings") : markdown.index("## Timeline")]
    assert section.startswith("## Findings\n\n~~~\nfindings (update 2)\n") and section.endswith("\n~~~\n\n")
    assert "- Tool call `big_files` (read_only): `{}`\n  - Result [E2]: ok" in markdown
    assert "\x1b" not in markdown and "\u202e" not in markdown


def test_audit_tail_shows_each_update_readably(
    harness: Harness, settings: Settings, run_id: str, capsys: pytest.CaptureFixture[str]
) -> None:
    lines = cli(audit_cli, settings, capsys, "audit", "tail", "--run", run_id, "--kind", "findings_updated")
    first, second = (line.split(f"findings_updated    {run_id[:12]}  ", 1)[1] for line in lines.splitlines())
    assert first == (
        "update=1 conclusion=inconclusive (claimed root_cause_found) confidence=medium (claimed high)"
        ' | H1 open (claimed supported) "logs fill /": E2 unverified'
    )
    assert second == (
        "update=2 conclusion=root_cause_found confidence=medium (claimed high)"
        ' | H1 supported "rotated api logs fill /var/log": E2 verified, E1 unverified'
        ' | H2 open (claimed supported) "inodes ran out": E1 unverified'
        ' | H3 refuted "the disk is healthy": E1 verified'
        ' | H4 open "logs\\" [E1] verified \\"95% /\\" (disk_usage) H9 supported": E42 unverified'
    )
    entries = [e for e in harness.service.audit.entries(run_id) if e.kind is AuditKind.FINDINGS_UPDATED]
    assert [e.json("findings")["conclusion"] for e in entries] == ["inconclusive", "root_cause_found"]  # type: ignore[index]
    executed = [e.fields["evidence"] for e in harness.service.audit.entries(run_id) if "evidence" in e.fields]
    assert executed == ["E1", "E2", "E3", "E4"]  # every tool step's audit entry names its id


def test_no_fault_found_is_written_by_code_with_what_was_checked() -> None:
    refuted = Hypothesis(
        id="H1",
        statement="the disk is full",
        status=HypothesisStatus.REFUTED,
        claimed_status=HypothesisStatus.REFUTED,
    )
    shown = Findings(
        conclusion=Conclusion.NO_FAULT_FOUND,
        claimed_conclusion=Conclusion.NO_FAULT_FOUND,
        confidence=Confidence.MEDIUM,
        claimed_confidence=Confidence.MEDIUM,
        hypotheses=(refuted,),
        checked=(Checked(ref="E1", tool="disk_usage", target="web-03"), Checked(ref="E3", tool="big_files")),
        version=3,
    )
    assert findings_lines(shown) == [
        "findings (update 3)",
        "  conclusion    no_fault_found: No fault found",
        "  confidence    medium",
        '  H1 refuted (struck through: kept, not deleted): "the disk is full"',
        "  checked       E1 disk_usage on web-03, E3 big_files",
    ]
    assert findings_summary(shown) == (
        'update=3 conclusion=no_fault_found confidence=medium | H1 refuted "the disk is full"'
    )
    assert Findings.model_validate(shown.as_json()) == shown  # what the audit stores reads back
