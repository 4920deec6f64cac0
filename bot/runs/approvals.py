"""Approval records: one Redis hash per execution that waits for a human.

An approval authorises exactly one execution: one (tool, canonical arguments) of one run, under
the runtime's own call id (``agent.types.ToolCall.id``, never the model's). A record is created
``pending`` (once per run and call id: a resumed run asking again gets the same record), leaves
``pending`` exactly once, atomically, to ``approved``, ``declined``, ``superseded`` (a thread
reply by someone who may decide) or ``expired``, and an approved record is *consumed* once, when
its execution starts (``consume``): a second execution can never ride on it.

* The first decision wins; a later one is refused and told who decided first and what.
* A click decides only its own card: ``decide(..., card=(channel, ts))`` refuses (``mismatch``)
  unless the record's card is that message.
* Time is Redis's (``TIME`` inside the scripts), never a web host's or a worker's: created,
  expiry and decision times all come from one clock, so a host whose clock is minutes off can
  neither expire a fresh approval nor approve a stale one.

The plain transition is one Lua function (``DECIDE_LUA``) shared by every script that decides;
a reply's supersede is ``SUPERSEDE_LUA`` on top of it (the inbox's delivery script runs it). Who
moves a record, and the audit entry of every move, is ``bot.runs.approval_lifecycle``.
"""

from __future__ import annotations

import json
import time
import uuid
from dataclasses import dataclass
from enum import StrEnum

import redis
from pydantic import BaseModel, Field

from agent.provenance import Provenance
from agent.redis_util import NOW_LUA, as_text, hset_if_exists, redis_now
from agent.tooling import CallTarget, ToolCategory
from agent.types import Decision, ToolCall
from bot.keys import Keys
from bot.policy.rules import Requirement

SYSTEM_DECIDER = "chatops"
RATIONALE_STORED = 2000  # characters of the model's words kept on the record (the card shows one line)
EXPIRED_REASON = "approval expired"
SUPERSEDED_REASON = "superseded by a new message"
CHANGED_REASON = "the arguments changed after approval"
CARD_FAILED_REASON = (
    "the approval card could not be posted in Slack, so nobody could be asked; it was not run"
)

# A Lua function, prepended to the scripts that decide. Returns {outcome, status, by, at, reason}
# where outcome is 'won', 'lost' (already decided: the first decision is returned) or 'missing'.
DECIDE_LUA = (
    NOW_LUA
    + """
local function decide(key, status, by, reason)
  local current = redis.call('HMGET', key, 'status', 'decided_by', 'decided_at', 'reason')
  if not current[1] then return {'missing', '', '', '', ''} end
  if current[1] ~= 'pending' then
    return {'lost', current[1], current[2] or '', current[3] or '', current[4] or ''}
  end
  local when = string.format('%.6f', now())
  redis.call('HSET', key, 'status', status, 'decided_by', by, 'decided_at', when, 'reason', reason)
  return {'won', status, by, when, reason}
end
"""
)
# A Lua function for the script that counts several approvals (``bot.runs.approval_votes``): the
# record shows who approved so far (``approved_by``, a JSON list), written only here.
NOTE_VOTES_LUA = """
local function note_votes(key, voters)
  redis.call('HSET', key, 'approved_by', cjson.encode(voters))
end
"""
# The reason is a Lua literal: plain text, nothing to escape.
assert SUPERSEDED_REASON.replace(" ", "").isalnum()
# A Lua function for scripts that store a reply: supersede one pending approval, ``by`` its author.
SUPERSEDE_LUA = (
    DECIDE_LUA
    + f"""
local function supersede(key, by)
  return decide(key, 'superseded', by, '{SUPERSEDED_REASON}')
end
"""
)
# KEYS: 1 record. ARGV: 1 status, 2 by, 3 reason, 4 card channel, 5 card ts ("" = not a click),
# 6 "1" = only if the expiry is due (the scheduled expiry), 7 the system decider, 8 the expiry reason.
# Outcomes: won, lost, missing,
# mismatch (a click on another message), expired (it was due: settled as expired), not_due.
_DECIDE = (
    DECIDE_LUA
    + """
local key = KEYS[1]
local card = redis.call('HMGET', key, 'status', 'expires_at', 'card_channel', 'card_ts')
if not card[1] then return {'missing'} end
if ARGV[5] ~= '' and (card[3] ~= ARGV[4] or card[4] ~= ARGV[5]) then return {'mismatch'} end
if card[1] ~= 'pending' then return {'lost'} end
local due = now() >= tonumber(card[2])
if due and ARGV[1] ~= 'expired' then
  decide(key, 'expired', ARGV[7], ARGV[8])
  return {'expired'}
end
if not due and ARGV[6] == '1' then return {'not_due'} end
return {decide(key, ARGV[1], ARGV[2], ARGV[3])[1]}
"""
)
# KEYS: 1 run's approvals index, 2 the new record. ARGV: 1 call id, 2 new approval id, 3 fields,
# 4 ttl, 5 timeout seconds. created_at and expires_at come from Redis's clock.
_CREATE = (
    NOW_LUA
    + """
local existing = redis.call('HGET', KEYS[1], ARGV[1])
if existing then return existing end
redis.call('HSET', KEYS[1], ARGV[1], ARGV[2])
redis.call('HSET', KEYS[2], unpack(cjson.decode(ARGV[3])))
local t = now()
redis.call('HSET', KEYS[2], 'created_at', string.format('%.6f', t),
  'expires_at', string.format('%.6f', t + tonumber(ARGV[5])))
redis.call('EXPIRE', KEYS[2], ARGV[4])
return ARGV[2]
"""
)
# KEYS: 1 record. Marks an approved record consumed by the one execution it authorises.
# Returns 'consumed' (this caller may execute), 'used' (consumed before) or the record's status.
# KEYS: 1 the record. ARGV: 1 channel, 2 ts. 1: the record's card is (channel, ts) now (recorded by
# this call, or already); 0: no record, or another card is recorded (never replaced here).
_CLAIM_CARD = """
if redis.call('EXISTS', KEYS[1]) == 0 then return 0 end
local card = redis.call('HMGET', KEYS[1], 'card_channel', 'card_ts')
if not card[2] or card[2] == '' then
  redis.call('HSET', KEYS[1], 'card_channel', ARGV[1], 'card_ts', ARGV[2])
  return 1
end
if card[1] == ARGV[1] and card[2] == ARGV[2] then return 1 end
return 0
"""
_CONSUME = (
    NOW_LUA
    + """
local current = redis.call('HMGET', KEYS[1], 'status', 'consumed_at')
if not current[1] then return 'missing' end
if current[1] ~= 'approved' then return current[1] end
if current[2] and current[2] ~= '' then return 'used' end
redis.call('HSET', KEYS[1], 'consumed_at', string.format('%.6f', now()))
return 'consumed'
"""
)


