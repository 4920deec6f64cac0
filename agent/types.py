"""Neutral message and result types shared by the runtime, the tools and the bot.

They mirror the OpenAI Chat Completions shapes closely enough that converting to and
from the wire is a field-by-field copy (see ``agent.models.openai_wire``), but carry no transport.
"""

from __future__ import annotations

import hashlib
from enum import StrEnum
from typing import Any, Literal, TypeVar

from pydantic import BaseModel, ConfigDict, Field, with_config
from typing_extensions import TypedDict, Unpack

from agent.arguments import TRUSTED_ARGUMENTS as TRUSTED_ARGUMENTS  # re-exported: its old home
from agent.arguments import canonical_arguments, checked_arguments
from agent.defaults import DEADLINE_SECONDS, MAX_CALLS_PER_TURN, MAX_ITERATIONS
from agent.findings import Citation, Findings

Role = Literal["system", "user", "assistant", "tool"]
_Model = TypeVar("_Model", bound=BaseModel)
_set = object.__setattr__


def revised(model: _Model, changes: dict[str, Any]) -> _Model:
    """A shallow copy of ``model`` with ``changes``, not validated: ``model.model_copy(update=changes)``
    without its generic copying (a third of the loop's copies' cost).

    Only for values the runtime builds from values already of their field's type (a stored call's
    ids, a redacted text, a list of calls), on the models below: no extra fields, no private ones.
    ``tests/agent/test_types.py`` holds it equal to ``model_copy`` for each use.
    """
    copied = type(model).__new__(type(model))
    _set(copied, "__dict__", {**model.__dict__, **changes})
    _set(copied, "__pydantic_fields_set__", model.__pydantic_fields_set__ | changes.keys())
    _set(copied, "__pydantic_extra__", None)
    _set(copied, "__pydantic_private__", None)
    return copied


class ToolCall(BaseModel):
    """One function call requested by the model. ``arguments`` is a JSON string, as on the wire.

    ``id`` is the runtime's own, unique in the run, given when the assistant message is stored
    (``agent.run``): it is the identity of one execution, and what an approval is bound to. The
    id the model sent is kept as ``provider_id`` for the record only; a model that repeats an id
    cannot make two calls one.
    """

    model_config = ConfigDict(frozen=True)

    id: str
    name: str
    arguments: str = "{}"
    provider_id: str = ""
    provider_fields: dict[str, Any] = Field(default_factory=dict)
    """Fields of the call in its provider's wire format that the provider needs back (Gemini's
    ``extra_content`` with its thought signature); sent only to the source of its message."""
    refused: str = ""
    """The runtime's reason for not running this call at all (over the calls-per-turn cap, or
    arguments too large to keep): set when the message is stored, answered as an error result."""

    def parsed_arguments(self) -> dict[str, Any]:
        """The arguments as a dict, within ``agent.arguments``' limits (size, depth, characters a
        card can show); raises ``ArgumentsRejected`` (a ``ValueError``) with what is wrong."""
        return checked_arguments(self.arguments, TRUSTED_ARGUMENTS)

    def arguments_sha256(self) -> str:
        """SHA-256 of the canonical form of the arguments (what an approval is bound to)."""
        try:
            canonical = canonical_arguments(self.parsed_arguments())
        except ValueError:
            canonical = self.arguments
        return hashlib.sha256(canonical.encode()).hexdigest()


