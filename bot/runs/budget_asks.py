"""A run's budget card: asked when the run reached its token budget, decided once, by a click.

One hash per run (``run:{id}:budget``), the only code that knows its fields. The worker's budget
gate (``bot.runs.budget_gate``) *asks* when the run's paid tokens passed its budget: the record is
stored ``pending`` for that budget (a round: the budget the run passed) with a fresh id, replacing
the previous round's; its card is then posted and recorded (``set_card``). The web process
*decides* it from a click (``bot.slack.handlers.budget_clicks``) in one Lua script: the click must
come from the record's own card (channel and message ts) and name the record's id, and the record
must be ``pending``: the first click wins, a second, a replay or a click on an older round's card
decides nothing. Time is Redis's.

What a decision is worth is the worker's to judge: the extension is computed from its own
settings (the original budget, added to the budget the run passed), never read from the record;
and with ``CHATOPS_RUNNER_SECRET`` the web process tags each decision (an HMAC over the run, the
record, the round, the decision and who made it, with a key of its own derived from the secret),
so a decision written into Redis by anyone else, or a round or decision changed after the click,
is no decision (``authentic``): the run stays waiting.
"""

from __future__ import annotations

import hashlib
import hmac
import uuid
from dataclasses import dataclass
from enum import StrEnum

import redis

from agent.redis_util import NOW_LUA, as_text, as_text_dict
from bot.keys import Keys

_PURPOSE = b"chatops budget decision v1"  # a key of its own: never an approval seal or a grant


class BudgetStatus(StrEnum):
    PENDING = "pending"
    EXTENDED = "extended"
    STOPPED = "stopped"


class DecideOutcome(StrEnum):
    WON = "won"
    LOST = "lost"  # decided before (``BudgetAsk`` says by whom)
    MISMATCH = "mismatch"  # not this record's card, or another round's id: nothing decided
    MISSING = "missing"


@dataclass(frozen=True)
class BudgetAsk:
    """One round of a run's budget card, field for field as stored."""

    id: str
    run_id: str
    budget: int  # the budget the run passed
    base: int  # what Extend adds (the original budget), as asked
    spent: int  # the paid tokens when asked
    cost: str  # what they cost (``$0.42``), "" without a price
    channel: str
    status: BudgetStatus
    card_ts: str = ""
    decided_by: str = ""
    decided_at: float | None = None
    tag: str = ""  # the web process's HMAC of the decision ("" without CHATOPS_RUNNER_SECRET)

    @classmethod
    def from_hash(cls, raw: dict[str, str]) -> BudgetAsk | None:
        try:
            return cls(
                id=raw["id"],
                run_id=raw["run_id"],
                budget=int(raw["budget"]),
                base=int(raw["base"]),
                spent=int(raw["spent"]),
                cost=raw.get("cost", ""),
                channel=raw.get("channel", ""),
                status=BudgetStatus(raw["status"]),
                card_ts=raw.get("card_ts", ""),
                decided_by=raw.get("decided_by", ""),
                decided_at=float(raw["decided_at"]) if raw.get("decided_at") else None,
                tag=raw.get("tag", ""),
            )
        except (KeyError, ValueError):
            return None  # not a record this module wrote: nothing to decide on


@dataclass(frozen=True)
class BudgetSeal:
    """Tags a decision (the web process) and checks it (the worker); from ``CHATOPS_RUNNER_SECRET``."""

    key: bytes

    @classmethod
    def from_secret(cls, secret: str) -> BudgetSeal | None:
        if not secret:
            return None
        return cls(hmac.new(secret.encode(), _PURPOSE, hashlib.sha256).digest())

    def tag(self, run_id: str, ask_id: str, budget: int, status: BudgetStatus, by: str) -> str:
        text = f"{run_id}|{ask_id}|{budget}|{status.value}|{by}"
        return hmac.new(self.key, text.encode(), hashlib.sha256).hexdigest()


