"""``SlackSender``: the one background thread of a process that sends what may wait (card updates,
the "is working" status, :eyes:), so the agent loop never waits for Slack.

* **Coalesced per message.** A ``Delivery`` is keyed by what it changes (a card's message, a
  thread's status, a reaction); submitting a newer state replaces a queued older one, which is
  then never sent. A state being sent finishes first: per key, sends never overlap or reorder.
* **Throttled per message.** A delivery may carry an ``interval``: it is sent no sooner than that
  after the key's previous send (a card's intermediate states, at most one a second). Final
  states carry none.
* **Within Slack's rate tier, across the process.** ``chat.update``, ``reactions.add`` and
  ``assistant.threads.setStatus`` are Tier 3 methods (50+ per minute, per method, workspace and
  app; sporadic bursts allowed): each (workspace, method) has a token bucket that intermediate
  states wait for (leaving a reserve). A final state is sent at once and borrows its token: there
  is one per run segment, a job waits for it, and holding it for the bucket would hold the
  worker, a second at a time. In a forking worker a process is one job's work horse, so the
  bucket thins out one run's updates; what paces every process together is Slack's own answer:
* **429 honours ``Retry-After``** without sleeping in the call (the deliveries' client has no
  rate-limit retry handler): the method waits that long in this process, every process learns it
  through Redis (``RetryAfter``), and newer states keep replacing the waiting one meanwhile.
  Server and connection errors are retried inside the call by the client's own handlers, then
  here with a back-off, a few times; any other error is final (``FAILED``).

A caller that must know a state arrived (the job, for a run's final card) waits for it with a
bound (``wait``) and cancels it if it did not; nothing else ever waits.
"""

from __future__ import annotations

import contextlib
import logging
import threading
import time
from collections.abc import Callable, Hashable
from dataclasses import dataclass, field
from enum import StrEnum

import redis
from slack_sdk.errors import SlackApiError

from bot.keys import Keys
from tools.fork_local import ForkLocal

log = logging.getLogger(__name__)

PER_MINUTE = 50.0  # Slack's Tier 3 floor ("50+ per minute"), per method and workspace
BURST = 20.0  # tokens a bucket holds: a short burst is welcome
RESERVE = 5.0  # tokens an intermediate state leaves to final ones
MAX_ATTEMPTS = 4  # sends of one delivery that failed on a server or connection error
BACKOFF_SECONDS = 1.0  # doubled after each such failure
DEFAULT_RETRY_AFTER = 1.0  # a 429 without a usable Retry-After header
RETRY_AFTER_READ_SECONDS = 2.0  # how stale this process's view of other processes' 429s may be
TRANSIENT_ERRORS = frozenset({"ratelimited", "internal_error", "fatal_error", "service_unavailable"})


class Outcome(StrEnum):
    SENT = "sent"
    FAILED = "failed"  # Slack refused it for good, or it kept failing
    SUPERSEDED = "superseded"  # a newer state of the same key replaced it before it was sent
    CANCELLED = "cancelled"  # its submitter gave up waiting


def slack_status(error: SlackApiError) -> int:
    response = error.response
    return int(getattr(response, "status_code", 0) or 0) if response is not None else 0


def is_transient(error: BaseException) -> bool:
    """A failure worth trying again later: rate limits, server errors, connection trouble."""
    if isinstance(error, SlackApiError):
        status = slack_status(error)
        code = error.response.get("error") if error.response is not None else None
        return status == 429 or status >= 500 or code in TRANSIENT_ERRORS
    return True  # connection errors, timeouts, and anything unexpected: worth another try


def retry_after(error: SlackApiError) -> float | None:
    """Seconds Slack asked us to wait (a 429), else None."""
    if slack_status(error) != 429:
        return None
    headers = getattr(error.response, "headers", None) or {}
    value = next((v for k, v in headers.items() if str(k).lower() == "retry-after"), None)
    if isinstance(value, list):
        value = value[0] if value else None
    try:
        return max(0.0, float(value)) if value is not None else DEFAULT_RETRY_AFTER
    except (TypeError, ValueError):
        return DEFAULT_RETRY_AFTER


_KNOWN: dict[str, tuple[float, float]] = {}  # Redis key: (read at, blocked until), this process's clock


