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
import math
import re
import threading
import time
from collections import deque
from collections.abc import Callable, Iterable, Mapping, Sequence
from dataclasses import dataclass, field
from http.server import BaseHTTPRequestHandler
from types import TracebackType
from typing import Any

from emulator.http_base import ClientGone as _ClientGone
from emulator.http_base import TrackingHTTPServer as _HTTPServer

FINGERPRINT = "fp_chatops_emulator"


@dataclass(frozen=True)
class ScriptedToolCall:
    """A tool call the model "makes". ``arguments`` is the JSON string (a mapping is encoded);
    ``id`` defaults to ``call_<request>_<index>``."""

    name: str
    arguments: str | Mapping[str, Any] = "{}"
    id: str | None = None

    @property
    def arguments_json(self) -> str:
        if isinstance(self.arguments, str):
            return self.arguments
        return json.dumps(dict(self.arguments), separators=(",", ":"))


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


@dataclass
class RecordedRequest:
    """One request as the server received it. ``body`` is the parsed JSON (None if it was not
    JSON); ``headers`` have lower-case names; ``client_port`` tells connections apart (the same
    port twice means a reused keep-alive connection). ``outcome`` is filled in once answered:
    ``answered``, ``client_disconnected``, ``truncated`` or ``dropped`` (server closing)."""

    method: str
    path: str
    headers: dict[str, str]
    raw_body: bytes
    body: Any
    client_port: int
    outcome: str = "pending"


class OpenAIServer:
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
        self.fallback = fallback
        self.stopping = threading.Event()
        self._script: deque[ScriptItem] = deque(script)
        self._records: list[RecordedRequest] = []
        self._lock = threading.Lock()
        self._httpd = _HTTPServer((host, port), _Handler, self)
        self._thread = threading.Thread(
            target=self._httpd.serve_forever,
            kwargs={"poll_interval": 0.01},
            name="openai-emulator",
            daemon=True,
        )
        self._thread.start()

    @property
    def url(self) -> str:
        """The API root to give a client, e.g. ``http://127.0.0.1:PORT/v1``."""
        host, port = self._httpd.server_address[:2]
        return f"http://{host!s}:{port}/v1"

    @property
    def requests(self) -> list[RecordedRequest]:
        """Every request received so far, oldest first."""
        with self._lock:
            return list(self._records)

    @property
    def pending(self) -> int:
        """Script items not used yet."""
        with self._lock:
            return len(self._script)

    def enqueue(self, *items: ScriptItem) -> None:
        """Append replies (or reply functions) to the script."""
        with self._lock:
            self._script.extend(items)

    def close(self) -> None:
        """Stop serving, wake delayed replies and drop open connections."""
        self.stopping.set()
        self._httpd.shutdown()
        self._httpd.server_close()
        self._httpd.drop_connections()
        self._thread.join(timeout=5)

    def __enter__(self) -> OpenAIServer:
        return self

    def __exit__(
        self, exc_type: type[BaseException] | None, exc: BaseException | None, tb: TracebackType | None
    ) -> None:
        self.close()

    def record(self, request: RecordedRequest) -> int:
        """Store a request; return its 1-based number."""
        with self._lock:
            self._records.append(request)
            return len(self._records)

    def next_reply(self, body: dict[str, Any]) -> Reply | None:
        """The next script item (called with ``body`` if a function), else ``fallback``, else None."""
        with self._lock:
            item = self._script.popleft() if self._script else self.fallback
        if item is None or isinstance(item, Reply):
            return item
        reply = item(body)
        if not isinstance(reply, Reply):
            raise TypeError(f"a reply function returned {type(reply).__name__}, not Reply")
        return reply


