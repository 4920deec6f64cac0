"""The seam between the worker and its chat transport: runs (``Presenter``) and alert threads (``AlertPresenter``).

The worker tells a ``Presenter`` what a person should see: the run card (its steps and status),
an approval request, the answer, a stop notice, the findings, charts of the series a tool
result listed (``bot.runs.charts``), and that an injected reply reached the run.
The Slack implementation renders these as messages and reactions; ``InMemoryPresenter``
records them for tests; ``LoggingPresenter`` writes them to the log (headless workers). An
alert group's thread is shown through an ``AlertPresenter`` (``AlertView``: its root message;
Slack's: ``bot.slack.delivery.alert_presenter``, the others in ``bot.alerts.presenter``), which
a worker's runtime carries typed (``Runtime.alerts``, ``bot.runs.runtime.AlertSeam``).

Presenters are called outside Redis writes and may fail (Slack is down): the worker logs
such failures and carries on, because the run's truth is in Redis, not in the thread. The loop's
calls (card updates, acknowledgements, decisions) must not wait for the transport; the report at
the end of a segment tells apart what is worth trying again (``NotDelivered``, any other error)
from what never will be shown (``Undeliverable``).
"""

from __future__ import annotations

import itertools
import json
import logging
import threading
from collections.abc import Sequence
from dataclasses import asdict, dataclass, field, replace
from enum import StrEnum
from typing import Any, Protocol, runtime_checkable

from agent.checks import CheckOutcome
from agent.events import ToolEnd, ToolStart
from agent.findings import Citation, Findings
from agent.tool_step import DECLINED, OUTCOME_UNKNOWN_PREFIX
from agent.tooling import ToolCategory
from agent.types import Message, RunStatus
from bot.errors import BotError
from bot.memory.similar import Similar
from bot.runs.approvals import Approval
from bot.runs.budget_asks import BudgetAsk
from bot.runs.charts import Chart
from bot.runs.undo_offers import UndoOffer

log = logging.getLogger(__name__)


class NotDelivered(BotError):
    """A final state the transport did not take in time (rate limits, an outage): the job's report
    leaves that step undone, and the recovery sweep has it tried again."""


class Undeliverable(BotError):
    """The transport refused a message for good (the bot is not in the channel, the message is
    gone): trying again cannot help, so the report goes on without it (the audit log keeps it)."""


@dataclass(frozen=True)
class RunRef:
    """Where a run talks: its thread, who asked, and its card once posted."""

    run_id: str
    channel: str
    thread_ts: str
    requester: str
    card_ts: str | None = None
    source_url: str = ""  # a run an alert started: its source link, shown on the card and the answer
    follows: str = ""  # a follow-up run: the thread's earlier run it continues, named on the card


class StepStatus(StrEnum):
    RUNNING = "running"
    OK = "ok"
    ERROR = "error"
    REFUSED = "refused"  # declined, unknown tool, outcome unknown: nothing ran this time


@dataclass(frozen=True)
class Step:
    call_id: str
    tool: str
    status: StepStatus
    category: str | None = None
    duration_seconds: float | None = None
    confirmed_by: str | None = None
    arguments: str = ""  # the call's JSON arguments (the Slack card shows a short form)
    result: str = ""  # the tool's output text, once it ended
    target: str | None = None  # the inventory target it ran on
    evidence: str | None = None  # its result's evidence id (``E3``): what findings and answers cite

    @property
    def declined(self) -> bool:
        """Nobody approved it (declined, expired, superseded): nothing ran. Only a call that did not
        run is asked, so a tool's own output starting with the same words cannot pass for it."""
        return self.status is StepStatus.REFUSED and self.result.startswith(DECLINED)

    @property
    def changes(self) -> bool:
        """A mutating or destructive call (one a person approves)."""
        return self.category in (ToolCategory.MUTATING.value, ToolCategory.DESTRUCTIVE.value)

    @property
    def unknown(self) -> bool:
        """A change that may or may not have happened (its worker or runner died while it ran): the
        runtime's own words, "Error: outcome unknown", whether it answered for the call or the
        dispatcher did. A read-only call's output cannot make a card say so."""
        return (
            self.changes
            and self.status is not StepStatus.OK
            and self.result.startswith(OUTCOME_UNKNOWN_PREFIX)
        )


