"""``update_findings``: the built-in read-only tool through which the model keeps its findings.

Offered in every run that has evidence ids (``RunConfig.evidence``), executed by the loop itself
on the worker (it touches no target, needs no approval, is never sent to a runner). Its arguments
replace the run's findings as a whole; ``verified_findings`` checks every piece of evidence
against the run's results (``agent.evidence``) and applies the rules of ``agent.findings``; the
result tells the model exactly which items failed verification and why, so it can correct them.
"""

from __future__ import annotations

from collections.abc import Callable
from typing import cast

from pydantic import BaseModel, ConfigDict, Field, ValidationError

from agent.evidence import FINDINGS_TOOL, EvidenceIndex
from agent.findings import (
    Conclusion,
    Confidence,
    Evidence,
    Findings,
    Hypothesis,
    HypothesisStatus,
)
from agent.tooling import ToolCategory, ToolResult
from agent.types import ToolDef

MAX_HYPOTHESES = 12
MAX_EVIDENCE = 8  # per hypothesis
MAX_STATEMENT = 400
MAX_QUOTE = 500
HIGH_CONFIDENCE_SOURCES = 2  # verified evidence from this many different results
# A hypothesis's optional structured cause, ``target:kind:name`` (``web-03:service:api``): what the
# evaluation harness scores (``emulator/eval/scoring/rca.py``) instead of matching the statement.
CAUSE_PATTERN = r"^[a-z0-9][a-z0-9._-]{0,62}:[a-z][a-z0-9-]{0,30}:[^\s:][^\s]{0,199}$"


class _EvidenceClaim(BaseModel):
    model_config = ConfigDict(extra="forbid", frozen=True)

    ref: str = Field(max_length=12)
    quote: str = Field(max_length=MAX_QUOTE)


class _HypothesisClaim(BaseModel):
    model_config = ConfigDict(extra="forbid", frozen=True)

    id: str = Field(pattern=r"^H[1-9][0-9]{0,2}$")
    statement: str = Field(min_length=1, max_length=MAX_STATEMENT)
    status: HypothesisStatus
    evidence: list[_EvidenceClaim] = Field(default_factory=list, max_length=MAX_EVIDENCE)
    cause: str | None = Field(default=None, pattern=CAUSE_PATTERN)


class FindingsClaim(BaseModel):
    """The tool's arguments, as the model sends them."""

    model_config = ConfigDict(extra="forbid", frozen=True)

    hypotheses: list[_HypothesisClaim] = Field(default_factory=list, max_length=MAX_HYPOTHESES)
    conclusion: Conclusion
    confidence: Confidence


DEFINITION = ToolDef(
    name=FINDINGS_TOOL,
    description=(
        "Record your findings so far; they replace the previous ones and are shown in the thread. "
        "Each hypothesis cites evidence as the id of a tool result (E3) and an exact quote from "
        "that output. Code checks every quote: a hypothesis is shown as supported, and a root "
        "cause as found, only with verified evidence. Use conclusion no_fault_found when the "
        "evidence shows nothing wrong."
    ),
    parameters={
        "type": "object",
        "properties": {
            "hypotheses": {
                "type": "array",
                "maxItems": MAX_HYPOTHESES,
                "items": {
                    "type": "object",
                    "properties": {
                        "id": {"type": "string", "description": "H1, H2, ... (keep ids stable)"},
                        "statement": {"type": "string", "maxLength": MAX_STATEMENT},
                        "status": {"type": "string", "enum": [s.value for s in HypothesisStatus]},
                        "cause": {
                            "type": "string",
                            "description": "optional: the cause as target:kind:name, e.g. web-03:service:api",
                        },
                        "evidence": {
                            "type": "array",
                            "maxItems": MAX_EVIDENCE,
                            "items": {
                                "type": "object",
                                "properties": {
                                    "ref": {"type": "string", "description": "a tool result's id: E3"},
                                    "quote": {"type": "string", "maxLength": MAX_QUOTE},
                                },
                                "required": ["ref", "quote"],
                                "additionalProperties": False,
                            },
                        },
                    },
                    "required": ["id", "statement", "status"],
                    "additionalProperties": False,
                },
            },
            "conclusion": {"type": "string", "enum": [c.value for c in Conclusion]},
            "confidence": {"type": "string", "enum": [c.value for c in Confidence]},
        },
        "required": ["hypotheses", "conclusion", "confidence"],
        "additionalProperties": False,
    },
)


def parse_claim(arguments: str) -> FindingsClaim:
    """The model's arguments, checked; raises ``ValueError`` saying what is wrong."""
    try:
        claim = FindingsClaim.model_validate_json(arguments or "{}")
    except ValidationError as error:
        problems = "; ".join(
            f"{'.'.join(str(p) for p in e['loc']) or 'arguments'}: {e['msg']}" for e in error.errors()[:5]
        )
        raise ValueError(problems) from None
    ids = [h.id for h in claim.hypotheses]
    repeated = sorted({i for i in ids if ids.count(i) > 1})
    if repeated:
        raise ValueError(f"hypothesis ids must be unique: {', '.join(repeated)}")
    return claim


