"""A run's texts split by who wrote them, for the provenance of its calls (``agent.provenance``).

**A person wrote** (requested): the run's request (a mention's text; an alert's target and labels
as the operator's route gave them, ``RunRecord.requested_text``) and the thread replies that
reached the run through its inbox from a person's Slack account (``U…``/``W…``: a reply Slack
vouches its author posted; the alert's own notes are delivered as ``Alertmanager`` and are read
text). A Refute or Focus click is the clicker's choice, but the hypothesis it names is the
model's statement: only ``<@U…> refutes H2:`` counts, the statement is read text.

**The bot read** (derived when nothing a person wrote has it): every tool result the loop may
cite, by evidence id (``agent.evidence``: a refusal, which may repeat what the model sent, and
``update_findings``, which repeats its claims, are not sources), and the rest of the opening
message (an alert's annotations and runbook outline, earlier runs of the thread, similar
incidents), without an id.

Never anyone's request: the model's own messages and tool-call arguments, and a condensed
summary (which the model wrote). A condensed history has lost its older replies: their values
are then derived, the safe side.
"""

from __future__ import annotations

import re
from collections.abc import Mapping, Sequence

from agent.evidence import EvidenceIndex
from agent.provenance import Provenance, provenance_of
from agent.types import Message
from bot.policy.file import USER  # a Slack user ID, as the policy file names people

_STEER = re.compile(r"<@[UW][A-Z0-9_]{1,40}> (?:refutes|asks to focus on) H[0-9]{1,4}: ")


def run_texts(request: str, history: Sequence[Message]) -> tuple[list[str], list[tuple[str | None, str]]]:
    """``(requested, read)``: what people wrote, and ``(evidence id or None, text)`` the bot read."""
    requested = [request]
    read: list[tuple[str | None, str]] = []
    first = True
    for message in history:
        if message.role != "user":
            continue
        text = message.content or ""
        if message.meta.get("inbox_id"):
            if USER.fullmatch(str(message.meta.get("slack_user") or "")):
                steer = _STEER.match(text)
                requested.append(text[: steer.end()] if steer else text)
                if steer:
                    read.append((None, text[steer.end() :]))
            else:
                read.append((None, text))  # the alert's own notes
        elif first and "condensed" not in message.meta:
            read.append((None, text))  # the opening message: the request is in ``request``
        first = False
    read += [(source.ref, source.output) for source in EvidenceIndex().sync(history).citable()]
    return requested, read


def call_provenance(arguments: Mapping[str, object], request: str, history: Sequence[Message]) -> Provenance:
    """Where each checked value of a call's ``arguments`` came from, in a run with ``history``."""
    requested, read = run_texts(request, history)
    return provenance_of(arguments, requested, read)
