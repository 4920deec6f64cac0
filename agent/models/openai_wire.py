"""The Chat Completions wire format: ``Request`` to JSON bytes, JSON answers to ``Response``.

Pure functions, no I/O; ``agent.models.openai_client`` does the HTTP and ``agent.models.sse`` the streaming.

Requests are serialised deterministically: the same ``Request`` always gives the same bytes,
and a message or tool always serialises the same way whatever surrounds it, so the system
prompt and tool list stay byte-identical across a run (providers' prompt caches need that).
``Message.meta`` is ours and never leaves the process; a message's ``provider_fields`` go back
only to the endpoint (``source``) that produced them. Tool-call ids are mapped to the form the
endpoint's dialect accepts (``agent.tool_ids``).

Answers are read defensively, with the departures of real providers accepted (``content`` as a
list of parts, the legacy ``function_call``, calls without ids); anything else that is not the
Chat Completions shape raises ``MalformedResponseError``; an error object in any provider's shape
becomes the matching ``LLMError`` (``agent.models.provider_errors``).
"""

from __future__ import annotations

import json
from typing import Any

from agent.errors import ConfigurationError, MalformedResponseError
from agent.evidence import model_text
from agent.models.openai_dialect import (
    GEMINI_SKIP_SIGNATURE,
    OPENAI,
    Dialect,
    call_fields,
    content_text,
    is_text_content,
    message_fields,
)
from agent.models.provider_errors import error_for_status, error_from_payload, snippet
from agent.tool_ids import IdMapper, new_call_id
from agent.types import Choice, Message, Request, Response, ToolCall, ToolDef, Usage

__all__ = [
    "encode_request",
    "error_for_status",
    "error_from_payload",
    "parse_response",
    "request_body",
    "usage_from_json",
]


# --- requests -------------------------------------------------------------------------------


class _Encoder:
    """Encodes the messages of one request for one endpoint (``source``) and ``dialect``."""

    def __init__(self, source: str | None, dialect: Dialect) -> None:
        self._source = source
        self._dialect = dialect
        self._ids = IdMapper(dialect.id_style)

    def message(self, message: Message) -> dict[str, Any]:
        """One message in the API's shape: no ``meta``, no empty ``tool_calls``, no null ``name``.

        An assistant message with tool calls and no text sends ``content: null`` (what the API
        itself returns, and what Anthropic-compatible gateways accept where they reject ``""``).
        ``name`` is not sent on tool messages: the current API does not define it there.
        """
        if message.tool_calls and message.role != "assistant":
            raise ConfigurationError(f"a {message.role} message cannot carry tool_calls")
        if message.role == "tool":
            if not message.tool_call_id:
                raise ConfigurationError("a tool message needs the tool_call_id it answers")
            return {
                "role": "tool",
                "tool_call_id": self._ids(message.tool_call_id),
                "content": model_text(message),
            }
        wire: dict[str, Any] = {"role": message.role}
        if message.tool_calls:
            wire["content"] = message.content or None
        else:
            wire["content"] = message.content or ""
        if message.name:
            wire["name"] = message.name
        own = self._source is not None and message.provider_source == self._source
        if message.tool_calls:
            wire["tool_calls"] = [self._call(call, own) for call in message.tool_calls]
        if own and message.role == "assistant":
            wire.update({key: value for key, value in message.provider_fields.items() if key not in wire})
        return wire

    def _call(self, call: ToolCall, own: bool) -> dict[str, Any]:
        wire: dict[str, Any] = {
            "id": self._ids(call.id),
            "type": "function",
            "function": {"name": call.name, "arguments": call.arguments},
        }
        if own:
            wire.update({key: value for key, value in call.provider_fields.items() if key not in wire})
        elif self._dialect.gemini_signatures:
            # A call Gemini did not make (history from another model) has no signature of its own.
            wire["extra_content"] = {"google": {"thought_signature": GEMINI_SKIP_SIGNATURE}}
        return wire


def message_to_wire(
    message: Message, *, source: str | None = None, dialect: Dialect = OPENAI
) -> dict[str, Any]:
    """One message on its own (ids mapped as if it were the whole request)."""
    return _Encoder(source, dialect).message(message)


def tool_to_wire(tool: ToolDef) -> dict[str, Any]:
    """One tool definition in the API's shape. ``parameters`` keeps its author's key order."""
    return {
        "type": "function",
        "function": {"name": tool.name, "description": tool.description, "parameters": tool.parameters},
    }


