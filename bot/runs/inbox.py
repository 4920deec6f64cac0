"""The inbox of a run: thread replies waiting to be injected into its history.

Delivery (web process): one Lua script checks that the thread's active run is still the one we
looked up and still active, claims the Slack message once (Slack retries events), RPUSHes the
item, and — when the run is waiting for an approval and the caller says the author may decide
(``may_supersede``, the approver policy's answer) — supersedes the pending approvals with
``SUPERSEDE_LUA``, the approvals' own transition (``bot.runs.approvals``; its audit entry is
``bot.runs.approval_lifecycle``'s). Anyone else's reply is stored all the same and read by
the model when the run resumes; the approval stays pending. Only after the script returns
``stored`` may the caller acknowledge the message: it is in Redis. With ``park`` (a young thread)
and no run in the thread yet, the reply is kept for the run its mention is starting
(``bot.runs.early_replies``) instead of being refused.

Drain (worker): ``messages(run_id)`` only peeks (LRANGE). The items become ``Message``s tagged
with ``meta["inbox_id"]``, and ``RedisMemory.append`` removes exactly those items from the inbox
head in the same script that appends them to the history. A crash before that write leaves them
in the inbox for the next attempt; a crash after it finds them in the history and not in the
inbox: each message enters the history exactly once, in arrival order.
"""

from __future__ import annotations

import time
import uuid
from collections.abc import Callable
from dataclasses import dataclass, field
from enum import StrEnum

import redis
from pydantic import BaseModel

from agent.redis_util import as_text
from agent.types import Message
from bot.errors import BotError
from bot.keys import Keys
from bot.runs.approvals import SUPERSEDE_LUA
from bot.runs.early_replies import EARLY_MAX_ITEMS, EARLY_TTL_SECONDS, PARK_LUA
from bot.runs.record import RUN_STATUS_LUA, RunRecords

DEDUPE_SECONDS = 24 * 3600
_MAX_ATTEMPTS = 20

# KEYS: 1 thread claim, 2 run hash, 3 inbox, 4 seen-message claim, 5 approvals index, 6.. approvals.
# ARGV: 1 run id, 2 item JSON, 3 dedupe ttl, 4 user, 5 approvals index size seen,
# 6 '1' when the author may supersede, 7.. the approval ids of KEYS 6..
_DELIVER = (
    SUPERSEDE_LUA
    + RUN_STATUS_LUA
    + """
if redis.call('GET', KEYS[1]) ~= ARGV[1] then return {'retry'} end
if redis.call('HLEN', KEYS[5]) ~= tonumber(ARGV[5]) then return {'retry'} end
local status = run_status(KEYS[2])
if not run_active(status) then return {'no_active_run'} end
if not redis.call('SET', KEYS[4], ARGV[1], 'NX', 'EX', ARGV[3]) then return {'duplicate', status} end
redis.call('RPUSH', KEYS[3], ARGV[2])
local result = {'stored', status}
if status == 'awaiting_approval' and ARGV[6] == '1' then
  for i = 6, #KEYS do
    if supersede(KEYS[i], ARGV[4])[1] == 'won' then table.insert(result, ARGV[i + 1]) end
  end
end
return result
"""
)


class InboxItem(BaseModel):
    """One thread reply as stored in the inbox (``id`` is what ``RedisMemory`` matches on)."""

    id: str
    text: str
    user: str
    ts: str
    received_at: float
    may_supersede: bool = False  # its author may decide: it supersedes an approval it finds pending

    def message(self) -> Message:
        return Message.user(self.text, inbox_id=self.id, slack_user=self.user, ts=self.ts)


class DeliveryStatus(StrEnum):
    STORED = "stored"  # in the inbox now: acknowledge it
    PARKED = "parked"  # no run yet in the young thread: kept for the run its mention is starting
    FULL = "full"  # parking refused: the young thread has too many early replies (do not acknowledge)
    DUPLICATE = "duplicate"  # this Slack message was stored before (an event retry): acknowledge again
    NO_ACTIVE_RUN = "no_active_run"  # nothing runs in this thread: ignore the message


@dataclass(frozen=True)
class Delivery:
    status: DeliveryStatus
    run_id: str | None = None
    run_status: str | None = None
    item: InboxItem | None = None
    superseded: list[str] = field(default_factory=list)  # approval ids this message superseded

    @property
    def stored(self) -> bool:
        return self.status not in (DeliveryStatus.NO_ACTIVE_RUN, DeliveryStatus.FULL)