@dataclass(frozen=True)
class Outcome:
    """What a finished run did, counted from its steps: what its card says instead of "Done"."""

    changed: int  # mutating or destructive calls that ran and succeeded
    failed_changes: int  # ... that ran and failed
    declined: int  # calls nobody approved
    refused: int  # other calls that did not run (a policy, an unknown tool or target)
    looked: int  # read-only calls that ran
    unknown: int = 0  # changes that may or may not have happened


@dataclass(frozen=True)
class CardView:
    """What the run card shows."""

    status: RunStatus
    steps: tuple[Step, ...] = ()
    iterations: int = 0
    tokens: int = 0
    cost: str = ""  # what the tokens cost (``$0.42``, ``bot.prices``); "" without ``LLM_PRICES``

    @property
    def targets(self) -> list[str]:
        """The inventory targets the run's calls ran on, in the order first touched."""
        return list(dict.fromkeys(step.target for step in self.steps if step.target))

    @property
    def outcome(self) -> Outcome:
        ended = [step for step in self.steps if step.status is not StepStatus.RUNNING]
        unknown = sum(1 for step in ended if step.unknown)
        steps = [step for step in ended if not step.unknown]
        ran = [step for step in steps if step.status is not StepStatus.REFUSED]
        declined = sum(1 for step in steps if step.declined)
        return Outcome(
            changed=sum(1 for step in ran if step.changes and step.status is StepStatus.OK),
            failed_changes=sum(1 for step in ran if step.changes and step.status is StepStatus.ERROR),
            declined=declined,
            refused=len(steps) - len(ran) - declined,
            looked=sum(1 for step in ran if not step.changes),
            unknown=unknown,
        )


@dataclass(frozen=True)
class StopNotice:
    """A run that stopped without an answer: which limit (or failure), and what it had done."""

    status: RunStatus
    reason: str | None
    iterations: int
    tokens: int
    tools_used: tuple[str, ...] = ()


class Presenter(Protocol):
    def post_run_card(self, run: RunRef, card: CardView) -> str | None:
        """Post the run card in the thread; returns its message ts."""
        ...

    def update_run_card(self, run: RunRef, card: CardView) -> None:
        """Show the card's new state. Never waits for the transport while the run works; a final
        state (finished, awaiting approval) is delivered before it returns, or ``NotDelivered``."""
        ...

    def approval_problem(self, run: RunRef, approval: Approval) -> str | None:
        """Why the card could not show this call completely (``None``: it can). Asked before the
        approval is stored: a call the card cannot show faithfully is refused, nobody is asked."""
        ...

    def ask_approval(self, run: RunRef, approval: Approval) -> str | None:
        """Post the Approve/Decline card for a pending approval; returns its message ts.

        Raises when the card could not be posted (the gate retries, then declines the call);
        ``None`` means this presenter shows no cards (headless workers).
        """
        ...

    def post_notice(self, run: RunRef, text: str) -> None:
        """A line of the bot's own in the thread (the text is the bot's, not the model's)."""
        ...

    def post_check(
        self, run: RunRef, outcome: CheckOutcome, evidence: str | None, undo: UndoOffer | None = None
    ) -> str | None:
        """How an approved change's check ended ("Verified: ...", "Check failed: ..."); its call
        and output are a tool's text, shown inert. ``undo``: the change's undo offer, shown as an
        Undo button; the message's ts is returned (``None``: not known), which the offer records."""
        ...

    def show_decision(self, run: RunRef, approval: Approval) -> None:
        """Replace an approval card's buttons with its decision (approved, expired, ...)."""
        ...

    def ask_budget(self, run: RunRef, ask: BudgetAsk) -> str | None:
        """Post the budget card (Extend / Stop) of a run at its token budget; returns its message ts
        (``None``: this presenter shows no cards)."""
        ...

    def post_answer(
        self,
        run: RunRef,
        text: str,
        citations: Sequence[Citation] = (),
        findings: Findings | None = None,
    ) -> None:
        """The run's final answer. ``citations``: the answer's, as code checked them (offsets into
        ``text``; ``agent.citations``); ``findings``: the run's last, as shown. A transport shows a
        verified citation as a link to its step and any other as unverified, never as the model
        wrote it, and says "No fault found" itself when that is the conclusion."""
        ...

    def show_findings(self, run: RunRef, findings: Findings) -> None:
        """Post the run's Findings message, or edit it in place with newer findings (coalesced:
        only the newest version is ever sent)."""
        ...

    def show_chart(self, run: RunRef, chart: Chart) -> None:
        """A chart of the series one tool result listed (``bot.runs.charts``), in the thread.
        Never waits for the transport (called from inside the loop); a chart that cannot be
        shown is logged and dropped, and takes nothing else with it."""
        ...

    def post_stop_notice(self, run: RunRef, notice: StopNotice) -> None: ...

    def acknowledge(self, run: RunRef, message: Message) -> None:
        """An injected thread reply is now in the run's history (the model will read it)."""
        ...


