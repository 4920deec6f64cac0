"""Web API methods that read the workspace or drive modals and statuses."""

from __future__ import annotations

import base64
from collections.abc import Callable, Sequence
from typing import Any, TypeVar

from emulator.slack.blocks import MAX_VIEW_BLOCKS, block_errors
from emulator.slack.ids import is_trigger_id, ts_key
from emulator.slack.methods_chat import bot_channel
from emulator.slack.model import Channel, Message
from emulator.slack.state import Workspace
from emulator.slack.webapi import ApiResult, Handler, Params, SlackError

T = TypeVar("T")


def api_test(_ws: Workspace, p: Params) -> ApiResult:
    """``api.test``: echoes its arguments, no token needed."""
    return ApiResult({"ok": True, "args": p.public()})


def auth_test(ws: Workspace, _p: Params) -> ApiResult:
    """``auth.test``: who the token belongs to."""
    cfg = ws.config
    return ApiResult(
        {
            "ok": True,
            "url": f"https://{cfg.team_domain}.slack.com/",
            "team": cfg.team_name,
            "user": cfg.bot_name,
            "team_id": cfg.team_id,
            "user_id": cfg.bot_user_id,
            "bot_id": cfg.bot_id,
            **({"enterprise_id": cfg.enterprise_id} if cfg.enterprise_id else {}),
            "is_enterprise_install": False,
        }
    )


def conversations_info(ws: Workspace, p: Params) -> ApiResult:
    """``conversations.info``."""
    channel = ws.channel(p.text("channel"))
    if channel is None or not channel.visible_to(ws.config.bot_user_id):
        raise SlackError("channel_not_found")  # a private channel the bot is not in does not exist for it
    body = channel.to_slack(ws.config.bot_user_id)
    if p.flag("include_num_members"):
        body["num_members"] = len(channel.members)
    return ApiResult({"ok": True, "channel": body})


def _page(
    p: Params, items: Sequence[T], default_limit: int, position: str, key: Callable[[T], str]
) -> tuple[Sequence[T], str]:
    """One page of ``items`` by Slack's cursor pagination, and the cursor of the next page ("" at the
    end). A cursor names the next page's first item by ``position`` (``ts``, ``id``): ``key`` of it."""
    limit = max(1, min(p.number("limit", default_limit), 1000))
    start = 0
    if p.text("cursor"):
        try:
            after = (
                base64.b64decode(p.text("cursor"), validate=True).decode().removeprefix(f"next_{position}:")
            )
            start = next(i for i, item in enumerate(items) if key(item) == after)
        except (ValueError, StopIteration):
            raise SlackError("invalid_cursor") from None
    more = start + limit < len(items)
    cursor = (
        base64.b64encode(f"next_{position}:{key(items[start + limit])}".encode()).decode() if more else ""
    )
    return items[start : start + limit], cursor


def _messages_page(ws: Workspace, p: Params, messages: list[Message], default_limit: int) -> dict[str, Any]:
    """One page of ``messages`` (``response_metadata.next_cursor`` names the next one's first ts)."""
    page, cursor = _page(p, messages, default_limit, "ts", lambda message: message.ts)
    return {
        "ok": True,
        "messages": [ws.render(m) for m in page],
        "has_more": bool(cursor),
        "response_metadata": {"next_cursor": cursor},
    }


def _in_range(p: Params, msg: Message) -> bool:
    inclusive = p.flag("inclusive")
    key = ts_key(msg.ts)
    for name, before in (("oldest", True), ("latest", False)):
        bound = p.text(name)
        if not bound:
            continue
        try:
            limit = ts_key(bound) if "." in bound else int(bound) * 1_000_000
        except ValueError:
            raise SlackError(f"invalid_ts_{name}") from None
        if (key < limit if before else key > limit) or (key == limit and not inclusive):
            return False
    return True


