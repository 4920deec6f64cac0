"""A finished run's postmortem draft, built from facts only (pure: no Redis, no Slack, no clock).

Every timeline line is one audit entry (``bot.observability.audit``) or one Slack message the bot
posted (the alert thread's root): ``Line.source`` says which and ``Line.ref`` names it (the entry
id, the message ts), so a reader (and the tests) can check each line against what backs it. The
"to discuss" list holds questions derived from those facts (a failed check, a long wait, a refuted
hypothesis), never lessons. Every text that came from people, tools, models or alert senders is
passed through ``redact`` here; the renderers (``bot.postmortem.render``) make it inert.
"""

from __future__ import annotations

import json
from collections.abc import Callable, Sequence
from dataclasses import asdict, dataclass, field, replace

from agent.findings import Conclusion, Findings, HypothesisStatus
from bot.alerts.store import Group
from bot.observability.audit import AuditEntry, AuditKind
from bot.postmortem.undo_state import Undo, UndoLedger
from bot.runs.record import RunRecord

Permalink = Callable[[str, str], str | None]
"""``(channel, ts)`` to the message's Slack permalink, or ``None`` when the bot has none."""

BOT = "chatops"
LONG_WAIT_SECONDS = 5 * 60  # an approval that waited longer is a question for the review
TEXT_CHARS = 300  # of a quoted text in a timeline line (the audit keeps more)


@dataclass(frozen=True)
class Line:
    """One fact: when (epoch, shown in UTC), who, what, and what backs it."""

    at: float
    actor: str
    what: str
    source: str  # "audit" (ref: the entry id) or "message" (ref: the message ts)
    ref: str
    link: str  # a Slack permalink where the bot has one, else "" (the ref is the link)


@dataclass(frozen=True)
class Cause:
    statement: str
    evidence: tuple[tuple[str, str, str], ...]  # (ref, tool, quote): verified evidence only


@dataclass(frozen=True)
class Action:
    """A change the run made (or tried): a mutating or destructive tool call that ran."""

    at: float
    tool: str
    target: str
    arguments: str
    approved_by: str
    outcome: str  # ok | error
    check: str  # passed | failed | timed out | "" (none recorded)
    audit_id: str
    call_id: str
    undo: Undo = field(default_factory=Undo)  # its undo as the audit tells it (``bot.postmortem.undo_state``)


@dataclass(frozen=True)
class Impact:
    kind: str  # alert | question
    title: str  # the alert's title, or what was asked
    requester: str
    severity: str = ""
    status: str = ""  # the alert group's: firing | resolved
    started_at: float = 0.0  # the alert thread's root message, or the run's creation
    resolved_at: float = 0.0
    duration_seconds: float | None = None


@dataclass(frozen=True)
class Postmortem:
    run_id: str
    channel: str
    thread_ts: str
    title: str
    status: str
    conclusion: str
    confidence: str
    root_cause: tuple[Cause, ...]
    answer: str
    impact: Impact
    timeline: tuple[Line, ...]
    actions: tuple[Action, ...]
    to_discuss: tuple[str, ...]
    thread_link: str = ""

    def as_json(self) -> dict[str, object]:
        return asdict(self)


@dataclass
class _Builder:
    record: RunRecord
    redact: Callable[[str], str]
    permalink: Permalink
    lines: list[Line] = field(default_factory=list)
    questions: list[str] = field(default_factory=list)
    actions: list[Action] = field(default_factory=list)

    def text(self, value: str, limit: int = TEXT_CHARS) -> str:
        flat = " ".join(self.redact(value).split())
        return flat if len(flat) <= limit else flat[: limit - 1] + "…"

    def audit(self, entry: AuditEntry, actor: str, what: str, link: str = "") -> None:
        self.lines.append(Line(entry.at, self.text(actor, 80), what, "audit", entry.id, link))

    def ask(self, question: str) -> None:
        if question not in self.questions:
            self.questions.append(question)


