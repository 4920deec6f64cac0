"""A transport-agnostic agent loop: ``Run(RunConfig(models=..., memory=..., tools=...)).execute()``.

The names below are the public API (the README's example uses nothing else); the modules they
come from are the implementation and may move. ``agent`` imports neither ``tools`` nor ``bot``.
"""

from agent.chat import ChatModel
from agent.condense import CondenseError, Condenser, HistoryCondenser
from agent.config import ConfirmCallback, ConfirmRequest, RunConfig
from agent.errors import AgentError, ConfigurationError, LeaseLostError, LLMError, MemoryStoreError
from agent.events import (
    Condensed,
    CondenseFailed,
    Event,
    IterationStarted,
    MessagesInjected,
    RunFinished,
    TextDelta,
    ToolEnd,
    ToolStart,
)
from agent.keys import MemoryKeys
from agent.memory import InMemoryMemory, Memory
from agent.models.anthropic_client import AnthropicClient
from agent.models.endpoints import ClientOptions, ModelEndpoint, build_model
from agent.models.openai_client import LLMClient
from agent.recovery import RecoveryAction, RecoveryPolicy, RecoveryStrategy
from agent.redis_memory import RedisMemory
from agent.run import Run
from agent.scripted import FunctionModel, ScriptedModel, tool_call
from agent.tooling import CallCategory, Tool, ToolCategory, ToolResult
from agent.types import (
    Decision,
    DecisionStatus,
    Limits,
    Message,
    MessageMeta,
    Request,
    Response,
    RunResult,
    RunState,
    RunStatus,
    ToolCall,
    ToolDef,
    Usage,
)

__all__ = [
    "AgentError",
    "AnthropicClient",
    "CallCategory",
    "ChatModel",
    "ClientOptions",
    "CondenseError",
    "CondenseFailed",
    "Condensed",
    "Condenser",
    "ConfigurationError",
    "ConfirmCallback",
    "ConfirmRequest",
    "Decision",
    "DecisionStatus",
    "Event",
    "FunctionModel",
    "HistoryCondenser",
    "InMemoryMemory",
    "IterationStarted",
    "LLMClient",
    "LLMError",
    "LeaseLostError",
    "Limits",
    "Memory",
    "MemoryKeys",
    "MemoryStoreError",
    "Message",
    "MessageMeta",
    "MessagesInjected",
    "ModelEndpoint",
    "RecoveryAction",
    "RecoveryPolicy",
    "RecoveryStrategy",
    "RedisMemory",
    "Request",
    "Response",
    "Run",
    "RunConfig",
    "RunFinished",
    "RunResult",
    "RunState",
    "RunStatus",
    "ScriptedModel",
    "TextDelta",
    "Tool",
    "ToolCall",
    "ToolCategory",
    "ToolDef",
    "ToolEnd",
    "ToolResult",
    "ToolStart",
    "Usage",
    "build_model",
    "tool_call",
]