@dataclass(frozen=True)
class AlertView:
    """What an alert group's root message shows. Everything in it that came from an alert (labels,
    annotations, titles) is the sender's text, untrusted: the transport shows it inert."""

    group_id: str
    source: str
    status: str  # firing | resolved
    title: str
    severity: str = ""
    target: str | None = None
    labels: tuple[tuple[str, str], ...] = ()
    summary: str = ""
    links: tuple[tuple[str, str], ...] = ()  # (what, url): source, dashboard, panel, silence
    alerts: int = 1
    resolved_alerts: int = 0  # of a firing group: how many of its alerts have ended
    notifications: int = 1
    last_notified_at: float = 0.0
    resolved_at: float = 0.0
    investigate_button: bool = False  # no automatic run: offer a button
    held: int = 0  # held back by storm control: the route's groups held in its window (shown as a count)
    answer: str = ""  # the investigation's short summary, once it finished
    investigated_by: str = ""  # the Slack user ID who clicked Investigate (from Slack's signed click)
    runbook: str = (
        ""  # the title of the runbook the run was given (tools.runbooks): the team's text, untrusted
    )
    # "Changed before this alert:" lines, newest first (bot.alerts.changes): (time and kind, what), the
    # what a host's or a webhook's text, untrusted
    changes: tuple[tuple[str, str], ...] = ()

    def encode(self) -> str:
        return json.dumps(asdict(self))

    @classmethod
    def decode(cls, text: str) -> AlertView | None:
        try:
            data = json.loads(text)
            data["labels"] = tuple(tuple(pair) for pair in data.get("labels", ()))
            data["links"] = tuple(tuple(pair) for pair in data.get("links", ()))
            data["changes"] = tuple((str(head), str(what)) for head, what in data.get("changes", ()))
            return cls(**data)
        except (ValueError, TypeError):
            return None


@runtime_checkable
class AlertPresenter(Protocol):
    """How an alert group's thread is shown (checked when a worker starts: ``bot.ops.compose``)."""

    def post_alert(self, channel: str, view: AlertView) -> str | None:
        """Post the root message of a new alert thread; its ts (raises when it cannot be posted)."""
        ...

    def update_alert(self, channel: str, ts: str, view: AlertView) -> None:
        """Redraw the root message (a repeat, a resolution, the investigation's summary)."""
        ...

    def post_alert_note(self, channel: str, thread_ts: str, text: str) -> str | None:
        """A message in the alert's thread (new alerts of the group, resolved); its ts."""
        ...


