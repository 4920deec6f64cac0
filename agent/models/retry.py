"""When and how long a model client waits before sending a failed request again.

* Retryable: connection errors and timeouts, and the statuses in ``RETRYABLE_STATUSES`` (429,
  the usual 5xx, Cloudflare's 520-524, Anthropic's 529 "overloaded", 408/409/425).
* The wait is the provider's hint when it sent one (``retry_after_hint``: ``retry-after-ms``,
  ``Retry-After`` as seconds or an HTTP date, ``x-ratelimit-reset-*`` and Anthropic's
  ``anthropic-ratelimit-*-reset``, also under LiteLLM's ``llm_provider-`` prefix), else
  exponential backoff with full jitter.
* A hint longer than ``max_wait`` is not waited out: the model is given up on at once, so the
  run's next model (another provider) takes over instead of a retry that would fail again.
* Every attempt and wait of one request fits in ``budget_seconds`` and in the run's time left.
"""

from __future__ import annotations

import random
import re
import time
from collections.abc import Callable, Mapping
from dataclasses import dataclass
from datetime import datetime
from email.utils import parsedate_to_datetime

from agent.defaults import (
    BACKOFF_BASE_SECONDS,
    BACKOFF_MAX_SECONDS,
    MAX_ATTEMPTS,
    RETRY_BUDGET_SECONDS,
    RETRY_MAX_WAIT_SECONDS,
)
from agent.errors import ConfigurationError, TransientLLMError

RETRYABLE_STATUSES = frozenset({408, 409, 425, 429, 500, 501, 502, 503, 504, 520, 521, 522, 523, 524, 529})
"""HTTP statuses worth sending the same request again for."""

# What a gateway in between may prefix the provider's own headers with (LiteLLM's proxy).
_HEADER_PREFIXES = ("", "llm_provider-")
_DURATION_PART = re.compile(r"(\d+(?:\.\d+)?)(ms|h|m|s)")
_EPOCH_THRESHOLD = 1_000_000_000.0  # a bare number this large is a Unix time, not a duration


@dataclass(frozen=True)
class RetryPolicy:
    """``max_attempts`` counts every attempt, the first included. ``backoff_base`` doubles per
    attempt up to ``backoff_max`` (the jitter's ceiling); ``max_wait`` is the longest server hint
    honoured; ``budget_seconds`` bounds one request's attempts and waits together."""

    max_attempts: int = MAX_ATTEMPTS
    backoff_base: float = BACKOFF_BASE_SECONDS
    backoff_max: float = BACKOFF_MAX_SECONDS
    max_wait: float = RETRY_MAX_WAIT_SECONDS
    budget_seconds: float = RETRY_BUDGET_SECONDS

    def __post_init__(self) -> None:
        if self.max_attempts < 1:
            raise ConfigurationError(f"max_attempts must be at least 1, got {self.max_attempts}")
        if min(self.backoff_base, self.backoff_max, self.max_wait, self.budget_seconds) < 0:
            raise ConfigurationError("retry waits and budgets cannot be negative")

    def jitter(self, attempt: int, rng: random.Random) -> float:
        """Full jitter: uniform between 0 and the doubled base of attempt ``attempt`` (1-based)."""
        ceiling = min(self.backoff_max, self.backoff_base * 2 ** (attempt - 1))
        return rng.uniform(0.0, ceiling)


