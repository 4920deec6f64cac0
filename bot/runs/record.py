"""The run record: the one owner of the run hash, the thread's claim and the run indexes.

The run hash ``{p}run:{id}`` holds two halves. The loop's ``RunState`` is the agent's memory's
(``agent.redis_memory.STATE_FIELDS``: ``status``, ``saved_at``, ``write_id`` and the state's
fields); everything else is the run record, whose fields are ``RunField``, declared here only.
``status`` is both: ``create`` writes ``queued``, the loop's state every status after it.

Besides the hash this module owns the keys that index run records: the thread's active-run claim
(``{p}thread:{channel}:{thread_ts}``), the set of runs not finished (``{p}runs:active``) and the
set of runs whose job has not told the thread how they ended (``{p}runs:reporting``). Every other
module reads and writes them through ``RunRecords``; scripts of other owners that touch the run
hash use the Lua functions below (``RUN_STATUS_LUA``, ``LEASE_HOLDER_LUA``), so the field names
they use come from here too.

The record also keeps the tools a run is offered (``RunField.OFFERED_TOOLS``, ``OfferedTool``):
decided by its first segment and written with the job's ``start_reporting`` in one script, then read
with the record by every later job (``bot.runs.run_tools``), so a run's tool list does not change
when its tools' sources do.

The record's part of the end of a run (``RunEnd``) runs inside ``RedisMemory``'s terminal write:
the run's other keys get the retention TTL, the run leaves the active set, and the thread's claim
is dropped if it names this run, all in the one script that stores the terminal state.
"""

from __future__ import annotations

import json
from collections.abc import Callable, Sequence
from dataclasses import dataclass
from enum import StrEnum
from typing import Any, cast

import redis
from pydantic import BaseModel, ConfigDict, PrivateAttr, TypeAdapter, ValidationError, field_validator

from agent.redis_memory import SAVED_AT_FIELD, STATUS_FIELD, TerminalStep, decode_state
from agent.redis_util import as_text, as_text_dict, hset_if_exists
from agent.tooling import ToolCategory
from agent.types import Message, RunState, RunStatus, ToolDef
from bot.keys import Keys
from bot.runs.early_replies import ADOPT_EARLY_LUA
from bot.runs.presenter import RunRef

ACTIVE_STATUSES = tuple(status for status in RunStatus if not status.terminal)


@dataclass(frozen=True)
class SweepView:
    """What the recovery sweep needs of a run record: its status and its last job's id."""

    status: RunStatus
    job_id: str


class RunField(StrEnum):
    """Every field of the run record in the run hash."""

    RUN_ID = "run_id"
    CHANNEL = "channel"
    THREAD_TS = "thread_ts"
    REQUESTER = "requester"
    TEXT = "text"
    STATUS = STATUS_FIELD  # written by ``create`` (queued), then by the loop's state
    CREATED_AT = "created_at"
    MESSAGE_TS = "message_ts"  # the mention that started the run
    CARD_TS = "card_ts"  # the run card in the thread
    JOB_ID = "job_id"  # the run's last job
    ATTEMPTS = "attempts"  # jobs that began the run's loop since its last clean end (a crash counter)
    STOP_REQUESTED_BY = "stop_requested_by"  # who pressed Stop (the loop's stop predicate reads it)
    LEASED_BY = "leased_by"  # the worker that took the lease last (``bot.runs.lease``)
    LEASE_TOKEN = "lease_token"  # ... and its fencing token
    REPORTED = "reported"  # the steps of a finished run's report already done, comma-separated
    SUSPENDED_CALL = "suspended_call"  # the call whose wait the audit log has recorded
    SOURCE_URL = "source_url"  # what started the run when it is not a mention: the alert's source link
    OFFERED_TOOLS = "offered_tools"  # the run's tools, decided by its first segment (``OfferedTool`` JSON)
    FOLLOWS = "follows"  # the thread's earlier run this one continues (``bot.runs.thread_history``)
    FINDINGS_TS = "findings_ts"  # the run's Findings message in the thread, once posted (set once)
    REQUESTED = "requested"  # what a person asked, when not the text (an alert's target and labels)


# The fields ``create`` writes: the rest are written as the run goes.
_CREATED: frozenset[str] = frozenset(
    {
        RunField.RUN_ID,
        RunField.CHANNEL,
        RunField.THREAD_TS,
        RunField.REQUESTER,
        RunField.TEXT,
        RunField.STATUS,
        RunField.CREATED_AT,
        RunField.MESSAGE_TS,
        RunField.CARD_TS,
        RunField.JOB_ID,
        RunField.ATTEMPTS,
        RunField.SOURCE_URL,
        RunField.FOLLOWS,
        RunField.REQUESTED,
    }
)

