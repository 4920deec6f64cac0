"""The run's answer streamed into its thread: ``chat.startStream`` / ``appendStream`` / ``stopStream``.

Slack's agent surface (docs.slack.dev/reference/methods/chat.startStream and its two siblings):
a streamed reply shows the run's tool calls as a timeline of ``task_update`` chunks while it
works, then the answer, then feedback buttons (``bot.slack.handlers.feedback``) once stopped.

**One stream per run segment; the run card stays the durable record.** A stream lives in the
worker that owns the run's lease: it opens at the segment's first tool call (or with the answer),
shows the calls of that segment as tasks, and is stopped when the segment ends. A run that
suspends for an approval stops its stream there (the approval card, posted after it, is what a
person acts on) and the resumed segment, possibly in another worker, opens a new one. The card is
still posted and updated as before: it carries the Stop and Transcript buttons, the recovery sweep
redraws it from Redis, and a stream cannot be reopened after a crash (Slack closes idle streams on
its own, python-slack-sdk#1859), so nothing durable depends on a stream.

**Fallback, per channel.** ``chat.startStream`` refused for good (``not_allowed``, a channel
type or workspace without the feature, ``missing_scope``...) is remembered per channel for
``NO_STREAM_SECONDS`` (``slack:no_stream:{team}:{channel}``, this module's record) and that
channel gets today's card and posted answer meanwhile; other channels keep streaming. A
transient failure (429 after the waits, 5xx) falls back for that answer only. A stream that
fails after it started (expired, refused) gets no more calls; the answer is then posted the
classic way as well, so it is never lost (at worst shown twice). Answers longer than
``MAX_STREAM_TEXT`` go the classic way too (``post_answer``: split, or uploaded as a file).

**Rate tiers.** ``chat.appendStream`` is Tier 4, ``chat.startStream`` / ``stopStream`` Tier 2.
Timeline updates go through the process's background sender (``bot.slack.delivery.sender``): coalesced
per stream (only the newest state is sent) and at most one ``appendStream`` per stream every
``APPEND_INTERVAL`` seconds, with the sender's per-method budget and ``Retry-After`` handling. The
answer is sent in as few calls as the 12,000-character limit per call allows (stopStream carries
the last piece and the buttons). The sender's budget (50 a minute per method and workspace) is
above Tier 2's floor for starts and stops, which are one each per run segment: a 429 there is
waited out like any other (``Retry-After``, shared through Redis).

A run that completes with an empty answer (no ``post_answer``) leaves its stream open; Slack
closes it when idle, its timeline intact.

**Untrusted text.** Tool names, arguments, outputs and the answer are the model's and tools':
redacted first (the presenter's redactor), then made inert for Markdown (``inert_markdown``): no
``<!channel>`` or ``<@U…>`` (angle brackets become entities), no bare ``@here`` or ``@handle`` or
``#channel`` (a word joiner after the sign), no labelled link (``[label](url)`` becomes
``label (url)``: the real destination shows), no reference links. The answer's citations are
filled in after that by the presenter's ``finish`` (``bot.slack.rendering.citations``), in
Markdown: a verified one a link to its step, any other marked unverified, as when posted.
"""

from __future__ import annotations

import contextlib
import hashlib
import logging
import re
import threading
from collections.abc import Callable
from dataclasses import dataclass, field
from typing import Any

import redis
from slack_sdk import WebClient
from slack_sdk.errors import SlackApiError

from agent.types import RunStatus
from bot.keys import Keys
from bot.runs.presenter import CardView, RunRef, Step, StepStatus
from bot.slack.delivery.sender import is_transient
from bot.slack.rendering.feedback_buttons import feedback_blocks
from bot.slack.rendering.mrkdwn import mention
from bot.slack.rendering.people import step_people
from bot.slack.rendering.render import short_arguments, step_result
from bot.slack.rendering.stream_text import inert_markdown, plain_markdown

log = logging.getLogger(__name__)

