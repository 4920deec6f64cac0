"""The Chat Completions wire format: ``Request`` to JSON bytes, JSON answers to ``Response``.

Pure functions, no I/O; ``agent.llm`` does the HTTP and ``agent.sse`` the streaming.

Requests are serialised deterministically: the same ``Request`` always gives the same bytes,
and a message or tool always serialises the same way whatever surrounds it, so the system
prompt and tool list stay byte-identical across a run (providers' prompt caches need that).
``Message.meta`` is ours and never leaves the process.

Answers are read defensively: anything that is not the Chat Completions shape raises
``MalformedResponseError``; an error object in the provider's shape becomes the matching
``LLMError`` (see ``error_for_status`` and ``error_from_payload``).
"""

from __future__ import annotations

import json
from collections.abc import Mapping
from dataclasses import dataclass
from typing import Any

from agent.errors import (
    ConfigurationError,
    ContextOverflowError,
    LLMError,
    MalformedResponseError,
    ProviderError,
    RateLimitedError,
    ServerError,
)
from agent.types import Choice, Message, Request, Response, ToolCall, ToolDef, Usage

TRANSIENT_STATUSES = frozenset({500, 502, 503, 504})
"""HTTP statuses worth sending the same request again for (429 is handled on its own)."""

# Lower-cased fragments of the context-overflow messages of OpenAI, vLLM, Ollama, LiteLLM,
# llama.cpp and Anthropic-compatible gateways; they rarely send a machine-readable code.
_OVERFLOW_PHRASES = (
    "context_length_exceeded",
    "maximum context length",
    "context length",
    "context window",
    "prompt is too long",
    "too many tokens",
    "input is too long",
    "exceeds the context",
    "reduce the length of the messages",
)
_OVERFLOW_CODES = frozenset({"context_length_exceeded", "context_window_exceeded", "string_above_max_length"})
# A 429 that retrying cannot fix: the account is out of credit.
_NOT_RETRYABLE_429_CODES = frozenset({"insufficient_quota", "billing_hard_limit_reached"})
_SNIPPET_CHARS = 300


# --- requests -------------------------------------------------------------------------------


def tool_call_to_wire(call: ToolCall) -> dict[str, Any]:
    """One assistant tool call in the API's shape."""
    return {"id": call.id, "type": "function", "function": {"name": call.name, "arguments": call.arguments}}


def message_to_wire(message: Message) -> dict[str, Any]:
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
        return {"role": "tool", "tool_call_id": message.tool_call_id, "content": message.content or ""}
    wire: dict[str, Any] = {"role": message.role}
    if message.tool_calls:
        wire["content"] = message.content or None
    else:
        wire["content"] = message.content or ""
    if message.name:
        wire["name"] = message.name
    if message.tool_calls:
        wire["tool_calls"] = [tool_call_to_wire(call) for call in message.tool_calls]
    return wire


def tool_to_wire(tool: ToolDef) -> dict[str, Any]:
    """One tool definition in the API's shape. ``parameters`` keeps its author's key order."""
    return {
        "type": "function",
        "function": {"name": tool.name, "description": tool.description, "parameters": tool.parameters},
    }


def request_body(request: Request, *, stream: bool = False) -> dict[str, Any]:
    """The JSON body for ``POST /chat/completions``; optional fields only when set.

    ``stream=True`` also asks for the final usage chunk (``stream_options.include_usage``).
    """
    body: dict[str, Any] = {
        "model": request.model,
        "messages": [message_to_wire(message) for message in request.messages],
    }
    if request.tools:
        body["tools"] = [tool_to_wire(tool) for tool in request.tools]
    if request.temperature is not None:
        body["temperature"] = request.temperature
    if request.max_tokens is not None:
        body["max_tokens"] = request.max_tokens
    if stream:
        body["stream"] = True
        body["stream_options"] = {"include_usage": True}
    return body


def encode_request(request: Request, *, stream: bool = False) -> bytes:
    """``request_body`` as compact UTF-8 JSON; the same request always gives the same bytes."""
    try:
        text = json.dumps(
            request_body(request, stream=stream), ensure_ascii=False, separators=(",", ":"), allow_nan=False
        )
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
            f"the answer is not JSON ({exc}): {_snippet(body)!r}", model=model, status_code=200
        ) from exc


