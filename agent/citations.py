"""Citations in a final answer: ``[E3]`` or ``[E3: "exact quote"]``, each checked by code.

A bare ``[E3]`` is verified when E3 is a result of the run that may be cited; a quoted one also
needs its quote to occur in that output (``agent.evidence``: whitespace runs collapsed, not a
repeat of the call's own arguments). The verdicts are stored with the run (``RunState.citations``)
and the bot renders the answer from them: a verified citation as a link to its step with the
quote, anything else marked ``unverified``. The model's text never decides which is which.
"""

from __future__ import annotations

import re

from agent.evidence import EvidenceIndex
from agent.findings import Citation

MAX_CITATIONS = 200  # an answer citing more is not read by anyone; the rest stay plain text
# Straight or typographic quotes; a quote spans one line and at most 500 characters.
CITATION = re.compile(r"""\[(E[0-9]{1,7})(?::\s*(?:"([^"\n]{1,500})"|“([^”\n]{1,500})”))?\]""")


def check_citations(text: str, index: EvidenceIndex) -> list[Citation]:
    """Every citation in ``text``, in order, checked against the run's results."""
    found: list[Citation] = []
    for match in CITATION.finditer(text):
        if len(found) >= MAX_CITATIONS:
            break
        ref = match.group(1)
        quote = match.group(2) if match.group(2) is not None else match.group(3)
        source = index.source(ref)
        if quote is None:
            problem = index.problem_with(ref, "") if source is None or not source.citable else None
        else:
            problem = index.problem_with(ref, quote)
        found.append(
            Citation(
                start=match.start(),
                end=match.end(),
                ref=ref,
                quote=quote,
                verified=problem is None,
                problem=problem,
                tool=source.tool if source else None,
                call_id=source.call_id if source else None,
            )
        )
    return found
