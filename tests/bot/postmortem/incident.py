"""One alert incident's facts written through their real owners: the shared input of these tests."""

from __future__ import annotations

import json
from dataclasses import dataclass, field

import redis

from agent.types import Message, RunStatus
from bot.alerts.store import AlertStore, Group
from bot.keys import Keys
from bot.observability.audit import AuditKind, AuditLog
from bot.runs.record import RunRecord, RunRecords
from tools.safety import Redactor

T0 = 1_790_000_000.0
ROOT_TS = f"{T0:.6f}"
SECRET = "AKIAIOSFODNN7EXAMPLE"
HOSTILE = "<!channel> <@U999> *bold* [click](https://evil.example) ```\n# heading\n- item ~~~~"


@dataclass
class Clock:
    now: float = T0

    def __call__(self) -> float:
        return self.now


def _findings(version: int, h1: str, h2: str, quote: str, conclusion: str) -> dict[str, object]:
    evidence = [{"ref": "E1", "quote": quote, "verified": True, "problem": None, "tool": "disk_usage"}]
    return {
        "conclusion": conclusion,
        "claimed_conclusion": conclusion,
        "confidence": "medium",
        "claimed_confidence": "medium",
        "version": version,
        "hypotheses": [
            {
                "id": "H1",
                "statement": "/var is full of rotated logs",
                "status": h1,
                "claimed_status": h1,
                "evidence": evidence if h1 == "supported" else [],
            },
            {
                "id": "H2",
                "statement": f"a deploy broke it {HOSTILE}",
                "status": h2,
                "claimed_status": h2,
                "evidence": [],
            },
        ],
        "checked": [],
    }


@dataclass
class Incident:
    run_id: str = "run-pm-1"
    channel: str = "C1"
    entries: list[str] = field(default_factory=list)
    group: Group | None = None


def write_incident(client: redis.Redis, keys: Keys, *, status: RunStatus = RunStatus.COMPLETED) -> Incident:
    """An alert run: H2 refuted after a redirect, an approval by a second person after 7 minutes,
    the change run, its check failed, the answer. Texts carry hostile markup and a secret."""
    clock = Clock()
    audit = AuditLog(client, keys, max_len=10_000, clock=clock, redactor=Redactor())
    incident = Incident()
    record = RunRecord(
        run_id=incident.run_id,
        channel="C1",
        thread_ts=ROOT_TS,
        requester="U1",
        text=f"Alert DiskFull on web-03 {HOSTILE} key {SECRET}",
        status=status,
        created_at=T0 + 1,
    )
    RunRecords(client, keys).create(record, Message.user("alert"))
    group = Group(
        id="g1",
        source="alertmanager",
        group_key='{}:{alertname="DiskFull"}',
        channel="C1",
        root_ts=ROOT_TS,
        run_id=incident.run_id,
        status="resolved",
        title=f"DiskFull web-03 {HOSTILE}",
        resolved_at=T0 + 1800,
        view=json.dumps({"severity": "critical"}),
    )
    AlertStore(client, keys).save(group)
    incident.group = group

    def at(offset: float, kind: AuditKind, **fields: object) -> None:
        clock.now = T0 + offset
        incident.entries.append(audit.record(kind, incident.run_id, **fields))

    at(2, AuditKind.RUN_STARTED, requester="U1", channel="C1", thread_ts=ROOT_TS, text=record.text)
    at(
        3,
        AuditKind.TOOL_EXECUTED,
        call_id="c1",
        tool="disk_usage",
        arguments="{}",
        category="read_only",
        outcome="ok",
        output="/var 100%",
    )
    at(
        4,
        AuditKind.FINDINGS_UPDATED,
        version="1",
        conclusion="investigating",
        findings=_findings(1, "open", "open", "", "investigating"),
    )
    at(60, AuditKind.MESSAGE_INJECTED, inbox_id="i1", user="U2", text=f"<@U2> refutes H2 {HOSTILE}")
    at(
        70,
        AuditKind.FINDINGS_UPDATED,
        version="2",
        conclusion="root_cause_found",
        findings=_findings(2, "supported", "refuted", "/var 100%", "root_cause_found"),
    )
    at(
        80,
        AuditKind.APPROVAL_REQUESTED,
        approval_id="a1",
        tool="logrotate_force",
        arguments='{"unit":"nginx"}',
        category="mutating",
        requester="U1",
        target="web-03",
        why="free /var",
    )
    at(
        500,
        AuditKind.APPROVAL_DECIDED,
        approval_id="a1",
        tool="logrotate_force",
        status="approved",
        decided_by="U2",
        decided_at=T0 + 500,
        reason="",
        target="web-03",
    )
    at(
        510,
        AuditKind.TOOL_EXECUTED,
        call_id="c2",
        tool="logrotate_force",
        arguments='{"unit":"nginx"}',
        category="mutating",
        confirmed_by="U2",
        outcome="ok",
        output=f"rotated {SECRET}",
        target="web-03",
    )
    at(
        520,
        AuditKind.CHECK_ENDED,
        call_id="c2",
        tool="disk_usage",
        arguments="{}",
        passed="0",
        attempts="3",
        output="/var 99%",
    )
    at(600, AuditKind.RUN_FINISHED, status="completed", output=f"Root cause: logs.\n~~~\n{HOSTILE}\n{SECRET}")
    return incident
