"""Limits: how many runs people may start, and how much one run may change.

* **Rate limits on new runs**, per user and per channel: at most N new runs in a sliding window
  (``CHATOPS_RATE_WINDOW_SECONDS``). A mention over a limit starts nothing and gets a polite
  reply in its thread saying when to try again. A mention that joins a thread's active run is
  not a new run and is never limited.
* **Concurrent runs per channel**: at most N runs of a channel not finished at once (a run
  waiting for an approval counts: it is not finished).
* **Mutating actions per run**: at most N mutating or destructive calls approved per run. The
  confirm gate (``bot.runs.approval_gate.ApprovalGate``) declines the next one before anyone is asked, and the
  model reads ``Error: declined: ...`` saying why.

Every limit is 0 for "no limit". The three admission checks and the recording of the new run are
one Lua script, so two mentions at the same moment cannot both take the last slot; a recorded
slot that does not become a run (the thread had a run already, storing failed) is given back.

Redis (keys from ``bot.keys.Keys.limits``): ``limits:user:{U}`` and ``limits:channel:{C}``
are sorted sets of admitted mentions scored by time (expiring with the window);
``limits:active:{C}`` holds the channel's runs (a ``pending:`` entry until the run exists),
pruned at each admission against the run service's set of active runs.
"""

from __future__ import annotations

import math
import time
from collections.abc import Callable, Sequence
from dataclasses import dataclass
from enum import StrEnum

import redis

from agent.redis_util import as_text
from bot.keys import Keys
from bot.runs.approvals import Approval, ApprovalStatus
from bot.settings import DEFAULTS, Settings

PENDING = "pending:"
PENDING_SECONDS = 60  # a reservation not turned into a run by then was abandoned (a crash)
ACTIVE_TTL_SECONDS = 7 * 24 * 3600  # refreshed at each admission; pruning keeps it small

# KEYS: 1 user window, 2 channel window, 3 channel active, 4 all active runs.
# ARGV: 1 now, 2 window, 3 user limit, 4 channel limit, 5 active cap, 6 token, 7 pending grace, 8 active ttl.
_ADMIT = """
local now, window = tonumber(ARGV[1]), tonumber(ARGV[2])
redis.call('ZREMRANGEBYSCORE', KEYS[1], '-inf', now - window)
redis.call('ZREMRANGEBYSCORE', KEYS[2], '-inf', now - window)
local entries = redis.call('ZRANGE', KEYS[3], 0, -1, 'WITHSCORES')
for i = 1, #entries, 2 do
  local member, score = entries[i], tonumber(entries[i + 1])
  if string.sub(member, 1, 8) == 'pending:' then
    if score < now - tonumber(ARGV[7]) then redis.call('ZREM', KEYS[3], member) end
  elseif not redis.call('ZSCORE', KEYS[4], member) then
    redis.call('ZREM', KEYS[3], member)
  end
end
local checks = {{KEYS[1], tonumber(ARGV[3]), 'user_rate'}, {KEYS[2], tonumber(ARGV[4]), 'channel_rate'}}
for _, check in ipairs(checks) do
  if check[2] > 0 and redis.call('ZCARD', check[1]) >= check[2] then
    local oldest = redis.call('ZRANGE', check[1], 0, 0, 'WITHSCORES')
    return {check[3], tostring(tonumber(oldest[2]) + window - now), tostring(check[2])}
  end
end
local cap = tonumber(ARGV[5])
if cap > 0 and redis.call('ZCARD', KEYS[3]) >= cap then return {'channel_busy', '0', tostring(cap)} end
redis.call('ZADD', KEYS[1], now, ARGV[6])
redis.call('ZADD', KEYS[2], now, ARGV[6])
redis.call('ZADD', KEYS[3], now, 'pending:' .. ARGV[6])
redis.call('EXPIRE', KEYS[1], math.ceil(window) + 1)
redis.call('EXPIRE', KEYS[2], math.ceil(window) + 1)
redis.call('EXPIRE', KEYS[3], ARGV[8])
return {'ok', '0', '0'}
"""


class Refusal(StrEnum):
    USER_RATE = "user_rate"
    CHANNEL_RATE = "channel_rate"
    CHANNEL_BUSY = "channel_busy"


@dataclass(frozen=True)
class LimitSettings:
    """The limits (0 = none), from ``Settings`` (``# Limits``), whose defaults are theirs."""

    window_seconds: int = DEFAULTS.chatops_rate_window_seconds
    user_runs: int = DEFAULTS.chatops_user_runs_per_window
    channel_runs: int = DEFAULTS.chatops_channel_runs_per_window
    channel_active_runs: int = DEFAULTS.chatops_channel_max_active_runs
    mutating_actions: int = DEFAULTS.chatops_max_mutating_actions

    @classmethod
    def from_settings(cls, settings: Settings) -> LimitSettings:
        return cls(
            window_seconds=settings.chatops_rate_window_seconds,
            user_runs=settings.chatops_user_runs_per_window,
            channel_runs=settings.chatops_channel_runs_per_window,
            channel_active_runs=settings.chatops_channel_max_active_runs,
            mutating_actions=settings.chatops_max_mutating_actions,
        )