def conversations_replies(ws: Workspace, p: Params) -> ApiResult:
    """``conversations.replies``: the parent then its replies, oldest first, paginated."""
    _require_scope(ws, "channels:history")  # every emulated channel is public
    channel = bot_channel(ws, p.text("channel"))
    msg = ws.message(channel.id, p.text("ts")) if p.text("ts") else None
    if msg is None or msg.ephemeral_to is not None:
        raise SlackError("thread_not_found")
    # A reply's ts names just that reply; a parent's names the whole thread.
    thread = [msg] if msg.is_reply else [msg] + [r for r in ws.replies(msg) if _in_range(p, r)]
    return ApiResult(_messages_page(ws, p, thread, 1000))


def conversations_history(ws: Workspace, p: Params) -> ApiResult:
    """``conversations.history``: channel-level messages, newest first, paginated."""
    _require_scope(ws, "channels:history")
    channel = bot_channel(ws, p.text("channel"))
    shown = [
        m for m in ws.top_level(channel.id) if not m.deleted and m.ephemeral_to is None and _in_range(p, m)
    ]
    body = _messages_page(ws, p, list(reversed(shown)), 100)
    body.update({"pin_count": 0, "channel_actions_ts": None, "channel_actions_count": 0})
    return ApiResult(body)


def _require_scope(ws: Workspace, scope: str) -> None:
    """``missing_scope`` as Slack answers a token installed without ``scope``."""
    if scope not in ws.config.scopes:
        raise SlackError("missing_scope", needed=scope, provided=",".join(ws.config.scopes))


# The scope ``users.conversations`` needs for each conversation type it is asked to list.
_TYPE_SCOPES = {
    "public_channel": "channels:read",
    "private_channel": "groups:read",
    "mpim": "mpim:read",
    "im": "im:read",
}


def users_conversations(ws: Workspace, p: Params) -> ApiResult:
    """``users.conversations``: the channels a user (default: the token's, the bot) is in.

    Slack wants the read scope of every type asked for (``types`` defaults to public channels).
    Another user's private channels are listed only where the bot is a member too (Slack: "only
    listed when the calling user, bot user, or app shares membership"); the emulator has no DMs.
    """
    types = [t.strip() for t in (p.text("types") or "public_channel").split(",") if t.strip()]
    for kind in types:
        if kind not in _TYPE_SCOPES:
            raise SlackError("invalid_types")
        _require_scope(ws, _TYPE_SCOPES[kind])
    user = p.text("user") or ws.config.bot_user_id
    bot = ws.config.bot_user_id

    def listed(channel: Channel) -> bool:
        if user not in channel.members:
            return False
        if channel.is_private:
            return "private_channel" in types and channel.visible_to(bot)
        return "public_channel" in types

    found = sorted((c for c in ws.channels.values() if listed(c)), key=lambda c: c.id)
    page, cursor = _page(p, found, 100, "id", lambda channel: channel.id)
    return ApiResult(
        {
            "ok": True,
            "channels": [c.to_slack(bot, limited=True) for c in page],
            "response_metadata": {"next_cursor": cursor},
        }
    )


def users_info(ws: Workspace, p: Params) -> ApiResult:
    """``users.info``: ``user_not_found`` for an ID this workspace does not know (as Slack)."""
    _require_scope(ws, "users:read")
    user = ws.users.get(p.text("user"))
    if user is None:
        raise SlackError("user_not_found")
    return ApiResult({"ok": True, "user": user.to_slack(ws.config.team_id)})


def users_list(ws: Workspace, p: Params) -> ApiResult:
    """``users.list``: every account of the workspace, bots and deactivated ones included (as Slack),
    by ID, a page of at most ``limit`` (default 100) at a time."""
    _require_scope(ws, "users:read")
    found = sorted(ws.users.values(), key=lambda user: user.id)
    page, cursor = _page(p, found, 100, "id", lambda user: user.id)
    return ApiResult(
        {
            "ok": True,
            "members": [user.to_slack(ws.config.team_id) for user in page],
            "response_metadata": {"next_cursor": cursor},
        }
    )


def usergroups_users_list(ws: Workspace, p: Params) -> ApiResult:
    """``usergroups.users.list``: the member IDs of a user group."""
    _require_scope(ws, "usergroups:read")
    group = ws.groups.get(p.text("usergroup"))
    if group is None:
        raise SlackError("no_such_subteam")
    return ApiResult({"ok": True, "users": list(group.users)})


