"""A run's transcript assembled from what the run engine stores: the run record and state, the
history, the approval records and the run's audit entries (which carry the times).

The model and its renderings are ``bot.observability.transcript``; this is the one reader that
knows where each part lives.
"""

from __future__ import annotations

from collections.abc import Iterable

from agent.findings import Citation, Findings
from agent.types import Message
from bot.errors import RunNotFoundError
from bot.observability.audit import AuditEntry, AuditKind
from bot.observability.transcript import ApprovalView, CallView, Redact, Step, Transcript
from bot.runs.approvals import Approval
from bot.runs.record import RunRecord
from bot.runs.service import RunService


def load_transcript(service: RunService, run_id: str, redact: Redact = lambda text: text) -> Transcript:
    """The transcript of ``run_id`` (raises ``RunNotFoundError`` when the record is gone)."""
    record = service.get(run_id)
    if record is None:
        raise RunNotFoundError(run_id)
    state = record.state()
    history = service.history(run_id)
    approvals = [_approval(a) for a in service.approvals.for_run(run_id)]
    audit = service.audit.entries(run_id)
    transcript = Transcript(
        run_id=run_id,
        channel=record.channel,
        thread_ts=record.thread_ts,
        requester=record.requester,
        status=record.status.value,
        created_at=record.created_at,
        started_at=_first_at(audit, AuditKind.RUN_STARTED),
        finished_at=_first_at(audit, AuditKind.RUN_FINISHED),
        approvals=approvals,
    )
    if state is not None:
        transcript.active_seconds = state.active_seconds
        transcript.iterations = state.iteration
        transcript.usage = state.usage
        transcript.model = state.model
        transcript.tools_used = list(state.tools_used)
        transcript.output = redact(state.output) if state.output else None
        transcript.error = redact(state.error) if state.error else None
        transcript.findings = _findings(state.findings, redact) if state.findings else None
        transcript.citations = [_citation(c, redact) for c in state.citations]
    transcript.steps = _steps(record, history, approvals, audit, redact)
    return transcript


def _findings(findings: Findings, redact: Redact) -> Findings:
    """The findings with the model's text redacted (a transcript is pasted into documents); the
    verdicts stay code's, made on what the model read."""
    hypotheses = tuple(
        h.model_copy(
            update={
                "statement": redact(h.statement),
                "evidence": tuple(e.model_copy(update={"quote": redact(e.quote)}) for e in h.evidence),
            }
        )
        for h in findings.hypotheses
    )
    return findings.model_copy(update={"hypotheses": hypotheses})


def _citation(citation: Citation, redact: Redact) -> Citation:
    return citation.model_copy(update={"quote": redact(citation.quote) if citation.quote else citation.quote})


def _approval(approval: Approval) -> ApprovalView:
    return ApprovalView(
        id=approval.id,
        call_id=approval.call_id,
        tool=approval.tool,
        category=approval.category.value,
        status=approval.status.value,
        requested_at=approval.created_at,
        decided_at=approval.decided_at,
        decided_by=approval.decided_by,
        reason=approval.reason,
    )


def _first_at(entries: Iterable[AuditEntry], kind: AuditKind) -> float | None:
    return next((e.at for e in entries if e.kind is kind), None)


def _steps(
    record: RunRecord,
    history: list[Message],
    approvals: list[ApprovalView],
    audit: list[AuditEntry],
    redact: Redact,
) -> list[Step]:
    results = {m.tool_call_id: m for m in history if m.role == "tool" and m.tool_call_id}
    by_call = {a.call_id: a for a in approvals}
    tool_audit = {
        e.fields.get("call_id", ""): e
        for e in audit
        if e.kind in (AuditKind.TOOL_EXECUTED, AuditKind.TOOL_REFUSED)
    }
    injected_at = {e.fields.get("inbox_id", ""): e.at for e in audit if e.kind is AuditKind.MESSAGE_INJECTED}
    answered: set[str] = set()
    steps: list[Step] = []
    for message in history:
        if message.role == "system":
            steps.append(Step(kind="system", text=redact(message.content or "")))
        elif message.role == "user":
            inbox_id = message.meta.get("inbox_id")
            steps.append(
                Step(
                    kind="reply" if inbox_id else "request",
                    text=redact(message.content or ""),
                    author=str(message.meta.get("slack_user") or record.requester),
                    at=injected_at.get(inbox_id) if inbox_id else _first_at(audit, AuditKind.RUN_STARTED),
                )
            )
        elif message.role == "assistant":
            calls = []
            for call in message.tool_calls:
                answered.add(call.id)
                calls.append(_call(call.id, call.name, call.arguments, results, by_call, tool_audit, redact))
            text = redact(message.content) if message.content else None
            steps.append(Step(kind="assistant", text=text, model=message.meta.get("model"), calls=calls))
        elif message.tool_call_id not in answered:  # a result without its call (condensed away)
            steps.append(
                Step(
                    kind="tool",
                    text=redact(message.content or ""),
                    author=message.name,
                    evidence=message.meta.get("evidence"),
                )
            )
    return steps


def _call(
    call_id: str,
    name: str,
    arguments: str,
    results: dict[str, Message],
    approvals: dict[str, ApprovalView],
    audit: dict[str, AuditEntry],
    redact: Redact,
) -> CallView:
    view = CallView(id=call_id, tool=name, arguments=redact(arguments), approval=approvals.get(call_id))
    result = results.get(call_id)
    entry = audit.get(call_id)
    if result is not None:
        meta = result.meta
        view.output = redact(result.content or "")
        view.category = meta.get("category")
        view.duration_seconds = meta.get("duration")
        view.confirmed_by = meta.get("confirmed_by")
        view.evidence = meta.get("evidence")
        view.outcome = "error" if view.output.startswith("Error") else "ok"
        if "arguments" in meta:  # as it ran: confirmed_by included
            view.arguments = redact(str(meta["arguments"]))
    if entry is not None:
        view.finished_at = entry.at
        view.category = view.category or entry.fields.get("category")
        if entry.kind is AuditKind.TOOL_REFUSED:
            view.outcome = "refused"
    return view


# -- rendering ---------------------------------------------------------------------------------------