# KEYS: 1 record. ARGV: 1 id, 2 run, 3 budget, 4 base, 5 spent, 6 cost, 7 channel, 8 ttl.
# The round's record: the one stored for this budget, or a new pending one replacing an older round.
_ASK = """
local current = redis.call('HMGET', KEYS[1], 'budget', 'id')
if current[1] == ARGV[3] and current[2] then return current[2] end
redis.call('DEL', KEYS[1])
redis.call('HSET', KEYS[1], 'id', ARGV[1], 'run_id', ARGV[2], 'budget', ARGV[3], 'base', ARGV[4],
  'spent', ARGV[5], 'cost', ARGV[6], 'channel', ARGV[7], 'status', 'pending')
redis.call('EXPIRE', KEYS[1], ARGV[8])
return ARGV[1]
"""
# KEYS: 1 record. ARGV: 1 id, 2 card ts. Only the round that posted it records its card.
_SET_CARD = """
if redis.call('HGET', KEYS[1], 'id') ~= ARGV[1] then return 0 end
redis.call('HSET', KEYS[1], 'card_ts', ARGV[2])
return 1
"""
# KEYS: 1 record. ARGV: 1 id, 2 card channel, 3 card ts ('' = not a click: the run's Stop),
# 4 status, 5 by, 6 tag. Returns {outcome}.
_DECIDE = (
    NOW_LUA
    + """
local r = redis.call('HMGET', KEYS[1], 'id', 'status', 'channel', 'card_ts')
if not r[1] then return {'missing'} end
if r[1] ~= ARGV[1] then return {'mismatch'} end
if ARGV[3] ~= '' and (r[3] ~= ARGV[2] or r[4] ~= ARGV[3]) then return {'mismatch'} end
if r[2] ~= 'pending' then return {'lost'} end
redis.call('HSET', KEYS[1], 'status', ARGV[4], 'decided_by', ARGV[5],
  'decided_at', string.format('%.6f', now()), 'tag', ARGV[6])
return {'won'}
"""
)


@dataclass
class BudgetAsks:
    """The budget cards of runs: ask (worker), set the card (worker), decide (web), read."""

    redis: redis.Redis
    keys: Keys
    seal: BudgetSeal | None = None
    retention_seconds: int = 7 * 24 * 3600

    def get(self, run_id: str) -> BudgetAsk | None:
        raw = as_text_dict(self.redis.hgetall(self.keys.budget_ask(run_id)))
        return BudgetAsk.from_hash(raw) if raw else None

    def ask(self, run_id: str, *, budget: int, base: int, spent: int, cost: str, channel: str) -> BudgetAsk:
        """The pending record for ``budget`` (created now, or the one already there)."""
        args: list[str | int] = [
            uuid.uuid4().hex,
            run_id,
            budget,
            base,
            spent,
            cost,
            channel,
            self.retention_seconds,
        ]
        self.redis.eval(_ASK, 1, self.keys.budget_ask(run_id), *args)
        ask = self.get(run_id)
        if ask is None:
            raise redis.RedisError(f"run {run_id}: the budget card's record vanished as it was stored")
        return ask

    def set_card(self, run_id: str, ask_id: str, card_ts: str) -> bool:
        return bool(self.redis.eval(_SET_CARD, 1, self.keys.budget_ask(run_id), ask_id, card_ts))

    def decide(
        self, ask: BudgetAsk, status: BudgetStatus, by: str, card: tuple[str, str] | None = None
    ) -> DecideOutcome:
        """Settle ``ask`` (as read) as ``status`` by ``by``; ``card``: the (channel, ts) clicked."""
        tag = self.seal.tag(ask.run_id, ask.id, ask.budget, status, by) if self.seal is not None else ""
        channel, ts = card if card is not None else ("", "")
        reply = self.redis.eval(
            _DECIDE, 1, self.keys.budget_ask(ask.run_id), ask.id, channel, ts, status.value, by, tag
        )
        return DecideOutcome(as_text(reply[0]) or "missing")

    def authentic(self, ask: BudgetAsk, budget: int) -> bool:
        """Whether ``ask`` is a decision the web process made for the round at ``budget`` (the
        worker's own): without the secret, any decision of that round is."""
        if ask.budget != budget or ask.status is BudgetStatus.PENDING:
            return False
        if self.seal is None:
            return True
        expected = self.seal.tag(ask.run_id, ask.id, budget, ask.status, ask.decided_by)
        return hmac.compare_digest(ask.tag, expected)
