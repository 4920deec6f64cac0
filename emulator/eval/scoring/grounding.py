"""``grounding``: the share of the truth's required facts that occur in verified evidence.

A fact counts when it occurs in one quote that code verified against the tool output it cites
(``verified`` in the findings as shown), in any hypothesis, refuted ones included: a fact cited
to rule something out was still looked at and quoted. A quote the model claimed but code could
not find in the cited output counts for nothing, so a run cannot ground itself by writing the
facts down.
"""

from __future__ import annotations

from dataclasses import dataclass

from emulator.eval.scoring.inputs import FindingsView
from emulator.eval.truth import Truth


@dataclass(frozen=True)
class GroundingScore:
    value: float
    found: tuple[str, ...]
    missing: tuple[str, ...]


def score_grounding(truth: Truth, findings: FindingsView | None) -> GroundingScore:
    quotes = findings.verified_quotes() if findings is not None else []
    found: list[str] = []
    missing: list[str] = []
    for fact in truth.facts:
        (found if any(fact.found_in(quote) for quote in quotes) else missing).append(fact.describe())
    return GroundingScore(len(found) / len(truth.facts), tuple(found), tuple(missing))
