"""Mentions and thread replies: what the web process stores before it answers Slack.

Everything here runs on the ack path and touches Redis only (milliseconds). What it decides is
an ``Outcome`` that the lazy half of the listener acts on with Slack calls (reactions, notices).
If Redis fails the exception propagates, Bolt answers 500 and Slack retries: a 200 is only
ever sent for an event that is stored (or deliberately ignored).

Deduplication, both with ``SET NX`` and a TTL:

* ``event_id``: Slack's retries (``X-Slack-Retry-Num``) repeat it. A claim whose handling then
  fails is released, so the retry is processed instead of dropped.
* ``(channel, ts)``: one Slack message. A mention arrives twice, as ``app_mention`` and as
  ``message``, with different event ids; the reply path ignores messages that mention the bot,
  and both the run start and the inbox claim the message key, so it is acted on once.
"""

from __future__ import annotations

import logging
import re
from dataclasses import asdict, dataclass
from typing import Any

from agent.types import Message
from bot.inbox import DeliveryStatus
from bot.slack.runtime import WebRuntime

log = logging.getLogger(__name__)

REPLY_SUBTYPES = frozenset({None, "thread_broadcast", "file_share"})
CARRY_MESSAGES = 20  # the most earlier messages a new run in the same thread carries
CARRY_CHARS = 6000
MESSAGE_CLAIM_SECONDS = 24 * 3600


@dataclass(frozen=True)
class Outcome:
    """What the ack half decided; the lazy half reads it from the Bolt context (a plain dict)."""

    kind: str  # started | injected | duplicate | ignored | refused_channel
    channel: str = ""
    ts: str = ""
    thread_ts: str = ""
    user: str = ""
    run_id: str = ""
    notify: bool = False  # refused_channel: say so (the first time in this channel)

    def to_context(self) -> dict[str, Any]:
        return asdict(self)

    @classmethod
    def from_context(cls, value: object) -> Outcome:
        return cls(**value) if isinstance(value, dict) else cls("ignored")


IGNORED = Outcome("ignored")


def strip_mention(text: str, bot_user: str | None) -> str:
    """The mention text without the bot's own ``<@U…>`` (wherever it is)."""
    if bot_user:
        text = re.sub(rf"<@{re.escape(bot_user)}(?:\|[^>]*)?>", "", text)
    return re.sub(r"[ \t]{2,}", " ", text).strip()


def message_text(event: dict[str, Any]) -> str:
    """A message's text, plus the names of shared files (``file_share``)."""
    text = str(event.get("text") or "")
    names = [
        str(f.get("name") or f.get("title") or "file")
        for f in event.get("files") or ()
        if isinstance(f, dict)
    ]
    if names:
        text = f"{text}\n[attached: {', '.join(names)}]".strip()
    return text


def from_a_bot(event: dict[str, Any]) -> bool:
    return bool(event.get("bot_id")) or event.get("subtype") == "bot_message"


