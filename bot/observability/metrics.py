"""Prometheus metrics kept in Redis, so every worker process on every host adds to the same numbers.

Why Redis and not ``prometheus_client``'s multiprocess mode: that mode shares numbers through
files in ``PROMETHEUS_MULTIPROC_DIR``, so it only aggregates processes on one host, and RQ forks a
new work horse for every job, which leaves one file set per job to be cleaned up. chatops already
needs one Redis shared by the web process and every worker, so workers add to Redis hashes
(``HINCRBYFLOAT``, one ``MULTI`` per observation, or one pipeline per run job: ``batched``) and
the web process reads them at scrape time through a custom collector
(``bot.observability.metrics_collector``). The numbers survive process restarts and reset only
when Redis loses them (Prometheus treats that as a counter reset).

Layout, one hash per metric under the deployment's key prefix::

    {prefix}metrics:{name}   counter: field = JSON list of label values -> value
                             histogram: "{labels}\\t{i}" -> observations in bucket i (not
                             cumulative; i = len(buckets) is +Inf), "{labels}\\tsum", "{labels}\\tcount"

Recording never breaks the caller: a Redis failure is logged (at most once a minute) and dropped.
Label values that come from outside (tool names the model invents) are bounded by the callers.
"""

from __future__ import annotations

import bisect
import json
import logging
import re
import threading
import time
from collections.abc import Callable, Iterator
from contextlib import contextmanager
from dataclasses import dataclass
from typing import Any, Literal

import redis

from bot.keys import Keys

log = logging.getLogger(__name__)

Kind = Literal["counter", "histogram"]
MAX_LABEL_CHARS = 100
UNKNOWN_TOOL = "(unknown)"
# A batch open longer than this sends what it holds at its next recording: a run that works for
# many minutes shows on Prometheus as it goes (no timer thread: what was recorded before a long
# model answer or tool call waits for the recording that follows it), while a run of a few
# seconds (most) still costs one round trip.
BATCH_FLUSH_SECONDS = 10.0

Commands = Callable[[Any], object]  # adds one recording's commands to a pipeline


@dataclass(frozen=True)
class Spec:
    """One metric: Prometheus name (counters without ``_total``), help, label names, buckets."""

    name: str
    kind: Kind
    help: str
    labels: tuple[str, ...] = ()
    buckets: tuple[float, ...] = ()


RUNS_STARTED = Spec("chatops_runs_started", "counter", "Runs a worker started working on.")
RUNS_FINISHED = Spec("chatops_runs_finished", "counter", "Runs that ended, by final status.", ("status",))
RUN_ITERATIONS = Spec(
    "chatops_run_iterations",
    "histogram",
    "Model requests (iterations) per finished run.",
    (),
    (1, 2, 3, 5, 8, 13, 20, 30, 50),
)
LLM_TOKENS = Spec(
    "chatops_llm_tokens",
    "counter",
    "Tokens by model and kind (prompt, completion, cache_read, cache_write; prompt includes both caches).",
    ("model", "kind"),
)
LLM_DURATION = Spec(
    "chatops_llm_request_duration_seconds",
    "histogram",
    "Time a run waited for one model answer (retries included), by model and outcome.",
    ("model", "outcome"),
    (0.1, 0.25, 0.5, 1, 2, 4, 8, 15, 30, 60, 120),
)
LLM_RETRIES = Spec(
    "chatops_llm_retries", "counter", "Model requests retried after a transient failure.", ("model", "reason")
)
TOOL_CALLS = Spec(
    "chatops_tool_calls",
    "counter",
    "Tool calls by tool and outcome (ok, error, refused).",
    ("tool", "outcome"),
)
TOOL_DURATION = Spec(
    "chatops_tool_duration_seconds",
    "histogram",
    "Time tools took, by tool (calls that ran).",
    ("tool",),
    (0.05, 0.1, 0.25, 0.5, 1, 2.5, 5, 10, 30, 60, 300),
)
APPROVALS_REQUESTED = Spec(
    "chatops_approvals_requested", "counter", "Approvals asked for, by tool category.", ("category",)
)
APPROVALS_DECIDED = Spec(
    "chatops_approvals_decided",
    "counter",
    "Approvals a run acted on, by decision (approved, declined, expired, superseded).",
    ("decision",),
)
APPROVAL_WAIT = Spec(
    "chatops_approval_wait_seconds",
    "histogram",
    "Time from an approval request to its decision, by decision.",
    ("decision",),
    (5, 15, 30, 60, 120, 300, 600, 1800, 3600, 7200),
)
MESSAGES_INJECTED = Spec("chatops_messages_injected", "counter", "Thread replies injected into running runs.")
SLACK_ERRORS = Spec(
    "chatops_slack_api_errors",
    "counter",
    "Slack Web API calls that failed (after retries), by method and error.",
    ("method", "error"),
)
ANSWER_FEEDBACK = Spec(
    "chatops_answer_feedback",
    "counter",
    "Feedback buttons pressed under streamed answers, by value (positive, negative), once per person and run.",
    ("value",),
)
WEBHOOK_REPLAYS = Spec(
    "chatops_webhook_replays",
    "counter",
    "Alert webhook deliveries received again, by source and outcome (ignored: answered 200, no effect; "
    "refused: older than the replay window).",
    ("source", "outcome"),
)
RUNS_REFUSED = Spec(
    "chatops_runs_refused",
    "counter",
    "New runs refused before they started, by reason (monthly_tokens: the channel's monthly token cap).",
    ("reason",),
)
SPECS = (
    RUNS_STARTED,
    RUNS_REFUSED,
    RUNS_FINISHED,
    RUN_ITERATIONS,
    LLM_TOKENS,
    LLM_DURATION,
    LLM_RETRIES,
    TOOL_CALLS,
    TOOL_DURATION,
    APPROVALS_REQUESTED,
    APPROVALS_DECIDED,
    APPROVAL_WAIT,
    MESSAGES_INJECTED,
    SLACK_ERRORS,
    ANSWER_FEEDBACK,
    WEBHOOK_REPLAYS,
)


