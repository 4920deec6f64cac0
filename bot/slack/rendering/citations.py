"""Citations in a run's final answer, shown as code judged them, never as the model wrote them.

The model cites evidence as ``[E3]`` or ``[E3: "exact quote"]``; ``agent.citations`` stored each
citation's place in the answer and code's verdict (``RunResult.citations``). The bot replaces each
one with its own rendering:

* **verified**: a link to its step (the run card's permalink, labelled with the evidence id and
  the tool: ``bot.slack.rendering.findings``), then the quote as inline code;
* **not verified** (an id naming no result of the run, a quote not in the cited output): the id,
  the word ``unverified``, the quote as inline code, and why.

A citation is replaced by a placeholder (``cite``: two private-use characters around its number,
removed from the model's text first) before the answer is converted (``mrkdwn.to_mrkdwn``, or
``stream_text.inert_markdown`` for a streamed answer), redacted and split, and the placeholder
filled with the rendering after (``fill``). So the rest of the answer keeps today's escaping rule,
and nothing the model wrote is, or can make, a placeholder or a link: a labelled link in an answer
is the bot's verified citation and nothing else.

Above the answer the bot adds its own lines (``head_lines``): "No fault found" with what was
checked when that is the conclusion, and a one-line note when the model claimed a root cause
and the answer cites no verified evidence.
"""

from __future__ import annotations

import re
import unicodedata
from collections.abc import Callable, Sequence
from dataclasses import dataclass
from enum import StrEnum

from agent.citations import CITATION
from agent.findings import Citation, Conclusion, Findings
from bot.slack.rendering.findings import CHECKED_SHOWN, checked_item, problem_words, step_label
from bot.slack.rendering.mrkdwn import escape, inline_code, plural, visible

_OPEN, _CLOSE = "\ue000", "\ue001"
_PLACEHOLDER = re.compile(f"{_OPEN}([0-9]{{1,4}}){_CLOSE}")
# What reads like a citation but is not one code found (``agent.citations.CITATION``): ``E``, maybe
# spaced, any digits (fullwidth too), anything to the closing bracket on the line.
_LOOKALIKE = re.compile("(\\[\\s*[E\uff25]\\s*\\d[^\\]\n]{0,600}\\])")
_SPACED_CITATION = re.compile(r"[ \t]*" + CITATION.pattern)
_SPACED_LOOKALIKE = re.compile(r"[ \t]*" + _LOOKALIKE.pattern)
_LOOKALIKE_ID = re.compile("\\[\\s*[E\uff25]\\s*(\\d+)")
UNCHECKED = "written in a form code could not check"
QUOTE_CHARS = 200
NO_VERIFIED_CITATION = "The model says it found the root cause, but this answer cites no verified evidence."


class Style(StrEnum):
    """Where the answer goes: a posted message (mrkdwn) or a stream (Markdown)."""

    MRKDWN = "mrkdwn"
    MARKDOWN = "markdown"


@dataclass(frozen=True)
class CitedAnswer:
    """The answer with a placeholder where each citation was, and those citations, in order."""

    text: str
    citations: tuple[Citation, ...]

    @property
    def verified(self) -> bool:
        return any(citation.verified for citation in self.citations)


def cite(text: str, citations: Sequence[Citation]) -> CitedAnswer:
    """``text`` with each citation (that really stands at its offsets) replaced by a placeholder.

    The model's text between them loses its invisible format characters (``mrkdwn.visible``: a
    zero-width space inside ``[E1: "…"]``, a bidi override turning the bot's own words around), and
    anything left that still reads like a citation code did not check (``[E 1]``, fullwidth digits) is
    shown as an unverified one: nothing looks like a citation without code's verdict beside it."""
    pieces: list[str] = []
    kept: list[Citation] = []
    position = 0

    def prose(piece: str) -> None:
        for index, part in enumerate(_LOOKALIKE.split(visible(piece.replace(_OPEN, "").replace(_CLOSE, "")))):
            if index % 2 == 0:
                pieces.append(part)
            else:
                pieces.append(f"{_OPEN}{len(kept)}{_CLOSE}")
                kept.append(Citation(start=0, end=0, ref=_ref_of(part), quote=part, problem=UNCHECKED))

    for citation in sorted(citations, key=lambda c: c.start):
        if citation.start < position or not text.startswith(f"[{citation.ref}", citation.start):
            continue  # not where code found it (overlapping, or another text): left as text
        if citation.end > len(text) or text[citation.end - 1] != "]":
            continue
        prose(text[position : citation.start])
        pieces.append(f"{_OPEN}{len(kept)}{_CLOSE}")
        kept.append(citation)
        position = citation.end
    prose(text[position:])
    return CitedAnswer("".join(pieces), tuple(kept))


