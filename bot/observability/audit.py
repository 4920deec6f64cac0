"""The audit log: one Redis stream holding the story of every run.

Entries are flat (every value a string; structured values as JSON) so ``XRANGE`` in redis-cli
reads naturally. The stream is capped with ``XADD MAXLEN ~ N``: Redis trims whole stream nodes
only, so it never keeps fewer than ``N`` entries and trimming stays cheap.

The stream never expires, so nothing secret may reach it: every value is redacted first (JSON
values string by string, so they stay JSON), then cut to ``FIELD_MAX_CHARS`` (head and tail, with
a marker; ``<field>_cut`` then holds the length before the cut). Redacting before cutting means a
replacement can never push a field past its cap.
"""

from __future__ import annotations

import json
import time
from collections.abc import Callable
from dataclasses import dataclass
from enum import Enum, StrEnum
from typing import Protocol

import redis

from agent.arguments import confirmed_by
from agent.checks import CheckOutcome
from agent.events import ToolEnd
from agent.redis_util import as_text, as_text_dict
from agent.tooling import ToolCategory
from agent.types import RunResult
from bot.keys import Keys
from tools.safety import Redactor, truncate
from tools.targets import local_executor

_OUTPUT_CHARS = 500  # the audit keeps the head and tail of a tool's output; the history keeps all of it
FIELD_MAX_CHARS = 8192
"""The most any one stored field keeps (arguments, outputs, message text): a bounded copy."""


class AuditedApproval(Protocol):
    """What the audit reads of an approval record (``bot.runs.approvals.Approval``, its one owner,
    sits above this package: the audit records approvals without depending on their store)."""

    @property
    def id(self) -> str: ...
    @property
    def run_id(self) -> str: ...
    @property
    def tool(self) -> str: ...
    @property
    def args_json(self) -> str: ...
    @property
    def args_sha256(self) -> str: ...
    @property
    def category(self) -> ToolCategory: ...
    @property
    def requester(self) -> str: ...
    @property
    def status(self) -> Enum: ...
    @property
    def decided_by(self) -> str: ...
    @property
    def decided_at(self) -> float | None: ...
    @property
    def reason(self) -> str: ...
    @property
    def provenance(self) -> str: ...
    @property
    def expires_at(self) -> float: ...
    @property
    def why(self) -> str: ...
    @property
    def target(self) -> str: ...
    @property
    def policy(self) -> str: ...


class AuditKind(StrEnum):
    RUN_STARTED = "run_started"
    MESSAGE_INJECTED = "message_injected"
    APPROVAL_REQUESTED = "approval_requested"
    APPROVAL_DECIDED = "approval_decided"
    TOOL_EXECUTED = "tool_executed"
    TOOL_REFUSED = "tool_refused"  # declined, unknown, outcome unknown: nothing ran
    RUN_SUSPENDED = "run_suspended"
    RUN_FINISHED = "run_finished"
    LEASE_LOST = "lease_lost"
    MESSAGE_UNREAD = "message_unread"  # arrived as the run finished; the model never saw it
    APPROVAL_VOTED = "approval_voted"  # one of several approvals a policy needs (``approved_by``)
    STOP_REQUESTED = "stop_requested"  # someone pressed Stop (``stopped_by``)
    BREAK_GLASS = "break_glass"  # someone declared break-glass (``user``, ``until``)
    ANSWER_FEEDBACK = "answer_feedback"  # a feedback button under a streamed answer (``user``, ``value``)
    RUNNER_REFUSED = "runner_refused"  # a runner refused a job nobody may send it (``target``, ``problem``)
    FINDINGS_UPDATED = "findings_updated"  # update_findings, as shown (``findings``: JSON, ``version``)
    INCIDENT_FORGOTTEN = "incident_forgotten"  # a Forget click on a "Similar:" note (``user``, ``channel``)
    CHECK_ENDED = (
        "check_ended"  # an approved change's check (``call_id``, ``tool``, ``passed``, ``timed_out``)
    )
    UNDO_OFFERED = "undo_offered"  # an executed change's undo, derived when it ran (``approval_id``, ``call_id``, ``offer_id``)
    UNDO_REQUESTED = "undo_requested"  # an Undo click claimed its offer (``user``, ``offer_id``, ``approval_id``, ``call_id``)
    DERIVED_REFUSED = "derived_refused"  # a call refused by ``derived: deny`` before anyone was asked (``provenance``, ``rule``)
    UNDO_EXECUTED = "undo_executed"  # an undo's call ran (``offer_id``, ``call_id``; the action's ``action_run_id``, ``approval_id``, ``action_call_id``)
    BUDGET_REQUESTED = "budget_requested"  # a run reached its token budget: its budget card (``ask_id``, ``budget``, ``spent``, ``cost``, ``extend_by``)
    BUDGET_DECIDED = "budget_decided"  # Extend or Stop on it (``decision``: extended / stopped, ``decided_by``, ``budget``)