class DecideOutcome(StrEnum):
    WON = "won"
    LOST = "lost"  # decided before: ``approval`` says by whom
    EXPIRED = "expired"  # it was past its expiry: settled as expired now
    MISMATCH = "mismatch"  # a click on another message than this approval's card: nothing decided
    NOT_DUE = "not_due"  # the scheduled expiry ran early (its host's clock): nothing decided


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
    channel: str = ""  # the run's channel, where its card is posted (sealed: bot.runs.approval_seal)
    status: ApprovalStatus = ApprovalStatus.PENDING
    decided_by: str = ""
    decided_at: float | None = None
    reason: str = ""
    created_at: float
    expires_at: float
    card_channel: str = ""
    card_ts: str = ""
    preview: str = ""
    plan: str = ""  # the dry run's machine-readable plan: the one execution does exactly this
    plan_created_at: float | None = None
    command: str = ""  # the exact command or request, as the tool describes it
    why: str = ""  # why a person is asked when the tool alone would not ask (an unlisted egress host)
    rationale: str = ""  # the model's own words with the call (untrusted; shown inert, cut to a line)
    verify: str = ""  # its check, before-read and undo as derived when proposed (agent.verification), sealed
    involved: list[str] = Field(default_factory=list)  # whose messages the run had read (requester first)
    consumed_at: float | None = None  # when the one execution it authorises started
    target: str = ""  # the inventory target the call acts on ("" without an inventory)
    target_via: str = ""  # how that target is reached: runner, ssh, kubernetes, local
    target_labels: str = ""  # its labels as "key=value" pairs, comma-separated, for the card
    grant: str = ""  # signed by the web process at the click (bot.fleet.grants): a runner verifies it
    # The policy's Requirement as the worker computed it when it proposed the call (bot.policy.rules):
    # shown on the first card and audited; never decided from (the deciders read the policy file).
    policy: str = ""
    seal: str = ""  # HMAC of the proposed facts (bot.runs.approval_seal); "" without CHATOPS_RUNNER_SECRET
    # Where each argument value came from (``agent.provenance.Provenance`` JSON), sealed: a derived
    # call may need more approvals (bot.policy.rules), and its card says so.
    provenance: str = ""
    approved_by: list[str] = Field(default_factory=list)  # so far, when it needs several (NOTE_VOTES_LUA)

    @property
    def labels(self) -> list[tuple[str, str]]:
        """The target's labels as stored (``target_labels``)."""
        pairs = (item.partition("=") for item in self.target_labels.split(",") if item)
        return [(key, value) for key, _, value in pairs]

    @property
    def derived(self) -> Provenance:
        """Where its argument values came from (nothing checked for a record without it)."""
        return Provenance.from_json(self.provenance)

    @property
    def approvals_proposed(self) -> int:
        """How many approvals the call was proposed with (for the card and the model; nobody decides
        from it): its requirement's (a derived call's included), or one without a policy file."""
        if self.policy:
            try:
                return Requirement.from_json(self.policy).approvals
            except (ValueError, KeyError, TypeError):
                pass
        return 1

    @property
    def production(self) -> bool:
        """The target is labelled ``env: prod`` (or ``production``): the card highlights it."""
        return CallTarget(self.target, self.target_via, tuple(self.labels)).production

    def fields(self) -> list[str]:
        """The flat field/value list stored in the hash (``None`` as an empty string, lists as JSON)."""
        flat: list[str] = []
        for name, value in self.model_dump(mode="json").items():
            if isinstance(value, list):
                value = json.dumps(value)
            flat += [name, "" if value is None else str(value)]
        return flat

    @classmethod
    def from_hash(cls, raw: dict[bytes | str, bytes | str]) -> Approval:
        data: dict[str, object] = {as_text(k) or "": as_text(v) or "" for k, v in raw.items()}
        for name in _OPTIONAL_FLOATS:
            if data.get(name) == "":
                data[name] = None
        for name in ("involved", "approved_by"):
            if isinstance(data.get(name), str):
                data[name] = json.loads(str(data[name]) or "[]")
        return cls.model_validate(data)

    def decision(self, call: ToolCall) -> Decision:
        """What the confirm callback answers for ``call`` given this record (before consuming it)."""
        if self.status is ApprovalStatus.PENDING:
            return Decision.pending()
        if self.status is ApprovalStatus.APPROVED:
            if call.name != self.tool or call.arguments_sha256() != self.args_sha256:
                return Decision.decline(CHANGED_REASON)
            return Decision.approve(
                self.decided_by, plan=self.plan or None, grant=self.grant or None, verify=self.verify
            )
        return Decision.decline(self.reason or f"{self.status.value} by {self.decided_by}")


