"""What a process records, in the words of a run: ``RunMetrics`` over a ``MetricsStore``
(``bot.observability.metrics``: the metric hashes), the model wrapper that times answers and counts
tokens, and the lazily connected metrics of processes that have no runtime (the Slack client)."""

from __future__ import annotations

import threading
import time
from collections.abc import Callable, Iterator
from contextlib import AbstractContextManager, nullcontext

import redis

from agent.chat import ChatModel, DonePart, StreamPart
from agent.errors import LLMError
from agent.events import ToolEnd
from agent.models.openai_client import RetryNotice
from agent.types import Request, Response, RunResult, Usage
from bot.keys import Keys
from bot.observability.metrics import (
    ANSWER_FEEDBACK,
    APPROVAL_WAIT,
    APPROVALS_DECIDED,
    APPROVALS_REQUESTED,
    LLM_DURATION,
    LLM_RETRIES,
    LLM_TOKENS,
    MESSAGES_INJECTED,
    RUN_ITERATIONS,
    RUNS_FINISHED,
    RUNS_REFUSED,
    RUNS_STARTED,
    SLACK_ERRORS,
    TOOL_CALLS,
    TOOL_DURATION,
    UNKNOWN_TOOL,
    WEBHOOK_REPLAYS,
    MetricsStore,
    error_kind,
)
from bot.redis_connection import RedisTarget, open_redis
from tools.fork_local import ForkLocal


class RunMetrics:
    """What the worker records, in the words of the run. ``RunMetrics(None)`` records nothing."""

    def __init__(self, store: MetricsStore | None, clock: Callable[[], float] = time.time) -> None:
        self.store = store
        self._clock = clock

    @classmethod
    def for_redis(cls, redis_client: redis.Redis, keys: Keys, *, enabled: bool = True) -> RunMetrics:
        return cls(MetricsStore(redis_client, keys) if enabled else None)

    def batched(self) -> AbstractContextManager[None]:
        """``MetricsStore.batched``: a run job's recordings in one round trip (none: records nothing)."""
        return self.store.batched() if self.store else nullcontext()

    def run_started(self) -> None:
        if self.store:
            self.store.inc(RUNS_STARTED)

    def run_refused(self, reason: str) -> None:
        if self.store:
            self.store.inc(RUNS_REFUSED, reason=reason)

    def run_finished(self, result: RunResult) -> None:
        if self.store:
            self.store.inc(RUNS_FINISHED, status=result.status.value)
            self.store.observe(RUN_ITERATIONS, result.iterations)

    def tool_finished(self, event: ToolEnd) -> None:
        if not self.store:
            return
        tool = event.call.name if event.category is not None else UNKNOWN_TOOL
        outcome = "refused" if not event.executed else ("error" if event.is_error else "ok")
        self.store.inc(TOOL_CALLS, tool=tool, outcome=outcome)
        if event.executed:
            self.store.observe(TOOL_DURATION, event.duration_seconds, tool=tool)

    def injected(self, count: int) -> None:
        if self.store and count:
            self.store.inc(MESSAGES_INJECTED, count)

    def approval_requested(self, category: str) -> None:
        if self.store:
            self.store.inc(APPROVALS_REQUESTED, category=category)

    def approval_decided(self, decision: str, requested_at: float, decided_at: float | None) -> None:
        if not self.store:
            return
        self.store.inc(APPROVALS_DECIDED, decision=decision)
        waited = (decided_at if decided_at is not None else self._clock()) - requested_at
        self.store.observe(APPROVAL_WAIT, max(0.0, waited), decision=decision)

    def llm_request(self, model: str, seconds: float, outcome: str, usage: Usage | None) -> None:
        if not self.store:
            return
        self.store.observe(LLM_DURATION, seconds, model=model, outcome=outcome)
        if usage is not None:
            for kind, count in (
                ("prompt", usage.prompt_tokens),
                ("completion", usage.completion_tokens),
                ("cache_read", usage.cache_read_tokens),
                ("cache_write", usage.cache_write_tokens),
            ):
                if count:
                    self.store.inc(LLM_TOKENS, count, model=model, kind=kind)

    def llm_retry(self, notice: RetryNotice) -> None:
        """``LLMClient(on_retry=...)``."""
        if self.store:
            self.store.inc(LLM_RETRIES, model=notice.model, reason=error_kind(notice.error))

    def answer_feedback(self, value: str) -> None:
        """A person's feedback on an answer (``positive`` or ``negative``: the caller checked it)."""
        if self.store:
            self.store.inc(ANSWER_FEEDBACK, value=value)

    def webhook_replay(self, source: str, outcome: str) -> None:
        """An alert webhook delivered again: ``ignored`` (a replay) or ``refused`` (too old)."""
        if self.store:
            self.store.inc(WEBHOOK_REPLAYS, source=source, outcome=outcome)

    def slack_error(self, method: str, error: str) -> None:
        if self.store:
            self.store.inc(SLACK_ERRORS, method=method, error=error)


class MeteredModel:
    """A ``ChatModel`` that times each answer and counts its tokens (the worker wraps every model)."""

    def __init__(
        self, inner: ChatModel, metrics: RunMetrics, clock: Callable[[], float] = time.monotonic
    ) -> None:
        self.inner = inner
        self._metrics = metrics
        self._clock = clock

    @property
    def model(self) -> str:
        return self.inner.model

    def complete(self, request: Request) -> Response:
        started = self._clock()
        try:
            response = self.inner.complete(request)
        except Exception as error:
            self._metrics.llm_request(self.model, self._clock() - started, _outcome(error), None)
            raise
        self._metrics.llm_request(self.model, self._clock() - started, "ok", response.usage)
        return response

    def stream(self, request: Request) -> Iterator[StreamPart]:
        started = self._clock()
        parts = self.inner.stream(request)
        try:
            for part in parts:
                if isinstance(part, DonePart):
                    usage = part.response.usage
                    self._metrics.llm_request(self.model, self._clock() - started, "ok", usage)
                yield part
        except GeneratorExit:
            raise  # the caller stopped reading (a degenerate stream): not the model's failure
        except Exception as error:
            self._metrics.llm_request(self.model, self._clock() - started, _outcome(error), None)
            raise
        finally:
            close = getattr(parts, "close", None)
            if close is not None:
                close()


def _outcome(error: BaseException) -> str:
    return error_kind(error) if isinstance(error, LLMError) else "exception"


# -- metrics from processes that have no runtime (the Slack client) -------------------------------------


class LazyMetrics:
    """A ``RunMetrics`` whose Redis connection is opened on first use, again after a fork."""

    def __init__(self, target: RedisTarget, keys: Keys) -> None:
        self._metrics = ForkLocal(lambda: RunMetrics.for_redis(open_redis(target), keys))

    def get(self) -> RunMetrics:
        return self._metrics.get()


_lazy: dict[tuple[RedisTarget, str], LazyMetrics] = {}
_lazy_lock = threading.Lock()


def shared_metrics(target: RedisTarget, keys: Keys) -> LazyMetrics:
    """One ``LazyMetrics`` per Redis (URL, or sentinels and master) and prefix in this process."""
    with _lazy_lock:
        return _lazy.setdefault((target, keys.prefix), LazyMetrics(target, keys))


def slack_error_counter(
    target: RedisTarget, keys: Keys, enabled: bool = True
) -> Callable[[str, str], None] | None:
    """The ``on_error`` of the bot's Slack clients (``bot.slack.delivery.client.make_client``)."""
    if not enabled:
        return None
    lazy = shared_metrics(target, keys)

    def count(method: str, error: str) -> None:
        lazy.get().slack_error(method, error)

    return count
