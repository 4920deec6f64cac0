"""A run's findings: its hypotheses, the evidence each rests on, and its conclusion, as shown.

The model keeps them with the built-in ``update_findings`` tool (``agent.findings_tool``); code
decides what is shown as established (``agent.findings_tool.verified_findings``):

* a piece of evidence is ``verified`` only when its ``ref`` names a tool result of this run that
  may be cited and its ``quote`` occurs in that result's output as the model read it;
* a hypothesis claimed ``supported`` with no verified evidence is shown ``open``;
* ``root_cause_found`` without a supported hypothesis (or ``no_fault_found`` with one, or with
  nothing checked) is shown ``inconclusive``;
* ``high`` confidence needs verified evidence from two different tool results: in the supported
  hypotheses, or, for ``no_fault_found``, in the refuted ones (what ruled the faults out).

Every field the model claimed is kept beside what is shown (``claimed_*``), for the evaluation
harness and for people who want to see both. These are plain data: stored in ``RunState``,
rendered by the bot, read back by ``chatops runs show --json``.
"""

from __future__ import annotations

from enum import StrEnum

from pydantic import BaseModel, ConfigDict, Field


class HypothesisStatus(StrEnum):
    OPEN = "open"
    SUPPORTED = "supported"
    REFUTED = "refuted"


class Conclusion(StrEnum):
    INVESTIGATING = "investigating"
    ROOT_CAUSE_FOUND = "root_cause_found"
    NO_FAULT_FOUND = "no_fault_found"
    INCONCLUSIVE = "inconclusive"


class Confidence(StrEnum):
    LOW = "low"
    MEDIUM = "medium"
    HIGH = "high"


class Evidence(BaseModel):
    """One piece of evidence as shown: ``verified`` is code's verdict, ``problem`` says why not."""

    model_config = ConfigDict(frozen=True)

    ref: str
    quote: str
    verified: bool
    problem: str | None = None
    tool: str | None = None  # the cited result's tool (only when the ref names a result of the run)
    call_id: str | None = None  # the cited result's call: the step a link points to
    target: str | None = None


class Hypothesis(BaseModel):
    model_config = ConfigDict(frozen=True)

    id: str
    statement: str
    status: HypothesisStatus
    claimed_status: HypothesisStatus
    evidence: tuple[Evidence, ...] = ()
    cause: str | None = None  # the model's structured ``target:kind:name``, checked for its form only

    @property
    def verified_evidence(self) -> tuple[Evidence, ...]:
        return tuple(e for e in self.evidence if e.verified)


class Checked(BaseModel):
    """One tool result the run read: what "no fault found" says was checked."""

    model_config = ConfigDict(frozen=True)

    ref: str
    tool: str
    target: str | None = None


class Findings(BaseModel):
    """The run's findings as shown to people (after code's corrections), with the model's claims."""

    model_config = ConfigDict(frozen=True)

    conclusion: Conclusion
    claimed_conclusion: Conclusion
    confidence: Confidence
    claimed_confidence: Confidence
    hypotheses: tuple[Hypothesis, ...] = ()
    # A ``no_fault_found`` claim's: the run's citable results when the update was made (what was
    # checked); empty for any other claim.
    checked: tuple[Checked, ...] = ()
    version: int = Field(default=1, ge=1)  # counts the run's updates: a renderer shows the newest

    def hypothesis(self, hypothesis_id: str) -> Hypothesis | None:
        return next((h for h in self.hypotheses if h.id == hypothesis_id), None)

    def as_json(self) -> dict[str, object]:
        """The machine-readable form (``chatops runs show --json``, the audit's ``findings_updated``,
        the evaluation harness): ``status`` and ``conclusion`` as shown, the model's claims beside
        them; ``Findings.model_validate`` reads it back."""
        return {
            "conclusion": self.conclusion.value,
            "claimed_conclusion": self.claimed_conclusion.value,
            "confidence": self.confidence.value,
            "claimed_confidence": self.claimed_confidence.value,
            "version": self.version,
            "hypotheses": [
                {
                    "id": h.id,
                    "statement": h.statement,
                    "status": h.status.value,
                    "claimed_status": h.claimed_status.value,
                    "evidence": [
                        {
                            "ref": e.ref,
                            "quote": e.quote,
                            "verified": e.verified,
                            "problem": e.problem,
                            "tool": e.tool,
                        }
                        for e in h.evidence
                    ],
                    **({"cause": h.cause} if h.cause is not None else {}),
                }
                for h in self.hypotheses
            ],
            "checked": [{"ref": c.ref, "tool": c.tool, "target": c.target} for c in self.checked],
        }


class Citation(BaseModel):
    """One citation of a final answer (``agent.citations``), at ``start:end`` of its text, with code's verdict."""

    model_config = ConfigDict(frozen=True)

    start: int
    end: int
    ref: str
    quote: str | None = None
    verified: bool = False
    problem: str | None = None
    tool: str | None = None
    call_id: str | None = None
