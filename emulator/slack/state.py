"""The workspace: users, channels, messages, reactions, modals and statuses, behind one lock.

Every change calls ``publish`` with a small notice (``{"type": "message", "channel": ...}``) so the
web page can refresh; notices carry no content, the page reads the state back.
"""

from __future__ import annotations

import hashlib
import threading
import time
from collections.abc import Callable
from typing import Any

from emulator.slack.config import UserSpec, WorkspaceConfig
from emulator.slack.ids import TsClock, new_trigger_id, random_id
from emulator.slack.model import Channel, Fault, Message, Trigger, User, View, thread_fields
from emulator.slack.ratelimits import RateLimiter

Publish = Callable[[dict[str, Any]], None]


def _no_publish(_notice: dict[str, Any]) -> None:
    return None


class Workspace:
    """All mutable state of the emulated Slack. Hold ``lock`` around any read-modify-write."""

    def __init__(self, config: WorkspaceConfig, publish: Publish = _no_publish) -> None:
        self.config = config
        self.publish = publish
        self.lock = threading.RLock()
        self.clock = TsClock()
        self.limiter = RateLimiter()
        self.base_url = ""  # where the emulator answers, for URLs it hands out (uploads, files)
        self.reset()

    def reset(self) -> None:
        """Back to the configured workspace: no messages, modals, calls, deliveries or faults."""
        cfg = self.config
        with self.lock:
            self.users: dict[str, User] = {uid: make_user(uid, spec) for uid, spec in cfg.users.items()}
            self.users[cfg.bot_user_id] = User(
                id=cfg.bot_user_id, name=cfg.bot_name, real_name=cfg.bot_name, is_bot=True, bot_id=cfg.bot_id
            )
            self.channels: dict[str, Channel] = {
                cid: Channel(cid, name, members_of(cfg, cid), is_private=cid in cfg.private_channels)
                for cid, name in cfg.channels.items()
            }
            self.groups = {group.id: group for group in cfg.usergroups}
            self.messages: dict[str, dict[str, Message]] = {cid: {} for cid in self.channels}
            self.views: dict[str, View] = {}
            self.home_views: dict[str, View] = {}  # user -> their App Home view (``methods_home``)
            self.triggers: dict[str, Trigger] = {}
            self.statuses: dict[tuple[str, str], dict[str, Any]] = {}
            self.calls: list[dict[str, Any]] = []
            self.deliveries: list[dict[str, Any]] = []
            self.faults: list[Fault] = []
            self.limiter.reset()  # rate budgets start full again
            # file_id -> an upload begun with files.getUploadURLExternal (``methods_files``)
            self.uploads: dict[str, dict[str, Any]] = {}
            self.files: dict[str, dict[str, Any]] = {}  # file_id -> shared file (with its bytes)
            # response_url token -> where the interaction happened and how often the URL was used
            self.response_urls: dict[str, dict[str, Any]] = {}
        self.publish({"type": "reset"})

    # --- lookups -------------------------------------------------------------------------------

    def channel(self, ref: str) -> Channel | None:
        """A channel by ID, name or ``#name``."""
        if ref in self.channels:
            return self.channels[ref]
        name = ref.removeprefix("#")
        return next((c for c in self.channels.values() if c.name == name), None)

    def user_ref(self, ref: str) -> User | None:
        """A user by ID or name (``alice``, ``@alice``)."""
        if ref in self.users:
            return self.users[ref]
        name = ref.removeprefix("@")
        return next((u for u in self.users.values() if u.name == name), None)

    def message(self, channel: str, ts: str) -> Message | None:
        """The live (not deleted) message at ``ts`` in ``channel``."""
        msg = self.messages.get(channel, {}).get(ts)
        return None if msg is None or msg.deleted else msg

    def replies(self, parent: Message) -> list[Message]:
        """The live replies of a thread parent, oldest first."""
        found = (self.messages[parent.channel].get(ts) for ts in parent.replies)
        return [m for m in found if m is not None and not m.deleted and m.ephemeral_to is None]

    def top_level(self, channel: str) -> list[Message]:
        """Messages shown in the channel itself (parents, standalone messages and broadcasts)."""
        return [m for m in self.messages[channel].values() if not m.is_reply or m.broadcast]

    def mention_names(self) -> tuple[dict[str, str], dict[str, str]]:
        """Lowercase user names -> IDs and group handles -> IDs, for ``@name`` translation."""
        users = {u.name.lower(): u.id for u in self.users.values()}
        groups = {g.handle.lower(): g.id for g in self.groups.values()}
        return users, groups

    # --- rendering -----------------------------------------------------------------------------

    def render(self, msg: Message) -> dict[str, Any]:
        """``msg`` as Slack's API returns it: thread fields, reactions, bot profile, broadcast root."""
        body = msg.core(self.config.team_id)
        author = self.users.get(msg.user)
        if author is not None and author.team_id:
            # A Slack Connect user's message names their own team (and where it was posted).
            body.update(team=author.team_id, user_team=author.team_id, source_team=self.config.team_id)
        if msg.bot_id:
            body["bot_profile"] = self.bot_profile()
        if msg.is_reply and msg.thread_ts:
            body["thread_ts"] = msg.thread_ts
            parent = self.messages[msg.channel].get(msg.thread_ts)
            if parent is not None:
                body["parent_user_id"] = parent.user
                if msg.broadcast:
                    body["root"] = {
                        **parent.core(self.config.team_id),
                        **thread_fields(parent, self.replies(parent)),
                    }
        elif msg.replies:
            body.update(thread_fields(msg, self.replies(msg)))
        reactions = msg.reactions_json()
        if reactions:
            body["reactions"] = reactions
        return body

    def bot_profile(self) -> dict[str, Any]:
        """The ``bot_profile`` Slack attaches to an app's messages."""
        cfg = self.config
        return {
            "id": cfg.bot_id,
            "app_id": cfg.app_id,
            "name": cfg.bot_name,
            "icons": {"image_36": "", "image_48": "", "image_72": ""},
            "deleted": False,
            "updated": 1700000000,
            "team_id": cfg.team_id,
        }

    # --- messages ------------------------------------------------------------------------------

    def add_message(
        self,
        channel: str,
        user: str,
        text: str,
        blocks: list[dict[str, Any]] | None = None,
        *,
        thread_ts: str | None = None,
        broadcast: bool = False,
        ephemeral_to: str | None = None,
        client_msg_id: str | None = None,
        metadata: dict[str, Any] | None = None,
    ) -> Message:
        """Store a new message (a thread reply when ``thread_ts`` names a live message)."""
        cfg = self.config
        with self.lock:
            parent = self.message(channel, thread_ts) if thread_ts else None
            if parent is not None and parent.is_reply and parent.thread_ts:
                parent = self.message(channel, parent.thread_ts)  # replying to a reply joins its thread
            is_bot = user == cfg.bot_user_id
            msg = Message(
                channel=channel,
                ts=self.clock.next(),
                user=user,
                text=text,
                blocks=blocks,
                thread_ts=parent.ts if parent else None,
                broadcast=broadcast and parent is not None,
                bot_id=cfg.bot_id if is_bot else None,
                app_id=cfg.app_id if is_bot else None,
                ephemeral_to=ephemeral_to,
                client_msg_id=client_msg_id,
                metadata=metadata,
            )
            self.messages[channel][msg.ts] = msg
            if parent is not None and ephemeral_to is None:
                parent.replies.append(msg.ts)
            if is_bot and parent is not None:
                # Slack clears an assistant status as soon as the app replies in that thread.
                self.set_status(channel, parent.ts, "")
        self.publish({"type": "message", "channel": channel, "ts": msg.ts, "thread_ts": msg.thread_ts})
        return msg

    def update_message(
        self, msg: Message, text: str, blocks: list[dict[str, Any]] | None, editor: str
    ) -> None:
        """Replace a message's content, keeping the previous version in ``history``."""
        with self.lock:
            msg.history.append({"text": msg.text, "blocks": msg.blocks, "replaced_at": self.clock.next()})
            msg.text = text
            msg.blocks = blocks
            msg.edited = {"user": editor, "ts": self.clock.next()}
        self.publish(
            {"type": "message_changed", "channel": msg.channel, "ts": msg.ts, "thread_ts": msg.thread_ts}
        )

    def delete_message(self, msg: Message) -> None:
        """Delete a message (Slack keeps no trace but a tombstone for a parent with replies)."""
        with self.lock:
            msg.deleted = True
        self.publish(
            {"type": "message_deleted", "channel": msg.channel, "ts": msg.ts, "thread_ts": msg.thread_ts}
        )

    def react(self, msg: Message, name: str, user: str, *, add: bool = True) -> bool:
        """Add (or remove) ``user``'s reaction; False when there was nothing to change."""
        with self.lock:
            users = msg.reactions.setdefault(name, [])
            if (user in users) == add:
                return False
            if add:
                users.append(user)
            else:
                users.remove(user)
                if not users:
                    del msg.reactions[name]
        self.publish({"type": "reaction", "channel": msg.channel, "ts": msg.ts, "thread_ts": msg.thread_ts})
        return True

    def set_status(self, channel: str, thread_ts: str, status: str, loading: list[str] | None = None) -> None:
        """The assistant's "is thinking…" status under a thread; an empty status clears it."""
        with self.lock:
            key = (channel, thread_ts)
            had = key in self.statuses
            if status:
                self.statuses[key] = {
                    "status": status,
                    "loading_messages": loading or [],
                    "since": time.time(),
                }
            else:
                self.statuses.pop(key, None)
        if status or had:
            self.publish({"type": "status", "channel": channel, "thread_ts": thread_ts})

    # --- interactions and modals -------------------------------------------------------------------

    def issue_trigger(self, user: str) -> str:
        """A fresh ``trigger_id`` for an interaction by ``user``."""
        trigger_id = new_trigger_id()
        with self.lock:
            self.triggers[trigger_id] = Trigger(user=user, created=time.monotonic())
        return trigger_id

    def exchange_trigger(self, trigger_id: str) -> tuple[str | None, str | None]:
        """``(user, None)`` when the trigger may open a modal now, else ``(None, slack_error)``."""
        with self.lock:
            trigger = self.triggers.get(trigger_id)
            if trigger is None or time.monotonic() - trigger.created > self.config.trigger_ttl:
                return None, "expired_trigger_id"
            if trigger.used:
                return None, "exchanged_trigger_id"
            trigger.used = True
            return trigger.user, None

    def new_view(
        self, user: str, definition: dict[str, Any], view_id: str = "", *, modal: bool = True
    ) -> View:
        """A view of this workspace's app for ``user``: a modal (open), or the Home tab (never open:
        the page reads it from ``/control/home``), under ``view_id`` or a new id."""
        cfg = self.config
        view_id = view_id or random_id("V")
        return View(
            id=view_id,
            user=user,
            definition=definition,
            team_id=cfg.team_id,
            app_id=cfg.app_id,
            bot_id=cfg.bot_id,
            hash=view_hash(definition),
            root_view_id=view_id,
            is_open=modal,
        )

    def open_view(self, user: str, definition: dict[str, Any]) -> View:
        """Open a modal for ``user``."""
        view = self.new_view(user, definition)
        view_id = view.id
        with self.lock:
            self.views[view_id] = view
        self.publish({"type": "view", "view_id": view_id, "user": user})
        return view

    def replace_view(self, view: View, definition: dict[str, Any]) -> None:
        """Swap a modal's content (``views.update`` or ``response_action: update``)."""
        with self.lock:
            view.definition = definition
            view.hash = view_hash(definition)
            view.errors = {}
        self.publish({"type": "view", "view_id": view.id, "user": view.user})

    def close_view(self, view: View) -> None:
        """Close a modal."""
        with self.lock:
            view.is_open = False
        self.publish({"type": "view", "view_id": view.id, "user": view.user})