def build_postmortem(
    record: RunRecord,
    entries: Sequence[AuditEntry],
    group: Group | None = None,
    *,
    redact: Callable[[str], str],
    permalink: Permalink = lambda channel, ts: None,
    now: float | None = None,
) -> Postmortem:
    """The postmortem of ``record`` from its audit ``entries`` (oldest first) and its alert ``group``;
    ``now``: when the draft is made (an undo offered until before then has expired; ``None``: not judged).
    Entries of other runs count only where they tell the undo of one of its changes."""
    b = _Builder(record, redact, permalink)
    ledger = UndoLedger(record.run_id, entries, now)
    if group is not None and group.root_ts:
        _alert_lines(b, group)
    findings: Findings | None = None
    answer, status = "", record.status.value
    requested: dict[str, float] = {}
    statuses: dict[str, HypothesisStatus] = {}
    for entry in entries:
        if entry.run_id != record.run_id or entry.kind in _UNDO_KINDS:
            told = ledger.line(entry)  # an undo's fact, or another run's entry (then None: skipped)
            if told is not None:
                b.audit(entry, told[0], b.text(told[1]))
            continue
        f = entry.fields
        if entry.kind is AuditKind.RUN_STARTED:
            link = permalink(record.channel, record.message_ts) if record.message_ts else None
            follows = f" (follows run {f['follows']})" if f.get("follows") else ""
            b.audit(
                entry,
                f.get("requester", ""),
                f"run started: {b.text(f.get('text', ''))}{follows}",
                link or "",
            )
        elif entry.kind is AuditKind.MESSAGE_INJECTED:
            b.audit(
                entry,
                f.get("user", ""),
                f"replied in the thread, read by the run: {b.text(f.get('text', ''))}",
            )
        elif entry.kind is AuditKind.MESSAGE_UNREAD:
            user = f.get("user", "")
            b.audit(entry, user, f"replied as the run ended, not read by it: {b.text(f.get('text', ''))}")
            b.ask(
                f"{b.text(user, 80)}'s reply came as the run ended and the run never read it: was it acted on?"
            )
        elif entry.kind is AuditKind.APPROVAL_REQUESTED:
            requested[f.get("approval_id", "")] = entry.at
            why = f" because {b.text(f['why'])}" if f.get("why") else ""
            b.audit(entry, BOT, f"asked approval to run {_call(b, f)}{why}")
        elif entry.kind is AuditKind.APPROVAL_VOTED:
            b.audit(
                entry,
                f.get("approved_by", ""),
                f"approved {_call(b, f)} ({f.get('count', '?')} of {f.get('needed', '?')} approvals)",
            )
        elif entry.kind is AuditKind.APPROVAL_DECIDED:
            _decided(b, entry, requested.get(f.get("approval_id", "")))
        elif entry.kind in (AuditKind.TOOL_EXECUTED, AuditKind.TOOL_REFUSED):
            _tool(b, entry)
        elif entry.kind is AuditKind.CHECK_ENDED:
            _check(b, entry)
        elif entry.kind is AuditKind.FINDINGS_UPDATED:
            findings = _findings(b, entry, statuses) or findings
        elif entry.kind is AuditKind.STOP_REQUESTED:
            who = f.get("stopped_by", "")
            b.audit(entry, who, "pressed Stop")
            b.ask(f"{b.text(who, 80)} stopped the run: what made it go wrong?")
        elif entry.kind is AuditKind.LEASE_LOST:
            b.audit(entry, BOT, f"worker {b.text(f.get('worker', ''), 80)} lost the run's lease")
        elif entry.kind is AuditKind.ANSWER_FEEDBACK:
            b.audit(entry, f.get("user", ""), f"rated the answer: {b.text(f.get('value', ''), 40)}")
        elif entry.kind is AuditKind.RUN_FINISHED:
            status = f.get("status", status)
            answer = b.redact(f.get("output", ""))
            error = f" ({b.text(f['error'])})" if f.get("error") else ""
            b.audit(entry, BOT, f"run ended: {status}{error}; answer: {b.text(answer)}")
    if findings is None:
        state = record.state()
        findings = state.findings if state is not None else None
    b.actions = [replace(action, undo=_undo(b, ledger.of(action.call_id))) for action in b.actions]
    return _assemble(b, group, findings, answer, status)


