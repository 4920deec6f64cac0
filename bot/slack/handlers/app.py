"""The Bolt ``App``: listeners for mentions, thread replies, button clicks and the decline modal.

Each listener has two halves:

* the ack half runs before the HTTP answer (``process_before_response=True``). For events it
  stores what must not be lost (Redis only, milliseconds) and an exception there becomes a 500
  that Slack retries. For clicks it only acknowledges: Slack wants an answer within 3 seconds.
* the other half runs afterwards on a thread pool and makes the Slack calls: reactions,
  notices, card updates, ephemeral messages, the modal, and for clicks the decision itself.
  Clicks use Bolt's lazy listeners; events hand only the outcomes that need Slack calls (an
  injected reply, a refused channel) to a pool of their own (``bot.slack.handlers.follow_ups``), since
  Bolt copies every request for a lazy listener and almost every event needs nothing more.

Bolt's own ``auth.test`` at construction is avoided with an ``authorize`` function (see
``bot.slack.identity``), so the app starts while Slack is unreachable.
"""

from __future__ import annotations

import logging
from collections.abc import Callable
from concurrent.futures import Executor, ThreadPoolExecutor
from dataclasses import dataclass
from typing import Any

import redis
from slack_bolt import Ack, App, BoltContext, BoltResponse
from slack_sdk import WebClient
from slack_sdk.errors import SlackApiError

from bot.errors import BotConfigurationError, NotReplicatedError
from bot.runs.lost_runs import LOST_NOTICE
from bot.slack.delivery.acknowledgements import Acknowledgements
from bot.slack.delivery.blocks import redacted_blocks
from bot.slack.delivery.client import make_client
from bot.slack.delivery.lost_cards import clicked_lost_card
from bot.slack.handlers.actions import Interactions, Reply
from bot.slack.handlers.break_glass import register_ops_command
from bot.slack.handlers.budget_clicks import register_budget
from bot.slack.handlers.callbacks import answer_app_rate_limited
from bot.slack.handlers.events import EventHandler, Outcome, OutcomeKind
from bot.slack.handlers.feedback import register_feedback
from bot.slack.handlers.findings_clicks import Clicked, FindingsClicks, Steer
from bot.slack.handlers.follow_ups import FollowUps, home_logged
from bot.slack.handlers.forget_clicks import register_forget
from bot.slack.handlers.home import home_opened_user
from bot.slack.handlers.postmortem import PostmortemDrafts
from bot.slack.handlers.queued_note import Timer
from bot.slack.handlers.runtime import WebRuntime
from bot.slack.handlers.undo_clicks import UndoClick, UndoClicks
from bot.slack.identity import Authorizer, remember_authorizations
from bot.slack.rendering import render
from bot.slack.rendering.blockkit import ACTION_FINDINGS, ACTION_INVESTIGATE, ACTION_UNDO

log = logging.getLogger(__name__)

# Outcomes with Slack calls to make after the answer (:eyes: on a new run's mention too).
FOLLOW_UP_KINDS = frozenset(
    {
        OutcomeKind.STARTED,
        OutcomeKind.INJECTED,
        OutcomeKind.REFUSED_CHANNEL,
        OutcomeKind.LIMITED,
        OutcomeKind.HELP,
    }
)
# Outcomes whose 200 tells Slack a message is stored: behind sentinels a replica must have it first
# (a duplicate too: the first attempt's write may not have reached one when its answer failed).
REPLICATED_KINDS = frozenset(
    {OutcomeKind.STARTED, OutcomeKind.INJECTED, OutcomeKind.DUPLICATE, OutcomeKind.PARKED}
)
LAZY_THREADS = 16

# Makes the thread pool (named by its argument) of the halves that run after the answer.
PoolFactory = Callable[[str], Executor]


def thread_pool(name: str) -> Executor:
    """``LAZY_THREADS`` threads named ``name``: the pools of the halves that run after the answer."""
    return ThreadPoolExecutor(LAZY_THREADS, thread_name_prefix=name)


