"""A run's transcript for post-mortems: every message, tool call, decision, timing and token count.

``load_transcript`` reads it from Redis (the run record and state, the history, the approval
records and the run's audit entries, which carry the times) into a ``Transcript`` model;
``to_json``, ``to_markdown`` and ``to_text`` render it. Every text is passed through ``redact``
(the tool-output ``Redactor``) first: a transcript is pasted into documents and threads.

Times: the audit log dates the run's start and end, each tool result and each injected reply;
approval records date requests and decisions. Model answers are not dated individually (the
history has no clock), so they are shown in order between dated steps.
"""

from __future__ import annotations

import json
import re
import time
from collections.abc import Callable, Iterable
from typing import Literal

from pydantic import BaseModel, Field

from agent.types import Message, Usage
from bot.errors import RunNotFoundError
from bot.runs.approvals import Approval
from bot.runs.audit import AuditEntry, AuditKind
from bot.runs.record import RunRecord
from bot.runs.service import RunService

Redact = Callable[[str], str]
StepKind = Literal["system", "request", "reply", "assistant", "tool"]


class ApprovalView(BaseModel):
    id: str
    call_id: str
    tool: str
    category: str
    status: str
    requested_at: float
    decided_at: float | None = None
    decided_by: str = ""
    reason: str = ""

    @property
    def waited_seconds(self) -> float | None:
        return None if self.decided_at is None else max(0.0, self.decided_at - self.requested_at)


class CallView(BaseModel):
    id: str
    tool: str
    arguments: str
    category: str | None = None
    outcome: str = "pending"  # ok | error | refused | pending (no result yet)
    output: str | None = None
    duration_seconds: float | None = None
    confirmed_by: str | None = None
    finished_at: float | None = None
    approval: ApprovalView | None = None


class Step(BaseModel):
    kind: StepKind
    text: str | None = None
    author: str | None = None
    at: float | None = None
    model: str | None = None
    calls: list[CallView] = Field(default_factory=list)


class Transcript(BaseModel):
    run_id: str
    channel: str
    thread_ts: str
    requester: str
    status: str
    created_at: float
    started_at: float | None = None
    finished_at: float | None = None
    active_seconds: float = 0.0
    iterations: int = 0
    usage: Usage = Field(default_factory=Usage)
    model: str | None = None
    tools_used: list[str] = Field(default_factory=list)
    output: str | None = None
    error: str | None = None
    steps: list[Step] = Field(default_factory=list)
    approvals: list[ApprovalView] = Field(default_factory=list)


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
    transcript.steps = _steps(record, history, approvals, audit, redact)
    return transcript


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
            steps.append(Step(kind="tool", text=redact(message.content or ""), author=message.name))
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


def to_json(transcript: Transcript) -> str:
    return transcript.model_dump_json(indent=2)


def stamp(epoch: float | None) -> str:
    return time.strftime("%Y-%m-%d %H:%M:%S UTC", time.gmtime(epoch)) if epoch is not None else "-"


def seconds(value: float | None) -> str:
    if value is None:
        return "-"
    if value < 60:
        return f"{value:.1f}s"
    minutes, rest = divmod(int(value), 60)
    return f"{minutes}m{rest:02d}s" if minutes < 60 else f"{minutes // 60}h{minutes % 60:02d}m"


def _offset(transcript: Transcript, at: float | None) -> str:
    origin = transcript.started_at or transcript.created_at
    return f"+{seconds(at - origin)}" if at is not None else ""


def tokens_line(usage: Usage) -> str:
    cached = f" ({usage.cache_read_tokens:,} from cache)" if usage.cache_read_tokens else ""
    return f"{usage.prompt_tokens:,} prompt{cached}, {usage.completion_tokens:,} completion, {usage.paid_tokens:,} paid"


def _pretty(arguments: str) -> str:
    try:
        return json.dumps(json.loads(arguments or "{}"), ensure_ascii=False, sort_keys=True)
    except ValueError:
        return arguments


def _fence(text: str) -> str:
    """A ``~~~`` fence longer than any run of tildes in ``text`` (Markdown and Slack both keep it whole)."""
    longest = max((len(run) for run in re.findall(r"~+", text)), default=0)
    marks = "~" * max(3, longest + 1)
    return f"{marks}\n{text}\n{marks}"


def _decision(approval: ApprovalView) -> str:
    by = f" by {approval.decided_by}" if approval.decided_by else ""
    waited = f" after {seconds(approval.waited_seconds)}" if approval.waited_seconds is not None else ""
    reason = f" ({approval.reason})" if approval.reason and approval.status != "approved" else ""
    return f"{approval.status}{by}{waited}{reason}"


