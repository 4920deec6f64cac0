"""The run's Findings message: its conclusion, its hypotheses and the evidence each rests on.

One message in the run's thread, its first line holding the word ``Findings``, posted at the
first ``update_findings`` and edited in place after each (``bot.slack.delivery.findings_message``).
It shows ``agent.findings.Findings`` *as code corrected them*: the conclusion and confidence as
shown (the model's own claim beside them when code changed it, and why), each hypothesis with
its id, statement and status (a refuted one struck through, never dropped; one the model called
supported without verified evidence shown ``open`` and marked "no verified evidence"), and each
piece of evidence: verified, with a link to its step and the quote; or ``unverified``, with the
quote and what is wrong with it. With the conclusion ``no_fault_found`` it says "No fault found"
and lists what was checked (the evidence ids and their tools).

**What the model wrote cannot look like what code decided.** Every statement and quote is shown
as inline code (``mrkdwn.inline_code``: one line, escaped, its backticks replaced, invisible
format characters removed), where Slack renders no emphasis, emoji code, mention or link; a
hostile ``*verified*``, ``:white_check_mark:``, ``<http://x|verified>``, ``<@U1>`` or ``<!channel>``
shows as the characters it is. The live parts are the bot's own: the status words and icons, and
a verified piece's link. An evidence id the model made up is shown as code too. Lines are kept
whole within Slack's limits (never cut inside code, which would leave the rest of a line live):
what does not fit is counted, and ``chatops runs show RUN --json`` has it all.

**The step link.** A step (a tool call) has no message of its own: it is a line of the run card,
which is posted in every mode (streamed answers too), redrawn from Redis by the recovery sweep,
and shows each step with its evidence id. So a step's link is the run card's permalink
(``chat.getPermalink``, cached by the presenter), labelled with the evidence id and the tool.

Each hypothesis carries an overflow menu, **Refute** and **Focus on this**, whose value names the
choice, the hypothesis and the run (``choice_value``); the web process trusts none of it before
checking it against the run's record (``bot.slack.handlers.findings_clicks``).
"""

from __future__ import annotations

import functools
import re
from collections.abc import Sequence
from enum import StrEnum

from agent.evidence import REF
from agent.findings import Checked, Conclusion, Confidence, Evidence, Findings, Hypothesis, HypothesisStatus
from bot.slack.rendering.blockkit import (
    ACTION_FINDINGS,
    CARD_TEXT,
    MAX_BLOCKS,
    SECTION_TEXT,
    Block,
    context,
    mrkdwn,
    overflow,
    texts,
)
from bot.slack.rendering.mrkdwn import escape, inert, inline_code, plural

STATEMENT_CHARS = 300  # a statement as shown (the whole is in ``runs show --json``)
QUOTE_CHARS = 200
CHECKED_SHOWN = 30  # "No fault found": the checked results listed; the rest are counted
BLOCK_PREFIX = "findings_"  # block_id of a hypothesis's section: ``findings_H2``
_MORE_ROOM = 80  # kept for the "… more pieces of evidence" line

_CONCLUSION = {
    Conclusion.INVESTIGATING: (":mag:", "Investigating"),
    Conclusion.ROOT_CAUSE_FOUND: (":dart:", "Root cause found"),
    Conclusion.NO_FAULT_FOUND: (":white_check_mark:", "No fault found"),
    Conclusion.INCONCLUSIVE: (":grey_question:", "Inconclusive"),
}
_STATUS = {
    HypothesisStatus.OPEN: ":white_circle: open",
    HypothesisStatus.SUPPORTED: ":large_green_circle: supported",
    HypothesisStatus.REFUTED: ":red_circle: refuted",
}
_WHY_CONCLUSION = {
    Conclusion.ROOT_CAUSE_FOUND: "no hypothesis is supported by verified evidence",
    Conclusion.NO_FAULT_FOUND: "a hypothesis is supported, or nothing was checked yet",
}
FOOTER = (
    "Code checked every quote against the tool output it cites: a link opens the run card, whose "
    "steps carry the same ids. Refute a hypothesis, or ask to focus on it, from its menu."
)


