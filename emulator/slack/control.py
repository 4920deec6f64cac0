"""The control API (``/control/...``): JSON routes for tests, the demo script and the web page.

Reads return Slack-shaped messages plus what only the emulator knows: ``history`` (earlier
versions after ``chat.update``), ``ephemeral``, nested ``replies`` and the thread's status.
"""

from __future__ import annotations

import re
import secrets
import time
import urllib.parse
from collections.abc import Callable
from dataclasses import replace
from typing import Any

from emulator.slack import commands, methods_files, methods_home
from emulator.slack.core import ControlError, Core
from emulator.slack.live import live_in_message
from emulator.slack.methods_stream import live_nodes, stream_entry
from emulator.slack.model import Fault, Message

Route = Callable[["Control", dict[str, str], dict[str, Any], dict[str, str]], Any]


def _visible(msg: Message, viewer: str | None) -> bool:
    return msg.ephemeral_to is None or msg.ephemeral_to == viewer


class Control:
    """Answers control requests against one ``Core``."""

    def __init__(self, core: Core) -> None:
        self.core = core
        self.ws = core.ws

    def handle(self, method: str, path: str, query: str, body: dict[str, Any]) -> tuple[int, Any]:
        """Route one request; answers ``(status, json)``."""
        args = {k: v[-1] for k, v in urllib.parse.parse_qs(query).items()}
        for verb, pattern, route in ROUTES:
            match = pattern.fullmatch(path)
            if match and verb == method:
                try:
                    return 200, route(self, match.groupdict(), body, args)
                except ControlError as exc:
                    return exc.status, {"ok": False, "error": exc.error}
                except (KeyError, TypeError, ValueError) as exc:
                    return 400, {"ok": False, "error": f"bad_request: {exc}"}
        return 404, {"ok": False, "error": "no_such_route"}

    def press(self, p: dict[str, str], body: dict[str, Any], _a: dict[str, str]) -> Any:
        """A page button (``emulator.slack.page_buttons``) pressed by ``body["user"]``."""
        text = self.core.page_buttons.press(p["button"], str(body.get("user") or ""))
        if text is None:
            raise ControlError(404, "no_such_button")
        return {"ok": True, "text": text}

    # --- reading -------------------------------------------------------------------------------

    def entry(self, msg: Message, viewer: str | None, with_replies: bool) -> dict[str, Any]:
        """One message for the control API and the page."""
        if msg.deleted:
            body: dict[str, Any] = {
                "type": "message",
                "subtype": "tombstone",
                "ts": msg.ts,
                "user": "USLACKBOT",
            }
            body.update({"text": "This message was deleted.", "hidden": True, "channel": msg.channel})
        else:
            body = self.ws.render(msg)
        body["live"] = self._live(body, msg)
        body.update(
            {"channel": msg.channel, "ephemeral": msg.ephemeral_to is not None, "deleted": msg.deleted}
        )
        body["history"] = list(msg.history)
        body["stream"] = stream_entry(msg)  # a streamed message's state, tasks and appends
        if with_replies:
            body["replies"] = [self.entry(r, viewer, False) for r in self._thread(msg, viewer)]
            status = self.ws.statuses.get((msg.channel, msg.ts))
            body["status"] = dict(status) if status else None
        return body

    def _live(self, body: dict[str, Any], msg: Message) -> list[dict[str, Any]]:
        """What a person would see live in the message (mentions, broadcasts, links): ``emulator.slack.live``."""
        channels = [c.name for c in self.ws.channels.values()]
        handles = [g.handle for g in self.ws.groups.values()]
        shown = {**body, "blocks": [*(body.get("blocks") or []), *live_nodes(msg)]}  # a stream's tasks too
        found = live_in_message(shown, auto_parse=msg.auto_parse, channels=channels, handles=handles)
        return [part.to_json() for part in found]

    def _thread(self, parent: Message, viewer: str | None) -> list[Message]:
        return [
            m
            for m in self.ws.messages[parent.channel].values()
            if m.is_reply and m.thread_ts == parent.ts and not m.deleted and _visible(m, viewer)
        ]

    def _channel(self, ref: str) -> str:
        channel = self.ws.channel(urllib.parse.unquote(ref))
        if channel is None:
            raise ControlError(404, "channel_not_found")
        return channel.id

    def messages(self, params: dict[str, str], _body: dict[str, Any], args: dict[str, str]) -> Any:
        """Channel-level messages, oldest first, each with its thread."""
        viewer = args.get("viewer")
        with self.ws.lock:
            channel = self._channel(params["channel"])
            shown = [
                m
                for m in self.ws.top_level(channel)
                if _visible(m, viewer) and (not m.deleted or self.ws.replies(m))
            ]
            return {"ok": True, "channel": channel, "messages": [self.entry(m, viewer, True) for m in shown]}

    def thread(self, params: dict[str, str], _body: dict[str, Any], args: dict[str, str]) -> Any:
        """A thread: the parent and its replies (``ephemeral`` ones only for ``viewer``)."""
        viewer = args.get("viewer")
        with self.ws.lock:
            channel = self._channel(params["channel"])
            parent = self.ws.messages[channel].get(params["ts"])
            if parent is None:
                raise ControlError(404, "thread_not_found")
            top = self.entry(parent, viewer, True)
            replies = top.pop("replies")
            return {"ok": True, "channel": channel, "status": top.pop("status"), "messages": [top, *replies]}

    def state(self, _p: dict[str, str], _b: dict[str, Any], _a: dict[str, str]) -> Any:
        """Who and what is in the workspace (the page's first request)."""
        cfg = self.ws.config
        with self.ws.lock:
            return {
                "ok": True,
                "team": {"id": cfg.team_id, "name": cfg.team_name, "domain": cfg.team_domain},
                "bot": {
                    "user_id": cfg.bot_user_id,
                    "bot_id": cfg.bot_id,
                    "name": cfg.bot_name,
                    "app_id": cfg.app_id,
                },
                "users": [
                    {
                        "id": u.id,
                        "name": u.name,
                        "is_bot": u.is_bot,
                        "is_restricted": u.is_restricted,
                        "is_ultra_restricted": u.is_ultra_restricted,
                        "deleted": u.deleted,
                        "team_id": u.home_team(cfg.team_id),
                    }
                    for u in self.ws.users.values()
                ],
                "channels": [
                    {"id": c.id, "name": c.name, "bot_member": cfg.bot_user_id in c.members}
                    for c in self.ws.channels.values()
                ],
                "page_buttons": self.core.page_buttons.listed(),
                "usergroups": [
                    {"id": g.id, "handle": g.handle, "users": list(g.users)} for g in self.ws.groups.values()
                ],
                "events_url": cfg.events_url,
                "interactivity_url": cfg.interactivity_url,
                "rate_limits": cfg.rate_limits,
                "scopes": list(cfg.scopes),
                "enterprise_id": cfg.enterprise_id,
            }

    def views(self, _p: dict[str, str], _b: dict[str, Any], args: dict[str, str]) -> Any:
        """Open modals, optionally only ``user``'s."""
        with self.ws.lock:
            found = [
                {**v.to_slack(), "user": v.user, "errors": dict(v.errors)}
                for v in self.ws.views.values()
                if v.is_open and args.get("user") in (None, v.user)
            ]
        return {"ok": True, "views": found}

    def calls(self, _p: dict[str, str], _b: dict[str, Any], args: dict[str, str]) -> Any:
        """Recorded Web API calls, optionally of one ``method``."""
        with self.ws.lock:
            found = [c for c in self.ws.calls if args.get("method") in (None, c["method"])]
        return {"ok": True, "calls": found}

    def deliveries(self, _p: dict[str, str], _b: dict[str, Any], args: dict[str, str]) -> Any:
        """Every attempt to deliver an event or interaction, optionally filtered."""
        with self.ws.lock:
            found = [
                d
                for d in self.ws.deliveries
                if args.get("event_id") in (None, d["event_id"]) and args.get("kind") in (None, d["kind"])
            ]
        return {"ok": True, "deliveries": found}

    def statuses(self, _p: dict[str, str], _b: dict[str, Any], _a: dict[str, str]) -> Any:
        """Assistant statuses currently shown, per thread."""
        with self.ws.lock:
            found = [{"channel": c, "thread_ts": t, **s} for (c, t), s in self.ws.statuses.items()]
        return {"ok": True, "statuses": found}

    # --- acting --------------------------------------------------------------------------------

    def post(self, _p: dict[str, str], body: dict[str, Any], _a: dict[str, str]) -> Any:
        """Post as a person: ``{channel, user, text, thread_ts?, reply_broadcast?}``."""
        return self.core.post_as_user(
            str(body["channel"]),
            str(body["user"]),
            str(body["text"]),
            body.get("thread_ts") or None,
            bool(body.get("reply_broadcast", False)),
        )

    def post_bot(self, _p: dict[str, str], body: dict[str, Any], _a: dict[str, str]) -> Any:
        """Another app posts: ``{channel, bot_id, text, user?, username?, thread_ts?, classic?}``."""
        return self.core.post_as_bot(
            str(body["channel"]),
            str(body["bot_id"]),
            str(body["text"]),
            user=str(body.get("user") or ""),
            username=str(body.get("username") or ""),
            thread_ts=body.get("thread_ts") or None,
            classic=bool(body.get("classic", True)),
        )

    def app_rate_limited(self, _p: dict[str, str], body: dict[str, Any], _a: dict[str, str]) -> Any:
        """Send the ``app_rate_limited`` callback: ``{minute_rate_limited?}`` (epoch minute)."""
        minute = int(body.get("minute_rate_limited") or time.time() // 60 * 60)
        attempt = self.core.deliverer.send_app_rate_limited(minute)
        return {"ok": attempt.ok, "status": attempt.status, "outcome": "ok" if attempt.ok else attempt.reason}

    def files(self, _p: dict[str, str], _b: dict[str, Any], _a: dict[str, str]) -> Any:
        """Files shared through ``files.completeUploadExternal`` (without their bytes)."""
        return {"ok": True, "files": methods_files.file_listing(self.ws)}

    def click(self, _p: dict[str, str], body: dict[str, Any], _a: dict[str, str]) -> Any:
        """Click a button: ``{message_ts, user, action_id? , value?, channel?}``."""
        if body.get("action_id") is None and body.get("value") is None:
            raise ControlError(400, "action_id_or_value_required")
        return self.core.click(
            str(body["message_ts"]),
            str(body["user"]),
            body.get("action_id"),
            body.get("value"),
            body.get("channel"),
        )

    def submit(self, params: dict[str, str], body: dict[str, Any], _a: dict[str, str]) -> Any:
        """Submit a modal: ``{user?, values: {block_id: {action_id: value}} | {action_id: value}}``."""
        return self.core.submit_view(params["view_id"], body.get("user"), dict(body.get("values") or {}))

    def close(self, params: dict[str, str], body: dict[str, Any], _a: dict[str, str]) -> Any:
        """Cancel a modal."""
        return self.core.close_view(params["view_id"], body.get("user"))

    def faults(self, _p: dict[str, str], _b: dict[str, Any], _a: dict[str, str]) -> Any:
        """Faults still armed."""
        with self.ws.lock:
            return {"ok": True, "faults": [f.to_json() for f in self.ws.faults]}

    def add_fault(self, _p: dict[str, str], body: dict[str, Any], _a: dict[str, str]) -> Any:
        """Arm a fault: ``{method, count?, kind: ratelimited|http_error|error|slow, retry_after?, status?,
        error?, delay?}`` (``slow``: the call is done, its answer comes ``delay`` seconds late)."""
        kind = str(body.get("kind", "error"))
        if kind not in ("ratelimited", "http_error", "error", "slow"):
            raise ControlError(400, "unknown_fault_kind")
        fault = Fault(
            method=str(body["method"]),
            remaining=int(body.get("count", 1)),
            kind=kind,
            retry_after=int(body.get("retry_after", 1)),
            status=int(body.get("status", 500)),
            error=str(body.get("error", "ratelimited" if kind == "ratelimited" else "internal_error")),
            delay=min(float(body.get("delay", 0.0)), 60.0),
        )
        with self.ws.lock:
            self.ws.faults.append(fault)
        return {"ok": True, "fault": fault.to_json()}

    def set_usergroup(self, params: dict[str, str], body: dict[str, Any], _a: dict[str, str]) -> Any:
        """Replace a user group's members: ``{users: [ID, ...]}`` (someone joins or leaves @oncall)."""
        users = body["users"]
        if not isinstance(users, list) or not all(isinstance(u, str) for u in users):
            raise ControlError(400, "users_must_be_a_list_of_ids")
        with self.ws.lock:
            group = self.ws.groups.get(params["group"])
            if group is None:
                raise ControlError(404, "no_such_subteam")
            unknown = [u for u in users if u not in self.ws.users]
            if unknown:
                raise ControlError(400, f"user_not_found: {', '.join(unknown)}")
            self.ws.groups[group.id] = replace(group, users=tuple(users))
        self.ws.publish({"type": "config"})
        return {"ok": True, "usergroup": {"id": group.id, "handle": group.handle, "users": users}}

    def clear_faults(self, _p: dict[str, str], _b: dict[str, Any], _a: dict[str, str]) -> Any:
        """Disarm every fault."""
        with self.ws.lock:
            self.ws.faults.clear()
        return {"ok": True}

    def verify_url(self, _p: dict[str, str], _b: dict[str, Any], _a: dict[str, str]) -> Any:
        """Send ``url_verification`` to the events URL, as Slack does when the URL is saved."""
        challenge = secrets.token_urlsafe(24)
        attempt = self.core.deliverer.verify_url(challenge)
        answer = attempt.json()
        echoed = isinstance(answer, dict) and answer.get("challenge") == challenge
        echoed = echoed or attempt.body.decode(errors="replace").strip() == challenge
        return {
            "ok": attempt.ok and echoed,
            "status": attempt.status,
            "outcome": attempt.reason,
            "verified": echoed,
        }

    def reset(self, _p: dict[str, str], _b: dict[str, Any], _a: dict[str, str]) -> Any:
        """Forget messages, modals, calls, deliveries and faults."""
        self.ws.reset()
        return {"ok": True}

    def config(self, _p: dict[str, str], body: dict[str, Any], _a: dict[str, str]) -> Any:
        """Point event and interactivity delivery somewhere else: ``{events_url?, interactivity_url?}``;
        ``{rate_limits: false}`` turns rate limiting off (a test that posts in bulk on purpose)."""
        with self.ws.lock:
            for key in ("events_url", "interactivity_url"):
                if key in body:
                    setattr(self.ws.config, key, body[key] or None)
            if "rate_limits" in body:
                if not isinstance(body["rate_limits"], bool):
                    raise ControlError(400, "rate_limits_must_be_a_boolean")
                self.ws.config.rate_limits = body["rate_limits"]
                self.ws.limiter.reset()
        self.ws.publish({"type": "config"})
        return self.state({}, {}, {})


def _route(verb: str, pattern: str, fn: Route) -> tuple[str, re.Pattern[str], Route]:
    return verb, re.compile("/control" + pattern), fn


ROUTES: list[tuple[str, re.Pattern[str], Route]] = [
    _route("GET", "/state", Control.state),
    _route("POST", "/config", Control.config),
    _route("GET", r"/channels/(?P<channel>[^/]+)/messages", Control.messages),
    _route("GET", r"/channels/(?P<channel>[^/]+)/threads/(?P<ts>[0-9.]+)", Control.thread),
    _route("POST", "/messages", Control.post),
    _route("POST", "/actions", Control.click),
    _route("POST", "/bot_messages", Control.post_bot),
    _route("POST", "/app_rate_limited", Control.app_rate_limited),
    _route("GET", "/files", Control.files),
    _route("GET", "/views", Control.views),
    _route("POST", r"/home/(?P<user>[A-Za-z0-9_]+)", methods_home.open_home),
    _route("GET", r"/home/(?P<user>[A-Za-z0-9_]+)", methods_home.read_home),
    _route("POST", r"/views/(?P<view_id>[A-Z0-9_]+)/submit", Control.submit),
    _route("POST", r"/views/(?P<view_id>[A-Z0-9_]+)/close", Control.close),
    _route("GET", "/calls", Control.calls),
    _route("GET", "/deliveries", Control.deliveries),
    _route("GET", "/statuses", Control.statuses),
    _route("GET", "/faults", Control.faults),
    _route("POST", "/faults", Control.add_fault),
    _route("DELETE", "/faults", Control.clear_faults),
    _route("POST", r"/usergroups/(?P<group>[A-Za-z0-9_]+)", Control.set_usergroup),
    _route("POST", "/commands", commands.run_command),
    _route("POST", "/reset", Control.reset),
    _route("POST", "/url_verification", Control.verify_url),
    _route("POST", r"/page_buttons/(?P<button>[A-Za-z0-9_-]+)", Control.press),
]
