"""What people do in the emulated Slack: post, click, submit modals; and the Web API wired to delivery.

The control API, the web page and tests all act through ``Core``, so a click from the page and
a click from a test produce the same signed ``block_actions`` request to the bot.
"""

from __future__ import annotations

import secrets
import uuid
from types import ModuleType
from typing import Any

from emulator.slack import methods_chat, methods_files, methods_home, methods_info, methods_stream
from emulator.slack.config import WorkspaceConfig
from emulator.slack.delivery import Attempt, Deliverer
from emulator.slack.events import events_for_new_message
from emulator.slack.hub import Hub
from emulator.slack.interactivity import (
    InteractionError,
    apply_response_url,
    block_actions_payload,
    enterprise,
    find_button,
    state_values,
    view_submission_payload,
)
from emulator.slack.model import Message, User, View
from emulator.slack.page_buttons import PageButtons
from emulator.slack.scopes import method_scopes
from emulator.slack.state import Workspace
from emulator.slack.text import escape_user_text, rich_text_block, translate_mentions
from emulator.slack.webapi import ApiResult, WebApi

RESPONSE_URL_USES = 5  # Slack accepts five posts to one response_url
# The Web API's method modules: each has ``HANDLERS`` (method -> handler) and may declare the
# ``SCOPES`` (method -> scopes, any one of which will do) and rate ``TIERS`` of methods that
# ``emulator.slack.scopes`` / ``ratelimits`` do not list. A new module is one more name here.
METHOD_MODULES: tuple[ModuleType, ...] = (
    methods_chat,
    methods_info,
    methods_files,
    methods_home,
    methods_stream,
)


def web_api(ws: Workspace, modules: tuple[ModuleType, ...] = METHOD_MODULES) -> WebApi:
    """The Web API over ``modules``; every handled method must have a scope entry (checked here)."""
    handlers: dict[str, Any] = {}
    extra_scopes: dict[str, tuple[str, ...]] = {}
    for module in modules:
        handlers.update(module.HANDLERS)
        extra_scopes.update(getattr(module, "SCOPES", {}))
        ws.limiter.tiers.update(getattr(module, "TIERS", {}))
    scopes = method_scopes(extra_scopes)
    unlisted = sorted(set(handlers) - set(scopes))
    if unlisted:
        raise ValueError(f"no scope entry for {', '.join(unlisted)} (give the module a SCOPES)")
    return WebApi(ws, handlers, scopes)


class ControlError(Exception):
    """A control request that cannot be done; ``status`` is the HTTP status to answer with."""

    def __init__(self, status: int, error: str) -> None:
        super().__init__(error)
        self.status = status
        self.error = error