@with_config(ConfigDict(extra="allow"))
class MessageMeta(TypedDict, total=False):
    """``Message.meta``: ours, never sent to the model; each key is written by one kind of message.

    Stored as a plain JSON object with the message. The keys are declared in the order their
    writers set them, so a message is stored exactly as before it had a type; a key not declared
    here (history stored by an older version) is kept as it was, untyped.
    """

    # user messages: the person and the Slack message they came from (``bot.runs``)
    inbox_id: str
    """The inbox item an injected reply was taken from (removed from the inbox with the append)."""
    slack_user: str
    ts: str
    carried_people: list[str]
    """A follow-up's first message: the people whose earlier messages in the thread it carries."""
    similar_pending: bool
    """A mention's first message: the past incidents it starts from are searched by the worker
    and put into it in the loop's first write (``RunConfig.first_message``; chatops:
    ``bot.runs.first_similar``), which stores it without this key."""
    condensed: int
    """The summary that replaced this many older messages (``agent.condense``)."""
    # assistant messages
    model: str
    """The model of the chain that answered."""
    # tool results (``agent.tool_step``)
    tool: str
    duration: float
    """Seconds the call took."""
    target: str
    """The inventory target the call ran on (only with an inventory)."""
    category: str
    """The call's ``ToolCategory`` value."""
    refused: bool
    """Nothing ran (refused, declined, an unknown tool): set only then."""
    arguments: str
    """A call that needed a person: its arguments as it ran, ``confirmed_by`` included."""
    confirmed_by: str | None
    evidence: str
    """The result's evidence id (``E3``), put before its text on the wire (``agent.evidence``)."""
    check: CheckMeta
    """An approved change's check, run right after it (``agent.checks``): its own evidence id, in
    the same message from ``at`` on (one result per call)."""


class CheckMeta(TypedDict):
    """Where a change's check is in its result message, and what it was."""

    evidence: str
    tool: str
    arguments: str
    at: int
    """Where the check's text starts in the message's content."""
    passed: bool


class Message(BaseModel):
    """One chat message. ``meta`` is ours, never sent to the model (``MessageMeta``)."""

    role: Role
    content: str | None = None
    tool_calls: list[ToolCall] = Field(default_factory=list)
    tool_call_id: str | None = None
    name: str | None = None
    meta: MessageMeta = Field(default_factory=lambda: MessageMeta())
    provider_source: str | None = None
    """The endpoint an assistant message came from (``agent.models.endpoints``), for ``provider_fields``."""
    provider_fields: dict[str, Any] = Field(default_factory=dict)
    """Fields of an assistant message that its provider needs back in later requests (DeepSeek's
    ``reasoning_content``, Anthropic's thinking blocks); sent only to ``provider_source``, never shown."""

    @classmethod
    def system(cls, text: str) -> Message:
        return cls(role="system", content=text)

    @classmethod
    def user(cls, text: str, **meta: Unpack[MessageMeta]) -> Message:
        return cls(role="user", content=text, meta=meta)

    @classmethod
    def assistant(cls, text: str | None = None, tool_calls: list[ToolCall] | None = None) -> Message:
        return cls(role="assistant", content=text, tool_calls=tool_calls or [])

    @classmethod
    def tool(cls, call_id: str, text: str, **meta: Unpack[MessageMeta]) -> Message:
        return cls(role="tool", tool_call_id=call_id, content=text, meta=meta)

    @classmethod
    def tool_result(cls, call_id: str, text: str, meta: MessageMeta) -> Message:
        """``Message.tool`` for the loop's own results, not validated again: the call id is the
        runtime's, ``text`` went through the output filter, ``meta`` was typed where it was built."""
        fields = {
            "tool_call_id": call_id,
            "content": text,
            "meta": meta,
            "tool_calls": [],
            "provider_fields": {},
        }
        return revised(_TOOL_RESULT, fields)  # each result its own lists, as a validated one has


class ToolDef(BaseModel):
    """What the model is told about one tool: name, description and JSON-schema parameters."""

    model_config = ConfigDict(frozen=True)

    name: str
    description: str
    parameters: dict[str, Any] = Field(default_factory=lambda: {"type": "object", "properties": {}})


class Request(BaseModel):
    """One Chat Completions request, before it is put on the wire."""

    model: str
    messages: list[Message]
    tools: list[ToolDef] = Field(default_factory=list)
    temperature: float | None = None
    max_tokens: int | None = None
    time_left: float | None = None
    """Seconds the run has left (its deadline): a client's retries must end within them. Not sent."""

    @classmethod
    def of_run(cls, model: str, messages: list[Message], tools: list[ToolDef], time_left: float) -> Request:
        """A run's request, from values already typed (the history's messages, the run's tool list):
        validating them again walked the whole history on every request."""
        return revised(
            _REQUEST, {"model": model, "messages": messages, "tools": tools, "time_left": time_left}
        )


