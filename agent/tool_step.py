"""The tool half of an iteration: allowlist, confirm gate, execution, loop detection, events, append.

Read-only tools marked parallel run concurrently (bounded by the run's pool); mutating and
destructive tools run one at a time, each only after an approval, behind a durable "executing"
mark. Results are appended in call order, each right after the assistant message that asked.

What a call is (read-only, mutating, destructive) is decided per call by ``call_category``: a
read-only network tool asked to reach an unlisted host is a mutating call there and then
(``CHATOPS_EGRESS_UNLISTED=approve``). Everything below uses that one answer: batching, the gate,
the events and the history.
"""

from __future__ import annotations

import json
import time
from concurrent.futures import Future, ThreadPoolExecutor
from concurrent.futures import TimeoutError as FutureTimeoutError
from dataclasses import replace
from enum import StrEnum
from typing import NamedTuple

from agent.arguments import CONFIRMED_BY, confirmed_by
from agent.checks import CheckOutcome, read_before, run_check, with_check, with_health
from agent.config import ConfirmRequest
from agent.context import RunContext
from agent.events import CheckEnded, ToolEnd, ToolStart
from agent.history import NOT_RUN, answered_in_last_turn
from agent.loop_detection import LOOP_WARNING, LoopVerdict
from agent.series import SeriesSet
from agent.tooling import (
    APPROVAL_GRANT,
    APPROVED_PLAN,
    CallCategory,
    Tool,
    ToolCategory,
    ToolResult,
    call_category,
    call_refusal,
    call_target,
    call_verification,
    describe_call,
    enforces_own_timeout,
)
from agent.types import Decision, DecisionStatus, DryRun, Message, MessageMeta, ToolCall
from agent.verification import PlannedCall, Verification, same_as_approved

OUTCOME_UNKNOWN_PREFIX = "Error: outcome unknown"  # a change that may or may not have happened
OUTCOME_UNKNOWN = (
    OUTCOME_UNKNOWN_PREFIX + ": the worker stopped while {tool} was running; verify the state before retrying"
)
DECLINED = "Error: declined: "  # the result of a call nobody approved (declined, expired, superseded)
NO_APPROVER = "Error: {tool} needs human approval and no approver is configured; it was not run"
# A tool is given its own timeout; the loop waits a little longer so the tool can report it itself.
TIMEOUT_GRACE_SECONDS = 1.0


# Keys only the loop writes into a call's arguments, after a person approved it.
RESERVED_ARGUMENTS = (CONFIRMED_BY, APPROVED_PLAN, APPROVAL_GRANT)
_RESERVED = frozenset(RESERVED_ARGUMENTS)
_CATEGORY_TEXT = {category: category.value for category in ToolCategory}  # ``.value`` is a Python property


def without_reserved_arguments(call: ToolCall) -> ToolCall:
    """The call without a ``confirmed_by``, ``approved_plan`` or ``approval_grant`` the model wrote itself.

    Only the approval gate writes them (the approver's ID, the dry run's plan, the signed grant). A value from the
    model would otherwise travel with a read-only or refused call into the tool, the run card
    ("approved by") and the audit log as if someone had approved it.
    """
    try:
        arguments: object = call.parsed_arguments()  # checked once; the gate reads the same parse
    except ValueError:  # refused later with its reason; what it names must still be stripped
        try:
            arguments = json.loads(call.arguments or "{}")
        except (ValueError, RecursionError):
            return call
    if not isinstance(arguments, dict) or arguments.keys().isdisjoint(_RESERVED):
        return call
    for key in RESERVED_ARGUMENTS:
        arguments.pop(key, None)
    return call.model_copy(update={"arguments": json.dumps(arguments)})


def call_kind(tool: Tool, call: ToolCall) -> CallCategory | str:
    """The call's category, or the error that refuses it: a tool that cannot say what a call is
    is not run (a bug in a tool must not stop the run, nor let the call past the gate)."""
    try:
        return call_category(tool, call.arguments)
    except Exception as error:
        return f"Error: {call.name} could not tell what this call does: {type(error).__name__}: {error}"