def usergroups_list(ws: Workspace, p: Params) -> ApiResult:
    """``usergroups.list``."""
    groups = []
    for g in ws.groups.values():
        entry: dict[str, Any] = {
            "id": g.id,
            "team_id": ws.config.team_id,
            "is_usergroup": True,
            "name": g.name or g.handle,
            "description": "",
            "handle": g.handle,
            "is_external": False,
            "date_create": 1700000000,
            "date_update": 1700000000,
            "date_delete": 0,
            "auto_type": None,
            "created_by": next(iter(g.users), ""),
            "updated_by": next(iter(g.users), ""),
            "deleted_by": None,
            "prefs": {"channels": [], "groups": []},
            "user_count": len(g.users),
        }
        if p.flag("include_users"):
            entry["users"] = list(g.users)
        groups.append(entry)
    return ApiResult({"ok": True, "usergroups": groups})


def set_status(ws: Workspace, p: Params) -> ApiResult:
    """``assistant.threads.setStatus``: "is thinking…" under a thread; an empty status clears it."""
    channel = ws.channel(p.text("channel_id"))
    if channel is None:
        raise SlackError("channel_not_found", detail="Invalid channel_id")
    thread_ts = p.text("thread_ts")
    if not thread_ts or ws.message(channel.id, thread_ts) is None:
        raise SlackError("invalid_thread_ts")
    if "status" not in p.values:
        raise SlackError("invalid_arguments")
    loading = p.json("loading_messages") if p.values.get("loading_messages") else None
    ws.set_status(channel.id, thread_ts, p.text("status"), loading if isinstance(loading, list) else None)
    return ApiResult({"ok": True})


def _view_definition(p: Params) -> dict[str, Any]:
    view = p.json("view")
    if not isinstance(view, dict) or view.get("type") != "modal":
        raise SlackError("invalid_arguments", response_metadata={"messages": ["[ERROR] invalid view"]})
    reasons = block_errors(view.get("blocks") or [], limit=MAX_VIEW_BLOCKS, root="/view/blocks")
    title = view.get("title")
    if not isinstance(title, dict) or not title.get("text"):
        reasons.append("missing required field: title [json-pointer:/view/title]")
    elif len(str(title.get("text"))) > 24:
        reasons.append("must be less than 25 characters [json-pointer:/view/title/text]")
    if reasons:
        raise SlackError(
            "invalid_arguments", response_metadata={"messages": [f"[ERROR] {r}" for r in reasons]}
        )
    return view


def views_open(ws: Workspace, p: Params) -> ApiResult:
    """``views.open``: exchange a fresh ``trigger_id`` for a modal shown to the person who clicked."""
    trigger_id = p.required("trigger_id")
    definition = _view_definition(p)
    if not is_trigger_id(trigger_id):
        raise SlackError("invalid_trigger_id")
    user, error = ws.exchange_trigger(trigger_id)
    if error or user is None:
        raise SlackError(error or "expired_trigger_id")
    return ApiResult({"ok": True, "view": ws.open_view(user, definition).to_slack()})


def views_update(ws: Workspace, p: Params) -> ApiResult:
    """``views.update``: by ``view_id`` or ``external_id``, refusing a stale ``hash``."""
    definition = _view_definition(p)
    view_id, external_id = p.text("view_id"), p.text("external_id")
    view = ws.views.get(view_id) if view_id else None
    if view is None and external_id:
        view = next((v for v in ws.views.values() if v.definition.get("external_id") == external_id), None)
    if view is None:
        raise SlackError("not_found")
    if p.text("hash") and p.text("hash") != view.hash:
        raise SlackError("hash_conflict")
    ws.replace_view(view, definition)
    return ApiResult({"ok": True, "view": view.to_slack()})


HANDLERS: dict[str, Handler] = {
    "api.test": api_test,
    "auth.test": auth_test,
    "conversations.info": conversations_info,
    "conversations.replies": conversations_replies,
    "conversations.history": conversations_history,
    "users.conversations": users_conversations,
    "users.info": users_info,
    "users.list": users_list,
    "usergroups.list": usergroups_list,
    "usergroups.users.list": usergroups_users_list,
    "assistant.threads.setStatus": set_status,
    "views.open": views_open,
    "views.update": views_update,
}
