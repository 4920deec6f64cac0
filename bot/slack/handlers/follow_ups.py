"""What the web process does in Slack after it has answered an event: the follow-up half.

The ack half (``bot.slack.handlers.events``) stores the event and decides an ``Outcome``; the app hands
only an outcome with Slack calls to make to a pool of its own, which runs ``FollowUps``: :eyes:
on a new run's mention and on an injected reply, the queued note's check, the help reply, the
notices for a limited mention or a refused channel, and the App Home tab. (A mention's run's
"Similar:" note is the worker's: ``bot.runs.first_similar``.)
"""

from __future__ import annotations

import logging
from dataclasses import dataclass

from slack_sdk import WebClient
from slack_sdk.errors import SlackApiError

from bot.slack.delivery.acknowledgements import Acknowledgements
from bot.slack.handlers.events import Outcome, OutcomeKind
from bot.slack.handlers.help import TargetList, help_text
from bot.slack.handlers.home import publish_home
from bot.slack.handlers.queued_note import Timer, post_if_still_queued
from bot.slack.handlers.runtime import WebRuntime

log = logging.getLogger(__name__)


@dataclass
class FollowUps:
    """The Slack side of a stored event, after the answer: :eyes: on a new run's mention and on an
    injected reply (``bot.slack.delivery.acknowledgements``: the worker will not react again), the queued
    note's check, the help reply, the notices."""

    runtime: WebRuntime
    timer: Timer
    targets: TargetList

    def logged(self, outcome: Outcome, bot_user: str | None) -> None:
        try:
            self.run(outcome, bot_user)
        except Exception:
            log.exception("follow-up of %s in %s failed", outcome.kind, outcome.channel)

    def run(self, outcome: Outcome, bot_user: str | None) -> None:
        runtime = self.runtime
        client = runtime.client()
        try:
            if outcome.kind is OutcomeKind.STARTED:
                self._schedule_queued_note(outcome)
                self._eyes(client, outcome)
            elif outcome.kind is OutcomeKind.INJECTED:
                self._eyes(client, outcome)
            elif outcome.kind is OutcomeKind.HELP:
                client.chat_postMessage(
                    channel=outcome.channel, thread_ts=outcome.thread_ts, text=self.help(outcome, bot_user)
                )
            elif outcome.kind is OutcomeKind.LIMITED:  # over a limit on new runs: say why, politely
                client.chat_postMessage(
                    channel=outcome.channel, thread_ts=outcome.thread_ts, text=outcome.note
                )
            elif outcome.kind is OutcomeKind.REFUSED_CHANNEL and outcome.notify:
                client.chat_postMessage(
                    channel=outcome.channel, thread_ts=outcome.thread_ts, text=channel_notice(runtime)
                )
        except SlackApiError as error:
            log.warning("follow-up of %s in %s failed: %s", outcome.kind, outcome.channel, error)

    def _eyes(self, client: WebClient, outcome: Outcome) -> None:
        """:eyes: within Slack's rate tier (``bot.slack.handlers.courtesy``); skipped under a flood, when
        the worker's card follows anyway (a reply's is made up by the worker that reads it)."""
        acks = Acknowledgements(self.runtime.redis(), self.runtime.keys)
        self.runtime.courtesy().call(
            client, "reactions.add", lambda slack: acks.react(slack, outcome.channel, outcome.ts)
        )

    def help(self, outcome: Outcome, bot_user: str | None) -> str:
        return help_text(
            bot_user,
            self.targets.for_channel(outcome.channel),
            implicit=self.targets.inventory.implicit,
            follow_up_minutes=self.runtime.settings.chatops_follow_up_minutes,
        )

    def _schedule_queued_note(self, outcome: Outcome) -> None:
        delay = self.runtime.tuning.queued_note_seconds
        if delay <= 0 or not outcome.run_id:
            return
        run_id, channel, thread_ts = outcome.run_id, outcome.channel, outcome.thread_ts

        def check() -> None:
            try:
                post_if_still_queued(self.runtime, run_id, channel, thread_ts)
            except Exception:
                log.exception("the queued note's check of run %s failed", run_id)

        self.timer.later(delay, check)


def home_logged(runtime: WebRuntime, user: str, bot_user: str | None) -> None:
    try:
        publish_home(runtime, user, bot_user)
    except Exception:
        log.exception("the Home tab of %s was not published", user)


def channel_notice(runtime: WebRuntime) -> str:
    channels = ", ".join(f"<#{c}>" for c in runtime.settings.chatops_channels)
    return (
        f"Sorry, I only take requests in {channels}. "
        "Please mention me there (I will not repeat this note in this channel)."
    )
