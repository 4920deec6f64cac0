"""The events of one streamed Anthropic message, assembled into text deltas and a ``Response``.

The stream is ``message_start`` (id, model, input usage), then per content block
``content_block_start`` / ``content_block_delta`` (``text_delta``, ``input_json_delta``,
``thinking_delta``, ``signature_delta``) / ``content_block_stop``, then ``message_delta`` (stop
reason; its usage counts are cumulative) and ``message_stop``; ``ping`` may come at any time, and
an ``error`` event (``overloaded_error``...) ends it as that error. Unknown event and delta types
are ignored, as the API asks of clients.
"""

from __future__ import annotations

import json
from dataclasses import dataclass, field
from typing import Any

from agent.errors import MalformedResponseError, TransientLLMError
from agent.models.anthropic_wire import STOP_REASONS, USAGE_FIELDS, assemble_message, count, usage_of
from agent.models.provider_errors import error_from_payload
from agent.models.sse import ServerSentEvent
from agent.types import Choice, Response


@dataclass
class _Block:
    start: dict[str, Any]
    pieces: list[str] = field(default_factory=list)  # text, partial JSON, or thinking
    signature: list[str] = field(default_factory=list)

    def whole(self) -> dict[str, Any]:
        kind = self.start.get("type")
        block = dict(self.start)
        if kind == "text":
            block["text"] = str(block.get("text") or "") + "".join(self.pieces)
        elif kind == "tool_use" and self.pieces:
            block["input"] = _json_object("".join(self.pieces), str(block.get("id")))
        elif kind == "thinking":
            block["thinking"] = str(block.get("thinking") or "") + "".join(self.pieces)
            block["signature"] = str(block.get("signature") or "") + "".join(self.signature)
        return block


def _text(value: Any) -> str:
    return value if isinstance(value, str) else ""


def _json_object(text: str, call_id: str) -> Any:
    try:
        return json.loads(text)
    except ValueError as exc:
        raise MalformedResponseError(
            f"tool_use {call_id}'s streamed input is not JSON: {text[:300]!r}"
        ) from exc


class AnthropicStreamAssembler:
    """Feed every event to ``add``; ``finish`` at the end (a stream cut off before its stop reason
    is transient)."""

    def __init__(self, *, model: str | None = None) -> None:
        self._model = model
        self._id = ""
        self._response_model = ""
        self._blocks: dict[int, _Block] = {}
        self._usage: dict[str, int] = dict.fromkeys(USAGE_FIELDS, 0)
        self._stop_reason: str | None = None
        self._stopped = False

    @property
    def done(self) -> bool:
        return self._stopped

    def add(self, event: ServerSentEvent) -> str:
        try:
            data = json.loads(event.data)
        except ValueError as exc:
            raise self._malformed(f"an event is not JSON ({exc}): {event.data[:300]!r}") from exc
        if not isinstance(data, dict):
            raise self._malformed("an event is not a JSON object")
        kind = data.get("type", event.event)
        handler = getattr(self, f"_on_{kind}", None) if isinstance(kind, str) else None
        return handler(data) if handler is not None else ""

    def finish(self) -> Response:
        if self._stop_reason is None and not self._stopped:
            raise TransientLLMError("the stream ended before the message was complete", model=self._model)
        blocks = [self._blocks[index].whole() for index in sorted(self._blocks)]
        message = assemble_message(blocks, self._model)
        stop = self._stop_reason
        return Response(
            id=self._id,
            model=self._response_model or self._model or "",
            choices=[Choice(message=message, finish_reason=STOP_REASONS.get(stop or "", stop))],
            usage=usage_of(self._usage),
        )

    # --- events -------------------------------------------------------------------------------

    def _on_message_start(self, data: dict[str, Any]) -> str:
        message = data.get("message")
        if not isinstance(message, dict):
            raise self._malformed("message_start has no message")
        self._id = _text(message.get("id"))
        self._response_model = _text(message.get("model"))
        self._update_usage(message.get("usage"))
        return ""

    def _on_content_block_start(self, data: dict[str, Any]) -> str:
        block = data.get("content_block")
        if not isinstance(block, dict):
            raise self._malformed("content_block_start has no content_block")
        self._blocks[self._index(data)] = _Block(dict(block))
        text = block.get("text")
        return text if block.get("type") == "text" and isinstance(text, str) else ""

    def _on_content_block_delta(self, data: dict[str, Any]) -> str:
        index, delta = self._index(data), data.get("delta")
        if index not in self._blocks or not isinstance(delta, dict):
            raise self._malformed(f"a delta for block {index}, which never started")
        block = self._blocks[index]
        kind = delta.get("type")
        if kind == "text_delta" and isinstance(delta.get("text"), str):
            block.pieces.append(delta["text"])
            return str(delta["text"])
        if kind == "input_json_delta" and isinstance(delta.get("partial_json"), str):
            block.pieces.append(delta["partial_json"])
        elif kind == "thinking_delta" and isinstance(delta.get("thinking"), str):
            block.pieces.append(delta["thinking"])
        elif kind == "signature_delta" and isinstance(delta.get("signature"), str):
            block.signature.append(delta["signature"])
        return ""

    def _on_message_delta(self, data: dict[str, Any]) -> str:
        delta = data.get("delta")
        if isinstance(delta, dict) and isinstance(delta.get("stop_reason"), str):
            self._stop_reason = delta["stop_reason"]
        self._update_usage(data.get("usage"))
        return ""

    def _on_message_stop(self, data: dict[str, Any]) -> str:
        self._stopped = True
        return ""

    def _on_error(self, data: dict[str, Any]) -> str:
        raise error_from_payload(data, status=None, model=self._model)

    # --- helpers ------------------------------------------------------------------------------

    def _update_usage(self, raw: Any) -> None:
        if not isinstance(raw, dict):
            return
        for name in USAGE_FIELDS:
            if raw.get(name) is not None:  # message_delta's counts are cumulative: the last one wins
                self._usage[name] = count(raw[name], name, self._model)

    def _index(self, data: dict[str, Any]) -> int:
        index = data.get("index")
        if not isinstance(index, int) or isinstance(index, bool):
            raise self._malformed("a content block event has no index")
        return index

    def _malformed(self, message: str) -> MalformedResponseError:
        return MalformedResponseError(message, model=self._model, status_code=200)
