"""Approval records: one Redis hash per call that waits for a human.

A record is created ``pending`` (once per run and call id: a resumed run asking again gets the
same record) and leaves ``pending`` exactly once, atomically, to ``approved``, ``declined``,
``superseded`` (a thread reply arrived) or ``expired``. The first decision wins; a later one is
refused and told who decided first and what. The transition is one Lua function
(``DECIDE_LUA``) shared by every script that decides, so there is one implementation of it.
"""

from __future__ import annotations

import json
import time
import uuid
from collections.abc import Callable
from dataclasses import dataclass
from enum import StrEnum

import redis
from pydantic import BaseModel

from agent.keys import Keys
from agent.redis_memory import as_text, hset_if_exists
from agent.tooling import ToolCategory
from agent.types import Decision, ToolCall

SYSTEM_DECIDER = "chatops"
EXPIRED_REASON = "approval expired"
SUPERSEDED_REASON = "superseded by a new message"
CHANGED_REASON = "the arguments changed after approval"

# A Lua function, prepended to the scripts that decide. Returns {outcome, status, by, at, reason}
# where outcome is 'won', 'lost' (already decided: the first decision is returned) or 'missing'.
DECIDE_LUA = """
local function decide(key, status, by, at, reason)
  local current = redis.call('HMGET', key, 'status', 'decided_by', 'decided_at', 'reason')
  if not current[1] then return {'missing', '', '', '', ''} end
  if current[1] ~= 'pending' then
    return {'lost', current[1], current[2] or '', current[3] or '', current[4] or ''}
  end
  redis.call('HSET', key, 'status', status, 'decided_by', by, 'decided_at', at, 'reason', reason)
  return {'won', status, by, at, reason}
end
"""
_DECIDE = DECIDE_LUA + "return decide(KEYS[1], ARGV[1], ARGV[2], ARGV[3], ARGV[4])"
# KEYS: 1 run's approvals index, 2 the new record. ARGV: 1 call id, 2 new approval id, 3 fields, 4 ttl.
_CREATE = """
local existing = redis.call('HGET', KEYS[1], ARGV[1])
if existing then return existing end
redis.call('HSET', KEYS[1], ARGV[1], ARGV[2])
redis.call('HSET', KEYS[2], unpack(cjson.decode(ARGV[3])))
redis.call('EXPIRE', KEYS[2], ARGV[4])
return ARGV[2]
"""


class ApprovalStatus(StrEnum):
    PENDING = "pending"
    APPROVED = "approved"
    DECLINED = "declined"
    SUPERSEDED = "superseded"
    EXPIRED = "expired"


class Approval(BaseModel):
    """One approval record, field for field as stored."""

    id: str
    run_id: str
    call_id: str
    tool: str
    args_json: str
    args_sha256: str
    category: ToolCategory
    requester: str = ""
    status: ApprovalStatus = ApprovalStatus.PENDING
    decided_by: str = ""
    decided_at: float | None = None
    reason: str = ""
    created_at: float
    expires_at: float
    card_channel: str = ""
    card_ts: str = ""
    preview: str = ""

    def fields(self) -> list[str]:
        """The flat field/value list stored in the hash (``None`` as an empty string)."""
        flat: list[str] = []
        for name, value in self.model_dump(mode="json").items():
            flat += [name, "" if value is None else str(value)]
        return flat

    @classmethod
    def from_hash(cls, raw: dict[bytes | str, bytes | str]) -> Approval:
        data = {as_text(k) or "": as_text(v) or "" for k, v in raw.items()}
        return cls.model_validate({k: (v if v != "" or k != "decided_at" else None) for k, v in data.items()})

    def decision(self, call: ToolCall) -> Decision:
        """What the confirm callback answers for ``call`` given this record."""
        if self.status is ApprovalStatus.PENDING:
            return Decision.pending()
        if self.status is ApprovalStatus.APPROVED:
            if call.arguments_sha256() != self.args_sha256:
                return Decision.decline(CHANGED_REASON)
            return Decision.approve(self.decided_by)
        return Decision.decline(self.reason or f"{self.status.value} by {self.decided_by}")


@dataclass(frozen=True)
class DecideResult:
    """The outcome of a decision: ``won`` is False when someone decided first (``approval`` says who)."""

    won: bool
    approval: Approval

    def describe(self) -> str:
        a = self.approval
        when = time.strftime("%H:%M:%S UTC", time.gmtime(a.decided_at or 0))
        return f"{a.status.value} by {a.decided_by} at {when}"


class Approvals:
    """Create, read and decide approval records."""

    def __init__(
        self,
        redis_client: redis.Redis,
        keys: Keys,
        *,
        retention_seconds: int,
        clock: Callable[[], float] = time.time,
    ) -> None:
        self._redis = redis_client
        self._keys = keys
        self._retention = retention_seconds
        self._clock = clock
        self._create = redis_client.register_script(_CREATE)
        self._decide = redis_client.register_script(_DECIDE)

    def get(self, approval_id: str) -> Approval | None:
        raw = self._redis.hgetall(self._keys.approval(approval_id))
        return Approval.from_hash(raw) if raw else None

    def for_call(self, run_id: str, call_id: str) -> Approval | None:
        approval_id = as_text(self._redis.hget(self._keys.approvals(run_id), call_id))
        return self.get(approval_id) if approval_id else None

    def for_run(self, run_id: str) -> list[Approval]:
        ids = self._redis.hvals(self._keys.approvals(run_id))
        found = (self.get(as_text(i) or "") for i in ids)
        return sorted((a for a in found if a is not None), key=lambda a: a.created_at)

    def create(
        self,
        run_id: str,
        call: ToolCall,
        category: ToolCategory,
        *,
        requester: str,
        timeout_seconds: float,
        preview: str | None = None,
    ) -> tuple[Approval, bool]:
        """The run's record for ``call``: a new ``pending`` one (``True``) or the existing one."""
        now = self._clock()
        approval = Approval(
            id=uuid.uuid4().hex,
            run_id=run_id,
            call_id=call.id,
            tool=call.name,
            args_json=call.arguments,
            args_sha256=call.arguments_sha256(),
            category=category,
            requester=requester,
            created_at=now,
            expires_at=now + timeout_seconds,
            preview=preview or "",
        )
        ttl = int(self._retention + timeout_seconds)
        stored_id = as_text(
            self._create(
                keys=[self._keys.approvals(run_id), self._keys.approval(approval.id)],
                args=[call.id, approval.id, json.dumps(approval.fields()), ttl],
            )
        )
        if stored_id == approval.id:
            return approval, True
        existing = self.get(stored_id or "")
        assert existing is not None, "an indexed approval record is missing"
        return existing, False

    def decide(
        self, approval_id: str, status: ApprovalStatus, by: str, reason: str = ""
    ) -> DecideResult | None:
        """Move the record out of ``pending``; ``None`` when there is no such record."""
        if status is ApprovalStatus.PENDING:
            raise ValueError("a decision cannot move an approval to pending")
        outcome = self._decide(
            keys=[self._keys.approval(approval_id)],
            args=[status.value, by, repr(self._clock()), reason],
        )
        if as_text(outcome[0]) == "missing":
            return None
        approval = self.get(approval_id)
        assert approval is not None
        return DecideResult(won=as_text(outcome[0]) == "won", approval=approval)

    def set_card(self, approval_id: str, channel: str, ts: str) -> None:
        """Remember where the approval card was posted (for updating it after the decision)."""
        hset_if_exists(
            self._redis, self._keys.approval(approval_id), {"card_channel": channel, "card_ts": ts}
        )