_REQUEST = Request(model="", messages=[])  # what of_run revises


_TOOL_RESULT = Message(role="tool", content="", tool_call_id="")  # what tool_result revises


class Usage(BaseModel):
    """Token counts. ``prompt_tokens`` is the whole prompt; of it, ``cache_read_tokens`` were served
    from the provider's cache and ``cache_write_tokens`` were written to it (Anthropic counts both
    apart from its ``input_tokens``; the clients add them up here)."""

    prompt_tokens: int = 0
    completion_tokens: int = 0
    cache_read_tokens: int = 0
    cache_write_tokens: int = 0

    @property
    def paid_tokens(self) -> int:
        """Tokens that count against the budget: uncached prompt (cache writes included) plus completion."""
        return self.prompt_tokens - self.cache_read_tokens + self.completion_tokens

    def __add__(self, other: Usage) -> Usage:
        # Sums of two validated counts: no validation again (this runs on every model answer).
        return revised(
            self,
            {
                "prompt_tokens": self.prompt_tokens + other.prompt_tokens,
                "completion_tokens": self.completion_tokens + other.completion_tokens,
                "cache_read_tokens": self.cache_read_tokens + other.cache_read_tokens,
                "cache_write_tokens": self.cache_write_tokens + other.cache_write_tokens,
            },
        )


class Choice(BaseModel):
    index: int = 0
    message: Message
    finish_reason: str | None = None


class Response(BaseModel):
    """A complete answer of the model (for a stream: the assembled one)."""

    id: str = ""
    model: str = ""
    choices: list[Choice] = Field(default_factory=list)
    usage: Usage = Field(default_factory=Usage)

    @property
    def message(self) -> Message | None:
        return self.choices[0].message if self.choices else None


class DecisionStatus(StrEnum):
    APPROVED = "approved"
    DECLINED = "declined"
    PENDING = "pending"
    USED = "used"  # the approval was consumed by an execution whose outcome is not recorded


class Decision(BaseModel):
    """A confirm callback's answer for one tool call.

    ``pending`` means a human will decide later: the run stops as ``awaiting_approval``
    and a later run over the same memory asks again.
    """

    status: DecisionStatus
    confirmed_by: str | None = None
    reason: str | None = None
    plan: str | None = None  # approved destructive calls: the plan the approver saw, to execute exactly
    grant: str | None = None  # the approval's signed grant, which a runner verifies before acting
    verify: str | None = (
        None  # the check and undo as approved (``Verification.to_json``): the loop runs only it
    )
    note: str | None = None  # what the model is told with the call's result (a derived call's provenance)

    @property
    def approved(self) -> bool:
        return self.status is DecisionStatus.APPROVED

    @classmethod
    def approve(
        cls, confirmed_by: str, plan: str | None = None, grant: str | None = None, verify: str | None = None
    ) -> Decision:
        return cls(
            status=DecisionStatus.APPROVED, confirmed_by=confirmed_by, plan=plan, grant=grant, verify=verify
        )

    @classmethod
    def used(cls) -> Decision:
        return cls(status=DecisionStatus.USED)

    @classmethod
    def decline(cls, reason: str) -> Decision:
        return cls(status=DecisionStatus.DECLINED, reason=reason)

    @classmethod
    def pending(cls, reason: str | None = None) -> Decision:
        return cls(status=DecisionStatus.PENDING, reason=reason)


class BudgetAnswer(BaseModel):
    """An ``extend_budget`` callback's answer for a run at its token budget: ``budget`` (the new,
    higher budget: go on), ``stopped_by`` (someone stopped it: it ends ``cancelled``), or neither
    (a person will decide: the run suspends as ``budget``, holding no worker)."""

    budget: int | None = None
    stopped_by: str | None = None


class Limits(BaseModel):
    """The terminal boundaries of a run. ``deadline_seconds`` is wall clock for the whole run."""

    max_iterations: int = MAX_ITERATIONS
    deadline_seconds: float = DEADLINE_SECONDS
    token_budget: int | None = None
    max_calls_per_turn: int = MAX_CALLS_PER_TURN


