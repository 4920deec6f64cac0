"""Scripted models: drive the loop in tests and demos without HTTP, behind the ``ChatModel`` interface.

``ScriptedModel`` answers from a list, in order; ``FunctionModel`` answers with a function of the
request (the history so far). Script items may be a ``Response``, an assistant ``Message``, plain
text, a ``ToolCall`` or a list of them, or an exception instance to raise (to script failures).
Both record every request they receive.
"""

from __future__ import annotations

import json
import threading
import uuid
from collections.abc import Callable, Iterable, Iterator, Sequence
from typing import Any

from agent.chat import DonePart, StreamPart, TextPart
from agent.errors import ConfigurationError
from agent.evidence import split_label
from agent.types import Choice, Message, Request, Response, ToolCall, Usage

ScriptItem = Response | Message | str | ToolCall | list[ToolCall] | BaseException


def tool_call(name: str, call_id: str | None = None, **arguments: Any) -> ToolCall:
    """A tool call with ``arguments`` serialised as the wire's JSON string."""
    return ToolCall(id=call_id or f"call_{uuid.uuid4().hex[:12]}", name=name, arguments=json.dumps(arguments))


def estimate_usage(request: Request, message: Message) -> Usage:
    """A rough token count (4 characters a token), so budgets behave plausibly in demos."""
    prompt_chars = sum(
        len(m.content or "") + sum(len(c.arguments) for c in m.tool_calls) for m in request.messages
    )
    prompt_chars += sum(len(t.description) + len(json.dumps(t.parameters)) for t in request.tools)
    completion_chars = len(message.content or "") + sum(
        len(c.name) + len(c.arguments) for c in message.tool_calls
    )
    return Usage(prompt_tokens=prompt_chars // 4 + 1, completion_tokens=completion_chars // 4 + 1)


def to_response(item: ScriptItem, request: Request, model: str) -> Response:
    """Turn one script item into a ``Response`` (raising it if it is an exception)."""
    if isinstance(item, BaseException):
        raise item
    if isinstance(item, Response):
        return item
    if isinstance(item, str):
        message = Message.assistant(item)
    elif isinstance(item, ToolCall):
        message = Message.assistant(None, [item])
    elif isinstance(item, list):
        message = Message.assistant(None, list(item))
    else:
        message = item
    finish = "tool_calls" if message.tool_calls else "stop"
    return Response(
        id=f"chatcmpl-scripted-{uuid.uuid4().hex[:8]}",
        model=model,
        choices=[Choice(message=message, finish_reason=finish)],
        usage=estimate_usage(request, message),
    )


class _RecordingModel:
    """Shared plumbing: the model name, the request log, and streaming in small pieces."""

    def __init__(self, model: str, chunk_size: int) -> None:
        self._model = model
        self._chunk_size = chunk_size
        self._lock = threading.Lock()
        self.requests: list[Request] = []

    @property
    def model(self) -> str:
        return self._model

    def _answer(self, request: Request) -> Response:
        raise NotImplementedError

    def complete(self, request: Request) -> Response:
        with self._lock:
            # A shallow copy: the loop appends to its history list but never changes a message.
            self.requests.append(request.model_copy(update={"messages": list(request.messages)}))
        return self._answer(request)

    def stream(self, request: Request) -> Iterator[StreamPart]:
        response = self.complete(request)
        text = response.message.content if response.message else None
        for start in range(0, len(text or ""), self._chunk_size):
            yield TextPart((text or "")[start : start + self._chunk_size])
        yield DonePart(response)


class ScriptedModel(_RecordingModel):
    """Answers with the script's items in order; running out is a ``ConfigurationError``."""

    def __init__(self, script: Iterable[ScriptItem], model: str = "scripted", chunk_size: int = 8) -> None:
        super().__init__(model, chunk_size)
        self._script = list(script)
        self._position = 0

    @property
    def remaining(self) -> int:
        return len(self._script) - self._position

    def _answer(self, request: Request) -> Response:
        with self._lock:
            if self._position >= len(self._script):
                raise ConfigurationError(f"scripted model {self.model!r} ran out of answers")
            item = self._script[self._position]
            self._position += 1
        return to_response(item, request, self.model)


class FunctionModel(_RecordingModel):
    """Answers with ``function(request)``; the function sees the whole history."""

    def __init__(
        self,
        function: Callable[[Request], ScriptItem],
        model: str = "function",
        chunk_size: int = 8,
    ) -> None:
        super().__init__(model, chunk_size)
        self._function = function

    def _answer(self, request: Request) -> Response:
        return to_response(self._function(request), request, self.model)


def last_tool_output(messages: Sequence[Message]) -> str | None:
    """The newest tool result in ``messages`` (handy for scripted final answers), without the
    evidence label a wire puts before it (a model behind HTTP reads ``[E3] ok``; the label is the
    runtime's, not the tool's)."""
    for message in reversed(messages):
        if message.role == "tool":
            return split_label(message.content)[1] if message.content else message.content
    return None
