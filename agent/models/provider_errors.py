"""Reading a provider's error answer: its message, code and type, and which ``LLMError`` it is.

Shared by every client. Error bodies come in many shapes: ``{"error": {"message", "code",
"type"}}`` (OpenAI, Anthropic's ``{"type": "error", "error": {...}}``), ``{"error": "text"}``
(Ollama, some vLLM), ``{"message"}`` or ``{"detail"}`` (FastAPI gateways), a JSON *array* of
those (Gemini's OpenAI endpoint), or plain text.
"""

from __future__ import annotations

import json
from collections.abc import Mapping
from dataclasses import dataclass
from typing import Any

from agent.errors import ContextOverflowError, LLMError, ProviderError, RateLimitedError, ServerError
from agent.models.retry import RETRYABLE_STATUSES

# Lower-cased fragments of the context-overflow messages of OpenAI, vLLM, Ollama, LiteLLM,
# llama.cpp, Mistral, Groq, Gemini and Anthropic; they rarely send a machine-readable code.
_OVERFLOW_PHRASES = (
    "context_length_exceeded",
    "maximum context length",
    "context length",
    "context window",
    "prompt is too long",  # Anthropic: "prompt is too long: 210000 tokens > 200000 maximum"
    "exceed context limit",  # Anthropic: "input length and `max_tokens` exceed context limit"
    "too many tokens",
    "input is too long",
    "exceeds the context",
    "reduce the length of the messages",
    "exceeds the maximum number of tokens allowed",  # Gemini: "The input token count (N) exceeds ..."
)
_OVERFLOW_CODES = frozenset({"context_length_exceeded", "context_window_exceeded", "string_above_max_length"})
# A 429 that retrying cannot fix: the account is out of credit.
_NOT_RETRYABLE_429_CODES = frozenset({"insufficient_quota", "billing_hard_limit_reached"})
# Error types that say the request itself is wrong (OpenAI's and Anthropic's names).
_CLIENT_ERROR_TYPES = frozenset(
    {"invalid_request_error", "authentication_error", "permission_error", "not_found_error", "billing_error"}
)
# Error types that say the provider is busy or broken (Anthropic's streamed ``error`` events).
_TRANSIENT_ERROR_TYPES = {
    "overloaded_error": 529,
    "api_error": 500,
    "rate_limit_error": 429,
    "timeout_error": 504,
}
SNIPPET_CHARS = 300


@dataclass(frozen=True)
class ErrorDetails:
    """What a provider said about a failure: its own message and, when given, code and type."""

    message: str
    code: str | int | None = None
    type: str | None = None


def error_details(body: bytes | str | Any, *, fallback: str) -> ErrorDetails:
    """Read an error body in any of the usual shapes; ``fallback`` when it says nothing."""
    payload = body
    if isinstance(body, bytes | str):
        try:
            payload = json.loads(body)
        except (ValueError, UnicodeDecodeError):
            text = snippet(body).strip()
            return ErrorDetails(message=text or fallback)
    if isinstance(payload, list):  # Gemini: [{"error": {"code": 400, "message": ..., "status": ...}}]
        payload = next((item for item in payload if isinstance(item, dict)), None)
    if not isinstance(payload, dict):
        return ErrorDetails(message=fallback)
    error = payload.get("error", payload)
    if isinstance(error, str):
        return ErrorDetails(message=error or fallback)
    if not isinstance(error, dict):
        return ErrorDetails(message=fallback)
    message = error.get("message") or error.get("detail")
    code = error.get("code")
    kind = error.get("type") if isinstance(error.get("type"), str) else error.get("status")
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

    429 is ``RateLimitedError`` (unless the account is out of quota), 413 and overflow texts are
    ``ContextOverflowError``, the other retryable statuses ``ServerError``, the rest ``ProviderError``.
    """
    details = error_details(body, fallback=f"HTTP {status} with an empty body")
    if status == 429 and details.code not in _NOT_RETRYABLE_429_CODES:
        return RateLimitedError(details.message, model=model, retry_after=retry_after)
    if status == 413 or is_context_overflow(details):
        return ContextOverflowError(details.message, model=model, status_code=status)
    if status in RETRYABLE_STATUSES and status != 429:
        return ServerError(details.message, model=model, status_code=status, retry_after=retry_after)
    return ProviderError(details.message, model=model, status_code=status)


def error_from_payload(payload: Mapping[str, Any], *, status: int | None, model: str | None) -> LLMError:
    """The error for an error object sent with a 200 (in a body or inside a stream).

    The HTTP status said success, so the error's own numeric ``code`` (or Anthropic's ``type``)
    decides when it has one; an unclassified failure after a 200 is taken as the server's
    (``ServerError``, retryable).
    """
    details = error_details(dict(payload), fallback="the provider sent an error without a message")
    code = details.code if isinstance(details.code, int) else status
    if is_context_overflow(details):
        return ContextOverflowError(details.message, model=model, status_code=code)
    if (code is None or code == 200) and details.type in _TRANSIENT_ERROR_TYPES:
        code = _TRANSIENT_ERROR_TYPES[details.type]
    if code is not None and code != 200:
        return error_for_status(code, json.dumps(dict(payload)), model=model)
    if details.type in _CLIENT_ERROR_TYPES:
        return ProviderError(details.message, model=model, status_code=code)
    return ServerError(details.message, model=model, status_code=code)


def snippet(body: bytes | str) -> str:
    text = body.decode("utf-8", errors="replace") if isinstance(body, bytes) else body
    return text[:SNIPPET_CHARS]