class RunStatus(StrEnum):
    """A run's status. ``budget`` is a suspension (the run reached its token budget and waits for
    a person to extend it: ``RunConfig.extend_budget``); ``budget_spent`` is the terminal stop of a
    run whose budget nobody can extend (a loop without that callback)."""

    QUEUED = "queued"
    RUNNING = "running"
    AWAITING_APPROVAL = "awaiting_approval"
    AWAITING_BUDGET = "budget"
    COMPLETED = "completed"
    FAILED = "failed"
    ITERATION_LIMIT = "iteration_limit"
    DEADLINE = "deadline"
    BUDGET = "budget_spent"
    LOOP_DETECTED = "loop_detected"
    CANCELLED = "cancelled"

    @property
    def terminal(self) -> bool:
        return self not in (
            RunStatus.QUEUED,
            RunStatus.RUNNING,
            RunStatus.AWAITING_APPROVAL,
            RunStatus.AWAITING_BUDGET,
        )

    @property
    def suspended(self) -> bool:
        """Waiting for a person (an approval, a budget extension): no worker holds the run."""
        return self in (RunStatus.AWAITING_APPROVAL, RunStatus.AWAITING_BUDGET)


class RunResult(BaseModel):
    """What a run returns on success and on every stop."""

    status: RunStatus
    output: str | None = None
    error: str | None = None
    iterations: int = 0
    usage: Usage = Field(default_factory=Usage)
    tools_used: list[str] = Field(default_factory=list)
    model: str | None = None
    pending_call_id: str | None = None
    findings: Findings | None = None  # as shown (``agent.findings``), with evidence ids on
    citations: list[Citation] = Field(default_factory=list)  # the output's, checked by code

    @classmethod
    def from_state(cls, state: RunState, pending_call_id: str | None = None) -> RunResult:
        """The result a run's saved state describes (for a finished run, the one it returned)."""
        return cls(
            status=state.status,
            output=state.output,
            error=state.error,
            iterations=state.iteration,
            usage=state.usage,
            tools_used=list(state.tools_used),
            model=state.model,
            pending_call_id=pending_call_id,
            findings=state.findings,
            citations=list(state.citations),
        )


class DryRun(BaseModel):
    """The dry run of one destructive execution, made once and shown to its approver.

    Kept with the run so a resumed run asks about the same plan instead of making a new one.
    """

    call_id: str
    text: str
    plan: str | None = None
    created_at: float


def runtime_call_id(seq: int) -> str:
    """The runtime's id of the run's ``seq``-th tool call: 9 letters and digits, which every
    provider's tool-call id rules accept."""
    return f"x{seq:08d}"


class RunState(BaseModel):
    """Everything beyond the history that a run needs to be resumed by another worker."""

    status: RunStatus = RunStatus.QUEUED
    iteration: int = 0
    usage: Usage = Field(default_factory=Usage)
    started_at: float | None = None
    active_seconds: float = 0.0  # time spent working in earlier segments; waiting for a human is not counted
    loop_window: list[str] = Field(default_factory=list)
    condense_count: int = 0
    failed_models: list[str] = Field(default_factory=list)
    # Why each failed model failed (its last error, redacted): the run's error says it, not just the names.
    model_errors: dict[str, str] = Field(default_factory=dict)
    model: str | None = None
    tools_used: list[str] = Field(default_factory=list)
    executing_call_id: str | None = None
    # The token budget as extended by people (``RunConfig.extend_budget``); ``None``: the limits' own.
    token_budget: int | None = None
    call_seq: int = 0  # tool calls numbered so far: the next call's runtime id
    dry_run: DryRun | None = None  # the dry run of the destructive call waiting for its approval
    evidence_seq: int = 0  # tool results given an evidence id so far: the next one is E<seq + 1>
    findings: Findings | None = None  # the last ``update_findings``, as shown (``agent.findings``)
    citations: list[Citation] = Field(default_factory=list)  # the final answer's, checked
    output: str | None = None
    error: str | None = None
