"""``SlackPresenter``: the ``bot.runs.presenter.Presenter`` that shows a durable run in its Slack thread.

* Presentation never blocks the agent loop. Card updates, the "is working…" status, decision
  redraws and :eyes: go to the process's background sender (``bot.slack.delivery.sender``): coalesced
  per message (only a card's newest state is sent), intermediate states at most once per
  ``min_interval`` seconds, within Slack's rate tier, 429s waited out there and not in the call.
* Final states (finished, awaiting approval) are always written: ``update_run_card`` waits for
  them (and the run's other deliveries) up to ``final_wait`` seconds, at the end of the job only,
  and raises ``NotDelivered`` if Slack did not take them in that time; the job's report then
  has them sent again (from Redis, by the recovery sweep). A refusal for good is logged.
* While a run works, the thread shows the "is working…" status (``assistant.threads.setStatus``).
  Workspaces or threads where that method is not allowed answer with an error once; the failure
  is remembered in Redis for what it was about (the workspace, the channel or the thread:
  ``bot.slack.delivery.thread_status``) and the status is skipped silently there meanwhile.
* The run card, approval cards, answers and notices are posted at once, through the retrying
  ``WebClient`` (429 ``Retry-After``, 5xx, connection errors), because what follows needs them
  (the card's ts) or they come after the loop. A post Slack refuses for good raises
  ``Undeliverable``; one that kept failing raises Slack's error (the report tries it again).
* With ``streaming`` (``CHATOPS_SLACK_STREAMING=auto``), the answer is streamed into the thread
  with the segment's tool calls as tasks and feedback buttons (``bot.slack.delivery.streaming``), where
  the channel allows it; elsewhere it is posted as below. The card is kept either way.
* The run's findings are one message, queued like a card (``bot.slack.delivery.findings_message``);
  the answer's citations are shown by code's verdict, streamed or posted alike
  (``bot.slack.rendering.citations``): a verified one links to its step, the run card.
* Every text it sends (answers, notices, the cards' blocks, a chart's labels, title and alt text)
  goes through ``redact`` first: model answers, model errors and call arguments can carry
  secrets too, not only tool output.
* A chart of a tool result's series (``show_chart``) is rendered and uploaded by the background
  sender, one delivery per chart (``bot.slack.delivery.charts``); its failure loses nothing else.
* A message Slack refuses for its form is not lost: blocks refused as ``invalid_blocks`` are sent
  again as the card's one-line header and its buttons (then as text alone), and a text refused as
  ``msg_too_long`` is sent again in halves.
"""

from __future__ import annotations

import logging
import threading
import time
import uuid
from collections.abc import Callable, Sequence
from typing import Any

import redis
from slack_sdk import WebClient
from slack_sdk.errors import SlackApiError

from agent.checks import CheckOutcome
from agent.findings import Citation, Findings
from agent.types import Message, RunStatus
from bot.keys import Keys
from bot.memory.similar import Similar
from bot.runs.approvals import Approval, Approvals
from bot.runs.budget_asks import BudgetAsk
from bot.runs.charts import Chart
from bot.runs.presenter import CardView, NotDelivered, RunRef, StopNotice, Undeliverable
from bot.runs.record import RunRecords
from bot.runs.undo_offers import UndoOffer
from bot.slack.continuation import remember_last_run
from bot.slack.delivery.acknowledgements import EYES, Acknowledgements
from bot.slack.delivery.answers import deliver_answer
from bot.slack.delivery.blocks import BLOCK_ERRORS, plainer_blocks, redacted_blocks, slack_error
from bot.slack.delivery.charts import UPLOAD_METHOD, upload_chart
from bot.slack.delivery.client import without_rate_limit_retries
from bot.slack.delivery.findings_message import FindingsMessages
from bot.slack.delivery.permalinks import Permalinks
from bot.slack.delivery.sender import Delivery, Outcome, RetryAfter, SlackSender, is_transient, process_sender
from bot.slack.delivery.similar_note import post_similar_note
from bot.slack.delivery.streaming import LOADING_MESSAGES, AnswerStreams
from bot.slack.delivery.thread_status import StatusRefusals
from bot.slack.rendering import render
from bot.slack.rendering.budget_card import budget_blocks, budget_text
from bot.slack.rendering.check_line import check_blocks, check_text
from bot.slack.rendering.citations import Style, cite, finisher, plain_answer
from bot.slack.rendering.mrkdwn import split_mrkdwn
from bot.slack.rendering.people import run_people

