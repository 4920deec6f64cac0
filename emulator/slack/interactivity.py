"""Interactivity payloads (``block_actions``, ``view_submission``) and what the app's answers do.

Payloads are built from stored messages and modals so they carry exactly what Slack would: the
full message with its blocks, the container, a fresh ``trigger_id`` and a ``response_url``.
"""

from __future__ import annotations

import time
from typing import Any

from emulator.slack.ids import format_ts
from emulator.slack.model import Message, User, View
from emulator.slack.state import Workspace


class InteractionError(ValueError):
    """The requested interaction is impossible (no such button, modal or user)."""


def _user(ws: Workspace, user: User) -> dict[str, Any]:
    return {
        "id": user.id,
        "username": user.name,
        "name": user.name,
        "team_id": user.home_team(ws.config.team_id),
    }


def _team(ws: Workspace) -> dict[str, Any]:
    team: dict[str, Any] = {"id": ws.config.team_id, "domain": ws.config.team_domain}
    if ws.config.enterprise_id:
        team["enterprise_id"] = ws.config.enterprise_id
    return team


def find_button(
    msg: Message, action_id: str | None, value: str | None
) -> tuple[dict[str, Any], dict[str, Any]]:
    """The ``(block, element)`` of the first button matching ``action_id`` and/or ``value``
    (a ``feedback_buttons`` element of a ``context_actions`` block counts as its two buttons)."""
    for block in msg.blocks or []:
        elements = list(block.get("elements") or []) if block.get("type") == "actions" else []
        if block.get("type") == "context_actions":
            elements = feedback_buttons(block)
        if isinstance(block.get("accessory"), dict):
            elements.append(block["accessory"])
        for element in elements:
            if isinstance(element, dict) and element.get("type") == "overflow":
                chosen = _overflow_choice(element, action_id, value)
                if chosen is not None:
                    return block, chosen
                continue
            if not isinstance(element, dict) or element.get("type") != "button":
                continue
            if action_id is not None and element.get("action_id") != action_id:
                continue
            if value is not None and element.get("value") != value:
                continue
            return block, element
    raise InteractionError(f"no button with action_id={action_id!r} value={value!r} in message {msg.ts}")


def _overflow_choice(
    element: dict[str, Any], action_id: str | None, value: str | None
) -> dict[str, Any] | None:
    """An overflow menu's option chosen by its ``value`` (a person picks one: a value is needed),
    as a clickable element whose payload carries ``selected_option``."""
    if value is None or (action_id is not None and element.get("action_id") != action_id):
        return None
    for option in element.get("options") or []:
        if isinstance(option, dict) and option.get("value") == value:
            return {
                "type": "button",
                "action_type": "overflow",
                "action_id": element.get("action_id", ""),
                "selected_option": {"text": option.get("text"), "value": option.get("value")},
            }
    return None


def feedback_buttons(block: dict[str, Any]) -> list[dict[str, Any]]:
    """The buttons of a ``context_actions`` block's ``feedback_buttons`` as clickable elements:
    Slack's payload names the element's ``action_id``, type ``feedback_buttons`` and the button's ``value``."""
    found: list[dict[str, Any]] = []
    for element in block.get("elements") or []:
        if not isinstance(element, dict) or element.get("type") != "feedback_buttons":
            continue
        for side in ("positive_button", "negative_button"):
            button = element.get(side)
            if isinstance(button, dict):
                found.append(
                    {
                        "type": "button",
                        "action_type": "feedback_buttons",
                        "action_id": element.get("action_id", ""),
                        "text": button.get("text"),
                        "value": button.get("value"),
                    }
                )
    return found


