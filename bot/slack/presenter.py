"""``SlackPresenter``: the ``bot.presenter.Presenter`` that shows a durable run in its Slack thread.

* The run card is one message, updated in place at most once per ``min_interval`` seconds: a
  newer state that arrives sooner waits on a timer and replaces anything still waiting, so the
  card never lags by more than the interval. Final states (finished, awaiting approval) are
  always written, after whatever was in flight, and close the run's throttle.
* While a run works, the thread shows the "is working…" status (``assistant.threads.setStatus``).
  Workspaces or threads where that method is not allowed answer with an error once; the failure
  is remembered in Redis per workspace for a day and the status is skipped silently meanwhile.
* Answers are converted to Slack mrkdwn and split below Slack's limits. Every call goes through
  the retrying ``WebClient`` (429 ``Retry-After``, 5xx, connection errors).
* Every text it sends (answers, notices, the cards' blocks) goes through ``redact`` first: model
  answers, model errors and call arguments can carry secrets too, not only tool output.
* A message Slack refuses for its form is not lost: blocks refused as ``invalid_blocks`` are sent
  again as the card's one-line header and its buttons (then as text alone), and a text refused as
  ``msg_too_long`` is sent again in halves.
"""

from __future__ import annotations

import contextlib
import logging
import threading
import time
from collections.abc import Callable
from dataclasses import dataclass, field
from typing import Any

import redis
from slack_sdk import WebClient
from slack_sdk.errors import SlackApiError

from agent.keys import Keys
from agent.types import Message, RunStatus
from bot.approvals import Approval
from bot.presenter import CardView, RunRef, StopNotice
from bot.slack import render
from bot.slack.mrkdwn import split_mrkdwn, truncate

log = logging.getLogger(__name__)

STATUS_TEXT = "is working on it…"
STATUS_REFRESH_SECONDS = 60.0  # Slack clears a status after two minutes without a message
NO_STATUS_SECONDS = 24 * 3600
EYES = "eyes"
_IGNORED_REACTION_ERRORS = frozenset({"already_reacted"})
_BLOCK_ERRORS = frozenset({"invalid_blocks", "invalid_blocks_format"})
TOO_LONG = "msg_too_long"
MIN_SPLIT = 200  # a text refused as too long is halved down to pieces of about this size


def slack_error(error: SlackApiError) -> str | None:
    """Slack's error code (``invalid_blocks``, ``ratelimited``, ...) of a failed call."""
    response = error.response
    return str(response.get("error")) if response is not None and response.get("error") else None


def redacted_blocks(blocks: list[render.Block], redact: Callable[[str], str]) -> list[render.Block]:
    """``blocks`` with every ``text`` (all a person reads in Block Kit) passed through ``redact``."""

    def scrub(node: Any) -> Any:
        if isinstance(node, dict):
            return {
                key: redact_within(value) if key == "text" and isinstance(value, str) else scrub(value)
                for key, value in node.items()
            }
        if isinstance(node, list):
            return [scrub(item) for item in node]
        return node

    def redact_within(text: str) -> str:
        # A marker can be longer than what it hides: never past the length render cut the text to.
        redacted = redact(text)
        return truncate(redacted, len(text)) if len(redacted) > len(text) else redacted

    scrubbed: list[render.Block] = scrub(blocks)
    return scrubbed


def plainer_blocks(blocks: list[render.Block]) -> list[render.Block]:
    """A card's first block (its one-line header) and its buttons: what must survive a refusal."""
    return [blocks[0], *(block for block in blocks[1:] if block.get("type") == "actions")] if blocks else []