@dataclass(frozen=True)
class AuditEntry:
    id: str
    kind: AuditKind
    run_id: str
    at: float
    fields: dict[str, str]

    def json(self, name: str) -> object:
        """A field stored as JSON, decoded."""
        return json.loads(self.fields[name])


def _flat(value: object) -> str:
    if isinstance(value, str):
        return value
    return json.dumps(value, separators=(",", ":"), default=str)


def redacted_value(value: object, redactor: Redactor) -> str:
    """``value`` as stored: redacted; JSON (a structure, or text holding one) stays JSON, and text
    that needed no change is kept byte for byte (so ``args_sha256`` still matches it)."""
    if not isinstance(value, str):
        return _flat(redactor.redact_json(value))
    if value[:1] in ("{", "["):
        try:
            parsed = json.loads(value)
        except ValueError:
            parsed = None
        if isinstance(parsed, dict | list):
            cleaned = redactor.redact_json(parsed)
            return value if cleaned == parsed else _flat(cleaned)
    return redactor.redact(value)


class AuditLog:
    """Append to and read the audit stream."""

    def __init__(
        self,
        redis_client: redis.Redis,
        keys: Keys,
        *,
        max_len: int,
        clock: Callable[[], float] = time.time,
        redactor: Redactor | None = None,
    ) -> None:
        """``redactor``: the bot's (``bot.observability.logs.redactor_for(settings)``, which knows the configured
        secrets); without it only the built-in patterns apply."""
        self._redis = redis_client
        self._key = keys.audit()
        self._max_len = max_len
        self._clock = clock
        self._redactor = redactor or Redactor()

    def record(self, kind: AuditKind, run_id: str, **fields: object) -> str:
        entry = {"kind": kind.value, "run_id": run_id, "at": repr(self._clock())}
        for name, value in fields.items():
            if value is None:
                continue
            stored = redacted_value(value, self._redactor)  # redact first: then the cut is final
            if len(stored) > FIELD_MAX_CHARS:
                entry[f"{name}_cut"] = str(len(stored))
                stored = truncate(stored, FIELD_MAX_CHARS)
            entry[name] = stored
        entry_id = self._redis.xadd(self._key, entry, maxlen=self._max_len, approximate=True)  # type: ignore[arg-type]
        return as_text(entry_id) or ""

    # -- the events of a run ----------------------------------------------------------------------

    def run_started(
        self, run_id: str, *, requester: str, channel: str, thread_ts: str, text: str, follows: str = ""
    ) -> str:
        """``follows``: the thread's earlier run a follow-up continues (the audit links the two)."""
        return self.record(
            AuditKind.RUN_STARTED,
            run_id,
            requester=requester,
            channel=channel,
            thread_ts=thread_ts,
            text=text,
            follows=follows or None,
        )

    def approval_requested(self, approval: AuditedApproval) -> str:
        return self.record(
            AuditKind.APPROVAL_REQUESTED,
            approval.run_id,
            approval_id=approval.id,
            tool=approval.tool,
            arguments=approval.args_json,
            args_sha256=approval.args_sha256,
            category=approval.category.value,
            requester=approval.requester,
            expires_at=approval.expires_at,
            why=approval.why or None,
            target=approval.target or None,
            policy=approval.policy or None,
            # where each argument value came from (``agent.provenance``: requested or derived, E<n>)
            provenance=approval.provenance or None,
        )

    def derived_refused(
        self,
        run_id: str,
        *,
        call_id: str,
        tool: str,
        arguments: str,
        provenance: str,
        rule: str,
        requester: str,
    ) -> str:
        """A derived call the policy's ``derived: deny`` refused: nobody was asked, nothing ran."""
        return self.record(
            AuditKind.DERIVED_REFUSED,
            run_id,
            call_id=call_id,
            tool=tool,
            arguments=arguments,
            provenance=provenance,
            rule=rule,
            requester=requester,
        )

    def approval_voted(
        self, approval: AuditedApproval, user: str, count: int, needed: int, *, repeat: bool
    ) -> str:
        """One person's approval of a record that needs several (``repeat``: they had already)."""
        return self.record(
            AuditKind.APPROVAL_VOTED,
            approval.run_id,
            approval_id=approval.id,
            tool=approval.tool,
            target=approval.target or None,
            approved_by=user,
            count=count,
            needed=needed,
            repeat="1" if repeat else None,
        )

    def approval_decided(self, approval: AuditedApproval) -> str:
        return self.record(
            AuditKind.APPROVAL_DECIDED,
            approval.run_id,
            approval_id=approval.id,
            tool=approval.tool,
            status=approval.status.value,
            decided_by=approval.decided_by,
            decided_at=approval.decided_at,
            reason=approval.reason,
            target=approval.target or None,
        )

    def tool_finished(self, run_id: str, event: ToolEnd, *, requester: str) -> str:
        """A tool call answered: executed (with its outcome and who approved it) or refused (nothing ran)."""
        return self.record(
            AuditKind.TOOL_EXECUTED if event.executed else AuditKind.TOOL_REFUSED,
            run_id,
            call_id=event.call.id,
            tool=event.call.name,
            arguments=event.call.arguments,
            category=event.category.value if event.category else "unknown",
            requester=requester,
            confirmed_by=confirmed_by(event.call.arguments),
            outcome="error" if event.is_error else "ok",
            output=truncate(self._redactor.redact(event.output), _OUTPUT_CHARS),  # redacted, then cut
            duration_seconds=round(event.duration_seconds, 3),
            # Where it ran: the inventory target ("local" without one) and who ran it there; a
            # refused call names the inventory target it asked for, if any (nothing ran anywhere).
            target=event.target or ("local" if event.executed else None),
            executor=(event.executor or local_executor()) if event.executed else None,
            evidence=event.evidence,  # the result's id as the model read it (``E3``): what findings cite
        )

    def check_ended(self, run_id: str, call_id: str, outcome: CheckOutcome, evidence: str | None) -> str:
        """An approved change's check ran (or could not): ``call_id`` is the change's call."""
        return self.record(
            AuditKind.CHECK_ENDED,
            run_id,
            call_id=call_id,
            tool=outcome.call.tool,
            arguments=outcome.call.arguments,
            passed="1" if outcome.passed else "0",
            timed_out="1" if outcome.timed_out else None,
            attempts=outcome.attempts,
            seconds=round(outcome.seconds, 3),
            output=truncate(self._redactor.redact(outcome.output), _OUTPUT_CHARS),
            evidence=evidence,
        )

    def run_finished(self, run_id: str, result: RunResult) -> str:
        return self.record(
            AuditKind.RUN_FINISHED,
            run_id,
            status=result.status.value,
            iterations=result.iterations,
            prompt_tokens=result.usage.prompt_tokens,
            completion_tokens=result.usage.completion_tokens,
            paid_tokens=result.usage.paid_tokens,
            tools_used=result.tools_used,
            output=result.output,
            error=result.error,
        )

    # -- reading ------------------------------------------------------------------------------------

    def entries(self, run_id: str | None = None) -> list[AuditEntry]:
        """All entries (of one run), oldest first. A full scan: for tests, support and ``doctor``."""
        found = []
        for entry_id, raw in self._redis.xrange(self._key) or []:
            fields = as_text_dict(raw)
            if run_id is not None and fields.get("run_id") != run_id:
                continue
            kind = AuditKind(fields.pop("kind"))
            entry_run = fields.pop("run_id")
            at = float(fields.pop("at"))
            found.append(AuditEntry(as_text(entry_id) or "", kind, entry_run, at, fields))
        return found

    def since(self, at: float) -> list[AuditEntry]:
        """The entries written at or after ``at`` (epoch seconds), oldest first: the stream's ids
        start from the time they were added, so only that part of the stream is read."""
        found = []
        for entry_id, raw in self._redis.xrange(self._key, min=f"{max(0, int(at * 1000))}-0") or []:
            fields = as_text_dict(raw)
            kind = AuditKind(fields.pop("kind"))
            entry_run = fields.pop("run_id")
            when = float(fields.pop("at"))
            if when >= at:
                found.append(AuditEntry(as_text(entry_id) or "", kind, entry_run, when, fields))
        return found

    def length(self) -> int:
        return self._redis.xlen(self._key)