def _undo(b: _Builder, undo: Undo) -> Undo:
    return replace(undo, requested_by=b.text(undo.requested_by, 80), problem=b.text(undo.problem))


_UNDO_KINDS = frozenset({AuditKind.UNDO_OFFERED, AuditKind.UNDO_REQUESTED, AuditKind.UNDO_EXECUTED})


def _call(b: _Builder, f: dict[str, str]) -> str:
    target = f" on {b.text(f['target'], 80)}" if f.get("target") else ""
    return f"{b.text(f.get('tool', '?'), 80)}{target} {b.text(f.get('arguments', ''), 200)}".rstrip()


def _minutes(seconds: float) -> str:
    return f"{seconds / 60:.1f} min" if seconds >= 60 else f"{seconds:.0f} s"


def _decided(b: _Builder, entry: AuditEntry, requested_at: float | None) -> None:
    f = entry.fields
    state = f.get("status", "?")
    who = f.get("decided_by", "") or BOT
    decided_at = float(f["decided_at"]) if f.get("decided_at") else entry.at
    waited = decided_at - requested_at if requested_at is not None else None
    after = f" after {_minutes(waited)}" if waited is not None else ""
    reason = f" ({b.text(f['reason'])})" if f.get("reason") and state != "approved" else ""
    b.audit(entry, who, f"{state} {_call(b, f)}{after}{reason}")
    if waited is not None and waited >= LONG_WAIT_SECONDS:
        b.ask(
            f"The approval of {b.text(f.get('tool', '?'), 80)} waited {_minutes(waited)}: who could decide, and were they reached?"
        )
    if state not in ("approved", "superseded"):
        b.ask(
            f"The approval of {b.text(f.get('tool', '?'), 80)} ended {state}{reason}: what was done instead?"
        )


def _tool(b: _Builder, entry: AuditEntry) -> None:
    f = entry.fields
    if f.get("category") == "read_only":
        return  # reads are the investigation's steps (the run's transcript), not the incident's facts
    call = _call(b, f)
    if entry.kind is AuditKind.TOOL_REFUSED:
        b.audit(entry, BOT, f"did not run {call}: {b.text(f.get('output', ''))}")
        return
    approved = f.get("confirmed_by", "")
    by = f", approved by {b.text(approved, 80)}" if approved else ""
    outcome = f.get("outcome", "?")
    b.audit(entry, BOT, f"ran {call}{by}: {outcome}: {b.text(f.get('output', ''))}")
    b.actions.append(
        Action(
            entry.at,
            b.text(f.get("tool", "?"), 80),
            b.text(f.get("target", ""), 80),
            b.text(f.get("arguments", ""), 500),
            b.text(approved, 80),
            outcome,
            "",
            entry.id,
            f.get("call_id", ""),
        )
    )
    if outcome != "ok":
        b.ask(f"{b.text(f.get('tool', '?'), 80)} failed when it ran: why, and what did it leave behind?")


def _check(b: _Builder, entry: AuditEntry) -> None:
    f = entry.fields
    passed, timed_out = f.get("passed") == "1", f.get("timed_out") == "1"
    verdict = "passed" if passed else "timed out" if timed_out else "failed"
    b.audit(entry, BOT, f"check {_call(b, f)} {verdict}: {b.text(f.get('output', ''))}")
    b.actions = [replace(a, check=verdict) if a.call_id == f.get("call_id") else a for a in b.actions]
    if not passed:
        b.ask(f"The check after the change ({b.text(f.get('tool', '?'), 80)}) {verdict}: why?")


