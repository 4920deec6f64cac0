"""One job's work on one run: take the lease (or defer), run the loop, report, let go.

A run job: take the run's lease (or defer: someone else works on it), keep it alive from a
thread, run the loop over a fenced ``RedisMemory``, tell the people (presenter) and the audit
log what happened, release the lease. A run that stops for an approval ends the job; so no
worker waits for a person.
"""

from __future__ import annotations

import logging
from collections.abc import Callable, Sequence
from dataclasses import dataclass, field, replace
from typing import TypeVar

import redis

from agent.arguments import confirmed_by
from agent.config import RunConfig
from agent.errors import LeaseLostError, MemoryStoreError
from agent.events import CheckEnded, Event, FindingsUpdated, IterationStarted, ToolEnd, ToolStart
from agent.redis_memory import RedisMemory
from agent.run import Run
from agent.tooling import Tool
from agent.types import Message, RunResult, RunState, RunStatus, Usage
from bot.observability.audit import AuditKind, AuditLog
from bot.observability.logs import run_context
from bot.observability.run_metrics import MeteredModel, RunMetrics
from bot.prices import Prices, dollars
from bot.runs import first_similar
from bot.runs.approval_gate import ApprovalGate
from bot.runs.approvals import ApprovalStatus
from bot.runs.budget_gate import BudgetGate, decided_meanwhile, waiting_for
from bot.runs.charts import chart_for
from bot.runs.lease import Lease
from bot.runs.lost_runs import claim_notice
from bot.runs.presenter import CardTracker, CardView, Presenter, RunRef, StopNotice
from bot.runs.provenance import call_provenance
from bot.runs.record import RunRecord
from bot.runs.remember import remember
from bot.runs.report_steps import Step, run_steps
from bot.runs.runtime import Runtime, present
from bot.runs.undo_offering import offer_undo
from bot.runs.undo_offers import UndoOffer
from bot.runs.undo_requests import record_executed

log = logging.getLogger(__name__)
T = TypeVar("T")


# How often one job goes back into the loop because a decision or reply arrived while it suspended.
MAX_SEGMENTS_PER_JOB = 10
# Deferrals of a job that found the lease taken, before leaving the run to the recovery sweep.
MAX_DEFERRALS = 6
MAX_CHARTS_PER_SEGMENT = 10  # charts of tool results one segment of a run shows in its thread
REPORT_GIVE_UP_SECONDS = 3600.0  # a report Slack keeps failing is tried again by the sweep this long
LOST_REASON = (
    "this run's state was lost (Redis restarted without its data), so nothing more will run for it; "
    "mention me again to start over"
)


# -- the run's callbacks ----------------------------------------------------------------------