class Inbox:
    """Deliver thread replies to a run's inbox and read them back."""

    def __init__(
        self,
        redis_client: redis.Redis,
        keys: Keys,
        *,
        dedupe_seconds: int = DEDUPE_SECONDS,
        clock: Callable[[], float] = time.time,
    ) -> None:
        self._redis = redis_client
        self._keys = keys
        self._dedupe = dedupe_seconds
        self._clock = clock
        self._records = RunRecords(redis_client, keys)
        self._deliver = redis_client.register_script(_DELIVER)
        self._park = redis_client.register_script(PARK_LUA)

    def deliver(
        self,
        channel: str,
        thread_ts: str,
        *,
        user: str,
        text: str,
        ts: str,
        may_supersede: bool = False,
        park: bool = False,
        claim: str = "",
    ) -> Delivery:
        """Store a reply for the thread's active run; returns only once it is in Redis (or refused).

        ``may_supersede``: whether the author may decide (the approver policy's answer); only then
        does the reply supersede the run's pending approvals. The default denies.
        ``park``: with no run in the thread, keep the reply for the run the thread's mention may
        be starting right now (``bot.runs.early_replies``; the caller decides: a young thread).
        ``claim``: what the store is claimed by instead of the message's ``ts``, for what steers the
        run without a message of its own (a click on the Findings message's menu: its ``ts`` is
        empty, so nobody reacts to it; the claim makes a double click one item).
        """
        keys = self._keys
        for _ in range(_MAX_ATTEMPTS):
            run_id = self._records.active_run(channel, thread_ts)
            if run_id is None:
                if not park or claim:
                    return Delivery(DeliveryStatus.NO_ACTIVE_RUN)
                parked = self._park_early(channel, thread_ts, user=user, text=text, ts=ts)
                if parked is None:
                    continue  # the mention's run was created meanwhile: deliver to it
                return parked
            approval_ids = [as_text(i) or "" for i in self._redis.hvals(keys.approvals(run_id))]
            item = InboxItem(
                id=uuid.uuid4().hex,
                text=text,
                user=user,
                ts=ts,
                received_at=self._clock(),
                may_supersede=may_supersede,
            )
            reply = self._deliver(
                keys=[
                    keys.thread(channel, thread_ts),
                    keys.run(run_id),
                    keys.inbox(run_id),
                    keys.seen_message(channel, claim or ts),
                    keys.approvals(run_id),
                    *(keys.approval(i) for i in approval_ids),
                ],
                args=[
                    run_id,
                    item.model_dump_json(),
                    self._dedupe,
                    user,
                    len(approval_ids),
                    "1" if may_supersede else "0",
                    *approval_ids,
                ],
            )
            outcome = [as_text(part) or "" for part in reply]
            if outcome[0] == "retry":
                continue  # the thread's run or its approvals changed under us: look again
            if outcome[0] == "no_active_run":
                return Delivery(DeliveryStatus.NO_ACTIVE_RUN, run_id)
            status = DeliveryStatus(outcome[0])
            superseded = outcome[2:]
            stored_item = item if status is DeliveryStatus.STORED else None
            return Delivery(status, run_id, outcome[1], stored_item, superseded)
        raise BotError("the thread's run kept changing while a reply was delivered")

    def _park_early(self, channel: str, thread_ts: str, *, user: str, text: str, ts: str) -> Delivery | None:
        """Keep a reply for the run the thread's mention is starting; ``None`` if it has one now."""
        item = InboxItem(id=uuid.uuid4().hex, text=text, user=user, ts=ts, received_at=self._clock())
        keys = [
            self._keys.thread(channel, thread_ts),
            self._keys.early_replies(channel, thread_ts),
            self._keys.seen_message(channel, ts),
        ]
        args: list[str | int] = [item.model_dump_json(), self._dedupe, EARLY_TTL_SECONDS, EARLY_MAX_ITEMS]
        outcome = as_text(self._park(keys=keys, args=args)) or ""
        if outcome == "retry":
            return None
        status = DeliveryStatus(outcome) if outcome != "duplicate" else DeliveryStatus.DUPLICATE
        return Delivery(status, item=item if status is DeliveryStatus.PARKED else None)

    def peek(self, run_id: str) -> list[InboxItem]:
        """The waiting items, oldest first, without removing them."""
        items = self._redis.lrange(self._keys.inbox(run_id), 0, -1)
        return [InboxItem.model_validate_json(item) for item in items]

    def messages(self, run_id: str) -> list[Message]:
        """The waiting items as history messages (the loop's ``inject``)."""
        return [item.message() for item in self.peek(run_id)]
