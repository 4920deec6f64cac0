"""The web process's courtesy calls (:eyes: on a new mention or reply, the "queued" note), with a
ceiling on how many a process makes, so that a flood of mentions cannot turn into a flood of calls.

They are niceties: the run card says the same a moment later. Under a flood (an incident, a
script gone wrong) there is one per mention, hundreds a second, and Slack takes
``reactions.add`` at Tier 3 (50+ a minute, sporadic bursts allowed) and ``chat.postEphemeral`` at
Tier 4 (100+): beyond a burst every call would be answered 429 and waited out in a follow-up
thread, the threads and the queue of stale acknowledgements growing while the web process spends
its CPU on them instead of on acks. So each process keeps a token bucket per method, its ``Allowance``: a burst
(a busy incident channel's replies all get theirs at once), then a rate per minute; a
courtesy that finds the bucket empty is skipped (counted, logged at debug level), as is one while
Slack has told any process to wait (``bot.slack.delivery.sender.RetryAfter``, through Redis). Within the
budget the call is made with the process's retrying client: a 429 of Slack's is waited out, so a
burst's acknowledgement arrives late rather than never.
"""

from __future__ import annotations

import logging
import threading
import time
from collections.abc import Callable, Mapping
from dataclasses import dataclass

from slack_sdk import WebClient

from bot.slack.delivery.sender import RetryAfter, TokenBucket

log = logging.getLogger(__name__)


@dataclass(frozen=True)
class Allowance:
    """A method's courtesy calls per process: ``burst`` at once, then ``per_minute``."""

    per_minute: float
    burst: float


# Each call costs the web process a few milliseconds (a new HTTPS request, the work that only the
# call needs), taken from the acks beside it: measured by ``bench.alerts``, 600 a minute and a burst
# of 200 per method made the first seconds of a flood of mentions miss the acks' p99 by a factor of
# three. The ceilings are at Slack's floors per process; its 429s pace anything above them.
ALLOWANCES: Mapping[str, Allowance] = {
    # Tier 3 (50+ a minute); a minute's worth at once: an incident channel's burst of replies all
    # get their :eyes:.
    "reactions.add": Allowance(per_minute=100.0, burst=50.0),
    # Tier 4 (100+). A flood of mentions is when every worker is busy: the first few people are
    # told they are queued; the rest see their run card when it comes, as they would anyway.
    "chat.postEphemeral": Allowance(per_minute=100.0, burst=10.0),
}


class CourtesyBudget:
    """Per process (one per web runtime): ``take(method)`` before a courtesy call, ``call`` to make it."""

    def __init__(
        self,
        retry_after_for: Callable[[], RetryAfter | None],
        allowances: Mapping[str, Allowance] = ALLOWANCES,
        clock: Callable[[], float] = time.monotonic,
    ) -> None:
        self._retry_after_for = retry_after_for  # the workspace's shared Retry-After, once known
        self._allowances = allowances
        self._clock = clock
        self._lock = threading.Lock()
        self._buckets: dict[str, TokenBucket] = {}
        self.skipped = 0  # courtesies left out since the process started

    def take(self, method: str) -> bool:
        """Whether a courtesy call of ``method`` may go out now (and a token is spent on it)."""
        return self._admit(method, spend=True)

    def has_room(self, method: str) -> bool:
        """Whether ``take(method)`` would allow a call now, spending nothing: asked before the
        work that only a call needs (the queued note's read of the run), so that under a flood,
        when every courtesy is skipped, the skipped ones cost nothing either."""
        return self._admit(method, spend=False)

    def _admit(self, method: str, *, spend: bool) -> bool:
        shared = self._retry_after_for()
        if shared is not None and shared.remaining(method) > 0:
            return self._skip(method, "Slack asked to wait")
        allowance = self._allowances[method]
        with self._lock:
            bucket = self._buckets.setdefault(method, TokenBucket(tokens=allowance.burst))
            bucket.refill(self._clock(), allowance.per_minute / 60.0, allowance.burst)
            if bucket.tokens < 1.0:
                return self._skip(method, "over its rate tier")
            if spend:
                bucket.tokens -= 1.0
        return True

    def call(self, client: WebClient, method: str, send: Callable[[WebClient], object]) -> bool:
        """``send(client)`` if the budget allows; whether it was sent (Slack's errors propagate)."""
        if not self.take(method):
            return False
        send(client)
        return True

    def _skip(self, method: str, why: str) -> bool:
        self.skipped += 1
        log.debug("courtesy %s skipped: %s (%d skipped so far)", method, why, self.skipped)
        return False