def _summary_rows(t: Transcript) -> list[tuple[str, str]]:
    took = seconds(t.finished_at - (t.started_at or t.created_at)) if t.finished_at else "-"
    rows = [
        ("Status", t.status + (f": {t.error}" if t.error else "")),
        ("Channel", f"{t.channel} (thread {t.thread_ts})"),
        ("Requested by", t.requester),
        ("Created", stamp(t.created_at)),
        ("Finished", f"{stamp(t.finished_at)} (took {took}, {seconds(t.active_seconds)} working)"),
        ("Iterations", str(t.iterations)),
        ("Tokens", tokens_line(t.usage)),
        ("Model", t.model or "-"),
        ("Tools used", ", ".join(t.tools_used) or "none"),
    ]
    if not t.finished_at:
        rows[4] = ("Finished", "not yet")
    return rows


def to_markdown(t: Transcript) -> str:
    """A document for a post-mortem: summary table, timeline, approvals."""
    lines = [f"# Run {t.run_id}", "", "| | |", "|---|---|"]
    lines += [f"| {name} | {value.replace('|', '/')} |" for name, value in _summary_rows(t)]
    lines += ["", "## Timeline", ""]
    number = 0
    for step in t.steps:
        if step.kind == "system":
            continue
        number += 1
        lines += _markdown_step(t, step, number)
    if t.approvals:
        lines += [
            "## Approvals",
            "",
            "| Tool | Category | Decision | Requested | Decided |",
            "|---|---|---|---|---|",
        ]
        for a in t.approvals:
            lines.append(
                f"| `{a.tool}` | {a.category} | {_decision(a)} | {stamp(a.requested_at)} | {stamp(a.decided_at)} |"
            )
        lines.append("")
    return "\n".join(lines).rstrip() + "\n"


def _markdown_step(t: Transcript, step: Step, number: int) -> list[str]:
    when = f" ({_offset(t, step.at)})" if step.at is not None else ""
    if step.kind == "request":
        return [f"### {number}. Request from {step.author}{when}", "", _quote(step.text), ""]
    if step.kind == "reply":
        return [f"### {number}. Reply injected from {step.author}{when}", "", _quote(step.text), ""]
    if step.kind == "tool":
        return [f"### {number}. Tool result", "", _fence(step.text or ""), ""]
    out = [f"### {number}. Assistant" + (f" ({step.model})" if step.model else ""), ""]
    if step.text:
        out += [step.text, ""]
    for call in step.calls:
        category = f" ({call.category})" if call.category else ""
        out.append(f"- Tool call `{call.tool}`{category}: `{_pretty(call.arguments)}`")
        if call.approval is not None:
            out.append(f"  - Approval: {_decision(call.approval)}")
        if call.outcome != "pending":
            took = f", {seconds(call.duration_seconds)}" if call.duration_seconds is not None else ""
            by = f", confirmed by {call.confirmed_by}" if call.confirmed_by else ""
            done = f" at {_offset(t, call.finished_at)}" if call.finished_at is not None else ""
            out.append(f"  - Result: {call.outcome}{took}{by}{done}")
            out += ["", _indent(_fence(call.output or ""), "    "), ""]
        else:
            out += ["  - Result: none yet", ""]
    if out[-1] != "":
        out.append("")
    return out


def _quote(text: str | None) -> str:
    return "\n".join(f"> {line}" for line in (text or "").splitlines() or [""])


def _indent(text: str, prefix: str) -> str:
    return "\n".join(prefix + line if line else line for line in text.splitlines())


def to_text(t: Transcript) -> str:
    """For a terminal: the summary, then one line (or a few) per step."""
    lines = [f"run {t.run_id}"]
    lines += [f"  {name.lower():<13} {value}" for name, value in _summary_rows(t)]
    lines.append("")
    for step in t.steps:
        if step.kind == "system":
            continue
        when = _offset(t, step.at)
        prefix = f"[{when}] " if when else ""
        if step.kind in ("request", "reply"):
            label = "request" if step.kind == "request" else "reply (injected)"
            lines.append(f"{prefix}{label} from {step.author}: {step.text}")
        elif step.kind == "tool":
            lines.append(f"{prefix}tool result: {step.text}")
        else:
            if step.text:
                lines.append(f"{prefix}assistant: {step.text}")
            for call in step.calls:
                lines.append(f"  call {call.tool} {_pretty(call.arguments)}")
                if call.approval is not None:
                    lines.append(f"    approval: {_decision(call.approval)}")
                if call.outcome != "pending":
                    took = (
                        f" in {seconds(call.duration_seconds)}" if call.duration_seconds is not None else ""
                    )
                    lines.append(f"    {call.outcome}{took}: {(call.output or '').strip()}")
    return "\n".join(lines) + "\n"


RENDERERS: dict[str, Callable[[Transcript], str]] = {
    "text": to_text,
    "markdown": to_markdown,
    "json": to_json,
}