@dataclass
class _CardState:
    """The throttle of one run's card."""

    last_sent: float = float("-inf")
    latest: tuple[RunRef, CardView] | None = None
    timer: threading.Timer | None = None
    closed: bool = False
    send_lock: threading.Lock = field(default_factory=threading.Lock)


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
    ) -> None:
        self._client = client
        self._redact = redact or (lambda text: text)
        self._redis = redis_client
        self._no_status_key = keys.slack("no_status", team_id or "workspace")
        self._min_interval = min_interval
        self._clock = clock
        self._lock = threading.Lock()
        self._cards: dict[str, _CardState] = {}
        self._status_set_at: dict[str, float] = {}
        self._last_card: dict[str, CardView] = {}

    # -- the run card -------------------------------------------------------------------------

    def post_run_card(self, run: RunRef, card: CardView) -> str | None:
        response = self._post_blocks(
            run,
            render.card_text(run.run_id, run.requester, card),
            render.card_blocks(run.run_id, run.requester, card),
        )
        with self._lock:
            self._cards.setdefault(run.run_id, _CardState()).last_sent = self._clock()
            self._last_card[run.run_id] = card
        self._thread_status(run, card.status)
        ts = response.get("ts")
        return str(ts) if ts else None

    def update_run_card(self, run: RunRef, card: CardView) -> None:
        final = card.status.terminal or card.status is RunStatus.AWAITING_APPROVAL
        with self._lock:
            state = self._cards.setdefault(run.run_id, _CardState())
            state.latest = (run, card)
            self._last_card[run.run_id] = card
            if final:
                state.closed = True
                if state.timer is not None:
                    state.timer.cancel()
                    state.timer = None
                wait = state.last_sent + self._min_interval - self._clock()
            elif state.timer is not None:
                return  # the pending timer will send this newest state
            else:
                wait = state.last_sent + self._min_interval - self._clock()
                if wait > 0:
                    state.timer = threading.Timer(wait, self._flush, args=(run.run_id,))
                    state.timer.daemon = True
                    state.timer.start()
                    return
        if final:
            if wait > 0:
                time.sleep(wait)  # keep the one-update-a-second promise even for the last one
            self._send(state, run, card)
            with self._lock:
                self._cards.pop(run.run_id, None)
                if card.status in (RunStatus.COMPLETED, RunStatus.AWAITING_APPROVAL):
                    self._last_card.pop(run.run_id, None)  # no stop notice follows; kept otherwise
            self._thread_status(run, card.status)
            return
        self._send(state, run, card)
        self._thread_status(run, card.status)

    def _flush(self, run_id: str) -> None:
        """Timer callback: send the newest waiting state unless a final one took over."""
        with self._lock:
            state = self._cards.get(run_id)
            if state is None or state.closed or state.latest is None:
                return
            state.timer = None
            run, card = state.latest
        try:
            self._send(state, run, card)
            self._thread_status(run, card.status)
        except Exception:  # a timer thread has nobody to report to; the next update retries
            log.exception("run %s: deferred card update failed", run_id)

    def _send(self, state: _CardState, run: RunRef, card: CardView) -> None:
        if not run.card_ts:
            log.warning("run %s: no card to update", run.run_id)
            return
        with state.send_lock:
            if state.closed and state.latest is not None and state.latest[1] is not card:
                return  # a final state superseded this one while it waited for the lock
            self._update_blocks(
                run.channel,
                run.card_ts,
                render.card_text(run.run_id, run.requester, card),
                render.card_blocks(run.run_id, run.requester, card),
            )
            state.last_sent = self._clock()

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

    def post_notice(self, run: RunRef, text: str) -> None:
        self._post_text(run, text)

    def show_decision(self, run: RunRef, approval: Approval) -> None:
        if not approval.card_ts:
            return
        self._update_blocks(
            approval.card_channel or run.channel,
            approval.card_ts,
            render.approval_text(approval),
            render.approval_blocks(approval),
        )

    # -- answers and notices --------------------------------------------------------------------

    def post_answer(self, run: RunRef, text: str) -> None:
        for chunk in render.answer_chunks(self._redact(text)):  # before a cut could split a secret
            self._post_text(run, chunk)

    def post_stop_notice(self, run: RunRef, notice: StopNotice) -> None:
        with self._lock:
            card = self._last_card.pop(run.run_id, None)
        last = render.step_line(card.steps[-1]) if card and card.steps else None
        self._post_text(run, render.stop_notice_text(notice, last))

    def acknowledge(self, run: RunRef, message: Message) -> None:
        """:eyes: on the reply. The web process already reacted when it stored the reply; this
        repeats it (``already_reacted`` is fine) in case that reaction was lost."""
        ts = message.meta.get("ts")
        if ts:
            add_reaction(self._client, run.channel, str(ts), EYES)

    # -- posting, with fallbacks for messages Slack refuses for their form ----------------------

    def _post_blocks(self, run: RunRef, text: str, blocks: list[render.Block]) -> Any:
        text, blocks = self._redact(text), redacted_blocks(blocks, self._redact)
        attempts = [blocks, plainer_blocks(blocks), None]
        for index, attempt in enumerate(attempts):
            try:
                return self._client.chat_postMessage(
                    channel=run.channel, thread_ts=run.thread_ts, text=text, blocks=attempt
                )
            except SlackApiError as error:
                if slack_error(error) not in _BLOCK_ERRORS or index == len(attempts) - 1:
                    raise
                log.warning(
                    "run %s: Slack refused the blocks (%s); posting a plainer card", run.run_id, error
                )
        raise AssertionError("unreachable")

    def _update_blocks(self, channel: str, ts: str, text: str, blocks: list[render.Block]) -> None:
        text, blocks = self._redact(text), redacted_blocks(blocks, self._redact)
        attempts = [blocks, plainer_blocks(blocks), []]
        for index, attempt in enumerate(attempts):
            try:
                self._client.chat_update(channel=channel, ts=ts, text=text, blocks=attempt)
                return
            except SlackApiError as error:
                if slack_error(error) not in _BLOCK_ERRORS or index == len(attempts) - 1:
                    raise
                log.warning("message %s: Slack refused the blocks (%s); updating it plainer", ts, error)

    def _post_text(self, run: RunRef, text: str) -> None:
        text = self._redact(text)
        try:
            self._client.chat_postMessage(channel=run.channel, thread_ts=run.thread_ts, text=text)
        except SlackApiError as error:
            if slack_error(error) != TOO_LONG or len(text) < 2 * MIN_SPLIT:
                raise
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
        self.set_thread_status(run.channel, run.thread_ts, STATUS_TEXT if working else "")

    def set_thread_status(self, channel: str, thread_ts: str, status: str) -> bool:
        """``assistant.threads.setStatus``, skipped where the workspace refused it before."""
        try:
            if self._redis.exists(self._no_status_key):
                return False
        except redis.RedisError:
            return False
        try:
            self._client.assistant_threads_setStatus(channel_id=channel, thread_ts=thread_ts, status=status)
            return True
        except SlackApiError as error:
            code = error.response.get("error") if error.response is not None else None
            log.info("thread status unavailable here (%s); not trying again for a day", code)
            with contextlib.suppress(redis.RedisError):
                self._redis.set(self._no_status_key, str(code), ex=NO_STATUS_SECONDS)
            return False


def add_reaction(client: WebClient, channel: str, ts: str, name: str) -> None:
    """``reactions.add``, treating "already reacted" as success."""
    try:
        client.reactions_add(channel=channel, timestamp=ts, name=name)
    except SlackApiError as error:
        if error.response is None or error.response.get("error") not in _IGNORED_REACTION_ERRORS:
            raise