class CardTracker:
    """The run card's steps, rebuilt from history when a job starts and updated from events."""

    def __init__(self, history: Sequence[Message]) -> None:
        self.steps: list[Step] = []
        calls = {c.id: c.name for m in history if m.role == "assistant" for c in m.tool_calls}
        arguments = {c.id: c.arguments for m in history if m.role == "assistant" for c in m.tool_calls}
        for message in history:
            if message.role == "tool" and message.tool_call_id in calls:
                failed = (message.content or "").startswith("Error")
                status = StepStatus.ERROR if failed else StepStatus.OK
                self.steps.append(
                    Step(
                        call_id=message.tool_call_id,
                        tool=calls[message.tool_call_id],
                        status=StepStatus.REFUSED if message.meta.get("refused") else status,
                        category=message.meta.get("category"),
                        duration_seconds=message.meta.get("duration"),
                        confirmed_by=message.meta.get("confirmed_by"),
                        arguments=arguments[message.tool_call_id],
                        result=message.content or "",
                        target=message.meta.get("target"),
                        evidence=message.meta.get("evidence"),
                    )
                )

    def started(self, event: ToolStart) -> None:
        category = event.category.value if event.category else None
        self.steps.append(
            Step(event.call.id, event.call.name, StepStatus.RUNNING, category, arguments=event.call.arguments)
        )

    def ended(self, event: ToolEnd, confirmed_by: str | None) -> None:
        if not event.executed:
            status = StepStatus.REFUSED
        else:
            status = StepStatus.ERROR if event.is_error else StepStatus.OK
        done = Step(
            event.call.id,
            event.call.name,
            status,
            event.category.value if event.category else None,
            round(event.duration_seconds, 3),
            confirmed_by,
            arguments=event.call.arguments,
            result=event.output,
            target=event.target,
            evidence=event.evidence,
        )
        for index in range(len(self.steps) - 1, -1, -1):
            if self.steps[index].call_id == event.call.id and self.steps[index].status is StepStatus.RUNNING:
                self.steps[index] = done
                return
        self.steps.append(done)

    def view(self, status: RunStatus, iterations: int, tokens: int, cost: str = "") -> CardView:
        return CardView(status, tuple(self.steps), iterations, tokens, cost)


@dataclass(frozen=True)
class PresenterCall:
    method: str
    run_id: str
    payload: Any = None


@dataclass
class InMemoryPresenter:
    """Records every call (thread-safe) and answers with fake message timestamps."""

    calls: list[PresenterCall] = field(default_factory=list)
    _lock: threading.Lock = field(default_factory=threading.Lock, repr=False)
    _ts: itertools.count[int] = field(default_factory=lambda: itertools.count(1), repr=False)

    def _record(self, method: str, run: RunRef, payload: Any = None) -> str:
        with self._lock:
            self.calls.append(PresenterCall(method, run.run_id, payload))
            return f"{1_700_000_000 + next(self._ts)}.000100"

    def of(self, method: str, run_id: str | None = None) -> list[Any]:
        """The payloads of one method's calls (for one run), in order."""
        with self._lock:
            return [c.payload for c in self.calls if c.method == method and run_id in (None, c.run_id)]

    def post_run_card(self, run: RunRef, card: CardView) -> str | None:
        return self._record("post_run_card", run, card)

    def post_similar_note(self, channel: str, thread_ts: str, found: Sequence[Similar]) -> str | None:
        return self._record("post_similar_note", RunRef("", channel, thread_ts, ""), tuple(found))

    def update_run_card(self, run: RunRef, card: CardView) -> None:
        self._record("update_run_card", run, replace(card))

    def approval_problem(self, run: RunRef, approval: Approval) -> str | None:
        return None

    def ask_approval(self, run: RunRef, approval: Approval) -> str | None:
        return self._record("ask_approval", run, approval)

    def post_notice(self, run: RunRef, text: str) -> None:
        self._record("post_notice", run, text)

    def post_check(
        self, run: RunRef, outcome: CheckOutcome, evidence: str | None, undo: UndoOffer | None = None
    ) -> str | None:
        return self._record("post_check", run, outcome)

    def show_decision(self, run: RunRef, approval: Approval) -> None:
        self._record("show_decision", run, approval)

    def ask_budget(self, run: RunRef, ask: BudgetAsk) -> str | None:
        return self._record("ask_budget", run, ask)

    def post_answer(
        self,
        run: RunRef,
        text: str,
        citations: Sequence[Citation] = (),
        findings: Findings | None = None,
    ) -> None:
        self._record("post_answer", run, text)

    def show_findings(self, run: RunRef, findings: Findings) -> None:
        self._record("show_findings", run, findings)

    def show_chart(self, run: RunRef, chart: Chart) -> None:
        self._record("show_chart", run, chart)

    def post_stop_notice(self, run: RunRef, notice: StopNotice) -> None:
        self._record("post_stop_notice", run, notice)

    def acknowledge(self, run: RunRef, message: Message) -> None:
        self._record("acknowledge", run, message)


