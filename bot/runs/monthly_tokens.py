"""Per-channel monthly token caps (``CHATOPS_CHANNEL_MONTHLY_TOKENS``), counted in Redis.

A channel's paid tokens in one calendar month (UTC, by Redis's clock: every host counts into the
same month) are one counter, ``tokens:month:{channel}:{YYYYMM}``, which expires a day after the
month ends. The worker counts a run's tokens at the end of each segment (``count``): one script
adds what the run spent since it was last counted (``run:{id}:month_counted`` holds how much that
was), so a job retried after a crash never counts the same tokens twice. The web process asks
``over_cap`` before it starts a new run: past the cap the mention is refused with a note in the
thread (``refusal``) and ``chatops_runs_refused{reason="monthly_tokens"}``. A run in progress is
never cut short by the cap: it finishes its current segment; a budget extension past the cap is
refused at the click (``bot.slack.handlers.budget_clicks``).
"""

from __future__ import annotations

import calendar
from collections.abc import Callable
from dataclasses import dataclass, field
from datetime import UTC, datetime

import redis

from agent.redis_util import redis_clock
from bot.keys import Keys

EXPIRY_AFTER_MONTH_SECONDS = 24 * 3600  # a counter outlives its month by a day (a run ending at midnight)
OVER_CAP = (
    ":no_entry: This channel has used its token budget for {month} ({used:,} of {cap:,} tokens), so I "
    "am not starting a new investigation. The budget starts again on 1 {next_month} (UTC); an operator "
    "can raise CHATOPS_CHANNEL_MONTHLY_TOKENS."
)

# KEYS: 1 the run's counted tokens, 2 the channel's month. ARGV: 1 the run's paid tokens now,
# 2 the month's expiry (unix seconds), 3 the counted key's ttl. Returns the month's total.
_COUNT = """
local before = tonumber(redis.call('GET', KEYS[1]) or '0') or 0
local delta = tonumber(ARGV[1]) - before
if delta > 0 then
  redis.call('INCRBY', KEYS[2], delta)
  redis.call('EXPIREAT', KEYS[2], ARGV[2])
  redis.call('SET', KEYS[1], ARGV[1], 'EX', ARGV[3])
end
return tonumber(redis.call('GET', KEYS[2]) or '0')
"""


@dataclass(frozen=True)
class Month:
    """One UTC calendar month: its key part (``202612``), its name and when it ends."""

    year: int
    month: int

    @classmethod
    def at(cls, seconds: float) -> Month:
        when = datetime.fromtimestamp(seconds, UTC)
        return cls(when.year, when.month)

    @property
    def key(self) -> str:
        return f"{self.year:04d}{self.month:02d}"

    @property
    def name(self) -> str:
        return f"{calendar.month_name[self.month]} {self.year}"

    @property
    def next(self) -> Month:
        return Month(self.year + self.month // 12, self.month % 12 + 1)

    @property
    def ends_at(self) -> int:
        following = self.next
        return calendar.timegm((following.year, following.month, 1, 0, 0, 0))


@dataclass(frozen=True)
class Usage:
    """A channel's month: tokens counted so far, against its cap."""

    month: Month
    used: int
    cap: int

    @property
    def over(self) -> bool:
        return self.used >= self.cap

    def refusal(self) -> str:
        return OVER_CAP.format(
            month=self.month.name, used=self.used, cap=self.cap, next_month=self.month.next.name
        )


@dataclass
class MonthlyTokens:
    """Counts runs' paid tokens per channel and month; ``cap`` ``None``: counted, never refused."""

    redis: redis.Redis
    keys: Keys
    cap: int | None = None
    retention_seconds: int = 7 * 24 * 3600
    clock: Callable[[], float] | None = None  # Redis's by default (one month for every host)
    _clock: Callable[[], float] = field(init=False)

    def __post_init__(self) -> None:
        self._clock = self.clock or redis_clock(self.redis)

    def count(self, run_id: str, channel: str, paid_tokens: int) -> int:
        """Add what ``run_id`` spent since last counted to its channel's month; the month's total."""
        month = Month.at(self._clock())
        keys = (self.keys.month_counted(run_id), self.keys.month_tokens(channel, month.key))
        expiry = month.ends_at + EXPIRY_AFTER_MONTH_SECONDS
        return int(self.redis.eval(_COUNT, 2, *keys, paid_tokens, expiry, self.retention_seconds))

    def usage(self, channel: str) -> Usage | None:
        """The channel's month against its cap; ``None`` without a cap."""
        if self.cap is None:
            return None
        month = Month.at(self._clock())
        used = self.redis.get(self.keys.month_tokens(channel, month.key))
        return Usage(month, int(used or 0), self.cap)

    def over_cap(self, channel: str) -> Usage | None:
        """The channel's month when it is at or past its cap (new runs are refused), else ``None``."""
        usage = self.usage(channel)
        return usage if usage is not None and usage.over else None