@dataclass(frozen=True)
class Click:
    """The parts of a ``block_actions`` payload the handlers use."""

    user: str
    value: str
    channel: str
    message_ts: str
    thread_ts: str | None
    trigger_id: str
    author: str = ""  # who posted the clicked message, as Slack's signed payload says

    @classmethod
    def from_body(cls, body: dict[str, Any]) -> Click:
        """Every field a string (empty when missing or of another type: nothing will match it)."""
        container, message = _object(body.get("container")), _object(body.get("message"))
        actions = body.get("actions")
        action = _object(actions[0]) if isinstance(actions, list) and actions else {}
        chosen = _object(action.get("selected_option"))  # an overflow menu's option
        return cls(
            user=_text(_object(body.get("user")).get("id")),
            value=_text(action.get("value")) or _text(chosen.get("value")),
            channel=_text(container.get("channel_id")) or _text(_object(body.get("channel")).get("id")),
            message_ts=_text(container.get("message_ts")) or _text(message.get("ts")),
            thread_ts=_text(container.get("thread_ts")) or _text(message.get("thread_ts")) or None,
            trigger_id=_text(body.get("trigger_id")),
            author=_text(message.get("user")),
        )

    def on_bots_own(self, bot_user: str | None) -> bool:
        """Whether the clicked message is this bot's own post (Slack signs the payload that says so)."""
        return bool(bot_user) and self.author == bot_user

    @property
    def card(self) -> tuple[str, str]:
        """The message the click came from: an approval is decided only from its own card."""
        return (self.channel, self.message_ts)


def _object(value: object) -> dict[str, Any]:
    return value if isinstance(value, dict) else {}


def _text(value: object) -> str:
    return value if isinstance(value, str) else ""


def build_app(runtime: WebRuntime, *, socket_mode: bool = False, pools: PoolFactory = thread_pool) -> App:
    """The Bolt app over ``runtime``. HTTP mode needs ``SLACK_SIGNING_SECRET``; Socket Mode does not.
    ``pools`` makes the thread pools of the halves that run after the answer (a test's pools tell
    when that work is done)."""
    settings = runtime.settings
    if not socket_mode and not settings.slack_signing_secret:
        raise BotConfigurationError("SLACK_SIGNING_SECRET is required to serve Slack over HTTP")
    if not settings.slack_bot_token:
        raise BotConfigurationError("SLACK_BOT_TOKEN is required")
    app = App(
        name="chatops",
        signing_secret=settings.slack_signing_secret or None,
        # No token on the app's client: ``authorize`` supplies it per request (Bolt warns otherwise).
        client=make_client(settings, token=""),
        authorize=Authorizer(settings.slack_bot_token, runtime.identity),
        before_authorize=remember_authorizations,
        process_before_response=True,
        listener_executor=pools("chatops-slack"),
    )
    app.use(answer_app_rate_limited)  # Slack's app_rate_limited callback: 200 and a log line
    follow_ups = pools("chatops-follow-up")
    _register_events(app, runtime, follow_ups, Timer(follow_ups))
    _register_actions(app, runtime, pools("chatops-click"))
    register_feedback(app, runtime)  # the feedback buttons under streamed answers
    register_forget(app, runtime, pools("chatops-forget"))  # Forget on a "Similar:" note
    register_budget(app, runtime, pools("chatops-budget"))  # Extend / Stop on a budget card
    register_ops_command(app, runtime)  # /ops break-glass (CHATOPS_POLICY_FILE), /ops postmortem
    return app


# -- events ----------------------------------------------------------------------------------------


