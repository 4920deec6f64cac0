"""The workspace's records (users, channels, messages, views) and their Slack JSON shapes."""

from __future__ import annotations

import time
from dataclasses import dataclass, field
from datetime import datetime
from typing import Any
from zoneinfo import ZoneInfo, ZoneInfoNotFoundError


def _offset_now(zone: str) -> int:
    """Seconds east of UTC in ``zone`` now, as Slack's ``tz_offset`` (0 for a zone it cannot read)."""
    try:
        offset = datetime.now(ZoneInfo(zone)).utcoffset()
    except (ZoneInfoNotFoundError, ValueError):
        return 0
    return int(offset.total_seconds()) if offset is not None else 0


@dataclass
class User:
    """An account ``users.info`` knows: a member, a guest, a bot (the app's own user too), a
    deactivated account, or a user of another team (``team_id`` set)."""

    id: str
    name: str
    real_name: str
    is_bot: bool = False
    bot_id: str | None = None
    is_app_user: bool = False
    is_restricted: bool = False  # a guest (multi- or single-channel)
    is_ultra_restricted: bool = False  # a single-channel guest
    deleted: bool = False
    team_id: str = ""  # "" = the workspace's own team
    tz: str = "Etc/UTC"  # an IANA zone name, as Slack gives it

    def home_team(self, workspace_team: str) -> str:
        return self.team_id or workspace_team

    def to_slack(self, team_id: str) -> dict[str, Any]:
        """The ``user`` object of ``users.info`` (``team_id``: the workspace's team)."""
        team_id = self.home_team(team_id)
        profile: dict[str, Any] = {
            "real_name": self.real_name,
            "real_name_normalized": self.real_name,
            "display_name": self.name,
            "display_name_normalized": self.name,
            "first_name": self.real_name.split(" ")[0],
            "team": team_id,
            "image_48": "",
        }
        if self.bot_id:
            profile["bot_id"] = self.bot_id
        return {
            "id": self.id,
            "team_id": team_id,
            "name": self.name,
            "deleted": self.deleted,
            "color": "9f69e7",
            "real_name": self.real_name,
            "tz": self.tz,
            "tz_label": self.tz,
            "tz_offset": _offset_now(self.tz),
            "profile": profile,
            "is_admin": False,
            "is_owner": False,
            "is_primary_owner": False,
            "is_restricted": self.is_restricted,
            "is_ultra_restricted": self.is_ultra_restricted,
            "is_bot": self.is_bot,
            "is_app_user": self.is_app_user,
            "updated": 1700000000,
        }


@dataclass
class Channel:
    """A channel, public or private, and who is in it."""

    id: str
    name: str
    members: set[str]
    created: int = field(default_factory=lambda: int(time.time()))
    is_private: bool = False

    def visible_to(self, user: str) -> bool:
        """Whether ``user`` can see the channel at all: a private one exists only for its members."""
        return not self.is_private or user in self.members

    def to_slack(self, viewer: str, *, limited: bool = False) -> dict[str, Any]:
        """The ``channel`` object of ``conversations.info`` as ``viewer`` sees it; ``limited``:
        as ``users.conversations`` lists it (Slack omits ``is_member`` there)."""
        body = self._fields(viewer)
        if limited:
            body.pop("is_member")
        return body

    def _fields(self, viewer: str) -> dict[str, Any]:
        return {
            "id": self.id,
            "name": self.name,
            "is_channel": True,
            "is_group": False,
            "is_im": False,
            "is_mpim": False,
            "is_private": self.is_private,
            "created": self.created,
            "is_archived": False,
            "is_general": False,
            "unlinked": 0,
            "name_normalized": self.name,
            "is_shared": False,
            "is_ext_shared": False,
            "is_org_shared": False,
            "pending_shared": [],
            "is_pending_ext_shared": False,
            "is_member": viewer in self.members,
            "topic": {"value": "", "creator": "", "last_set": 0},
            "purpose": {"value": "", "creator": "", "last_set": 0},
            "previous_names": [],
        }


