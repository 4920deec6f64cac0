"""Run options and ``RunService``: what the web process and the worker do with runs.

Lifecycle (``status`` in the run hash)::

    queued -> running -> ((awaiting_approval | budget) -> running)* -> completed | failed | iteration_limit
                                                     | deadline | budget_spent | loop_detected | cancelled

``budget`` is a suspension (the run reached its token budget; its budget card's Extend resumes it,
its Stop ends it ``cancelled``: ``bot.runs.budget_gate``), like ``awaiting_approval``; the terminal
``budget_spent`` is only a loop's without a budget gate (the agent library alone).

``submit`` creates the record, the first user message and the thread's active-run claim in one
script (exactly one active run per channel + thread; ``bot.runs.record`` owns them), then enqueues
its ``start`` job. The worker's memory (``memory``: a ``RedisMemory`` with the record's ``RunEnd``)
drops the claim when it writes a terminal status. ``deliver`` puts a
thread reply in the run's inbox (superseding a pending approval); ``lifecycle.decide`` settles an
approval (``lifecycle``: every approval transition, ``bot.runs.approval_lifecycle``); both enqueue
the run's ``resume`` job when it must continue (every job goes through ``jobs``, ``bot.runs.queueing``).
``recover`` finds runs whose worker died (no lease, no live job) and re-enqueues them.
"""

from __future__ import annotations

import math
import time
import uuid
from collections.abc import Callable, Sequence
from dataclasses import dataclass, field

import redis
from redis.client import Pipeline
from rq import Queue, Retry
from rq.job import Job

from agent.redis_memory import DEFAULT_RETENTION_SECONDS, RedisMemory
from agent.redis_util import redis_clock
from agent.types import Limits, Message, RunStatus
from bot.fleet.grants import GRANT_LIFETIME_SECONDS, GrantSigner
from bot.keys import Keys
from bot.observability.audit import AuditKind, AuditLog
from bot.observability.logs import redactor_for
from bot.policy.deciders import Deciders
from bot.prices import Prices
from bot.runs.approval_lifecycle import ApprovalLifecycle
from bot.runs.approval_seal import ApprovalSeal
from bot.runs.approval_votes import ApprovalVotes
from bot.runs.approvals import Approval, Approvals
from bot.runs.budget_asks import BudgetAsks, BudgetSeal, BudgetStatus
from bot.runs.budget_lifecycle import BudgetLifecycle
from bot.runs.inbox import Delivery, Inbox
from bot.runs.monthly_tokens import MonthlyTokens
from bot.runs.queueing import JobQueue, worker_queue
from bot.runs.record import RunRecord, RunRecords
from bot.runs.recovery import Recovery
from bot.runs.thread_history import Earlier
from bot.runs.undo_offers import UndoOffers, UndoSeal
from bot.settings import DEFAULTS, Settings
from tools.safety import Redactor

# Beyond the run's own deadline: the last tool's grace, Redis writes, the presenter.
JOB_TIMEOUT_MARGIN_SECONDS = 120
# Constants since 0.2.0 (they were CHATOPS_JOB_RETRIES, CHATOPS_MAX_RUN_ATTEMPTS and
# CHATOPS_MAX_PARALLEL_TOOLS); RunOptions takes others where a test needs them.
# RQ retries of a job that failed or whose worker died, each one lease later: a run resumes from Redis,
# so a retry is cheap, and three ride out a worker restart or a deploy; the recovery sweep covers more.
JOB_RETRIES = 3
# Jobs one run may start before it is given up as failed: retries and sweeps together. A run that
# crashes every worker that takes it (a poisoned input) must end visibly, after a few honest tries.
MAX_RUN_ATTEMPTS = 5
# Read-only calls of one turn at once: enough to check a fleet's worth of targets in one round trip
# each, few enough that a worker's threads and the tools' connections stay bounded.
MAX_PARALLEL_TOOLS = 20