class EventHandler:
    """The ack-path logic for ``app_mention`` and ``message`` events."""

    def __init__(self, runtime: WebRuntime) -> None:
        self._rt = runtime

    # -- app_mention ----------------------------------------------------------------------------

    def mention(self, body: dict[str, Any], bot_user: str | None) -> Outcome:
        event = body.get("event") or {}
        if from_a_bot(event) or not event.get("user"):
            return IGNORED
        channel, ts, user = str(event["channel"]), str(event["ts"]), str(event["user"])
        thread_ts = str(event.get("thread_ts") or ts)
        if not self._rt.channel_allowed(channel):
            return self._refuse_channel(body, channel, ts, thread_ts, user)
        if not self._claim_event(body):
            return Outcome("duplicate", channel, ts, thread_ts, user)
        text = strip_mention(message_text(event), bot_user)
        try:
            return self._start_or_inject(channel, ts, thread_ts, user, text)
        except BaseException:
            self._release_event(body)
            raise

    def _start_or_inject(self, channel: str, ts: str, thread_ts: str, user: str, text: str) -> Outcome:
        service = self._rt.service()
        if service.active_run(channel, thread_ts):
            injected = self._inject(channel, ts, thread_ts, user, text)
            if injected is not None:
                return injected
        message_key = self._rt.keys.seen_message(channel, ts)
        if not self._rt.redis().set(message_key, "mention", nx=True, ex=MESSAGE_CLAIM_SECONDS):
            return Outcome("duplicate", channel, ts, thread_ts, user)
        try:
            prompt = self._with_earlier_conversation(channel, thread_ts, text) if thread_ts != ts else text
            submission = service.submit(channel, thread_ts, requester=user, text=prompt, message_ts=ts)
        except BaseException:
            self._rt.redis().delete(message_key)
            raise
        if not submission.created:
            # A run became active in this thread between our look and our submit: the mention
            # belongs to it. The message claim must go, or the inbox would take it for a retry.
            self._rt.redis().delete(message_key)
            return self._inject(channel, ts, thread_ts, user, text) or IGNORED
        self._rt.redis().set(
            self._last_run_key(channel, thread_ts), submission.run_id, ex=self._retention_seconds()
        )
        return Outcome("started", channel, ts, thread_ts, user, submission.run_id)

    def _with_earlier_conversation(self, channel: str, thread_ts: str, text: str) -> str:
        """The mention, preceded by what was said with the thread's previous run (if any)."""
        previous = self._rt.redis().get(self._last_run_key(channel, thread_ts))
        if not previous:
            return text
        history = self._rt.service().history(previous.decode() if isinstance(previous, bytes) else previous)
        transcript = earlier_conversation(history)
        if not transcript:
            return text
        return f"Earlier in this thread:\n{transcript}\n\nNew request: {text}"

    # -- thread replies -------------------------------------------------------------------------

    def reply(self, body: dict[str, Any], bot_user: str | None) -> Outcome:
        event = body.get("event") or {}
        if event.get("subtype") not in REPLY_SUBTYPES or from_a_bot(event) or not event.get("user"):
            return IGNORED
        channel, ts, user = str(event.get("channel") or ""), str(event.get("ts") or ""), str(event["user"])
        thread_ts = str(event.get("thread_ts") or "")
        if not thread_ts or thread_ts == ts or not channel:
            return IGNORED  # not a reply in a thread
        if bot_user and f"<@{bot_user}" in str(event.get("text") or ""):
            return IGNORED  # a mention: the app_mention event carries it
        if not self._rt.channel_allowed(channel) or not self._rt.service().active_run(channel, thread_ts):
            return IGNORED
        if not self._claim_event(body):
            return Outcome("duplicate", channel, ts, thread_ts, user)
        try:
            return self._inject(channel, ts, thread_ts, user, message_text(event)) or IGNORED
        except BaseException:
            self._release_event(body)
            raise

    def _inject(self, channel: str, ts: str, thread_ts: str, user: str, text: str) -> Outcome | None:
        """Deliver to the thread's active run; ``None`` when there is none any more."""
        delivery = self._rt.service().deliver(channel, thread_ts, user=user, text=text, ts=ts)
        if delivery.status is DeliveryStatus.NO_ACTIVE_RUN:
            return None
        return Outcome("injected", channel, ts, thread_ts, user, delivery.run_id or "")

    # -- helpers --------------------------------------------------------------------------------

    def _refuse_channel(
        self, body: dict[str, Any], channel: str, ts: str, thread_ts: str, user: str
    ) -> Outcome:
        """Outside ``CHATOPS_CHANNELS``: say so, once per channel."""
        if not self._claim_event(body):
            return Outcome("duplicate", channel, ts, thread_ts, user)
        key = self._rt.keys.slack("channel_notice", channel)
        first = bool(self._rt.redis().set(key, "1", nx=True, ex=self._retention_seconds()))
        return Outcome("refused_channel", channel, ts, thread_ts, user, notify=first)

    def _claim_event(self, body: dict[str, Any]) -> bool:
        event_id = body.get("event_id")
        return True if not event_id else self._rt.service().claim_event(str(event_id))

    def _release_event(self, body: dict[str, Any]) -> None:
        event_id = body.get("event_id")
        if event_id:
            try:
                self._rt.redis().delete(self._rt.keys.seen_event(str(event_id)))
            except Exception:  # Redis is likely what failed; the claim then expires with its TTL
                log.warning("could not release the claim on event %s", event_id)

    def _last_run_key(self, channel: str, thread_ts: str) -> str:
        return self._rt.keys.slack("thread_last_run", channel, thread_ts)

    def _retention_seconds(self) -> int:
        return self._rt.settings.chatops_retention_days * 24 * 3600


def earlier_conversation(history: list[Message]) -> str:
    """The people's messages and the bot's answers of an earlier run, as a short transcript."""
    lines: list[str] = []
    for message in history:
        if message.role == "user" and message.content:
            who = message.meta.get("slack_user") or "user"
            lines.append(f"<@{who}>: {message.content}")
        elif message.role == "assistant" and message.content and not message.tool_calls:
            lines.append(f"assistant: {message.content}")
    text = "\n".join(lines[-CARRY_MESSAGES:])
    return text[-CARRY_CHARS:]
