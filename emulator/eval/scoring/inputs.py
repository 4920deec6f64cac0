"""What the scorer reads of a run, as plain data.

* **findings**: the run's final findings as ``agent.findings.Findings.as_json`` writes them
  (``RunResult.findings``, ``chatops runs show --json``), or the newest ``findings_updated`` audit
  entry's (``final_findings``). Statuses and conclusion are read *as shown*, after code's
  corrections: a hypothesis counts as supported only when code verified its evidence.
* **audit entries**: the run's audit stream, each entry a flat mapping as Redis stores it
  (``kind``, ``run_id``, ``at`` and the fields, every value a string; structured values JSON).
  The tool calls (``tool_executed`` / ``tool_refused``) and the approvals (``approval_decided``)
  come from there (``bot.observability.audit``).
* **usage**, iterations and seconds for the efficiency report.

Anything the scorer cannot read faithfully (findings of another shape, a findings entry the
audit had to cut) is a ``ScoringInputError``, never a zero: a score must mean what it says.
"""

from __future__ import annotations

import json
from collections.abc import Mapping, Sequence
from dataclasses import dataclass, field
from typing import Any

from pydantic import BaseModel, ConfigDict, ValidationError

from agent.arguments import CONFIRMED_BY
from agent.tooling import APPROVED_PLAN, ToolCategory
from bot.observability.audit import AuditEntry, AuditKind
from bot.runs.approvals import ApprovalStatus
from emulator.eval.errors import ScoringInputError

TOOL_EXECUTED = AuditKind.TOOL_EXECUTED.value
TOOL_REFUSED = AuditKind.TOOL_REFUSED.value
APPROVAL_DECIDED = AuditKind.APPROVAL_DECIDED.value
APPROVAL_REQUESTED = AuditKind.APPROVAL_REQUESTED.value
FINDINGS_UPDATED = AuditKind.FINDINGS_UPDATED.value
RUN_FINISHED = AuditKind.RUN_FINISHED.value
APPROVED = ApprovalStatus.APPROVED.value

CHANGES = frozenset({ToolCategory.MUTATING.value, ToolCategory.DESTRUCTIVE.value})
"""Categories of calls that change something."""


class _Shown(BaseModel):
    model_config = ConfigDict(extra="ignore", frozen=True)


class EvidenceView(_Shown):
    ref: str
    quote: str
    verified: bool


class HypothesisView(_Shown):
    id: str
    statement: str
    status: str
    evidence: tuple[EvidenceView, ...] = ()
    cause: str | None = None
    """The hypothesis's structured ``target:kind:name``, when the model gave one (``update_findings``)."""


class FindingsView(_Shown):
    conclusion: str
    confidence: str
    hypotheses: tuple[HypothesisView, ...] = ()

    @property
    def supported(self) -> tuple[HypothesisView, ...]:
        return tuple(h for h in self.hypotheses if h.status == "supported")

    def verified_quotes(self) -> list[str]:
        return [e.quote for h in self.hypotheses for e in h.evidence if e.verified]


def read_findings(data: Mapping[str, Any] | None) -> FindingsView | None:
    """The findings as shown, or ``None`` when the run recorded none."""
    if data is None:
        return None
    try:
        return FindingsView.model_validate(data)
    except ValidationError as error:
        raise ScoringInputError(
            f"the findings are not the runtime's shape: {error.errors()[0]['msg']}"
        ) from None


def final_findings(audit: Sequence[Mapping[str, str]]) -> dict[str, Any] | None:
    """The newest findings of the run's ``findings_updated`` entries (highest version)."""
    newest: tuple[int, dict[str, Any]] | None = None
    for entry in audit:
        if entry.get("kind") != FINDINGS_UPDATED:
            continue
        if "findings_cut" in entry:
            raise ScoringInputError(
                f"the audit cut findings version {entry.get('version')} ({entry['findings_cut']} characters): "
                "score the run's own findings (RunResult.findings) instead"
            )
        findings = json.loads(entry["findings"])
        version = int(entry.get("version") or findings.get("version") or 0)
        if newest is None or version >= newest[0]:
            newest = (version, findings)
    return None if newest is None else newest[1]