def _register_events(app: App, runtime: WebRuntime, follow_ups: Executor, timer: Timer) -> None:
    handler = EventHandler(runtime, clock=runtime.clock)
    after = FollowUps(runtime, timer, runtime.targets)
    # Not Bolt's lazy listeners: those copy every request and start a thread even when there is
    # nothing to do after the answer, which is the case for almost every event (a started run, a
    # duplicate, a bot's own message). Only an outcome with Slack calls to make is handed over.

    def answer(outcome: Outcome, ack: Ack, bot_user: str | None) -> BoltResponse | None:
        if outcome.kind in REPLICATED_KINDS and not _replicated(runtime, f"event {outcome.kind}"):
            return BoltResponse(status=503, body="stored, not yet on a replica; retry later")
        response = _answer(outcome, ack)
        if response is None and outcome.kind in FOLLOW_UP_KINDS:
            follow_ups.submit(after.logged, outcome, bot_user)
        return response

    def store_mention(body: dict[str, Any], context: BoltContext, ack: Ack) -> BoltResponse | None:
        return answer(handler.mention(body, context.bot_user_id), ack, context.bot_user_id)

    def store_reply(body: dict[str, Any], context: BoltContext, ack: Ack) -> BoltResponse | None:
        return answer(handler.reply(body, context.bot_user_id), ack, context.bot_user_id)

    def home_opened(body: dict[str, Any], context: BoltContext, ack: Ack) -> None:
        ack()  # nothing to store: the view is built from Redis afterwards
        user = home_opened_user(body)
        if user is not None:
            follow_ups.submit(home_logged, runtime, user, context.bot_user_id)

    app.event("app_mention")(store_mention)
    app.event("message")(store_reply)
    app.event("app_home_opened")(home_opened)


def _replicated(runtime: WebRuntime, what: str) -> bool:
    """Whether a replica has what this answer is about (always, without sentinels; ``bot.runs.replication``)."""
    try:
        runtime.replication().confirm()
    except NotReplicatedError as error:
        log.warning("%s is not answered 200: %s", what, error)
        return False
    return True


def _answer(outcome: Outcome, ack: Ack) -> BoltResponse | None:
    """200 once stored (or deliberately ignored); 503 while another request is still storing the
    same event, so Slack retries it later rather than being told it is done."""
    if outcome.kind is OutcomeKind.IN_PROGRESS:
        return BoltResponse(status=503, body="this event is being stored; retry later")
    ack()
    return None


# -- clicks and the modal ----------------------------------------------------------------------------


