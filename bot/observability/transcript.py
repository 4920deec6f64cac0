"""A run's transcript for post-mortems: every message, tool call, decision, timing and token count.

``bot.runs.transcript_source.load_transcript`` reads it from Redis (the run record and state, the
history, the approval records and the run's audit entries, which carry the times) into the
``Transcript`` model defined here; ``to_json``, ``to_markdown`` and ``to_text`` render it. Every text is passed through ``redact``
(the tool-output ``Redactor``) first: a transcript is pasted into documents and threads. Text and
Markdown show control and invisible format characters escaped (``findings_view.terminal_text``).

Each tool step carries its evidence id (``E3``, as the model read it before the output); the run's
last findings (code's verdicts with the model's claims beside them) and the final answer's checked
citations are shown after the summary, and in JSON as ``findings`` (``Findings.as_json``) and
``citations`` (``bot.observability.findings_view``).

Times: the audit log dates the run's start and end, each tool result and each injected reply;
approval records date requests and decisions. Model answers are not dated individually (the
history has no clock), so they are shown in order between dated steps.
"""

from __future__ import annotations

import json
import re
import time
from collections.abc import Callable
from typing import Literal

from pydantic import BaseModel, Field, field_serializer

from agent.findings import Citation, Findings
from agent.types import Usage
from bot.observability.findings_view import citation_lines, findings_lines, terminal_text

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
    evidence: str | None = None  # the result's evidence id (``E3``): what findings and the answer cite


class Step(BaseModel):
    kind: StepKind
    text: str | None = None
    author: str | None = None
    at: float | None = None
    model: str | None = None
    calls: list[CallView] = Field(default_factory=list)
    evidence: str | None = None  # a tool result shown on its own (its call condensed away): its id


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
    # The last ``update_findings`` as shown (code's verdicts, the model's claims beside them) and the
    # final answer's citations, checked (``agent.findings``).
    findings: Findings | None = None
    citations: list[Citation] = Field(default_factory=list)

    @field_serializer("findings")
    def _findings_json(self, findings: Findings | None) -> dict[str, object] | None:
        return findings.as_json() if findings is not None else None  # one machine-readable form


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
    shown = _findings_text(t)
    if shown:  # fenced: the model's statements and quotes stay text in any Markdown viewer
        lines += ["", "## Findings", "", _fence("\n".join(shown))]
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
    return terminal_text("\n".join(lines).rstrip() + "\n")


def _markdown_step(t: Transcript, step: Step, number: int) -> list[str]:
    when = f" ({_offset(t, step.at)})" if step.at is not None else ""
    if step.kind == "request":
        return [f"### {number}. Request from {step.author}{when}", "", _quote(step.text), ""]
    if step.kind == "reply":
        return [f"### {number}. Reply injected from {step.author}{when}", "", _quote(step.text), ""]
    if step.kind == "tool":
        return [f"### {number}. Tool result{_label(step.evidence)}", "", _fence(step.text or ""), ""]
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
            out.append(f"  - Result{_label(call.evidence)}: {call.outcome}{took}{by}{done}")
            out += ["", _indent(_fence(call.output or ""), "    "), ""]
        else:
            out += ["  - Result: none yet", ""]
    if out[-1] != "":
        out.append("")
    return out


def _label(evidence: str | None) -> str:
    """A result's evidence id as the model read it before the output (`` [E3]``), or nothing."""
    return f" [{evidence}]" if evidence else ""


def _findings_text(t: Transcript) -> list[str]:
    lines = findings_lines(t.findings) if t.findings is not None else []
    return lines + citation_lines(t.citations)


def _quote(text: str | None) -> str:
    return "\n".join(f"> {line}" for line in (text or "").splitlines() or [""])


def _indent(text: str, prefix: str) -> str:
    return "\n".join(prefix + line if line else line for line in text.splitlines())


def to_text(t: Transcript) -> str:
    """For a terminal: the summary, then one line (or a few) per step."""
    lines = [f"run {t.run_id}"]
    lines += [f"  {name.lower():<13} {value}" for name, value in _summary_rows(t)]
    lines.append("")
    shown = _findings_text(t)
    if shown:
        lines += [*shown, ""]
    for step in t.steps:
        if step.kind == "system":
            continue
        when = _offset(t, step.at)
        prefix = f"[{when}] " if when else ""
        if step.kind in ("request", "reply"):
            label = "request" if step.kind == "request" else "reply (injected)"
            lines.append(f"{prefix}{label} from {step.author}: {step.text}")
        elif step.kind == "tool":
            lines.append(f"{prefix}tool result{_label(step.evidence)}: {step.text}")
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
                    label = f"[{call.evidence}] " if call.evidence else ""
                    lines.append(f"    {label}{call.outcome}{took}: {(call.output or '').strip()}")
    return terminal_text("\n".join(lines) + "\n")


RENDERERS: dict[str, Callable[[Transcript], str]] = {
    "text": to_text,
    "markdown": to_markdown,
    "json": to_json,
}
