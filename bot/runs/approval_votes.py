"""Several distinct approvals on one card: the votes of one approval record.

A record whose sealed policy asks for ``approvals: 2`` stays ``pending`` until two *distinct*
eligible people have clicked Approve on its card: a second click by the same person counts once.
Each click is one Lua script (on top of the approvals' ``DECIDE_LUA``): it checks the card and the
expiry as a plain decision does, adds the clicker to the record's vote set, and when the set is
large enough moves the record to ``approved`` in the same script: two people clicking at once
can neither both be "the last one" nor leave it pending with enough votes.

A vote is stored as its voter's user ID, or, when the lifecycle has the seal key, as
``user|tag`` (``ApprovalSeal.vote``: an HMAC only the web process can make), so a member a Redis
writer adds is not mistaken for a person's click (``ApprovalLifecycle`` drops such members before
it counts, and signs a grant only for authentic voters). The record's ``approved_by`` and reason
name the users only.

The vote set (``approval:{id}:votes``) is this module's; it expires with its record.
"""

from __future__ import annotations

from dataclasses import dataclass
from enum import StrEnum

import redis

from agent.redis_util import as_text
from bot.keys import Keys
from bot.runs.approvals import DECIDE_LUA, EXPIRED_REASON, NOTE_VOTES_LUA, SYSTEM_DECIDER

# KEYS: 1 record, 2 votes. ARGV: 1 the vote's member (user or user|tag), 2 approvals needed, 3 card
# channel, 4 card ts, 5 the system decider, 6 the expiry reason, 7 the user (the decider). An approved record's reason lists every approver.
# Returns {outcome, count}: missing, mismatch, lost, expired, repeat (already counted), counted, won.
_VOTE = (
    DECIDE_LUA
    + NOTE_VOTES_LUA
    + """
local key, votes = KEYS[1], KEYS[2]
local card = redis.call('HMGET', key, 'status', 'expires_at', 'card_channel', 'card_ts')
if not card[1] then return {'missing', 0} end
if card[3] ~= ARGV[3] or card[4] ~= ARGV[4] or ARGV[4] == '' then return {'mismatch', 0} end
if card[1] ~= 'pending' then return {'lost', redis.call('SCARD', votes)} end
if now() >= tonumber(card[2]) then
  decide(key, 'expired', ARGV[5], ARGV[6])
  return {'expired', redis.call('SCARD', votes)}
end
local added = redis.call('SADD', votes, ARGV[1])
local ttl = redis.call('TTL', key)
if ttl > 0 then redis.call('EXPIRE', votes, ttl) end
local who = {}
for _, member in ipairs(redis.call('SMEMBERS', votes)) do who[#who + 1] = string.match(member, '^[^|]*') end
table.sort(who)
note_votes(key, who)
local count = #who
if count >= tonumber(ARGV[2]) then
  decide(key, 'approved', ARGV[7], 'approved by ' .. table.concat(who, ', '))
  return {'won', count}
end
if added == 0 then return {'repeat', count} end
return {'counted', count}
"""
)


class VoteOutcome(StrEnum):
    WON = "won"  # this vote completed the approvals: the record is approved
    COUNTED = "counted"  # counted; more are needed
    REPEAT = "repeat"  # this person had already approved: counted once
    LOST = "lost"  # no longer pending
    EXPIRED = "expired"  # past its expiry: settled as expired now
    MISMATCH = "mismatch"  # not a click on this record's card


@dataclass(frozen=True)
class VoteResult:
    outcome: VoteOutcome
    count: int


class ApprovalVotes:
    """Count distinct approvers of one record; the last needed one approves it."""

    def __init__(self, redis_client: redis.Redis, keys: Keys) -> None:
        self._redis = redis_client
        self._keys = keys
        self._vote = redis_client.register_script(_VOTE)

    def vote(
        self, approval_id: str, user: str, needed: int, card: tuple[str, str], *, member: str = ""
    ) -> VoteResult | None:
        """``user``'s approval through ``card`` (stored as ``member``, default the user ID);
        ``None`` when there is no such record."""
        raw = self._vote(
            keys=[self._keys.approval(approval_id), self._keys.approval_votes(approval_id)],
            args=[member or user, max(1, needed), card[0], card[1], SYSTEM_DECIDER, EXPIRED_REASON, user],
        )
        name = as_text(raw[0]) or "missing"
        if name == "missing":
            return None
        return VoteResult(VoteOutcome(name), int(raw[1]))

    def voters(self, approval_id: str) -> list[str]:
        """Who approved so far (sorted), as the set says (tags left out, not checked)."""
        return sorted({member.partition("|")[0] for member in self.members(approval_id)})

    def members(self, approval_id: str) -> list[str]:
        """The set's members as stored (``user`` or ``user|tag``)."""
        found = self._redis.smembers(self._keys.approval_votes(approval_id))
        return sorted(as_text(v) or "" for v in found)

    def forget(self, approval_id: str, members: list[str]) -> None:
        """Drop members that are no vote (a tag that does not verify: written by someone else)."""
        if members:
            self._redis.srem(self._keys.approval_votes(approval_id), *members)