# Shown under the thread while the model thinks (``assistant.threads.setStatus``), in turn.
LOADING_MESSAGES = (
    "Reading the thread…",
    "Thinking it through…",
    "Checking what the tools said…",
)
NO_STREAM_SECONDS = 6 * 3600  # a channel where chat.startStream was refused: card and posts meanwhile
APPEND_INTERVAL = 2.0  # at most one chat.appendStream per stream this often (it is Tier 4 per workspace)
MAX_MARKDOWN = 12_000  # Slack's limit on markdown_text per call
MAX_STREAM_TEXT = 36_000  # a longer answer is posted the classic way (split, or a file)
MAX_STREAMS = 500  # streams one process keeps track of (a run whose lease it lost never ends here)
TITLE_CHARS = 120
DETAILS_CHARS = 200
OUTPUT_CHARS = 300
WAITING_NOTE = "_Waiting for an approval: see the approval card in this thread._"
BUDGET_NOTE = "_Waiting at its token budget: see the budget card in this thread._"
STOPPED_NOTE = "_The run stopped: see the notice in this thread._"
LONG_NOTE = "_The answer is long: it follows below._"
_TASK_STATUS = {
    StepStatus.RUNNING: "in_progress",
    StepStatus.OK: "complete",
    StepStatus.ERROR: "error",
    StepStatus.REFUSED: "error",
}
_USER_ID = re.compile(r"[UW][A-Z0-9_]{1,40}")

# -- the per-channel fallback (this module's record) -------------------------------------------------


class StreamRefusals:
    """Channels where ``chat.startStream`` was refused for good, for ``NO_STREAM_SECONDS``."""

    def __init__(self, redis_client: redis.Redis, keys: Keys, team: str) -> None:
        self._redis = redis_client
        self._keys = keys
        self._team = team or "workspace"

    def _key(self, channel: str) -> str:
        return self._keys.slack("no_stream", self._team, channel)

    def refused(self, channel: str) -> bool:
        """True where streaming was refused lately, or when Redis cannot tell (then: no stream)."""
        try:
            return bool(self._redis.exists(self._key(channel)))
        except redis.RedisError:
            return True

    def remember(self, channel: str, error: str) -> None:
        with contextlib.suppress(redis.RedisError):
            self._redis.set(self._key(channel), error, ex=NO_STREAM_SECONDS)


# -- one stream ----------------------------------------------------------------------------------------


@dataclass
class _Stream:
    run: RunRef
    baseline: frozenset[str] = frozenset()  # calls of earlier segments: shown by their own streams
    view: CardView | None = None
    ts: str | None = None
    shown: dict[str, str] = field(default_factory=dict)  # task id -> "status|output" last sent
    broken: bool = False  # refused or failed after it started: no more calls, answers go classic
    lock: threading.Lock = field(default_factory=threading.Lock)


def task_id(call_id: str) -> str:
    """A task's id: derived from the call id (the model's text), never the text itself."""
    return "call-" + hashlib.sha256(call_id.encode()).hexdigest()[:16]


Deliver = Callable[[tuple[str, ...], str, Callable[[], object], RunRef, bool, float], object]