@dataclass(frozen=True)
class RunOptions:
    """The knobs shared by the web process and the workers: from ``Settings`` (whose defaults are
    theirs), and the tuning constants above, which only a test passes otherwise."""

    queue_name: str = DEFAULTS.chatops_queue
    retention_seconds: int = DEFAULT_RETENTION_SECONDS
    audit_max_len: int = DEFAULTS.chatops_audit_max_len
    lease_ttl_seconds: float = DEFAULTS.chatops_lease_ttl_seconds
    approval_timeout_seconds: float = DEFAULTS.chatops_approval_timeout_seconds
    job_retries: int = JOB_RETRIES
    max_attempts: int = MAX_RUN_ATTEMPTS
    limits: Limits = field(default_factory=Limits)
    max_mutating_actions: int = DEFAULTS.chatops_max_mutating_actions  # per run (``bot.runs.limits``)
    redactor: Redactor | None = None  # what the audit stream stores passes through it (known secrets)
    max_parallel_tools: int = MAX_PARALLEL_TOOLS  # read-only calls of one turn at once
    check_seconds: float = DEFAULTS.chatops_check_seconds  # an approved change's check (``agent.checks``)
    undo_minutes: int = (
        DEFAULTS.chatops_undo_minutes
    )  # an executed change's undo offer (``bot.runs.undo_offers``)
    runner_secret: str = ""  # ``CHATOPS_RUNNER_SECRET``: sign a grant at each approval (``bot.fleet.grants``)
    prices: Prices = field(default_factory=lambda: Prices({}))  # ``LLM_PRICES`` (``bot.prices``)
    channel_monthly_tokens: int | None = (
        None  # ``CHATOPS_CHANNEL_MONTHLY_TOKENS`` (``bot.runs.monthly_tokens``)
    )

    @classmethod
    def from_settings(cls, settings: Settings) -> RunOptions:
        return cls(
            queue_name=settings.chatops_queue,
            retention_seconds=settings.chatops_retention_days * 24 * 3600,
            audit_max_len=settings.chatops_audit_max_len,
            lease_ttl_seconds=settings.chatops_lease_ttl_seconds,
            approval_timeout_seconds=settings.chatops_approval_timeout_seconds,
            limits=Limits(
                max_iterations=settings.chatops_max_iterations,
                deadline_seconds=settings.chatops_deadline_seconds,
                token_budget=settings.chatops_token_budget,
            ),
            max_mutating_actions=settings.chatops_max_mutating_actions,
            redactor=redactor_for(settings),
            runner_secret=settings.chatops_runner_secret,
            check_seconds=settings.chatops_check_seconds,
            undo_minutes=settings.chatops_undo_minutes,
            prices=Prices(settings.llm_prices),
            channel_monthly_tokens=settings.chatops_channel_monthly_tokens,
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
    # Who may decide (``bot.policy.deciders``): the web process's, which the lifecycle asks before it
    # settles an approval. A worker decides none and has none.
    deciders: Deciders[Approval] | None = None
    queue: Queue = field(init=False)
    jobs: JobQueue = field(init=False)
    records: RunRecords = field(init=False)
    approvals: Approvals = field(init=False)
    lifecycle: ApprovalLifecycle = field(init=False)
    inbox: Inbox = field(init=False)
    audit: AuditLog = field(init=False)

    def __post_init__(self) -> None:
        options = self.options
        self.records = RunRecords(self.redis, self.keys)
        self.queue = worker_queue(options.queue_name, self.redis)
        self.jobs = JobQueue(
            self.redis,
            self.queue,
            job_timeout=options.job_timeout,
            retry=options.retry,
            failure_ttl=options.retention_seconds,
        )
        self.approvals = Approvals(self.redis, self.keys, retention_seconds=options.retention_seconds)
        self.inbox = Inbox(self.redis, self.keys, clock=self.clock)
        self.audit = AuditLog(
            self.redis, self.keys, max_len=options.audit_max_len, clock=self.clock, redactor=options.redactor
        )
        self.lifecycle = ApprovalLifecycle(
            self.approvals,
            self.audit,
            self.jobs,
            resume=lambda run_id: self.enqueue(run_id),  # late-bound: an embedder may wrap ``enqueue``
            deciders=self.deciders,
            clock=self.clock,
            grants=self._grant_signer(),
            votes=ApprovalVotes(self.redis, self.keys),
            seal=ApprovalSeal.from_secret(options.runner_secret),
        )
        self.undo_offers = UndoOffers(self.redis, self.keys, UndoSeal.from_secret(options.runner_secret))
        self.budget_asks = BudgetAsks(
            self.redis,
            self.keys,
            BudgetSeal.from_secret(options.runner_secret),
            retention_seconds=options.retention_seconds,
        )
        self.budgets = BudgetLifecycle(
            self.budget_asks, self.audit, resume=lambda run_id: self.enqueue(run_id)
        )
        self.monthly = MonthlyTokens(
            self.redis, self.keys, options.channel_monthly_tokens, retention_seconds=options.retention_seconds
        )
        self.recovery = Recovery(
            self.redis,
            self.keys,
            self.records,
            self.jobs,
            self.queue,
            self.lifecycle,
            self.budgets,
            self.clock,
        )

    def _grant_signer(self) -> GrantSigner | None:
        if not self.options.runner_secret:
            return None
        # A grant lives from the click to the runner's pick-up (``GRANT_LIFETIME_SECONDS``), not the
        # approval timeout: the host keeps a record of each spent grant until it expires.
        # Its expiry is on Redis's clock, the one the runner checks it against: a web host whose
        # clock is off can neither stretch a grant's life nor sign grants that are already stale.
        lifetime = min(self.options.approval_timeout_seconds, GRANT_LIFETIME_SECONDS)
        return GrantSigner(self.options.runner_secret.encode(), lifetime, clock=redis_clock(self.redis))

    # -- reading --------------------------------------------------------------------------------

    def get(self, run_id: str) -> RunRecord | None:
        return self.records.get(run_id)

    def history(self, run_id: str) -> list[Message]:
        return RedisMemory(self.redis, self.keys, run_id).load_messages()

    def active_run(self, channel: str, thread_ts: str) -> str | None:
        return self.records.active_run(channel, thread_ts)

    def memory(self, run_id: str, *, fence: int | None = None) -> RedisMemory:
        """The run's memory as a worker writes it: its terminal write also does the record's part
        of the run's end (``RunEnd``), and the run's fence and approvals expire with it."""
        end = self.records.run_end(
            lambda rid: [self.keys.fence(rid), self.keys.budget_ask(rid), *self.approvals.keys_of_run(rid)]
        )
        return RedisMemory(
            self.redis,
            self.keys,
            run_id,
            fence=fence,
            retention_seconds=self.options.retention_seconds,
            lease_ttl_seconds=self.options.lease_ttl_seconds,
            clock=self.clock,
            on_terminal=end,
        )

    # -- the three flows ----------------------------------------------------------------------------

    def submit(
        self,
        channel: str,
        thread_ts: str,
        *,
        requester: str,
        text: str,
        message_ts: str = "",
        source_url: str = "",
        follows: str = "",
        earlier: Earlier | None = None,
        similar: Sequence[str] = (),
        search_similar: bool = False,
        then: Sequence[Message] = (),
        pipeline: Pipeline | None = None,
        requested: str = "",
    ) -> Submission:
        """Create a run for a mention and enqueue it, unless the thread already has an active run.

        ``follows``: the thread's earlier run this one continues; ``earlier``: what the model is to
        read of the thread's earlier runs (``bot.runs.thread_history``), put before the request in
        the first message only (the record's text stays what the person wrote); ``similar``: the
        past incidents it starts from (``bot.memory.notes.similar_lines``), after the request in
        the first message; ``search_similar``: those are searched by the run's first job instead
        (``bot.runs.first_similar``: a mention's run, off the web's ack path); ``then``: messages stored after the first, in the same write (an undo's
        assistant message with its stored call: the run starts with that call pending, and the
        model never writes it); ``requested``: what people asked when ``text`` is not only that (an
        alert's target and labels: its annotations are read text, ``agent.provenance``). Every text
        is stored redacted (secrets never at rest, nor sent to the model). ``pipeline``: a created
        run's start job goes out with the caller's other writes (one round trip less), once the
        caller executes it; should that fail, the run stays ``queued`` with no job, which the
        recovery sweep re-enqueues (``recover``)."""
        text = self._redacted(text)
        record = RunRecord(
            run_id=uuid.uuid4().hex,
            channel=channel,
            thread_ts=thread_ts,
            requester=requester,
            text=text,
            created_at=self.clock(),
            message_ts=message_ts,
            source_url=source_url,
            job_id=str(uuid.uuid4()),  # the start job's id, stored with the record (no second write)
            follows=follows,
            requested=self._redacted(requested) if requested else "",
        )
        first = Message.user(text, slack_user=requester, ts=message_ts or thread_ts)
        if earlier is not None:
            first.content = f"{self._redacted(earlier.text)}\n\nNew request: {text}"
            first.meta["carried_people"] = list(earlier.people)
        if similar:
            first.content = f"{first.content}\n\n{self._redacted(chr(10).join(similar))}"
        if search_similar:
            first.meta["similar_pending"] = True
        stored = self.records.create(record, first, *then)
        if stored != record.run_id:
            return Submission(stored, created=False)
        self.enqueue(record.run_id, first=True, job_id=record.job_id, pipeline=pipeline)
        return Submission(record.run_id, created=True)

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
        """Store a thread reply for the active run; acknowledge it only if ``delivery.stored``.

        ``may_supersede`` (the web process's ``Deciders``: may ``user`` cancel the pending cards?) lets the reply
        supersede a pending approval and resume the run; otherwise the reply waits in the inbox
        and the model reads it when the run resumes after the decision.
        """
        delivery = self.inbox.deliver(
            channel,
            thread_ts,
            user=user,
            text=self._redacted(text),
            ts=ts,
            may_supersede=may_supersede,
            park=park,  # no run yet in a young thread: ``bot.runs.early_replies``
            claim=claim,  # a click's own claim (``Inbox.deliver``)
        )
        if delivery.superseded and delivery.run_id:
            self.lifecycle.superseded(delivery.run_id, delivery.superseded)
        return delivery

    def redacted(self, text: str) -> str:
        """``text`` as it may be stored (``_redacted``)."""
        return self._redacted(text)

    def _redacted(self, text: str) -> str:
        """A person's Slack text as it may be stored: a secret pasted into a thread (or into a
        mention) is replaced before Redis, the audit stream or the model ever hold it."""
        return text if self.options.redactor is None else self.options.redactor.redact(text)

    def request_stop(self, run_id: str, user: str) -> bool:
        """Ask a run to stop (the Stop button); False when it has already ended.

        The loop ends as ``cancelled`` after the step in progress. A run waiting for an approval
        has its pending approvals declined and is resumed, so it ends now rather than at expiry.
        """
        record = self.get(run_id)
        if record is None or record.status.terminal:
            return False
        self.records.request_stop(run_id, user)
        self.audit.record(AuditKind.STOP_REQUESTED, run_id, stopped_by=user)
        if record.status is RunStatus.AWAITING_APPROVAL:
            self.lifecycle.run_stopped(run_id, user)
        elif record.status is RunStatus.AWAITING_BUDGET:
            self.budgets.decide(run_id, user, BudgetStatus.STOPPED, None)
        return True

    def stop_requested(self, run_id: str) -> bool:
        return self.records.stop_requested(run_id)

    # -- jobs -----------------------------------------------------------------------------------

    def enqueue(
        self,
        run_id: str,
        *,
        first: bool = False,
        delay: float | None = None,
        job_id: str | None = None,
        pipeline: Pipeline | None = None,
    ) -> Job:
        """Enqueue (or schedule) the job that works on the run; it is safe to enqueue one too many.

        ``job_id``: the id the run record already names (``submit`` stores it with the record).
        ``pipeline``: enqueued with the caller's writes, when the caller executes it.
        """
        job = self.jobs.run(run_id, first=first, job_id=job_id, delay=delay, pipeline=pipeline)
        if job_id is None:
            self.records.set_job(run_id, job.id)
        return job

    # -- recovery -------------------------------------------------------------------------------

    def recover(self) -> list[str]:
        """Re-enqueue active runs nobody works on and runs whose report nobody finishes, expiring
        overdue approvals on the way (``bot.runs.recovery``); returns the run ids resumed."""
        resumed = self.recovery.runs_to_resume()
        for run_id in resumed:
            self.enqueue(run_id)
        return resumed

    def reporting(self, run_id: str) -> bool:
        """Whether the run's final report (audit entry, answer, notice) is not done yet."""
        return self.records.reporting_since(run_id) is not None
