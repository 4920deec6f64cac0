"""The run's Findings message in its thread: posted at the first update, edited in place after each.

* **Coalesced, never in the loop.** ``show`` queues the version on the process's background
  sender (``bot.slack.delivery.sender``), keyed by the run: a newer version replaces one still
  queued, so only the newest is ever sent, intermediate ones at most once per ``interval``; it
  is rendered when sent. The job's final wait for the card waits for it too (same run tag).
* **One message per run, across workers.** The first send posts the message and records its ts
  in the run record (``RunRecords.claim_findings_ts``: set once, in one script); every later
  send, by this process or a job that resumed the run on another worker, edits that message.
  This process remembers the ts as soon as Slack answers, so a post whose record write failed is
  edited on the retry, never posted again; should two jobs ever both post, the one recorded
  first stays and the other's message is deleted.
* **Steps' links** are the run card's permalink (``Permalinks``; why: ``bot.slack.rendering.findings``).
* **Secrets.** The model's statements and quotes are redacted before they are laid out: rendering
  keeps lines whole (never cut inside code), which a redaction afterwards could not promise.
"""

from __future__ import annotations

import logging
import threading
from collections.abc import Callable

from slack_sdk import WebClient
from slack_sdk.errors import SlackApiError

from agent.findings import Findings
from bot.runs.presenter import RunRef
from bot.runs.record import RunRecords
from bot.slack.delivery.permalinks import Permalinks
from bot.slack.delivery.sender import Delivery, Outcome
from bot.slack.rendering.blockkit import Block, notification_text
from bot.slack.rendering.findings import findings_blocks

log = logging.getLogger(__name__)

# What the presenter gives: queue a send (key, method, send, run, final, interval); post a
# message (returns its ts); update one (channel, ts, text, blocks).
Deliver = Callable[[tuple[str, ...], str, Callable[[], object], RunRef, bool, float], Delivery]
Post = Callable[[RunRef, str, list[Block]], str | None]
Update = Callable[[str, str, str, list[Block]], None]


class FindingsMessages:
    """The Findings messages of one worker process's runs (thread-safe)."""

    def __init__(
        self,
        client: WebClient,
        records: RunRecords,
        permalinks: Permalinks,
        *,
        deliver: Deliver,
        post: Post,
        update: Update,
        redact: Callable[[str], str],
        interval: float = 1.0,
    ) -> None:
        self._client = client  # the background sender's (it waits out 429s itself)
        self._records = records
        self._permalinks = permalinks
        self._deliver = deliver
        self._post = post
        self._update = update
        self._redact = redact
        self._interval = interval
        self._lock = threading.Lock()
        self._ts: dict[str, str] = {}  # run id -> its message, once Slack answered the post
        self._unrecorded: set[str] = set()  # runs whose message's ts the record does not hold yet
        self._queued: dict[str, tuple[int, Delivery]] = {}  # run id -> the version last queued

    def show(self, run: RunRef, findings: Findings) -> None:
        """Queue ``findings`` for the run's message; never waits. A version already queued or sent
        by this process is not sent again (the job's report shows the findings once more)."""
        with self._lock:
            queued = self._queued.get(run.run_id)
            if (
                queued is not None
                and queued[0] == findings.version
                and queued[1].outcome in (None, Outcome.SENT)
            ):
                return
            known = run.run_id in self._ts

        def send() -> None:  # rendered when sent: a version replaced meanwhile costs nothing
            self._send(run, findings)

        method = "chat.update" if known else "chat.postMessage"
        delivery = self._deliver(
            ("findings", run.channel, run.run_id), method, send, run, False, self._interval
        )
        with self._lock:
            self._queued[run.run_id] = (findings.version, delivery)

    # -- the sender's side ------------------------------------------------------------------------

    def _send(self, run: RunRef, findings: Findings) -> None:
        link = self._permalinks.get(run.channel, run.card_ts, self._client)
        blocks = findings_blocks(self._redacted(findings), run.run_id, link)
        text = notification_text(blocks)
        ts = self._message(run)
        if ts is not None:
            self._update(run.channel, ts, text, blocks)
            return
        posted = self._post(run, text, blocks)
        if not posted:
            return
        with self._lock:
            self._ts[run.run_id] = posted
            self._unrecorded.add(run.run_id)
        standing = self._record(run, posted)
        if standing and standing != posted:  # another job's message was recorded first: keep that one
            self._drop(run.channel, posted)
            self._update(run.channel, standing, text, blocks)

    def _message(self, run: RunRef) -> str | None:
        """The run's message: remembered here, else the one the record names (another job's)."""
        with self._lock:
            ts = self._ts.get(run.run_id)
            unrecorded = run.run_id in self._unrecorded
        if ts is not None:
            if unrecorded:  # posted by this process, the record's write failed: again now
                return self._record(run, ts) or ts
            return ts
        recorded = self._records.findings_ts(run.run_id)
        if recorded:
            with self._lock:
                self._ts[run.run_id] = recorded
        return recorded

    def _record(self, run: RunRef, ts: str) -> str | None:
        """Record ``ts`` unless the record holds one; the ts that stands (a Redis error raises:
        the sender tries the delivery again, which edits the message it remembers)."""
        standing = self._records.claim_findings_ts(run.run_id, ts)
        with self._lock:
            self._unrecorded.discard(run.run_id)
            if standing:
                self._ts[run.run_id] = standing
        return standing

    def _drop(self, channel: str, ts: str) -> None:
        try:
            self._client.chat_delete(channel=channel, ts=ts)
        except SlackApiError as error:
            log.warning("a second Findings message %s could not be deleted: %s", ts, error)

    def _redacted(self, findings: Findings) -> Findings:
        """``findings`` with every text the model wrote passed through the redactor."""
        hypotheses = tuple(
            h.model_copy(
                update={
                    "statement": self._redact(h.statement),
                    "evidence": tuple(
                        e.model_copy(update={"quote": self._redact(e.quote)}) for e in h.evidence
                    ),
                }
            )
            for h in findings.hypotheses
        )
        return findings.model_copy(update={"hypotheses": hypotheses})