class Choice(StrEnum):
    """What a hypothesis's menu offers (the labels people see are ``CHOICE_LABELS``)."""

    REFUTE = "refute"
    FOCUS = "focus"


CHOICE_LABELS = {Choice.REFUTE: "Refute", Choice.FOCUS: "Focus on this"}
_CHOICE_VALUE = re.compile(r"(refute|focus):(H[1-9][0-9]{0,2}):([0-9a-f]{32})")


def choice_value(choice: Choice, hypothesis_id: str, run_id: str) -> str:
    return f"{choice.value}:{hypothesis_id}:{run_id}"


def parse_choice(value: str) -> tuple[Choice, str, str] | None:
    """``(choice, hypothesis id, run id)`` of a menu option's value; ``None`` for anything else."""
    match = _CHOICE_VALUE.fullmatch(value)
    return (Choice(match.group(1)), match.group(2), match.group(3)) if match else None


# -- the message ----------------------------------------------------------------------------


def findings_blocks(findings: Findings, run_id: str, card_link: str | None) -> list[Block]:
    """The Findings message; ``card_link``: the run card's permalink (the steps' link), if known."""
    head: list[Block] = [_section(header_line(findings))]
    corrections = correction_lines(findings)
    if corrections:
        head.append(context("\n".join(corrections)))
    if findings.conclusion is Conclusion.NO_FAULT_FOUND:
        head.append(_section(checked_line(findings.checked, card_link)))
    tail = [context(FOOTER)]
    menus = len(findings.hypotheses) * _MENU_TEXT
    room = CARD_TEXT - sum(_text_length(block) for block in head) - _FOOTER_TEXT - menus
    sections: list[Block] = []
    hypotheses = findings.hypotheses[: MAX_BLOCKS - len(head) - len(tail)]
    for index, hypothesis in enumerate(hypotheses):
        share = min(SECTION_TEXT - 50, room // (len(hypotheses) - index))
        text = hypothesis_text(hypothesis, card_link, share)
        room -= len(text)
        sections.append(_hypothesis_section(hypothesis, run_id, text))
    return [*head, *sections, *tail]


def header_line(findings: Findings) -> str:
    """The first line: "Findings", the conclusion and the confidence as shown, the update's number."""
    icon, label = _CONCLUSION[findings.conclusion]
    return (
        f"{icon} *Findings* · *{label}* · confidence *{findings.confidence.value}* · "
        f"update {findings.version}"
    )


def correction_lines(findings: Findings) -> list[str]:
    """What code changed of the model's claims, and why."""
    lines = []
    if findings.conclusion is not findings.claimed_conclusion:
        claimed = _CONCLUSION[findings.claimed_conclusion][1].lower()
        why = _WHY_CONCLUSION.get(findings.claimed_conclusion, "")
        lines.append(f"The model claimed _{claimed}_; shown as above: {why}.")
    if findings.confidence is not findings.claimed_confidence:
        lines.append(
            f"The model claimed confidence _{findings.claimed_confidence.value}_: "
            f"{Confidence.HIGH.value} needs verified evidence from two different tool results."
        )
    return lines


def checked_line(checked: Sequence[Checked], card_link: str | None) -> str:
    """ "No fault found" and what was checked: the evidence ids and their tools (and targets)."""
    shown = ", ".join(checked_item(item) for item in checked[:CHECKED_SHOWN]) or "nothing"
    more = (
        f", and {plural(len(checked) - CHECKED_SHOWN, 'more result')}" if len(checked) > CHECKED_SHOWN else ""
    )
    where = f" (steps on the <{escape(card_link)}|run card>)" if card_link else ""
    return f":white_check_mark: *No fault found*. Checked{where}: {shown}{more}."


def checked_item(item: Checked) -> str:
    """A result "No fault found" counts as checked: its id, its tool, its target."""
    on = f" on {inline_code(item.target, 60)}" if item.target else ""
    return f"{_ref(item.ref)} {inline_code(item.tool, 60)}{on}"


def hypothesis_text(hypothesis: Hypothesis, card_link: str | None, room: int = SECTION_TEXT) -> str:
    """The hypothesis's line, then a line per piece of evidence, whole lines within ``room``."""
    statement = inline_code(hypothesis.statement, STATEMENT_CHARS)
    status = _STATUS[hypothesis.status]
    if hypothesis.status is HypothesisStatus.REFUTED:  # struck through, never dropped
        first = f"~{hypothesis.id}~ · {status} · ~{statement}~"
    else:
        unbacked = hypothesis.status is not hypothesis.claimed_status
        note = f" · _no verified evidence_ (claimed {hypothesis.claimed_status.value})" if unbacked else ""
        first = f"*{hypothesis.id}* · {status}{note} · {statement}"
    lines = [first]
    for index, evidence in enumerate(hypothesis.evidence):
        line = evidence_line(evidence, card_link)
        rest = len(hypothesis.evidence) - index
        if _fits(lines, line, room - (0 if rest == 1 else _MORE_ROOM)):
            lines.append(line)
            continue
        lines.append(f"• _… {plural(rest, 'more piece')} of evidence: `chatops runs show --json`_")
        break
    return "\n".join(lines)


def evidence_line(evidence: Evidence, card_link: str | None) -> str:
    """Verified: a link to its step and the quote. Not: the word ``unverified``, the quote, why."""
    quote = inline_code(evidence.quote, QUOTE_CHARS)
    if evidence.verified:
        label = step_label(evidence.ref, evidence.tool, evidence.target)
        step = f"<{escape(card_link)}|{label}>" if card_link else f"*{label}*"
        return f"• :white_check_mark: verified {step} {quote}"
    if REF.fullmatch(evidence.ref):
        return f"• :warning: *unverified* {evidence.ref} {quote}: {problem_words(evidence.problem)}"
    # The model's "id" is its text: shown as code, and the problem said without it.
    return f"• :warning: *unverified* {inline_code(evidence.ref, 20)} {quote}: not an evidence id of this run"


def problem_words(problem: str | None) -> str:
    """Code's reason a quote is not verified (written for the model), for people; its only
    variable part is an evidence id that matched ``E<n>`` (others are shown apart, as code)."""
    return inert((problem or "not verified").replace("your own findings", "the model's own findings"))


def step_label(ref: str, tool: str | None, target: str | None = None) -> str:
    """A step link's label: the evidence id, the tool, the target (names of the registry and the
    inventory, reduced to name characters and escaped; the id is code's own)."""
    return _ref(ref) + (f" · {_name(tool)}" if tool else "") + (f" on {_name(target)}" if target else "")


@functools.lru_cache(maxsize=256)  # a run's few tools and targets, named in every update's links
def _name(name: str) -> str:
    """A tool's or target's name inside a link label: nothing but name characters."""
    return escape(re.sub(r"[^\w.:/-]", "", name)[:60])


def _ref(ref: str) -> str:
    return ref if REF.fullmatch(ref) else inline_code(ref, 20)


def _hypothesis_section(hypothesis: Hypothesis, run_id: str, text: str) -> Block:
    # ``choice_value`` of each choice, from the labels and values read once (an enum's ``.value``
    # is a descriptor call: the menus were a tenth of the message's cost)
    options = [(label, f"{value}:{hypothesis.id}:{run_id}") for label, value in _CHOICES]
    return {
        "type": "section",
        "block_id": f"{BLOCK_PREFIX}{hypothesis.id}",
        "text": mrkdwn(text),
        "accessory": overflow(ACTION_FINDINGS, options),
    }


def _section(text: str) -> Block:
    return {"type": "section", "text": mrkdwn(text)}


def _fits(lines: list[str], line: str, room: int) -> bool:
    return sum(len(item) + 1 for item in lines) + len(line) <= room


def _text_length(block: Block) -> int:
    """What Slack counts of one of this module's head blocks (``texts``' total for a section or a
    context of mrkdwn), read where they keep it instead of walking every key of the block."""
    if block["type"] == "section":
        return len(block["text"]["text"])
    return sum(len(element["text"]) for element in block["elements"])


# The same for every message: the menus' labels (per hypothesis) and the footer.
_MENU_TEXT = sum(len(label) for label in CHOICE_LABELS.values())
_CHOICES = tuple((CHOICE_LABELS[choice], choice.value) for choice in Choice)
_FOOTER_TEXT = sum(len(text) for text in texts([context(FOOTER)]))
