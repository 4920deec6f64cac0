"""What a finished run leaves in the incident memory (``bot.memory``): a step of its report.

Built from the run's record (channel, thread, requester, question), its result (the findings:
conclusion, supported hypotheses and their *verified* quotes only; the answer), its history (the
targets its calls ran on; the mutating and destructive calls that ran, with who approved each:
``confirmed_by``, which only the loop writes) and, for an alert's run, the alert's name, labels and
fingerprints (``AlertFacts``, from the alerts' seam). Every text goes through the run's redactor
here, before anything is stored. Whether the channel is private is asked of ``ChannelFacts``
(Slack's ``conversations.info`` in production); unknown counts as private (fail closed).
"""

from __future__ import annotations

import logging
from collections.abc import Callable, Sequence
from dataclasses import dataclass, field
from typing import Protocol

from agent.arguments import confirmed_by
from agent.findings import HypothesisStatus
from agent.tooling import ToolCategory
from agent.types import Message, RunResult
from bot.memory.incident import MAX_ITEMS, MAX_TEXT, Action, Incident, Supported
from bot.runs.record import RunRecord

log = logging.getLogger(__name__)

_ACTING = {ToolCategory.MUTATING.value, ToolCategory.DESTRUCTIVE.value}
_ARGUMENT_CHARS = 300


class ChannelFacts(Protocol):
    """What the memory must know of a channel, from the chat transport."""

    def is_private(self, channel: str) -> bool:
        """True unless the channel is known to be public (fail closed)."""
        ...

    def permalink(self, channel: str, ts: str) -> str:
        """A link to the thread, or ""."""
        ...


@dataclass(frozen=True)
class AlertFacts:
    name: str
    labels: dict[str, str] = field(default_factory=dict)
    fingerprints: tuple[str, ...] = ()


def capture(
    record: RunRecord,
    result: RunResult,
    history: Sequence[Message],
    *,
    at: float,
    redact: Callable[[str], str],
    facts: ChannelFacts | None,
    alert: AlertFacts | None = None,
) -> Incident:
    def clean(text: str, limit: int = MAX_TEXT) -> str:
        return redact(text or "")[:limit]

    private, link = True, ""
    if facts is not None:
        try:
            private = facts.is_private(record.channel)
            link = facts.permalink(record.channel, record.thread_ts)
        except Exception:
            log.exception(
                "run %s: the channel's kind is unknown; its incident counts as private", record.run_id
            )
            private = True
    supported: list[Supported] = []
    findings = result.findings
    if findings is not None:
        for hypothesis in findings.hypotheses:
            if hypothesis.status is HypothesisStatus.SUPPORTED:
                quotes = tuple(clean(e.quote, 500) for e in hypothesis.verified_evidence[:3])
                supported.append(
                    Supported(clean(hypothesis.statement), quotes, clean(hypothesis.cause or "", 200))
                )
    targets: dict[str, None] = {}
    actions: list[Action] = []
    calls = {c.id: c for m in history if m.role == "assistant" for c in m.tool_calls}
    for message in history:
        if message.role != "tool" or message.meta.get("refused"):
            continue
        target = message.meta.get("target") or ""
        if target:
            targets[clean(target, 200)] = None
        call = calls.get(message.tool_call_id or "")
        if call is not None and message.meta.get("category") in _ACTING:
            ran_with = message.meta.get("arguments") or call.arguments
            approver = message.meta.get("confirmed_by") or confirmed_by(ran_with)
            actions.append(
                Action(
                    clean(call.name, 200),
                    clean(target, 200),
                    clean(approver or "", 200),
                    clean(ran_with, _ARGUMENT_CHARS),
                )
            )
    labels = {
        clean(k, 100): clean(v, 200) for k, v in list((alert.labels if alert else {}).items())[:MAX_ITEMS]
    }
    return Incident(
        id=record.run_id,
        channel=record.channel,
        private=private,
        thread_ts=record.thread_ts,
        link=link,
        at=at,
        requester=record.requester,
        question=clean(record.text),
        alert_name=clean(alert.name, 200) if alert else "",
        labels=labels,
        fingerprints=tuple(alert.fingerprints[:MAX_ITEMS]) if alert else (),
        targets=tuple(list(targets)[:MAX_ITEMS]),
        status=result.status.value,
        conclusion=findings.conclusion.value if findings is not None else "",
        answer=clean(result.output or ""),
        supported=tuple(supported[:MAX_ITEMS]),
        actions=tuple(actions[:MAX_ITEMS]),
    )
