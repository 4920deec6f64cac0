"""Undo offers: the undo of one executed change, as derived when it ran, claimable once within its window.

An approved change whose tool declares an undo (``agent.verification``) leaves, once it ran, one
offer: the undo call exactly as it will be proposed (its arguments from the action's, its
``{before.X}`` filled from what the before-read printed just before the action: ``filled_undo``),
the action's run, call and approval ids, its channel and thread, its target, and the window's end
(``CHATOPS_UNDO_MINUTES`` after it ran, by Redis's clock). The offer is the only source of the
undo's call: nothing the model says later derives it again.

* **Sealed** (with ``CHATOPS_RUNNER_SECRET``, a key of its own): every fact written at creation. A
  Redis writer who changes the stored call, target, thread or window breaks the seal; the click
  then claims nothing (``TAMPERED``). The record is read again after the claim and checked again.
* **Claimed once, atomically** (``_CLAIM``, Redis's ``TIME``): a click counts only from the offer's
  own message (``set_message``) in its channel; the first claim within the window wins, every
  later one is told who claimed it (``taken``); a claim after the window is ``expired``.
* ``judge`` tells what a claim would answer, claiming nothing (the click asks it before it checks
  the thread); ``release`` gives back a claim whose run could not start.
* **Who may** claim (request the undo in that channel) is the caller's ruling, not this module's.

One record per offer, ``{p}undo:{id}``, owned here; it expires a day after its window.
"""

from __future__ import annotations

import hashlib
import hmac
import json
import uuid
from dataclasses import dataclass
from enum import StrEnum

import redis
from pydantic import BaseModel

from agent.redis_util import NOW_LUA, as_text, hset_if_exists, redis_now
from bot.keys import Keys

_PURPOSE = b"chatops undo offer seal v1"  # never a valid approval seal or grant, nor the reverse
KEEP_AFTER_WINDOW_SECONDS = 86400  # the record outlives its window: a late click is told why
TAMPERED = "this undo was changed after it was offered, so it cannot be asked for"
SEALED_FIELDS = frozenset(
    {
        "id",
        "run_id",
        "action_call_id",
        "approval_id",
        "channel",
        "thread_ts",
        "action_tool",
        "tool",
        "args_json",
        "target",
        "created_at",
        "expires_at",
    }
)

# KEYS: 1 the offer. ARGV: 1 click channel, 2 click message ts, 3 who.
# Returns {outcome, claimed_by}: claimed, taken, expired, mismatch, missing.
_CLAIM = (
    NOW_LUA
    + """
local o = redis.call('HMGET', KEYS[1], 'message_channel', 'message_ts', 'claimed_by', 'expires_at')
if not o[4] then return {'missing', ''} end
if o[2] == '' or o[1] ~= ARGV[1] or o[2] ~= ARGV[2] then return {'mismatch', ''} end
if o[3] and o[3] ~= '' then return {'taken', o[3]} end
if now() >= tonumber(o[4]) then return {'expired', ''} end
redis.call('HSET', KEYS[1], 'claimed_by', ARGV[3], 'claimed_at', string.format('%.6f', now()))
return {'claimed', ARGV[3]}
"""
)

# KEYS: 1 the offer. ARGV: 1 who claimed it. A claim whose run could not start is given back.
_RELEASE = """
if redis.call('HGET', KEYS[1], 'claimed_by') ~= ARGV[1] then return 0 end
redis.call('HSET', KEYS[1], 'claimed_by', '', 'claimed_at', '')
return 1
"""


class ClaimOutcome(StrEnum):
    CLAIMED = "claimed"  # this click may ask for the undo
    TAKEN = "taken"  # claimed before (a second click): nothing happens
    EXPIRED = "expired"  # after the window
    MISMATCH = "mismatch"  # a click from another message or channel than the offer's
    MISSING = "missing"
    TAMPERED = "tampered"  # the seal does not verify


class UndoOffer(BaseModel):
    """One offer, field for field as stored."""

    id: str
    run_id: str
    action_call_id: str  # the runtime's call id of the change it takes back
    approval_id: str  # the change's approval (the audit links them)
    channel: str
    thread_ts: str
    action_tool: str
    tool: str  # the undo call, as it will be proposed, byte for byte
    args_json: str
    target: str = ""
    created_at: float
    expires_at: float
    message_channel: str = ""  # the message whose Undo button claims it
    message_ts: str = ""
    claimed_by: str = ""
    claimed_at: float | None = None
    seal: str = ""

    def shown(self) -> str:
        return f"{self.tool} {self.args_json}"

    @classmethod
    def from_hash(cls, raw: dict[bytes | str, bytes | str]) -> UndoOffer:
        data: dict[str, object] = {as_text(k) or "": as_text(v) or "" for k, v in raw.items()}
        if data.get("claimed_at") == "":
            data["claimed_at"] = None
        return cls.model_validate(data)


@dataclass(frozen=True)
class UndoSeal:
    """Seals an offer when it is made (the worker) and checks it at the click (the web process)."""

    key: bytes

    @classmethod
    def from_secret(cls, secret: str) -> UndoSeal | None:
        """``None`` without ``CHATOPS_RUNNER_SECRET``."""
        return cls(hmac.new(secret.encode(), _PURPOSE, hashlib.sha256).digest()) if secret else None

    def of(self, offer: UndoOffer) -> str:
        facts = offer.model_dump(mode="json", include=set(SEALED_FIELDS))
        text = json.dumps(facts, sort_keys=True, separators=(",", ":"), ensure_ascii=True)
        return hmac.new(self.key, text.encode(), hashlib.sha256).hexdigest()

    def holds(self, offer: UndoOffer) -> bool:
        return bool(offer.seal) and hmac.compare_digest(offer.seal, self.of(offer))