class Core:
    """The workspace plus the Web API and the delivery of events and interactions to the bot."""

    def __init__(self, config: WorkspaceConfig, hub: Hub) -> None:
        self.hub = hub
        self.ws = Workspace(config, publish=hub.publish)
        self.deliverer = Deliverer(self.ws)
        self.webapi = web_api(self.ws)
        self.page_buttons = PageButtons()

    @property
    def base_url(self) -> str:
        """Where the emulator answers (set once it listens): response_urls and upload URLs use it."""
        return self.ws.base_url

    @base_url.setter
    def base_url(self, url: str) -> None:
        self.ws.base_url = url

    def api(
        self, method: str, http_method: str, headers: dict[str, str], query: str, raw: bytes
    ) -> ApiResult:
        """Answer a Web API call, then deliver the events it caused."""
        result = self.webapi.call(method, http_method, headers, query, raw)
        self._deliver(result.envelopes)
        return result

    def _deliver(self, envelopes: list[dict[str, Any]]) -> list[str]:
        for item in envelopes:
            self.deliverer.deliver_event(item)
        return [item["event_id"] for item in envelopes]

    # --- lookups ---------------------------------------------------------------------------------

    def _user(self, ref: str) -> User:
        """A person who can act: no bot, and no deactivated account (it can neither post nor click)."""
        user = self.ws.user_ref(ref) if ref else None
        if user is None or user.is_bot:
            raise ControlError(404, "user_not_found")
        if user.deleted:
            raise ControlError(403, "account_inactive")
        return user

    def _in_channel(self, user: User, channel: str) -> None:
        """Slack shows a channel (to post in, or a message to click) only to its members."""
        if user.id not in self.ws.channels[channel].members:
            raise ControlError(403, "not_in_channel")

    def _message(self, channel_ref: str | None, ts: str, viewer: User) -> Message:
        channels = [self.ws.channel(channel_ref)] if channel_ref else list(self.ws.channels.values())
        for channel in channels:
            msg = self.ws.message(channel.id, ts) if channel else None
            if msg is not None and msg.ephemeral_to in (None, viewer.id):
                return msg
        raise ControlError(404, "message_not_found")

    def _view(self, view_id: str) -> View:
        view = self.ws.views.get(view_id)
        if view is None or not view.is_open:
            raise ControlError(404, "view_not_found")
        return view

    # --- people acting -------------------------------------------------------------------------

    def post_as_user(
        self,
        channel_ref: str,
        user_ref: str,
        text: str,
        thread_ts: str | None = None,
        broadcast: bool = False,
    ) -> dict[str, Any]:
        """Post ``text`` as a person; ``@name`` becomes a mention. Returns the ts and event IDs sent."""
        if not text.strip():
            raise ControlError(400, "no_text")
        with self.ws.lock:
            channel = self.ws.channel(channel_ref)
            if channel is None:
                raise ControlError(404, "channel_not_found")
            user = self._user(user_ref)
            self._in_channel(user, channel.id)
            if thread_ts and self.ws.message(channel.id, thread_ts) is None:
                raise ControlError(404, "thread_not_found")
            names, groups = self.ws.mention_names()
            formatted = translate_mentions(escape_user_text(text), names, groups)
            msg = self.ws.add_message(
                channel.id,
                user.id,
                formatted,
                [rich_text_block(formatted)],
                thread_ts=thread_ts,
                broadcast=broadcast,
                client_msg_id=str(uuid.uuid4()),
            )
            envelopes = events_for_new_message(self.ws, msg)
        return {
            "ok": True,
            "channel": channel.id,
            "ts": msg.ts,
            "thread_ts": msg.thread_ts,
            "text": formatted,
            "event_ids": self._deliver(envelopes),
            "event_types": [item["event"]["type"] for item in envelopes],
        }

    def post_as_bot(
        self,
        channel_ref: str,
        bot_id: str,
        text: str,
        *,
        user: str = "",
        username: str = "",
        thread_ts: str | None = None,
        classic: bool = True,
    ) -> dict[str, Any]:
        """Another app or integration posts (``bot_id``; ``subtype: bot_message`` when ``classic``).

        What it writes is taken as it comes: no escaping, no ``@name`` translation, so a test can
        send the hostile markup another bot could. It may mention this app (``app_mention``)."""
        if not bot_id.startswith("B") or bot_id == self.ws.config.bot_id:
            raise ControlError(400, "bot_id_must_be_another_apps_B_id")
        with self.ws.lock:
            channel = self.ws.channel(channel_ref)
            if channel is None:
                raise ControlError(404, "channel_not_found")
            if thread_ts and self.ws.message(channel.id, thread_ts) is None:
                raise ControlError(404, "thread_not_found")
            msg = self.ws.add_message(channel.id, user, text, None, thread_ts=thread_ts)
            msg.bot_id, msg.app_id, msg.username = bot_id, "A" + bot_id[1:], username or None
            msg.subtype = "bot_message" if classic else None
            envelopes = events_for_new_message(self.ws, msg)
        return {
            "ok": True,
            "channel": channel.id,
            "ts": msg.ts,
            "event_ids": self._deliver(envelopes),
            "event_types": [item["event"]["type"] for item in envelopes],
        }

    def click(
        self,
        message_ts: str,
        user_ref: str,
        action_id: str | None = None,
        value: str | None = None,
        channel_ref: str | None = None,
    ) -> dict[str, Any]:
        """Click a button in a message as a person: a signed ``block_actions`` POST to the bot."""
        with self.ws.lock:
            user = self._user(user_ref)
            msg = self._message(channel_ref, message_ts, user)
            self._in_channel(user, msg.channel)
            try:
                block, button = find_button(msg, action_id, value)
            except InteractionError as exc:
                raise ControlError(404, str(exc)) from None
            trigger_id = self.ws.issue_trigger(user.id)
            token = secrets.token_urlsafe(18)
            self.ws.response_urls[token] = {
                "channel": msg.channel,
                "message_ts": msg.ts,
                "thread_ts": msg.thread_ts,
                "user": user.id,
                "uses": 0,
            }
            url = f"{self.base_url}/actions/{self.ws.config.team_id}/{secrets.randbelow(10**12)}/{token}"
            payload = block_actions_payload(self.ws, msg, block, button, user, trigger_id, url)
        attempt = self.deliverer.send_interaction(payload)
        return {**_outcome(attempt), "trigger_id": trigger_id, "response_url": url, "payload": payload}

    def submit_view(self, view_id: str, user_ref: str | None, inputs: dict[str, Any]) -> dict[str, Any]:
        """Submit a modal: required fields are checked first, as the Slack client does."""
        with self.ws.lock:
            view = self._view(view_id)
            user = self._user(user_ref or view.user)
            if user.id != view.user:
                raise ControlError(403, "view_belongs_to_another_user")
            values, missing = state_values(view, inputs)
            view.values = values
            if missing:
                view.errors = missing
                self.ws.publish({"type": "view", "view_id": view.id, "user": view.user})
                return {"ok": False, "error": "required_fields", "errors": missing, "view_open": True}
            payload = view_submission_payload(self.ws, view, user, self.ws.issue_trigger(user.id))
        attempt = self.deliverer.send_interaction(payload)
        result = {**_outcome(attempt), "response_action": None, "errors": {}}
        if attempt.ok:
            answer = attempt.json()
            answer = answer if isinstance(answer, dict) else {}
            result.update(self._apply_view_answer(view, answer))
        result["view_open"] = view.is_open
        return result

    def _apply_view_answer(self, view: View, answer: dict[str, Any]) -> dict[str, Any]:
        action = answer.get("response_action")
        if action == "errors" and isinstance(answer.get("errors"), dict):
            with self.ws.lock:
                view.errors = {str(k): str(v) for k, v in answer["errors"].items()}
            self.ws.publish({"type": "view", "view_id": view.id, "user": view.user})
            return {"response_action": action, "errors": view.errors}
        if action in ("update", "push") and isinstance(answer.get("view"), dict):
            self.ws.replace_view(view, answer["view"])
        else:
            self.ws.close_view(view)
        return {"response_action": action}

    def close_view(self, view_id: str, user_ref: str | None) -> dict[str, Any]:
        """Cancel a modal; the bot hears ``view_closed`` only if the view asked (``notify_on_close``)."""
        with self.ws.lock:
            view = self._view(view_id)
            user = self._user(user_ref or view.user)
            notify = bool(view.definition.get("notify_on_close"))
            payload = {
                "type": "view_closed",
                "team": {"id": self.ws.config.team_id, "domain": self.ws.config.team_domain},
                "user": {
                    "id": user.id,
                    "username": user.name,
                    "name": user.name,
                    "team_id": self.ws.config.team_id,
                },
                "api_app_id": self.ws.config.app_id,
                "token": self.ws.config.verification_token,
                "view": view.to_slack(),
                "is_cleared": False,
                "is_enterprise_install": False,
                "enterprise": enterprise(self.ws),
            }
        self.ws.close_view(view)
        if notify:
            return {**_outcome(self.deliverer.send_interaction(payload)), "notified": True}
        return {"ok": True, "notified": False}

    def respond(self, token: str, body: dict[str, Any]) -> tuple[int, dict[str, Any]]:
        """A POST by the bot to a ``response_url``."""
        with self.ws.lock:
            target = self.ws.response_urls.get(token)
            if target is None:
                return 404, {"ok": False, "error": "invalid_url"}
            if target["uses"] >= RESPONSE_URL_USES:
                return 404, {"ok": False, "error": "used_url"}
            target["uses"] += 1
            posted = apply_response_url(self.ws, target, body)
            envelopes = events_for_new_message(self.ws, posted) if posted else []
        self._deliver(envelopes)
        return 200, {"ok": True}


def _outcome(attempt: Attempt) -> dict[str, Any]:
    return {"ok": attempt.ok, "status": attempt.status, "outcome": "ok" if attempt.ok else attempt.reason}