class LoggingPresenter:
    """Writes what a person would see to the log; for headless workers and the CLI."""

    def post_run_card(self, run: RunRef, card: CardView) -> str | None:
        log.info("run %s: started in %s/%s for %s", run.run_id, run.channel, run.thread_ts, run.requester)
        return None

    def update_run_card(self, run: RunRef, card: CardView) -> None:
        steps = ", ".join(f"{s.tool}:{s.status.value}" for s in card.steps)
        log.info("run %s: %s after %d iterations [%s]", run.run_id, card.status.value, card.iterations, steps)

    def approval_problem(self, run: RunRef, approval: Approval) -> str | None:
        return None

    def post_notice(self, run: RunRef, text: str) -> None:
        log.info("run %s: %s", run.run_id, text)

    def post_check(
        self, run: RunRef, outcome: CheckOutcome, evidence: str | None, undo: UndoOffer | None = None
    ) -> str | None:
        log.info("run %s: %s", run.run_id, outcome.headline())
        return None

    def ask_approval(self, run: RunRef, approval: Approval) -> str | None:
        log.info(
            "run %s: approval %s asked for %s %s", run.run_id, approval.id, approval.tool, approval.args_json
        )
        return None

    def ask_budget(self, run: RunRef, ask: BudgetAsk) -> str | None:
        log.info(
            "run %s: used its budget (%d tokens %s); waiting for Extend", run.run_id, ask.spent, ask.cost
        )
        return None

    def show_decision(self, run: RunRef, approval: Approval) -> None:
        log.info(
            "run %s: approval %s %s by %s",
            run.run_id,
            approval.id,
            approval.status.value,
            approval.decided_by,
        )

    def post_answer(
        self,
        run: RunRef,
        text: str,
        citations: Sequence[Citation] = (),
        findings: Findings | None = None,
    ) -> None:
        log.info("run %s: answer: %s", run.run_id, text)
        if citations:
            verified = sum(1 for citation in citations if citation.verified)
            log.info("run %s: %d of %d citations verified", run.run_id, verified, len(citations))

    def show_findings(self, run: RunRef, findings: Findings) -> None:
        statuses = ", ".join(f"{h.id} {h.status.value}" for h in findings.hypotheses)
        log.info("run %s: findings %s [%s]", run.run_id, findings.conclusion.value, statuses)

    def show_chart(self, run: RunRef, chart: Chart) -> None:
        log.info("run %s: chart of %s (%d series)", run.run_id, chart.label, len(chart.series) + chart.more)

    def post_stop_notice(self, run: RunRef, notice: StopNotice) -> None:
        log.info("run %s: stopped (%s): %s", run.run_id, notice.status.value, notice.reason)

    def acknowledge(self, run: RunRef, message: Message) -> None:
        log.info("run %s: read a reply from %s", run.run_id, message.meta.get("slack_user"))