@dataclass(frozen=True)
class Admission:
    """May this mention start a run? When not, which limit and for how long."""

    refusal: Refusal | None = None
    limit: int = 0
    retry_after: float = 0.0

    @property
    def allowed(self) -> bool:
        return self.refusal is None

    def message(self, user: str, window_seconds: int) -> str:
        """The polite reply in the mention's thread."""
        window = _duration(window_seconds)
        again = f"Please try again in {_duration(self.retry_after)}."
        if self.refusal is Refusal.USER_RATE:
            return (
                f"Sorry <@{user}>, you have started {self.limit} runs in the last {window}, "
                f"the most one person may. {again}"
            )
        if self.refusal is Refusal.CHANNEL_RATE:
            return (
                f"Sorry <@{user}>, {self.limit} runs were started in this channel in the last {window}, "
                f"the most it allows. {again}"
            )
        return (
            f"Sorry <@{user}>, this channel already has {self.limit} runs in progress, the most it "
            "allows at once. Please try again when one has finished (or stop one)."
        )


ADMITTED = Admission()


class RunLimits:
    """Admission of new runs against the rate limits and the channel's cap (see the module docstring)."""

    def __init__(
        self,
        redis_client: Callable[[], redis.Redis],
        keys: Keys,
        limits: LimitSettings,
        *,
        clock: Callable[[], float] = time.time,
    ) -> None:
        self._redis = redis_client
        self._keys = keys
        self.limits = limits
        self._clock = clock

    @property
    def enabled(self) -> bool:
        limits = self.limits
        return bool(limits.user_runs or limits.channel_runs or limits.channel_active_runs)

    def admit(self, channel: str, user: str, token: str) -> Admission:
        """Check every limit and, if all pass, hold a slot for the run ``token`` (the message ts)
        will start; ``bind`` it to the run, or ``cancel`` it when no run is started."""
        if not self.enabled:
            return ADMITTED
        client, keys, limits = self._redis(), self._keys, self.limits
        reply = client.register_script(_ADMIT)(
            keys=[
                keys.limits("user", user),
                keys.limits("channel", channel),
                keys.limits("active", channel),
                keys.active_runs(),
            ],
            args=[
                repr(self._clock()),
                limits.window_seconds,
                limits.user_runs,
                limits.channel_runs,
                limits.channel_active_runs,
                token,
                PENDING_SECONDS,
                ACTIVE_TTL_SECONDS,
            ],
        )
        outcome, retry_after, limit = (as_text(part) or "" for part in reply)
        if outcome == "ok":
            return ADMITTED
        return Admission(Refusal(outcome), int(float(limit)), max(0.0, float(retry_after)))

    def bind(
        self, channel: str, token: str, run_id: str, *, pipeline: redis.client.Pipeline | None = None
    ) -> None:
        """The held slot is the run ``run_id`` now (it stays counted until the run finishes).

        With ``pipeline`` (a transaction) the caller executes it, with its own writes.
        """
        if not self.enabled:
            return
        key = self._keys.limits("active", channel)
        pipe = pipeline if pipeline is not None else self._redis().pipeline()
        pipe.zrem(key, PENDING + token)
        pipe.zadd(key, {run_id: self._clock()})
        if pipeline is None:
            pipe.execute()

    def cancel(self, channel: str, user: str, token: str) -> None:
        """Give back a slot no run was started with."""
        if not self.enabled:
            return
        keys = self._keys
        pipe = self._redis().pipeline()
        pipe.zrem(keys.limits("user", user), token)
        pipe.zrem(keys.limits("channel", channel), token)
        pipe.zrem(keys.limits("active", channel), PENDING + token)
        pipe.execute()


def mutating_cap_reason(approvals: Sequence[Approval], cap: int) -> str | None:
    """Why the run may not ask for another mutating action (``None``: it may), for the model."""
    if cap <= 0:
        return None
    approved = sum(1 for approval in approvals if approval.status is ApprovalStatus.APPROVED)
    if approved < cap:
        return None
    return (
        f"this run has already had {approved} mutating actions approved, the most one run may "
        f"(CHATOPS_MAX_MUTATING_ACTIONS={cap}); it was not run and nobody was asked. Tell the user "
        "what is left to do: a new request starts a new run"
    )


def _duration(seconds: float) -> str:
    whole = max(1, math.ceil(seconds))
    if whole < 120:
        return f"{whole} s"
    return f"{math.ceil(whole / 60)} min"


__all__ = ["ADMITTED", "Admission", "LimitSettings", "Refusal", "RunLimits", "mutating_cap_reason"]
