"""The budget card: a run at its token budget asks whether to go on ("Extend by N?").

"This investigation used its budget (N tokens, $X). Extend by N?" with **Extend** and **Stop**
(``bot.runs.budget_gate`` posts it, ``bot.slack.handlers.budget_clicks`` decides a click). Every
word and number on it is the bot's own (counts, a price, an id): nothing the model wrote. A button's
value names the run and the card's round (``{run_id}.{ask_id}``); the click is judged against the
record, never the value alone.
"""

from __future__ import annotations

from bot.runs.budget_asks import BudgetAsk, BudgetStatus
from bot.slack.rendering.blockkit import Block, actions, button, context, notification_text, section
from bot.slack.rendering.mrkdwn import mention

ACTION_EXTEND = "chatops_budget_extend"
ACTION_BUDGET_STOP = "chatops_budget_stop"
BUDGET_CONTROLS = "budget_controls"


def used_line(ask: BudgetAsk) -> str:
    """ "This investigation used its budget (N tokens, $X). Extend by N?" """
    spent = f"{ask.spent:,} tokens, {ask.cost}" if ask.cost else f"{ask.spent:,} tokens"
    return f"This investigation used its budget ({spent}). Extend by {ask.base:,}?"


def button_value(ask: BudgetAsk) -> str:
    return f"{ask.run_id}.{ask.id}"


def budget_blocks(ask: BudgetAsk) -> list[Block]:
    """The card while it waits: the question, the two buttons."""
    return [
        section(f":money_with_wings: *{used_line(ask)}*"),
        context(f"Budget {ask.budget:,} tokens · run `{ask.run_id[:12]}`"),
        actions(
            BUDGET_CONTROLS,
            [
                button(ACTION_EXTEND, "Extend", button_value(ask), "primary"),
                button(ACTION_BUDGET_STOP, "Stop", button_value(ask), "danger"),
            ],
        ),
    ]


def decided_blocks(ask: BudgetAsk, status: BudgetStatus, user: str) -> list[Block]:
    """The card once decided: who extended (by how much) or stopped the run; no buttons."""
    if status is BudgetStatus.EXTENDED:
        said = f":arrow_forward: Extended by {ask.base:,} tokens by {mention(user)}"
    else:
        said = f":octagonal_sign: Stopped at its budget by {mention(user)}"
    return [section(f":money_with_wings: {used_line(ask)}"), context(said)]


def budget_text(blocks: list[Block]) -> str:
    return notification_text(blocks)