@dataclass
class Message:
    """One message, as stored: its current content plus what the emulator needs to show history."""

    channel: str
    ts: str
    user: str
    text: str
    blocks: list[dict[str, Any]] | None = None
    thread_ts: str | None = None
    broadcast: bool = False
    bot_id: str | None = None
    app_id: str | None = None
    ephemeral_to: str | None = None
    client_msg_id: str | None = None
    edited: dict[str, str] | None = None
    history: list[dict[str, Any]] = field(default_factory=list)
    reactions: dict[str, list[str]] = field(default_factory=dict)
    replies: list[str] = field(default_factory=list)
    deleted: bool = False
    metadata: dict[str, Any] | None = None
    # Posted with ``parse=full`` or ``link_names``: Slack links bare names and broadcast words.
    auto_parse: bool = False
    # Files shared with the message (``files.completeUploadExternal``), as Slack's file objects.
    files: list[dict[str, Any]] | None = None
    # ``bot_message`` (another app's or an integration's post) and the name it posted under.
    subtype: str | None = None
    username: str | None = None
    # A message begun with ``chat.startStream``: its streaming state, tasks and appends
    # (``emulator.slack.methods_stream``); ``None`` for every other message.
    stream: dict[str, Any] | None = None

    @property
    def is_reply(self) -> bool:
        """A reply in a thread (not the parent, which also carries ``thread_ts`` once it has replies)."""
        return self.thread_ts is not None and self.thread_ts != self.ts

    def core(self, team_id: str) -> dict[str, Any]:
        """The fields every rendering shares: Slack's message object without thread bookkeeping."""
        body: dict[str, Any] = {"type": "message", "text": self.text, "user": self.user, "ts": self.ts}
        if not self.user:
            del body["user"]  # a classic ``bot_message`` (an integration) has no user
        if self.bot_id:
            body["bot_id"] = self.bot_id
            body["app_id"] = self.app_id
        if self.client_msg_id:
            body["client_msg_id"] = self.client_msg_id
        if self.blocks is not None:
            body["blocks"] = self.blocks
        body["team"] = team_id
        if self.broadcast:
            body["subtype"] = "thread_broadcast"
        elif self.subtype:
            body["subtype"] = self.subtype
        if self.username:
            body["username"] = self.username
        if self.files:
            body["files"] = [dict(f) for f in self.files]
            body["upload"] = False
        if self.edited:
            body["edited"] = dict(self.edited)
        if self.metadata:
            body["metadata"] = self.metadata
        return body

    def reactions_json(self) -> list[dict[str, Any]]:
        """``reactions`` as Slack lists them: name, users, count."""
        return [{"name": n, "users": list(u), "count": len(u)} for n, u in self.reactions.items() if u]


def thread_fields(parent: Message, replies: list[Message]) -> dict[str, Any]:
    """A thread parent's bookkeeping fields (``reply_count``, ``latest_reply``...)."""
    users: dict[str, None] = {}
    for reply in replies:
        users.setdefault(reply.user, None)
    return {
        "thread_ts": parent.ts,
        "reply_count": len(replies),
        "reply_users_count": len(users),
        "latest_reply": replies[-1].ts if replies else parent.ts,
        "reply_users": list(users)[:5],
        "is_locked": False,
        "subscribed": False,
    }


@dataclass
class View:
    """A modal opened by ``views.open``, with the values typed into it so far."""

    id: str
    user: str
    definition: dict[str, Any]
    team_id: str
    app_id: str
    bot_id: str
    hash: str
    root_view_id: str
    values: dict[str, dict[str, Any]] = field(default_factory=dict)
    errors: dict[str, str] = field(default_factory=dict)
    is_open: bool = True

    def to_slack(self) -> dict[str, Any]:
        """The ``view`` object returned by ``views.open`` and sent in ``view_submission``."""
        d = self.definition
        return {
            "id": self.id,
            "team_id": self.team_id,
            "type": d.get("type", "modal"),
            "blocks": d.get("blocks", []),
            "private_metadata": d.get("private_metadata", ""),
            "callback_id": d.get("callback_id", ""),
            "state": {"values": self.values},
            "hash": self.hash,
            "title": d.get("title"),
            "clear_on_close": bool(d.get("clear_on_close", False)),
            "notify_on_close": bool(d.get("notify_on_close", False)),
            "close": d.get("close"),
            "submit": d.get("submit"),
            "previous_view_id": None,
            "root_view_id": self.root_view_id,
            "app_id": self.app_id,
            "external_id": d.get("external_id", ""),
            "app_installed_team_id": self.team_id,
            "bot_id": self.bot_id,
        }


@dataclass
class Trigger:
    """A ``trigger_id`` handed out with an interaction; exchangeable once, briefly, for a modal."""

    user: str
    created: float
    used: bool = False


@dataclass
class Fault:
    """An injected failure for the next calls of one Web API method (or ``*`` for any)."""

    method: str
    remaining: int
    kind: str  # "ratelimited" | "http_error" | "error" | "slow"
    retry_after: int = 1
    status: int = 500
    error: str = "internal_error"
    delay: float = 0.0  # "slow": the call is done, its answer sent this many seconds late

    def to_json(self) -> dict[str, Any]:
        """The fault as the control API lists it."""
        return {
            "method": self.method,
            "remaining": self.remaining,
            "kind": self.kind,
            "retry_after": self.retry_after,
            "status": self.status,
            "error": self.error,
            "delay": self.delay,
        }
