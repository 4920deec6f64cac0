"""The "queued" note: a mention no worker has picked up within ``QUEUED_NOTE_SECONDS`` (2 s,
``bot.slack.handlers.runtime``).

The web process answers Slack within milliseconds and a worker posts the run card when it starts
the run; with every worker busy, nothing would show in between. So each new run gets a check,
``delay`` seconds after it was stored, on one timer thread of the web process (never on the ack
path, never one thread per mention): if the run is still ``queued`` and has no card, the person
who asked gets one line in the thread saying so and where the run is in the queue. A run picked
up in time gets nothing.

The note is ephemeral (``chat.postEphemeral``, to the requester): a burst of mentions is exactly
when workers are busy, and Slack takes about one message a second per channel, so ten public
notes would delay the run cards behind them (and fill the channel with noise). Ephemerals are
rate limited per method, not per channel. A worker that starts the run between the check and the
post makes the note arrive just after the card: it says "queued", never anything wrong.

The timer thread only hands the due check to the follow-up pool, where the Slack call runs, within
the courtesy budget (``bot.slack.handlers.courtesy``: under a flood, Slack would refuse most notes).
"""

from __future__ import annotations

import heapq
import itertools
import logging
import threading
import time
from collections.abc import Callable
from concurrent.futures import Executor

from slack_sdk import WebClient
from slack_sdk.errors import SlackApiError

from agent.types import RunStatus
from bot.slack.handlers.runtime import WebRuntime
from tools.fork_local import ForkLocal

log = logging.getLogger(__name__)


class Timer:
    """Calls handed to ``executor`` at their due time, by one daemon thread (started per process)."""

    def __init__(self, executor: Executor, clock: Callable[[], float] = time.monotonic) -> None:
        self._executor = executor
        self._clock = clock
        self._heap: list[tuple[float, int, Callable[[], None]]] = []
        self._order = itertools.count()
        self._wake = threading.Condition()
        self._thread = ForkLocal(self._start)  # started on first use in each (forked) process

    def later(self, delay: float, call: Callable[[], None]) -> None:
        with self._wake:
            heapq.heappush(self._heap, (self._clock() + delay, next(self._order), call))
            self._thread.get()
            self._wake.notify()

    def pending(self) -> int:
        with self._wake:
            return len(self._heap)

    def _start(self) -> threading.Thread:
        thread = threading.Thread(target=self._loop, name="chatops-queued-note", daemon=True)
        thread.start()
        return thread

    def _loop(self) -> None:
        while True:
            with self._wake:
                while not self._heap or self._heap[0][0] > self._clock():
                    timeout = self._heap[0][0] - self._clock() if self._heap else None
                    self._wake.wait(timeout)
                _, _, call = heapq.heappop(self._heap)
            try:
                self._executor.submit(call)
            except RuntimeError:  # the pool was shut down: the process is ending
                return


def queued_text(position: int | None) -> str:
    where = f" It is number {position} in the queue." if position else ""
    return (
        f":hourglass_flowing_sand: Queued: every worker is busy right now.{where} "
        "I will post the run card here as soon as a worker picks it up."
    )


def post_if_still_queued(runtime: WebRuntime, run_id: str, channel: str, thread_ts: str) -> bool:
    """The note, if the run is still waiting for a worker; whether it was posted."""
    if not runtime.courtesy().has_room("chat.postEphemeral"):
        return False  # skipped under a flood: not even the run is read (300 checks a second)
    service = runtime.service()
    record = service.get(run_id)
    if record is None or record.status is not RunStatus.QUEUED or record.card_ts:
        return False
    job_id = record.job_id

    def note(slack: WebClient) -> None:  # only when the courtesy budget allows (bot.slack.handlers.courtesy)
        slack.chat_postEphemeral(
            channel=channel, user=record.requester, thread_ts=thread_ts, text=queued_text(position(job_id))
        )

    def position(job: str | None) -> int | None:
        # LPOS, not RQ's get_job_position, which reads the whole queue into this process.
        index = runtime.redis().lpos(service.queue.key, job) if job else None
        return index + 1 if isinstance(index, int) else None

    try:
        return runtime.courtesy().call(runtime.client(), "chat.postEphemeral", note)
    except SlackApiError as error:
        log.warning("queued note for run %s not posted: %s", run_id, error)
        return False
