"""Server-Sent Events decoding and the assembly of streamed Chat Completions chunks.

``SSEDecoder`` turns bytes, however the network splits them, into events (the WHATWG rules:
lines end with CRLF, LF or CR; ``:`` starts a comment; an event ends at a blank line; an
event still open when the bytes stop is dropped). ``StreamAssembler`` turns the events of
one Chat Completions stream into text deltas and, at the end, one ``Response`` with whole
tool calls and the usage of the final chunk.
"""

from __future__ import annotations

import json
import re
from collections.abc import Iterable, Iterator, Mapping
from dataclasses import dataclass, field
from typing import Any

from agent.errors import MalformedResponseError, TransientLLMError
from agent.types import Choice, Message, Response, ToolCall, Usage
from agent.wire import arguments_from_json, error_from_payload, usage_from_json

DONE = "[DONE]"
"""The data of the event that ends an OpenAI-style stream."""

_LINE_END = re.compile(rb"\r\n|\r|\n")
_BOM = "\ufeff"


@dataclass(frozen=True)
class ServerSentEvent:
    """One dispatched event: its data lines joined by newlines, its type and last event id."""

    data: str
    event: str = "message"
    id: str | None = None


class SSEDecoder:
    """Incremental SSE parser: ``feed`` bytes as they arrive, get back the completed events."""

    def __init__(self) -> None:
        self._buffer = b""
        self._data_lines: list[str] = []
        self._event_type = ""
        self._last_id: str | None = None
        self._at_start = True

    def feed(self, chunk: bytes) -> list[ServerSentEvent]:
        """Add bytes; return every event completed by them, in order."""
        self._buffer += chunk
        events: list[ServerSentEvent] = []
        for line in self._complete_lines():
            event = self._process_line(line)
            if event is not None:
                events.append(event)
        return events

    @property
    def has_partial_event(self) -> bool:
        """True when bytes or data lines are waiting for the end of their event."""
        return bool(self._buffer) or bool(self._data_lines)

    def _complete_lines(self) -> Iterator[str]:
        while (match := _LINE_END.search(self._buffer)) is not None:
            # A CR as the last byte may be the first half of a CRLF split across reads.
            if match.group() == b"\r" and match.end() == len(self._buffer):
                return
            raw, self._buffer = self._buffer[: match.start()], self._buffer[match.end() :]
            line = raw.decode("utf-8", errors="replace")
            if self._at_start:
                self._at_start = False
                line = line.removeprefix(_BOM)
            yield line

    def _process_line(self, line: str) -> ServerSentEvent | None:
        if not line:
            return self._dispatch()
        if line.startswith(":"):
            return None
        name, _, value = line.partition(":")
        value = value.removeprefix(" ")
        if name == "data":
            self._data_lines.append(value)
        elif name == "event":
            self._event_type = value
        elif name == "id" and "\0" not in value:
            self._last_id = value
        return None

    def _dispatch(self) -> ServerSentEvent | None:
        data_lines, event_type = self._data_lines, self._event_type
        self._data_lines, self._event_type = [], ""
        if not data_lines:
            return None
        return ServerSentEvent(data="\n".join(data_lines), event=event_type or "message", id=self._last_id)


def iter_sse_events(chunks: Iterable[bytes]) -> Iterator[ServerSentEvent]:
    """Every complete event in a byte stream; a trailing unfinished event is dropped."""
    decoder = SSEDecoder()
    for chunk in chunks:
        yield from decoder.feed(chunk)


@dataclass
class _PartialToolCall:
    id: str = ""
    name: str = ""
    argument_pieces: list[str] = field(default_factory=list)