class _Handler(BaseHTTPRequestHandler):
    protocol_version = "HTTP/1.1"
    server: _HTTPServer
    current: RecordedRequest  # the request being answered
    request_number: int
    timeout = 30  # an idle keep-alive connection is closed after this many seconds
    disable_nagle_algorithm = True  # headers and body are separate writes: do not delay the second

    def log_message(self, format: str, *args: Any) -> None:
        """Quiet: tests and the demo read ``requests`` instead of a log."""

    def do_GET(self) -> None:
        self._record(b"")
        if self.path.rstrip("/") == "/v1/models":
            owner = self.server.owner
            entry = {"id": owner.model, "object": "model", "created": 0, "owned_by": "chatops-emulator"}
            self._send_json(200, {"object": "list", "data": [entry]})
        else:
            self._send_error(404, f"Invalid URL (GET {self.path})", code="unknown_url")

    def do_POST(self) -> None:
        raw = self.rfile.read(int(self.headers.get("Content-Length") or 0))
        record = self._record(raw)
        try:
            self._answer_completion(record)
        except _ClientGone:
            record.outcome = "dropped" if self.server.owner.stopping.is_set() else "client_disconnected"
            self.close_connection = True

    def _record(self, raw: bytes) -> RecordedRequest:
        try:
            body = json.loads(raw) if raw else None
        except ValueError:
            body = None
        headers = {name.lower(): value for name, value in self.headers.items()}
        record = RecordedRequest(self.command, self.path, headers, raw, body, self.client_address[1])
        self.request_number = self.server.owner.record(record)
        self.current = record
        return record

    def _answer_completion(self, record: RecordedRequest) -> None:
        owner = self.server.owner
        if self.path.rstrip("/") != "/v1/chat/completions":
            return self._send_error(404, f"Invalid URL (POST {self.path})", code="unknown_url")
        if owner.api_key and record.headers.get("authorization") != f"Bearer {owner.api_key}":
            message = "Incorrect API key provided. You can find your API key in the emulator's settings."
            return self._send_error(401, message, code="invalid_api_key")
        if not isinstance(record.body, dict):
            return self._send_error(400, "We could not parse the JSON body of your request.")
        try:
            reply = owner.next_reply(record.body)
        except Exception as exc:  # a scenario bug: say so to the client instead of hanging up
            return self._send_error(
                500, f"the emulator's reply function failed: {exc!r}", type="server_error"
            )
        if reply is None:
            message = f"the emulator's script ran out of replies (request {self.request_number} has none)"
            return self._send_error(500, message, type="server_error", code="script_exhausted")
        self._pause(reply.delay)
        completion = _Completion(reply, record.body, self.request_number, owner.model)
        if reply.fault is not None:
            fault = reply.fault
            return self._send_error(
                fault.status, fault.message, fault.type, fault.code, fault.param, fault.headers
            )
        if record.body.get("stream") is True:
            return self._send_stream(reply, completion)
        if reply.malformed:
            return self._send_bytes(200, b'{"id": "chatcmpl-broken", "choices": [{"index": 0, "mess', {})
        if reply.byte_delay:
            return self._send_trickle(json.dumps(completion.as_json()).encode(), reply.byte_delay)
        self._send_json(200, completion.as_json())

    # --- writing ------------------------------------------------------------------------

    def _pause(self, seconds: float) -> None:
        if seconds > 0 and self.server.owner.stopping.wait(seconds):
            raise _ClientGone

    def _send_error(
        self,
        status: int,
        message: str,
        type: str = "invalid_request_error",
        code: str | None = None,
        param: str | None = None,
        headers: Mapping[str, str] | None = None,
    ) -> None:
        error = {"message": message, "type": type, "param": param, "code": code}
        self._send_json(status, {"error": error}, headers or {})

    def _send_json(self, status: int, payload: Any, headers: Mapping[str, str] | None = None) -> None:
        self._send_bytes(status, json.dumps(payload).encode(), headers or {})

    def _send_bytes(self, status: int, body: bytes, headers: Mapping[str, str]) -> None:
        try:
            self.send_response(status)
            self.send_header("Content-Type", "application/json")
            self.send_header("Content-Length", str(len(body)))
            self.send_header("x-request-id", f"req_{self.request_number}")
            for name, value in headers.items():
                self.send_header(name, value)
            self.end_headers()
            # Marked before the last write: a client may act on the answer before we get control back.
            self.current.outcome = "answered"
            self.wfile.write(body)
        except OSError as exc:
            raise _ClientGone from exc

    def _send_trickle(self, body: bytes, delay: float) -> None:
        try:
            self.send_response(200)
            self.send_header("Content-Type", "application/json")
            self.send_header("Content-Length", str(len(body)))
            self.end_headers()
            self.wfile.flush()
            for index in range(len(body)):
                self._pause(delay)
                self.wfile.write(body[index : index + 1])
                self.wfile.flush()
            self.current.outcome = "answered"
        except OSError as exc:
            raise _ClientGone from exc

    def _send_stream(self, reply: Reply, completion: _Completion) -> None:
        include_usage = bool((self.current.body.get("stream_options") or {}).get("include_usage"))
        events = [f"data: {json.dumps(chunk)}\n\n".encode() for chunk in completion.chunks(include_usage)]
        if reply.malformed:
            events.insert(1, b'data: {"id": "chatcmpl-broken", "choices": [\n\n')
        events.append(b"data: [DONE]\n\n")
        truncated = reply.truncate_after is not None and reply.truncate_after < len(events)
        if reply.truncate_after is not None:
            events = events[: reply.truncate_after]
        chunked = not reply.close_delimited
        try:
            self.send_response(200)
            self.send_header("Content-Type", "text/event-stream; charset=utf-8")
            self.send_header("Cache-Control", "no-cache")
            self.send_header("x-request-id", f"req_{self.request_number}")
            if chunked:
                self.send_header("Transfer-Encoding", "chunked")
            else:
                self.send_header("Connection", "close")  # the body ends when the connection does
            self.end_headers()
            final_outcome = "truncated" if truncated else "answered"
            self.current.outcome = final_outcome if not events else "pending"
            for position, event in enumerate(events):
                if position:
                    self._pause(reply.chunk_delay)
                if position == len(events) - 1:  # before the last write, as in _send_bytes
                    self.current.outcome = final_outcome
                self.wfile.write(b"%x\r\n%s\r\n" % (len(event), event) if chunked else event)
            if truncated or not chunked:
                self.close_connection = True  # dropping it is the truncation (or the end of the body)
            else:
                self.wfile.write(b"0\r\n\r\n")
        except OSError as exc:
            raise _ClientGone from exc


