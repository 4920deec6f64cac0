"""Streamed messages: ``chat.startStream``, ``chat.appendStream`` and ``chat.stopStream``.

As on docs.slack.dev/reference/methods/chat.startStream (and appendStream, stopStream):

* ``chat.startStream`` (``channel``, ``thread_ts``; in a channel also ``recipient_user_id`` and
  ``recipient_team_id``; optional ``markdown_text``, ``chunks``, ``task_display_mode`` =
  ``timeline`` | ``plan``) posts a reply in the thread that is *streaming* and answers its ``ts``;
* ``chat.appendStream`` (``channel``, ``ts``, ``markdown_text`` and/or ``chunks``) adds to it;
* ``chat.stopStream`` (``channel``, ``ts``, optional ``markdown_text``, ``chunks``, ``blocks``,
  ``metadata``) adds the last of it and finalises it: ``blocks`` (feedback buttons, say) are
  rendered at the bottom of the message, and nothing can be appended afterwards.

Chunks are ``markdown_text`` (``text``), ``task_update`` (``id``, ``title``, ``status`` =
``pending`` | ``in_progress`` | ``complete`` | ``error``, optional ``details``, ``output``,
``sources``: a later chunk with the same ``id`` updates that task), ``plan_update`` (``title``)
and ``blocks`` (``blocks``). Errors: ``message_not_found`` for a ``ts`` that is no message of
``channel`` (a stream of another channel too), ``message_not_in_streaming_state`` for a message
that is not (or no longer) streaming, ``msg_too_long`` for more than 12,000 characters of
markdown in one call or more than ``MAX_STREAM_TEXT`` in the whole message, ``invalid_chunks``
for a chunk of no known form. A stream idle for ``STREAM_IDLE_SECONDS`` is closed by Slack
(python-slack-sdk#1859: ``message_not_in_streaming_state`` after a few minutes); so it is here.

Scopes: ``chat:write`` for all three. Tiers: startStream and stopStream Tier 2, appendStream
Tier 4 (docs.slack.dev/reference/methods/chat.appendStream: "Tier 4: 100+ per minute";
api.slack.com/methods/chat.stopStream: "Tier 2"; startStream is taken as stopStream's).

The control API shows a streamed message with ``stream`` (state, tasks in order, plan title,
every append with its chunks) and reads the tasks' texts for what is live in it (``live_nodes``).
"""

from __future__ import annotations

import time
from typing import Any

from emulator.slack.blocks import block_errors
from emulator.slack.events import events_for_changed_message, events_for_new_message
from emulator.slack.methods_chat import bot_channel
from emulator.slack.model import Message
from emulator.slack.state import Workspace
from emulator.slack.webapi import ApiResult, BlocksError, Handler, Params, SlackError

MAX_MARKDOWN = 12_000  # per call and per markdown chunk ("Limit this field to 12,000 characters")
MAX_STREAM_TEXT = 40_000  # all the markdown of one streamed message (chat.postMessage's text limit)
STREAM_IDLE_SECONDS = 300.0
TASK_STATUSES = frozenset({"pending", "in_progress", "complete", "error"})
DISPLAY_MODES = frozenset({"timeline", "plan"})
_TASK_TEXTS = ("title", "details", "output")
MAX_TASK_TEXT = 2_000

SCOPES: dict[str, tuple[str, ...]] = {
    "chat.startStream": ("chat:write",),
    "chat.appendStream": ("chat:write",),
    "chat.stopStream": ("chat:write",),
}
TIERS: dict[str, int] = {"chat.startStream": 2, "chat.appendStream": 4, "chat.stopStream": 2}


