"""A scripted Anthropic Messages API server for tests and demos: ``POST /v1/messages``, JSON or SSE.

Like ``emulator.models.openai_server`` it generates nothing: each answer is the next ``AnthropicReply``
of a script (or a function of the request body), and every request is recorded. Unlike a fake
that accepts anything, it refuses what the real API refuses (``emulator.models.anthropic_rules``: the
headers, the body's documented rules) with the API's error shape, and it simulates the prompt
cache, so the usage it reports shows whether a client's ``cache_control`` breakpoints work::

    with AnthropicServer(api_key="sk-ant-test") as server:
        server.enqueue(AnthropicReply(tool_calls=[ScriptedToolCall("disk_usage", {"path": "/"})]))
        client = AnthropicClient(server.url, "sk-ant-test", "claude-test")

Production code never imports this.
"""

from __future__ import annotations

import json
import math
from collections.abc import Callable, Iterable, Mapping, Sequence
from dataclasses import dataclass, field
from typing import Any

from emulator.models.anthropic_rules import CacheUsage, PromptCache, RequestRejected, check_request
from emulator.models.scripted_server import RecordedRequest, ScriptedHandler, ScriptedServer, ScriptedToolCall

__all__ = ["AnthropicReply", "AnthropicReplyFn", "AnthropicServer", "ScriptedToolCall"]


@dataclass(frozen=True)
class AnthropicReply:
    """One scripted answer. Content: ``thinking`` (a thinking block first), ``text``, ``tool_calls``.

    ``status`` / ``error_type`` / ``message`` / ``headers``: answer with this error instead.
    Streaming only: ``text_chunk_size`` / ``argument_chunk_size`` split the deltas;
    ``error_after``: send that many events, then an ``overloaded_error`` event (a 200 that fails);
    ``truncate_after``: send that many events, then drop the connection.
    """

    text: str | None = None
    tool_calls: Sequence[ScriptedToolCall] = ()
    thinking: str | None = None
    stop_reason: str | None = None
    status: int | None = None
    error_type: str = "api_error"
    message: str = ""
    headers: Mapping[str, str] = field(default_factory=dict)
    text_chunk_size: int | None = None
    argument_chunk_size: int | None = None
    error_after: int | None = None
    truncate_after: int | None = None

    @classmethod
    def error(
        cls, status: int, error_type: str, message: str, headers: Mapping[str, str] | None = None
    ) -> AnthropicReply:
        return cls(status=status, error_type=error_type, message=message, headers=headers or {})

    @classmethod
    def overloaded(cls, retry_after: float | None = None) -> AnthropicReply:
        """529, as Anthropic answers when it is overloaded."""
        headers = {} if retry_after is None else {"retry-after": f"{retry_after:g}"}
        return cls.error(529, "overloaded_error", "Overloaded", headers)

    @classmethod
    def rate_limited(cls, retry_after: float = 1) -> AnthropicReply:
        headers = {"retry-after": f"{retry_after:g}", "anthropic-ratelimit-requests-remaining": "0"}
        return cls.error(
            429,
            "rate_limit_error",
            "Number of request tokens has exceeded your per-minute rate limit",
            headers,
        )

    @classmethod
    def prompt_too_long(cls, tokens: int = 210_000, maximum: int = 200_000) -> AnthropicReply:
        return cls.error(
            400, "invalid_request_error", f"prompt is too long: {tokens} tokens > {maximum} maximum"
        )


AnthropicReplyFn = Callable[[dict[str, Any]], AnthropicReply]


class AnthropicServer(ScriptedServer[AnthropicReply]):
    """The scripted server, listening on 127.0.0.1 from construction until ``close()``."""

    def __init__(
        self,
        host: str = "127.0.0.1",
        port: int = 0,
        *,
        api_key: str | None = None,
        script: Iterable[AnthropicReply | AnthropicReplyFn] = (),
        fallback: AnthropicReplyFn | None = None,
        min_cache_tokens: int = 0,
    ) -> None:
        self.api_key = api_key
        self.cache = PromptCache(min_cache_tokens)
        super().__init__(
            _Handler,
            host,
            port,
            name="anthropic-emulator",
            reply_type=AnthropicReply,
            script=script,
            fallback=fallback,
        )

    @property
    def url(self) -> str:
        """The API root to give a client (``/v1/messages`` is below it)."""
        return self.root_url


class _Handler(ScriptedHandler):
    request_id_header = "request-id"
    request_id_prefix = "req_emul"

    def answer(self, record: RecordedRequest) -> None:
        owner: AnthropicServer = self.server.owner
        headers, body = record.headers, record.body
        if self.path.split("?")[0] != "/v1/messages":
            return self._error(404, "not_found_error", f"Not found: {self.path}")
        given = headers.get("x-api-key") or headers.get("authorization", "").removeprefix("Bearer ")
        if owner.api_key is not None and given != owner.api_key:
            return self._error(401, "authentication_error", "invalid x-api-key")
        if not headers.get("anthropic-version"):
            return self._error(400, "invalid_request_error", "anthropic-version: header is required")
        try:
            check_request(body)
        except RequestRejected as rejected:
            return self._error(400, "invalid_request_error", str(rejected))
        reply = owner.next_reply(body)
        if reply is None:
            return self._error(
                500, "api_error", f"the emulator's script ran out (request {self.request_number})"
            )
        if reply.status is not None:
            return self._error(reply.status, reply.error_type, reply.message, reply.headers)
        message = _Message(reply, body, self.request_number, owner.cache.account(body))
        if body.get("stream") is True:
            return self._stream(reply, message)
        self.send_body(200, json.dumps(message.as_json()).encode())

    def _error(self, status: int, kind: str, message: str, headers: Mapping[str, str] | None = None) -> None:
        payload = {
            "type": "error",
            "error": {"type": kind, "message": message},
            "request_id": self.request_id,
        }
        self.send_body(status, json.dumps(payload).encode(), headers)

    def _stream(self, reply: AnthropicReply, message: _Message) -> None:
        events = message.events()
        if reply.error_after is not None:
            overloaded = {"type": "error", "error": {"type": "overloaded_error", "message": "Overloaded"}}
            events = [*events[: reply.error_after], ("error", overloaded)]
        truncated = reply.truncate_after is not None and reply.truncate_after < len(events)
        if reply.truncate_after is not None:
            events = events[: reply.truncate_after]
        encoded = [f"event: {name}\ndata: {json.dumps(data)}\n\n".encode() for name, data in events]
        self.send_events(encoded, truncated=truncated)


