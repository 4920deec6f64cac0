"""The postmortem draft from facts written through their real owners (a real Redis)."""

from __future__ import annotations

import json
import re

import redis

from bot.keys import Keys
from bot.observability.audit import AuditKind, AuditLog
from bot.postmortem.facts import Postmortem, build_postmortem
from bot.postmortem.render import fenced, inert, to_json, to_markdown
from bot.postmortem.source import load_postmortem
from bot.runs.record import RunRecords
from tests.bot.postmortem.incident import ROOT_TS, SECRET, T0, write_incident
from tools.safety import Redactor


def _postmortem(client: redis.Redis, keys: Keys, permalinks: bool = False) -> Postmortem:
    audit = AuditLog(client, keys, max_len=10_000)

    def permalink(channel: str, ts: str) -> str | None:
        return f"https://team.slack.com/archives/{channel}/p{ts.replace('.', '')}" if permalinks else None

    return load_postmortem(client, keys, audit, "run-pm-1", redact=Redactor().redact, permalink=permalink)


def test_every_timeline_line_is_one_audit_entry_or_message_in_order_with_its_actor(
    redis_client: redis.Redis, keys: Keys
) -> None:
    incident = write_incident(redis_client, keys)
    pm = _postmortem(redis_client, keys)
    entries = {e.id: e for e in AuditLog(redis_client, keys, max_len=10_000).entries("run-pm-1")}
    for line in pm.timeline:  # nothing the audit stream or a message does not back
        if line.source == "audit":
            assert line.ref in entries and entries[line.ref].at == line.at
        else:
            assert line.source == "message" and line.ref == ROOT_TS == incident.group.root_ts  # type: ignore[union-attr]
    facts = [(line.actor, line.what.split(":")[0]) for line in pm.timeline]
    assert facts == [
        ("alertmanager", "alert fired"),
        ("U1", "run started"),
        ("chatops", "hypothesis H1 open"),
        ("chatops", "hypothesis H2 open"),
        ("U2", "replied in the thread, read by the run"),
        ("chatops", "hypothesis H1 open → supported"),
        ("chatops", "hypothesis H2 open → refuted"),
        ("chatops", 'asked approval to run logrotate_force on web-03 {"unit"'),
        ("U2", "approved logrotate_force on web-03 after 7.0 min"),
        ("chatops", 'ran logrotate_force on web-03 {"unit"'),
        ("chatops", "check disk_usage {} failed"),
        ("chatops", "run ended"),
        ("alertmanager", "alert resolved"),
    ]
    assert "after 7.0 min" in pm.timeline[8].what and "approved by U2" in pm.timeline[9].what
    assert all(
        e.fields.get("category") != "read_only" or e.id not in {line.ref for line in pm.timeline}
        for e in entries.values()
    )
    [action] = pm.actions
    assert (action.tool, action.target, action.approved_by, action.check) == (
        "logrotate_force",
        "web-03",
        "U2",
        "failed",
    )
    assert pm.impact.duration_seconds == 1800 and pm.impact.severity == "critical"
    assert [c.statement for c in pm.root_cause] == ["/var is full of rotated logs"]
    assert pm.root_cause[0].evidence == (("E1", "disk_usage", "/var 100%"),)
    discuss = "\n".join(pm.to_discuss)
    assert "check after the change (disk_usage) failed: why?" in discuss
    assert "waited 7.0 min" in discuss and "Hypothesis H2" in discuss and "refuted" in discuss


def test_the_markdown_links_each_line_and_keeps_hostile_text_inert_and_secrets_out(
    redis_client: redis.Redis, keys: Keys
) -> None:
    write_incident(redis_client, keys)
    pm = _postmortem(redis_client, keys, permalinks=True)
    md = to_markdown(pm)
    assert SECRET not in md and SECRET not in to_json(pm)
    answer_at = md.index("## The run's answer")
    body, answer = md[:answer_at], md[answer_at:]
    assert not re.search(r"<[!@]", body)  # no mention, broadcast or HTML outside the fence
    assert not re.search(r"(?<!\\)\*bold(?<!\\)\*", body) and "```" not in body
    headings = [line for line in body.splitlines() if line.startswith("#")]
    assert headings == [
        f"# {inert(pm.title)}",
        "## Summary",
        "## Impact",
        "## Timeline (UTC)",
        "## Actions taken",
        "## To discuss",
    ]
    assert (
        re.findall(r"\]\(<([^>]*)>\)", body)
        == [f"https://team.slack.com/archives/C1/p{ROOT_TS.replace('.', '')}"] * 3
    )  # the thread link and the alert's two lines (an alert run has no mention): the only links
    timeline = body[body.index("## Timeline") : body.index("## Actions")].splitlines()[2:-1]
    assert len(timeline) == len(pm.timeline)
    for line, fact in zip(timeline, pm.timeline, strict=True):
        assert fact.ref in line or fact.link in line
    fence = answer.splitlines()[2]
    assert (
        fence.startswith("~~~~~") and answer.count(fence.removesuffix("text")) == 2
    )  # nothing closes it early


def test_inert_and_fenced_show_text_as_itself() -> None:
    assert inert("<!here> *x* [a](b)\n# h") == r"\<\!here\> \*x\* \[a\]\(b\) \# h"
    assert fenced("a\n~~~\nb").splitlines()[0] == "~~~~text"


def test_json_is_the_same_facts(redis_client: redis.Redis, keys: Keys) -> None:
    write_incident(redis_client, keys)
    pm = _postmortem(redis_client, keys)
    data = json.loads(to_json(pm))
    assert [line["ref"] for line in data["timeline"]] == [line.ref for line in pm.timeline]
    assert data["actions"][0]["check"] == "failed" and data["impact"]["kind"] == "alert"


def test_a_hostile_audit_writer_cannot_add_lines_to_another_run_or_break_it(
    redis_client: redis.Redis, keys: Keys
) -> None:
    write_incident(redis_client, keys)
    audit = AuditLog(redis_client, keys, max_len=10_000)
    audit.record(AuditKind.APPROVAL_DECIDED, "other-run", status="approved", decided_by="UEVIL", tool="rm")
    audit.record(AuditKind.FINDINGS_UPDATED, "run-pm-1", version="9", findings="{not json")
    pm = _postmortem(redis_client, keys)
    assert "UEVIL" not in to_markdown(pm) and len(pm.timeline) == 13
    record = RunRecords(redis_client, keys).get("run-pm-1")
    assert record is not None
    alone = build_postmortem(record, audit.entries("other-run"), None, redact=str)
    assert [line.ref for line in alone.timeline] == []  # another run's entries are not this run's facts
    assert alone.impact.kind == "question" and alone.impact.started_at == T0 + 1