def _findings(b: _Builder, entry: AuditEntry, statuses: dict[str, HypothesisStatus]) -> Findings | None:
    try:
        findings = Findings.model_validate(json.loads(entry.fields.get("findings", "")))
    except ValueError:
        return None  # not what this code wrote: no fact to tell
    for h in findings.hypotheses:
        if statuses.get(h.id) is h.status:
            continue
        before = statuses.get(h.id)
        statuses[h.id] = h.status
        change = f"{before.value} → {h.status.value}" if before else h.status.value
        b.audit(entry, BOT, f"hypothesis {b.text(h.id, 20)} {change}: {b.text(h.statement)}")
        if h.status is HypothesisStatus.REFUTED:
            b.ask(
                f"Hypothesis {b.text(h.id, 20)} ({b.text(h.statement, 120)}) was refuted: what pointed to it?"
            )
        if h.claimed_status is HypothesisStatus.SUPPORTED and h.status is not HypothesisStatus.SUPPORTED:
            b.ask(
                f"Hypothesis {b.text(h.id, 20)} was claimed supported without verified evidence: what was missing?"
            )
    return findings


def _alert_lines(b: _Builder, group: Group) -> None:
    title = b.text(group.title or group.group_key, 200)
    at = _ts(group.root_ts)
    link = b.permalink(group.channel, group.root_ts) or ""
    b.lines.append(
        Line(at, b.text(group.source, 40), f"alert fired: {title}", "message", group.root_ts, link)
    )
    if group.status == "resolved" and group.resolved_at:
        what = f"alert resolved: {title} (the thread's first message, as updated)"
        b.lines.append(
            Line(group.resolved_at, b.text(group.source, 40), what, "message", group.root_ts, link)
        )


def _ts(ts: str) -> float:
    try:
        return float(ts)
    except ValueError:
        return 0.0


def _assemble(
    b: _Builder, group: Group | None, findings: Findings | None, answer: str, status: str
) -> Postmortem:
    record = b.record
    causes = tuple(
        Cause(
            b.text(h.statement),
            tuple(
                (b.text(e.ref, 20), b.text(e.tool or "", 80), b.text(e.quote)) for e in h.verified_evidence
            ),
        )
        for h in (findings.hypotheses if findings else ())
        if h.status is HypothesisStatus.SUPPORTED and h.verified_evidence
    )
    conclusion = findings.conclusion.value if findings else "none recorded"
    if findings is None or findings.conclusion is not Conclusion.ROOT_CAUSE_FOUND:
        b.ask(f"The run ended without a verified root cause ({conclusion}): what would have found it?")
    if group is not None:
        view = _view(group)
        resolved = group.resolved_at if group.status == "resolved" else 0.0
        started = _ts(group.root_ts)
        impact = Impact(
            "alert",
            b.text(group.title or group.group_key, 200),
            b.text(record.requester, 80),
            b.text(str(view.get("severity", "")), 40),
            group.status,
            started,
            resolved,
            resolved - started if resolved and started else None,
        )
        if group.status != "resolved":
            b.ask("The alert was still firing when this draft was made: is the incident over?")
        title = f"Postmortem: {impact.title}"
    else:
        impact = Impact(
            "question", b.text(record.text, 200), b.text(record.requester, 80), started_at=record.created_at
        )
        title = f"Postmortem: {b.text(record.text, 80)}"
    return Postmortem(
        run_id=record.run_id,
        channel=record.channel,
        thread_ts=record.thread_ts,
        title=title,
        status=status,
        conclusion=conclusion,
        confidence=findings.confidence.value if findings else "",
        root_cause=causes,
        answer=answer,
        impact=impact,
        timeline=tuple(sorted(b.lines, key=lambda line: line.at)),
        actions=tuple(b.actions),
        to_discuss=tuple(b.questions),
        thread_link=b.permalink(record.channel, record.thread_ts) or "",
    )


def _view(group: Group) -> dict[str, object]:
    try:
        view = json.loads(group.view) if group.view else {}
    except ValueError:
        return {}
    return view if isinstance(view, dict) else {}
