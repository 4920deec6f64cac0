"""Mentions and thread replies: what the web process stores before it answers Slack.

Everything here runs on the ack path and touches Redis only (milliseconds). What it decides is
an ``Outcome`` that the follow-up half of the listener acts on with Slack calls (reactions, notices).
If Redis fails the exception propagates, Bolt answers 500 and Slack retries: a 200 is only
ever sent for an event that is stored (or deliberately ignored).

Deduplication, both with two-phase ``SET NX`` claims (``bot.claims``):

* ``event_id``: Slack's retries (``X-Slack-Retry-Num``) repeat it. A claim whose handling then
  fails is released, so the retry is processed instead of dropped; a retry that arrives while
  the first attempt is still storing gets a non-2xx, so Slack comes back later.
* ``(channel, ts)``: one Slack message. A mention arrives twice, as ``app_mention`` and as
  ``message``, with different event ids; the reply path ignores messages that mention the bot,
  and both the run start and the inbox claim the message key, so it is acted on once.

A reply in a thread with an active run goes to its inbox. In a thread whose last run has ended,
a reply meant for the bot (``bot.slack.continuation``) is handled like a mention of it: the same
claims, limits and start, and the new run reads the thread's earlier runs
(``bot.runs.thread_history``), as a mention in that thread does.
"""

from __future__ import annotations

import logging
import re
import time
from collections.abc import Callable
from dataclasses import dataclass, replace
from enum import StrEnum
from typing import Any

from agent.redis_util import as_text
from bot.claims import Claims, ClaimState, claim_once
from bot.runs.early_replies import EARLY_REPLY_SECONDS
from bot.runs.inbox import DeliveryStatus
from bot.runs.limits import RunLimits
from bot.runs.thread_history import Earlier, earlier_runs
from bot.slack.continuation import continues, last_run, read_last_run, remember_last_run
from bot.slack.handlers.help import asks_for_help
from bot.slack.handlers.runtime import WebRuntime
from bot.slack.handlers.steering import may_supersede

log = logging.getLogger(__name__)

REPLY_SUBTYPES = frozenset({None, "thread_broadcast", "file_share"})


class OutcomeKind(StrEnum):
    """What the ack half did with an event."""

    STARTED = "started"  # a new run
    INJECTED = "injected"  # into the inbox of the thread's active run
    DUPLICATE = "duplicate"  # handled before: a retry, or a mention's second event
    IN_PROGRESS = "in_progress"  # another request is storing it: Slack is to retry later
    PARKED = "parked"  # a reply to a young thread with no run yet: kept for the run its mention starts
    IGNORED = "ignored"
    REFUSED_CHANNEL = "refused_channel"  # outside ``CHATOPS_CHANNELS``
    LIMITED = "limited"  # over a limit on new runs (``bot.runs.limits``)
    HELP = "help"  # a bare mention, "help", a greeting: the help reply, no run (``bot.slack.handlers.help``)


@dataclass(frozen=True)
class Outcome:
    """What the ack half decided; the follow-up half acts on it after the answer."""

    kind: OutcomeKind
    channel: str = ""
    ts: str = ""
    thread_ts: str = ""
    user: str = ""
    run_id: str = ""
    notify: bool = False  # refused_channel: say so (the first time in this channel)
    note: str = ""  # limited: the polite reply (``bot.runs.limits``)
    event_confirmed: bool = False  # the event id's claim was confirmed in the outcome's own write


@dataclass(frozen=True)
class Origin:
    """The message an event is about: where it was posted, and by whom."""

    channel: str
    ts: str
    thread_ts: str
    user: str
    event_key: str = ""  # the event id's claim (``_once``), which a started run confirms in its write

    def outcome(
        self,
        kind: OutcomeKind,
        *,
        run_id: str = "",
        notify: bool = False,
        note: str = "",
        event_confirmed: bool = False,
    ) -> Outcome:
        return Outcome(
            kind,
            self.channel,
            self.ts,
            self.thread_ts,
            self.user,
            run_id,
            notify,
            note,
            event_confirmed,
        )


IGNORED = Outcome(OutcomeKind.IGNORED)


def _not_taken(state: ClaimState) -> OutcomeKind:
    """A claim this request did not get: the event was stored before, or another request is storing it."""
    return OutcomeKind.DUPLICATE if state is ClaimState.DONE else OutcomeKind.IN_PROGRESS


def strip_mention(text: str, bot_user: str | None) -> str:
    """The mention text without the bot's own ``<@U…>`` (wherever it is)."""
    if bot_user:
        text = re.sub(rf"<@{re.escape(bot_user)}(?:\|[^>]*)?>", "", text)
    return re.sub(r"[ \t]{2,}", " ", text).strip()


