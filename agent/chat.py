"""The interface every model client implements: the HTTP client and the scripted model alike."""

from __future__ import annotations

from collections.abc import Iterator
from dataclasses import dataclass
from typing import Protocol

from agent.types import Request, Response


@dataclass(frozen=True)
class TextPart:
    """A piece of assistant text as it streams in."""

    text: str


@dataclass(frozen=True)
class DonePart:
    """The last part of a stream: the assembled response (tool calls whole, usage read)."""

    response: Response


StreamPart = TextPart | DonePart


class ChatModel(Protocol):
    """A chat model. Transient failures are retried inside; what escapes is an ``LLMError``.

    ``stream`` yields ``TextPart``s and ends with exactly one ``DonePart``. A caller may stop
    iterating early (to cancel a degenerate stream); the implementation must then release
    the connection (close the generator).
    """

    @property
    def model(self) -> str: ...

    def complete(self, request: Request) -> Response: ...

    def stream(self, request: Request) -> Iterator[StreamPart]: ...
