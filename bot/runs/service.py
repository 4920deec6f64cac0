"""Run records, their options, and ``RunService``: what the web process and the worker do with runs.

Lifecycle (``status`` in the run hash)::

    queued -> running -> (awaiting_approval -> running)* -> completed | failed | iteration_limit
                                                            | deadline | budget | loop_detected | cancelled

``submit`` creates the record, the first user message and the thread's active-run claim in one
script (exactly one active run per channel + thread), then enqueues ``bot.runs.jobs.start``. The
worker's ``RedisMemory`` drops the claim when it writes a terminal status. ``deliver`` puts a
thread reply in the run's inbox (superseding a pending approval), ``decide`` settles an approval;
both enqueue ``bot.runs.jobs.resume`` when the run must continue. ``recover`` finds runs whose worker
died (no lease, no live job) and re-enqueues them.
"""

from __future__ import annotations

import json
import math
import time
import uuid
from collections.abc import Callable
from dataclasses import dataclass, field
from datetime import UTC, datetime, timedelta
from typing import cast

import redis
from pydantic import BaseModel
from rq import Queue, Retry
from rq.exceptions import NoSuchJobError
from rq.job import Job, JobStatus

from agent.keys import Keys
from agent.redis_memory import DEFAULT_RETENTION_SECONDS, RedisMemory, as_text, hset_if_exists
from agent.types import Limits, Message, RunStatus
from bot.errors import ApprovalNotFoundError, NotAnApproverError
from bot.logs import redactor_for
from bot.runs.approvals import (
    EXPIRED_REASON,
    SYSTEM_DECIDER,
    Approvals,
    ApprovalStatus,
    DecideOutcome,
    DecideResult,
)
from bot.runs.audit import AuditLog
from bot.runs.inbox import Delivery, Inbox
from bot.settings import Settings
from tools.safety import Redactor

JOB_START = "bot.runs.jobs.start"
JOB_RESUME = "bot.runs.jobs.resume"
JOB_EXPIRE = "bot.runs.jobs.expire_approval"
STOP_FIELD = "stop_requested_by"  # in the run hash: who pressed Stop (the loop's stop predicate reads it)
# Beyond the run's own deadline: the last tool's grace, Redis writes, the presenter.
JOB_TIMEOUT_MARGIN_SECONDS = 120
_LIVE_JOB = {JobStatus.QUEUED, JobStatus.SCHEDULED, JobStatus.DEFERRED, JobStatus.STARTED}
_SEGMENT_ENDED = {status for status in RunStatus if status.terminal} | {RunStatus.AWAITING_APPROVAL}
# A scheduled job this late has no live scheduler: the one holding the queue's scheduler lock died,
# and RQ frees that lock only after a minute. Every live scheduler polls once a second.
OVERDUE_SCHEDULED_SECONDS = 5

# KEYS: 1 thread claim, 2 run hash, 3 messages, 4 active runs. ARGV: 1 run id, 2 fields, 3 message, 4 now.
_CREATE = """
local existing = redis.call('GET', KEYS[1])
if existing then return existing end
redis.call('SET', KEYS[1], ARGV[1])
redis.call('HSET', KEYS[2], unpack(cjson.decode(ARGV[2])))
redis.call('RPUSH', KEYS[3], ARGV[3])
redis.call('ZADD', KEYS[4], ARGV[4], ARGV[1])
return ARGV[1]
"""

# KEYS: 1 thread claim. ARGV: 1 the run id it must still name.
_RELEASE_CLAIM = """
if redis.call('GET', KEYS[1]) ~= ARGV[1] then return 0 end
return redis.call('DEL', KEYS[1])
"""


@dataclass(frozen=True)
class RunOptions:
    """The knobs shared by the web process and the workers (from ``Settings``)."""

    queue_name: str = "chatops"
    retention_seconds: int = DEFAULT_RETENTION_SECONDS
    audit_max_len: int = 1_000_000
    lease_ttl_seconds: float = 30.0
    approval_timeout_seconds: float = 1800.0
    job_retries: int = 3
    max_attempts: int = 5
    limits: Limits = field(default_factory=Limits)
    approvers: tuple[str, ...] = ()
    max_mutating_actions: int = 0  # per run (``bot.runs.limits``); 0: no cap
    redactor: Redactor | None = None  # what the audit stream stores passes through it (known secrets)

    @classmethod
    def from_settings(cls, settings: Settings) -> RunOptions:
        return cls(
            queue_name=settings.chatops_queue,
            retention_seconds=settings.chatops_retention_days * 24 * 3600,
            audit_max_len=settings.chatops_audit_max_len,
            lease_ttl_seconds=settings.chatops_lease_ttl_seconds,
            approval_timeout_seconds=settings.chatops_approval_timeout_seconds,
            job_retries=settings.chatops_job_retries,
            max_attempts=settings.chatops_max_run_attempts,
            limits=Limits(
                max_iterations=settings.chatops_max_iterations,
                deadline_seconds=settings.chatops_deadline_seconds,
                token_budget=settings.chatops_token_budget,
                max_calls_per_turn=settings.chatops_max_calls_per_turn,
            ),
            approvers=tuple(settings.chatops_approvers),
            max_mutating_actions=settings.chatops_max_mutating_actions,
            redactor=redactor_for(settings),
        )

    @property
    def job_timeout(self) -> int:
        """A job never outlives the run's deadline (the loop stops itself first)."""
        return int(self.limits.deadline_seconds) + JOB_TIMEOUT_MARGIN_SECONDS

    @property
    def retry(self) -> Retry | None:
        """Retry after the dead job's lease has run out, so the retry can take the run."""
        if self.job_retries < 1:
            return None
        return Retry(max=self.job_retries, interval=math.ceil(self.lease_ttl_seconds))