# Lua functions for other owners' scripts that read or write the run hash (prepend them).
_IS_ACTIVE = " or ".join(f"status == '{status}'" for status in ACTIVE_STATUSES)
RUN_STATUS_LUA = f"""
local function run_status(key)
  return redis.call('HGET', key, '{RunField.STATUS}')
end
local function run_active(status)
  return {_IS_ACTIVE}
end
"""
LEASE_HOLDER_LUA = f"""
local function record_lease_holder(key, holder, token)
  redis.call('HSET', key, '{RunField.LEASED_BY}', holder, '{RunField.LEASE_TOKEN}', token)
end
"""

# KEYS: 1 thread claim, 2 run hash, 3 messages, 4 active runs, 5 the thread's early replies, 6 inbox.
# ARGV: 1 run id, 2 fields, 3 message, 4 now, 5.. the messages after the first (an undo's stored call).
_CREATE = (
    ADOPT_EARLY_LUA
    + """
local existing = redis.call('GET', KEYS[1])
if existing then return existing end
redis.call('SET', KEYS[1], ARGV[1])
redis.call('HSET', KEYS[2], unpack(cjson.decode(ARGV[2])))
redis.call('RPUSH', KEYS[3], ARGV[3])
for i = 5, #ARGV do redis.call('RPUSH', KEYS[3], ARGV[i]) end
redis.call('ZADD', KEYS[4], ARGV[4], ARGV[1])
adopt_early(KEYS[5], KEYS[6])
return ARGV[1]
"""
)
# KEYS: 1 runs reporting, 2 run hash. ARGV: 1 now, 2 run id, 3 the offered tools' JSON ('' : none).
# The tools are written once, on a record that still exists: the first segment's list stays, and
# is returned when it was there already (a job that read the record before another wrote it).
_START_REPORTING = f"""
redis.call('ZADD', KEYS[1], ARGV[1], ARGV[2])
if ARGV[3] ~= '' and redis.call('EXISTS', KEYS[2]) == 1 then
  if redis.call('HSETNX', KEYS[2], '{RunField.OFFERED_TOOLS}', ARGV[3]) == 0 then
    return redis.call('HGET', KEYS[2], '{RunField.OFFERED_TOOLS}')
  end
end
return false
"""
# KEYS: 1 run hash. ARGV: 1 the Findings message's ts. Written once, on a record that still
# exists; the ts that stands is returned (another job's, if it wrote first; false: no record).
_CLAIM_FINDINGS_TS = f"""
if redis.call('EXISTS', KEYS[1]) == 0 then return false end
redis.call('HSETNX', KEYS[1], '{RunField.FINDINGS_TS}', ARGV[1])
return redis.call('HGET', KEYS[1], '{RunField.FINDINGS_TS}')
"""
# KEYS: 1 thread claim. ARGV: 1 the run id it must still name.
_RELEASE_CLAIM = """
if redis.call('GET', KEYS[1]) ~= ARGV[1] then return 0 end
return redis.call('DEL', KEYS[1])
"""
# The record's part of ``RedisMemory``'s terminal write (``agent.redis_memory.TerminalExtension``).
# ext_keys: 1 active runs, 2 the thread's claim (1 again when the record names no thread), 3.. the
# run's keys other owners keep, which expire with it. p.ext.has_thread: whether 2 is a claim.
_RUN_END = """
for i = 3, #ext_keys do redis.call('EXPIRE', ext_keys[i], p.retention) end
redis.call('ZREM', ext_keys[1], p.run_id)
if p.ext.has_thread and redis.call('GET', ext_keys[2]) == p.run_id then redis.call('DEL', ext_keys[2]) end
"""


class OfferedTool(BaseModel):
    """One tool of a run's list as its first segment offered it: the definition the model was
    shown, the category the policy judged it by, and where it came from (for the error a call
    of it answers once that source stopped listing it: ``"MCP server git"``, or ``""``)."""

    model_config = ConfigDict(frozen=True)

    definition: ToolDef
    category: ToolCategory
    source: str = ""


_OFFERED = TypeAdapter(list[OfferedTool])


