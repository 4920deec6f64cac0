"""Refute / Focus on this: a hypothesis's menu on the Findings message reaches the run like a thread reply.

Decided before Slack is answered (Redis and the cached identity lookup, milliseconds), like an
Approve click: Slack does not retry clicks, so a 200 means "stored".

* **Nothing in the payload is trusted.** The option's value names a choice, a hypothesis and a
  run (``bot.slack.rendering.findings.choice_value``); the click counts only if that run is the
  thread's active run, the click came from that run's channel and thread, from the message the
  run record names as its Findings message (``RunRecord.findings_ts``), in a channel the bot
  serves, and the hypothesis is one of the run's stored findings. A forged payload (another run,
  another channel or thread, another message, a made-up hypothesis) changes nothing and says why.
* **Who may**: whoever's thread reply would reach the run (``Action.STEER``: a person, not a bot,
  an app or an unknown account), and, as for a reply, it cancels a pending approval only when they
  may decide (``bot.slack.handlers.steering``, ``Action.SUPERSEDE``); anyone else's waits in the
  inbox until the approval is decided.
* **What the model reads** is a user message in the run's inbox, written from the stored findings
  (never from the payload): ``<@U…> refutes H2: <statement>`` or ``<@U…> asks to focus on H2:
  <statement>``. It is claimed once per person, choice, hypothesis and findings version: a double
  click is one message.
* **Acknowledged once stored**, as a reply is: the web process says in the thread who refuted or
  asked to focus on what (what a reply would have shown everyone) and puts :eyes: on it. The
  clicker alone is told when the click did nothing.
"""

from __future__ import annotations

from dataclasses import dataclass

from agent.findings import Hypothesis
from bot.policy.deciders import Action
from bot.runs.inbox import DeliveryStatus
from bot.runs.record import RunRecord
from bot.slack.handlers.runtime import WebRuntime
from bot.slack.handlers.steering import may_supersede
from bot.slack.rendering.findings import Choice, parse_choice
from bot.slack.rendering.mrkdwn import inline_code, mention

NOTHING_SENT = "Nothing was sent to the run."
NOT_THIS_MESSAGE = f"This menu does not belong to the Findings message of this thread's run. {NOTHING_SENT}"
ENDED = f"This run has ended; mention me in the thread to continue. {NOTHING_SENT}"
STATEMENT_SHOWN = 300


@dataclass(frozen=True)
class Steer:
    """What a click did: ``announce`` (the thread's message, once stored), or ``note`` (to the
    clicker alone) saying why not."""

    note: str | None = None
    announce: str | None = None

    @property
    def stored(self) -> bool:
        return self.announce is not None


@dataclass(frozen=True)
class Clicked:
    """Where a click came from, as Slack's signed payload says."""

    user: str
    channel: str
    message_ts: str
    thread_ts: str | None


class FindingsClicks:
    """The ack half of a Refute / Focus click (see the module)."""

    def __init__(self, runtime: WebRuntime) -> None:
        self._rt = runtime

    def choose(self, value: str, click: Clicked) -> Steer:
        parsed = parse_choice(value)
        if parsed is None or not self._rt.channel_allowed(click.channel):
            return Steer(NOT_THIS_MESSAGE)
        choice, hypothesis_id, run_id = parsed
        service = self._rt.service()
        record = service.get(run_id)
        if record is None or record.status.terminal:
            return Steer(ENDED)
        if (
            not _from_its_message(record, click)
            or service.active_run(record.channel, record.thread_ts) != run_id
        ):
            return Steer(NOT_THIS_MESSAGE)
        state = record.state()
        findings = state.findings if state is not None else None
        hypothesis = findings.hypothesis(hypothesis_id) if findings is not None else None
        if findings is None or hypothesis is None:
            return Steer(f"The run's findings have no {hypothesis_id} (any more). {NOTHING_SENT}")
        verdict = self._rt.deciders.decide(click.user, Action.STEER)
        if not verdict.allowed:
            return Steer(f"{verdict.reason} {NOTHING_SENT}")
        what = f"the {choice.value} click on {hypothesis_id}"
        delivery = service.deliver(
            record.channel,
            record.thread_ts,
            user=click.user,
            text=model_text(choice, hypothesis, click.user),
            ts="",  # no message of its own: the worker reacts to none (the announcement gets :eyes:)
            may_supersede=may_supersede(self._rt, record.channel, record.thread_ts, click.user, what),
            claim=f"findings:{run_id}:{click.user}:{choice.value}:{hypothesis_id}:{findings.version}",
        )
        if delivery.status is DeliveryStatus.DUPLICATE:
            return Steer(f"You already sent that to the run. {NOTHING_SENT}")
        if not delivery.stored or delivery.run_id != run_id:
            return Steer(ENDED)
        return Steer(announce=self.announcement(choice, hypothesis, click.user))

    def announcement(self, choice: Choice, hypothesis: Hypothesis, user: str) -> str:
        """The thread's message for a stored click: the bot's words, the statement as inline code."""
        statement = inline_code(self._rt.redact(hypothesis.statement), STATEMENT_SHOWN)
        verb = "refutes" if choice is Choice.REFUTE else "asks to focus on"
        return f":point_right: {mention(user)} {verb} *{hypothesis.id}*: {statement}"


def model_text(choice: Choice, hypothesis: Hypothesis, user: str) -> str:
    """What the model reads, as if the person had replied so in the thread."""
    verb = "refutes" if choice is Choice.REFUTE else "asks to focus on"
    return f"<@{user}> {verb} {hypothesis.id}: {hypothesis.statement}"


def _from_its_message(record: RunRecord, click: Clicked) -> bool:
    """The click came from the run's own Findings message, in its channel and thread."""
    return (
        bool(record.findings_ts)
        and (click.channel, click.message_ts) == (record.channel, record.findings_ts)
        and click.thread_ts == record.thread_ts
    )