def parse_response(body: bytes | str, *, model: str | None = None) -> Response:
    """A non-streamed Chat Completions answer. ``model`` is the model asked, for errors."""
    return response_from_json(decode_json(body, model=model), model=model)


def response_from_json(data: Any, *, model: str | None = None) -> Response:
    """A decoded ``chat.completion`` object as a ``Response``.

    ``choices: []`` (or null) is returned as a response with no choices: whether that is an
    error is the client's call. A body holding only an error object raises that error.
    """
    obj = _require_object(data, "the answer", model)
    if "choices" not in obj:
        if "error" in obj:
            raise error_from_payload(obj, status=None, model=model)
        raise _malformed("the answer has no 'choices'", model)
    raw_choices = obj["choices"] if obj["choices"] is not None else []
    if not isinstance(raw_choices, list):
        raise _malformed("'choices' is not a list", model)
    choices = [_choice_from_json(raw, position, model) for position, raw in enumerate(raw_choices)]
    return Response(
        id=_optional_str(obj.get("id"), "id", model) or "",
        model=_optional_str(obj.get("model"), "model", model) or model or "",
        choices=choices,
        usage=usage_from_json(obj.get("usage"), model=model),
    )


def _choice_from_json(raw: Any, position: int, model: str | None) -> Choice:
    choice = _require_object(raw, f"choice {position}", model)
    message = _require_object(choice.get("message"), f"choice {position}'s message", model)
    raw_calls = message.get("tool_calls")
    if raw_calls is not None and not isinstance(raw_calls, list):
        raise _malformed(f"choice {position}'s tool_calls is not a list", model)
    index = choice.get("index", position)
    return Choice(
        index=index if isinstance(index, int) else position,
        message=Message(
            role="assistant",
            content=_optional_str(message.get("content"), "content", model),
            tool_calls=[tool_call_from_json(call, model=model) for call in raw_calls or []],
        ),
        finish_reason=_optional_str(choice.get("finish_reason"), "finish_reason", model),
    )


def tool_call_from_json(raw: Any, *, model: str | None = None) -> ToolCall:
    """One complete tool call. Arguments sent as an object (some local servers do) are re-encoded."""
    call = _require_object(raw, "a tool call", model)
    function = _require_object(call.get("function"), "a tool call's function", model)
    call_id, name = call.get("id"), function.get("name")
    if not isinstance(call_id, str) or not call_id:
        raise _malformed(f"a tool call has no id: {_snippet(json.dumps(call))!r}", model)
    if not isinstance(name, str) or not name:
        raise _malformed(f"tool call {call_id} has no function name", model)
    return ToolCall(id=call_id, name=name, arguments=arguments_from_json(function.get("arguments"), model))


def arguments_from_json(raw: Any, model: str | None = None) -> str:
    """A tool call's ``arguments`` as the JSON string the API defines ("{}" when absent)."""
    if raw is None or raw == "":
        return "{}"
    if isinstance(raw, str):
        return raw
    if isinstance(raw, dict):
        return json.dumps(raw, ensure_ascii=False, separators=(",", ":"))
    raise _malformed(f"tool call arguments are a {type(raw).__name__}, not a JSON string", model)


def usage_from_json(raw: Any, *, model: str | None = None) -> Usage:
    """Token counts; cache reads from ``prompt_tokens_details.cached_tokens`` (DeepSeek's
    ``prompt_cache_hit_tokens`` as a fallback). Missing counts are 0."""
    if raw is None:
        return Usage()
    usage = _require_object(raw, "usage", model)
    details = usage.get("prompt_tokens_details")
    cached: Any = None
    if isinstance(details, dict):
        cached = details.get("cached_tokens")
    if cached is None:
        cached = usage.get("prompt_cache_hit_tokens")
    return Usage(
        prompt_tokens=_count(usage.get("prompt_tokens"), "prompt_tokens", model),
        completion_tokens=_count(usage.get("completion_tokens"), "completion_tokens", model),
        cache_read_tokens=_count(cached, "cached_tokens", model),
    )


# --- errors ---------------------------------------------------------------------------------


@dataclass(frozen=True)
class ErrorDetails:
    """What a provider said about a failure: its own message and, when given, code and type."""

    message: str
    code: str | int | None = None
    type: str | None = None