class RunRecord(BaseModel):
    """The run record, every field of it; ``state()`` is the loop's half of the same hash."""

    run_id: str
    channel: str
    thread_ts: str
    requester: str
    text: str = ""
    status: RunStatus = RunStatus.QUEUED
    created_at: float = 0.0
    message_ts: str = ""
    card_ts: str = ""
    job_id: str = ""
    attempts: int = 0
    stop_requested_by: str = ""
    leased_by: str = ""
    lease_token: int = 0
    reported: tuple[str, ...] = ()
    suspended_call: str = ""
    source_url: str = ""
    # The JSON of the run's ``OfferedTool`` list, decoded only by ``tools_offered`` (the worker's
    # job): every other reader of a record (the web process's clicks and replies) skips the work.
    offered_tools: str = ""
    follows: str = ""
    findings_ts: str = ""  # the Findings message (``bot.slack.delivery.findings_message``)
    # What people asked of the run, for the provenance of its calls (``agent.provenance``): an
    # alert's target and labels as its route gave them; "" for a mention, whose text it is.
    requested: str = ""
    _hash: dict[str, str] = PrivateAttr(default_factory=dict)

    @field_validator("reported", mode="before")
    @classmethod
    def _steps(cls, value: object) -> object:
        return tuple(step for step in value.split(",") if step) if isinstance(value, str) else value

    def tools_offered(self) -> tuple[OfferedTool, ...] | None:
        """The tools the run's first segment offered; ``None``: no list recorded yet (the first job
        has not begun, or began before there was one)."""
        return tuple(_OFFERED.validate_json(self.offered_tools)) if self.offered_tools else None

    @classmethod
    def from_hash(cls, raw: dict[bytes | str, bytes | str]) -> RunRecord:
        data = as_text_dict(raw)
        record = cls.model_validate({k: v for k, v in data.items() if k in cls.model_fields and v != ""})
        record._hash = data
        return record

    def state(self) -> RunState | None:
        """The loop's state as it was read with this record; ``None`` when the loop never saved one."""
        return decode_state(self._hash)

    def ended_at(self) -> float | None:
        """When the run ended (its terminal state's write); ``None`` while it has not."""
        saved = self._hash.get(SAVED_AT_FIELD)
        if not self.status.terminal or not saved:
            return None
        try:
            return float(saved)
        except ValueError:
            return None

    def ref(self) -> RunRef:
        """Where the run talks (for the presenter)."""
        return RunRef(
            self.run_id,
            self.channel,
            self.thread_ts,
            self.requester,
            self.card_ts or None,
            self.source_url,
            self.follows,
        )

    @property
    def requested_text(self) -> str:
        """What a person wrote to start the run: the mention's text, or an alert's ``requested``."""
        return self.requested or self.text

    def created_fields(self) -> dict[str, Any]:
        """The fields ``create`` writes, JSON-ready."""
        return self.model_dump(mode="json", include=set(_CREATED))


