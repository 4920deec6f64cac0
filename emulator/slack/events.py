"""Events API payloads: which events a new message causes, and the ``event_callback`` envelope around each.

A person's message in a channel the app is in arrives as a ``message`` event (``message.channels``);
when it mentions the app it also arrives, separately and with its own ``event_id``, as
``app_mention``. The app's own posts come back as ``message`` events carrying ``bot_id``.
"""

from __future__ import annotations

import base64
import json
import time
from typing import Any

from emulator.slack.ids import random_id
from emulator.slack.model import Message
from emulator.slack.state import Workspace
from emulator.slack.text import mentioned_users


def envelope(ws: Workspace, event: dict[str, Any]) -> dict[str, Any]:
    """Wrap ``event`` the way Slack posts it to the Request URL."""
    cfg = ws.config
    context = {"et": event["type"], "tid": cfg.team_id, "aid": cfg.app_id, "cid": event.get("channel", "")}
    encoded = (
        base64.urlsafe_b64encode(json.dumps(context, separators=(",", ":")).encode()).decode().rstrip("=")
    )
    grid = {"enterprise_id": cfg.enterprise_id} if cfg.enterprise_id else {}
    return {
        "token": cfg.verification_token,
        **grid,
        "team_id": cfg.team_id,
        "context_team_id": cfg.team_id,
        "context_enterprise_id": cfg.enterprise_id,
        "api_app_id": cfg.app_id,
        "event": event,
        "type": "event_callback",
        "event_id": random_id("Ev"),
        "event_time": int(time.time()),
        "authorizations": [
            {
                "enterprise_id": cfg.enterprise_id,
                "team_id": cfg.team_id,
                "user_id": cfg.bot_user_id,
                "is_bot": True,
                "is_enterprise_install": False,
            }
        ],
        "is_ext_shared_channel": False,
        "event_context": f"4-{encoded}",
    }


def message_event(ws: Workspace, msg: Message) -> dict[str, Any]:
    """The ``message`` event for a new message (with ``thread_ts``/``root`` for thread replies)."""
    body = ws.render(msg)
    for key in ("reactions", "reply_count", "reply_users_count", "latest_reply", "reply_users", "subscribed"):
        body.pop(key, None)  # a brand-new message has no reactions or replies yet
    body.pop("is_locked", None)
    body.update({"channel": msg.channel, "event_ts": msg.ts, "channel_type": channel_type(ws, msg.channel)})
    return body


def channel_type(ws: Workspace, channel: str) -> str:
    """``channel_type`` of a message event: ``group`` for a private channel (``message.groups``)."""
    found = ws.channels.get(channel)
    return "group" if found is not None and found.is_private else "channel"


def app_mention_event(ws: Workspace, msg: Message) -> dict[str, Any]:
    """The ``app_mention`` event: the message's fields under another type."""
    body: dict[str, Any] = {"type": "app_mention", "user": msg.user, "text": msg.text, "ts": msg.ts}
    if msg.bot_id:  # another app mentioning this one
        body["bot_id"] = msg.bot_id
    if msg.subtype:
        body["subtype"] = msg.subtype
    if not msg.user:
        del body["user"]
    if msg.client_msg_id:
        body["client_msg_id"] = msg.client_msg_id
    body["team"] = ws.config.team_id
    if msg.blocks is not None:
        body["blocks"] = msg.blocks
    if msg.is_reply and msg.thread_ts:
        body["thread_ts"] = msg.thread_ts
        parent = ws.messages[msg.channel].get(msg.thread_ts)
        if parent is not None:
            body["parent_user_id"] = parent.user
    body.update({"channel": msg.channel, "event_ts": msg.ts})
    return body


def events_for_changed_message(
    ws: Workspace, msg: Message, previous: dict[str, Any], editor: str
) -> list[dict[str, Any]]:
    """The ``message_changed`` event after ``chat.update``: a ``message`` event with that subtype,
    ``hidden``, the new ``message`` and the ``previous_message``, sent to apps subscribed to the
    channel's messages (docs.slack.dev/reference/events/message/message_changed)."""
    cfg = ws.config
    channel = ws.channels.get(msg.channel)
    if channel is None or cfg.bot_user_id not in channel.members or msg.ephemeral_to is not None:
        return []
    if editor == cfg.bot_user_id and not cfg.deliver_bot_messages:
        return []
    with ws.lock:
        current = ws.render(msg)
        event = {
            "type": "message",
            "subtype": "message_changed",
            "message": current,
            "previous_message": previous,
            "channel": msg.channel,
            "hidden": True,
            "ts": ws.clock.next(),
            "channel_type": channel_type(ws, msg.channel),
        }
        event["event_ts"] = event["ts"]
    return [envelope(ws, event)]


def events_for_new_message(ws: Workspace, msg: Message) -> list[dict[str, Any]]:
    """The envelopes Slack would send the app for ``msg``: none, ``message``, or both with ``app_mention``."""
    cfg = ws.config
    channel = ws.channels.get(msg.channel)
    if channel is None or cfg.bot_user_id not in channel.members or msg.ephemeral_to is not None:
        return []
    from_bot = msg.user == cfg.bot_user_id
    if from_bot and not cfg.deliver_bot_messages:
        return []
    with ws.lock:
        events = [message_event(ws, msg)]
        if not from_bot and cfg.bot_user_id in mentioned_users(msg.text):
            events.insert(0, app_mention_event(ws, msg))
    return [envelope(ws, event) for event in events]
