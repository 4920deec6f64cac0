"""A local HTTP server whose answers come from a function: the base of the provider fakes.

Each fake (``tests/agent/provider_fakes.py``) is a handler enforcing one provider's documented
rule and answering in its documented shape; ``forwarding`` makes a proxy of a handler (a gateway
that drops headers). Requests are recorded like the emulators record them.
"""

from __future__ import annotations

import json
from collections.abc import Callable, Iterator, Mapping, Sequence
from dataclasses import dataclass, field
from http.server import BaseHTTPRequestHandler
from typing import Any

import httpx

from emulator.models.http_base import BackgroundServer, TrackingHTTPServer


@dataclass
class FakeRequest:
    method: str
    path: str
    headers: dict[str, str]
    raw: bytes
    body: Any


@dataclass
class FakeAnswer:
    """An answer: JSON (``json``), raw ``body`` bytes, or SSE ``events`` (each a JSON-able object
    or ready ``data`` text), with a status and headers."""

    status: int = 200
    json: Any = None
    body: bytes | None = None
    events: Sequence[Any] | None = None
    headers: Mapping[str, str] = field(default_factory=dict)


Handler = Callable[[FakeRequest], FakeAnswer]


class FakeProvider(BackgroundServer):
    def __init__(self, handler: Handler) -> None:
        self.handler = handler
        self.requests: list[FakeRequest] = []
        super().__init__(_Handler, "127.0.0.1", 0, name="fake-provider")

    @property
    def url(self) -> str:
        return self.root_url


class _Handler(BaseHTTPRequestHandler):
    protocol_version = "HTTP/1.1"
    server: TrackingHTTPServer

    def log_message(self, format: str, *args: Any) -> None:
        pass

    def do_POST(self) -> None:
        raw = self.rfile.read(int(self.headers.get("Content-Length") or 0))
        try:
            body = json.loads(raw) if raw else None
        except ValueError:
            body = None
        owner: FakeProvider = self.server.owner
        request = FakeRequest("POST", self.path, {k.lower(): v for k, v in self.headers.items()}, raw, body)
        owner.requests.append(request)
        answer = owner.handler(request)
        if answer.events is not None:
            data = b"".join(
                b"data: " + (event if isinstance(event, str) else json.dumps(event)).encode() + b"\n\n"
                for event in answer.events
            )
            kind = "text/event-stream"
        else:
            data = answer.body if answer.body is not None else json.dumps(answer.json).encode()
            kind = "application/json"
        self.send_response(answer.status)
        self.send_header("Content-Type", kind)
        self.send_header("Content-Length", str(len(data)))
        for name, value in answer.headers.items():
            self.send_header(name, value)
        self.end_headers()
        self.wfile.write(data)


def forwarding(upstream: str, *, drop_headers: Sequence[str] = (), prefix: str = "") -> Handler:
    """A proxy to ``upstream`` that leaves out ``drop_headers`` from the answers (LiteLLM drops
    ``Retry-After``); with ``prefix``, it passes every upstream header on under that prefix too
    (LiteLLM's ``llm_provider-``)."""
    dropped = {name.lower() for name in drop_headers}

    def handle(request: FakeRequest) -> FakeAnswer:
        forwarded = {k: v for k, v in request.headers.items() if k not in ("host", "content-length")}
        answer = httpx.post(upstream + request.path, content=request.raw, headers=forwarded)
        keep = {
            name: value
            for name, value in answer.headers.items()
            if name.lower()
            not in dropped
            | {"content-length", "transfer-encoding", "content-type", "connection", "date", "server"}
        }
        if prefix:
            keep.update(
                {
                    prefix + name.lower(): value
                    for name, value in answer.headers.items()
                    if name.lower().startswith(("retry-after", "x-ratelimit"))
                }
            )
        return FakeAnswer(status=answer.status_code, body=answer.content, headers=keep)

    return handle


def chat_completion(
    message: Mapping[str, Any],
    *,
    finish_reason: str = "stop",
    usage: Mapping[str, Any] | None = None,
    **extra: Any,
) -> dict[str, Any]:
    """A ``chat.completion`` object around ``message``, as an OpenAI-compatible provider sends it."""
    return {
        "id": "chatcmpl-fake",
        "object": "chat.completion",
        "created": 0,
        "model": "fake-model",
        "choices": [
            {"index": 0, "message": {"role": "assistant", **message}, "finish_reason": finish_reason}
        ],
        "usage": dict(usage)
        if usage is not None
        else {"prompt_tokens": 10, "completion_tokens": 5, "total_tokens": 15},
        **extra,
    }


def chunks(
    *deltas: Mapping[str, Any], finish_reason: str | None = "stop", **last: Any
) -> Iterator[dict[str, Any]]:
    """``chat.completion.chunk`` objects for ``deltas``; ``last`` goes on the final one."""
    for position, delta in enumerate(deltas):
        final = position == len(deltas) - 1
        choice = {"index": 0, "delta": dict(delta), "finish_reason": finish_reason if final else None}
        yield {
            "id": "chatcmpl-fake",
            "object": "chat.completion.chunk",
            "created": 0,
            "model": "fake-model",
            "choices": [choice],
            **(last if final else {}),
        }