def _register_actions(app: App, runtime: WebRuntime, after: Executor) -> None:
    """Approve and Decline are decided before the answer (a Redis script, milliseconds; Slack
    does not retry clicks, so a 200 must mean "decided"). If deciding fails, the answer is an
    error and Slack shows the clicker that the click did not go through. The Slack calls that
    follow (redraw, ephemeral note, the modal) run afterwards on a pool."""
    interactions = Interactions(runtime)
    drafts = PostmortemDrafts(runtime)

    def acknowledge(ack: Ack) -> None:
        ack()

    def decided(ack: Ack, click: Click, reply: Reply) -> BoltResponse | None:
        """Answer a decided click, once a replica has the decision (behind sentinels)."""
        if not _replicated(runtime, f"the click by {click.user} on {click.value}"):
            return _click_failed(click)
        ack()
        after.submit(_show_logged, runtime, reply, click)
        return None

    def approve(body: dict[str, Any], ack: Ack, context: BoltContext) -> BoltResponse | None:
        click = Click.from_body(body)
        try:
            reply = interactions.approve(
                click.value, click.user, click.card, bots_own=click.on_bots_own(context.bot_user_id)
            )
        except redis.RedisError:
            return _click_failed(click)
        return decided(ack, click, reply)

    def decline(body: dict[str, Any], ack: Ack, context: BoltContext) -> BoltResponse | None:
        click = Click.from_body(body)
        try:
            reply = interactions.decline_clicked(
                click.value, click.user, click.card, bots_own=click.on_bots_own(context.bot_user_id)
            )
        except redis.RedisError:
            return _click_failed(click)
        ack()
        after.submit(_decline_follow_up, runtime, interactions, click, reply)
        return None

    def stop(body: dict[str, Any]) -> None:
        click = Click.from_body(body)
        _show(runtime, interactions.stop(click.value, click.user), click)

    def transcript(body: dict[str, Any]) -> None:
        click = Click.from_body(body)
        try:
            _show(runtime, interactions.transcript(click.value, click.user, click.channel), click)
        except SlackApiError as error:
            log.warning("transcript of run %s not posted: %s", click.value, error)

    def postmortem(body: dict[str, Any]) -> None:
        click = Click.from_body(body)
        _show(runtime, Reply(drafts.button(click.value, click.user, click.channel)), click)

    def investigate(body: dict[str, Any]) -> None:
        click = Click.from_body(body)
        _show(runtime, interactions.investigate(click.value, click.user, click.channel), click)

    def declined(body: dict[str, Any], ack: Ack) -> BoltResponse | None:
        view = body.get("view") or {}
        meta = render.modal_metadata(view)
        user = str((body.get("user") or {}).get("id") or "")
        click = Click(
            user,
            meta.get("approval_id", ""),
            meta.get("channel", ""),
            meta.get("ts", ""),
            meta.get("thread_ts") or None,
            "",
        )
        try:
            reply = interactions.decline(click.value, user, click.card, render.modal_reason(view))
        except redis.RedisError:
            return _click_failed(click)
        return decided(ack, click, reply)

    app.action(render.ACTION_APPROVE)(approve)
    app.action(render.ACTION_DECLINE)(decline)
    app.action(render.ACTION_STOP)(ack=acknowledge, lazy=[stop])
    app.action(render.ACTION_TRANSCRIPT)(ack=acknowledge, lazy=[transcript])
    app.action(render.ACTION_POSTMORTEM)(ack=acknowledge, lazy=[postmortem])
    app.action(ACTION_INVESTIGATE)(ack=acknowledge, lazy=[investigate])
    app.action(ACTION_FINDINGS)(_findings_menu(runtime, after))
    app.action(ACTION_UNDO)(_undo_button(runtime, after))
    app.view(render.VIEW_DECLINE)(declined)  # a submission is decided before its answer too


def _findings_menu(runtime: WebRuntime, after: Executor) -> Callable[..., BoltResponse | None]:
    """Refute / Focus on this (``bot.slack.handlers.findings_clicks``): stored in the run's inbox
    before the answer, as a reply is before its :eyes:; then said in the thread, or to the clicker
    alone why it did nothing."""
    clicks = FindingsClicks(runtime)

    def chosen(body: dict[str, Any], ack: Ack) -> BoltResponse | None:
        click = Click.from_body(body)
        where = Clicked(click.user, click.channel, click.message_ts, click.thread_ts)
        try:
            steer = clicks.choose(click.value, where)
        except redis.RedisError:
            return _click_failed(click)
        if steer.stored and not _replicated(runtime, f"the findings click by {click.user}"):
            return _click_failed(click)
        ack()
        after.submit(_steer_shown, runtime, steer, click)
        return None

    return chosen


def _undo_button(runtime: WebRuntime, after: Executor) -> Callable[..., BoltResponse | None]:
    """Undo (``bot.slack.handlers.undo_clicks``): claimed and its run started before the answer;
    the clicker alone is told what it did."""
    clicks = UndoClicks(runtime)

    def clicked(body: dict[str, Any], ack: Ack) -> BoltResponse | None:
        click = Click.from_body(body)
        try:
            answer = clicks.click(click.value, UndoClick(click.user, click.channel, click.message_ts))
        except redis.RedisError:
            return _click_failed(click)
        if answer.run_id and not _replicated(runtime, f"the undo click by {click.user}"):
            return _click_failed(click)
        ack()
        after.submit(_show_logged, runtime, Reply(answer.note), click)
        return None

    return clicked