@dataclass
class JobEvents:
    """The loop's events, turned into run card updates, audit entries and acknowledgements."""

    presenter: Presenter
    audit: AuditLog
    run: RunRef
    tracker: CardTracker
    iteration: int = 0
    metrics: RunMetrics = field(default_factory=lambda: RunMetrics(None))
    redact: Callable[[str], str] = lambda text: text  # the run's redactor (a chart's names and query)
    charts: int = 0  # charts shown in this segment (at most ``MAX_CHARTS_PER_SEGMENT``)
    offer_undo: Callable[[CheckEnded], UndoOffer | None] = lambda event: None  # ``bot.runs.undo_offering``
    # Where the offer's Undo button was posted (``UndoOffers.set_message``): only a click there claims it.
    undo_shown: Callable[[UndoOffer, str], None] = lambda offer, ts: None
    undo_ran: Callable[[ToolEnd], None] = lambda event: None  # ``bot.runs.undo_requests.record_executed``
    prices: Prices = field(default_factory=lambda: Prices({}))  # ``LLM_PRICES``: the card's cost
    usage: Usage = field(default_factory=Usage)  # the run's so far, as of the last iteration's start
    model: str | None = None  # the model that answered last (what ``usage`` is priced by)

    def __call__(self, event: Event) -> None:
        if isinstance(event, IterationStarted):
            self.iteration = event.iteration
            if event.usage.paid_tokens != self.usage.paid_tokens:  # the card's tokens and cost move on
                self.usage, self.model = event.usage, event.model
                self._update()
        elif isinstance(event, ToolStart):
            self.tracker.started(event)
            self._update()
        elif isinstance(event, ToolEnd):
            self.tracker.ended(event, confirmed_by(event.call.arguments))
            self.audit.tool_finished(self.run.run_id, event, requester=self.run.requester)
            self.undo_ran(event)
            self.metrics.tool_finished(event)
            self._update()
            self._chart(event)
        elif isinstance(event, CheckEnded):
            self.audit.check_ended(self.run.run_id, event.call.id, event.outcome, event.evidence)
            offer: UndoOffer | None = None
            try:
                offer = self.offer_undo(event)  # stored and audited before the thread is told
            except redis.RedisError:  # the change ran and its result is stored: the run goes on
                log.exception("run %s: the undo of %s could not be offered", self.run.run_id, event.call.name)
            ts = present(self.presenter.post_check, self.run, event.outcome, event.evidence, offer)
            if offer is not None and ts:
                try:
                    self.undo_shown(offer, ts)
                except redis.RedisError:  # its button then claims nothing: the click says so
                    log.exception("run %s: the Undo button's message was not recorded", self.run.run_id)
        elif isinstance(event, FindingsUpdated):
            findings = event.findings
            self.audit.record(
                AuditKind.FINDINGS_UPDATED,
                self.run.run_id,
                version=str(findings.version),
                conclusion=findings.conclusion.value,
                findings=findings.as_json(),
            )
            present(self.presenter.show_findings, self.run, findings)

    def injected(self, messages: Sequence[Message]) -> None:
        """Called by the loop only after the replies are in the history: now acknowledge them."""
        self.metrics.injected(len(messages))
        for message in messages:
            self.audit.record(
                AuditKind.MESSAGE_INJECTED,
                self.run.run_id,
                inbox_id=message.meta.get("inbox_id"),
                user=message.meta.get("slack_user"),
                text=message.content,
            )
            present(self.presenter.acknowledge, self.run, message)

    def _chart(self, event: ToolEnd) -> None:
        """A result listing series the model read: draw them, up to the segment's bound (a model
        querying Prometheus in a loop must not fill the thread with pictures)."""
        if self.charts >= MAX_CHARTS_PER_SEGMENT:
            return
        chart = chart_for(event, self.redact)
        if chart is not None:
            self.charts += 1
            present(self.presenter.show_chart, self.run, chart)

    def _update(self) -> None:
        tokens, cost = self.usage.paid_tokens, dollars(self.prices.cost(self.model, self.usage))
        view = self.tracker.view(RunStatus.RUNNING, self.iteration, tokens, cost)
        present(self.presenter.update_run_card, self.run, view)


def involved_people(history: Sequence[Message]) -> tuple[str, ...]:
    """Everyone whose thread message the run has read, in order: none of them may approve its
    destructive calls (the requester is one of them)."""
    people = [
        person
        for m in history
        if m.role == "user"
        for person in (m.meta.get("slack_user"), *(m.meta.get("carried_people") or ()))
    ]  # a follow-up has read the earlier runs' messages too (``bot.runs.thread_history``)
    return tuple(dict.fromkeys(p for p in people if isinstance(p, str) and p))


# -- one job's work on one run -----------------------------------------------------------------------