class RunRecords:
    """Create, read and update run records and their indexes (the only code that knows their fields)."""

    def __init__(self, redis_client: redis.Redis, keys: Keys) -> None:
        self._redis = redis_client
        self._keys = keys
        self._create = redis_client.register_script(_CREATE)
        self._release = redis_client.register_script(_RELEASE_CLAIM)
        self._start_reporting = redis_client.register_script(_START_REPORTING)
        self._claim_findings_ts = redis_client.register_script(_CLAIM_FINDINGS_TS)

    # -- reading --------------------------------------------------------------------------------

    def get(self, run_id: str) -> RunRecord | None:
        raw = self._redis.hgetall(self._keys.run(run_id))
        return RunRecord.from_hash(raw) if raw else None

    def exists(self, run_id: str) -> bool:
        return bool(self._redis.exists(self._keys.run(run_id)))

    def get_many(self, run_ids: Sequence[str]) -> list[RunRecord]:
        """The records of ``run_ids`` that are there, read in one round trip."""
        if not run_ids:
            return []
        pipe = self._redis.pipeline(transaction=False)
        for run_id in run_ids:
            pipe.hgetall(self._keys.run(run_id))
        records = []
        for raw in pipe.execute():
            try:
                records.append(RunRecord.from_hash(raw))
            except ValidationError:  # expired since its id was found, or not a run record
                continue
        return records

    def scan_ids(self, prefix: str = "", on_progress: Callable[[int, int], None] | None = None) -> list[str]:
        """Ids of run records whose id starts with ``prefix`` (a SCAN: cost grows with the keyspace).

        ``on_progress(keys seen, runs found)`` is called every 500 keys.
        """
        base = self._keys.run("x")[:-1]
        found: list[str] = []
        for seen, raw in enumerate(self._redis.scan_iter(match=self._keys.run(f"{prefix}*"), count=1000), 1):
            if on_progress is not None and seen % 500 == 0:
                on_progress(seen, len(found))
            run_id = (as_text(raw) or "")[len(base) :]
            if run_id and ":" not in run_id:
                found.append(run_id)
        return found

    def active_run(self, channel: str, thread_ts: str) -> str | None:
        """The id the thread's claim names: its active run."""
        return as_text(self._redis.get(self._keys.thread(channel, thread_ts)))

    def read_active_run(self, pipeline: redis.client.Pipeline, channel: str, thread_ts: str) -> None:
        """``active_run`` queued on the caller's ``pipeline`` (its answer: ``as_text`` of it)."""
        pipeline.get(self._keys.thread(channel, thread_ts))

    def sweep_views(self, run_ids: Sequence[str]) -> dict[str, SweepView | None]:
        """Each run's status and last job, read in one round trip (the recovery sweep's look at
        every active run, ``bot.runs.recovery``). ``None``: the record is gone. A record whose status
        is not a run status (a foreign writer's) is left out: nothing can be decided about it."""
        if not run_ids:
            return {}
        pipe = self._redis.pipeline(transaction=False)
        for run_id in run_ids:
            pipe.hmget(self._keys.run(run_id), [RunField.STATUS, RunField.JOB_ID])
        views: dict[str, SweepView | None] = {}
        for run_id, (status, job_id) in zip(run_ids, pipe.execute(), strict=True):
            if status is None:
                views[run_id] = None
                continue
            try:
                views[run_id] = SweepView(RunStatus(as_text(status) or ""), as_text(job_id) or "")
            except ValueError:
                continue
        return views

    def active_ids(self) -> list[str]:
        return _ids(self._redis.zrange(self._keys.active_runs(), 0, -1))

    def active_statuses(self) -> list[str]:
        """The status of every run in the active set (one round trip for all of them)."""
        run_ids = self.active_ids()
        if not run_ids:
            return []
        pipe = self._redis.pipeline(transaction=False)
        for run_id in run_ids:
            pipe.hget(self._keys.run(run_id), RunField.STATUS)
        return [text for text in (as_text(s) for s in pipe.execute()) if text]

    def stop_requested(self, run_id: str) -> bool:
        return bool(self._redis.hexists(self._keys.run(run_id), RunField.STOP_REQUESTED_BY))

    def reported_steps(self, run_id: str) -> list[str]:
        raw = as_text(self._redis.hget(self._keys.run(run_id), RunField.REPORTED))
        return [step for step in (raw or "").split(",") if step]

    def findings_ts(self, run_id: str) -> str | None:
        """The ts of the run's Findings message, once one was posted and recorded."""
        return as_text(self._redis.hget(self._keys.run(run_id), RunField.FINDINGS_TS)) or None

    def suspended_call(self, run_id: str) -> str | None:
        return as_text(self._redis.hget(self._keys.run(run_id), RunField.SUSPENDED_CALL))

    def reporting_ids(self) -> list[str]:
        return _ids(self._redis.zrange(self._keys.reporting(), 0, -1))

    def reporting_since(self, run_id: str) -> float | None:
        """When the job that is to report the run began it; ``None`` when nothing is left to report."""
        since = self._redis.zscore(self._keys.reporting(), run_id)
        return None if since is None else float(since)

    # -- writing --------------------------------------------------------------------------------

    def create(self, record: RunRecord, first: Message, *then: Message) -> str:
        """Store the record, its first message (and ``then``, the messages after it: an undo's
        stored call, ``bot.slack.handlers.undo_clicks``) and the thread's claim in one script, unless the
        thread has an active run: returns the id of the run the claim names (``record.run_id``
        when this one was created). A claim naming a record that is gone (deleted by hand) is
        dropped and the creation tried again, once."""
        fields = [item for k, v in record.created_fields().items() for item in (k, str(v))]
        keys = [
            self._keys.thread(record.channel, record.thread_ts),
            self._keys.run(record.run_id),
            self._keys.messages(record.run_id),
            self._keys.active_runs(),
            self._keys.early_replies(record.channel, record.thread_ts),  # replies that came first
            self._keys.inbox(record.run_id),
        ]
        args = [record.run_id, json.dumps(fields), first.model_dump_json(), repr(record.created_at)]
        args += [message.model_dump_json() for message in then]
        for _ in range(2):
            stored = as_text(self._create(keys=keys, args=args)) or ""
            if stored == record.run_id or not self._release_stale_claim(keys[0], stored):
                break
        return stored

    def _release_stale_claim(self, claim: str, run_id: str) -> bool:
        """Free a thread claimed by a run whose record is gone; True if freed."""
        if self.exists(run_id):
            return False
        return bool(self._release(keys=[claim], args=[run_id]))

    def request_stop(self, run_id: str, user: str) -> None:
        self._redis.hset(self._keys.run(run_id), RunField.STOP_REQUESTED_BY, user)

    def set_job(self, run_id: str, job_id: str) -> None:
        hset_if_exists(self._redis, self._keys.run(run_id), {RunField.JOB_ID: job_id})

    def set_card(self, run_id: str, card_ts: str) -> None:
        self._redis.hset(self._keys.run(run_id), RunField.CARD_TS, card_ts)

    def claim_findings_ts(self, run_id: str, ts: str) -> str | None:
        """Record ``ts`` as the run's Findings message unless one is recorded already (one script:
        two jobs that posted one each keep the first); the ts that stands, ``None`` when the record
        is gone. A run resumed on another worker edits that message, never posts a second."""
        return as_text(self._claim_findings_ts(keys=[self._keys.run(run_id)], args=[ts]))

    def count_attempt(self, run_id: str) -> int:
        """One more job began the run's loop: the number since its last clean end."""
        return int(self._redis.hincrby(self._keys.run(run_id), RunField.ATTEMPTS, 1))

    def reset_attempts(self, run_id: str) -> None:
        """A clean end of a segment: the crash counter restarts."""
        self._redis.hset(self._keys.run(run_id), RunField.ATTEMPTS, 0)

    def mark_reported(self, run_id: str, steps: list[str]) -> None:
        hset_if_exists(self._redis, self._keys.run(run_id), {RunField.REPORTED: ",".join(steps)})

    def mark_suspended(self, run_id: str, call_id: str) -> None:
        hset_if_exists(self._redis, self._keys.run(run_id), {RunField.SUSPENDED_CALL: call_id})

    def start_reporting(
        self, run_id: str, now: float, tools: Sequence[OfferedTool] | None = None
    ) -> tuple[OfferedTool, ...] | None:
        """Until its report is done, the run is swept for (``bot.runs.service.RunService.recover``).

        ``tools``: the list the run's first segment offers, recorded in the same script unless the
        record is gone or has a list already: then that list is returned (the run keeps it)."""
        offered = _OFFERED.dump_json(list(tools)).decode() if tools is not None else ""
        stored = as_text(
            self._start_reporting(
                keys=[self._keys.reporting(), self._keys.run(run_id)], args=[repr(now), run_id, offered]
            )
        )
        return tuple(_OFFERED.validate_json(stored)) if stored else None

    def done_reporting(self, run_id: str) -> None:
        self._redis.zrem(self._keys.reporting(), run_id)

    def forget_active(self, run_id: str) -> None:
        """Drop a run whose record is gone from the active set."""
        self._redis.zrem(self._keys.active_runs(), run_id)

    def run_end(self, expiring: Callable[[str], list[str]]) -> RunEnd:
        """The record's part of a run's terminal write; ``expiring(run_id)``: the run's keys other
        owners keep (its fence, its approvals) that expire with it."""
        return RunEnd(self._redis, self._keys, expiring)