def error_details(body: bytes | str | Any, *, fallback: str) -> ErrorDetails:
    """Read an error body in any of the usual shapes.

    ``{"error": {"message", "code", "type"}}`` (OpenAI), ``{"error": "text"}`` (Ollama, some
    vLLM versions), ``{"message": ...}`` or ``{"detail": ...}`` (FastAPI-based gateways), or
    plain text. ``fallback`` is used when the body says nothing.
    """
    payload = body
    if isinstance(body, bytes | str):
        try:
            payload = json.loads(body)
        except (ValueError, UnicodeDecodeError):
            text = _snippet(body).strip()
            return ErrorDetails(message=text or fallback)
    if not isinstance(payload, dict):
        return ErrorDetails(message=fallback)
    error = payload.get("error", payload)
    if isinstance(error, str):
        return ErrorDetails(message=error or fallback)
    if not isinstance(error, dict):
        return ErrorDetails(message=fallback)
    message = error.get("message") or error.get("detail")
    code, kind = error.get("code"), error.get("type")
    return ErrorDetails(
        message=message if isinstance(message, str) and message else fallback,
        code=code if isinstance(code, str | int) and not isinstance(code, bool) else None,
        type=kind if isinstance(kind, str) else None,
    )


def is_context_overflow(details: ErrorDetails) -> bool:
    """True when the provider says the prompt does not fit the model's context window."""
    if isinstance(details.code, str) and details.code in _OVERFLOW_CODES:
        return True
    text = details.message.lower()
    return any(phrase in text for phrase in _OVERFLOW_PHRASES)


def error_for_status(
    status: int, body: bytes | str, *, model: str | None, retry_after: float | None = None
) -> LLMError:
    """The error for a non-2xx answer, carrying the provider's own message and the status.

    429 is ``RateLimitedError`` (unless the account is out of quota), 413 and overflow texts
    are ``ContextOverflowError``, 500/502/503/504 are ``ServerError``, the rest ``ProviderError``.
    """
    details = error_details(body, fallback=f"HTTP {status} with an empty body")
    if status == 429 and details.code not in _NOT_RETRYABLE_429_CODES:
        return RateLimitedError(details.message, model=model, retry_after=retry_after)
    if status == 413 or is_context_overflow(details):
        return ContextOverflowError(details.message, model=model, status_code=status)
    if status in TRANSIENT_STATUSES:
        return ServerError(details.message, model=model, status_code=status)
    return ProviderError(details.message, model=model, status_code=status)


def error_from_payload(payload: Mapping[str, Any], *, status: int | None, model: str | None) -> LLMError:
    """The error for an error object sent with a 200 (in a body or inside a stream).

    The HTTP status said success, so the error's own numeric ``code`` decides when it has one;
    an unclassified failure after a 200 is taken as the server's (``ServerError``, retryable).
    """
    details = error_details(dict(payload), fallback="the provider sent an error without a message")
    code = details.code if isinstance(details.code, int) else status
    if is_context_overflow(details):
        return ContextOverflowError(details.message, model=model, status_code=code)
    if code is not None and code != 200:
        return error_for_status(code, json.dumps(dict(payload)), model=model)
    if details.type in {"invalid_request_error", "authentication_error", "permission_error"}:
        return ProviderError(details.message, model=model, status_code=code)
    return ServerError(details.message, model=model, status_code=code)


# --- helpers --------------------------------------------------------------------------------


def _require_object(value: Any, what: str, model: str | None) -> dict[str, Any]:
    if not isinstance(value, dict):
        raise _malformed(f"{what} is not a JSON object", model)
    return value


def _optional_str(value: Any, field: str, model: str | None) -> str | None:
    if value is None or isinstance(value, str):
        return value
    raise _malformed(f"'{field}' is a {type(value).__name__}, not a string", model)


def _count(value: Any, field: str, model: str | None) -> int:
    if value is None:
        return 0
    if isinstance(value, int) and not isinstance(value, bool) and value >= 0:
        return value
    raise _malformed(f"usage '{field}' is not a non-negative integer: {value!r}", model)


def _malformed(message: str, model: str | None) -> MalformedResponseError:
    return MalformedResponseError(message, model=model, status_code=200)


def _snippet(body: bytes | str) -> str:
    text = body.decode("utf-8", errors="replace") if isinstance(body, bytes) else body
    return text[:_SNIPPET_CHARS]