def _valid_arguments(call: ToolCall) -> bool:
    try:
        call.parsed_arguments()
    except ValueError:
        return False
    return True


class StepOutcome(StrEnum):
    DONE = "done"
    AWAITING_APPROVAL = "awaiting_approval"
    LOOP_DETECTED = "loop_detected"
    DEADLINE = "deadline"


class CallResult(NamedTuple):  # a tuple: built once per call, several times cheaper than a dataclass
    call: ToolCall  # with confirmed_by written in, for approved calls
    category: ToolCategory | None
    result: ToolResult
    duration: float
    executed: bool
    checked: CheckOutcome | None = None  # an approved change's check, run right after it


class ToolStep:
    def __init__(self, ctx: RunContext, pool: ThreadPoolExecutor) -> None:
        self._ctx = ctx
        self._pool = pool
        self.pending_call_id: str | None = None

    def run(self, calls: list[ToolCall]) -> StepOutcome:
        """Answer every call without a result yet; stop early for an approval, a loop or the deadline."""
        answered = answered_in_last_turn(self._ctx.messages)
        todo = [without_reserved_arguments(call) for call in calls if call.id not in answered]
        index = 0
        while index < len(todo):
            if self._ctx.deadline_passed():
                self._close(todo[index:], "the run deadline passed")
                return StepOutcome.DEADLINE
            batch = self._parallel_batch(todo, index)
            if batch:
                results = self._run_parallel(batch)
                index += len(batch)
            else:
                outcome = self._run_one(todo[index])
                if outcome is None:
                    self.pending_call_id = todo[index].id
                    return StepOutcome.AWAITING_APPROVAL
                results = [outcome]
                index += 1
            if self._record(results):
                self._close(todo[index:], "loop detected")
                return StepOutcome.LOOP_DETECTED
        return StepOutcome.DONE

    # -- grouping and execution -------------------------------------------------------------

    def _tool(self, call: ToolCall) -> Tool | None:
        return self._ctx.tools.get(call.name)

    def _parallel_batch(self, calls: list[ToolCall], start: int) -> list[ToolCall]:
        batch: list[ToolCall] = []
        for call in calls[start:]:
            tool = self._tool(call)
            if tool is None or not tool.parallel:
                break
            if call.refused or not _valid_arguments(call):
                break  # refused one by one, with the reason (``_run_one``)
            kind = call_kind(tool, call)
            if isinstance(kind, str) or kind.category is not ToolCategory.READ_ONLY:
                break  # this call needs approval (or cannot say): through the gate, alone
            if call_refusal(tool, call.arguments) is not None:
                break  # refused one by one, as nothing that ran (``_run_one``)
            batch.append(call)
        return batch if len(batch) > 1 else []

    def _run_parallel(self, calls: list[ToolCall]) -> list[CallResult]:
        started = time.monotonic()
        futures: list[tuple[ToolCall, Tool, float, Future[ToolResult]]] = []
        for call in calls:
            tool = self._tool(call)
            assert tool is not None  # _parallel_batch only takes known tools, read-only calls only
            if self._ctx.listening:
                self._ctx.emit(ToolStart(call, ToolCategory.READ_ONLY))
            timeout = self._timeout_for(tool)
            futures.append(
                (call, tool, timeout, self._pool.submit(tool.execute, call.arguments, timeout=timeout))
            )
        results = []
        for call, tool, timeout, future in futures:
            waited = time.monotonic() - started
            result = self._wait(tool, future, max(0.0, timeout + TIMEOUT_GRACE_SECONDS - waited), timeout)
            results.append(CallResult(call, ToolCategory.READ_ONLY, result, time.monotonic() - started, True))
        return results

    def _run_one(self, call: ToolCall) -> CallResult | None:
        """One call through the gate. ``None`` means a human has not decided yet."""
        tool = self._tool(call)
        if call.refused:
            return self._refused(call, tool.category if tool else None, f"Error: {call.refused}")
        if tool is None:
            available = ", ".join(self._ctx.tools) or "none"
            return self._refused(call, None, f"Error: unknown tool {call.name}. Available tools: {available}")
        try:
            arguments = call.parsed_arguments()
        except ValueError as error:
            return self._refused(call, tool.category, f"Error: invalid arguments for {call.name}: {error}")
        kind = call_kind(tool, call)
        if isinstance(kind, str):
            return self._refused(call, tool.category, kind)
        if not kind.category.requires_confirmation:
            # A read-only call reaches no gate: a policy deny or an unknown or unreachable target
            # refuses it here, so it is recorded as refused (nothing ran), not as a failed run.
            refused = call_refusal(tool, call.arguments)
            if refused is not None:
                return self._refused(call, kind.category, refused)
            return self._execute(call, tool, kind.category)
        # Earlier results of this turn may still be on their way to memory: confirm them before
        # anyone is asked to approve, or anything is changed.
        self._ctx.config.memory.flush()
        if call.id == self._ctx.state.executing_call_id:
            # A worker died while this side effect ran: never run it twice, tell the model instead.
            return self._refused(call, kind.category, OUTCOME_UNKNOWN.format(tool=call.name))
        refusal = call_refusal(tool, call.arguments)  # an unknown or unreachable target: ask nobody
        if refusal is not None:
            return self._refused(call, kind.category, refusal)
        return self._confirm_and_execute(call, tool, arguments, kind)

    def _confirm_and_execute(
        self, call: ToolCall, tool: Tool, arguments: dict[str, object], kind: CallCategory
    ) -> CallResult | None:
        category = kind.category
        confirm = self._ctx.config.confirm
        if confirm is None:
            return self._refused(call, category, NO_APPROVER.format(tool=call.name))
        dry_run: DryRun | None = None
        if category is ToolCategory.DESTRUCTIVE:
            dry_run, refusal = self._dry_run(call, tool, category)
            if refusal is not None:
                return refusal
        request = ConfirmRequest(
            call=call,
            category=category,
            preview=dry_run.text if dry_run else None,
            plan=dry_run.plan if dry_run else None,
            plan_created_at=dry_run.created_at if dry_run else None,
            command=describe_call(tool, call.arguments),
            reason=kind.reason,
            target=call_target(tool, call.arguments),
            rationale=self._rationale(call),
            verification=self._verification(tool, call),
        )
        decision = confirm(request)
        if decision.status is DecisionStatus.PENDING:
            return None
        self._ctx.state.dry_run = None  # decided: the next destructive call gets its own dry run
        if decision.status is DecisionStatus.USED:
            return self._refused(call, category, OUTCOME_UNKNOWN.format(tool=call.name))
        if decision.status is DecisionStatus.DECLINED:
            return self._refused(call, category, f"{DECLINED}{decision.reason or 'no reason given'}")
        # confirmed_by (and the plan) come from the decision, never from the model.
        arguments[CONFIRMED_BY] = decision.confirmed_by
        if category is ToolCategory.DESTRUCTIVE:
            arguments[APPROVED_PLAN] = decision.plan
        approved = call.model_copy(update={"arguments": json.dumps(arguments)})
        # The grant travels to the tool only: history, card and audit keep the call as approved.
        executed = json.dumps({**arguments, APPROVAL_GRANT: decision.grant}) if decision.grant else None
        self._ctx.state.executing_call_id = call.id
        self._ctx.save_state()  # the "executing" mark is durable before the side effect starts
        done = self._execute_verified(approved, tool, category, executed, decision)
        if not decision.note:
            return done
        result = done.result  # why the call needed more than usual (``agent.provenance``), first
        stable = result.stable_output if result.stable_output is not None else result.output
        noted = replace(result, output=f"{decision.note}\n{result.output}", stable_output=stable)
        return done._replace(result=noted)

    def _verification(self, tool: Tool, call: ToolCall) -> Verification | None:
        try:
            return call_verification(tool, call.arguments)
        except Exception:  # a broken declaration must not stop the run: the card shows no check
            return None

    def _execute_verified(
        self, call: ToolCall, tool: Tool, category: ToolCategory, arguments: str | None, decision: Decision
    ) -> CallResult:
        """The approved call, its before-read just before it and its check right after it: only
        the ones derived now from the approved call that are exactly what the approval showed
        (``decision.verify``; ``None`` from a confirm callback that shows none: the derived ones)."""
        verification = self._verification(tool, call)
        refused = None
        if decision.verify is not None and not same_as_approved(verification, decision.verify):
            refused = "it is not the check the approval showed, so it was not run; verify by hand"
        before = None
        if verification is not None and verification.before is not None and refused is None:
            planned = verification.before
            before = read_before(
                planned, self._tool_by_name(planned.tool), self._run_read, self._check_seconds()
            )
        started = self._ctx.config.clock()
        done = self._execute(call, tool, category, arguments)
        if verification is None or verification.check is None:
            return done
        check = verification.check
        if refused is not None:
            outcome = CheckOutcome(check, False, False, "", 0, 0.0, self._check_seconds(), before, refused)
            return done._replace(checked=outcome)
        if done.result.is_error:
            return done  # the change failed: nothing to verify, the model reads why
        outcome = run_check(
            check,
            self._tool_by_name(check.tool),
            self._run_read,
            seconds=self._check_seconds(),
            action_started=started,
            before=before,
        )
        if outcome.passed and verification.health is not None:
            left = max(0.001, self._check_seconds() - outcome.seconds)
            outcome = with_health(outcome, self._health(verification.health, started, left))
        return done._replace(checked=outcome)

    def _health(self, health: PlannedCall, started: float, seconds: float) -> CheckOutcome:
        """The health URL the check also requests, as any read-only ``http_check`` runs (the
        egress policy decides whether it may; a URL it refuses or would ask about fails the check)."""
        return run_check(
            health,
            self._tool_by_name(health.tool),
            self._run_read,
            seconds=seconds,
            action_started=started,
        )

    def _check_seconds(self) -> float:
        return max(0.001, min(self._ctx.config.check_seconds, self._ctx.remaining_seconds()))

    def _tool_by_name(self, name: str) -> Tool | None:
        return self._ctx.tools.get(name)

    def _run_read(self, tool: Tool, arguments: str, timeout: float) -> ToolResult:
        """A declared read-only call (a check, a before-read), as any read-only call runs: refused
        where a read-only call of the model's would be, on the target's route, within ``timeout``."""
        if call_category(tool, arguments).category is not ToolCategory.READ_ONLY:
            return ToolResult("Error: this call would need approval; a check only reads", is_error=True)
        refusal = call_refusal(tool, arguments)
        if refusal is not None:
            return ToolResult(refusal, is_error=True)
        limit = max(0.001, min(tool.timeout, timeout))
        if enforces_own_timeout(tool):
            return self._inline(tool, arguments, limit)
        future = self._pool.submit(tool.execute, arguments, timeout=limit)
        return self._wait(tool, future, limit + TIMEOUT_GRACE_SECONDS, limit)

    def _rationale(self, call: ToolCall) -> str | None:
        """The text of the assistant message that asked for ``call`` (``None`` when it said nothing)."""
        for message in reversed(self._ctx.messages):
            if message.role == "assistant" and any(c.id == call.id for c in message.tool_calls):
                return (message.content or "").strip() or None
        return None

    def _dry_run(
        self, call: ToolCall, tool: Tool, category: ToolCategory
    ) -> tuple[DryRun | None, CallResult | None]:
        """This execution's dry run: the one already made for it (a resumed run), or a new one.

        Returns the dry run, or the result that answers the call without asking anyone: the dry
        run failed, or it found nothing to do.
        """
        stored = self._ctx.state.dry_run
        if stored is not None and stored.call_id == call.id:
            return stored, None
        result = self._preview(tool, call)
        if result.is_error:
            reason = result.output.removeprefix("Error: ")
            return None, self._refused(
                call, category, f"Error: dry run failed, not asking for approval: {reason}"
            )
        text = self._filtered(result.output)  # the approver sees it in Slack: redact it too
        if result.nothing_to_do:
            # Nobody is asked to approve nothing; the model learns there is nothing to do.
            return None, CallResult(call, category, ToolResult(f"Nothing to do: {text}"), 0.0, False)
        dry_run = DryRun(call_id=call.id, text=text, plan=result.plan, created_at=self._ctx.config.clock())
        self._ctx.state.dry_run = dry_run
        self._ctx.save_state()  # a resumed run shows the approver this plan, not a new one
        return dry_run, None

    def _execute(
        self, call: ToolCall, tool: Tool, category: ToolCategory, arguments: str | None = None
    ) -> CallResult:
        if self._ctx.listening:
            self._ctx.emit(ToolStart(call, category))
        started = time.monotonic()
        timeout = self._timeout_for(tool)
        if enforces_own_timeout(tool):  # no hand-off to the pool and back: it returns by its timeout
            result = self._inline(tool, arguments or call.arguments, timeout)
        else:
            future = self._pool.submit(tool.execute, arguments or call.arguments, timeout=timeout)
            result = self._wait(tool, future, timeout + TIMEOUT_GRACE_SECONDS, timeout)
        return CallResult(call, category, result, time.monotonic() - started, True)

    @staticmethod
    def _inline(tool: Tool, arguments: str, timeout: float) -> ToolResult:
        """``tool.execute`` on this thread, its failure shown to the model as on the pool."""
        try:
            result: object = tool.execute(arguments, timeout=timeout)
        except Exception as error:  # as a pool thread would: a failing tool never crashes the run
            return ToolStep._checked(tool, None, error)
        return ToolStep._checked(tool, result, None)

    def _preview(self, tool: Tool, call: ToolCall) -> ToolResult:
        timeout = self._timeout_for(tool)
        future = self._pool.submit(self._preview_or_error, tool, call.arguments, timeout)
        return self._wait(tool, future, timeout + TIMEOUT_GRACE_SECONDS, timeout)

    @staticmethod
    def _preview_or_error(tool: Tool, arguments: str, timeout: float) -> ToolResult:
        result = tool.preview(arguments, timeout=timeout)
        return result if result is not None else ToolResult("Error: this tool has no dry run", is_error=True)

    def _timeout_for(self, tool: Tool) -> float:
        # A tool's own timeout never outlives the run's deadline.
        return max(0.001, min(tool.timeout, self._ctx.remaining_seconds()))

    def _wait(self, tool: Tool, future: Future[ToolResult], wait: float, timeout: float) -> ToolResult:
        # Only what the tool itself raised becomes a result; an exception raised in this thread
        # while waiting (RQ's job timeout arrives as a signal) must stop the job, not feed the model.
        # ``Future.exception`` waits on the future's own condition: about half the cost of
        # ``concurrent.futures.wait``, which builds a waiter per call (measured in bench/notes).
        try:
            error = future.exception(timeout=wait)
        except FutureTimeoutError:
            future.cancel()
            return ToolResult(f"Error: {tool.definition.name} timed out after {timeout:.1f}s", is_error=True)
        return self._checked(tool, None if error is not None else future.result(), error)

    @staticmethod
    def _checked(tool: Tool, result: object, error: BaseException | None) -> ToolResult:
        """A finished execution as the model sees it: its result, or what it raised as an error."""
        if error is not None:  # a failing tool is shown to the model, never a crash
            return ToolResult(f"Error: {tool.definition.name} failed: {type(error).__name__}: {error}", True)
        if not isinstance(result, ToolResult):
            return ToolResult(
                f"Error: {tool.definition.name} returned {type(result).__name__}", is_error=True
            )
        if result.is_error and not result.output.startswith("Error"):
            return replace(result, output=f"Error: {result.output}")
        return result

    def _refused(self, call: ToolCall, category: ToolCategory | None, text: str) -> CallResult:
        """Nothing ran. The audit still names the inventory target the call asked for, when the
        tool knows it (a name it does not know stays out: that text is only the model's)."""
        tool = self._tool(call)
        found = call_target(tool, call.arguments) if tool is not None and _valid_arguments(call) else None
        result = ToolResult(text, is_error=True, target=found.name if found else None)
        return CallResult(call, category, result, 0.0, False)

    # -- recording ----------------------------------------------------------------------------

    def _record(self, results: list[CallResult]) -> bool:
        """Filter, loop-check and append results in call order; True when the loop must stop."""
        stop = False
        messages = []
        charted: list[SeriesSet | None] = []  # per result: its series, when the model reads them
        state = self._ctx.state
        evidence = self._ctx.config.evidence
        for item in results:
            output = item.result.output or "(no output)"
            text = self._filtered(output)
            # Loop detection hashes what the tool found, not its decoration (elapsed time, approval
            # note); filtered too, so the persisted window never hashes an unredacted secret. The
            # filter is a function of the text: an undecorated output is filtered once.
            stable = item.result.stable_output
            if stable is not None:
                stable = stable or "(no output)"
            hashed = text if stable is None or stable == output else self._filtered(stable)
            verdict, count = self._ctx.detector.record(item.call.name, item.call.arguments, hashed)
            if verdict is LoopVerdict.STOP:
                stop = True
            if verdict is not LoopVerdict.OK:
                text = LOOP_WARNING.format(count=count)
            read = verdict is LoopVerdict.OK and item.executed and not item.result.is_error
            charted.append(item.result.series if read else None)
            if item.executed and item.call.name not in state.tools_used:
                state.tools_used.append(item.call.name)
            ref = self._ctx.next_evidence_ref() if evidence else None
            message = self._result_message(item, text, ref)
            if item.checked is not None:
                message = self._with_check(message, item.checked)
            messages.append(message)
        if state.executing_call_id is not None:
            state.executing_call_id = None
        # Not waited for: the answer is read at the next write or read of the run (see Memory.append).
        # Until then only the model sees these results; nothing outside the run acts on them.
        self._ctx.append(messages, wait=False)
        stored, self._ctx.stored_events = self._ctx.stored_events, []
        if not self._ctx.listening:
            return stop
        for item, message, series in zip(results, messages, charted, strict=True):
            self._ctx.emit(
                ToolEnd(
                    item.call,
                    item.category,
                    message.content or "",
                    item.result.is_error or (message.content or "").startswith("Error"),
                    item.duration,
                    item.executed,
                    item.result.target,
                    item.result.executor,
                    message.meta.get("evidence"),
                    series,
                )
            )
            checked = message.meta.get("check")
            if item.checked is not None:
                self._ctx.emit(CheckEnded(item.call, item.checked, checked["evidence"] if checked else None))
        for event in stored:  # what update_findings recorded, now stored with its result
            self._ctx.emit(event)
        return stop

    def _filtered(self, text: str) -> str:
        output_filter = self._ctx.config.tool_output_filter
        return output_filter(text) if output_filter is not None else text

    @staticmethod
    def _result_message(item: CallResult, text: str, ref: str | None) -> Message:
        meta: MessageMeta = {"tool": item.call.name, "duration": round(item.duration, 3)}
        if item.result.target is not None:
            meta["target"] = item.result.target
        if item.category is not None:
            meta["category"] = _CATEGORY_TEXT[item.category]
        if not item.executed:  # the run card, rebuilt from history, must not show it as having run
            meta["refused"] = True
        if item.executed and item.category is not None and item.category.requires_confirmation:
            # History keeps the call as it ran, confirmed_by included, next to its result.
            meta["arguments"] = item.call.arguments
            meta["confirmed_by"] = confirmed_by(item.call.arguments)
        if ref is not None:
            meta["evidence"] = ref
        return Message.tool_result(item.call.id, text, meta)

    def _with_check(self, message: Message, outcome: CheckOutcome) -> Message:
        """The change's result with its check after it, under the check's own evidence id."""
        ref = self._ctx.next_evidence_ref() if self._ctx.config.evidence else None
        return with_check(message, outcome, ref, self._filtered(outcome.text()))

    def _close(self, calls: list[ToolCall], reason: str) -> None:
        """Give every call that will not run a result, so the history stays valid to send."""
        if not calls:
            return
        text = NOT_RUN.format(reason=reason)
        if self._ctx.config.evidence:
            closed = [
                Message.tool(c.id, text, refused=True, evidence=self._ctx.next_evidence_ref()) for c in calls
            ]
        else:
            closed = [Message.tool(call.id, text) for call in calls]
        self._ctx.append(closed)