def make_user(uid: str, spec: str | UserSpec) -> User:
    """The account a configured user describes (a plain name is a full member of the workspace)."""
    if isinstance(spec, str):
        return User(id=uid, name=spec, real_name=spec.capitalize())
    return User(
        id=uid,
        name=spec.name,
        real_name=spec.name.capitalize(),
        is_bot=spec.is_bot,
        bot_id=random_id("B") if spec.is_bot else None,
        is_app_user=spec.is_app_user,
        is_restricted=bool(spec.guest),
        is_ultra_restricted=spec.guest == "single_channel",
        deleted=spec.deleted,
        team_id=spec.team_id,
        tz=spec.tz,
    )


def members_of(cfg: WorkspaceConfig, channel: str) -> set[str]:
    """Who is in ``channel``: plain members everywhere, others where their spec says, nobody deactivated."""
    members = {cfg.bot_user_id} if channel in cfg.bot_channels else set()
    if channel in cfg.private_channels:  # only who was invited
        invited = set(cfg.private_channels[channel])
        return members | {
            uid for uid, spec in cfg.users.items() if uid in invited and not getattr(spec, "deleted", False)
        }
    for uid, spec in cfg.users.items():
        if isinstance(spec, str):
            members.add(uid)  # a plain member is in every channel
            continue
        if not spec.deleted and (spec.channels is None or channel in spec.channels):
            members.add(uid)
    return members


def view_hash(definition: dict[str, Any]) -> str:
    """A view ``hash`` in Slack's ``<seconds>.<token>`` form, changing whenever the view does."""
    digest = hashlib.sha1(repr(sorted(definition.items())).encode()).hexdigest()[:8]
    return f"{int(time.time())}.{digest}"
