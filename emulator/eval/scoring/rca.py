"""``rca``: did the run find the root causes, and only them? (The ITBench-AA rule.)

The supported hypotheses (as shown: code verified their evidence) name a set of causes:

* a hypothesis with a structured ``cause`` (``target:kind:name``) names exactly that cause;
* otherwise its statement names every root cause and suspect of the truth whose ``match``
  patterns all occur in it (``cause_patterns``), and a statement that names none of them names
  a cause of its own, which is not a root cause.

``rca`` is 0 when a root cause is missing from that set, else the set's precision: the root causes
over everything named. So naming the right cause and a suspect scores 0.5, and naming every
service in sight scores what it deserves. Restating one cause in two hypotheses names it once.

A no-fault control (no root cause) scores 1 only for the conclusion ``no_fault_found`` as shown
with nothing supported, and 0 otherwise. A run without findings named nothing: 0.

Statements are matched, not understood: "nginx is not the cause" names nginx. A run that rules
something out says so in a refuted hypothesis, which is never counted.
"""

from __future__ import annotations

import re
from collections.abc import Sequence
from dataclasses import dataclass

from emulator.eval.scoring.inputs import FindingsView, HypothesisView
from emulator.eval.truth import CAUSE_ID, Cause, Truth, pattern

NO_FAULT_FOUND = "no_fault_found"


@dataclass(frozen=True)
class RcaScore:
    value: float
    named: tuple[str, ...]  # the causes the supported hypotheses name ("H3?" for one naming none known)
    missing: tuple[str, ...]  # root causes no supported hypothesis names
    note: str = ""


def _word(text: str) -> str:
    escaped = re.escape(text)
    start = r"\b" if re.match(r"\w", text) else ""
    end = r"\b" if re.search(r"\w$", text) else ""
    return f"{start}{escaped}{end}"


def cause_patterns(cause: Cause, targets: Sequence[str]) -> tuple[str, ...]:
    """The patterns that must all occur in a statement naming ``cause``: its ``match``, else its
    name as a word (and its target's name, when the fleet has more than one target)."""
    if cause.match:
        return cause.match
    found = (_word(cause.name),)
    return (*found, _word(cause.target)) if len(targets) > 1 else found


def normalised(cause_id: str) -> str:
    """A cause id compared: lower case, a service's ``.service`` suffix dropped."""
    text = cause_id.strip().lower()
    parsed = CAUSE_ID.fullmatch(text)
    if parsed is not None and parsed["kind"] == "service":
        return text.removesuffix(".service")
    return text


def named_by(hypothesis: HypothesisView, truth: Truth, targets: Sequence[str]) -> set[str]:
    """The cause ids one supported hypothesis names (``H3?``: a cause the truth does not know)."""
    if hypothesis.cause is not None:
        return {normalised(hypothesis.cause)}
    named = {
        normalised(cause.id)
        for cause in (*truth.root_causes, *truth.suspects)
        if all(pattern(source).search(hypothesis.statement) for source in cause_patterns(cause, targets))
    }
    return named or {f"{hypothesis.id}?"}


def score_rca(truth: Truth, findings: FindingsView | None, targets: Sequence[str]) -> RcaScore:
    if findings is None:
        return RcaScore(0.0, (), tuple(c.id for c in truth.root_causes), "the run recorded no findings")
    supported = findings.supported
    named: set[str] = set()
    for hypothesis in supported:
        named |= named_by(hypothesis, truth, targets)
    shown = tuple(sorted(named))
    if truth.no_fault:
        if findings.conclusion == NO_FAULT_FOUND and not supported:
            return RcaScore(1.0, shown, ())
        return RcaScore(
            0.0,
            shown,
            (),
            f"a no-fault control concluded {findings.conclusion} with {len(supported)} supported",
        )
    true = {normalised(cause.id) for cause in truth.root_causes}
    missing = tuple(sorted(true - named))
    if missing:
        return RcaScore(0.0, shown, missing)
    return RcaScore(len(true) / len(named), shown, ())