def _ref_of(lookalike: str) -> str:
    """The id a citation-like text names, as code would write it (``E`` and ASCII digits)."""
    match = _LOOKALIKE_ID.match(lookalike)
    digits = "".join(str(unicodedata.digit(char)) for char in match.group(1)) if match else ""
    return f"E{digits[:7] or '?'}"


def fill(text: str, answer: CitedAnswer, shown: Callable[[Citation], str]) -> str:
    """``text`` (the answer converted) with each placeholder replaced by ``shown(citation)``."""

    def one(match: re.Match[str]) -> str:
        index = int(match.group(1))
        return shown(answer.citations[index]) if index < len(answer.citations) else ""

    return _PLACEHOLDER.sub(one, text)


def citation_text(citation: Citation, card_link: str | None, style: Style) -> str:
    """One citation as the bot shows it (see the module)."""
    quote = f" {inline_code(citation.quote, QUOTE_CHARS)}" if citation.quote is not None else ""
    if citation.verified:
        label = step_label(citation.ref, citation.tool)
        if card_link:
            step = (
                f"<{escape(card_link)}|{label}>"
                if style is Style.MRKDWN
                else f"[{label}]({escape(card_link)})"
            )
        else:
            step = _bold(label, style)
        return f"[{step}{quote}]"
    ref = citation.ref  # the citation pattern admits ``E<digits>`` only
    return f"[{ref} {_bold('unverified', style)}{quote}: {problem_words(citation.problem)}]"


def plain_citation(citation: Citation) -> str:
    """One citation in the answer's file (Markdown a person downloads): the verdict in words."""
    quote = f': "{citation.quote}"' if citation.quote is not None else ""
    verdict = "verified" if citation.verified else f"unverified, {citation.problem or 'not verified'}"
    return f"[{citation.ref}{quote} ({verdict})]"


def head_lines(findings: Findings | None, answer: CitedAnswer, style: Style) -> list[str]:
    """The bot's lines above the answer: "No fault found" and what was checked; the note that a
    claimed root cause has no verified citation in the answer."""
    lines = []
    if findings is not None and findings.conclusion is Conclusion.NO_FAULT_FOUND:
        checked = findings.checked
        items = ", ".join(checked_item(item) for item in checked[:CHECKED_SHOWN]) or "nothing"
        if len(checked) > CHECKED_SHOWN:
            items += f", and {plural(len(checked) - CHECKED_SHOWN, 'more result')}"
        lines.append(f":white_check_mark: {_bold('No fault found', style)}. Checked: {items}.")
    claimed = findings is not None and findings.claimed_conclusion is Conclusion.ROOT_CAUSE_FOUND
    if claimed and not answer.verified:
        lines.append(f":warning: _{NO_VERIFIED_CITATION}_")
    return lines


def without_citations(text: str) -> str:
    """``text`` with every citation and everything that reads like one removed: for a place that
    shows the answer without code's verdicts (the alert's root message, a shortened summary whose
    cut would separate a citation from its check). The verdicts stay in the thread's answer."""
    stripped = _SPACED_CITATION.sub("", visible(text))  # with the blanks before it: "full [E2]." -> "full."
    return _SPACED_LOOKALIKE.sub("", stripped)


def _bold(text: str, style: Style) -> str:
    return f"*{text}*" if style is Style.MRKDWN else f"**{text}**"


def finisher(
    answer: CitedAnswer,
    findings: Findings | None,
    card_link: str | None,
    style: Style,
    redact: Callable[[str], str] = lambda text: text,
) -> Callable[[str], str]:
    """What completes the converted answer: the bot's head lines above it, and each placeholder
    filled with its citation (the quote redacted first, as the rest of the answer was)."""
    head = head_lines(findings, answer, style)

    def shown(citation: Citation) -> str:
        return citation_text(_redacted(citation, redact), card_link, style)

    def done(converted: str) -> str:
        body = fill(converted, answer, shown)
        return "\n".join([*head, body]) if head else body

    return done


def plain_answer(
    text: str, answer: CitedAnswer, findings: Findings | None, redact: Callable[[str], str]
) -> str:
    """The whole answer as a file holds it (plain Markdown): the head lines, every citation's verdict."""
    head = head_lines(findings, answer, Style.MARKDOWN)
    body = fill(text, answer, lambda citation: plain_citation(_redacted(citation, redact)))
    return "\n\n".join([*head, body]) if head else body


def _redacted(citation: Citation, redact: Callable[[str], str]) -> Citation:
    if citation.quote is None:
        return citation
    return citation.model_copy(update={"quote": redact(citation.quote)})