_OPTIONAL_FLOATS = ("decided_at", "plan_created_at", "consumed_at")


@dataclass(frozen=True)
class DecideResult:
    """The outcome of a decision, and the record as it is now (who decided, when)."""

    outcome: DecideOutcome
    approval: Approval

    @property
    def won(self) -> bool:
        return self.outcome is DecideOutcome.WON

    @property
    def settled(self) -> bool:
        """This call moved the record out of ``pending``: as asked (won), or as expired (it was due)."""
        return self.outcome in (DecideOutcome.WON, DecideOutcome.EXPIRED)

    def describe(self) -> str:
        a = self.approval
        when = time.strftime("%H:%M:%S UTC", time.gmtime(a.decided_at or 0))
        return f"{a.status.value} by {a.decided_by} at {when}"


class Approvals:
    """Create, read, decide and consume approval records (the only code that knows their fields)."""

    def __init__(self, redis_client: redis.Redis, keys: Keys, *, retention_seconds: int) -> None:
        self._redis = redis_client
        self._keys = keys
        self._retention = retention_seconds
        self._create = redis_client.register_script(_CREATE)
        self._decide = redis_client.register_script(_DECIDE)
        self._consume = redis_client.register_script(_CONSUME)
        self._claim_card = redis_client.register_script(_CLAIM_CARD)

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

    def keys_of_run(self, run_id: str) -> list[str]:
        """The run's approval keys, its index and then its records: they expire with the run."""
        ids = self._redis.hvals(self._keys.approvals(run_id))
        return [self._keys.approvals(run_id), *(self._keys.approval(as_text(i) or "") for i in ids)]

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
        """The run's record for this execution: a new ``pending`` one (``True``) or the existing one."""
        draft = self.draft(run_id, call, category, requester=requester, preview=preview)
        return self.store(draft, timeout_seconds)

    @staticmethod
    def draft(
        run_id: str,
        call: ToolCall,
        category: ToolCategory,
        *,
        requester: str,
        channel: str = "",
        preview: str | None = None,
        plan: str | None = None,
        plan_created_at: float | None = None,
        command: str | None = None,
        involved: tuple[str, ...] = (),
        why: str | None = None,
        target: CallTarget | None = None,
        policy: str = "",
        rationale: str | None = None,
        verify: str = "",
        provenance: str = "",
    ) -> Approval:
        """The record an execution would get, not stored yet (the card can be checked on it first)."""
        people = (requester, *involved) if requester else involved
        return Approval(
            id=uuid.uuid4().hex,
            run_id=run_id,
            call_id=call.id,
            tool=call.name,
            args_json=call.arguments,
            args_sha256=call.arguments_sha256(),
            category=category,
            requester=requester,
            channel=channel,
            created_at=0.0,  # both set from Redis's clock when stored
            expires_at=0.0,
            preview=preview or "",
            plan=plan or "",
            plan_created_at=plan_created_at,
            command=command or "",
            why=why or "",
            rationale=(rationale or "")[:RATIONALE_STORED],
            involved=list(dict.fromkeys(person for person in people if person)),
            target=target.name if target else "",
            target_via=target.via if target else "",
            target_labels=",".join(f"{key}={value}" for key, value in target.labels) if target else "",
            policy=policy,
            verify=verify,
            provenance=provenance,
        )

    def store(self, draft: Approval, timeout_seconds: float) -> tuple[Approval, bool]:
        """Store ``draft`` as its execution's record unless it has one: (the record, created)."""
        ttl = int(self._retention + timeout_seconds)
        stored_id = as_text(
            self._create(
                keys=[self._keys.approvals(draft.run_id), self._keys.approval(draft.id)],
                args=[draft.call_id, draft.id, json.dumps(draft.fields()), ttl, repr(float(timeout_seconds))],
            )
        )
        stored = self.get(stored_id or "")
        assert stored is not None, "an indexed approval record is missing"
        return stored, stored_id == draft.id

    def decide(
        self,
        approval_id: str,
        status: ApprovalStatus,
        by: str,
        reason: str = "",
        *,
        card: tuple[str, str] | None = None,
        only_if_due: bool = False,
    ) -> DecideResult | None:
        """Move the record out of ``pending``; ``None`` when there is no such record.

        ``card``: the (channel, message ts) a click came from; anything but the record's own card
        decides nothing. A pending record past its expiry (by Redis's clock) is settled as expired
        instead of as asked. ``only_if_due``: decide only if the expiry is due (``expired`` only).
        """
        if status is ApprovalStatus.PENDING:
            raise ValueError("a decision cannot move an approval to pending")
        channel, ts = card if card is not None else ("", "")
        if card is not None and not ts:
            return self._result(approval_id, DecideOutcome.MISMATCH)
        outcome = self._decide(
            keys=[self._keys.approval(approval_id)],
            args=[
                status.value,
                by,
                reason,
                channel,
                ts,
                "1" if only_if_due else "",
                SYSTEM_DECIDER,
                EXPIRED_REASON,
            ],
        )
        name = as_text(outcome[0]) or "missing"
        if name == "missing":
            return None
        return self._result(approval_id, DecideOutcome(name))

    def _result(self, approval_id: str, outcome: DecideOutcome) -> DecideResult | None:
        approval = self.get(approval_id)
        return DecideResult(outcome, approval) if approval is not None else None

    def consume(self, approval_id: str) -> str:
        """Mark an approved record used by its one execution: ``consumed`` means go ahead; ``used``
        means an execution already started on it (never run it again); else the record's status."""
        return as_text(self._consume(keys=[self._keys.approval(approval_id)])) or "missing"

    def seconds_until_expiry(self, approval_id: str) -> float | None:
        """By Redis's clock; ``None`` when the record is gone."""
        expires_at = as_text(self._redis.hget(self._keys.approval(approval_id), "expires_at"))
        if not expires_at:
            return None
        return float(expires_at) - redis_now(self._redis)

    def set_grant(self, approval_id: str, grant: str) -> None:
        """Keep the grant signed for an approved record (the web process, before resuming the run)."""
        hset_if_exists(self._redis, self._keys.approval(approval_id), {"grant": grant})

    def claim_card(self, approval_id: str, channel: str, ts: str) -> bool:
        """Record (``channel``, ``ts``) as the card only while none is recorded (a click that
        reached the web process before the worker's ``set_card``); whether it is the card now."""
        claimed = self._claim_card(keys=[self._keys.approval(approval_id)], args=[channel, ts])
        return bool(claimed)

    def set_card(self, approval_id: str, channel: str, ts: str) -> None:
        """Remember where the approval card was posted: only clicks on that message decide it."""
        hset_if_exists(
            self._redis, self._keys.approval(approval_id), {"card_channel": channel, "card_ts": ts}
        )
