"""The Anthropic Messages wire format: ``Request`` to ``POST /v1/messages`` bytes, answers to ``Response``.

Pure functions, no I/O (``agent.models.anthropic_client`` does the HTTP, ``agent.models.anthropic_stream``
the SSE events).

The neutral history maps onto Messages like this: the leading system message becomes the
top-level ``system``; tools are ``{name, description, input_schema}``; an assistant turn is
text and ``tool_use`` blocks (``input`` an object); tool results are ``tool_result`` blocks (an
``Error: ...`` result with ``is_error``) in the user turn that follows, first in it; turns of one
role in a row are merged, as the API requires alternation. Tool-call ids are mapped to
``^[a-zA-Z0-9_-]+$`` (``agent.tool_ids``), so a history begun with another provider still fits.

Prompt caching: a ``cache_control`` breakpoint ends the stable prefix (after the tools and the
system prompt, which the run keeps byte-identical), and two rolling ones mark the end of the
history and the end of the previous request's history, so each request reads the cache the one
before it wrote, however many blocks a turn added. Four breakpoints at most, as the API allows.
"""

from __future__ import annotations

import json
from typing import Any

from agent.defaults import MAX_TOKENS
from agent.errors import ConfigurationError
from agent.evidence import model_text
from agent.models.openai_wire import decode_json, encode_json, malformed, optional_str, require_object
from agent.models.provider_errors import error_from_payload
from agent.tool_ids import IdMapper, IdStyle
from agent.types import Choice, Message, Request, Response, ToolCall, ToolDef, Usage

DEFAULT_MAX_TOKENS = MAX_TOKENS  # the Messages API requires a limit
CACHE_CONTROL = {"type": "ephemeral"}
THINKING_FIELD = "thinking_blocks"
"""``provider_fields`` key of an assistant turn's thinking blocks, sent back before its tool_use."""
EMPTY_TEXT = "(empty)"  # the API refuses empty text blocks
_THINKING_KEYS = {"thinking": ("type", "thinking", "signature"), "redacted_thinking": ("type", "data")}
_THINKING_TYPES = tuple(_THINKING_KEYS)
STOP_REASONS = {"end_turn": "stop", "tool_use": "tool_calls", "max_tokens": "length", "stop_sequence": "stop"}


# --- requests -------------------------------------------------------------------------------


def tool_to_wire(tool: ToolDef) -> dict[str, Any]:
    return {"name": tool.name, "description": tool.description, "input_schema": tool.parameters}


def request_body(
    request: Request,
    *,
    stream: bool = False,
    source: str | None = None,
    max_tokens: int = DEFAULT_MAX_TOKENS,
    cache: bool = True,
) -> dict[str, Any]:
    """The JSON body for ``POST /v1/messages``. ``source`` is the endpoint encoding for: only
    assistant turns it produced get their thinking blocks back."""
    messages = list(request.messages)
    system: list[str] = []
    while messages and messages[0].role == "system":
        system.append(messages.pop(0).content or "")
    body: dict[str, Any] = {"model": request.model, "max_tokens": request.max_tokens or max_tokens}
    system_blocks = [{"type": "text", "text": text} for text in system if text]
    tools = [tool_to_wire(tool) for tool in request.tools]
    turns = _Turns(source).build(messages)
    if cache:
        _mark_prefix(system_blocks, tools)
        _mark_history(turns)
    if system_blocks:
        body["system"] = system_blocks
    if tools:
        body["tools"] = tools
    body["messages"] = turns
    if request.temperature is not None:
        body["temperature"] = request.temperature
    if stream:
        body["stream"] = True
    return body


def encode_request(request: Request, **options: Any) -> bytes:
    """``request_body`` as compact UTF-8 JSON; the same request always gives the same bytes."""
    return encode_json(request_body(request, **options))


def _mark_prefix(system_blocks: list[dict[str, Any]], tools: list[dict[str, Any]]) -> None:
    """One breakpoint where the stable prefix ends (the API orders it tools, then system)."""
    last = system_blocks[-1] if system_blocks else tools[-1] if tools else None
    if last is not None:
        last["cache_control"] = dict(CACHE_CONTROL)


def _mark_history(turns: list[dict[str, Any]]) -> None:
    """Breakpoints at the end of the history and at the end of the previous request's history
    (the user turn before the newest assistant turn)."""
    marked = []
    if turns:
        marked.append(len(turns) - 1)
    assistants = [index for index, turn in enumerate(turns) if turn["role"] == "assistant"]
    if assistants and assistants[-1] > 0:
        marked.append(assistants[-1] - 1)
    for index in marked:
        turns[index]["content"][-1]["cache_control"] = dict(CACHE_CONTROL)