class _Message:
    """Renders one reply as a ``message`` object or as its stream of events."""

    def __init__(self, reply: AnthropicReply, body: dict[str, Any], number: int, usage: CacheUsage) -> None:
        self.reply = reply
        self.id = f"msg_emul{number:06d}"
        self.model = str(body.get("model"))
        self.usage = usage
        self.call_ids = [
            call.id or f"toolu_emul{number:04d}{index:02d}" for index, call in enumerate(reply.tool_calls)
        ]
        produced = len(reply.text or "") + len(reply.thinking or "")
        produced += sum(len(call.arguments_json) for call in reply.tool_calls)
        self.output_tokens = max(1, math.ceil(produced / 4))

    @property
    def stop_reason(self) -> str:
        return self.reply.stop_reason or ("tool_use" if self.reply.tool_calls else "end_turn")

    def blocks(self) -> list[dict[str, Any]]:
        blocks: list[dict[str, Any]] = []
        if self.reply.thinking is not None:
            blocks.append(
                {"type": "thinking", "thinking": self.reply.thinking, "signature": f"sig-{self.id}"}
            )
        if self.reply.text:
            blocks.append({"type": "text", "text": self.reply.text})
        for call_id, call in zip(self.call_ids, self.reply.tool_calls, strict=True):
            blocks.append(
                {
                    "type": "tool_use",
                    "id": call_id,
                    "name": call.name,
                    "input": json.loads(call.arguments_json),
                }
            )
        return blocks

    def usage_json(self, output_tokens: int) -> dict[str, Any]:
        return {
            "input_tokens": self.usage.input_tokens,
            "cache_creation_input_tokens": self.usage.cache_creation_input_tokens,
            "cache_read_input_tokens": self.usage.cache_read_input_tokens,
            "output_tokens": output_tokens,
        }

    def as_json(
        self, content: list[dict[str, Any]] | None = None, *, started: bool = False
    ) -> dict[str, Any]:
        return {
            "id": self.id,
            "type": "message",
            "role": "assistant",
            "model": self.model,
            "content": self.blocks() if content is None else content,
            "stop_reason": None if started else self.stop_reason,
            "stop_sequence": None,
            "usage": self.usage_json(1 if started else self.output_tokens),
        }

    def events(self) -> list[tuple[str, dict[str, Any]]]:
        events: list[tuple[str, dict[str, Any]]] = [
            ("message_start", {"type": "message_start", "message": self.as_json([], started=True)}),
            ("ping", {"type": "ping"}),
        ]
        for index, block in enumerate(self.blocks()):
            events.append(
                (
                    "content_block_start",
                    {"type": "content_block_start", "index": index, "content_block": _empty(block)},
                )
            )
            events += [
                ("content_block_delta", {"type": "content_block_delta", "index": index, "delta": delta})
                for delta in self._deltas(block)
            ]
            events.append(("content_block_stop", {"type": "content_block_stop", "index": index}))
        delta = {"stop_reason": self.stop_reason, "stop_sequence": None}
        events.append(
            (
                "message_delta",
                {"type": "message_delta", "delta": delta, "usage": {"output_tokens": self.output_tokens}},
            )
        )
        events.append(("message_stop", {"type": "message_stop"}))
        return events

    def _deltas(self, block: dict[str, Any]) -> list[dict[str, Any]]:
        if block["type"] == "text":
            return [
                {"type": "text_delta", "text": piece}
                for piece in _pieces(block["text"], self.reply.text_chunk_size)
            ]
        if block["type"] == "thinking":
            return [
                {"type": "thinking_delta", "thinking": block["thinking"]},
                {"type": "signature_delta", "signature": block["signature"]},
            ]
        arguments = json.dumps(block["input"])
        return [
            {"type": "input_json_delta", "partial_json": piece}
            for piece in _pieces(arguments, self.reply.argument_chunk_size)
        ]


def _empty(block: dict[str, Any]) -> dict[str, Any]:
    """A block as ``content_block_start`` announces it, before its deltas."""
    if block["type"] == "text":
        return {"type": "text", "text": ""}
    if block["type"] == "thinking":
        return {"type": "thinking", "thinking": "", "signature": ""}
    return {**block, "input": {}}


def _pieces(text: str, size: int | None) -> list[str]:
    if not text:
        return []
    if not size:
        return [text[start : start + 16] for start in range(0, len(text), 16)]
    return [text[start : start + size] for start in range(0, len(text), size)]
