"""``/ops``: ``break-glass`` (here) and ``postmortem`` (``bot.slack.handlers.postmortem``).

``/ops break-glass``: declare, in a channel, that you may approve anything for a few minutes.

Only the people the policy names (``break_glass:`` in ``CHATOPS_POLICY_FILE``: users, or members
of its groups, read with ``usergroups.users.list``; full members unless named by ID) may; the
lookups fail closed. It is stored and audited (``bot.policy.break_glass``), then announced in the
channel; if the announcement cannot be posted it is revoked at once: break-glass is never silent.
The answer (only the person sees it) says until when.
"""

from __future__ import annotations

import logging
from typing import Any

import redis
from slack_bolt import Ack, App
from slack_sdk.errors import SlackApiError

from bot.observability.audit import AuditKind
from bot.policy.break_glass import BreakGlassLog
from bot.policy.deciders import Action
from bot.policy.file import current_policy
from bot.slack.handlers.handoff import handoff_reply
from bot.slack.handlers.postmortem import PostmortemDrafts
from bot.slack.handlers.runtime import WebRuntime
from bot.slack.rendering.blockkit import slack_date
from bot.slack.rendering.mrkdwn import mention

log = logging.getLogger(__name__)
COMMAND = "/ops"
USAGE = (
    "Usage: `/ops break-glass` (you may then approve any call for a few minutes; it is announced), "
    "`/ops postmortem <run id or thread link>` (a finished run's draft, in its thread), "
    "or `/ops handoff [#channel ...] [--since 12h] [--post]` (what is open, what changed)."
)


class BreakGlassCommand:
    """Decide a ``/ops`` command and answer it (stored and announced before the answer)."""

    def __init__(self, runtime: WebRuntime, log_of: BreakGlassLog | None = None) -> None:
        self._rt = runtime
        self._log = log_of

    def _glass(self) -> BreakGlassLog:
        if self._log is None:
            service = self._rt.service()
            return BreakGlassLog(service.redis, self._rt.keys, service.audit)
        return self._log

    def handle(self, user: str, channel: str, text: str) -> str:
        if text.strip().lower() != "break-glass":
            return USAGE
        if not self._rt.channel_allowed(channel):
            return "The bot does not work in this channel (CHATOPS_CHANNELS)."
        settings = self._rt.settings
        glass = current_policy(settings.chatops_policy_file, tuple(settings.chatops_approvers)).break_glass
        if glass is None:
            return "Break-glass is not configured (`break_glass:` in CHATOPS_POLICY_FILE)."
        verdict = self._rt.deciders.decide(user, Action.BREAK_GLASS)
        if not verdict.allowed:
            self._rt.service().audit.record(
                AuditKind.BREAK_GLASS, "", user=user, channel=channel, refused=verdict.reason or "not named"
            )
            return f"You may not declare break-glass. {verdict.reason}".strip()
        log_of = self._glass()
        until = log_of.declare(user, glass.minutes, channel)
        try:
            self._rt.client().chat_postMessage(
                channel=channel,
                text=(
                    f":rotating_light: {mention(user)} declared *break-glass*: they may approve any call "
                    f"until {slack_date(until)} ({glass.minutes} minutes). Every approval is audited."
                ),
            )
        except Exception:
            log.exception("break-glass by %s could not be announced in %s; revoked", user, channel)
            log_of.revoke(user, "the announcement could not be posted")
            return "Break-glass was NOT declared: the announcement could not be posted in this channel."
        return f"Break-glass is on until {slack_date(until)}. Every approval you make is audited."


def _postmortem(text: str) -> str | None:
    """The argument of ``postmortem <argument>``, or ``handoff [channels]`` (then starting with
    ``handoff``); ``None`` when the text is another command."""
    word, _, rest = text.strip().partition(" ")
    if word.lower() == "handoff":
        return f"handoff {rest.strip()}"
    return rest.strip() if word.lower() == "postmortem" else None


def register_ops_command(app: App, runtime: WebRuntime) -> None:
    """The ``/ops`` command's handler: break-glass decided and stored before the answer; a
    postmortem (Slack calls and a file upload: seconds) acknowledged at once, made after it and
    answered to the asker alone (``bot.slack.handlers.postmortem``)."""
    command = BreakGlassCommand(runtime)
    drafts = PostmortemDrafts(runtime)

    def handle(body: dict[str, Any], ack: Ack) -> None:
        user, channel = str(body.get("user_id", "")), str(body.get("channel_id", ""))
        text = str(body.get("text", ""))
        if _postmortem(text) is not None:
            ack(text="Gathering the facts…")
            return
        ack(text=command.handle(user, channel, text))

    def postmortem(body: dict[str, Any]) -> None:
        argument = _postmortem(str(body.get("text", "")))
        if argument is None:
            return
        user, channel = str(body.get("user_id", "")), str(body.get("channel_id", ""))
        try:
            if argument.startswith("handoff "):
                note = handoff_reply(user, channel, argument.removeprefix("handoff "), runtime)
            else:
                note = drafts.command(user, argument)
        except (SlackApiError, redis.RedisError) as error:
            log.warning("postmortem for %s failed: %s", user, error)
            note = "The postmortem draft could not be made (Slack or Redis failed); try again."
        try:
            runtime.client().chat_postEphemeral(channel=channel, user=user, text=note)
        except SlackApiError as error:
            log.warning("postmortem note to %s not posted: %s", user, error)

    app.command(COMMAND)(ack=handle, lazy=[postmortem])
