"""Tool-call recovery: some models write a call as JSON in their text instead of a structured call.

A call is recovered only when its name is on the run's allowlist; anything else stays text.
Recognised shapes: ``{"name": ..., "arguments": {...}}`` (also ``"parameters"`` / ``"args"``,
and ``{"tool": ...}``), alone, in a fenced code block, or inside ``<tool_call>...</tool_call>``.
"""

from __future__ import annotations

import json
import re
import uuid
from collections.abc import Collection
from typing import Any

from agent.types import Message, ToolCall

_FENCED = re.compile(r"```(?:json)?\s*(.*?)```", re.DOTALL)
_TAGGED = re.compile(r"<tool_call>\s*(.*?)\s*</tool_call>", re.DOTALL)


def _candidates(text: str) -> list[str]:
    found = _TAGGED.findall(text) + _FENCED.findall(text)
    return found or [text]


def _as_call(obj: Any, allowed: Collection[str]) -> ToolCall | None:
    if not isinstance(obj, dict):
        return None
    name = obj.get("name", obj.get("tool"))
    if not isinstance(name, str) or name not in allowed:
        return None
    arguments = obj.get("arguments", obj.get("parameters", obj.get("args", {})))
    if isinstance(arguments, str):
        try:
            arguments = json.loads(arguments)
        except ValueError:
            return None
    if not isinstance(arguments, dict):
        return None
    return ToolCall(id=f"call_recovered_{uuid.uuid4().hex[:12]}", name=name, arguments=json.dumps(arguments))


def recover_tool_calls(message: Message, allowed: Collection[str]) -> Message | None:
    """A structured replacement for ``message`` when its text is a call to an allowed tool, else None."""
    if message.role != "assistant" or message.tool_calls or not message.content:
        return None
    calls: list[ToolCall] = []
    for candidate in _candidates(message.content.strip()):
        try:
            parsed = json.loads(candidate.strip())
        except ValueError:
            continue
        for obj in parsed if isinstance(parsed, list) else [parsed]:
            call = _as_call(obj, allowed)
            if call is not None:
                calls.append(call)
    if not calls:
        return None
    return Message.assistant(None, calls).model_copy(update={"meta": {"recovered_from_text": True}})