def _chunks(p: Params) -> list[dict[str, Any]]:
    """``chunks``, each of a known form (``invalid_chunks`` otherwise)."""
    if not p.values.get("chunks"):
        return []
    chunks = p.json("chunks")
    if not isinstance(chunks, list) or not all(isinstance(c, dict) for c in chunks):
        raise SlackError("invalid_chunks")
    for chunk in chunks:
        kind = chunk.get("type")
        if kind == "markdown_text":
            if not isinstance(chunk.get("text"), str):
                raise SlackError("invalid_chunks")
            if len(chunk["text"]) > MAX_MARKDOWN:
                raise SlackError("msg_too_long")
        elif kind == "task_update":
            if not all(isinstance(chunk.get(k), str) and chunk[k] for k in ("id", "title", "status")):
                raise SlackError("invalid_chunks")
            if chunk["status"] not in TASK_STATUSES:
                raise SlackError("invalid_chunks")
            if any(len(str(chunk.get(k) or "")) > MAX_TASK_TEXT for k in _TASK_TEXTS):
                raise SlackError("msg_too_long")
        elif kind == "plan_update":
            if not isinstance(chunk.get("title"), str):
                raise SlackError("invalid_chunks")
        elif kind == "blocks":
            blocks = chunk.get("blocks")
            if not isinstance(blocks, list):
                raise SlackError("invalid_chunks")
            reasons = block_errors(blocks)
            if reasons:
                raise BlocksError(reasons)
        else:
            raise SlackError("invalid_chunks")
    return chunks


def _content(p: Params, *, required: bool) -> tuple[str, list[dict[str, Any]]]:
    markdown = p.text("markdown_text")
    if len(markdown) > MAX_MARKDOWN:
        raise SlackError("msg_too_long")
    chunks = _chunks(p)
    if required and not markdown and not chunks:
        raise SlackError(
            "invalid_arguments",
            response_metadata={"messages": ["[ERROR] missing 'markdown_text' or 'chunks'"]},
        )
    return markdown, chunks


def _apply(msg: Message, markdown: str, chunks: list[dict[str, Any]]) -> None:
    """Add one call's markdown and chunks to the streamed message (checked whole first)."""
    stream = msg.stream
    assert stream is not None
    added = markdown + "".join(c["text"] for c in chunks if c["type"] == "markdown_text")
    if len(stream["markdown"]) + len(added) > MAX_STREAM_TEXT:
        raise SlackError("msg_too_long")
    text = markdown
    for chunk in chunks:
        if chunk["type"] == "markdown_text":
            text += chunk["text"]
        elif chunk["type"] == "task_update":
            task = stream["tasks"].setdefault(chunk["id"], {"id": chunk["id"]})
            task.update({k: v for k, v in chunk.items() if k != "type"})
            if chunk["id"] not in stream["task_order"]:
                stream["task_order"].append(chunk["id"])
        elif chunk["type"] == "plan_update":
            stream["plan_title"] = chunk["title"]
        elif chunk["type"] == "blocks":
            stream["blocks"].extend(chunk["blocks"])
    stream["markdown"] += text
    stream["appends"].append({"markdown_text": markdown, "chunks": chunks, "at": time.time()})
    stream["updated"] = time.monotonic()
    msg.text = stream["markdown"]
    msg.blocks = _blocks(stream)


def _blocks(stream: dict[str, Any], final: list[dict[str, Any]] | None = None) -> list[dict[str, Any]] | None:
    """The message's blocks: its markdown so far, blocks chunks, then (once stopped) ``final``."""
    blocks: list[dict[str, Any]] = []
    if stream["markdown"]:
        blocks.append({"type": "markdown", "text": stream["markdown"]})
    blocks.extend(stream["blocks"])
    blocks.extend(final or [])
    return blocks or None


def _streaming(ws: Workspace, p: Params) -> Message:
    """The bot's message at ``ts`` in ``channel``, still streaming."""
    channel = bot_channel(ws, p.text("channel"))
    msg = ws.message(channel.id, p.required("ts"))
    if msg is None or msg.ephemeral_to is not None:
        raise SlackError("message_not_found")
    if msg.user != ws.config.bot_user_id:
        raise SlackError("cant_update_message")
    stream = msg.stream
    idle = stream is not None and time.monotonic() - stream["updated"] > STREAM_IDLE_SECONDS
    if stream is not None and stream["state"] == "streaming" and idle:
        stream["state"] = "expired"
    if stream is None or stream["state"] != "streaming":
        raise SlackError("message_not_in_streaming_state")
    return msg


