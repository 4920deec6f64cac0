"""The thread's line for an approved change's check (``agent.checks``): "Verified: ...",
"Check failed: ...", "Check did not finish in N s: ..." or "Check not run: ...".

The check's call and output are a tool's text (a log line, a unit's description): shown only as
inline code and a code block, escaped (``mrkdwn.inert``), cut to ``OUTPUT_SHOWN`` characters, so
nothing in them formats, mentions or links.

With an undo offer (``bot.runs.undo_offers``), the line is a message with an **Undo** button whose
value is the offer's id, and a context line with the undo call and until when it may be asked for
(``check_blocks``); the click is judged by ``bot.slack.handlers.undo_clicks``, never by the value alone.
"""

from __future__ import annotations

from agent.checks import CheckOutcome
from bot.runs.undo_offers import UndoOffer
from bot.slack.rendering.blockkit import (
    ACTION_UNDO,
    UNDO_CONTROLS,
    Block,
    actions,
    button,
    context,
    section,
    slack_date,
)
from bot.slack.rendering.mrkdwn import escape, inline_code, truncate
from bot.slack.rendering.verbatim import code_block, visible_text

OUTPUT_SHOWN = 1500
_ICONS = {"passed": ":white_check_mark:", "failed": ":x:", "timed_out": ":hourglass:", "refused": ":warning:"}


def check_text(outcome: CheckOutcome, evidence: str | None = None) -> str:
    """The message posted in the run's thread when a check ends."""
    call = inline_code(f"{outcome.call.tool} {outcome.call.arguments}", 300)
    cite = f" ({evidence})" if evidence else ""
    if outcome.refused is not None:
        return f"{_ICONS['refused']} *Check not run:* {call}{cite}: {escape(outcome.refused)}"
    if outcome.passed:
        head = f"{_ICONS['passed']} *Verified:* {call}{cite}"
    elif outcome.timed_out:
        head = f"{_ICONS['timed_out']} *Check did not finish in {outcome.budget:g} s:* {call}{cite}"
    else:
        tries = "1 try" if outcome.attempts == 1 else f"{outcome.attempts} tries"
        head = f"{_ICONS['failed']} *Check failed:* {call}{cite} ({tries} in {outcome.seconds:.0f} s)"
    lines = [head]
    if outcome.before is not None:
        lines.append(f"*Before* ({escape(outcome.before.call.tool)}):\n{_block(outcome.before.output)}")
        lines.append(f"*After*:\n{_block(outcome.output)}")
    elif outcome.output:
        lines.append(_block(outcome.output))
    return "\n".join(lines)


def _block(text: str) -> str:
    return code_block(escape(truncate(visible_text(text), OUTPUT_SHOWN)).replace("```", "'''"))


def check_blocks(text: str, undo: UndoOffer) -> list[Block]:
    """The check line with the change's Undo button (``text``: ``check_text``'s, redacted by the caller)."""
    call = inline_code(undo.shown(), 300)
    return [
        section(text),
        context(f"Undo: {call}, until {slack_date(undo.expires_at)}"),
        actions(UNDO_CONTROLS, [button(ACTION_UNDO, "Undo", undo.id)]),
    ]