@dataclass(frozen=True)
class Claim:
    """A click's outcome, and the offer as it is now (``None`` when there is none)."""

    outcome: ClaimOutcome
    offer: UndoOffer | None
    by: str = ""

    @property
    def won(self) -> bool:
        return self.outcome is ClaimOutcome.CLAIMED


@dataclass(frozen=True)
class UndoFacts:
    """What the worker knows of an executed change and its derived undo when it makes the offer."""

    run_id: str
    action_call_id: str
    approval_id: str
    channel: str
    thread_ts: str
    action_tool: str
    tool: str
    args_json: str
    target: str = ""


class UndoOffers:
    """Make, read and claim undo offers (the only code that knows their fields)."""

    def __init__(self, redis_client: redis.Redis, keys: Keys, seal: UndoSeal | None) -> None:
        self._redis = redis_client
        self._keys = keys
        self._seal = seal
        self._claim = redis_client.register_script(_CLAIM)
        self._release = redis_client.register_script(_RELEASE)

    def offer(self, facts: UndoFacts, window_seconds: float) -> UndoOffer:
        """A new offer, open for ``window_seconds`` from now (Redis's clock), sealed and stored."""
        now = redis_now(self._redis)
        offer = UndoOffer(
            id=uuid.uuid4().hex,
            run_id=facts.run_id,
            action_call_id=facts.action_call_id,
            approval_id=facts.approval_id,
            channel=facts.channel,
            thread_ts=facts.thread_ts,
            action_tool=facts.action_tool,
            tool=facts.tool,
            args_json=facts.args_json,
            target=facts.target,
            created_at=round(now, 6),
            expires_at=round(now + window_seconds, 6),
        )
        if self._seal is not None:
            offer = offer.model_copy(update={"seal": self._seal.of(offer)})
        key = self._keys.undo_offer(offer.id)
        flat = {
            name: "" if value is None else str(value) for name, value in offer.model_dump(mode="json").items()
        }
        pipe = self._redis.pipeline()
        pipe.hset(key, mapping=flat)  # type: ignore[arg-type]
        pipe.expire(key, int(window_seconds) + KEEP_AFTER_WINDOW_SECONDS)
        pipe.execute()
        return offer

    def get(self, offer_id: str) -> UndoOffer | None:
        raw = self._redis.hgetall(self._keys.undo_offer(offer_id))
        if not raw:
            return None
        try:
            return UndoOffer.from_hash(raw)
        except ValueError:
            return None  # a record a Redis writer broke offers nothing

    def set_message(self, offer_id: str, channel: str, ts: str) -> None:
        """Where the offer's Undo button is: only a click on that message claims it."""
        hset_if_exists(
            self._redis, self._keys.undo_offer(offer_id), {"message_channel": channel, "message_ts": ts}
        )

    def claim(self, offer_id: str, *, channel: str, ts: str, by: str) -> Claim:
        """``by``'s click on message ``ts`` in ``channel``: the first within the window wins."""
        offer = self.get(offer_id)
        if offer is None:
            return Claim(ClaimOutcome.MISSING, None)
        if not self._sealed(offer, offer_id):
            return Claim(ClaimOutcome.TAMPERED, offer)
        if offer.channel != channel:
            return Claim(ClaimOutcome.MISMATCH, offer)
        raw = self._claim(keys=[self._keys.undo_offer(offer_id)], args=[channel, ts, by])
        outcome, claimed_by = ClaimOutcome(as_text(raw[0]) or "missing"), as_text(raw[1]) or ""
        now = self.get(offer_id)
        if outcome is ClaimOutcome.CLAIMED and (now is None or not self._sealed(now, offer_id)):
            return Claim(ClaimOutcome.TAMPERED, now, claimed_by)  # changed between the two reads
        return Claim(outcome, now, claimed_by)

    def judge(self, offer_id: str, *, channel: str, ts: str) -> Claim:
        """What a claim from message ``ts`` in ``channel`` would answer now, claiming nothing
        (``CLAIMED``: it may be claimed); ``claim`` decides again, atomically."""
        offer = self.get(offer_id)
        if offer is None:
            return Claim(ClaimOutcome.MISSING, None)
        if not self._sealed(offer, offer_id):
            return Claim(ClaimOutcome.TAMPERED, offer)
        if not offer.message_ts or (offer.channel, offer.message_channel, offer.message_ts) != (
            channel,
            channel,
            ts,
        ):
            return Claim(ClaimOutcome.MISMATCH, offer)
        if offer.claimed_by:
            return Claim(ClaimOutcome.TAKEN, offer, offer.claimed_by)
        if redis_now(self._redis) >= offer.expires_at:
            return Claim(ClaimOutcome.EXPIRED, offer)
        return Claim(ClaimOutcome.CLAIMED, offer)

    def release(self, offer_id: str, by: str) -> bool:
        """Give back ``by``'s claim (its run could not start): the offer may be claimed again."""
        return bool(self._release(keys=[self._keys.undo_offer(offer_id)], args=[by]))

    def _sealed(self, offer: UndoOffer, offer_id: str) -> bool:
        return offer.id == offer_id and (self._seal is None or self._seal.holds(offer))