log = logging.getLogger(__name__)

STATUS_TEXT = "is working on it…"
STATUS_REFRESH_SECONDS = 60.0  # Slack clears a status after two minutes without a message
TOO_LONG = "msg_too_long"
MIN_SPLIT = 200  # a text refused as too long is halved down to pieces of about this size
# How long the job waits, at its end, for a run's final card (a few server-error retries fit).
FINAL_WAIT_SECONDS = 10.0


class SlackPresenter:
    """Shows runs in Slack. Thread-safe; one instance may serve every run of a worker."""

    def __init__(
        self,
        client: WebClient,
        redis_client: redis.Redis,
        keys: Keys,
        *,
        team_id: str | None = None,
        min_interval: float = 1.0,
        clock: Callable[[], float] = time.monotonic,
        redact: Callable[[str], str] | None = None,
        final_wait: float = FINAL_WAIT_SECONDS,
        sender: SlackSender | None = None,
        streaming: bool = False,
    ) -> None:
        self._client = client
        self._deferred = without_rate_limit_retries(client)  # the sender waits out a 429 itself
        self._redact = redact or (lambda text: text)
        self._redis = redis_client
        self._keys = keys
        self._approvals = Approvals(redis_client, keys, retention_seconds=0)  # read only
        self._acks = Acknowledgements(redis_client, keys)
        self._status_refusals = StatusRefusals(redis_client, keys, team_id or "workspace", clock)
        self._retry_after = RetryAfter(redis_client, keys, team_id or "workspace")
        self._workspace = f"{client.base_url}|{team_id or ''}"  # one rate budget per workspace
        self._min_interval = min_interval
        self._final_wait = final_wait
        self._own_sender = sender
        self._clock = clock
        self._lock = threading.Lock()
        self._status_set_at: dict[str, float] = {}
        self._last_card: dict[str, CardView] = {}
        self._permalinks = Permalinks(self._deferred)  # a step's link: the run card's
        self._findings = FindingsMessages(
            self._deferred,
            RunRecords(redis_client, keys),
            self._permalinks,
            deliver=self._deliver,
            post=lambda run, text, blocks: self._posted_ts(
                self._post_blocks(run, text, blocks, self._deferred)
            ),
            update=self._update_blocks,
            redact=self._redact,
            interval=min_interval,
        )
        # Answers streamed into the thread where Slack allows it (``bot.slack.delivery.streaming``).
        self._streams = (
            AnswerStreams(
                client,
                self._deferred,
                redis_client,
                keys,
                self._deliver,
                redact=self._redact,
                team_id=team_id,
            )
            if streaming
            else None
        )

    def post_similar_note(self, channel: str, thread_ts: str, found: Sequence[Similar]) -> str | None:
        """The thread's "Similar:" note with its Forget buttons (``bot.runs.first_similar``
        records its ts for them); its ts."""
        return post_similar_note(self._client, channel, thread_ts, found, self._redact)

    @property
    def _sender(self) -> SlackSender:
        return self._own_sender or process_sender()

    # -- the run card -------------------------------------------------------------------------

    def post_run_card(self, run: RunRef, card: CardView) -> str | None:
        response = self._post_blocks(
            run,
            render.card_text(run.run_id, run.requester, card),
            render.card_blocks(run.run_id, run.requester, card, run.source_url, run.follows),
        )
        ts = str(response.get("ts") or "") or None
        if ts:
            self._sender.mark_sent(self._key("card", run.channel, ts))  # throttled from its post
            # Replies continue the thread after the run (``bot.slack.continuation``), also one an alert started.
            remember_last_run(self._redis, self._keys, run.channel, run.thread_ts, run.run_id)
        with self._lock:
            self._last_card[run.run_id] = card
        self._thread_status(run, card.status)
        return ts

    def update_run_card(self, run: RunRef, card: CardView) -> None:
        """Queue the card's new state; never waits, except for a final state (see the module)."""
        final = card.status.terminal or card.status.suspended
        with self._lock:
            self._last_card[run.run_id] = card
        delivery = self._queue_card(run, card, final)
        if self._streams is not None:
            self._streams.card(run, card)  # the stream's timeline follows the card (queued too)
        self._thread_status(run, card.status)
        if not final:
            return
        with self._lock:
            if card.status is RunStatus.COMPLETED or card.status.suspended:
                self._last_card.pop(run.run_id, None)  # no stop notice follows; kept otherwise
        self._sender.wait_all(run.run_id, self._final_wait)
        if delivery is None or delivery.outcome in (Outcome.SENT, Outcome.SUPERSEDED):
            return
        if delivery.outcome is Outcome.FAILED:  # refused for good: the run does not depend on its card
            log.warning("run %s: the card's final state could not be written", run.run_id)
            return
        raise NotDelivered(f"run {run.run_id}: Slack did not take the card's final state in time")

    def _queue_card(self, run: RunRef, card: CardView, final: bool) -> Delivery | None:
        if not run.card_ts:
            log.warning("run %s: no card to update", run.run_id)
            return None
        channel, ts = run.channel, run.card_ts

        def send() -> None:  # rendered when sent: a state replaced meanwhile costs nothing
            text = render.card_text(run.run_id, run.requester, card)
            self._update_blocks(
                channel,
                ts,
                text,
                render.card_blocks(run.run_id, run.requester, card, run.source_url, run.follows),
            )

        interval = 0.0 if final else self._min_interval
        return self._deliver(("card", channel, ts), "chat.update", send, run, final, interval)

    def _deliver(
        self,
        key: tuple[str, ...],
        method: str,
        send: Callable[[], object],
        run: RunRef,
        final: bool = True,
        interval: float = 0.0,
    ) -> Delivery:
        return self._sender.submit(
            Delivery(
                self._key(*key),
                method,
                send,
                workspace=self._workspace,
                final=final,
                interval=interval,
                tag=run.run_id,
                retry_after=self._retry_after,
            )
        )

    def _key(self, *parts: str) -> tuple[str, ...]:
        return (self._workspace, *parts)

    # -- approvals ----------------------------------------------------------------------------

    def approval_problem(self, run: RunRef, approval: Approval) -> str | None:
        """Why the card could not show this call completely (``None``: it can), for the model.

        Checked on the card as it will reach Slack: redaction runs first and may lengthen text
        (a redacted copy rendered whole, and the rendered blocks redacted afterwards).
        """
        problem = render.approval_card_problem(self._redacted_approval(approval))
        if problem is not None:
            return problem
        return render.card_limits_problem(redacted_blocks(render.approval_blocks(approval), self._redact))

    def _redacted_approval(self, approval: Approval) -> Approval:
        """The approval with every text the model or a tool wrote redacted, before it is laid out."""
        return approval.model_copy(
            update={
                "args_json": self._redact(approval.args_json),
                "command": self._redact(approval.command),
                "preview": self._redact(approval.preview),
                "why": self._redact(approval.why),
                "rationale": self._redact(approval.rationale),
            }
        )

    def ask_approval(self, run: RunRef, approval: Approval) -> str | None:
        # Whole or not at all: a plainer fallback would be a card that hides what executes.
        text = self._redact(render.approval_text(approval))
        blocks = redacted_blocks(render.approval_blocks(approval), self._redact)
        response = self._client.chat_postMessage(
            channel=run.channel, thread_ts=run.thread_ts, text=text, blocks=blocks
        )
        ts = response.get("ts")
        return str(ts) if ts else None

    def ask_budget(self, run: RunRef, ask: BudgetAsk) -> str | None:
        """The budget card (``bot.slack.rendering.budget_card``): the bot's words and numbers only."""
        blocks = budget_blocks(ask)
        return self._posted_ts(self._post_blocks(run, budget_text(blocks), blocks))

    def post_notice(self, run: RunRef, text: str) -> None:
        self._post_text(run, text)

    def post_check(
        self, run: RunRef, outcome: CheckOutcome, evidence: str | None, undo: UndoOffer | None = None
    ) -> str | None:
        """Posted at once; with an undo offer, as a message with its Undo button, whose ts is returned
        for the offer (only a click on that message claims it)."""
        text = check_text(outcome, evidence)
        if undo is None:
            self._post_text(run, text)
            return None
        return self._posted_ts(self._post_blocks(run, text, check_blocks(self._redact(text), undo)))

    def show_decision(self, run: RunRef, approval: Approval) -> None:
        """Queued (the gate asks from inside the loop); sent by the end of the job at the latest."""
        if not approval.card_ts:
            return
        channel, ts = approval.card_channel or run.channel, approval.card_ts

        def send() -> None:
            self._update_blocks(channel, ts, render.approval_text(approval), render.approval_blocks(approval))

        self._deliver(("card", channel, ts), "chat.update", send, run)

    # -- answers and notices --------------------------------------------------------------------

    def post_answer(
        self,
        run: RunRef,
        text: str,
        citations: Sequence[Citation] = (),
        findings: Findings | None = None,
    ) -> None:
        """The answer with its citations shown as code judged them (``bot.slack.rendering.citations``):
        each one replaced by a placeholder before the text is converted and redacted, filled after."""
        cited = cite(text, citations)
        link = self._permalinks.get(run.channel, run.card_ts, self._client) if cited.verified else None
        redacted = self._redact(cited.text)  # before a cut could split a secret
        people = self._people(run)

        def finish(style: Style) -> Callable[[str], str]:
            return finisher(cited, findings, link, style, self._redact)

        if self._streams is not None and self._streams.answer(run, redacted, people, finish(Style.MARKDOWN)):
            return  # streamed, with the feedback buttons; else posted as always
        chunks = render.answer_chunks(redacted, people, finish(Style.MRKDWN))
        whole = plain_answer(redacted, cited, findings, self._redact)
        if run.source_url and chunks:  # a run an alert started links back to what fired
            chunks[-1] += f"\n{render.source_line(run.source_url)}"
            whole += f"\n\nAlert source: {run.source_url}"
        deliver_answer(self._client, run, chunks, whole, self._post_text)  # a few posts, or a file

    def show_findings(self, run: RunRef, findings: Findings) -> None:
        """Queued: the Findings message (``bot.slack.delivery.findings_message``), never waited for here."""
        self._findings.show(run, findings)

    def show_chart(self, run: RunRef, chart: Chart) -> None:
        """Queued: rendered and uploaded by the background sender (``bot.slack.delivery.charts``)."""
        send = lambda: upload_chart(self._deferred, run, chart, self._redact)  # noqa: E731
        key = ("chart", run.channel, run.thread_ts, run.run_id, chart.evidence or uuid.uuid4().hex)
        self._deliver(key, UPLOAD_METHOD, send, run, final=False)

    def _people(self, run: RunRef) -> frozenset[str]:
        """The run's requester and deciders: IDs of theirs in the answer become mentions."""
        try:
            return run_people(run.requester, self._approvals.for_run(run.run_id))
        except redis.RedisError:
            return run_people(run.requester, ())

    def post_stop_notice(self, run: RunRef, notice: StopNotice) -> None:
        with self._lock:
            card = self._last_card.pop(run.run_id, None)
        last = card.steps[-1] if card and card.steps else None
        self._post_text(run, render.stop_notice_text(notice, last))

    def acknowledge(self, run: RunRef, message: Message) -> None:
        """:eyes: on the reply, unless the web process already reacted when it stored the reply
        (``bot.slack.delivery.acknowledgements``): only a lost reaction is made up for here, never a second one."""
        ts = str(message.meta.get("ts") or "")
        if ts:  # queued: called from inside the loop
            send = lambda: self._acks.react(self._deferred, run.channel, ts)  # noqa: E731
            self._deliver(("reaction", run.channel, ts, EYES), "reactions.add", send, run)

    # -- posting, with fallbacks for messages Slack refuses for their form ----------------------

    def _post_blocks(
        self, run: RunRef, text: str, blocks: list[render.Block], client: WebClient | None = None
    ) -> Any:
        """``client``: the background sender's (no 429 retries in the call) for what it sends."""
        text, blocks = self._redact(text), redacted_blocks(blocks, self._redact)
        attempts = [blocks, plainer_blocks(blocks), None]
        for index, attempt in enumerate(attempts):
            try:
                return (client or self._client).chat_postMessage(
                    channel=run.channel, thread_ts=run.thread_ts, text=text, blocks=attempt
                )
            except SlackApiError as error:
                if slack_error(error) not in BLOCK_ERRORS or index == len(attempts) - 1:
                    raise
                log.warning(
                    "run %s: Slack refused the blocks (%s); posting a plainer card", run.run_id, error
                )
        raise AssertionError("unreachable")

    @staticmethod
    def _posted_ts(response: Any) -> str | None:
        return str(response.get("ts") or "") or None

    def _update_blocks(self, channel: str, ts: str, text: str, blocks: list[render.Block]) -> None:
        """Sent by the background sender only: its client answers a 429 at once."""
        text, blocks = self._redact(text), redacted_blocks(blocks, self._redact)
        attempts = [blocks, plainer_blocks(blocks), []]
        for index, attempt in enumerate(attempts):
            try:
                self._deferred.chat_update(channel=channel, ts=ts, text=text, blocks=attempt)
                return
            except SlackApiError as error:
                if slack_error(error) not in BLOCK_ERRORS or index == len(attempts) - 1:
                    raise
                log.warning("message %s: Slack refused the blocks (%s); updating it plainer", ts, error)

    def _post_text(self, run: RunRef, text: str) -> None:
        text = self._redact(text)
        try:
            self._client.chat_postMessage(channel=run.channel, thread_ts=run.thread_ts, text=text)
        except SlackApiError as error:
            if slack_error(error) != TOO_LONG or len(text) < 2 * MIN_SPLIT:
                if is_transient(error):
                    raise  # the client's retries ran out: the report tries again later
                raise Undeliverable(f"Slack refused the message: {slack_error(error)}") from error
            log.warning(
                "run %s: Slack found %d characters too long; posting them in halves", run.run_id, len(text)
            )
            for part in split_mrkdwn(text, max(MIN_SPLIT, len(text) // 2 + 1)):
                self._post_text(run, part)

    # -- "is working…" ------------------------------------------------------------------------

    def _thread_status(self, run: RunRef, status: RunStatus) -> None:
        """Show the status while running (refreshed before Slack's two-minute expiry), clear it after."""
        working = status in (RunStatus.QUEUED, RunStatus.RUNNING)
        now = self._clock()
        with self._lock:
            since = self._status_set_at.get(run.run_id)
            if working and since is not None and now - since < STATUS_REFRESH_SECONDS:
                return
            if not working and since is None:
                return  # nothing shown, nothing to clear
            if working:
                self._status_set_at[run.run_id] = now
            else:
                self._status_set_at.pop(run.run_id, None)
        text = STATUS_TEXT if working else ""
        send = lambda: self.set_thread_status(run.channel, run.thread_ts, text)  # noqa: E731
        # Keyed by the thread: a clear queued after a set that is still waiting replaces it.
        self._deliver(
            ("status", run.channel, run.thread_ts), "assistant.threads.setStatus", send, run, not working
        )

    def set_thread_status(self, channel: str, thread_ts: str, status: str) -> bool:
        """``assistant.threads.setStatus``, skipped where it was refused before: in the workspace,
        the channel or the thread, as the refusal was about (``bot.slack.delivery.thread_status``).

        A transient failure (429, 5xx, connection) raises, for the background sender to retry."""
        if self._status_refusals.refused(channel, thread_ts):
            return False
        try:
            self._deferred.assistant_threads_setStatus(
                channel_id=channel,
                thread_ts=thread_ts,
                status=status,
                loading_messages=list(LOADING_MESSAGES) if status else None,  # rotated while it thinks
            )
            return True
        except SlackApiError as error:
            if is_transient(error):
                raise
            self._status_refusals.remember(channel, thread_ts, slack_error(error))
            return False
