"""Server-Sent Events decoding and the assembly of streamed Chat Completions chunks.

``SSEDecoder`` turns bytes, however the network splits them, into events (the WHATWG rules:
lines end with CRLF, LF or CR; ``:`` starts a comment; an event ends at a blank line; an
event still open when the bytes stop is dropped). ``StreamAssembler`` turns the events of
one Chat Completions stream into text deltas and, at the end, one ``Response`` with whole
tool calls, the provider fields to send back (``reasoning_content`` in pieces, a call's
``extra_content``) and the usage wherever the provider put it (the final chunk, a choice,
Groq's ``x_groq``). An error inside the stream (an ``error`` object, OpenRouter's
``finish_reason: "error"``) raises instead of passing for a short answer.
"""

from __future__ import annotations

import json
import re
from collections.abc import Iterable, Iterator, Mapping
from dataclasses import dataclass, field
from typing import Any

from agent.errors import MalformedResponseError, ServerError, TransientLLMError
from agent.models.openai_dialect import CALL_FIELDS, content_text, is_text_content
from agent.models.openai_wire import usage_from_json
from agent.models.provider_errors import error_from_payload
from agent.tool_ids import new_call_id
from agent.types import Choice, Message, Response, ToolCall, Usage

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
    fields: dict[str, Any] = field(default_factory=dict)


class StreamAssembler:
    """Collects the chunks of one streamed completion (choice 0) into a ``Response``.

    Feed each event to ``add`` (or its data to ``add_event``); it returns the new assistant
    text. Tool-call deltas are merged by ``index`` (id and name usually come in the first delta
    only, the arguments in pieces). Call ``finish`` at the end of the stream.
    """

    def __init__(self, *, model: str | None = None) -> None:
        self._model = model
        self._id = ""
        self._response_model = ""
        self._saw_choice = False
        self._text: list[str] = []
        self._reasoning: list[str] = []
        self._reasoning_details: list[Any] = []
        self._calls: dict[int, _PartialToolCall] = {}
        self._usage = Usage()
        self.finish_reason: str | None = None
        self.saw_done = False

    @property
    def complete(self) -> bool:
        """True once the stream said it was over: ``[DONE]`` or a finish_reason."""
        return self.saw_done or self.finish_reason is not None

    @property
    def done(self) -> bool:
        return self.saw_done

    def add(self, event: ServerSentEvent) -> str:
        return self.add_event(event.data)

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
        if chunk.get("error"):  # with or without choices (OpenRouter sends both)
            raise error_from_payload(chunk, status=None, model=self._model)
        if chunk.get("object") == "error":  # vLLM: its ErrorResponse itself as a chunk, message at the top
            raise error_from_payload(chunk, status=None, model=self._model)
        self._id = self._id or _text_or_empty(chunk.get("id"))
        self._response_model = self._response_model or _text_or_empty(chunk.get("model"))
        self._read_usage(chunk)
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
            fields: dict[str, Any] = {}
            if self._reasoning:
                fields["reasoning_content"] = "".join(self._reasoning)
            if self._reasoning_details:
                fields["reasoning_details"] = list(self._reasoning_details)
            message = Message(
                role="assistant",
                content="".join(self._text) or None,
                tool_calls=self._whole_calls(),
                provider_fields=fields,
            )
            choices.append(Choice(index=0, message=message, finish_reason=self.finish_reason))
        return Response(
            id=self._id, model=self._response_model or self._model or "", choices=choices, usage=self._usage
        )

    def _read_usage(self, holder: Mapping[str, Any]) -> None:
        """Usage from the chunk (OpenAI), a choice (some gateways) or ``x_groq`` (Groq)."""
        groq = holder.get("x_groq")
        for raw in (holder.get("usage"), groq.get("usage") if isinstance(groq, dict) else None):
            if raw is not None:
                self._usage = usage_from_json(raw, model=self._model)

    def _add_choice(self, raw: Any) -> str:
        if not isinstance(raw, dict):
            raise self._malformed("a stream choice is not a JSON object")
        if raw.get("index", 0) != 0:
            return ""  # we never ask for n > 1
        self._saw_choice = True
        self._read_usage(raw)
        if raw.get("finish_reason") == "error":  # OpenRouter: the provider failed mid-stream
            raise ServerError("the provider reported an error in the middle of the stream", model=self._model)
        if isinstance(raw.get("finish_reason"), str):
            self.finish_reason = raw["finish_reason"]
        delta = raw.get("delta") or {}
        if not isinstance(delta, dict):
            raise self._malformed("a stream choice's delta is not a JSON object")
        for call_delta in delta.get("tool_calls") or []:
            self._add_tool_call_delta(call_delta)
        if isinstance(delta.get("function_call"), dict) and not delta.get("tool_calls"):
            self._add_tool_call_delta({"index": 0, "function": delta["function_call"]})
        self._add_reasoning(delta)
        content = delta.get("content")
        if not is_text_content(content):
            raise self._malformed("a stream delta's content is not a string")
        text = content_text(content) or ""
        if text:
            self._text.append(text)
        return text

    def _add_reasoning(self, delta: Mapping[str, Any]) -> None:
        piece = delta.get("reasoning_content")
        if isinstance(piece, str) and piece:
            self._reasoning.append(piece)
        details = delta.get("reasoning_details")
        if isinstance(details, list):
            self._reasoning_details.extend(details)

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
        call.fields.update({name: raw[name] for name in CALL_FIELDS if raw.get(name) is not None})

    def _slot_for(self, raw: Mapping[str, Any]) -> int:
        index = raw.get("index")
        if isinstance(index, int) and not isinstance(index, bool):
            return index
        # Some servers omit the index: a new id, or a name once the last call has one (Gemini sends
        # whole calls without ids), opens a call; anything else continues the last.
        if not self._calls:
            return 0
        last = self._calls[max(self._calls)]
        new_id = raw.get("id") and raw.get("id") not in {call.id for call in self._calls.values()}
        function = raw.get("function")
        new_name = isinstance(function, dict) and function.get("name") and last.name and not raw.get("id")
        return max(self._calls) + 1 if new_id or new_name else max(self._calls)

    def _whole_calls(self) -> list[ToolCall]:
        calls: list[ToolCall] = []
        seen: set[str] = set()
        for index in sorted(self._calls):
            call = self._calls[index]
            if not call.name:
                raise self._malformed(f"streamed tool call {index} has no name")
            call_id = call.id if call.id and call.id not in seen else new_call_id()
            seen.add(call_id)
            arguments = "".join(call.argument_pieces) or "{}"
            calls.append(
                ToolCall(id=call_id, name=call.name, arguments=arguments, provider_fields=call.fields)
            )
        return calls

    def _malformed(self, message: str) -> MalformedResponseError:
        return MalformedResponseError(message, model=self._model, status_code=200)


def arguments_from_json(raw: Any) -> str:
    """A streamed arguments piece sent as an object (some local servers do) as JSON text."""
    return json.dumps(raw, ensure_ascii=False, separators=(",", ":"))


def _text_or_empty(value: Any) -> str:
    return value if isinstance(value, str) else ""