@dataclass(frozen=True)
class RunEnd:
    """``agent.redis_memory.TerminalExtension`` for chatops: in the write that ends a run, expire
    the run's other keys, take the run out of the active set and free its thread's claim."""

    client: redis.Redis
    keys: Keys
    expiring: Callable[[str], list[str]]
    lua: str = _RUN_END

    def step(self, run_id: str) -> TerminalStep:
        channel, thread_ts = (
            as_text(value) or ""
            for value in self.client.hmget(self.keys.run(run_id), [RunField.CHANNEL, RunField.THREAD_TS])
        )
        active = self.keys.active_runs()
        claim = self.keys.thread(channel, thread_ts) if channel and thread_ts else None
        return TerminalStep(
            [active, claim or active, *self.expiring(run_id)], {"has_thread": claim is not None}
        )


def _ids(members: Any) -> list[str]:
    return [as_text(member) or "" for member in cast("list[bytes]", members)]


def active_runs_by_status(client: redis.Redis, keys: Keys) -> dict[str, int]:
    """How many runs are active, by status, every active status present (zeros included), for the
    ``chatops_runs_active`` gauge (``bot.observability.metrics_collector``)."""
    counts = {status.value: 0 for status in ACTIVE_STATUSES}
    for status in RunRecords(client, keys).active_statuses():
        counts[status] = counts.get(status, 0) + 1
    return counts
