"""Reading a history: which calls of the last assistant turn still lack a result."""

from __future__ import annotations

from collections.abc import Sequence

from agent.types import Message, ToolCall

NOT_RUN = "Error: not run: {reason}"


def answered_call_ids(messages: Sequence[Message]) -> set[str]:
    return {m.tool_call_id for m in messages if m.role == "tool" and m.tool_call_id}


def answered_in_last_turn(messages: Sequence[Message]) -> set[str]:
    """Call ids answered by the tool results at the end of the history (reads only that tail,
    so the cost of an iteration does not grow with the run)."""
    answered: set[str] = set()
    for message in reversed(messages):
        if message.role != "tool":
            break
        if message.tool_call_id:
            answered.add(message.tool_call_id)
    return answered


def unanswered_calls(messages: Sequence[Message]) -> list[ToolCall]:
    """The calls of the last assistant tool-call turn that have no tool result yet, in order."""
    for index in range(len(messages) - 1, -1, -1):
        message = messages[index]
        if message.role == "assistant":
            answered = answered_call_ids(messages[index + 1 :])
            return [call for call in message.tool_calls if call.id not in answered]
        if message.role not in ("tool",):
            return []
    return []


def close_unanswered_calls(messages: Sequence[Message], reason: str) -> list[Message]:
    """The history with a ``not run`` result for every unanswered call, so it is valid to send again
    (used when a run stopped while calls were pending and its conversation is carried on)."""
    missing = unanswered_calls(messages)
    return [*messages, *(Message.tool(call.id, NOT_RUN.format(reason=reason)) for call in missing)]
