"""The loop benchmark's cost of verification (issue 30): a scripted model that keeps findings.

Every ``every``-th model turn calls ``update_findings`` instead of the echo tool, citing the two
results before it with quotes it copies from them as it read them (``[E7] ok``: the label, then the
output, as the wire carries them; ``agent.evidence.model_text``), claiming a supported hypothesis,
``root_cause_found`` and ``high`` confidence. Code verifies both quotes against the cited outputs
only (``agent.evidence.EvidenceIndex``), so the cost of an update does not grow with the run.
"""

from __future__ import annotations

import json
from collections.abc import Sequence

from agent.evidence import FINDINGS_TOOL, model_text, split_label
from agent.findings import Conclusion, Confidence, Findings
from agent.types import Message, ToolCall

FINDINGS_EVERY = 5
CITED = 2
_OWN_RESULT = "Findings recorded"  # how the model tells its own tool's results from the echo's


def cites_now(turn: int, every: int) -> bool:
    """Whether model turn ``turn`` (from 1) records findings: two results exist before it by then."""
    return every > 0 and turn > CITED and turn % every == 0


def findings_call(messages: Sequence[Message], call_id: str) -> ToolCall:
    """``update_findings`` citing the last ``CITED`` results of other tools, quoted as read."""
    evidence: list[dict[str, str]] = []
    for message in reversed(messages):
        if message.role != "tool":
            continue
        ref, output = split_label(model_text(message))
        if ref is None or output.startswith(_OWN_RESULT):
            continue
        evidence.append({"ref": ref, "quote": output.strip()})
        if len(evidence) == CITED:
            break
    hypothesis = {"id": "H1", "statement": "the echo answers", "status": "supported", "evidence": evidence}
    arguments = {"hypotheses": [hypothesis], "conclusion": "root_cause_found", "confidence": "high"}
    return ToolCall(id=call_id, name=FINDINGS_TOOL, arguments=json.dumps(arguments))


def updates_in(k: int, every: int) -> int:
    """How many of a K-turn run's model turns record findings (the last turn answers)."""
    return sum(1 for turn in range(1, k) if cites_now(turn, every))


def check_verified(findings: Findings | None, k: int, every: int) -> None:
    """The run's last findings show what it claimed: every quote verified, nothing corrected."""
    expected = updates_in(k, every)
    if not expected:
        return
    assert findings is not None and findings.version == expected, findings
    assert findings.conclusion is Conclusion.ROOT_CAUSE_FOUND, findings
    assert findings.confidence is Confidence.HIGH, findings
    assert all(e.verified for h in findings.hypotheses for e in h.evidence), findings


def verification_cost(with_findings: dict[int, float], without: dict[int, float]) -> dict[int, float]:
    """Microseconds per iteration that verified findings add, by K: the row with them over the same
    run without them (evidence ids and the tool offered in both)."""
    return {k: with_findings[k] - without[k] for k in with_findings}


def cost_line(with_findings: dict[int, float], without: dict[int, float]) -> str:
    return ", ".join(
        f"K={k}: {us:+,.1f} us/iter ({us * FINDINGS_EVERY:+,.0f} us per update)"
        for k, us in verification_cost(with_findings, without).items()
    )