class RetryBudget:
    """The retries of one request: started when it is first sent, against the run's time left."""

    def __init__(
        self,
        policy: RetryPolicy,
        *,
        rng: random.Random,
        monotonic: Callable[[], float] = time.monotonic,
        time_left: float | None = None,
    ) -> None:
        self._policy = policy
        self._rng = rng
        self._now = monotonic
        self._started = self._now()
        allowed = policy.budget_seconds if time_left is None else min(policy.budget_seconds, time_left)
        self._ends_at = self._started + max(0.0, allowed)

    def remaining(self) -> float:
        """Seconds this request may still spend (never negative)."""
        return max(0.0, self._ends_at - self._now())

    def next_wait(self, attempt: int, failure: TransientLLMError) -> tuple[float | None, str]:
        """The wait before attempt ``attempt + 1``, or ``None`` and why there is none."""
        if attempt >= self._policy.max_attempts:
            return None, f"all {attempt} attempts failed"
        hint = failure.retry_after
        if hint is not None and hint > self._policy.max_wait:
            return (
                None,
                f"the provider asks to wait {hint:g}s, more than the {self._policy.max_wait:g}s ceiling",
            )
        delay = hint if hint is not None else self._policy.jitter(attempt, self._rng)
        if delay >= self.remaining():
            return None, f"waiting {delay:.1f}s more would pass the request's time budget"
        return delay, ""


def retry_after_hint(headers: Mapping[str, str], *, now: float | None = None) -> float | None:
    """The provider's wait hint in seconds, or None. ``now`` is the wall clock for dates."""
    lowered = {name.lower(): value for name, value in headers.items()}
    wall = time.time() if now is None else now
    for prefix in _HEADER_PREFIXES:
        if (millis := _as_float(lowered.get(prefix + "retry-after-ms"))) is not None:
            return max(0.0, millis / 1000)
        value = lowered.get(prefix + "retry-after")
        if value is not None and (seconds := _seconds_or_date(value, wall)) is not None:
            return seconds
    return _reset_hint(lowered, wall)


def _reset_hint(lowered: Mapping[str, str], wall: float) -> float | None:
    """From the rate-limit reset headers: the latest reset of an exhausted limit, else the soonest."""
    exhausted: list[float] = []
    others: list[float] = []
    for name, value in lowered.items():
        bare = name.removeprefix("llm_provider-")
        remaining_name = _remaining_header(bare)
        if remaining_name is None:
            continue
        seconds = _reset_seconds(value, wall)
        if seconds is None:
            continue
        prefix = name[: len(name) - len(bare)]
        remaining = lowered.get(prefix + remaining_name)
        (exhausted if remaining is not None and remaining.strip() in ("0", "0.0") else others).append(seconds)
    if exhausted:
        return max(exhausted)
    return min(others) if others else None


def _remaining_header(name: str) -> str | None:
    """The ``remaining`` header that goes with a reset header, or None if ``name`` is not one."""
    if name.startswith("x-ratelimit-reset"):  # OpenAI, Groq, LiteLLM: x-ratelimit-reset-requests
        return "x-ratelimit-remaining" + name.removeprefix("x-ratelimit-reset")
    if name.startswith("anthropic-ratelimit-") and name.endswith("-reset"):
        return name.removesuffix("-reset") + "-remaining"
    return None


def _reset_seconds(value: str, wall: float) -> float | None:
    """A reset value: a duration ("1m30.5s", "20ms", "6"), a Unix time, or an RFC 3339 timestamp."""
    text = value.strip()
    if (number := _as_float(text)) is not None:
        return max(0.0, number - wall) if number >= _EPOCH_THRESHOLD else max(0.0, number)
    parts = _DURATION_PART.findall(text)
    if parts and "".join(f"{amount}{unit}" for amount, unit in parts) == text:
        scale = {"ms": 0.001, "s": 1.0, "m": 60.0, "h": 3600.0}
        return sum(float(amount) * scale[unit] for amount, unit in parts)
    try:
        moment = datetime.fromisoformat(text.replace("Z", "+00:00"))
    except ValueError:
        return None
    if moment.tzinfo is None:
        return None
    return max(0.0, moment.timestamp() - wall)


def _seconds_or_date(value: str, wall: float) -> float | None:
    if (seconds := _as_float(value)) is not None:
        return max(0.0, seconds)
    try:
        moment = parsedate_to_datetime(value)
    except (TypeError, ValueError):
        return None
    return max(0.0, moment.timestamp() - wall)


def _as_float(value: str | None) -> float | None:
    if value is None:
        return None
    try:
        number = float(value)
    except ValueError:
        return None
    return number if number == number and number not in (float("inf"), float("-inf")) else None