class RunJob:
    """Take the lease, run the loop until it finishes or waits for a person, report, let go."""

    def __init__(self, runtime: Runtime, run_id: str, deferrals: int = 0) -> None:
        self._rt = runtime
        self._run_id = run_id
        self._deferrals = deferrals
        self._service = runtime.service()
        self._records = self._service.records
        self._metrics = RunMetrics.for_redis(runtime.redis, runtime.keys, enabled=runtime.metrics_enabled)
        self._shown: tuple[RunRef, CardTracker] | None = None  # the thread and card, once known
        self._requested = ""
        self._first_message: Callable[[Message], Message] | None = None  # ``bot.runs.first_similar``

    def execute(self) -> str:
        record = self._service.get(self._run_id)
        where = (record.channel, record.thread_ts) if record else ("", "")
        # The job's metrics go to Redis in one round trip when it ends, however it ends (returned,
        # raised, suspended, lease lost), and every few seconds of a long one (``MetricsStore.batched``).
        # A SIGKILLed job loses what it held: metrics may undercount, never count twice (a report
        # step the next job runs again, the audit step's run_finished, was never sent by this one).
        with run_context(self._run_id, *where), self._metrics.batched():
            return self._execute(record)

    def _execute(self, record: RunRecord | None) -> str:
        if record is None:
            return "missing"
        rt = self._rt
        finished = record.status.terminal
        if finished and not self._service.reporting(self._run_id):
            return "finished"  # a duplicate or retried job: nothing to do
        lease = Lease.acquire(rt.redis, rt.keys, self._run_id, rt.options.lease_ttl_seconds, rt.name)
        if lease is None:
            return self._defer()
        try:
            with lease.keep_alive():
                if finished:  # the job that ended it stopped before telling the thread everything
                    return self._report_finished(record)
                return self._work(record, lease)
        except MemoryStoreError as error:
            if self._service.get(self._run_id) is None:
                return self._report_lost(record)
            if not isinstance(error, LeaseLostError):
                raise  # Redis failed: RQ retries the job, or the recovery sweep resumes the run
            # Another worker owns the run now; it will report. This one must not write anything more.
            self._service.audit.record(AuditKind.LEASE_LOST, self._run_id, worker=rt.name, error=str(error))
            return "lease_lost"

    def _report_lost(self, record: RunRecord) -> str:
        """The run's record vanished under this job (Redis came back empty): say so in the thread,
        which otherwise shows a card working forever. Nothing is written to Redis for it but the
        claim that the thread is told once (``bot.runs.lost_runs``: the lost-run sweep may be first)."""
        ref, tracker = self._shown or (
            record.ref(),
            CardTracker([]),
        )
        if not claim_notice(self._rt.redis, self._rt.keys, record.channel, record.thread_ts):
            return "lost"  # the sweep or a click has told the thread and redrawn the card
        log.error("run %s: its state is gone from Redis; telling the thread", self._run_id)
        present(self._rt.presenter.update_run_card, ref, tracker.view(RunStatus.FAILED, 0, 0))
        present(self._rt.presenter.post_stop_notice, ref, StopNotice(RunStatus.FAILED, LOST_REASON, 0, 0))
        return "lost"

    def _defer(self) -> str:
        """Someone holds the lease: look again soon, in case it was about to let go or has died."""
        if self._deferrals >= MAX_DEFERRALS:
            return "busy"  # the recovery sweep takes over if the holder died
        delay = max(1.0, min(2.0**self._deferrals, self._rt.options.lease_ttl_seconds))
        job = self._service.jobs.run(self._run_id, delay=delay, deferrals=self._deferrals + 1)
        log.info(
            "run %s is leased to another worker; looking again in %.0fs (job %s)", self._run_id, delay, job.id
        )
        return "deferred"

    def _work(self, record: RunRecord, lease: Lease) -> str:
        rt, run_id = self._rt, self._run_id
        attempts = self._records.count_attempt(run_id)
        memory = self._service.memory(run_id, fence=lease.token)
        ref = record.ref()
        state = memory.load_state()
        if state is None:
            # A new run: a mention's past incidents, searched here (``bot.runs.first_similar``).
            self._first_similar(ref, record.text, memory.load_messages())
            self._service.audit.run_started(
                run_id,
                requester=record.requester,
                channel=record.channel,
                thread_ts=record.thread_ts,
                text=record.text,
                follows=record.follows,
            )
            self._metrics.run_started()
        if ref.card_ts is None and state is None:  # once per run (a presenter may have no message ts)
            card_ts = present(rt.presenter.post_run_card, ref, CardView(RunStatus.RUNNING))
            if card_ts:
                self._records.set_card(run_id, card_ts)
                ref = replace(ref, card_ts=card_ts)
        tracker = CardTracker(memory.load_messages())
        self._shown = (ref, tracker)
        self._requested = record.requested_text  # what people asked (``bot.runs.provenance``)
        # The run's tools: the list its first segment offered (recorded with the run), as far as
        # this build still has them and the policy allows them (``bot.runs.run_tools``).
        giving_up = attempts > rt.options.max_attempts
        tools = None if giving_up else rt.run_tools(ref.channel, ref.requester, record.tools_offered())
        # Until its report is done, the run is swept for (a job that dies after the run's last
        # write must not leave the thread without the answer). The same write records the first
        # segment's tools.
        recorded = self._records.start_reporting(
            run_id, rt.clock(), tools.record if tools is not None else None
        )
        if tools is not None and recorded is not None:  # another job recorded the run's list first
            tools = rt.run_tools(ref.channel, ref.requester, recorded)
        if tools is None:
            result = self._give_up(memory, state or RunState(), attempts)
        else:
            result = self._run_segments(memory, ref, tracker, tools.tools)
        self._report(ref, tracker, result)
        return result.status.value

    def _first_similar(self, ref: RunRef, query: str, messages: Sequence[Message]) -> None:
        if not first_similar.pending(messages):
            return
        rt = self._rt
        names = rt.target_names(ref.channel) if rt.target_names is not None else ()
        found = first_similar.search(rt.memory, ref, query, names)
        self._first_message = first_similar.with_lines(found, self._service.redacted)
        remember = rt.memory.store.remember_note if rt.memory is not None else None
        claim = rt.keys.similar_note_claim(self._run_id)
        present(first_similar.post_note, rt.redis, claim, rt.presenter, ref, found, remember)

    def _run_segments(
        self, memory: RedisMemory, ref: RunRef, tracker: CardTracker, tools: Sequence[Tool]
    ) -> RunResult:
        for _ in range(MAX_SEGMENTS_PER_JOB):
            result = Run(self._config(memory, ref, tracker, tools)).execute()
            if result.status is RunStatus.AWAITING_BUDGET and self._budget_decided_meanwhile(memory):
                continue
            if result.status is not RunStatus.AWAITING_APPROVAL or not self._settled_meanwhile(result):
                return result
        return result

    def _budget_decided_meanwhile(self, memory: RedisMemory) -> bool:
        """Extend or Stop clicked while the run was suspending at its budget: continue right away."""
        base = self._rt.options.limits.token_budget
        return decided_meanwhile(self._service.budget_asks, self._run_id, memory.load_state(), base)

    def _settled_meanwhile(self, result: RunResult) -> bool:
        """A decision, or a reply by someone who may decide, that arrived while the run was
        suspending: continue right away. A reply by anyone else waits in the inbox until the
        approval is decided (the model reads it then); it does not cancel the approval."""
        approvals = self._service.approvals
        pending = approvals.for_call(self._run_id, result.pending_call_id or "")
        if pending is not None and pending.status is not ApprovalStatus.PENDING:
            return True
        deciders = [item for item in self._service.inbox.peek(self._run_id) if item.may_supersede]
        return bool(deciders) and self._service.lifecycle.supersede(self._run_id, deciders[0].user)

    def _config(
        self, memory: RedisMemory, ref: RunRef, tracker: CardTracker, tools: Sequence[Tool]
    ) -> RunConfig:
        rt, policy = self._rt, self._rt.policy
        # A resumed run's card counts on from its stored iteration: the approved call runs
        # before the next IterationStarted, and a counter starting at 0 would jump "3 -> 0 -> 4".
        stored = memory.load_state()
        events = JobEvents(
            rt.presenter,
            self._service.audit,
            ref,
            tracker,
            iteration=stored.iteration if stored is not None else 0,
            metrics=self._metrics,
            redact=rt.redact or (lambda text: text),
            offer_undo=lambda event: offer_undo(
                self._service.undo_offers,
                self._service.approvals,
                self._service.audit,
                ref,
                event,
                self._service.options.undo_minutes * 60.0,
                self._service.lifecycle.seal,
            ),
            undo_shown=lambda offer, ts: self._service.undo_offers.set_message(offer.id, ref.channel, ts),
            undo_ran=lambda event: record_executed(
                self._service.undo_offers, self._service.audit, ref.run_id, event
            ),
            prices=rt.options.prices,
            usage=stored.usage if stored is not None else Usage(),
            model=stored.model if stored is not None else None,
        )
        gate = ApprovalGate(
            self._service,
            rt.presenter,
            ref,
            rt.options.approval_timeout_seconds,
            self._metrics,
            max_mutating_actions=rt.options.max_mutating_actions,
            involved=lambda: involved_people(memory.load_messages()),
            durability=rt.durable(),
            card_retry_delays=rt.card_retry_delays,
            propose=(
                (lambda request, found: policy.proposal(request, ref.channel, ref.requester, found))
                if policy
                else None
            ),
            provenance=lambda request: call_provenance(
                request.call.parsed_arguments(), self._requested, memory.load_messages()
            ),
        )
        return RunConfig(
            models=[MeteredModel(m, self._metrics) for m in rt.models] if rt.metrics_enabled else rt.models,
            memory=memory,
            tools=tools,
            system_prompt=rt.system_prompt,
            inject=lambda: self._service.inbox.messages(self._run_id),
            on_injected=events.injected,
            confirm=gate,
            stop=lambda _state: self._service.stop_requested(self._run_id),
            limits=rt.options.limits,
            extend_budget=self._budget_gate(ref),
            on_event=events,
            tool_output_filter=rt.tool_output_filter,
            redact=rt.redact,
            clock=rt.clock,
            max_parallel_tools=rt.options.max_parallel_tools,
            check_seconds=rt.options.check_seconds,
            evidence=True,  # evidence ids, update_findings, checked citations (agent.evidence)
            first_message=self._first_message,  # a mention's past incidents (bot.runs.first_similar)
        )

    def _budget_gate(self, ref: RunRef) -> BudgetGate | None:
        """The run's budget card at its token budget (``bot.runs.budget_gate``); none without a budget."""
        base = self._rt.options.limits.token_budget
        if base is None:
            return None
        service = self._service
        return BudgetGate(
            service.budget_asks, service.audit, self._rt.presenter, ref, base, self._rt.options.prices
        )

    def _give_up(self, memory: RedisMemory, state: RunState, attempts: int) -> RunResult:
        """The run stopped its worker too often (a crash loop): end it as failed, in a durable way."""
        state.status = RunStatus.FAILED
        state.error = (
            f"gave up after {attempts - 1} attempts: the worker stopped each time (see the audit log)"
        )
        memory.save_state(state)
        return RunResult.from_state(state)

    def _report(self, ref: RunRef, tracker: CardTracker, result: RunResult) -> None:
        """Tell the thread (and the audit log) how the segment ended, each step once.

        The steps of a finished run's report are marked done in the run hash as they go: a job
        that dies half-way (Redis went away) leaves the rest to the job the sweep enqueues.
        """
        audit, presenter, records = self._service.audit, self._rt.presenter, self._records
        records.reset_attempts(self._run_id)  # a clean end: the crash counter restarts
        # Counted into the channel's month once (the script adds only what was not counted yet).
        self._service.monthly.count(self._run_id, ref.channel, _tokens(result))
        cost = dollars(self._rt.options.prices.cost(result.model, result.usage))
        card = tracker.view(result.status, result.iterations, _tokens(result), cost)
        # Queued, and sent by the card's final wait below: a job that resumed a run, or reports one
        # another job ended, shows the stored findings once (a version it sent is not sent again).
        if result.findings is not None:
            present(presenter.show_findings, ref, result.findings)
        # First the card's final state (waited for here, after the run's state is saved, never in
        # the loop): the answer follows it. Not delivered in time, it stays for the sweep's job.
        steps: list[Step] = [("card", lambda: presenter.update_run_card(ref, card))]
        if result.status.suspended:
            self._audit_suspended(
                result.pending_call_id or waiting_for(self._service.budget_asks, self._run_id)
            )
            if run_steps(self._run_id, steps, [], lambda _done: None):  # the next segment has its own
                records.done_reporting(self._run_id)
            return

        def record_finish() -> None:
            audit.run_finished(self._run_id, result)
            self._metrics.run_finished(result)
            _log_end(self._run_id, result)  # once, with the audit entry: the operator's line in the log

        steps.append(("audit", record_finish))
        if result.output:  # a post that raised is not done: tried again (never lost to a log line)
            output, citations, findings = result.output, result.citations, result.findings
            steps.append(("answer", lambda: presenter.post_answer(ref, output, citations, findings)))
            alerts = self._rt.alerts
            if alerts is not None:  # a run that investigated an alert: its root shows the answer too
                steps.append(("summary", lambda: alerts.run_answered(self._rt, self._run_id, output)))
        if result.status is not RunStatus.COMPLETED:
            notice = StopNotice(
                result.status, result.error, result.iterations, _tokens(result), tuple(result.tools_used)
            )
            steps.append(("notice", lambda: presenter.post_stop_notice(ref, notice)))
        steps.append(("unread", self._report_unread))
        steps.append(("memory", lambda: remember(self._rt, self._service, self._run_id, result)))

        def mark(done: list[str]) -> None:
            if done[-1] != "card":  # showing the card twice is harmless: the next step's mark has it
                records.mark_reported(self._run_id, done)

        reported = records.reported_steps(self._run_id)
        if run_steps(self._run_id, steps, reported, mark) or self._give_up_report():
            records.done_reporting(self._run_id)

    def _audit_suspended(self, call_id: str) -> None:
        """Once per call waited for: a job that only redraws the card (the sweep's, after Slack held
        the card back) suspends the run again on the same call."""
        if self._records.suspended_call(self._run_id) == call_id:
            return
        self._service.audit.record(AuditKind.RUN_SUSPENDED, self._run_id, pending_call_id=call_id or None)
        self._records.mark_suspended(self._run_id, call_id)

    def _give_up_report(self) -> bool:
        """True once a finished run's report has been tried for ``REPORT_GIVE_UP_SECONDS``: Slack
        keeps failing for it (its output stays in the audit log)."""
        since = self._records.reporting_since(self._run_id)  # when its last job started
        if since is None or self._rt.clock() - since < REPORT_GIVE_UP_SECONDS:
            return False
        log.error("run %s: gave up telling the thread how it ended (see the audit log)", self._run_id)
        return True

    def _report_finished(self, record: RunRecord) -> str:
        """Finish the report of a run that ended in a job that then died."""
        memory = self._service.memory(self._run_id)
        state = memory.load_state()
        if state is None:
            return "finished"
        ref = record.ref()
        self._report(ref, CardTracker(memory.load_messages()), RunResult.from_state(state))
        return "reported"

    def _report_unread(self) -> None:
        """Replies stored after the loop's last look at the inbox: the model never read them. Audit them."""
        for item in self._service.inbox.peek(self._run_id):
            log.warning("run %s finished before reading a reply from %s", self._run_id, item.user)
            self._service.audit.record(AuditKind.MESSAGE_UNREAD, self._run_id, user=item.user, text=item.text)


def _tokens(result: RunResult) -> int:
    return result.usage.paid_tokens


def _log_end(run_id: str, result: RunResult) -> None:
    """A failed run is an ERROR line saying why (the model's own error, say), a limit a WARNING: the
    person reading the worker's log learns what the thread and ``chatops runs show`` say."""
    if result.status is RunStatus.FAILED:
        log.error("run %s failed: %s", run_id, result.error or "no reason recorded")
    elif result.status not in (RunStatus.COMPLETED, RunStatus.CANCELLED):
        log.warning("run %s stopped (%s): %s", run_id, result.status.value, result.error or "")
