"""What a script for the OpenAI-compatible emulator (``emulator.models.openai_server``) says: each
``Reply`` is one answer to one ``POST /v1/chat/completions``, a ``Fault`` an error answer in
OpenAI's shape, ``ScriptedUsage`` the token counts to report."""

from __future__ import annotations

from collections.abc import Callable, Mapping, Sequence
from dataclasses import dataclass, field
from typing import Any

from emulator.models.scripted_server import ScriptedToolCall


@dataclass(frozen=True)
class ScriptedUsage:
    """Token counts to report; ``cached_tokens`` goes to ``prompt_tokens_details.cached_tokens``."""

    prompt_tokens: int
    completion_tokens: int
    cached_tokens: int = 0


@dataclass(frozen=True)
class Fault:
    """An HTTP error answer with OpenAI's error body ``{"error": {message, type, param, code}}``."""

    status: int
    message: str
    type: str = "server_error"
    code: str | None = None
    param: str | None = None
    headers: Mapping[str, str] = field(default_factory=dict)


@dataclass(frozen=True)
class Reply:
    """One scripted answer to one ``POST /v1/chat/completions``.

    Content: ``text`` and/or ``tool_calls``; ``usage`` (default: about a token per 4 bytes);
    ``finish_reason`` (default ``tool_calls`` when there are calls, else ``stop``).

    Misbehaviour, applied in this order:
      ``delay``: seconds before anything is sent (to provoke a read timeout);
      ``fault``: answer with this HTTP error instead;
      ``malformed``: a 200 whose body (or, streamed, one event) is not valid JSON;
      ``empty_choices``: ``choices: []`` (streamed: no choice chunk at all);
      ``byte_delay``: a whole answer sent one byte at a time, this many seconds apart (a
      server that keeps every read alive but never finishes).
    Streaming only:
      ``text_chunk_size`` / ``argument_chunk_size``: split text / tool arguments into deltas of
      that many characters (default: text by word, arguments whole);
      ``chunk_delay``: seconds between events;
      ``truncate_after``: send that many events, then drop the connection (no ``[DONE]``);
      ``close_delimited``: end the body by closing the connection instead of chunked encoding
      (a truncated stream then looks like a clean end of file).
    """

    text: str | None = None
    tool_calls: Sequence[ScriptedToolCall] = ()
    usage: ScriptedUsage | None = None
    finish_reason: str | None = None
    delay: float = 0.0
    fault: Fault | None = None
    malformed: bool = False
    empty_choices: bool = False
    byte_delay: float = 0.0
    text_chunk_size: int | None = None
    argument_chunk_size: int | None = None
    chunk_delay: float = 0.0
    truncate_after: int | None = None
    close_delimited: bool = False

    @classmethod
    def error(
        cls,
        status: int,
        message: str,
        *,
        type: str = "invalid_request_error",
        code: str | None = None,
        param: str | None = None,
        headers: Mapping[str, str] | None = None,
    ) -> Reply:
        """An HTTP error in OpenAI's shape."""
        return cls(fault=Fault(status, message, type=type, code=code, param=param, headers=headers or {}))

    @classmethod
    def rate_limited(cls, retry_after: float | str | None = 1) -> Reply:
        """A 429 as OpenAI sends it, with ``Retry-After`` (seconds or an HTTP-date) unless None."""
        headers = {} if retry_after is None else {"Retry-After": str(retry_after)}
        message = "Rate limit reached for requests. Please try again later."
        return cls.error(429, message, type="requests", code="rate_limit_exceeded", headers=headers)

    @classmethod
    def server_error(cls, status: int = 500) -> Reply:
        """A 5xx as OpenAI sends it."""
        message = "The server had an error while processing your request. Sorry about that!"
        return cls.error(status, message, type="server_error")

    @classmethod
    def context_overflow(cls, limit: int = 8192, requested: int = 9000) -> Reply:
        """OpenAI's 400 for a prompt that does not fit the context window."""
        message = (
            f"This model's maximum context length is {limit} tokens. However, your messages resulted in "
            f"{requested} tokens. Please reduce the length of the messages."
        )
        return cls.error(400, message, code="context_length_exceeded", param="messages")


ReplyFn = Callable[[dict[str, Any]], Reply]
"""A reply computed from the parsed request body (e.g. matching on the last message)."""
ScriptItem = Reply | ReplyFn