def request_body(
    request: Request, *, stream: bool = False, source: str | None = None, dialect: Dialect = OPENAI
) -> dict[str, Any]:
    """The JSON body for ``POST /chat/completions``; optional fields only when set.

    ``stream=True`` also asks for the final usage chunk (``stream_options.include_usage``).
    """
    encoder = _Encoder(source, dialect)
    body: dict[str, Any] = {
        "model": request.model,
        "messages": [encoder.message(message) for message in request.messages],
    }
    if request.tools:
        body["tools"] = [tool_to_wire(tool) for tool in request.tools]
    if request.temperature is not None:
        body["temperature"] = request.temperature
    if request.max_tokens is not None:
        # OpenAI's current field: ``max_tokens`` is deprecated and refused by its reasoning models
        # (o-series, gpt-5), the ones whose thinking can use a whole answer's budget; vLLM and
        # Azure take it too.
        body["max_completion_tokens"] = request.max_tokens
    if stream:
        body["stream"] = True
        body["stream_options"] = {"include_usage": True}
    return body


def encode_request(
    request: Request, *, stream: bool = False, source: str | None = None, dialect: Dialect = OPENAI
) -> bytes:
    """``request_body`` as compact UTF-8 JSON; the same request always gives the same bytes."""
    return encode_json(request_body(request, stream=stream, source=source, dialect=dialect))


def encode_json(body: dict[str, Any]) -> bytes:
    """Compact, deterministic UTF-8 JSON; a body that is not JSON is a ``ConfigurationError``."""
    try:
        text = json.dumps(body, ensure_ascii=False, separators=(",", ":"), allow_nan=False)
    except (TypeError, ValueError) as exc:
        raise ConfigurationError(f"the request cannot be encoded as JSON: {exc}") from exc
    return text.encode("utf-8")


# --- answers --------------------------------------------------------------------------------


def decode_json(body: bytes | str, *, model: str | None = None) -> Any:
    """Parse a JSON body; ``MalformedResponseError`` (quoting the start of it) when it is not JSON."""
    try:
        return json.loads(body)
    except (ValueError, UnicodeDecodeError) as exc:
        raise MalformedResponseError(
            f"the answer is not JSON ({exc}): {snippet(body)!r}", model=model, status_code=200
        ) from exc


def parse_response(body: bytes | str, *, model: str | None = None) -> Response:
    """A non-streamed Chat Completions answer. ``model`` is the model asked, for errors."""
    return response_from_json(decode_json(body, model=model), model=model)


def response_from_json(data: Any, *, model: str | None = None) -> Response:
    """A decoded ``chat.completion`` object as a ``Response``.

    ``choices: []`` (or null) is returned as a response with no choices: whether that is an
    error is the client's call. A body holding only an error object raises that error.
    """
    obj = require_object(data, "the answer", model)
    if "choices" not in obj:
        if "error" in obj:
            raise error_from_payload(obj, status=None, model=model)
        raise malformed("the answer has no 'choices'", model)
    raw_choices = obj["choices"] if obj["choices"] is not None else []
    if not isinstance(raw_choices, list):
        raise malformed("'choices' is not a list", model)
    choices = [_choice_from_json(raw, position, model) for position, raw in enumerate(raw_choices)]
    raw_usage = obj.get("usage")
    if raw_usage is None and isinstance(obj.get("x_groq"), dict):
        raw_usage = obj["x_groq"].get("usage")
    return Response(
        id=optional_str(obj.get("id"), "id", model) or "",
        model=optional_str(obj.get("model"), "model", model) or model or "",
        choices=choices,
        usage=usage_from_json(raw_usage, model=model),
    )


def _choice_from_json(raw: Any, position: int, model: str | None) -> Choice:
    choice = require_object(raw, f"choice {position}", model)
    message = require_object(choice.get("message"), f"choice {position}'s message", model)
    raw_calls = message.get("tool_calls")
    if raw_calls is not None and not isinstance(raw_calls, list):
        raise malformed(f"choice {position}'s tool_calls is not a list", model)
    calls = [tool_call_from_json(call, model=model) for call in raw_calls or []]
    if not calls and isinstance(message.get("function_call"), dict):  # the legacy single call
        calls = [tool_call_from_json({"function": message["function_call"]}, model=model)]
    index = choice.get("index", position)
    return Choice(
        index=index if isinstance(index, int) else position,
        message=Message(
            role="assistant",
            content=message_content(message.get("content"), model),
            tool_calls=unique_ids(calls),
            provider_fields=message_fields(message),
        ),
        finish_reason=optional_str(choice.get("finish_reason"), "finish_reason", model),
    )