class RetryAfter:
    """Slack's ``Retry-After`` for one workspace, shared by every process through Redis (a key that
    expires when the wait is over). Redis failures make it forget, never block a send."""

    def __init__(self, redis_client: redis.Redis, keys: Keys, team: str) -> None:
        self._redis = redis_client
        self._keys = keys
        self._team = team

    def _key(self, method: str) -> str:
        return self._keys.slack("retry_after", self._team, method)

    def remaining(self, method: str) -> float:
        """Seconds Slack asked (any process) to wait before calling ``method``; read from Redis
        at most once every ``RETRY_AFTER_READ_SECONDS`` (a round trip per send would cost more)."""
        now, key = time.monotonic(), self._key(method)
        known = _KNOWN.get(key)
        if known is None or now - known[0] >= RETRY_AFTER_READ_SECONDS:
            try:
                milliseconds = int(self._redis.pttl(key))
            except redis.RedisError:
                milliseconds = 0
            known = _KNOWN[key] = (now, now + max(0, milliseconds) / 1000)
        return max(0.0, known[1] - now)

    def block(self, method: str, seconds: float) -> None:
        if seconds > 0:
            _KNOWN[self._key(method)] = (time.monotonic(), time.monotonic() + seconds)
            with contextlib.suppress(redis.RedisError):
                self._redis.set(self._key(method), "1", px=max(1, int(seconds * 1000)))


@dataclass
class Delivery:
    """One state to send: ``send`` does it (and raises what Slack answered)."""

    key: Hashable
    method: str
    send: Callable[[], object]
    workspace: str = ""
    final: bool = False
    interval: float = 0.0  # at least this long after the key's previous send
    tag: str = ""  # whose it is (a run id), for ``pending``
    retry_after: RetryAfter | None = None
    outcome: Outcome | None = None
    not_before: float = 0.0  # retries and back-offs
    attempts: int = 0


@dataclass
class TokenBucket:
    """Slack's pace for one method, kept by one process: ``refill`` then spend ``tokens``."""

    tokens: float = BURST
    stamp: float = 0.0
    blocked_until: float = 0.0

    def refill(self, now: float, per_second: float, burst: float) -> None:
        if self.stamp:
            self.tokens = min(burst, self.tokens + (now - self.stamp) * per_second)
        self.stamp = now

    def ready_at(self, now: float, per_second: float, need: float) -> float:
        """When the bucket holds ``need`` tokens (and no ``Retry-After`` is pending)."""
        missing = max(0.0, need - self.tokens)
        return max(self.blocked_until, now + missing / per_second)