def verified_findings(claim: FindingsClaim, index: EvidenceIndex, version: int) -> Findings:
    """What is shown: every quote checked against the run's results, the rules applied."""
    hypotheses = tuple(_hypothesis(h, index) for h in claim.hypotheses)
    supported = [h for h in hypotheses if h.status is HypothesisStatus.SUPPORTED]
    # What "no fault found" says was checked; only then: the list grows with the run, and every
    # update would store and send all of it.
    checked = index.checked() if claim.conclusion is Conclusion.NO_FAULT_FOUND else ()
    conclusion = claim.conclusion
    if (conclusion is Conclusion.ROOT_CAUSE_FOUND and not supported) or (
        conclusion is Conclusion.NO_FAULT_FOUND and (supported or not checked)
    ):
        conclusion = Conclusion.INCONCLUSIVE
    confidence = claim.confidence
    # High confidence rests on two different results: those quoted for the cause, or, when no
    # fault was found, those quoted to refute the suspected faults (having merely called two
    # tools is not confidence that nothing is wrong).
    grounds = (
        [h for h in hypotheses if h.status is HypothesisStatus.REFUTED]
        if conclusion is Conclusion.NO_FAULT_FOUND
        else supported
    )
    sources = {e.ref for h in grounds for e in h.verified_evidence}
    if confidence is Confidence.HIGH and len(sources) < HIGH_CONFIDENCE_SOURCES:
        confidence = Confidence.MEDIUM
    return Findings(
        conclusion=conclusion,
        claimed_conclusion=claim.conclusion,
        confidence=confidence,
        claimed_confidence=claim.confidence,
        hypotheses=hypotheses,
        checked=checked,
        version=version,
    )


def _hypothesis(claim: _HypothesisClaim, index: EvidenceIndex) -> Hypothesis:
    # Everything the hypothesis as shown is made of: the same claim citing the same (indexed)
    # results is shown the same at every update, and verified once.
    refs = [e.ref for e in claim.evidence]
    key = (claim.id, claim.statement, claim.status, claim.cause, *refs, *[e.quote for e in claim.evidence])
    found = index.recall(key)
    if found is not None:
        return cast(Hypothesis, found)
    evidence = tuple(_evidence(e, index) for e in claim.evidence)
    status = claim.status
    if status is HypothesisStatus.SUPPORTED and not any(e.verified for e in evidence):
        status = HypothesisStatus.OPEN
    hypothesis = Hypothesis(
        id=claim.id,
        statement=claim.statement,
        status=status,
        claimed_status=claim.status,
        evidence=evidence,
        cause=claim.cause,
    )
    index.remember(key, refs, hypothesis)
    return hypothesis


def _evidence(claim: _EvidenceClaim, index: EvidenceIndex) -> Evidence:
    problem = index.problem_with(claim.ref, claim.quote)
    source = index.source(claim.ref)
    return Evidence(
        ref=claim.ref,
        quote=claim.quote,
        verified=problem is None,
        problem=problem,
        tool=source.tool if source else None,
        call_id=source.call_id if source else None,
        target=source.target if source else None,
    )


def report(findings: Findings) -> str:
    """The tool's result: what is shown, and every correction with its reason."""
    lines = [
        f"Findings recorded (update {findings.version}). Shown: conclusion {findings.conclusion.value}, "
        f"confidence {findings.confidence.value}."
    ]
    if findings.conclusion is not findings.claimed_conclusion:
        why = {
            Conclusion.ROOT_CAUSE_FOUND: "no hypothesis is supported by verified evidence",
            Conclusion.NO_FAULT_FOUND: "a hypothesis is supported, or no tool result was checked yet",
        }.get(findings.claimed_conclusion, "")
        lines.append(
            f"- conclusion {findings.claimed_conclusion.value} is shown as {findings.conclusion.value}: {why}"
        )
    if findings.confidence is not findings.claimed_confidence:
        lines.append(
            f"- confidence high is shown as {findings.confidence.value}: it needs verified evidence "
            f"from {HIGH_CONFIDENCE_SOURCES} different tool results (for the cause; for no fault "
            "found, refuting the suspected faults)"
        )
    for hypothesis in findings.hypotheses:
        if hypothesis.status is not hypothesis.claimed_status:
            lines.append(f"- {hypothesis.id} is shown as {hypothesis.status.value}: no verified evidence")
        for evidence in hypothesis.evidence:
            if not evidence.verified:
                lines.append(f"- {hypothesis.id} {evidence.ref} unverified: {evidence.problem}")
    if len(lines) == 1:
        lines.append("Every piece of evidence was verified.")
    else:
        lines.append("Quote tool output exactly (whitespace may differ) and cite the result it came from.")
    return "\n".join(lines)


class FindingsTool:
    """The tool the loop offers; ``bind`` gives it the run it records for (``agent.run.Run``)."""

    definition = DEFINITION
    category = ToolCategory.READ_ONLY
    parallel = False  # it reads the results of the calls before it: after them, never beside
    timeout = 10.0
    enforces_timeout = True  # pure computation on this thread, bounded by the argument caps

    def __init__(self, record: Callable[[FindingsClaim], Findings] | None = None) -> None:
        self._record = record

    def bind(self, record: Callable[[FindingsClaim], Findings]) -> None:
        self._record = record

    def execute(self, arguments: str, *, timeout: float) -> ToolResult:
        if self._record is None:
            return ToolResult("Error: update_findings is not available in this run", is_error=True)
        try:
            claim = parse_claim(arguments)
        except ValueError as error:
            return ToolResult(f"Error: invalid findings, nothing recorded: {error}", is_error=True)
        return ToolResult(report(self._record(claim)))

    def preview(self, arguments: str, *, timeout: float) -> ToolResult | None:
        return None