def block_actions_payload(
    ws: Workspace,
    msg: Message,
    block: dict[str, Any],
    button: dict[str, Any],
    user: User,
    trigger_id: str,
    response_url: str,
) -> dict[str, Any]:
    """The ``block_actions`` payload for ``user`` clicking ``button`` in ``msg``."""
    container: dict[str, Any] = {
        "type": "message",
        "message_ts": msg.ts,
        "channel_id": msg.channel,
        "is_ephemeral": msg.ephemeral_to is not None,
    }
    if msg.is_reply:
        container["thread_ts"] = msg.thread_ts
    action: dict[str, Any] = {
        "action_id": button.get("action_id", ""),
        "block_id": block.get("block_id", ""),
        "text": button.get("text"),
        "value": button.get("value"),
        "type": button.get("action_type", "button"),
        "action_ts": format_ts(time.time_ns() // 1000),
    }
    if "selected_option" in button:  # an overflow menu's choice: Slack sends the option, no text or value
        action = {k: v for k, v in action.items() if k not in ("text", "value")}
        action["selected_option"] = button["selected_option"]
    if "style" in button:
        action["style"] = button["style"]
    payload: dict[str, Any] = {
        "type": "block_actions",
        "user": _user(ws, user),
        "api_app_id": ws.config.app_id,
        "token": ws.config.verification_token,
        "container": container,
        "trigger_id": trigger_id,
        "team": _team(ws),
        "enterprise": enterprise(ws),
        "is_enterprise_install": False,
        "channel": {"id": msg.channel, "name": ws.channels[msg.channel].name},
    }
    if msg.ephemeral_to is None:
        payload["message"] = ws.render(msg)  # Slack leaves the message out for ephemeral ones
    payload.update({"state": {"values": {}}, "response_url": response_url, "actions": [action]})
    return payload


def enterprise(ws: Workspace) -> dict[str, str] | None:
    """The Enterprise Grid org an interaction came from (``None`` outside a Grid)."""
    cfg = ws.config
    return {"id": cfg.enterprise_id, "name": cfg.enterprise_name} if cfg.enterprise_id else None


def view_submission_payload(ws: Workspace, view: View, user: User, trigger_id: str) -> dict[str, Any]:
    """The ``view_submission`` payload for ``user`` submitting ``view`` (values already stored)."""
    return {
        "type": "view_submission",
        "team": _team(ws),
        "user": _user(ws, user),
        "api_app_id": ws.config.app_id,
        "token": ws.config.verification_token,
        "trigger_id": trigger_id,
        "view": view.to_slack(),
        "response_urls": [],
        "is_enterprise_install": False,
        "enterprise": enterprise(ws),
    }


def state_values(view: View, inputs: dict[str, Any]) -> tuple[dict[str, dict[str, Any]], dict[str, str]]:
    """Slack's ``state.values`` for the modal's input blocks, and the client-side "required" errors.

    ``inputs`` maps ``block_id -> {action_id: value}`` or, for short, ``action_id -> value``. A
    value is the typed text, an option ``value`` for selects and radios, or a list for checkboxes.
    """
    values: dict[str, dict[str, Any]] = {}
    missing: dict[str, str] = {}
    for block in view.definition.get("blocks") or []:
        if block.get("type") != "input" or not isinstance(block.get("element"), dict):
            continue
        element = block["element"]
        block_id, action_id = str(block.get("block_id", "")), str(element.get("action_id", ""))
        nested = inputs.get(block_id)
        raw = nested.get(action_id) if isinstance(nested, dict) else inputs.get(action_id)
        if raw in (None, "", []) and not block.get("optional", False):
            missing[block_id] = "This field is required."
        values[block_id] = {action_id: _element_state(element, raw)}
    return values, missing


def _element_state(element: dict[str, Any], raw: Any) -> dict[str, Any]:
    kind = element.get("type", "plain_text_input")
    options = [o for o in element.get("options") or [] if isinstance(o, dict)]

    def option(value: Any) -> dict[str, Any] | None:
        return next((o for o in options if o.get("value") == value), None)

    if kind in ("static_select", "radio_buttons"):
        return {"type": kind, "selected_option": option(raw)}
    if kind == "checkboxes":
        chosen = raw if isinstance(raw, list) else [raw] if raw else []
        return {"type": kind, "selected_options": [o for o in options if o.get("value") in chosen]}
    return {"type": kind, "value": None if raw in (None, "") else str(raw)}


def apply_response_url(ws: Workspace, target: dict[str, Any], body: dict[str, Any]) -> Message | None:
    """Do what a POST to a ``response_url`` asks; returns a newly posted channel message, if any.

    ``replace_original``/``delete_original`` act on the message the interaction came from;
    otherwise a new message is posted, ephemeral to the clicker unless ``response_type`` is
    ``in_channel``.
    """
    bot = ws.config.bot_user_id
    original = ws.message(target["channel"], target["message_ts"]) if target.get("message_ts") else None
    blocks = body.get("blocks") if isinstance(body.get("blocks"), list) else None
    text = str(body.get("text") or "")
    if body.get("delete_original") and original is not None:
        ws.delete_message(original)
        return None
    if body.get("replace_original") and original is not None:
        ws.update_message(original, text, blocks, bot)
        return None
    thread_ts = body.get("thread_ts") or target.get("thread_ts")
    if body.get("response_type") == "in_channel":
        return ws.add_message(target["channel"], bot, text, blocks, thread_ts=thread_ts)
    ws.add_message(target["channel"], bot, text, blocks, thread_ts=thread_ts, ephemeral_to=target["user"])
    return None