@dataclass
class SlackSender:
    """Sends deliveries from one daemon thread. Thread-safe; see the module's docstring."""

    per_minute: float = PER_MINUTE
    burst: float = BURST
    reserve: float = RESERVE
    clock: Callable[[], float] = time.monotonic
    _queued: dict[Hashable, Delivery] = field(default_factory=dict, repr=False)
    _sending: dict[Hashable, Delivery] = field(default_factory=dict, repr=False)
    _last_sent: dict[Hashable, float] = field(default_factory=dict, repr=False)
    _buckets: dict[tuple[str, str], TokenBucket] = field(default_factory=dict, repr=False)
    _changed: threading.Condition = field(default_factory=threading.Condition, repr=False)
    _thread: threading.Thread | None = field(default=None, repr=False)

    # -- what callers do ----------------------------------------------------------------------

    def submit(self, delivery: Delivery) -> Delivery:
        """Queue ``delivery``, replacing a queued older state of its key; never waits."""
        with self._changed:
            older = self._queued.pop(delivery.key, None)
            if older is not None:
                older.outcome = Outcome.SUPERSEDED
            self._queued[delivery.key] = delivery
            self._start()
            self._changed.notify_all()
        return delivery

    def mark_sent(self, key: Hashable) -> None:
        """``key``'s message was just written by other means (a card posted): throttle from now."""
        with self._changed:
            self._last_sent[key] = self.clock()

    def wait(self, delivery: Delivery, timeout: float) -> bool:
        """Until ``delivery`` has an outcome (True), or ``timeout`` passed, or it cannot even be
        tried again before then (a ``Retry-After`` longer than what is left): False."""
        deadline = self.clock() + timeout
        with self._changed:
            while delivery.outcome is None:
                now = self.clock()
                sending = self._sending.get(delivery.key) is delivery
                due = deadline if sending else self._due(delivery, now)
                if now >= deadline or due > deadline:
                    return False
                self._changed.wait(max(0.001, due - now))  # the thread notifies every change
            return True

    def wait_all(self, tag: str, timeout: float) -> None:
        """Give ``tag``'s queued and in-flight deliveries up to ``timeout`` to be sent; cancel the rest."""
        deadline = self.clock() + timeout
        for delivery in self.pending(tag):
            if not self.wait(delivery, max(0.0, deadline - self.clock())):
                self.cancel(delivery)

    def cancel(self, delivery: Delivery) -> None:
        """Forget ``delivery`` unless it is being sent (then it completes)."""
        with self._changed:
            if self._queued.get(delivery.key) is delivery:
                del self._queued[delivery.key]
                delivery.outcome = Outcome.CANCELLED
                self._changed.notify_all()

    def pending(self, tag: str) -> list[Delivery]:
        """Deliveries of ``tag`` queued or being sent."""
        with self._changed:
            return [d for d in (*self._queued.values(), *self._sending.values()) if d.tag == tag]

    # -- the thread ---------------------------------------------------------------------------

    def _start(self) -> None:
        if self._thread is None or not self._thread.is_alive():
            self._thread = threading.Thread(target=self._run, name="chatops-slack-sender", daemon=True)
            self._thread.start()

    def _run(self) -> None:
        while True:
            with self._changed:
                delivery = self._next()
                if delivery is None:
                    continue
                self._sending[delivery.key] = delivery
            try:
                self._attempt(delivery)
            except Exception:  # never lose the thread: the delivery is done with
                log.exception("sending %s failed", delivery.method)
                delivery.outcome = delivery.outcome or Outcome.FAILED
            with self._changed:
                self._sending.pop(delivery.key, None)
                self._changed.notify_all()

    def _next(self) -> Delivery | None:
        """The delivery to send now (its token taken), else wait until one may be due. Locked."""
        now = self.clock()
        ready = [
            (self._due(d, now), not d.final, d) for d in self._queued.values() if d.key not in self._sending
        ]
        if not ready:
            self._changed.wait()
            return None
        due, _, delivery = min(ready, key=lambda item: (item[0], item[1]))
        if due > now:
            self._changed.wait(due - now)
            return None
        del self._queued[delivery.key]
        bucket = self._bucket(delivery)
        bucket.tokens = max(-self.burst, bucket.tokens - 1)  # a final state may borrow: others wait longer
        return delivery

    def _due(self, delivery: Delivery, now: float) -> float:
        previous = self._last_sent.get(delivery.key)
        throttled = previous + delivery.interval if previous is not None and delivery.interval else 0.0
        bucket = self._bucket(delivery)
        if delivery.final:  # one per run segment: paced by Slack's own Retry-After only (see above)
            return max(delivery.not_before, bucket.blocked_until)
        ready = bucket.ready_at(now, self.per_minute / 60, 1.0 + self.reserve)
        return max(delivery.not_before, throttled, ready)

    def _bucket(self, delivery: Delivery) -> TokenBucket:
        bucket = self._buckets.setdefault(
            (delivery.workspace, delivery.method), TokenBucket(tokens=self.burst)
        )
        bucket.refill(self.clock(), self.per_minute / 60, self.burst)
        return bucket

    def _attempt(self, delivery: Delivery) -> None:
        shared = delivery.retry_after
        waiting = shared.remaining(delivery.method) if shared is not None else 0.0
        if waiting > 0:  # another process was told to wait
            self._again(delivery, self.clock() + waiting, blocked=True)
            return
        delivery.attempts += 1
        try:
            delivery.send()
        except Exception as error:
            self._failed(delivery, error)
            return
        delivery.outcome = Outcome.SENT
        with self._changed:
            if delivery.final:
                self._last_sent.pop(delivery.key, None)  # nothing follows a final state to throttle
            else:
                self._last_sent[delivery.key] = self.clock()

    def _failed(self, delivery: Delivery, error: Exception) -> None:
        seconds = retry_after(error) if isinstance(error, SlackApiError) else None
        if seconds is not None:
            log.info("Slack rate-limits %s: waiting %.1fs before sending again", delivery.method, seconds)
            if delivery.retry_after is not None:
                delivery.retry_after.block(delivery.method, seconds)
            self._again(delivery, self.clock() + seconds, blocked=True)
        elif is_transient(error) and delivery.attempts < MAX_ATTEMPTS:
            log.warning("%s failed (%s); trying again", delivery.method, error)
            self._again(delivery, self.clock() + BACKOFF_SECONDS * 2 ** (delivery.attempts - 1))
        else:
            log.warning("%s failed for good: %s", delivery.method, error)
            delivery.outcome = Outcome.FAILED

    def _again(self, delivery: Delivery, when: float, *, blocked: bool = False) -> None:
        """Queue ``delivery`` again for ``when`` unless a newer state of its key came meanwhile."""
        with self._changed:
            if blocked:  # Retry-After holds for the method, not only this message
                bucket = self._bucket(delivery)
                bucket.blocked_until = max(bucket.blocked_until, when)
            if delivery.key in self._queued:
                delivery.outcome = Outcome.SUPERSEDED
                return
            delivery.not_before = when
            self._queued[delivery.key] = delivery


_process: ForkLocal[SlackSender] = ForkLocal(SlackSender)


def process_sender() -> SlackSender:
    """This process's sender (a forked child gets one of its own: threads do not survive a fork)."""
    return _process.get()
