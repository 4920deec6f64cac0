"""The ReAct loop: model -> tools -> model, inside boundaries held by code.

One iteration, in order: check the token budget (``RunConfig.extend_budget``: extended, or the run
suspends as ``budget`` or stops), inject, request, account usage, finish if the answer has no tool
calls, run the tools (``agent.tool_step``), check the stop predicate. Before the first iteration
a resumed run answers the calls its last turn left open (after an approval). Every message is
stored before anything outside the run acts on it (a turn whose calls are all read-only is stored
together with its results, in one write); every stop returns a full ``RunResult``.
"""

from __future__ import annotations

import contextlib
from concurrent.futures import ThreadPoolExecutor

from agent.calls import number_calls
from agent.chat import ChatModel, DonePart, TextPart
from agent.citations import check_citations
from agent.condense import CondenseError
from agent.config import RunConfig
from agent.context import RunContext
from agent.errors import (
    AgentError,
    AnswerTooSlowError,
    ConfigurationError,
    EmptyResponseError,
    LLMError,
)
from agent.events import (
    Condensed,
    CondenseFailed,
    FindingsUpdated,
    IterationStarted,
    MessagesInjected,
    RunFinished,
    TextDelta,
)
from agent.evidence import FINDINGS_TOOL
from agent.findings import Findings
from agent.findings_tool import FindingsClaim, FindingsTool, verified_findings
from agent.history import unanswered_calls
from agent.loop_detection import LoopDetector
from agent.recovery import RecoveryAction
from agent.repetition import RepetitionDetector
from agent.tool_step import StepOutcome, ToolStep, call_kind
from agent.toolcall_recovery import recover_tool_calls
from agent.tooling import ToolCategory
from agent.types import (
    Message,
    Request,
    Response,
    RunResult,
    RunState,
    RunStatus,
    ToolCall,
)

_STEP_STATUS = {
    StepOutcome.LOOP_DETECTED: RunStatus.LOOP_DETECTED,
    StepOutcome.DEADLINE: RunStatus.DEADLINE,
}


class _Stop(Exception):
    def __init__(self, status: RunStatus, error: str | None = None, output: str | None = None) -> None:
        super().__init__(error or status.value)
        self.status = status
        self.error = error
        self.output = output


def _validate(config: RunConfig) -> None:
    if not config.models:
        raise ConfigurationError("RunConfig.models needs at least one model")
    names = [tool.definition.name for tool in config.tools]
    if config.evidence:
        names.append(FINDINGS_TOOL)  # the runtime's own: no tool of the configuration may take its name
    duplicates = sorted({name for name in names if names.count(name) > 1})
    if duplicates:
        raise ConfigurationError(f"duplicate tool names: {', '.join(duplicates)}")
    if config.max_parallel_tools < 1:
        raise ConfigurationError("max_parallel_tools must be at least 1")


