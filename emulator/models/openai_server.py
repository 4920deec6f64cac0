"""A scripted OpenAI-compatible Chat Completions server for tests and the local demo.

It is a real HTTP/1.1 server (stdlib ``ThreadingHTTPServer`` on 127.0.0.1, port 0 by
default, in a background thread) serving ``POST /v1/chat/completions`` as JSON or as SSE,
the way OpenAI sends them, and ``GET /v1/models``. Nothing is generated: every answer is
the next ``Reply`` of a script::

    with OpenAIServer() as server:
        server.enqueue(
            Reply(tool_calls=[ScriptedToolCall("get_pods", '{"namespace": "web"}')]),
            Reply.rate_limited(retry_after=2),
            Reply(text="All pods are running."),
        )
        client = LLMClient(server.url, "key", "gpt-test")

A script item may also be a function of the request body (``ReplyFn``), and ``fallback``
answers once the script is used up; without one the server answers 500 saying so. Every
request is recorded (``requests``) for tests to inspect. Production code never imports this.
"""

from __future__ import annotations

import json
from collections.abc import Iterable, Mapping
from typing import Any

from emulator.models.http_base import ClientGone
from emulator.models.openai_completion import FINGERPRINT, Completion
from emulator.models.openai_replies import Fault, Reply, ReplyFn, ScriptedUsage, ScriptItem
from emulator.models.scripted_server import RecordedRequest, ScriptedHandler, ScriptedServer, ScriptedToolCall

__all__ = [
    "FINGERPRINT",
    "Fault",
    "OpenAIServer",
    "RecordedRequest",
    "Reply",
    "ReplyFn",
    "ScriptItem",
    "ScriptedToolCall",
    "ScriptedUsage",
]


class OpenAIServer(ScriptedServer[Reply]):
    """The scripted server, listening from construction until ``close()``."""

    def __init__(
        self,
        host: str = "127.0.0.1",
        port: int = 0,
        *,
        model: str = "chatops-emulated",
        api_key: str | None = None,
        script: Iterable[ScriptItem] = (),
        fallback: ReplyFn | None = None,
    ) -> None:
        self.model = model
        self.api_key = api_key
        super().__init__(
            _Handler,
            host,
            port,
            name="openai-emulator",
            reply_type=Reply,
            script=script,
            fallback=fallback,
        )

    @property
    def url(self) -> str:
        """The API root to give a client, e.g. ``http://127.0.0.1:PORT/v1``."""
        return f"{self.root_url}/v1"


class _Handler(ScriptedHandler):
    request_id_header = "x-request-id"
    request_id_prefix = "req_"

    def do_GET(self) -> None:
        self.receive(b"")
        if self.path.rstrip("/") == "/v1/models":
            owner: OpenAIServer = self.server.owner
            entry = {"id": owner.model, "object": "model", "created": 0, "owned_by": "chatops-emulator"}
            self._send_json(200, {"object": "list", "data": [entry]})
        else:
            self._send_fault(_invalid_request(404, f"Invalid URL (GET {self.path})", code="unknown_url"))

    def answer(self, record: RecordedRequest) -> None:
        owner: OpenAIServer = self.server.owner
        refusal = self._refusal(owner, record)
        if refusal is not None:
            return self._send_fault(refusal)
        assert isinstance(record.body, dict)  # _refusal answers anything else
        try:
            reply = owner.next_reply(record.body)
        except Exception as exc:  # a scenario bug: say so to the client instead of hanging up
            return self._send_fault(Fault(500, f"the emulator's reply function failed: {exc!r}"))
        if reply is None:
            message = f"the emulator's script ran out of replies (request {self.request_number} has none)"
            return self._send_fault(Fault(500, message, code="script_exhausted"))
        self.pause(reply.delay)
        if reply.fault is not None:
            return self._send_fault(reply.fault)
        completion = Completion(reply, record.body, self.request_number, owner.model)
        if record.body.get("stream") is True:
            return self._send_stream(reply, completion)
        if reply.malformed:
            return self.send_body(200, b'{"id": "chatcmpl-broken", "choices": [{"index": 0, "mess')
        if reply.byte_delay:
            return self._send_trickle(json.dumps(completion.as_json()).encode(), reply.byte_delay)
        self._send_json(200, completion.as_json())

    def _refusal(self, owner: OpenAIServer, record: RecordedRequest) -> Fault | None:
        """What OpenAI answers before any model sees the request: a wrong URL, key or body."""
        if self.path.rstrip("/") != "/v1/chat/completions":
            return _invalid_request(404, f"Invalid URL (POST {self.path})", code="unknown_url")
        if owner.api_key and record.headers.get("authorization") != f"Bearer {owner.api_key}":
            message = "Incorrect API key provided. You can find your API key in the emulator's settings."
            return _invalid_request(401, message, code="invalid_api_key")
        if not isinstance(record.body, dict):
            return _invalid_request(400, "We could not parse the JSON body of your request.")
        return None

    # --- writing ------------------------------------------------------------------------

    def _send_fault(self, fault: Fault) -> None:
        error = {"message": fault.message, "type": fault.type, "param": fault.param, "code": fault.code}
        self._send_json(fault.status, {"error": error}, fault.headers)

    def _send_json(self, status: int, payload: Any, headers: Mapping[str, str] | None = None) -> None:
        self.send_body(status, json.dumps(payload).encode(), headers)

    def _send_trickle(self, body: bytes, delay: float) -> None:
        try:
            self.send_response(200)
            self.send_header("Content-Type", "application/json")
            self.send_header("Content-Length", str(len(body)))
            self.end_headers()
            self.wfile.flush()
            for index in range(len(body)):
                self.pause(delay)
                self.wfile.write(body[index : index + 1])
                self.wfile.flush()
            self.current.outcome = "answered"
        except OSError as exc:
            raise ClientGone from exc

    def _send_stream(self, reply: Reply, completion: Completion) -> None:
        include_usage = bool((self.current.body.get("stream_options") or {}).get("include_usage"))
        events = [f"data: {json.dumps(chunk)}\n\n".encode() for chunk in completion.chunks(include_usage)]
        if reply.malformed:
            events.insert(1, b'data: {"id": "chatcmpl-broken", "choices": [\n\n')
        events.append(b"data: [DONE]\n\n")
        truncated = reply.truncate_after is not None and reply.truncate_after < len(events)
        if reply.truncate_after is not None:
            events = events[: reply.truncate_after]
        self.send_events(
            events, truncated=truncated, delay=reply.chunk_delay, chunked=not reply.close_delimited
        )


def _invalid_request(status: int, message: str, code: str | None = None) -> Fault:
    return Fault(status, message, type="invalid_request_error", code=code)
