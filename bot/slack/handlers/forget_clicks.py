"""Forget: a past incident's button on the thread's "Similar:" note (``bot.slack.rendering.similar``).

Decided before Slack is answered (Redis and the cached identity lookup, milliseconds), like the
other clicks: Slack does not retry clicks, so a 200 means "decided". Nothing in the payload is
trusted but what Slack signs (who clicked, in which channel, on which message):

* the value must be an incident id, the channel one the bot serves, and the memory on;
* the message clicked must be a "Similar:" note of the bot's that showed that very incident
  (``memory:note:{channel}:{ts}``, written when the note was posted): a value forged to name
  another incident, a button copied to another message or channel, names nothing there;
* the clicker must be someone who may decide in that channel (``Deciders.decide(FORGET)``: who
  may approve there, under the policy file or ``CHATOPS_APPROVERS``);
* the incident is taken off the note first, in one ``SREM``: of two clicks (a double click, a
  replay) only one finds it, so it is forgotten and audited once; a later replay is refused.

Forgetting is the store's (``IncidentStore.forget``): the record, its time entry, its feedback and
every index entry. It is audited (``incident_forgotten``: who, where, from which message). The note
is then redrawn with the line replaced by who forgot it; a refused click tells the clicker alone why.
"""

from __future__ import annotations

import logging
import re
from concurrent.futures import Executor
from dataclasses import dataclass
from typing import Any

import redis
from slack_bolt import Ack, App, BoltResponse

from bot.errors import NotReplicatedError
from bot.observability.audit import AuditKind
from bot.policy.deciders import Action
from bot.slack.delivery.blocks import redacted_blocks
from bot.slack.handlers.findings_clicks import Clicked
from bot.slack.handlers.runtime import WebRuntime
from bot.slack.rendering.blockkit import notification_text
from bot.slack.rendering.similar import ACTION_FORGET_INCIDENT, forgotten_blocks

log = logging.getLogger(__name__)

_ID = re.compile(r"[0-9a-f]{32}")
NOT_A_NOTE = "This button does not belong to a note of past incidents in this channel: nothing was forgotten."
NO_MEMORY = "The bot keeps no past incidents here: nothing was forgotten."
FORGOTTEN = "The bot has forgotten that incident: no run will be offered it again."


@dataclass(frozen=True)
class Forgot:
    """What a click did: ``forgotten`` (the incident's id), or ``note`` (to the clicker alone)."""

    note: str
    forgotten: str = ""


class ForgetClicks:
    """The ack half of a Forget click (see the module)."""

    def __init__(self, runtime: WebRuntime) -> None:
        self._rt = runtime

    def forget(self, value: str, click: Clicked) -> Forgot:
        memory = self._rt.memory()
        if memory is None:
            return Forgot(NO_MEMORY)
        if not _ID.fullmatch(value) or not click.channel or not click.message_ts:
            return Forgot(NOT_A_NOTE)
        if not self._rt.channel_allowed(click.channel):
            return Forgot(NOT_A_NOTE)
        store = memory.store
        if not store.on_note(click.channel, click.message_ts, value):
            return Forgot(NOT_A_NOTE)
        verdict = self._rt.deciders.decide(click.user, Action.FORGET, channel=click.channel)
        if not verdict.allowed:
            return Forgot(f"{verdict.reason} Nothing was forgotten.")
        if not store.forget_from_note(click.channel, click.message_ts, value):
            return Forgot(NOT_A_NOTE)  # another click took it off this note a moment ago
        removed = store.forget(value)
        self._rt.service().audit.record(
            AuditKind.INCIDENT_FORGOTTEN,
            value,
            user=click.user,
            channel=click.channel,
            message_ts=click.message_ts,
            removed=removed,
        )
        log.info("incident %s forgotten by %s from %s", value, click.user, click.channel)
        return Forgot(FORGOTTEN, forgotten=value)


def _text(node: object, *path: str) -> str:
    for key in path:
        node = node.get(key) if isinstance(node, dict) else None
    return node if isinstance(node, str) else ""


def clicked_from(body: dict[str, Any]) -> tuple[str, Clicked]:
    """The button's value and where Slack says the click came from (empty strings match nothing)."""
    actions = body.get("actions")
    action = actions[0] if isinstance(actions, list) and actions and isinstance(actions[0], dict) else {}
    where = Clicked(
        _text(body, "user", "id"),
        _text(body, "container", "channel_id") or _text(body, "channel", "id"),
        _text(body, "container", "message_ts"),
        _text(body, "container", "thread_ts") or None,
    )
    return _text(action, "value"), where


def register_forget(app: App, runtime: WebRuntime, after: Executor) -> None:
    """The Forget button's handler: decided before the answer (an error answer when Redis cannot
    decide, or no replica confirms, so Slack tells the clicker it failed); then shown afterwards."""
    clicks = ForgetClicks(runtime)

    def clicked(body: dict[str, Any], ack: Ack) -> BoltResponse | None:
        value, where = clicked_from(body)
        try:
            forgot = clicks.forget(value, where)
            if forgot.forgotten:
                runtime.replication().confirm()
        except (redis.RedisError, NotReplicatedError):
            log.error("the forget click by %s could not be decided (or no replica confirmed it)", where.user)
            return BoltResponse(status=503, body="the click could not be decided; try again")
        ack()
        message = body.get("message")
        blocks = message.get("blocks") if isinstance(message, dict) else None
        after.submit(_shown, runtime, forgot, where, blocks if isinstance(blocks, list) else [])
        return None

    app.action(ACTION_FORGET_INCIDENT)(clicked)


def _shown(runtime: WebRuntime, forgot: Forgot, where: Clicked, blocks: list[Any]) -> None:
    """The note redrawn with the forgotten line replaced by who forgot it; the clicker told (alone)."""
    shown = forgotten_blocks(blocks, forgot.forgotten, where.user) if forgot.forgotten else []
    redraw_and_tell(runtime, where, shown, forgot.note, "forget")


def redraw_and_tell(runtime: WebRuntime, where: Clicked, blocks: list[Any], note: str, what: str) -> None:
    """After a decided click: the message clicked redrawn as ``blocks`` (none: left as it is), and
    the clicker told ``note``, alone. Slack's failures are logged: the click was decided."""
    client = runtime.client()
    try:
        if blocks:
            client.chat_update(
                channel=where.channel,
                ts=where.message_ts,
                text=notification_text(blocks),
                blocks=redacted_blocks(blocks, runtime.redact),
            )
        if where.channel and where.user:
            client.chat_postEphemeral(
                channel=where.channel, user=where.user, text=note, thread_ts=where.thread_ts
            )
    except Exception:
        log.exception("the %s click by %s was decided, but not shown", what, where.user)