def _names_a_group(approvers: tuple[str, ...]) -> bool:
    """User groups (``S…``) are resolved by the Slack policy, which has the Web API to do it."""
    return any(entry.startswith("S") for entry in approvers)


class RunRecord(BaseModel):
    """The record half of the run hash (the ``RunState`` half belongs to the loop)."""

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

    @classmethod
    def from_hash(cls, raw: dict[bytes | str, bytes | str]) -> RunRecord:
        data = {as_text(k) or "": as_text(v) or "" for k, v in raw.items()}
        return cls.model_validate({k: v for k, v in data.items() if k in cls.model_fields and v != ""})


@dataclass(frozen=True)
class Submission:
    run_id: str
    created: bool  # False: the thread already had an active run (``run_id`` is that one)


@dataclass
class RunService:
    """Start runs, deliver replies, settle approvals, recover runs; for web and worker alike."""

    redis: redis.Redis
    keys: Keys
    options: RunOptions
    clock: Callable[[], float] = time.time
    queue: Queue = field(init=False)
    approvals: Approvals = field(init=False)
    inbox: Inbox = field(init=False)
    audit: AuditLog = field(init=False)

    def __post_init__(self) -> None:
        self.queue = Queue(self.options.queue_name, connection=self.redis)
        self.approvals = Approvals(self.redis, self.keys, retention_seconds=self.options.retention_seconds)
        self.inbox = Inbox(self.redis, self.keys, clock=self.clock)
        self.audit = AuditLog(
            self.redis,
            self.keys,
            max_len=self.options.audit_max_len,
            clock=self.clock,
            redactor=self.options.redactor,
        )
        self._create = self.redis.register_script(_CREATE)
        self._release = self.redis.register_script(_RELEASE_CLAIM)

    # -- reading --------------------------------------------------------------------------------

    def get(self, run_id: str) -> RunRecord | None:
        raw = self.redis.hgetall(self.keys.run(run_id))
        return RunRecord.from_hash(raw) if raw else None

    def history(self, run_id: str) -> list[Message]:
        return RedisMemory(self.redis, self.keys, run_id).load_messages()

    def active_run(self, channel: str, thread_ts: str) -> str | None:
        return as_text(self.redis.get(self.keys.thread(channel, thread_ts)))

    # -- the three flows ----------------------------------------------------------------------------

    def submit(
        self, channel: str, thread_ts: str, *, requester: str, text: str, message_ts: str = ""
    ) -> Submission:
        """Create a run for a mention and enqueue it, unless the thread already has an active run."""
        record = RunRecord(
            run_id=uuid.uuid4().hex,
            channel=channel,
            thread_ts=thread_ts,
            requester=requester,
            text=text,
            created_at=self.clock(),
            message_ts=message_ts,
            job_id=str(uuid.uuid4()),  # the start job's id, stored with the record (no second write)
        )
        first = Message.user(text, slack_user=requester, ts=message_ts or thread_ts)
        fields = [item for k, v in record.model_dump(mode="json").items() for item in (k, str(v))]
        for _ in range(2):
            stored = as_text(
                self._create(
                    keys=[
                        self.keys.thread(channel, thread_ts),
                        self.keys.run(record.run_id),
                        self.keys.messages(record.run_id),
                        self.keys.active_runs(),
                    ],
                    args=[
                        record.run_id,
                        json.dumps(fields),
                        first.model_dump_json(),
                        repr(record.created_at),
                    ],
                )
            )
            if stored == record.run_id or not self._release_stale_claim(channel, thread_ts, stored or ""):
                break
        if stored != record.run_id:
            return Submission(stored or "", created=False)
        self.enqueue(record.run_id, first=True, job_id=record.job_id)
        return Submission(record.run_id, created=True)

    def _release_stale_claim(self, channel: str, thread_ts: str, run_id: str) -> bool:
        """Free a thread claimed by a run whose record is gone (deleted by hand); True if freed."""
        if self.get(run_id) is not None:
            return False
        return bool(self._release(keys=[self.keys.thread(channel, thread_ts)], args=[run_id]))

    def deliver(
        self, channel: str, thread_ts: str, *, user: str, text: str, ts: str, may_supersede: bool = False
    ) -> Delivery:
        """Store a thread reply for the active run; acknowledge it only if ``delivery.stored``.

        ``may_supersede`` (the web process's approver policy: may ``user`` decide?) lets the reply
        supersede a pending approval and resume the run; otherwise the reply waits in the inbox
        and the model reads it when the run resumes after the decision.
        """
        delivery = self.inbox.deliver(
            channel, thread_ts, user=user, text=text, ts=ts, may_supersede=may_supersede
        )
        if delivery.superseded and delivery.run_id:
            for approval_id in delivery.superseded:
                approval = self.approvals.get(approval_id)
                if approval is not None:
                    self.audit.approval_decided(approval)
            self.enqueue(delivery.run_id)
        return delivery

    def decide(
        self,
        approval_id: str,
        *,
        user: str,
        approve: bool,
        reason: str = "",
        card: tuple[str, str] | None = None,
    ) -> DecideResult:
        """Settle an approval (the first decision wins) and resume its run.

        ``card``: the (channel, ts) of the message a click came from; a click decides only its
        own card. Who may decide is the transport's policy (``bot.slack.approvers``), checked
        before this is called; ``CHATOPS_APPROVERS`` is checked here too, for every caller.
        """
        if (
            self.options.approvers
            and user not in self.options.approvers
            and not _names_a_group(self.options.approvers)
        ):
            raise NotAnApproverError(user)
        status = ApprovalStatus.APPROVED if approve else ApprovalStatus.DECLINED
        if not approve and not reason:
            reason = f"not approved by {user}"
        result = self.approvals.decide(approval_id, status, user, reason, card=card)
        if result is None:
            raise ApprovalNotFoundError(approval_id)
        self._settled(result)
        return result

    def expire(self, approval_id: str) -> DecideResult | None:
        """The scheduled expiry: decline a still-pending approval as expired and resume its run.

        Due by Redis's clock, not the scheduler's: a job that ran early (its host's clock is ahead)
        is scheduled again for the rest of the time and decides nothing now.
        """
        result = self.approvals.decide(
            approval_id, ApprovalStatus.EXPIRED, SYSTEM_DECIDER, EXPIRED_REASON, only_if_due=True
        )
        if result is not None and result.outcome is DecideOutcome.NOT_DUE:
            remaining = self.approvals.seconds_until_expiry(approval_id)
            if remaining is not None:
                self.queue.enqueue_in(
                    timedelta(seconds=max(1.0, remaining)),
                    JOB_EXPIRE,
                    approval_id,
                    description=f"expire approval {approval_id}",
                )
            return result
        if result is not None:
            self._settled(result)
        return result

    def _settled(self, result: DecideResult) -> None:
        """Audit a decision this call made (won, or settled as expired) and resume the run."""
        if result.outcome in (DecideOutcome.WON, DecideOutcome.EXPIRED):
            self.audit.approval_decided(result.approval)
            self.enqueue(result.approval.run_id)

    def request_stop(self, run_id: str, user: str) -> bool:
        """Ask a run to stop (the Stop button); False when it has already ended.

        The loop ends as ``cancelled`` after the step in progress. A run waiting for an approval
        has its pending approvals declined and is resumed, so it ends now rather than at expiry.
        """
        record = self.get(run_id)
        if record is None or record.status.terminal:
            return False
        self.redis.hset(self.keys.run(run_id), STOP_FIELD, user)
        if record.status is RunStatus.AWAITING_APPROVAL:
            for approval in self.approvals.for_run(run_id):
                if approval.status is ApprovalStatus.PENDING:
                    result = self.approvals.decide(
                        approval.id, ApprovalStatus.DECLINED, user, f"the run was stopped by {user}"
                    )
                    if result is not None and result.won:
                        self.audit.approval_decided(result.approval)
            self.enqueue(run_id)
        return True

    def stop_requested(self, run_id: str) -> bool:
        return bool(self.redis.hexists(self.keys.run(run_id), STOP_FIELD))

    def claim_event(self, event_id: str, ttl_seconds: int = 24 * 3600) -> bool:
        """True the first time a Slack event id is seen (``SET NX``); retries of it answer False."""
        return bool(self.redis.set(self.keys.seen_event(event_id), "1", nx=True, ex=ttl_seconds))

    # -- jobs -----------------------------------------------------------------------------------

    def enqueue(
        self, run_id: str, *, first: bool = False, delay: float | None = None, job_id: str | None = None
    ) -> Job:
        """Enqueue (or schedule) the job that works on the run; it is safe to enqueue one too many.

        ``job_id``: the id the run record already names (``submit`` stores it with the record).
        """
        options = {
            "job_timeout": self.options.job_timeout,
            "retry": self.options.retry,
            "description": f"{'start' if first else 'resume'} run {run_id}",
            "failure_ttl": self.options.retention_seconds,
            "job_id": job_id,
        }
        function = JOB_START if first else JOB_RESUME
        if delay:
            job = self.queue.enqueue_in(timedelta(seconds=delay), function, run_id, **options)
        else:
            # One round trip: RQ registers the queue and stores and pushes the job in one MULTI/EXEC.
            pipeline = self.redis.pipeline()
            job = self.queue.enqueue(function, run_id, pipeline=pipeline, **options)
            pipeline.execute()
        if job_id is None:
            hset_if_exists(self.redis, self.keys.run(run_id), {"job_id": job.id})
        return job

    def schedule_expiry(self, approval_id: str, expires_at: float) -> Job:
        when = datetime.fromtimestamp(expires_at, UTC)
        job: Job = self.queue.enqueue_at(
            when, JOB_EXPIRE, approval_id, description=f"expire approval {approval_id}"
        )
        return job

    # -- recovery -------------------------------------------------------------------------------

    def recover(self) -> list[str]:
        """Re-enqueue active runs nobody works on, and expire overdue approvals; returns run ids resumed.

        A run needs help when it is ``queued`` or ``running``, no worker holds its lease and its
        last job is not queued, running, or scheduled and due within seconds: its worker died.
        Enqueuing a run that did not need it is harmless (the job finds the lease taken or the run
        finished).
        """
        resumed = []
        run_ids = cast("list[bytes]", self.redis.zrange(self.keys.active_runs(), 0, -1))
        for raw_id in run_ids:
            run_id = as_text(raw_id) or ""
            record = self.get(run_id)
            if record is None:
                self.redis.zrem(self.keys.active_runs(), run_id)
                continue
            if record.status is RunStatus.AWAITING_APPROVAL and self._still_waiting(run_id):
                continue
            if not record.status.terminal and self._abandoned(record):
                self.enqueue(run_id)
                resumed.append(run_id)
        # Runs whose segment ended but whose job did not tell the thread everything: it died, or
        # Slack did not take the card's final state in time (also for a run awaiting approval).
        for raw_id in cast("list[bytes]", self.redis.zrange(self.keys.reporting(), 0, -1)):
            run_id = as_text(raw_id) or ""
            record = self.get(run_id)
            if record is None:
                self.redis.zrem(self.keys.reporting(), run_id)
            elif record.status in _SEGMENT_ENDED and self._abandoned(record):
                self.enqueue(run_id)
                resumed.append(run_id)
        return resumed

    def reporting(self, run_id: str) -> bool:
        """Whether the run's final report (audit entry, answer, notice) is not done yet."""
        return self.redis.zscore(self.keys.reporting(), run_id) is not None

    def _still_waiting(self, run_id: str) -> bool:
        """Expire overdue approvals; True while one is pending (a decision enqueues the resume)."""
        waiting = False
        for approval in self.approvals.for_run(run_id):
            if approval.status is ApprovalStatus.PENDING:
                if approval.expires_at < self.clock():
                    self.expire(approval.id)
                else:
                    waiting = True
        # Nothing pending any more but the run still waits: its resume was lost (a race with the
        # job that was suspending it); the caller re-enqueues it if no job is on it.
        return waiting

    def _abandoned(self, record: RunRecord) -> bool:
        if self.redis.exists(self.keys.lease(record.run_id)):
            return False
        if not record.job_id:
            return True
        try:
            job = Job.fetch(record.job_id, connection=self.redis)
        except NoSuchJobError:
            return True
        status = job.get_status()
        if status is JobStatus.SCHEDULED:
            return self._overdue(job)
        # A started job without a lease is a dead worker's: a live one renews its lease.
        return status not in _LIVE_JOB or status is JobStatus.STARTED

    def _overdue(self, job: Job) -> bool:
        """A scheduled job (an RQ retry, a deferred resume) that no scheduler enqueued in time."""
        try:
            due = self.queue.scheduled_job_registry.get_scheduled_time(job)
        except NoSuchJobError:
            return True
        return bool(due.timestamp() < self.clock() - OVERDUE_SCHEDULED_SECONDS)
