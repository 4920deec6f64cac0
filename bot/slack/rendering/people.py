"""People the run knows, named as Slack mentions instead of raw IDs wherever the bot shows text.

Tools report who approved a call by Slack ID ("(approved by U_BOB)") and the model repeats it.
In the answer, the run card's steps, the stream's tasks and the stop notice, such an ID becomes
``<@U_BOB>`` only when it is one of the run's own people: its requester, whoever decided its
approvals (``confirmed_by``, written by the approval gate), anyone whose thread message it read.
Those IDs come from Slack's events and clicks, never from the model, so the model cannot use this
to mention (and notify) anyone else; any other ID-looking word stays text. Code is left as it is
(Slack shows no mention inside code).
"""

from __future__ import annotations

import re
from collections.abc import Iterable

from bot.runs.approvals import Approval
from bot.runs.presenter import Step
from bot.slack.rendering.mrkdwn import mention

_PERSON = re.compile(r"[UW][A-Z0-9_]{2,}")
_CODE = re.compile(r"```.*?```|`[^`\n]*`", re.DOTALL)


def run_people(requester: str, approvals: Iterable[Approval]) -> frozenset[str]:
    """The Slack user IDs a run involves (its requester, its deciders, the people it read)."""
    people = {requester}
    for approval in approvals:
        people.add(approval.decided_by)
        people.update(approval.involved)
    return frozenset(p for p in people if _PERSON.fullmatch(p))


def step_people(requester: str, steps: Iterable[Step]) -> frozenset[str]:
    """The requester and whoever approved the steps' calls (the gate's ``confirmed_by``)."""
    people = {requester, *(step.confirmed_by for step in steps if step.confirmed_by)}
    return frozenset(p for p in people if _PERSON.fullmatch(p))


def name_people(text: str, people: frozenset[str]) -> str:
    """``text`` (mrkdwn) with each bare ID of ``people`` outside code as a mention."""
    if not people:
        return text
    names = re.compile(
        r"(?<![\w@<#|/&;])("
        + "|".join(re.escape(p) for p in sorted(people, key=len, reverse=True))
        + r")(?![\w>|])"
    )
    pieces: list[str] = []
    position = 0
    for code in _CODE.finditer(text):
        pieces.append(names.sub(lambda m: mention(m.group(1)), text[position : code.start()]))
        pieces.append(code.group(0))
        position = code.end()
    pieces.append(names.sub(lambda m: mention(m.group(1)), text[position:]))
    return "".join(pieces)