def _steer_shown(runtime: WebRuntime, steer: Steer, click: Click) -> None:
    """The stored click said in the thread, with :eyes: on it (the acknowledgement a reply gets);
    or the clicker told, alone, why it did nothing."""
    client = runtime.client()
    try:
        if steer.announce is None:
            _show(runtime, Reply(steer.note), click)
            return
        posted = client.chat_postMessage(
            channel=click.channel, thread_ts=click.thread_ts, text=runtime.redact(steer.announce)
        )
        ts = str(posted.get("ts") or "")
        if ts:
            Acknowledgements(runtime.redis(), runtime.keys).react(client, click.channel, ts)
    except Exception:
        log.exception("the findings click by %s was stored, but not acknowledged in the thread", click.user)


def _click_failed(click: Click) -> BoltResponse:
    """Redis could not decide the click, or behind sentinels no replica confirmed the decision (a
    failover could still undo it): an error answer, so Slack tells the clicker it failed (never a
    200 for a click that may not last). They may click again: a decision that was stored after all
    is then shown to them as taken."""
    log.error("click by %s on %s could not be decided (or no replica confirmed it)", click.user, click.value)
    return BoltResponse(status=503, body="the decision could not be stored; try again")


def _decline_follow_up(runtime: WebRuntime, interactions: Interactions, click: Click, reply: Reply) -> None:
    if reply.open_modal and reply.approval is not None:
        reply = _open_decline_modal(runtime, interactions, click, reply)
    _show_logged(runtime, reply, click)


def _show_logged(runtime: WebRuntime, reply: Reply, click: Click) -> None:
    try:
        _show(runtime, reply, click)
    except Exception:
        log.exception("the answer to a click by %s was not shown", click.user)


def _open_decline_modal(runtime: WebRuntime, interactions: Interactions, click: Click, reply: Reply) -> Reply:
    """Ask for a reason; if the modal cannot open (the 3 s trigger ran out), decline without one."""
    approval = reply.approval
    assert approval is not None
    meta = {"channel": click.channel, "ts": click.message_ts, "thread_ts": click.thread_ts or ""}
    try:
        runtime.client().views_open(
            trigger_id=click.trigger_id, view=render.decline_modal(approval.id, meta, approval.tool)
        )
        return Reply()
    except SlackApiError as error:
        log.info("decline modal did not open (%s); declining without a reason", error)
        return interactions.decline(approval.id, click.user, click.card, None)


def _show(runtime: WebRuntime, reply: Reply, click: Click) -> None:
    """Redraw the clicked approval card, then tell the clicker (only them) what happened."""
    client = runtime.client()
    if reply.approval is not None and click.channel and click.message_ts:
        _redraw(client, click, reply, runtime.redact)
    note = reply.note
    if (
        reply.unknown and click.channel and click.message_ts
    ):  # a lost run's card? (bot.slack.delivery.lost_cards)
        where = (click.channel, click.thread_ts, click.message_ts, reply.unknown)
        if clicked_lost_card(client, runtime.service(), runtime.identity.lookup, where):
            note = LOST_NOTICE
    if note and click.channel and click.user:
        try:
            client.chat_postEphemeral(
                channel=click.channel, user=click.user, text=note, thread_ts=click.thread_ts
            )
        except SlackApiError as error:
            log.warning("ephemeral note to %s failed: %s", click.user, error)


def _redraw(client: WebClient, click: Click, reply: Reply, redact: Callable[[str], str]) -> None:
    approval = reply.approval
    assert approval is not None
    try:
        client.chat_update(
            channel=approval.card_channel or click.channel,
            ts=approval.card_ts or click.message_ts,
            text=redact(render.approval_text(approval)),
            blocks=redacted_blocks(render.approval_blocks(approval), redact),
        )
    except SlackApiError as error:
        log.warning("approval card %s not redrawn: %s", approval.id, error)