@dataclass(frozen=True)
class CallRecord:
    """One tool call the run made, as the audit recorded its end."""

    tool: str
    target: str
    category: str
    executed: bool
    raw_arguments: str
    arguments: Mapping[str, Any] | None  # None: the audit cut them, or they are not a JSON object

    @property
    def changes(self) -> bool:
        """A change: mutating or destructive (and, to be safe, any executed call of unknown category)."""
        return self.category in CHANGES or (self.executed and self.category != ToolCategory.READ_ONLY.value)

    @property
    def confirmed_by(self) -> str:
        value = (self.arguments or {}).get(CONFIRMED_BY)
        return value if isinstance(value, str) else ""

    def planned_paths(self) -> list[str] | None:
        """The files of the dry run the approver saw (``approved_plan``), ``None`` when there is none
        or it cannot be read."""
        plan = (self.arguments or {}).get(APPROVED_PLAN)
        if not isinstance(plan, str) or not plan:
            return None
        try:
            files = json.loads(plan).get("files")
        except (ValueError, AttributeError):
            return None
        if not isinstance(files, list):
            return None
        paths = [item.get("path") for item in files if isinstance(item, dict)]
        return [p for p in paths if isinstance(p, str)] if len(paths) == len(files) else None

    def describe(self) -> str:
        return f"{self.tool} on {self.target}"


def _arguments(entry: Mapping[str, str]) -> Mapping[str, Any] | None:
    if "arguments_cut" in entry:
        return None
    try:
        parsed = json.loads(entry.get("arguments") or "{}")
    except ValueError:
        return None
    return parsed if isinstance(parsed, dict) else None


def calls_from_audit(audit: Sequence[Mapping[str, str]]) -> list[CallRecord]:
    """Every answered tool call of the run, in order: executed, or refused (nothing ran)."""
    calls = []
    for entry in audit:
        kind = entry.get("kind")
        if kind not in (TOOL_EXECUTED, TOOL_REFUSED):
            continue
        calls.append(
            CallRecord(
                tool=entry.get("tool", ""),
                target=entry.get("target") or "local",
                category=entry.get("category", "unknown"),
                executed=kind == TOOL_EXECUTED,
                raw_arguments=entry.get("arguments", ""),
                arguments=_arguments(entry),
            )
        )
    return calls


@dataclass(frozen=True)
class ApprovalRecord:
    """A person's approval of one execution, as ``approval_decided`` recorded it."""

    tool: str
    target: str
    decided_by: str


def approvals_from_audit(audit: Sequence[Mapping[str, str]]) -> list[ApprovalRecord]:
    return [
        ApprovalRecord(
            tool=entry.get("tool", ""),
            target=entry.get("target") or "local",
            decided_by=entry.get("decided_by", ""),
        )
        for entry in audit
        if entry.get("kind") == APPROVAL_DECIDED and entry.get("status") == APPROVED
    ]


@dataclass(frozen=True)
class CardRecord:
    """A call put before a person, as ``approval_requested`` recorded it: flagged or not as derived
    (``agent.provenance``: a value nobody asked for, taken from what the bot read)."""

    tool: str
    target: str
    arguments: Mapping[str, Any]
    derived: tuple[str, ...]  # the derived values, as the card's first line shows them

    def describe(self) -> str:
        return f"{self.tool} on {self.target}"


def cards_from_audit(audit: Sequence[Mapping[str, str]]) -> list[CardRecord]:
    """Every approval card the run posted, in order, with the values it flagged as derived."""
    cards = []
    for entry in audit:
        if entry.get("kind") != APPROVAL_REQUESTED:
            continue
        try:
            provenance = json.loads(entry.get("provenance") or "[]")
        except ValueError:
            raise ScoringInputError(
                f"approval {entry.get('approval_id')}: its provenance is not JSON"
            ) from None
        derived = tuple(
            str(v.get("value")) for v in provenance if isinstance(v, dict) and v.get("origin") == "derived"
        )
        cards.append(
            CardRecord(
                tool=entry.get("tool", ""),
                target=entry.get("target") or "local",
                arguments=_arguments(entry) or {},
                derived=derived,
            )
        )
    return cards


def flat(entry: AuditEntry) -> dict[str, str]:
    """An entry read with ``AuditLog.entries`` as the flat mapping Redis stores."""
    return {"kind": entry.kind.value, "run_id": entry.run_id, "at": repr(entry.at), **entry.fields}


@dataclass(frozen=True)
class RunObservation:
    """Everything the scorer reads of one run."""

    findings: Mapping[str, Any] | None
    audit: Sequence[Mapping[str, str]]
    usage: Mapping[str, int] = field(default_factory=dict)  # agent.types.Usage's fields
    iterations: int | None = None  # None: the audit's run_finished says
    seconds: float = 0.0

    @classmethod
    def from_audit(cls, audit: Sequence[Mapping[str, str]], **rest: Any) -> RunObservation:
        """A run known only by its audit stream: its findings are the newest recorded."""
        return cls(findings=final_findings(audit), audit=audit, **rest)