class _Turns:
    """Neutral messages as alternating user/assistant turns of content blocks."""

    def __init__(self, source: str | None) -> None:
        self._source = source
        self._ids = IdMapper(IdStyle.ANTHROPIC)

    def build(self, messages: list[Message]) -> list[dict[str, Any]]:
        turns: list[dict[str, Any]] = []
        for message in messages:
            role, blocks = self._blocks(message)
            if turns and turns[-1]["role"] == role:
                turns[-1]["content"].extend(blocks)
            else:
                turns.append({"role": role, "content": blocks})
        for turn in turns:  # tool results first in their turn, as the API requires
            if turn["role"] == "user":
                turn["content"].sort(key=lambda block: block["type"] != "tool_result")
        return turns

    def _blocks(self, message: Message) -> tuple[str, list[dict[str, Any]]]:
        if message.tool_calls and message.role != "assistant":
            raise ConfigurationError(f"a {message.role} message cannot carry tool_calls")
        if message.role == "tool":
            return "user", [self._result(message)]
        if message.role == "assistant":
            return "assistant", self._assistant(message)
        text = message.content or EMPTY_TEXT
        if message.role == "system":  # a system message after the start: said as the user's
            text = f"[system] {text}"
        return "user", [{"type": "text", "text": text}]

    def _result(self, message: Message) -> dict[str, Any]:
        if not message.tool_call_id:
            raise ConfigurationError("a tool message needs the tool_call_id it answers")
        text = message.content or "(no output)"
        block: dict[str, Any] = {
            "type": "tool_result",
            "tool_use_id": self._ids(message.tool_call_id),
            "content": model_text(message, "(no output)"),
        }
        if text.startswith("Error"):  # the loop's convention for failed and refused calls
            block["is_error"] = True
        return block

    def _assistant(self, message: Message) -> list[dict[str, Any]]:
        blocks: list[dict[str, Any]] = []
        if self._source is not None and message.provider_source == self._source:
            thinking = message.provider_fields.get(THINKING_FIELD)
            if isinstance(thinking, list):
                blocks += [dict(block) for block in thinking if isinstance(block, dict)]
        if (message.content or "").strip():
            blocks.append({"type": "text", "text": message.content})
        for call in message.tool_calls:
            blocks.append(
                {"type": "tool_use", "id": self._ids(call.id), "name": call.name, "input": tool_input(call)}
            )
        return blocks or [{"type": "text", "text": EMPTY_TEXT}]


def tool_input(call: ToolCall) -> dict[str, Any]:
    """A call's arguments as the object ``tool_use.input`` must be; arguments that are not a JSON
    object (a model's mistake, already answered with an error) are kept as text inside one."""
    try:
        value = json.loads(call.arguments or "{}")
    except (ValueError, RecursionError):
        value = None
    if isinstance(value, dict):
        return value
    return {"_unparsed_arguments": call.arguments}


# --- answers --------------------------------------------------------------------------------


def parse_response(body: bytes | str, *, model: str | None = None) -> Response:
    return response_from_json(decode_json(body, model=model), model=model)


def response_from_json(data: Any, *, model: str | None = None) -> Response:
    """A decoded ``message`` object as a ``Response``; an ``error`` object raises that error."""
    obj = require_object(data, "the answer", model)
    if obj.get("type") == "error" or ("error" in obj and "content" not in obj):
        raise error_from_payload(obj, status=None, model=model)
    content = obj.get("content")
    if not isinstance(content, list):
        raise malformed("the answer's 'content' is not a list of blocks", model)
    message = assemble_message([require_object(block, "a content block", model) for block in content], model)
    stop = optional_str(obj.get("stop_reason"), "stop_reason", model)
    return Response(
        id=optional_str(obj.get("id"), "id", model) or "",
        model=optional_str(obj.get("model"), "model", model) or model or "",
        choices=[Choice(message=message, finish_reason=STOP_REASONS.get(stop or "", stop))],
        usage=usage_from_json(obj.get("usage"), model=model),
    )


def assemble_message(blocks: list[dict[str, Any]], model: str | None) -> Message:
    """Content blocks as one assistant message (text joined, tool_use as calls, thinking kept)."""
    texts: list[str] = []
    calls: list[ToolCall] = []
    thinking: list[dict[str, Any]] = []
    for block in blocks:
        kind = block.get("type")
        if kind == "text":
            texts.append(optional_str(block.get("text"), "text", model) or "")
        elif kind == "tool_use":
            calls.append(_tool_use(block, model))
        elif kind in _THINKING_TYPES:
            # Only the fields the API defines go back: a stray key (a cache_control, say) would
            # make every later request of the run invalid.
            thinking.append({key: block[key] for key in _THINKING_KEYS[kind] if key in block})
        # Other blocks (server tools, citations) are not ours to send back.
    fields: dict[str, Any] = {THINKING_FIELD: thinking} if thinking else {}
    return Message(role="assistant", content="".join(texts) or None, tool_calls=calls, provider_fields=fields)


def _tool_use(block: dict[str, Any], model: str | None) -> ToolCall:
    call_id, name, arguments = block.get("id"), block.get("name"), block.get("input", {})
    if not isinstance(call_id, str) or not call_id:
        raise malformed("a tool_use block has no id", model)
    if not isinstance(name, str) or not name:
        raise malformed(f"tool_use {call_id} has no name", model)
    if not isinstance(arguments, dict):
        raise malformed(f"tool_use {call_id}'s input is not an object", model)
    return ToolCall(
        id=call_id, name=name, arguments=json.dumps(arguments, ensure_ascii=False, separators=(",", ":"))
    )


def usage_from_json(raw: Any, *, model: str | None = None) -> Usage:
    """Anthropic's counts: ``input_tokens`` leaves out cache reads and writes; ``prompt_tokens``
    here is all three, so paid tokens are uncached input + cache writes + output."""
    if raw is None:
        return Usage()
    usage = require_object(raw, "usage", model)
    counts = {name: count(usage.get(name), name, model) for name in USAGE_FIELDS}
    return usage_of(counts)


USAGE_FIELDS = ("input_tokens", "output_tokens", "cache_read_input_tokens", "cache_creation_input_tokens")


def usage_of(counts: dict[str, int]) -> Usage:
    read, written = counts["cache_read_input_tokens"], counts["cache_creation_input_tokens"]
    return Usage(
        prompt_tokens=counts["input_tokens"] + read + written,
        completion_tokens=counts["output_tokens"],
        cache_read_tokens=read,
        cache_write_tokens=written,
    )


def count(value: Any, field: str, model: str | None) -> int:
    if value is None:
        return 0
    if isinstance(value, int) and not isinstance(value, bool) and value >= 0:
        return value
    raise malformed(f"usage '{field}' is not a non-negative integer: {value!r}", model)