def message_content(raw: Any, model: str | None) -> str | None:
    """``content`` as text: a string, or the text parts of a list."""
    if not is_text_content(raw):
        raise malformed(f"'content' is a {type(raw).__name__}, not a string", model)
    return content_text(raw)


def tool_call_from_json(raw: Any, *, model: str | None = None) -> ToolCall:
    """One complete tool call; one without an id gets a fresh one (Gemini sends none). Arguments
    sent as an object (some local servers do) are re-encoded."""
    call = require_object(raw, "a tool call", model)
    function = require_object(call.get("function"), "a tool call's function", model)
    call_id, name = call.get("id"), function.get("name")
    if call_id is not None and not isinstance(call_id, str):
        raise malformed(
            f"a tool call's id is a {type(call_id).__name__}: {snippet(json.dumps(call))!r}", model
        )
    if not isinstance(name, str) or not name:
        raise malformed(f"tool call {call_id or '(no id)'} has no function name", model)
    return ToolCall(
        id=call_id or new_call_id(),
        name=name,
        arguments=arguments_from_json(function.get("arguments"), model),
        provider_fields=call_fields(call),
    )


def unique_ids(calls: list[ToolCall]) -> list[ToolCall]:
    """The calls with an id that repeats within the answer replaced by a fresh one."""
    seen: set[str] = set()
    unique = []
    for call in calls:
        if call.id in seen:
            call = call.model_copy(update={"id": new_call_id()})
        seen.add(call.id)
        unique.append(call)
    return unique


def arguments_from_json(raw: Any, model: str | None = None) -> str:
    """A tool call's ``arguments`` as the JSON string the API defines ("{}" when absent)."""
    if raw is None or raw == "":
        return "{}"
    if isinstance(raw, str):
        return raw
    if isinstance(raw, dict):
        return json.dumps(raw, ensure_ascii=False, separators=(",", ":"))
    raise malformed(f"tool call arguments are a {type(raw).__name__}, not a JSON string", model)


def usage_from_json(raw: Any, *, model: str | None = None) -> Usage:
    """Token counts wherever the provider puts them: OpenAI's names (cache reads in
    ``prompt_tokens_details.cached_tokens``), DeepSeek's ``prompt_cache_hit_tokens``, and the
    Anthropic-style names gateways pass through (``input_tokens``, ``cache_read_input_tokens``,
    ``cache_creation_input_tokens``). Missing counts are 0."""
    if raw is None:
        return Usage()
    usage = require_object(raw, "usage", model)
    details = usage.get("prompt_tokens_details")
    details = details if isinstance(details, dict) else {}
    cached = _first(
        details.get("cached_tokens"),
        usage.get("prompt_cache_hit_tokens"),
        usage.get("cache_read_input_tokens"),
    )
    written = _first(details.get("cache_write_tokens"), usage.get("cache_creation_input_tokens"))
    prompt = usage.get("prompt_tokens")
    if prompt is None and usage.get("input_tokens") is not None:
        # Anthropic's input_tokens leave out the cached part; prompt_tokens include it.
        prompt = _count(usage["input_tokens"], "input_tokens", model) + _count(cached, "cache reads", model)
        prompt += _count(written, "cache writes", model)
    return Usage(
        prompt_tokens=_count(prompt, "prompt_tokens", model),
        completion_tokens=_count(
            _first(usage.get("completion_tokens"), usage.get("output_tokens")), "completion_tokens", model
        ),
        cache_read_tokens=_count(cached, "cached_tokens", model),
        cache_write_tokens=_count(written, "cache_write_tokens", model),
    )


def _first(*values: Any) -> Any:
    return next((value for value in values if value is not None), None)


# --- helpers --------------------------------------------------------------------------------


def require_object(value: Any, what: str, model: str | None) -> dict[str, Any]:
    if not isinstance(value, dict):
        raise malformed(f"{what} is not a JSON object", model)
    return value


def optional_str(value: Any, field: str, model: str | None) -> str | None:
    if value is None or isinstance(value, str):
        return value
    raise malformed(f"'{field}' is a {type(value).__name__}, not a string", model)


def _count(value: Any, field: str, model: str | None) -> int:
    if value is None:
        return 0
    if isinstance(value, int) and not isinstance(value, bool) and value >= 0:
        return value
    raise malformed(f"usage '{field}' is not a non-negative integer: {value!r}", model)


def malformed(message: str, model: str | None) -> MalformedResponseError:
    return MalformedResponseError(message, model=model, status_code=200)
