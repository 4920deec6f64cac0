"""Slash commands: a person types ``/ops break-glass`` in a channel; Slack POSTs the signed form.

Slack sends a command only from someone in the channel, to the app's request URL (Bolt serves
commands on ``/slack/events``), form-encoded: ``command``, ``text``, ``user_id``, ``channel_id``,
``team_id``, ``response_url``, ``trigger_id``, ... It does not retry: the person sees an error
when the app does not answer within 3 s; the answer's body (JSON ``text``) is shown to them alone.

Control route: ``POST /control/commands`` ``{user, channel, command, text}``.
"""

from __future__ import annotations

import json
import secrets
import urllib.parse
from typing import TYPE_CHECKING, Any

from emulator.slack.delivery import post_signed

if TYPE_CHECKING:
    from emulator.slack.control import Control


def run_command(control: Control, _p: dict[str, str], body: dict[str, Any], _a: dict[str, str]) -> Any:
    """``user`` runs ``command text`` in ``channel``: the signed POST, and the bot's answer."""
    from emulator.slack.core import ControlError

    ws = control.ws
    cfg = ws.config
    with ws.lock:
        user = ws.user_ref(str(body.get("user", "")))
        channel = ws.channel(str(body.get("channel", "")))
        if user is None or user.is_bot or user.deleted:
            raise ControlError(404, "user_not_found")
        if channel is None or user.id not in channel.members:
            raise ControlError(403, "not_in_channel")
        command = str(body.get("command", ""))
        if not command.startswith("/"):
            raise ControlError(400, "invalid_command")
        token = secrets.token_urlsafe(18)
        form = {
            "token": cfg.verification_token,
            "team_id": cfg.team_id,
            "team_domain": cfg.team_domain,
            "channel_id": channel.id,
            "channel_name": channel.name,
            "user_id": user.id,
            "user_name": user.name,
            "command": command,
            "text": str(body.get("text", "")),
            "api_app_id": cfg.app_id,
            "is_enterprise_install": "false",
            "response_url": f"{control.core.base_url}/commands/{cfg.team_id}/{token}",
            "trigger_id": f"{secrets.randbelow(10**12)}.{secrets.token_hex(8)}",
        }
    url = cfg.events_url
    if not url:
        return {"ok": False, "status": None, "outcome": "no_url"}
    encoded = urllib.parse.urlencode(form).encode()
    attempt = post_signed(
        url, encoded, "application/x-www-form-urlencoded", cfg.signing_secret, cfg.event_timeout
    )
    try:
        answer = json.loads(attempt.body or b"{}")
    except ValueError:
        answer = {"text": attempt.body.decode(errors="replace")}
    return {"ok": attempt.ok, "status": attempt.status, "answer": answer}
