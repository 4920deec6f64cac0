"""The thread's "Similar:" note (``bot.memory.notes``) in Block Kit, and what it becomes after a Forget.

One section per past incident: the note's line, inert (it quotes what an earlier run found: model
and tool text), and a **Forget** button whose value is the incident's id. Why a button on the line
rather than a message shortcut or a reply command: the note is where a person sees that the bot
remembered something wrong or unwanted, a button there needs no new Slack scope or command, and
Slack's signed click says who clicked which message in which channel, which is exactly what the
click is checked against (``bot.slack.handlers.forget_clicks``). The button asks for confirmation
first: a forgotten incident cannot be brought back.
"""

from __future__ import annotations

from collections.abc import Sequence
from typing import Any

from bot.memory.notes import note_line
from bot.memory.similar import Similar
from bot.slack.rendering.blockkit import button, plain, section
from bot.slack.rendering.mrkdwn import inert, mention

ACTION_FORGET_INCIDENT = "chatops_forget_incident"
BLOCK_PREFIX = "similar-"
Block = dict[str, Any]


def similar_blocks(found: Sequence[Similar]) -> list[Block]:
    """The note: one line per incident, each with its Forget button."""
    blocks = []
    for similar in found:
        block = section(inert(note_line(similar)))
        block["block_id"] = f"{BLOCK_PREFIX}{similar.incident.id}"
        forget = button(ACTION_FORGET_INCIDENT, "Forget", similar.incident.id)
        forget["confirm"] = {
            "title": plain("Forget this incident?", 100),
            "text": plain(
                "The bot will no longer offer it to any run, here or elsewhere. This cannot be undone.", 300
            ),
            "confirm": plain("Forget", 30),
            "deny": plain("Keep", 30),
        }
        block["accessory"] = forget
        blocks.append(block)
    return blocks


def forgotten_blocks(blocks: Sequence[object], incident_id: str, user: str) -> list[Block]:
    """The note as it was (the clicked message's own blocks), the forgotten incident's line replaced
    by who forgot it. Only a block this module made is kept: anything else in the payload is dropped."""
    shown: list[Block] = []
    for block in blocks:
        if not isinstance(block, dict) or not str(block.get("block_id", "")).startswith(BLOCK_PREFIX):
            continue
        if block["block_id"] == f"{BLOCK_PREFIX}{incident_id}":
            shown.append(section(f":wastebasket: A past incident was forgotten by {mention(user)}."))
        else:
            shown.append(block)
    return shown