def slack_id(value: object) -> str | None:
    """A field that must be a Slack ID or timestamp (a string with no spaces), else ``None``.

    Signed payloads of another shape are not Slack's; they are ignored (with a 200, since Slack
    would retry a 5xx), never stored under a garbled key or a garbled requester.
    """
    if isinstance(value, str) and value and len(value) <= 255 and not any(ch.isspace() for ch in value):
        return value
    return None


def event_of(body: dict[str, Any]) -> dict[str, Any]:
    event = body.get("event")
    return event if isinstance(event, dict) else {}


def message_text(event: dict[str, Any]) -> str:
    """A message's text, plus the names of shared files (``file_share``)."""
    raw = event.get("text")
    text = raw if isinstance(raw, str) else ""
    files = event.get("files")
    names = [
        str(f.get("name") or f.get("title") or "file")
        for f in (files if isinstance(files, list) else ())
        if isinstance(f, dict)
    ]
    if names:
        text = f"{text}\n[attached: {', '.join(names)}]".strip()
    return text


def from_a_bot(event: dict[str, Any]) -> bool:
    return bool(event.get("bot_id")) or event.get("subtype") == "bot_message"


class EventHandler:
    """The ack-path logic for ``app_mention`` and ``message`` events."""

    def __init__(self, runtime: WebRuntime, clock: Callable[[], float] = time.time) -> None:
        self._rt = runtime
        self._clock = clock
        self._claims = Claims(runtime.redis)
        self._limits = RunLimits(runtime.redis, runtime.keys, runtime.limits)

    # -- app_mention ----------------------------------------------------------------------------

    def mention(self, body: dict[str, Any], bot_user: str | None) -> Outcome:
        event = event_of(body)
        channel, ts, user = (
            slack_id(event.get("channel")),
            slack_id(event.get("ts")),
            slack_id(event.get("user")),
        )
        if from_a_bot(event) or not (channel and ts and user):
            return IGNORED
        thread_ts = slack_id(event.get("thread_ts")) or ts
        where = Origin(channel, ts, thread_ts, user)
        if not self._rt.channel_allowed(channel):
            return self._once(body, where, self._refuse_channel)
        text = strip_mention(message_text(event), bot_user)
        return self._once(body, where, lambda o: self._start_or_inject(o, text))

    def _start_or_inject(self, where: Origin, text: str) -> Outcome:
        service = self._rt.service()
        message_key = self._rt.keys.seen_message(where.channel, where.ts)
        helps = asks_for_help(text)  # no model call, no run: answered by the follow-up half
        state: ClaimState | None = None
        if where.ts == where.thread_ts and not helps:
            # A new thread's mention: a run in its thread is rare (an earlier attempt of this very
            # message, or a reply's mention that Slack delivered first), so the message is claimed
            # in the same round trip as the thread's active run is read.
            state, (raw,) = self._claims.take_along(
                message_key,
                lambda pipe: service.records.read_active_run(pipe, where.channel, where.thread_ts),
            )
            active = as_text(raw)
        else:
            active = service.active_run(where.channel, where.thread_ts)
        if active:
            if self._started_by(active, where.ts):
                # An earlier attempt for this very message started the run, then failed to confirm.
                self._claims.confirm(message_key, active)
                return where.outcome(OutcomeKind.DUPLICATE)
            if state is ClaimState.NEW:
                self._claims.release(message_key)  # the inbox claims the message itself
            injected = self._inject(where, text)
            if injected is not None:
                return injected
            state = None  # the run ended meanwhile: the message is claimed for a new one below
        if helps:
            return where.outcome(OutcomeKind.HELP)
        if state is None:
            state = self._claims.take(message_key)
        if state is not ClaimState.NEW:
            return where.outcome(_not_taken(state))
        refused = self._over_monthly_cap(where, message_key)
        if refused is not None:
            return refused
        try:
            admission = self._limits.admit(where.channel, where.user, where.ts)
        except BaseException:
            self._claims.release(message_key)
            raise
        if not admission.allowed:
            self._claims.confirm(message_key, "limited")  # a retry of this mention is answered once
            note = admission.message(where.user, self._limits.limits.window_seconds)
            return where.outcome(OutcomeKind.LIMITED, note=note)
        follows, earlier = self._earlier(where)
        # One round trip (MULTI/EXEC) for what a started run writes after its record: the start job,
        # the limits' binding, the thread's last run, the message's and the event's claims.
        pipeline = self._rt.redis().pipeline()
        try:
            submission = service.submit(
                where.channel,
                where.thread_ts,
                requester=where.user,
                text=text,
                message_ts=where.ts,
                follows=follows,
                earlier=earlier,
                search_similar=True,  # by the run's first job, off the ack path (bot.runs.first_similar)
                pipeline=pipeline,
            )
        except BaseException:
            self._limits.cancel(where.channel, where.user, where.ts)
            self._claims.release(message_key)
            raise
        if not submission.created:
            self._limits.cancel(where.channel, where.user, where.ts)  # no new run: the slot goes back
            if self._started_by(submission.run_id, where.ts):
                self._claims.confirm(message_key, submission.run_id)
                return where.outcome(OutcomeKind.DUPLICATE)
            # Another mention started a run in this thread a moment ago: this one belongs to it.
            # The message claim must go first, or the inbox would take the message for a retry.
            self._claims.release(message_key)
            return self._inject(where, text) or IGNORED
        self._limits.bind(where.channel, where.ts, submission.run_id, pipeline=pipeline)
        remember_last_run(pipeline, self._rt.keys, where.channel, where.thread_ts, submission.run_id)
        self._claims.confirm(message_key, submission.run_id, pipeline=pipeline)
        if where.event_key:  # the event id's claim too (``_once``): no round trip of its own
            self._claims.confirm(where.event_key, pipeline=pipeline)
        pipeline.execute()
        return where.outcome(
            OutcomeKind.STARTED,
            run_id=submission.run_id,
            event_confirmed=bool(where.event_key),
        )

    def _over_monthly_cap(self, where: Origin, message_key: str) -> Outcome | None:
        """The channel used its monthly tokens (``bot.runs.monthly_tokens``): no new run, a note in
        the thread saying so, and ``chatops_runs_refused{reason="monthly_tokens"}``."""
        try:
            over = self._rt.service().monthly.over_cap(where.channel)
        except BaseException:
            self._claims.release(message_key)
            raise
        if over is None:
            return None
        self._claims.confirm(message_key, "limited")  # a retry of this mention is answered once
        self._rt.metrics().run_refused("monthly_tokens")
        log.info("a run in %s refused: %d of %d monthly tokens used", where.channel, over.used, over.cap)
        return where.outcome(OutcomeKind.LIMITED, note=over.refusal())

    def _started_by(self, run_id: str, ts: str) -> bool:
        """Whether ``run_id`` was started by the message at ``ts``."""
        record = self._rt.service().get(run_id)
        return record is not None and record.message_ts == ts

    def _earlier(self, where: Origin) -> tuple[str, Earlier | None]:
        """The thread's last run, which a new run there continues, and what the model is to read of
        the thread's runs up to it (``bot.runs.thread_history``); empty in a new thread."""
        if where.thread_ts == where.ts:
            return "", None
        previous = last_run(self._rt.redis(), self._rt.keys, where.channel, where.thread_ts)
        if not previous:
            return "", None
        service = self._rt.service()
        earlier = earlier_runs(previous, service.get, service.history)
        return (previous, earlier) if earlier is not None else ("", None)

    # -- thread replies -------------------------------------------------------------------------

    def reply(self, body: dict[str, Any], bot_user: str | None) -> Outcome:
        event = event_of(body)
        channel, ts, user = (
            slack_id(event.get("channel")),
            slack_id(event.get("ts")),
            slack_id(event.get("user")),
        )
        subtype = event.get("subtype")
        if not (subtype is None or isinstance(subtype, str)) or subtype not in REPLY_SUBTYPES:
            return IGNORED
        if from_a_bot(event) or not (channel and ts and user):
            return IGNORED
        thread_ts = slack_id(event.get("thread_ts"))
        if not thread_ts or thread_ts == ts:
            return IGNORED  # not a reply in a thread
        if bot_user and f"<@{bot_user}" in message_text(event):
            return IGNORED  # a mention: the app_mention event carries it
        if not self._rt.channel_allowed(channel):
            return IGNORED
        where, text = Origin(channel, ts, thread_ts, user), message_text(event)
        active, previous = self._thread_runs(channel, thread_ts)
        if active:
            # To the run's inbox; should the run end meanwhile, the reply may continue the conversation.
            return self._once(
                body, where, lambda o: self._inject(o, text) or self._continue(o, text, bot_user)
            )
        if previous:  # the thread's run has ended: a reply meant for the bot continues it
            if not self._continues(previous, text, bot_user):
                return IGNORED
            return self._once(body, where, lambda o: self._start_or_inject(o, text))
        # No run in the thread yet: ignored, unless the thread is so young that its mention may still
        # be on its way to being stored (Slack's events come in any order): then parked for that run.
        if not self._young(thread_ts):
            return IGNORED
        return self._once(body, where, lambda o: self._inject(o, text, park=True) or IGNORED)

    def _thread_runs(self, channel: str, thread_ts: str) -> tuple[str | None, str | None]:
        """The thread's active run and its last run, read in one MULTI/EXEC. Read apart, a mention
        whose run started in between would show as the thread's *last* run with no active one, and
        the reply would be judged a follow-up of a run that has not ended: ignored, answered 200,
        lost (a reply sent right after its mention, under load)."""
        pipeline = self._rt.redis().pipeline(transaction=True)
        self._rt.service().records.read_active_run(pipeline, channel, thread_ts)
        read_last_run(pipeline, self._rt.keys, channel, thread_ts)
        active, previous = pipeline.execute()
        return as_text(active), as_text(previous)

    def _continue(self, where: Origin, text: str, bot_user: str | None) -> Outcome:
        """A reply whose run ended while it was being stored: a follow-up, if it is meant for the bot."""
        previous = last_run(self._rt.redis(), self._rt.keys, where.channel, where.thread_ts)
        if previous and self._continues(previous, text, bot_user):
            return self._start_or_inject(where, text)
        return IGNORED

    def _continues(self, previous: str, text: str, bot_user: str | None) -> bool:
        """Whether the reply starts a follow-up of the thread's last run (``bot.slack.continuation``)."""
        window = self._rt.settings.chatops_follow_up_minutes * 60
        record = self._rt.service().get(previous)
        return continues(record, text, bot_user, now=self._clock(), window_seconds=window)

    def _young(self, thread_ts: str) -> bool:
        """Whether the thread's root was posted within ``EARLY_REPLY_SECONDS`` of now (its ts says when)."""
        try:
            posted = float(thread_ts)
        except ValueError:
            return False
        return abs(self._clock() - posted) < EARLY_REPLY_SECONDS  # either way: Slack's clock is not ours

    def _inject(self, where: Origin, text: str, park: bool = False) -> Outcome | None:
        """Deliver to the thread's active run; ``None`` when there is none (and nothing was parked).

        The inbox claims the message itself, atomically with storing it.
        """
        delivery = self._rt.service().deliver(
            where.channel,
            where.thread_ts,
            user=where.user,
            text=text,
            ts=where.ts,
            may_supersede=self._may_supersede(where),
            park=park,
        )
        if delivery.status is DeliveryStatus.NO_ACTIVE_RUN:
            return None
        if delivery.status is DeliveryStatus.FULL:
            return where.outcome(OutcomeKind.IN_PROGRESS)  # not stored: Slack retries it later
        if delivery.status is DeliveryStatus.PARKED or (
            delivery.status is DeliveryStatus.DUPLICATE and not delivery.run_id
        ):
            return where.outcome(OutcomeKind.PARKED)  # the worker reacts once the run reads it
        return where.outcome(OutcomeKind.INJECTED, run_id=delivery.run_id or "")

    def _may_supersede(self, where: Origin) -> bool:
        """Whether this reply may cancel the run's pending approvals (``bot.slack.handlers.steering``)."""
        return may_supersede(self._rt, where.channel, where.thread_ts, where.user, f"reply {where.ts}")

    # -- helpers --------------------------------------------------------------------------------

    def _once(self, body: dict[str, Any], where: Origin, handle: Callable[[Origin], Outcome]) -> Outcome:
        """Run ``handle`` for an event id not seen before (see ``bot.claims``)."""
        event_id = slack_id(body.get("event_id"))
        if not event_id:
            return handle(where)  # the message key still dedupes it
        key = self._rt.keys.seen_event(event_id)
        state = self._claims.take(key)
        if state is not ClaimState.NEW:
            return where.outcome(_not_taken(state))
        try:
            outcome = handle(replace(where, event_key=key))
        except BaseException:
            self._claims.release(key)
            raise
        if outcome.kind is OutcomeKind.IN_PROGRESS:
            self._claims.release(key)  # the message is being stored by another request: retry later
        elif not outcome.event_confirmed:
            self._claims.confirm(key)
        return outcome

    def _refuse_channel(self, where: Origin) -> Outcome:
        """Outside ``CHATOPS_CHANNELS``: say so, once per channel."""
        key = self._rt.keys.slack("channel_notice", where.channel)
        first = claim_once(self._rt.redis(), key, self._retention_seconds())
        return where.outcome(OutcomeKind.REFUSED_CHANNEL, notify=first)

    def _retention_seconds(self) -> int:
        return self._rt.settings.chatops_retention_days * 24 * 3600