def metric_key(keys: Keys, spec: Spec) -> str:
    """The Redis hash of one metric (next to the rest of the deployment's keys)."""
    return keys.metrics(spec.name)


def _labels(spec: Spec, labels: dict[str, str]) -> str:
    if set(labels) != set(spec.labels):
        raise ValueError(f"{spec.name} takes labels {spec.labels}, got {tuple(labels)}")
    return json.dumps([str(labels[name])[:MAX_LABEL_CHARS] for name in spec.labels])


class MetricsStore:
    """Adds to the metric hashes. Every method swallows Redis failures (logged, rate-limited).

    Outside ``batched()`` every recording is its own ``MULTI``/``EXEC`` (one round trip); inside,
    recordings are held in memory and sent in one pipeline when the batch ends (and every
    ``flush_seconds`` while it is open). ``clock``: monotonic seconds (injected by the tests).
    """

    def __init__(
        self,
        redis_client: redis.Redis,
        keys: Keys,
        clock: Callable[[], float] = time.monotonic,
        flush_seconds: float = BATCH_FLUSH_SECONDS,
    ) -> None:
        self._redis = redis_client
        self._keys = keys
        self._clock = clock
        self._flush_seconds = flush_seconds
        self._last_failure = float("-inf")
        # The batch is the store's, not a thread's: a run job's tools may record from the loop's
        # threads, and the job's store is its own (the web's stores never open one).
        self._lock = threading.Lock()
        self._depth = 0  # open ``batched()`` blocks: only the outermost one flushes
        self._pending: list[Commands] = []
        self._flushed_at = 0.0

    def inc(self, spec: Spec, amount: float = 1.0, **labels: str) -> None:
        if spec.kind != "counter":
            raise ValueError(f"{spec.name} is a {spec.kind}")
        field = _labels(spec, labels)
        self._write(lambda pipe: pipe.hincrbyfloat(metric_key(self._keys, spec), field, amount))

    def observe(self, spec: Spec, value: float, **labels: str) -> None:
        if spec.kind != "histogram":
            raise ValueError(f"{spec.name} is a {spec.kind}")
        field = _labels(spec, labels)
        bucket = bisect.bisect_left(spec.buckets, value)  # first bound >= value, else +Inf
        key = metric_key(self._keys, spec)

        def write(pipe: Any) -> None:
            pipe.hincrby(key, f"{field}\t{bucket}", 1)
            pipe.hincrbyfloat(key, f"{field}\tsum", value)
            pipe.hincrby(key, f"{field}\tcount", 1)

        self._write(write)

    @contextmanager
    def batched(self) -> Iterator[None]:
        """Hold what is recorded until the block ends, however it ends, then send it in one pipeline.

        Nested blocks are part of the outermost one. What a batch holds is lost if the process dies
        before the block ends (a SIGKILLed work horse): acceptable for metrics, which are counted
        at most once this way. A batch is sent once and never again, even when Redis failed half
        way through it (the sent part counts; sending it again would count it twice).
        """
        with self._lock:
            self._depth += 1
            if self._depth == 1:
                self._flushed_at = self._clock()
        try:
            yield
        finally:
            with self._lock:
                self._depth -= 1
                outermost = self._depth == 0
            if outermost:
                self.flush()

    def flush(self) -> None:
        """Send what the batch holds (nothing held: no round trip)."""
        with self._lock:
            commands, self._pending = self._pending, []
            self._flushed_at = self._clock()
        if commands:  # HINCRBY/HINCRBYFLOAT are atomic each: no MULTI needed around the batch
            self._send(commands, transaction=False)

    def _write(self, commands: Commands) -> None:
        due = False
        with self._lock:
            batching = self._depth > 0
            if batching:
                self._pending.append(commands)
                due = self._clock() - self._flushed_at >= self._flush_seconds
        if not batching:
            self._send([commands], transaction=True)
        elif due:
            self.flush()

    def _send(self, commands: list[Commands], *, transaction: bool) -> None:
        try:
            pipe = self._redis.pipeline(transaction=transaction)
            for add in commands:
                add(pipe)
            pipe.execute()
        except redis.RedisError as error:
            now = time.monotonic()
            if now - self._last_failure > 60:
                log.warning("metrics not recorded (Redis failed): %s", error)
            self._last_failure = now

    def read(self) -> dict[Spec, dict[str, str]]:
        """Every metric hash (raises ``RedisError``: the collector reports Redis as down)."""
        pipe = self._redis.pipeline(transaction=False)
        for spec in SPECS:
            pipe.hgetall(metric_key(self._keys, spec))
        decoded: dict[Spec, dict[str, str]] = {}
        for spec, raw in zip(SPECS, pipe.execute(), strict=True):
            decoded[spec] = {_text(k): _text(v) for k, v in raw.items()}
        return decoded


def _text(value: bytes | str) -> str:
    return value.decode() if isinstance(value, bytes) else value


def error_kind(error: BaseException) -> str:
    """``RateLimitedError`` -> ``rate_limited``: a short, bounded label for an exception class."""
    name = re.sub(r"(?<!^)(?=[A-Z])", "_", type(error).__name__).lower()
    return name.removesuffix("_error") or name
