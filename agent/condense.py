"""Condensing: when the history no longer fits the context window, summarise its older part.

The summary is asked of the run's own model with the run's own system prompt and tool list (so
the cacheable prefix stays byte-identical), and replaces the older messages. The system prompt and
the most recent turns are kept whole; an assistant tool-call message is never separated from its
tool results.
"""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass
from typing import Protocol

from agent.chat import ChatModel
from agent.errors import AgentError
from agent.types import Message, Request, ToolDef, Usage

SUMMARY_INSTRUCTION = (
    "The conversation above is too long to continue. Summarise it for yourself: the user's request, "
    "what you checked and found (with the key figures), what you changed, what was approved or declined, "
    "and what is still to do. Answer with the summary only; do not call tools."
)
SUMMARY_PREFIX = "Summary of the earlier conversation (condensed to fit the context window):\n"


class CondenseError(AgentError):
    """The history could not be condensed (nothing old enough, or the summary request failed)."""


class HistoryCondenser(Protocol):
    """What ``RunConfig.condense`` is: makes a history that overflowed the context fit again."""

    def condense(
        self, messages: Sequence[Message], model: ChatModel, tools: Sequence[ToolDef]
    ) -> tuple[list[Message], Usage]:
        """The shorter history (system prompt first, no tool result separated from its call) and
        the tokens it cost; raises ``CondenseError`` when it cannot."""
        ...


@dataclass(frozen=True)
class Condenser:
    """Keeps the system prompt and at least ``keep_recent`` of the newest messages."""

    keep_recent: int = 6

    def split_point(self, messages: Sequence[Message]) -> int:
        """Index of the first kept message: never a tool result, so no call loses its results."""
        start = max(1, len(messages) - self.keep_recent)
        while start > 1 and messages[start].role == "tool":
            start -= 1
        return start

    def condense(
        self, messages: Sequence[Message], model: ChatModel, tools: Sequence[ToolDef]
    ) -> tuple[list[Message], Usage]:
        """The condensed history and the tokens the summary cost. Raises ``CondenseError``."""
        if not messages or messages[0].role != "system":
            raise CondenseError("history does not start with the system prompt")
        start = self.split_point(messages)
        older = list(messages[1:start])
        if not older:
            raise CondenseError("nothing old enough to condense")
        request = Request(
            model=model.model,
            messages=[messages[0], *older, Message.user(SUMMARY_INSTRUCTION)],
            tools=list(tools),
        )
        try:
            response = model.complete(request)
        except AgentError as error:
            raise CondenseError(f"summary request failed: {error}") from error
        answer = response.message
        if answer is None or answer.tool_calls or not (answer.content or "").strip():
            raise CondenseError("the model did not answer the summary request with text")
        summary = Message.user(SUMMARY_PREFIX + (answer.content or "").strip(), condensed=len(older))
        return [messages[0], summary, *messages[start:]], response.usage