def start_stream(ws: Workspace, p: Params) -> ApiResult:
    """``chat.startStream``: a streaming reply in ``thread_ts`` for ``recipient_user_id``."""
    channel = bot_channel(ws, p.text("channel"))
    thread_ts = p.required("thread_ts")
    parent = ws.message(channel.id, thread_ts)
    if parent is None:
        raise SlackError("thread_not_found")
    user_id, team_id = p.text("recipient_user_id"), p.text("recipient_team_id")
    if not team_id:
        raise SlackError("missing_recipient_team_id")
    if not user_id:
        raise SlackError("missing_recipient_user_id")
    recipient = ws.users.get(user_id)
    if recipient is None or recipient.deleted:
        raise SlackError("user_not_found")
    if team_id not in (ws.config.team_id, recipient.home_team(ws.config.team_id)):
        raise SlackError("team_not_found")
    mode = p.text("task_display_mode") or "timeline"
    if mode not in DISPLAY_MODES:
        raise SlackError(
            "invalid_arguments", response_metadata={"messages": ["[ERROR] invalid 'task_display_mode'"]}
        )
    markdown, chunks = _content(p, required=False)
    msg = ws.add_message(channel.id, ws.config.bot_user_id, "", None, thread_ts=parent.ts)
    with ws.lock:
        msg.stream = {
            "state": "streaming",
            "recipient_user_id": user_id,
            "recipient_team_id": team_id,
            "task_display_mode": mode,
            "markdown": "",
            "tasks": {},
            "task_order": [],
            "plan_title": None,
            "blocks": [],
            "appends": [],
            "updated": time.monotonic(),
        }
        try:
            _apply(msg, markdown, chunks)
        except SlackError:
            ws.delete_message(msg)
            raise
    ws.publish({"type": "message_changed", "channel": channel.id, "ts": msg.ts, "thread_ts": msg.thread_ts})
    return ApiResult(
        {"ok": True, "channel": channel.id, "ts": msg.ts}, envelopes=events_for_new_message(ws, msg)
    )


def append_stream(ws: Workspace, p: Params) -> ApiResult:
    """``chat.appendStream``: more markdown and chunks for a streaming message."""
    msg = _streaming(ws, p)
    markdown, chunks = _content(p, required=True)
    _apply(msg, markdown, chunks)
    ws.publish({"type": "message_changed", "channel": msg.channel, "ts": msg.ts, "thread_ts": msg.thread_ts})
    return ApiResult({"ok": True, "channel": msg.channel, "ts": msg.ts})


def stop_stream(ws: Workspace, p: Params) -> ApiResult:
    """``chat.stopStream``: the last markdown and chunks, then ``blocks`` at the bottom; done."""
    msg = _streaming(ws, p)
    markdown, chunks = _content(p, required=False)
    final = p.blocks() or []
    metadata = p.json("metadata") if p.values.get("metadata") else None
    previous = ws.render(msg)
    _apply(msg, markdown, chunks)
    stream = msg.stream
    assert stream is not None
    stream["state"] = "completed"
    stream["final_blocks"] = final
    msg.blocks = _blocks(stream, final)
    if isinstance(metadata, dict):
        msg.metadata = metadata
    ws.publish({"type": "message_changed", "channel": msg.channel, "ts": msg.ts, "thread_ts": msg.thread_ts})
    return ApiResult(
        {"ok": True, "channel": msg.channel, "ts": msg.ts, "message": ws.render(msg)},
        envelopes=events_for_changed_message(ws, msg, previous, ws.config.bot_user_id),
    )


def stream_entry(msg: Message) -> dict[str, Any] | None:
    """What the control API and the page show of a streamed message (``None``: not one)."""
    stream = msg.stream
    if stream is None:
        return None
    return {
        "state": stream["state"],
        "recipient_user_id": stream["recipient_user_id"],
        "recipient_team_id": stream["recipient_team_id"],
        "task_display_mode": stream["task_display_mode"],
        "plan_title": stream["plan_title"],
        "tasks": [dict(stream["tasks"][task_id]) for task_id in stream["task_order"]],
        "appends": [dict(append) for append in stream["appends"]],
        "final_blocks": list(stream.get("final_blocks") or []),
    }


def live_nodes(msg: Message) -> list[dict[str, Any]]:
    """The tasks' and plan's texts as ``markdown`` nodes, for ``emulator.slack.live`` to read."""
    stream = msg.stream
    if stream is None:
        return []
    texts = [str(task.get(key)) for task in stream["tasks"].values() for key in _TASK_TEXTS if task.get(key)]
    if stream["plan_title"]:
        texts.append(str(stream["plan_title"]))
    return [{"type": "markdown", "text": text} for text in texts]


HANDLERS: dict[str, Handler] = {
    "chat.startStream": start_stream,
    "chat.appendStream": append_stream,
    "chat.stopStream": stop_stream,
}
