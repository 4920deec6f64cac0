"""Neutral message and result types shared by the runtime, the tools and the bot.

They mirror the OpenAI Chat Completions shapes closely enough that converting to and
from the wire is a field-by-field copy (see ``agent.wire``), but carry no transport.
"""

from __future__ import annotations

import hashlib
import json
from enum import StrEnum
from typing import Any, Literal

from pydantic import BaseModel, ConfigDict, Field

Role = Literal["system", "user", "assistant", "tool"]


class ToolCall(BaseModel):
    """One function call requested by the model. ``arguments`` is a JSON string, as on the wire."""

    model_config = ConfigDict(frozen=True)

    id: str
    name: str
    arguments: str = "{}"

    def parsed_arguments(self) -> dict[str, Any]:
        """The arguments as a dict; raises ``ValueError`` when they are not a JSON object."""
        value = json.loads(self.arguments or "{}")
        if not isinstance(value, dict):
            raise ValueError("tool arguments must be a JSON object")
        return value

    def arguments_sha256(self) -> str:
        """SHA-256 of the canonical form of the arguments (sorted keys, no spaces)."""
        try:
            canonical = json.dumps(self.parsed_arguments(), sort_keys=True, separators=(",", ":"))
        except ValueError:
            canonical = self.arguments
        return hashlib.sha256(canonical.encode()).hexdigest()


class Message(BaseModel):
    """One chat message.

    ``meta`` is ours, never sent to the model: the Slack user and ``ts`` of an injected
    reply, the inbox it came from, and so on.
    """

    role: Role
    content: str | None = None
    tool_calls: list[ToolCall] = Field(default_factory=list)
    tool_call_id: str | None = None
    name: str | None = None
    meta: dict[str, Any] = Field(default_factory=dict)

    @classmethod
    def system(cls, text: str) -> Message:
        return cls(role="system", content=text)

    @classmethod
    def user(cls, text: str, **meta: Any) -> Message:
        return cls(role="user", content=text, meta=meta)

    @classmethod
    def assistant(cls, text: str | None = None, tool_calls: list[ToolCall] | None = None) -> Message:
        return cls(role="assistant", content=text, tool_calls=tool_calls or [])

    @classmethod
    def tool(cls, call_id: str, text: str, **meta: Any) -> Message:
        return cls(role="tool", tool_call_id=call_id, content=text, meta=meta)


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


class Usage(BaseModel):
    """Token counts. ``cache_read_tokens`` is the part of the prompt served from the provider's cache."""

    prompt_tokens: int = 0
    completion_tokens: int = 0
    cache_read_tokens: int = 0

    @property
    def paid_tokens(self) -> int:
        """Tokens that count against the budget: uncached prompt plus completion."""
        return self.prompt_tokens - self.cache_read_tokens + self.completion_tokens

    def __add__(self, other: Usage) -> Usage:
        return Usage(
            prompt_tokens=self.prompt_tokens + other.prompt_tokens,
            completion_tokens=self.completion_tokens + other.completion_tokens,
            cache_read_tokens=self.cache_read_tokens + other.cache_read_tokens,
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


class Decision(BaseModel):
    """A confirm callback's answer for one tool call.

    ``pending`` means a human will decide later: the run stops as ``awaiting_approval``
    and a later run over the same memory asks again.
    """

    status: DecisionStatus
    confirmed_by: str | None = None
    reason: str | None = None

    @property
    def approved(self) -> bool:
        return self.status is DecisionStatus.APPROVED

    @classmethod
    def approve(cls, confirmed_by: str) -> Decision:
        return cls(status=DecisionStatus.APPROVED, confirmed_by=confirmed_by)

    @classmethod
    def decline(cls, reason: str) -> Decision:
        return cls(status=DecisionStatus.DECLINED, reason=reason)

    @classmethod
    def pending(cls, reason: str | None = None) -> Decision:
        return cls(status=DecisionStatus.PENDING, reason=reason)


class Limits(BaseModel):
    """The terminal boundaries of a run. ``deadline_seconds`` is wall clock for the whole run."""

    max_iterations: int = 20
    deadline_seconds: float = 600.0
    token_budget: int | None = None


class RunStatus(StrEnum):
    QUEUED = "queued"
    RUNNING = "running"
    AWAITING_APPROVAL = "awaiting_approval"
    COMPLETED = "completed"
    FAILED = "failed"
    ITERATION_LIMIT = "iteration_limit"
    DEADLINE = "deadline"
    BUDGET = "budget"
    LOOP_DETECTED = "loop_detected"
    CANCELLED = "cancelled"

    @property
    def terminal(self) -> bool:
        return self not in (RunStatus.QUEUED, RunStatus.RUNNING, RunStatus.AWAITING_APPROVAL)


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
        )


class RunState(BaseModel):
    """Everything beyond the history that a run needs to be resumed by another worker."""

    status: RunStatus = RunStatus.QUEUED
    iteration: int = 0
    usage: Usage = Field(default_factory=Usage)
    started_at: float | None = None
    active_seconds: float = 0.0  # time spent working in earlier segments; waiting for a human is not counted
    loop_window: list[str] = Field(default_factory=list)
    condense_count: int = 0
    empty_retries: int = 0
    failed_models: list[str] = Field(default_factory=list)
    model: str | None = None
    tools_used: list[str] = Field(default_factory=list)
    executing_call_id: str | None = None
    output: str | None = None
    error: str | None = None