class AnswerStreams:
    """The streams of one worker process's runs (thread-safe; used by ``SlackPresenter``).

    ``client`` retries 429s itself (the answer, sent from the job); ``deferred`` does not (the
    timeline, sent by the background sender through ``deliver``, which waits out 429s).
    """

    def __init__(
        self,
        client: WebClient,
        deferred: WebClient,
        redis_client: redis.Redis,
        keys: Keys,
        deliver: Deliver,
        *,
        redact: Callable[[str], str],
        team_id: str | None = None,
        append_interval: float = APPEND_INTERVAL,
    ) -> None:
        self._client = client
        self._deferred = deferred
        self._redis = redis_client
        self._keys = keys
        self._deliver = deliver
        self._redact = redact
        self._team_id = team_id
        self._append_interval = append_interval
        self._lock = threading.Lock()
        self._streams: dict[str, _Stream] = {}
        self._refusals: StreamRefusals | None = None

    # -- what the presenter calls ----------------------------------------------------------------

    def card(self, run: RunRef, card: CardView) -> None:
        """The run card's new state: the stream's timeline follows it. Never waits."""
        stream = self._stream(run, card)
        stream.view = card
        if stream.broken:
            if card.status.suspended or card.status.terminal:
                self._forget(run.run_id)  # the next segment looks again
            return
        if card.status.suspended or (card.status.terminal and card.status is not RunStatus.COMPLETED):
            note = STOPPED_NOTE
            if card.status.suspended:
                note = BUDGET_NOTE if card.status is RunStatus.AWAITING_BUDGET else WAITING_NOTE
            self._forget(run.run_id)  # the segment is over: a resumed one opens its own stream
            send: Callable[[], object] = lambda: self._stop(stream, note)  # noqa: E731
            self._deliver(self._key(run), "chat.stopStream", send, run, True, 0.0)
            return
        final = card.status is RunStatus.COMPLETED  # the answer follows, in the job
        method = "chat.appendStream" if stream.ts else "chat.startStream"
        interval = 0.0 if final else self._append_interval
        self._deliver(self._key(run), method, lambda: self._flush(stream), run, final, interval)

    def answer(
        self,
        run: RunRef,
        text: str,
        people: frozenset[str] = frozenset(),
        finish: Callable[[str], str] | None = None,
    ) -> bool:
        """Stream the (already redacted) answer and stop the stream with the feedback buttons;
        IDs of the run's ``people`` in it become mentions (``bot.slack.rendering.people``), as when posted;
        ``finish`` completes the inert Markdown (the citations, ``bot.slack.rendering.citations``).
        False: not streamed here (this channel refuses streams, or it failed): post it instead."""
        stream = self._stream(run, None)
        self._forget(run.run_id)
        markdown = inert_markdown(text, people)
        if finish is not None:
            markdown = finish(markdown)
        if run.source_url:
            markdown += f"\n\n:link: alert source: {plain_markdown(run.source_url, 500)}"
        with stream.lock:
            if stream.broken:
                return False
            if len(markdown) > MAX_STREAM_TEXT:
                self._stop_locked(stream, LONG_NOTE, self._client)
                return False
            pieces = [markdown[i : i + MAX_MARKDOWN] for i in range(0, len(markdown), MAX_MARKDOWN)] or [""]
            try:
                rest, lead = pieces, []
                if stream.ts is None:
                    if not self._start_locked(stream, self._client, [_md(pieces[0])]):
                        return False
                    rest = pieces[1:]
                else:
                    lead = self._tasks(stream)  # the timeline's last states, if still unsent
                for piece in rest[:-1]:
                    self._client.chat_appendStream(
                        channel=run.channel, ts=stream.ts or "", chunks=[*lead, _md(piece)]
                    )
                    lead = []
                last = [*lead, *([_md(rest[-1])] if rest else [])]  # the last piece rides on the stop
                self._client.chat_stopStream(
                    channel=run.channel, ts=stream.ts or "", chunks=last, blocks=feedback_blocks(run.run_id)
                )
            except SlackApiError as error:
                stream.broken = True
                log.warning("run %s: the streamed answer failed (%s); posting it", run.run_id, _code(error))
                return False
        return True

    # -- the stream of a run ---------------------------------------------------------------------------

    def _stream(self, run: RunRef, card: CardView | None) -> _Stream:
        with self._lock:
            stream = self._streams.get(run.run_id)
        if stream is not None:
            return stream
        # A stream goes to a person (recipient_user_id): an alert's own run has none. Where it
        # cannot stream, the run keeps a broken stream: no second look at Redis per card update.
        refused = not _USER_ID.fullmatch(run.requester) or self._refused().refused(run.channel)
        earlier = (
            frozenset(s.call_id for s in card.steps if s.status is not StepStatus.RUNNING)
            if card is not None
            else frozenset()
        )
        with self._lock:
            while len(self._streams) >= MAX_STREAMS:  # runs this process lost (its lease): oldest first
                self._streams.pop(next(iter(self._streams)))
            return self._streams.setdefault(run.run_id, _Stream(run, earlier, broken=refused))

    def _forget(self, run_id: str) -> None:
        with self._lock:
            self._streams.pop(run_id, None)

    def _key(self, run: RunRef) -> tuple[str, ...]:
        return ("stream", run.channel, run.run_id)

    def _refused(self) -> StreamRefusals:
        if self._refusals is None:
            self._refusals = StreamRefusals(self._redis, self._keys, self._team_id or "")
        return self._refusals

    def _team(self, client: WebClient) -> str:
        if self._team_id is None:
            self._team_id = str(client.auth_test().get("team_id") or "")
        return self._team_id

    def _tasks(self, stream: _Stream) -> list[dict[str, Any]]:
        """``task_update`` chunks for the calls whose state changed since they were last sent."""
        view = stream.view
        if view is None:
            return []
        chunks = []
        people = step_people(stream.run.requester, view.steps)
        for step in view.steps:
            if step.call_id in stream.baseline:
                continue
            chunk = self._task(step, people)
            shown = f"{chunk['status']}|{chunk.get('output', '')}"
            if stream.shown.get(chunk["id"]) != shown:
                chunks.append(chunk)
        return chunks

    def _task(self, step: Step, people: frozenset[str]) -> dict[str, Any]:
        title = self._redact(step.tool) + (f" on {self._redact(step.target)}" if step.target else "")
        chunk: dict[str, Any] = {
            "type": "task_update",
            "id": task_id(step.call_id),
            "title": plain_markdown(title, TITLE_CHARS) or "tool",
            "status": _TASK_STATUS[step.status],
        }
        arguments = short_arguments(self._redact(step.arguments))
        if arguments:
            chunk["details"] = plain_markdown(arguments, DETAILS_CHARS)
        output = ""
        if step.status is StepStatus.REFUSED:
            output = "not run"
        elif step.result and step.status is not StepStatus.RUNNING:
            output = plain_markdown(self._redact(step_result(step)), OUTPUT_CHARS, people)
        if step.confirmed_by:  # written by the approval gate, as on the card: a mention of the approver
            output += f"{' · ' if output else ''}approved by {mention(step.confirmed_by)}"
        if output:
            chunk["output"] = output
        return chunk

    def _sent(self, stream: _Stream, chunks: list[dict[str, Any]]) -> None:
        for chunk in chunks:
            if chunk["type"] == "task_update":
                stream.shown[chunk["id"]] = f"{chunk['status']}|{chunk.get('output', '')}"

    # -- calls (the timeline's in the background sender, the answer's in the job) --------------------

    def _flush(self, stream: _Stream) -> None:
        with stream.lock:
            if stream.broken:
                return
            chunks = self._tasks(stream)
            if not chunks:
                return
            if stream.ts is None:
                self._start_locked(stream, self._deferred, chunks)
                return
            try:
                self._deferred.chat_appendStream(channel=stream.run.channel, ts=stream.ts, chunks=chunks)
            except SlackApiError as error:
                if is_transient(error):
                    raise  # the sender tries again (and waits out a 429)
                stream.broken = True
                log.warning("run %s: the stream was refused (%s)", stream.run.run_id, _code(error))
                return
            self._sent(stream, chunks)

    def _start_locked(self, stream: _Stream, client: WebClient, extra: list[dict[str, Any]]) -> bool:
        """``chat.startStream`` with the timeline so far and ``extra``; False when refused (for
        good: remembered for the channel) or failed (transient, raised from the sender's sends)."""
        run = stream.run
        chunks = [*self._tasks(stream), *extra]
        try:
            team = self._team(client)
        except SlackApiError as error:  # not a refusal of streams: this time without one
            if is_transient(error) and client is self._deferred:
                raise
            stream.broken = True
            return False
        try:
            response = client.chat_startStream(
                channel=run.channel,
                thread_ts=run.thread_ts,
                recipient_user_id=run.requester,
                recipient_team_id=team,
                task_display_mode="timeline",
                chunks=chunks,
            )
        except SlackApiError as error:
            if is_transient(error) and client is self._deferred:
                raise  # the sender tries again
            stream.broken = True
            if not is_transient(error):
                code = _code(error)
                log.info("streaming refused in %s (%s); posting answers there for a while", run.channel, code)
                self._refused().remember(run.channel, code)
            return False
        stream.ts = str(response.get("ts") or "") or None
        if stream.ts is None:
            stream.broken = True
            return False
        self._sent(stream, chunks)
        return True

    def _stop(self, stream: _Stream, note: str) -> None:
        with stream.lock:
            self._stop_locked(stream, note, self._deferred)

    def _stop_locked(self, stream: _Stream, note: str, client: WebClient) -> None:
        """Stop the segment's stream with its last task states and ``note`` (no buttons: no answer)."""
        if stream.broken or stream.ts is None:
            return  # nothing shown (or nothing more to show): the card and the posts tell it
        chunks = [*self._tasks(stream), _md(f"\n\n{note}")]
        try:
            client.chat_stopStream(channel=stream.run.channel, ts=stream.ts, chunks=chunks)
        except SlackApiError as error:
            if is_transient(error) and client is self._deferred:
                raise
            log.warning("run %s: the stream was not stopped (%s)", stream.run.run_id, _code(error))
        stream.broken = True  # stopped: nothing more goes to it


def _md(text: str) -> dict[str, Any]:
    return {"type": "markdown_text", "text": text}


def _code(error: SlackApiError) -> str:
    response = error.response
    return str(response.get("error")) if response is not None and response.get("error") else "error"