class StreamAssembler:
    """Collects the chunks of one streamed completion (choice 0) into a ``Response``.

    Feed each event's data to ``add_event``; it returns the new assistant text. Tool-call
    deltas are merged by ``index`` (id and name usually come in the first delta only, the
    arguments in pieces). Call ``finish`` at the end of the stream.
    """

    def __init__(self, *, model: str | None = None) -> None:
        self._model = model
        self._id = ""
        self._response_model = ""
        self._saw_choice = False
        self._text: list[str] = []
        self._calls: dict[int, _PartialToolCall] = {}
        self._usage = Usage()
        self.finish_reason: str | None = None
        self.saw_done = False

    @property
    def complete(self) -> bool:
        """True once the stream said it was over: ``[DONE]`` or a finish_reason."""
        return self.saw_done or self.finish_reason is not None

    def add_event(self, data: str) -> str:
        """Feed one event's data (a JSON chunk or ``[DONE]``); return the text it adds."""
        if data.strip() == DONE:
            self.saw_done = True
            return ""
        try:
            chunk = json.loads(data)
        except ValueError as exc:
            raise self._malformed(f"a stream chunk is not JSON ({exc}): {data[:300]!r}") from exc
        if not isinstance(chunk, dict):
            raise self._malformed("a stream chunk is not a JSON object")
        return self.add_chunk(chunk)

    def add_chunk(self, chunk: Mapping[str, Any]) -> str:
        """Feed one decoded ``chat.completion.chunk``; return the text it adds."""
        if "error" in chunk and not chunk.get("choices"):
            raise error_from_payload(chunk, status=None, model=self._model)
        self._id = self._id or _text_or_empty(chunk.get("id"))
        self._response_model = self._response_model or _text_or_empty(chunk.get("model"))
        if chunk.get("usage") is not None:
            self._usage = usage_from_json(chunk["usage"], model=self._model)
        choices = chunk.get("choices") or []
        if not isinstance(choices, list):
            raise self._malformed("a stream chunk's 'choices' is not a list")
        return "".join(self._add_choice(choice) for choice in choices)

    def finish(self) -> Response:
        """The assembled response. A stream that ended with neither ``[DONE]`` nor a
        finish_reason was cut off: ``TransientLLMError``."""
        if not self.complete:
            raise TransientLLMError("the stream ended before it was complete", model=self._model)
        choices = []
        if self._saw_choice:
            message = Message(
                role="assistant",
                content="".join(self._text) or None,
                tool_calls=[self._whole_call(index) for index in sorted(self._calls)],
            )
            choices.append(Choice(index=0, message=message, finish_reason=self.finish_reason))
        return Response(
            id=self._id, model=self._response_model or self._model or "", choices=choices, usage=self._usage
        )

    def _add_choice(self, raw: Any) -> str:
        if not isinstance(raw, dict):
            raise self._malformed("a stream choice is not a JSON object")
        if raw.get("index", 0) != 0:
            return ""  # we never ask for n > 1
        self._saw_choice = True
        if isinstance(raw.get("finish_reason"), str):
            self.finish_reason = raw["finish_reason"]
        delta = raw.get("delta") or {}
        if not isinstance(delta, dict):
            raise self._malformed("a stream choice's delta is not a JSON object")
        for call_delta in delta.get("tool_calls") or []:
            self._add_tool_call_delta(call_delta)
        content = delta.get("content")
        if content is not None and not isinstance(content, str):
            raise self._malformed("a stream delta's content is not a string")
        if content:
            self._text.append(content)
        return content or ""

    def _add_tool_call_delta(self, raw: Any) -> None:
        if not isinstance(raw, dict):
            raise self._malformed("a tool-call delta is not a JSON object")
        call = self._calls.setdefault(self._slot_for(raw), _PartialToolCall())
        if isinstance(raw.get("id"), str) and raw["id"] and not call.id:
            call.id = raw["id"]
        function = raw.get("function") or {}
        if not isinstance(function, dict):
            raise self._malformed("a tool-call delta's function is not a JSON object")
        if isinstance(function.get("name"), str) and function["name"] and not call.name:
            call.name = function["name"]
        pieces = function.get("arguments")
        if pieces is not None:
            call.argument_pieces.append(pieces if isinstance(pieces, str) else arguments_from_json(pieces))

    def _slot_for(self, raw: Mapping[str, Any]) -> int:
        index = raw.get("index")
        if isinstance(index, int) and not isinstance(index, bool):
            return index
        # Some servers omit the index: a new id opens a call, anything else continues the last.
        known_ids = {call.id for call in self._calls.values()}
        if not self._calls or (raw.get("id") and raw.get("id") not in known_ids):
            return max(self._calls, default=-1) + 1
        return max(self._calls)

    def _whole_call(self, index: int) -> ToolCall:
        call = self._calls[index]
        if not call.id or not call.name:
            raise self._malformed(f"streamed tool call {index} has no {'id' if not call.id else 'name'}")
        return ToolCall(id=call.id, name=call.name, arguments="".join(call.argument_pieces) or "{}")

    def _malformed(self, message: str) -> MalformedResponseError:
        return MalformedResponseError(message, model=self._model, status_code=200)


def _text_or_empty(value: Any) -> str:
    return value if isinstance(value, str) else ""
