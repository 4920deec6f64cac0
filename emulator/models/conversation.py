"""A Chat Completions conversation as a scripted model reads it: the tool results with their
evidence ids, the newest user message, the newest message's text.

The runtime puts each tool result's evidence id before its text on the wire (``[E3] ...``,
``agent.evidence.model_text``). The label is the runtime's, not the tool's: a scenario quoting a
result (``{tool_result[df]}``), matching one (``when: {tool: df, contains: ...}``) or taking a line
of it as a quote reads the output without it, and finds the id here (``ToolOutput.ref``). Exactly
one label at the start is taken off; a conversation without labels (a run without evidence ids)
is read as it is.
"""

from __future__ import annotations

import re
from collections.abc import Iterator, Mapping, Sequence
from dataclasses import dataclass
from typing import Any

from agent.evidence import split_label
from bot.memory.notes import SIMILAR_NOTE

NO_RESULT = "E0"
"""The id given for a tool that has no result yet: it names nothing, so a citation of it shows unverified."""


@dataclass(frozen=True)
class ToolOutput:
    """One tool result: the tool's name, its evidence id (``None`` without a label), its text."""

    tool: str
    ref: str | None
    output: str

    def lines(self) -> Iterator[str]:
        return iter(self.output.splitlines())


class Conversation:
    """The messages of one request, read once."""

    def __init__(self, messages: Sequence[Mapping[str, Any]]) -> None:
        self.messages = messages
        names = _tool_names(messages)
        self.results: list[ToolOutput] = []
        self.last_user = ""
        for message in messages:
            content = str(message.get("content") or "")
            if message.get("role") == "tool":
                ref, output = split_label(content)
                self.results.append(ToolOutput(names.get(message.get("tool_call_id", ""), ""), ref, output))
            elif message.get("role") == "user":
                self.last_user = content

    @property
    def last(self) -> Mapping[str, Any] | None:
        return self.messages[-1] if self.messages else None

    def last_text(self) -> str:
        """The newest message's text; a tool result's without its evidence label."""
        last = self.last
        if last is None:
            return ""
        text = str(last.get("content") or "")
        return split_label(text)[1] if last.get("role") == "tool" else without_notes(text)

    def last_tool(self) -> str | None:
        """The tool whose result is the newest message (``None``: it is not a tool result)."""
        last = self.last
        if last is None or last.get("role") != "tool":
            return None
        return _tool_names(self.messages).get(last.get("tool_call_id", ""), "")

    def newest(self, tool: str) -> ToolOutput | None:
        return next((result for result in reversed(self.results) if result.tool == tool), None)

    def newest_ref(self, tool: str) -> str:
        """The evidence id of ``tool``'s newest result; ``NO_RESULT`` when it has none (or no label)."""
        result = self.newest(tool)
        return (result.ref if result else None) or NO_RESULT

    def last_output(self) -> str:
        return self.results[-1].output if self.results else "(no tool result yet)"

    def find_line(self, tool: str, pattern: re.Pattern[str]) -> tuple[str, str] | None:
        """``(ref, quote)`` from the newest result of ``tool`` holding a line ``pattern`` finds: the
        line, stripped, or the group named ``quote`` when the pattern has one. ``None`` when no
        result does."""
        for result in reversed(self.results):
            if result.tool != tool:
                continue
            for line in result.lines():
                match = pattern.search(line)
                if match:
                    quote = match.group("quote") if "quote" in pattern.groupindex else line
                    return result.ref or NO_RESULT, (quote or "").strip()
        return None

    def turns(self) -> int:
        """How many assistant messages the conversation holds."""
        return sum(1 for message in self.messages if message.get("role") == "assistant")


def _tool_names(messages: Sequence[Mapping[str, Any]]) -> dict[str, str]:
    """tool_call_id -> tool name, from the assistant messages' calls."""
    names = {}
    for message in messages:
        for call in message.get("tool_calls") or []:
            names[call.get("id", "")] = call.get("function", {}).get("name", "")
    return names


def without_notes(text: str) -> str:
    """A user message without the bot's notes of past incidents (``bot.memory.notes``), which the
    bot puts after the request: a script answers what the person (or the alert) said, not the
    words of an earlier thread."""
    return text.split(SIMILAR_NOTE, 1)[0].rstrip()