class Run:
    """``Run(config).execute()`` runs (or resumes) one run to a ``RunResult``."""

    def __init__(self, config: RunConfig) -> None:
        _validate(config)
        self._config = config
        self._findings = FindingsTool() if config.evidence else None
        offered = [*config.tools, self._findings] if self._findings is not None else list(config.tools)
        tools = sorted(offered, key=lambda tool: tool.definition.name)
        self._tools = {tool.definition.name: tool for tool in tools}
        # Computed once: the tool list is part of the cacheable prefix and must not change in a run.
        self._tool_defs = [tool.definition for tool in tools]
        self._recovery = config.recovery
        self._condenser = config.condense

    def execute(self) -> RunResult:
        ctx, prompted = self._load()
        if ctx.state.status.terminal:
            return self._result(ctx)  # a finished run asked again (a retried job) does nothing
        ctx.begin_segment()
        if prompted:  # a new run: its system prompt and its running state, in one write
            ctx.state.status = RunStatus.RUNNING
            self._config.memory.replace_messages(ctx.messages, ctx.state)
        else:
            ctx.set_status(RunStatus.RUNNING)
        # Not a ``with`` block: its exit would wait for a hung tool's thread, past the deadline.
        pool = ThreadPoolExecutor(self._config.max_parallel_tools, thread_name_prefix="chatops-tool")
        try:
            return self._loop(ctx, ToolStep(ctx, pool))
        except _Stop as stop:
            return self._finish(ctx, stop.status, error=stop.error, output=stop.output)
        except BaseException:
            self._settle_memory()
            raise
        finally:
            pool.shutdown(wait=False, cancel_futures=True)

    def _settle_memory(self) -> None:
        # A write may still be on its way: read its answer so its connection can serve again. Its own
        # failure is secondary to the error already leaving the run.
        with contextlib.suppress(AgentError):
            self._config.memory.flush()

    # -- start ------------------------------------------------------------------------------

    def _load(self) -> tuple[RunContext, bool]:
        """The run as its memory holds it, and whether the system prompt was put first (a new run
        whose history does not start with one: ``execute`` stores it with the running state)."""
        memory = self._config.memory
        state = memory.load_state()
        messages = memory.load_messages()
        fresh = state is None
        state = state or RunState()
        ctx = RunContext(
            config=self._config,
            tools=self._tools,
            tool_defs=self._tool_defs,
            state=state,
            messages=messages,
            detector=LoopDetector(
                self._config.loop_window,
                self._config.loop_warn_at,
                self._config.loop_stop_at,
                state.loop_window,
            ),
        )
        if self._findings is not None:
            self._findings.bind(lambda claim: self._record_findings(ctx, claim))
        if fresh and (not messages or messages[0].role != "system"):
            first = self._config.first_message
            if first is not None and messages and messages[0].role == "user":
                messages = [first(messages[0]), *messages[1:]]
            ctx.messages = [Message.system(self._config.system_prompt), *messages]
            return ctx, True
        return ctx, False

    @staticmethod
    def _record_findings(ctx: RunContext, claim: FindingsClaim) -> Findings:
        """``update_findings``' effect: the findings as shown, stored with the tool's result (in the
        state of the same write) and reported once stored."""
        version = ctx.state.findings.version + 1 if ctx.state.findings is not None else 1
        findings = verified_findings(claim, ctx.evidence, version)
        ctx.state.findings = findings
        ctx.stored_events.append(FindingsUpdated(findings))
        return findings

    # -- the loop ---------------------------------------------------------------------------

    def _loop(self, ctx: RunContext, step: ToolStep) -> RunResult:
        open_calls = unanswered_calls(ctx.messages)
        if open_calls:
            result = self._tools_phase(ctx, step, open_calls)
            if result is not None:
                return result
        limits = self._config.limits
        while True:
            if ctx.state.iteration >= limits.max_iterations:
                raise _Stop(RunStatus.ITERATION_LIMIT, f"stopped after {ctx.state.iteration} iterations")
            self._check_deadline(ctx)
            if self._budget_spent(ctx):
                return self._suspend(ctx, None, RunStatus.AWAITING_BUDGET)
            ctx.state.iteration += 1
            if ctx.listening:
                ctx.emit(IterationStarted(ctx.state.iteration, ctx.state.usage, ctx.state.model))
            self._inject(ctx)
            response = self._request(ctx)
            message = self._answer(ctx, response)
            if self._read_only(message.tool_calls):
                ctx.hold(message)  # stored with its results, in one write
            else:
                ctx.append([message])
            if not message.tool_calls:
                if ctx.state.iteration < limits.max_iterations and self._inject(ctx):
                    continue  # a reply came in while the model answered: let it read that first
                return self._finish(ctx, RunStatus.COMPLETED, output=message.content)
            result = self._tools_phase(ctx, step, message.tool_calls)
            if result is not None:
                return result

    def _tools_phase(self, ctx: RunContext, step: ToolStep, calls: list[ToolCall]) -> RunResult | None:
        outcome = step.run(calls)
        if outcome is StepOutcome.AWAITING_APPROVAL:
            return self._suspend(ctx, step.pending_call_id)
        if outcome in _STEP_STATUS:
            raise _Stop(_STEP_STATUS[outcome], f"{outcome.value.replace('_', ' ')} while running tools")
        if self._config.stop is not None and self._config.stop(ctx.state):
            raise _Stop(RunStatus.CANCELLED, "stopped on request")
        return None

    def _read_only(self, calls: list[ToolCall]) -> bool:
        """True when every call is a read-only call of a known tool (and there is at least one).

        Per call (``call_category``): a read-only tool's call that needs approval (an unlisted
        host under ``CHATOPS_EGRESS_UNLISTED=approve``) is stored before anyone is asked.
        """
        for call in calls:
            tool = self._tools.get(call.name)
            kind = call_kind(tool, call) if tool is not None else None
            if kind is None or isinstance(kind, str) or kind.category is not ToolCategory.READ_ONLY:
                return False
        return bool(calls)

    def _check_deadline(self, ctx: RunContext) -> None:
        if ctx.deadline_passed():
            raise _Stop(RunStatus.DEADLINE, f"the {self._config.limits.deadline_seconds:g}s deadline passed")

    def _budget(self, ctx: RunContext) -> int | None:
        """The run's token budget: as people extended it, else the limits' own."""
        return ctx.state.token_budget or self._config.limits.token_budget

    def _budget_spent(self, ctx: RunContext) -> bool:
        """Before a model request: True when the run must wait for a person to extend its budget.
        A budget extended now is stored before the request it pays for; a stop ends the run."""
        budget, extend = self._budget(ctx), self._config.extend_budget
        if extend is None or budget is None or ctx.state.usage.paid_tokens <= budget:
            return False
        answer = extend(ctx.state, budget)
        if answer.stopped_by:
            raise _Stop(
                RunStatus.CANCELLED,
                f"stopped at its token budget ({ctx.state.usage.paid_tokens} of {budget} tokens) "
                f"by {answer.stopped_by}",
            )
        if answer.budget is None or answer.budget <= budget:
            return True
        ctx.state.token_budget = answer.budget
        ctx.save_state()
        return self._budget_spent(ctx)  # still past it (a budget raised by less than was spent)

    def _inject(self, ctx: RunContext) -> bool:
        """Store and acknowledge new messages from the inject callback; True when there were any."""
        if self._config.inject is None:
            return False
        injected = list(self._config.inject())
        if not injected:
            return False
        ctx.append(injected)  # stored first ...
        ctx.emit(MessagesInjected(injected))
        if self._config.on_injected is not None:
            self._config.on_injected(injected)  # ... acknowledged after
        return True

    def _answer(self, ctx: RunContext, response: Response) -> Message:
        message = response.message
        assert message is not None  # _request only returns responses with a message
        update: dict[str, object] = {"role": "assistant", "meta": {**message.meta, "model": response.model}}
        cap, redact = self._config.limits.max_calls_per_turn, self._config.redact
        if self._config.recover_tool_calls and not message.tool_calls and message.content:
            recovered = recover_tool_calls(message.model_copy(update=update), self._tools.keys())
            if recovered is not None:
                # The text form never enters history: the structured call replaces it.
                return number_calls(recovered, ctx.state, cap, redact)
        return number_calls(message, ctx.state, cap, redact, update)

    # -- requests and recovery -----------------------------------------------------------------

    def _current_model(self, ctx: RunContext) -> ChatModel:
        if not ctx.state.failed_models:
            return self._config.models[0]  # the usual case: nothing failed yet
        for model in self._config.models:
            if chain_key(model) not in ctx.state.failed_models:
                return model
        raise _Stop(RunStatus.FAILED, f"every model failed: {self._model_failures(ctx)}")

    @staticmethod
    def _model_failures(ctx: RunContext) -> str:
        """Each failed model and why (``gpt-4o: all 5 attempts failed, the last with: ConnectError:
        ... Connection refused``): the status, the provider's message or the connection error."""
        errors = ctx.state.model_errors
        return "; ".join(errors.get(key) or key for key in ctx.state.failed_models)

    def _request(self, ctx: RunContext) -> Response:
        empty_retries = 0
        while True:
            model = self._current_model(ctx)
            # A copy of each list: the request keeps the history as it was sent (a copy of
            # pointers; a client encodes the whole history for every request anyway).
            request = Request.of_run(
                model.model,
                list(ctx.messages),
                list(self._tool_defs),
                ctx.remaining_seconds(),  # the client's retries end by the deadline
            )
            try:
                response = self._send(ctx, model, request)
            except AnswerTooSlowError as error:
                if ctx.deadline_passed():  # a model trickling bytes does not outlive the deadline
                    raise _Stop(RunStatus.DEADLINE, f"model {self._said(model, error)}") from error
                raise _Stop(RunStatus.FAILED, f"model {self._said(model, error)}") from error
            except LLMError as error:
                action = self._recovery.decide(
                    error, condense_count=ctx.state.condense_count, empty_retries=empty_retries
                )
                if action is RecoveryAction.FAIL:
                    raise _Stop(RunStatus.FAILED, f"model {self._said(model, error)}") from error
                if action is RecoveryAction.RETRY:
                    empty_retries += 1
                elif action is RecoveryAction.SWITCH_MODEL:
                    ctx.state.failed_models.append(chain_key(model))
                    ctx.state.model_errors[chain_key(model)] = self._said(model, error)
                    ctx.save_state()
                else:
                    self._condense(ctx, model, error)
                self._check_deadline(ctx)
                continue
            self._account(ctx, response)
            return response

    def _said(self, model: ChatModel, error: LLMError) -> str:
        """The error as the run records it: redacted, naming the model once, at most 300 characters
        (a provider's HTML error page is not a reason)."""
        text = " ".join(str(error).split())
        if not text.startswith(f"{model.model}:"):
            text = f"{model.model}: {text}"
        redact = self._config.redact
        text = redact(text) if redact is not None else text
        return text if len(text) <= 300 else text[:299] + "…"

    def _send(self, ctx: RunContext, model: ChatModel, request: Request) -> Response:
        response = self._stream(ctx, model, request) if self._config.stream else model.complete(request)
        message = response.message
        if message is None or (not message.tool_calls and not (message.content or "").strip()):
            raise EmptyResponseError("the model answered with neither text nor tool calls", model=model.model)
        return response

    def _stream(self, ctx: RunContext, model: ChatModel, request: Request) -> Response:
        detector = RepetitionDetector()
        parts = model.stream(request)
        try:
            for part in parts:
                if isinstance(part, TextPart):
                    ctx.emit(TextDelta(part.text))
                    if detector.feed(part.text):
                        raise EmptyResponseError("degenerate repetition in the stream", model=model.model)
                elif isinstance(part, DonePart):
                    return part.response
        finally:
            close = getattr(parts, "close", None)
            if close is not None:
                close()  # cancels the HTTP stream when we stop early
        raise EmptyResponseError("the stream ended without a response", model=model.model)

    def _account(self, ctx: RunContext, response: Response) -> None:
        state = ctx.state
        state.usage = state.usage + response.usage
        if response.model and response.model != state.model:
            state.model = response.model
        budget = self._budget(ctx)
        if self._config.extend_budget is None and budget is not None and ctx.state.usage.paid_tokens > budget:
            message = response.message
            output = message.content if message is not None and not message.tool_calls else None
            if output:
                ctx.append([self._answer(ctx, response)])
            raise _Stop(
                RunStatus.BUDGET,
                f"token budget {budget} spent ({ctx.state.usage.paid_tokens} tokens)",
                output,
            )

    def _condense(self, ctx: RunContext, model: ChatModel, cause: LLMError) -> None:
        ctx.state.condense_count += 1
        before = len(ctx.messages)
        try:
            condensed, usage = self._condenser.condense(ctx.messages, model, self._tool_defs)
        except CondenseError as error:
            ctx.emit(CondenseFailed(str(error)))
            raise _Stop(
                RunStatus.FAILED, f"context overflow ({cause}); condensing failed: {error}"
            ) from error
        ctx.state.usage = ctx.state.usage + usage
        ctx.sync_detector()
        self._config.memory.replace_messages(condensed, ctx.state)
        ctx.messages = condensed
        summary = condensed[1].content or ""
        ctx.emit(Condensed(removed_messages=before - len(condensed) + 1, summary_chars=len(summary)))

    # -- endings ----------------------------------------------------------------------------

    def _suspend(
        self, ctx: RunContext, call_id: str | None, status: RunStatus = RunStatus.AWAITING_APPROVAL
    ) -> RunResult:
        ctx.end_segment()
        ctx.state.status = status
        ctx.save_state()
        return self._result(ctx, pending_call_id=call_id)

    def _finish(
        self, ctx: RunContext, status: RunStatus, *, output: str | None = None, error: str | None = None
    ) -> RunResult:
        ctx.end_segment()
        ctx.state.status = status
        ctx.state.output = output
        ctx.state.error = error
        if self._config.evidence and output:  # code, not the model, says which citations hold
            ctx.state.citations = check_citations(output, ctx.evidence)
        ctx.save_state()  # LeaseLostError escapes: another worker owns the run, this one must not report it
        result = self._result(ctx)
        ctx.emit(RunFinished(result))
        return result

    @staticmethod
    def _result(ctx: RunContext, pending_call_id: str | None = None) -> RunResult:
        return RunResult.from_state(ctx.state, pending_call_id)


def chain_key(model: ChatModel) -> str:
    """How a model of the chain is told apart: its name and, for an HTTP client, its endpoint
    (``gpt-4o`` on OpenAI and ``gpt-4o`` on Azure are two models of the chain)."""
    source = getattr(model, "source", None)
    return f"{model.model}@{source}" if isinstance(source, str) and source else model.model


def run(config: RunConfig) -> RunResult:
    """Run (or resume) one run to its ``RunResult``."""
    return Run(config).execute()
