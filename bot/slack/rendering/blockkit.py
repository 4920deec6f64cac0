"""Block Kit building blocks and Slack's limits, shared by the cards (``render``, ``approval_card``)."""

from __future__ import annotations

import copy
import re
import time
from collections.abc import Iterator
from typing import Any

from bot.slack.rendering.mrkdwn import truncate

Block = dict[str, Any]

# Slack's limits (Block Kit reference; chat.postMessage).
MAX_BLOCKS = 50
SECTION_TEXT = 3000
SECTION_FIELD = 2000
SECTION_FIELDS = 10
CONTEXT_TEXT = 3000
BUTTON_TEXT = 75
BUTTON_VALUE = 2000
CONFIRM_TITLE, CONFIRM_TEXT, CONFIRM_BUTTON = 100, 300, 30
MODAL_TITLE = 24
PRIVATE_METADATA = 3000
MESSAGE_TEXT = 40_000
# Slack refuses a message whose blocks hold more than about 12,000 characters of text in all;
# cards stay below this, with room for redaction to lengthen a secret's placeholder.
CARD_TEXT = 11_000
_LEADING_EMOJI = re.compile(r"^(?::[a-z0-9_+-]+:\s*)+")
_BOLD_MARKS = re.compile(r"\*([^*\n]+)\*")
NOTIFICATION_TEXT = 300  # a message's ``text`` fallback, shown in notifications: short is better

# action_id / callback_id values the app routes on.
ACTION_APPROVE = "chatops_approve"
ACTION_DECLINE = "chatops_decline"
ACTION_STOP = "chatops_stop"
ACTION_TRANSCRIPT = "chatops_transcript"
ACTION_POSTMORTEM = "chatops_postmortem"
ACTION_INVESTIGATE = "chatops_alert_investigate"  # an alert thread's button: start the investigation
ACTION_UNDO = (
    "chatops_undo"  # the check line's Undo button: its value is the offer's id (``bot.runs.undo_offers``)
)
ACTION_FINDINGS = "chatops_findings"  # a hypothesis's menu on the Findings message: Refute, Focus on this
VIEW_DECLINE = "chatops_decline_reason"
# block_id values of the cards' button rows: how a card is recognised in Slack (``bot.slack.delivery.lost_cards``).
RUN_CONTROLS = "run_controls"
APPROVAL_CONTROLS = "approval_controls"
UNDO_CONTROLS = "undo_controls"


def mrkdwn(text: str, limit: int = SECTION_TEXT) -> dict[str, Any]:
    """A mrkdwn text object. ``verbatim``: Slack links no bare URL, channel name or handle in it
    (its automatic parsing); the bot's own ``<@U…>``, ``<!date…>`` and emphasis still render."""
    return {"type": "mrkdwn", "text": truncate(text, limit) or " ", "verbatim": True}


def notification_text(blocks: list[Block], limit: int = NOTIFICATION_TEXT) -> str:
    """A message's ``text`` (the notification and screen-reader fallback) made of its first block's
    words. Slack parses ``text`` as mrkdwn too, so a fallback written apart from the blocks is a
    second rendering path that can forget the escaping rule; taken from the blocks, it is exactly
    as inert as they are."""
    for block in blocks:
        for text in texts([block]):
            if text.strip():
                # A notification reads plainer without the block's leading emoji and bold marks;
                # taking characters out of inert text cannot make anything live.
                plain = _BOLD_MARKS.sub(r"\1", _LEADING_EMOJI.sub("", " ".join(text.split())))
                return truncate(plain, limit)
    return " "


def plain(text: str, limit: int) -> dict[str, Any]:
    return {"type": "plain_text", "text": truncate(text, limit) or " ", "emoji": True}


def section(text: str) -> Block:
    return {"type": "section", "text": mrkdwn(text)}


def context(text: str) -> Block:
    return {"type": "context", "elements": [mrkdwn(text, CONTEXT_TEXT)]}


def button(action_id: str, label: str, value: str, style: str | None = None) -> Block:
    """A button whose click carries ``value`` (cut to what Slack keeps); ``style``: ``primary``
    or ``danger``."""
    element: Block = {"type": "button", "action_id": action_id}
    if style is not None:
        element["style"] = style
    element.update(text=plain(label, BUTTON_TEXT), value=value[:BUTTON_VALUE])
    return element


OPTION_TEXT, OPTION_VALUE, OVERFLOW_OPTIONS = 75, 150, 5  # an overflow menu's limits


def overflow(action_id: str, options: list[tuple[str, str]]) -> Block:
    """An overflow menu (the "⋯" button) of ``(label, value)`` options, cut to Slack's limits."""
    return {
        "type": "overflow",
        "action_id": action_id,
        "options": [
            {"text": plain(label, OPTION_TEXT), "value": value[:OPTION_VALUE]}
            for label, value in options[:OVERFLOW_OPTIONS]
        ],
    }


def actions(block_id: str, elements: list[Block]) -> Block:
    return {"type": "actions", "block_id": block_id, "elements": elements}


def slack_date(epoch: float) -> str:
    """A date Slack shows in each reader's own time zone, with a UTC fallback."""
    fallback = time.strftime("%Y-%m-%d %H:%M UTC", time.gmtime(epoch))
    return f"<!date^{int(epoch)}^{{date_short_pretty}} at {{time}}|{fallback}>"


def texts(node: object) -> Iterator[str]:
    """Every ``text`` string in ``node`` (blocks, a block, an element): what Slack counts."""
    # Only a dict or a list can hold one: no generator is made for the scalars beside them.
    if isinstance(node, dict):
        for key, value in node.items():
            if key == "text" and isinstance(value, str):
                yield value
            elif isinstance(value, (dict, list)):
                yield from texts(value)
    elif isinstance(node, list):
        for item in node:
            if isinstance(item, (dict, list)):
                yield from texts(item)


MIN_CUT_TEXT = 100  # a text is never cut below this by ``fit_text``


def _cuttable(blocks: list[Block]) -> Iterator[dict[str, Any]]:
    """The text objects a person reads at length: sections' text and fields, contexts' texts."""
    for block in blocks:
        if block.get("type") == "section":
            if isinstance(block.get("text"), dict):
                yield block["text"]
            yield from (f for f in block.get("fields") or [] if isinstance(f, dict))
        elif block.get("type") == "context":
            yield from (e for e in block.get("elements") or [] if isinstance(e, dict) and "text" in e)


def fit_text(blocks: list[Block], limit: int = CARD_TEXT) -> list[Block]:
    """A copy of ``blocks`` whose text fits in ``limit`` characters in all: the longest texts are
    cut first (Slack refuses more than about 12,000 as ``msg_blocks_too_long``). Buttons and
    headers are never cut; texts not below ``MIN_CUT_TEXT``."""
    fitted = copy.deepcopy(blocks)
    total = sum(len(text) for text in texts(fitted))
    objects = list(_cuttable(fitted))
    while total > limit and objects:
        longest = max(objects, key=lambda obj: len(str(obj.get("text", ""))))
        current = len(str(longest.get("text", "")))
        if current <= MIN_CUT_TEXT:
            break
        longest["text"] = truncate(str(longest["text"]), max(MIN_CUT_TEXT, current - (total - limit)))
        total -= current - len(longest["text"])
    return fitted
