"""Web API methods that write messages: ``chat.*`` and ``reactions.*``."""

from __future__ import annotations

from typing import Any

from emulator.slack.events import events_for_changed_message, events_for_new_message
from emulator.slack.model import Channel, Message
from emulator.slack.state import Workspace
from emulator.slack.webapi import ApiResult, Handler, Params, SlackError

MAX_TEXT = 40_000


def bot_channel(ws: Workspace, ref: str) -> Channel:
    """The channel the bot is acting in: ``channel_not_found`` / ``not_in_channel`` as Slack answers."""
    channel = ws.channel(ref) if ref else None
    if channel is None or not channel.visible_to(ws.config.bot_user_id):
        raise SlackError("channel_not_found")  # a private channel the bot is not in, as Slack answers
    if ws.config.bot_user_id not in channel.members:
        raise SlackError("not_in_channel")
    return channel


def _content(p: Params) -> tuple[str, list[dict[str, Any]] | None]:
    """``text`` and ``blocks`` (or ``markdown_text``), checked as ``chat.postMessage`` checks them."""
    text, markdown = p.text("text"), p.text("markdown_text")
    blocks = p.blocks()
    if markdown:
        if text or blocks:
            raise SlackError("markdown_text_conflict")
        if len(markdown) > 12_000:
            raise SlackError("msg_too_long")
        return markdown, [{"type": "markdown", "text": markdown}]
    if not text and not blocks and not p.values.get("attachments"):
        raise SlackError("no_text")
    if len(text) > MAX_TEXT:
        raise SlackError("msg_too_long")
    return text, blocks


def _auto_parse(p: Params) -> bool:
    """Whether Slack's automatic parsing applies to the ``text`` (bare ``@here``, ``#name``...)."""
    return p.text("parse") == "full" or p.flag("link_names")


def _message(ws: Workspace, channel: Channel, ts: str) -> Message:
    msg = ws.message(channel.id, ts) if ts else None
    if msg is None or msg.ephemeral_to is not None:
        raise SlackError("message_not_found")
    return msg


def post_message(ws: Workspace, p: Params) -> ApiResult:
    """``chat.postMessage``: post as the bot, in the channel or a thread (optionally broadcast)."""
    channel = bot_channel(ws, p.text("channel"))
    text, blocks = _content(p)
    thread_ts = p.text("thread_ts") or None
    if thread_ts and ws.message(channel.id, thread_ts) is None:
        raise SlackError("thread_not_found")
    metadata = p.json("metadata") if p.values.get("metadata") else None
    msg = ws.add_message(
        channel.id,
        ws.config.bot_user_id,
        text,
        blocks,
        thread_ts=thread_ts,
        broadcast=p.flag("reply_broadcast"),
        metadata=metadata if isinstance(metadata, dict) else None,
    )
    msg.auto_parse = _auto_parse(p)
    body = {"ok": True, "channel": channel.id, "ts": msg.ts, "message": ws.render(msg)}
    return ApiResult(body, envelopes=events_for_new_message(ws, msg))


def update(ws: Workspace, p: Params) -> ApiResult:
    """``chat.update``: replace the text/blocks of one of the bot's messages."""
    channel = bot_channel(ws, p.text("channel"))
    msg = _message(ws, channel, p.text("ts"))
    if msg.user != ws.config.bot_user_id:
        raise SlackError("cant_update_message")
    text, blocks = _content(p)
    previous = ws.render(msg)
    ws.update_message(msg, text, blocks, ws.config.bot_user_id)
    msg.auto_parse = _auto_parse(p)
    return ApiResult(
        {"ok": True, "channel": channel.id, "ts": msg.ts, "text": text, "message": ws.render(msg)},
        envelopes=events_for_changed_message(ws, msg, previous, ws.config.bot_user_id),
    )


def post_ephemeral(ws: Workspace, p: Params) -> ApiResult:
    """``chat.postEphemeral``: a message only ``user`` sees, answered with ``message_ts``."""
    channel = bot_channel(ws, p.text("channel"))
    user = p.text("user")
    if user not in channel.members:
        raise SlackError("user_not_in_channel")
    text, blocks = _content(p)
    thread_ts = p.text("thread_ts") or None
    if thread_ts and ws.message(channel.id, thread_ts) is None:
        thread_ts = None  # Slack shows an ephemeral reply to a missing thread in the channel
    msg = ws.add_message(
        channel.id, ws.config.bot_user_id, text, blocks, thread_ts=thread_ts, ephemeral_to=user
    )
    msg.auto_parse = _auto_parse(p)
    return ApiResult({"ok": True, "message_ts": msg.ts})


def delete(ws: Workspace, p: Params) -> ApiResult:
    """``chat.delete``: remove one of the bot's messages."""
    channel = bot_channel(ws, p.text("channel"))
    msg = _message(ws, channel, p.text("ts"))
    if msg.user != ws.config.bot_user_id:
        raise SlackError("cant_delete_message")
    ws.delete_message(msg)
    return ApiResult({"ok": True, "channel": channel.id, "ts": msg.ts})


def get_permalink(ws: Workspace, p: Params) -> ApiResult:
    """``chat.getPermalink``: the message's URL in Slack's ``/archives/C/p<ts>`` form."""
    channel = ws.channel(p.text("channel"))
    if channel is None or not channel.visible_to(ws.config.bot_user_id):
        raise SlackError("channel_not_found")  # a private channel the bot is not in, as Slack answers
    msg = _message(ws, channel, p.text("message_ts"))
    link = f"https://{ws.config.team_domain}.slack.com/archives/{channel.id}/p{msg.ts.replace('.', '')}"
    if msg.is_reply:
        link += f"?thread_ts={msg.thread_ts}&cid={channel.id}"
    return ApiResult({"ok": True, "channel": channel.id, "permalink": link})


def _reaction_target(ws: Workspace, p: Params) -> tuple[Message, str]:
    name = p.text("name").strip(":")
    if not p.text("channel") or not p.text("timestamp"):
        raise SlackError("no_item_specified")
    if not name or any(c.isspace() for c in name):
        raise SlackError("invalid_name")
    channel = bot_channel(ws, p.text("channel"))
    return _message(ws, channel, p.text("timestamp")), name


def reactions_add(ws: Workspace, p: Params) -> ApiResult:
    """``reactions.add``: the bot reacts; ``already_reacted`` the second time."""
    msg, name = _reaction_target(ws, p)
    if not ws.react(msg, name, ws.config.bot_user_id):
        raise SlackError("already_reacted")
    return ApiResult({"ok": True})


def reactions_remove(ws: Workspace, p: Params) -> ApiResult:
    """``reactions.remove``: ``no_reaction`` when the bot had not reacted so."""
    msg, name = _reaction_target(ws, p)
    if not ws.react(msg, name, ws.config.bot_user_id, add=False):
        raise SlackError("no_reaction")
    return ApiResult({"ok": True})


HANDLERS: dict[str, Handler] = {
    "chat.postMessage": post_message,
    "chat.update": update,
    "chat.postEphemeral": post_ephemeral,
    "chat.delete": delete,
    "chat.getPermalink": get_permalink,
    "reactions.add": reactions_add,
    "reactions.remove": reactions_remove,
}
