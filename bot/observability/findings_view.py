"""A run's findings and its answer's citations as people read them outside Slack: ``chatops runs
show`` (text and Markdown) and ``chatops audit tail`` (one line per ``findings_updated`` entry).

What is shown as established is code's verdict (``agent.findings``): each status and conclusion as
shown, the model's claim beside it when code corrected it, and every piece of evidence marked
``verified`` or ``unverified`` with the reason. The model's own text (statements, quotes, even the
ids it cited) is data: always inside quotes, with quotes, backslashes, line breaks, control and
invisible format characters escaped, so no statement can start a line of its own, close its quote
early, move the cursor of a terminal or reorder what follows it (bidi overrides).
"""

from __future__ import annotations

import unicodedata
from collections.abc import Iterable

from agent.evidence import REF
from agent.findings import Citation, Evidence, Findings, Hypothesis, HypothesisStatus

# Unicode categories never shown as themselves: controls, format characters (zero-width, bidi),
# line and paragraph separators, surrogates, private use, unassigned.
_HIDDEN = frozenset({"Cc", "Cf", "Zl", "Zp", "Cs", "Co", "Cn"})
_ESCAPES = {'"': '\\"', "\\": "\\\\", "\n": "\\n", "\r": "\\r", "\t": "\\t"}
SUMMARY_STATEMENT_CHARS = 60


def _code(char: str) -> str:
    code = ord(char)
    return f"\\u{code:04x}" if code <= 0xFFFF else f"\\U{code:08x}"


def _escaped(char: str) -> str:
    if char in _ESCAPES:
        return _ESCAPES[char]
    return _code(char) if unicodedata.category(char) in _HIDDEN else char


def quoted(text: str, limit: int | None = None) -> str:
    """``text`` in double quotes, inert on one line (see the module's doc); cut at ``limit``."""
    if limit is not None and len(text) > limit:
        text = text[: limit - 1] + "…"
    return '"' + "".join(_escaped(char) for char in text) + '"'


def terminal_text(text: str) -> str:
    """``text`` with its line breaks and tabs, every other hidden character escaped: what a terminal
    or a document shows of model and tool text (an escape sequence in an answer could otherwise
    move the cursor and overwrite a verdict printed above it)."""
    lines = text.split("\n")
    for number, line in enumerate(lines):
        if not line.replace("\t", " ").isprintable():  # the usual case is decided in C
            lines[number] = "".join(
                _code(c) if c != "\t" and unicodedata.category(c) in _HIDDEN else c for c in line
            )
    return "\n".join(lines)


def ref_text(ref: str) -> str:
    """An evidence id as cited: as is when it is one (``E3``), else quoted (the model's text)."""
    return ref if REF.fullmatch(ref) else quoted(ref)


def _claimed(shown: str, claimed: str, why: str) -> str:
    return shown if shown == claimed else f"{shown} (claimed {claimed}: {why})"


def findings_lines(findings: Findings) -> list[str]:
    """The findings, a few lines per hypothesis (``runs show``)."""
    lines = [f"findings (update {findings.version})"]
    conclusion = _claimed(
        findings.conclusion.value, findings.claimed_conclusion.value, "not established by verified evidence"
    )
    if findings.conclusion.value == "no_fault_found":
        conclusion += ": No fault found"
    confidence = _claimed(
        findings.confidence.value,
        findings.claimed_confidence.value,
        "high needs verified evidence from 2 different tool results",
    )
    lines += [f"  conclusion    {conclusion}", f"  confidence    {confidence}"]
    for hypothesis in findings.hypotheses:
        lines += _hypothesis_lines(hypothesis)
    if findings.checked:  # what a "no fault found" rests on
        checked = ", ".join(
            f"{c.ref} {c.tool}" + (f" on {c.target}" if c.target else "") for c in findings.checked
        )
        lines.append(f"  checked       {checked}")
    return lines


def _hypothesis_lines(hypothesis: Hypothesis) -> list[str]:
    status = _claimed(hypothesis.status.value, hypothesis.claimed_status.value, "no verified evidence")
    struck = " (struck through: kept, not deleted)" if hypothesis.status is HypothesisStatus.REFUTED else ""
    lines = [f"  {hypothesis.id} {status}{struck}: {quoted(hypothesis.statement)}"]
    lines += [f"    {_evidence(e)}" for e in hypothesis.evidence]
    return lines


def _evidence(evidence: Evidence) -> str:
    ref = ref_text(evidence.ref)
    if evidence.verified:
        return f"[{ref}] verified    {quoted(evidence.quote)} ({evidence.tool})"
    return f"[{ref}] unverified  {quoted(evidence.quote)}: {evidence.problem}"


def citation_lines(citations: Iterable[Citation]) -> list[str]:
    """The final answer's citations, each with code's verdict (``runs show``)."""
    lines = []
    for citation in citations:
        quote = f" {quoted(citation.quote)}" if citation.quote is not None else ""
        if citation.verified:
            lines.append(f"  [{citation.ref}] verified  {quote.strip() or '(no quote)'} ({citation.tool})")
        else:
            lines.append(f"  [{citation.ref}] unverified{quote}: {citation.problem}")
    return ["citations in the answer", *lines] if lines else []


def findings_summary(findings: Findings) -> str:
    """One line for the audit tail: the update, conclusion, confidence, each hypothesis and the
    verdict on each piece of its evidence."""
    conclusion = findings.conclusion.value
    if findings.claimed_conclusion is not findings.conclusion:
        conclusion += f" (claimed {findings.claimed_conclusion.value})"
    confidence = findings.confidence.value
    if findings.claimed_confidence is not findings.confidence:
        confidence += f" (claimed {findings.claimed_confidence.value})"
    parts = [f"update={findings.version} conclusion={conclusion} confidence={confidence}"]
    for h in findings.hypotheses:
        status = h.status.value
        if h.claimed_status is not h.status:
            status += f" (claimed {h.claimed_status.value})"
        verdicts = ", ".join(
            f"{ref_text(e.ref)} {'verified' if e.verified else 'unverified'}" for e in h.evidence
        )
        statement = quoted(h.statement, SUMMARY_STATEMENT_CHARS)
        parts.append(f"{h.id} {status} {statement}" + (f": {verdicts}" if verdicts else ""))
    return " | ".join(parts)
