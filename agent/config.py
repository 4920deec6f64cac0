"""The one flat configuration of a run."""

from __future__ import annotations

import time
from collections.abc import Callable, Sequence
from dataclasses import dataclass, field

from agent.chat import ChatModel
from agent.condense import Condenser, HistoryCondenser
from agent.defaults import LOOP_STOP_AT, LOOP_WARN_AT, LOOP_WINDOW
from agent.events import Event
from agent.memory import Memory
from agent.recovery import RecoveryPolicy, RecoveryStrategy
from agent.tooling import CallTarget, Tool, ToolCategory
from agent.types import BudgetAnswer, Decision, Limits, Message, RunState, ToolCall
from agent.verification import Verification


@dataclass(frozen=True)
class ConfirmRequest:
    """What a confirm callback is asked about: one execution (``call.id`` is the runtime's own id).

    * ``preview`` / ``plan`` / ``plan_created_at``: the dry run of a destructive call (text shown
      to the approver, the machine-readable plan the execution is bound to, when it was made);
    * ``command``: the exact command or request the call executes, when the tool can say it;
    * ``reason``: why this call needs a person when its tool alone would not (``CallCategory``:
      a read-only network tool reaching a host that is not on the egress allow list), plain text;
    * ``involved``: the people whose messages the run had read when the call was proposed (the
      requester first): a destructive call needs an approver who is none of them;
    * ``target``: the inventory target the call acts on (its name, how it is reached, its labels);
    * ``rationale``: the text of the model's message that made the call (why it wants it), as the
      model wrote it: untrusted, for the approver to read, never for deciding anything.
    """

    call: ToolCall
    category: ToolCategory
    preview: str | None = None
    plan: str | None = None
    plan_created_at: float | None = None
    command: str | None = None
    involved: tuple[str, ...] = ()
    reason: str | None = None
    target: CallTarget | None = None
    rationale: str | None = None
    verification: Verification | None = None
    """The call's declared check, before-read and undo (``agent.verification``): shown on the card
    and bound by the approval like the arguments."""


ConfirmCallback = Callable[[ConfirmRequest], Decision]
InjectCallback = Callable[[], Sequence[Message]]
InjectedCallback = Callable[[Sequence[Message]], None]
StopPredicate = Callable[[RunState], bool]
EventCallback = Callable[[Event], None]
# Asked when the run's paid tokens passed its budget, before the next model request: the run's state
# (its usage, the model that answered last) and the budget it passed; idempotent per budget (a
# resumed run asks again).
BudgetCallback = Callable[[RunState, int], BudgetAnswer]


@dataclass
class RunConfig:
    """Everything a ``Run`` needs. Only ``models`` and ``memory`` are required.

    * ``models``: the primary model first, then fallbacks; the run switches to the next only
      when a model's transient retries are exhausted, at most once per model per run.
    * ``memory``: where history and state live (``InMemoryMemory`` or ``RedisMemory``).
    * ``tools``: the allowlist. Their definitions are sent in name order, byte-identical every request.
    * ``system_prompt``: the first message of a new run's history.
    * ``inject`` / ``on_injected``: new messages to add at the start of the next iteration, and
      the acknowledgement called only after they are stored.
    * ``stop``: checked after each iteration's tools; ``True`` ends the run as ``cancelled``.
    * ``confirm``: asked before every mutating or destructive call; idempotent per call id.
    * ``condense``: summarises the older history on a context overflow, with the run's model
      (``agent.condense.HistoryCondenser``; by default ``Condenser``).
    * ``recovery``: what to do when the model request fails (``agent.recovery.RecoveryStrategy``;
      by default ``RecoveryPolicy``).
    * ``limits``: iterations, wall-clock deadline, token budget.
    * ``extend_budget``: asked, before the next model request, when the paid tokens passed the
      budget; without it the run stops there as ``budget_spent``. Its answer raises the budget
      (kept in ``RunState.token_budget``), stops the run (``cancelled``) or suspends it as
      ``budget`` (a person decides; a later run over the same memory asks again).
    * ``loop_window`` / ``loop_warn_at`` / ``loop_stop_at``: loop detection.
    * ``on_event``: typed events (``agent.events``).
    * ``tool_output_filter``: applied to every tool result text (redaction and truncation).
    * ``redact``: applied to the model's text and call arguments before they are stored; a call
      whose arguments it changes is refused (``agent.calls``).
    * ``max_parallel_tools``: the most read-only parallel tools running at once.
    * ``stream``: request with SSE, emit ``TextDelta`` events and watch for degenerate repetition.
    * ``clock``: wall clock for the deadline (seconds since the epoch; injected in tests).
    * ``first_message``: applied to a new run's first message (a user's) in the loop's first write,
      the fenced one that puts the system prompt first; a run resumed later is not given it again
      (chatops: the past incidents the run starts from, searched by the worker).
    * ``evidence``: give every tool result an evidence id, offer ``update_findings`` and check the
      final answer's citations (``agent.evidence``, ``agent.findings_tool``, ``agent.citations``).
    """

    models: Sequence[ChatModel]
    memory: Memory
    tools: Sequence[Tool] = ()
    system_prompt: str = "You are an on-call operations assistant."
    inject: InjectCallback | None = None
    on_injected: InjectedCallback | None = None
    stop: StopPredicate | None = None
    confirm: ConfirmCallback | None = None
    condense: HistoryCondenser = field(default_factory=Condenser)
    recovery: RecoveryStrategy = field(default_factory=RecoveryPolicy)
    limits: Limits = field(default_factory=Limits)
    extend_budget: BudgetCallback | None = None
    loop_window: int = LOOP_WINDOW
    loop_warn_at: int = LOOP_WARN_AT
    loop_stop_at: int = LOOP_STOP_AT
    on_event: EventCallback | None = None
    tool_output_filter: Callable[[str], str] | None = None
    redact: Callable[[str], str] | None = None
    max_parallel_tools: int = 4
    stream: bool = False
    recover_tool_calls: bool = True
    clock: Callable[[], float] = time.time
    evidence: bool = False
    first_message: Callable[[Message], Message] | None = None
    check_seconds: float = 60.0
    """How long an approved change's declared check may keep trying (``CHATOPS_CHECK_SECONDS``)."""