class _Completion:
    """Renders one ``Reply`` as a ``chat.completion`` object or as ``chat.completion.chunk``s."""

    def __init__(self, reply: Reply, body: dict[str, Any], number: int, default_model: str) -> None:
        self.reply = reply
        self.id = f"chatcmpl-emulated{number:06d}"
        self.created = int(time.time())
        model = body.get("model")
        self.model = model if isinstance(model, str) and model else default_model
        self.call_ids = [call.id or f"call_{number}_{index}" for index, call in enumerate(reply.tool_calls)]
        self.prompt_bytes = len(json.dumps(body.get("messages", [])))

    @property
    def finish_reason(self) -> str:
        return self.reply.finish_reason or ("tool_calls" if self.reply.tool_calls else "stop")

    def usage(self) -> dict[str, Any]:
        scripted = self.reply.usage
        if scripted is None:
            produced = len(self.reply.text or "") + sum(len(c.arguments_json) for c in self.reply.tool_calls)
            scripted = ScriptedUsage(math.ceil(self.prompt_bytes / 4), math.ceil(produced / 4))
        return {
            "prompt_tokens": scripted.prompt_tokens,
            "completion_tokens": scripted.completion_tokens,
            "total_tokens": scripted.prompt_tokens + scripted.completion_tokens,
            "prompt_tokens_details": {"cached_tokens": scripted.cached_tokens, "audio_tokens": 0},
            "completion_tokens_details": {
                "reasoning_tokens": 0,
                "audio_tokens": 0,
                "accepted_prediction_tokens": 0,
                "rejected_prediction_tokens": 0,
            },
        }

    def _envelope(self, kind: str) -> dict[str, Any]:
        return {"id": self.id, "object": kind, "created": self.created, "model": self.model}

    def as_json(self) -> dict[str, Any]:
        message: dict[str, Any] = {"role": "assistant", "content": self.reply.text, "refusal": None}
        if self.reply.tool_calls:
            message["tool_calls"] = [
                {
                    "id": call_id,
                    "type": "function",
                    "function": {"name": call.name, "arguments": call.arguments_json},
                }
                for call_id, call in zip(self.call_ids, self.reply.tool_calls, strict=True)
            ]
        choice = {"index": 0, "message": message, "logprobs": None, "finish_reason": self.finish_reason}
        choices = [] if self.reply.empty_choices else [choice]
        return {
            **self._envelope("chat.completion"),
            "choices": choices,
            "usage": self.usage(),
            "system_fingerprint": FINGERPRINT,
        }

    def chunks(self, include_usage: bool) -> list[dict[str, Any]]:
        """The stream's chunks before ``[DONE]``: role first, text, each call's header then its
        argument pieces, the finish_reason, and the usage chunk (``choices: []``) if asked for."""
        chunks = [] if self.reply.empty_choices else [self._chunk(delta) for delta in self._deltas()]
        if chunks:
            chunks.append(self._chunk({}, self.finish_reason))
        if include_usage:
            for chunk in chunks:
                chunk["usage"] = None  # OpenAI's other chunks carry a null usage
            chunks.append({**self._envelope("chat.completion.chunk"), "choices": [], "usage": self.usage()})
        return chunks

    def _deltas(self) -> list[dict[str, Any]]:
        text = self.reply.text
        deltas: list[dict[str, Any]] = [
            {"role": "assistant", "content": "" if text else None, "refusal": None}
        ]
        deltas += [{"content": piece} for piece in _text_pieces(text or "", self.reply.text_chunk_size)]
        for index, (call_id, call) in enumerate(zip(self.call_ids, self.reply.tool_calls, strict=True)):
            header = {
                "index": index,
                "id": call_id,
                "type": "function",
                "function": {"name": call.name, "arguments": ""},
            }
            deltas.append({"tool_calls": [header]})
            for piece in _pieces(call.arguments_json, self.reply.argument_chunk_size):
                deltas.append({"tool_calls": [{"index": index, "function": {"arguments": piece}}]})
        return deltas

    def _chunk(self, delta: dict[str, Any], finish_reason: str | None = None) -> dict[str, Any]:
        choice = {"index": 0, "delta": delta, "logprobs": None, "finish_reason": finish_reason}
        return {
            **self._envelope("chat.completion.chunk"),
            "system_fingerprint": FINGERPRINT,
            "choices": [choice],
        }


def _text_pieces(text: str, size: int | None) -> list[str]:
    """Text deltas: ``size`` characters each, or one word (with its trailing space) each."""
    if size is not None:
        return _pieces(text, size)
    return re.findall(r"\s*\S+\s*", text) or ([text] if text else [])


def _pieces(text: str, size: int | None) -> list[str]:
    if not text:
        return []
    if size is None or size <= 0:
        return [text]
    return [text[start : start + size] for start in range(0, len(text), size)]
