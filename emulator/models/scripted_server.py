"""What the scripted model servers (OpenAI-compatible and Anthropic) share.

Each answers from a script of replies, records every request it receives, and writes its
answers the same way: a whole body, or a stream of events in chunked encoding (or ended by
closing the connection). Only the wire format differs, in ``openai_server`` and
``anthropic_server``.
"""

from __future__ import annotations

import json
import threading
from collections import deque
from collections.abc import Callable, Iterable, Mapping, Sequence
from dataclasses import dataclass
from http.server import BaseHTTPRequestHandler
from typing import Any, ClassVar, Generic, TypeVar

from emulator.models.http_base import BackgroundServer, ClientGone, TrackingHTTPServer

ReplyT = TypeVar("ReplyT")


@dataclass(frozen=True)
class ScriptedToolCall:
    """A tool call the model "makes". ``arguments`` is the JSON string (a mapping is encoded);
    ``id`` defaults to one the server makes up from the request's number."""

    name: str
    arguments: str | Mapping[str, Any] = "{}"
    id: str | None = None

    @property
    def arguments_json(self) -> str:
        if isinstance(self.arguments, str):
            return self.arguments
        return json.dumps(dict(self.arguments), separators=(",", ":"))


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


class ScriptedServer(BackgroundServer, Generic[ReplyT]):
    """A ``BackgroundServer`` answering from a script of ``ReplyT``s (or functions of the request
    body returning one), then from ``fallback``; every request is recorded."""

    def __init__(
        self,
        handler: type[BaseHTTPRequestHandler],
        host: str,
        port: int,
        *,
        name: str,
        reply_type: type[ReplyT],
        script: Iterable[ReplyT | Callable[[dict[str, Any]], ReplyT]],
        fallback: Callable[[dict[str, Any]], ReplyT] | None,
    ) -> None:
        self.fallback = fallback
        self._lock = threading.Lock()
        self._reply_type = reply_type
        self._script: deque[ReplyT | Callable[[dict[str, Any]], ReplyT]] = deque(script)
        self._records: list[RecordedRequest] = []
        super().__init__(handler, host, port, name=name)

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

    def enqueue(self, *items: ReplyT | Callable[[dict[str, Any]], ReplyT]) -> None:
        """Append replies (or reply functions) to the script."""
        with self._lock:
            self._script.extend(items)

    def record(self, request: RecordedRequest) -> int:
        """Store a request; return its 1-based number."""
        with self._lock:
            self._records.append(request)
            return len(self._records)

    def next_reply(self, body: dict[str, Any]) -> ReplyT | None:
        """The next script item (called with ``body`` if a function), else ``fallback``, else None."""
        with self._lock:
            item = self._script.popleft() if self._script else self.fallback
        if item is None or isinstance(item, self._reply_type):
            return item
        assert callable(item)
        reply = item(body)
        if not isinstance(reply, self._reply_type):
            raise TypeError(
                f"a reply function returned {type(reply).__name__}, not {self._reply_type.__name__}"
            )
        return reply


class ScriptedHandler(BaseHTTPRequestHandler):
    """Records each request with its server and writes answers, marking the record's outcome."""

    protocol_version = "HTTP/1.1"
    timeout = 30  # an idle keep-alive connection is closed after this many seconds
    disable_nagle_algorithm = True  # headers and body are separate writes: do not delay the second
    request_id_header: ClassVar[str]
    request_id_prefix: ClassVar[str]
    server: TrackingHTTPServer
    current: RecordedRequest  # the request being answered
    request_number: int

    def log_message(self, format: str, *args: Any) -> None:
        """Quiet: tests and the demo read ``requests`` instead of a log."""

    def do_POST(self) -> None:
        record = self.receive(self.rfile.read(int(self.headers.get("Content-Length") or 0)))
        try:
            self.answer(record)
        except ClientGone:
            record.outcome = "dropped" if self.server.owner.stopping.is_set() else "client_disconnected"
            self.close_connection = True

    def answer(self, record: RecordedRequest) -> None:
        """Answer the POST ``record`` (raise ``ClientGone`` when the client is gone)."""
        raise NotImplementedError

    @property
    def request_id(self) -> str:
        return f"{self.request_id_prefix}{self.request_number}"

    def receive(self, raw: bytes) -> RecordedRequest:
        """Record the request (its body parsed as JSON when it is JSON) and make it ``current``."""
        try:
            body = json.loads(raw) if raw else None
        except ValueError:
            body = None
        headers = {name.lower(): value for name, value in self.headers.items()}
        record = RecordedRequest(self.command, self.path, headers, raw, body, self.client_address[1])
        self.request_number = self.server.owner.record(record)
        self.current = record
        return record

    def pause(self, seconds: float) -> None:
        """Wait, unless the server is closing: then the answer ends here."""
        if seconds > 0 and self.server.owner.stopping.wait(seconds):
            raise ClientGone

    def send_body(
        self,
        status: int,
        body: bytes,
        headers: Mapping[str, str] | None = None,
        kind: str = "application/json",
    ) -> None:
        try:
            self.send_response(status)
            self.send_header("Content-Type", kind)
            self.send_header("Content-Length", str(len(body)))
            self.send_header(self.request_id_header, self.request_id)
            for name, value in (headers or {}).items():
                self.send_header(name, value)
            self.end_headers()
            # Marked before the last write: a client may act on the answer before we get control back.
            self.current.outcome = "answered"
            self.wfile.write(body)
        except OSError as exc:
            raise ClientGone from exc

    def send_events(
        self, events: Sequence[bytes], *, truncated: bool, delay: float = 0.0, chunked: bool = True
    ) -> None:
        """A 200 ``text/event-stream`` of ``events``, ``delay`` seconds apart; ``truncated``: the
        connection is dropped after them; not ``chunked``: the body ends when the connection does."""
        try:
            self.send_response(200)
            self.send_header("Content-Type", "text/event-stream; charset=utf-8")
            self.send_header("Cache-Control", "no-cache")
            self.send_header(self.request_id_header, self.request_id)
            if chunked:
                self.send_header("Transfer-Encoding", "chunked")
            else:
                self.send_header("Connection", "close")
            self.end_headers()
            final_outcome = "truncated" if truncated else "answered"
            self.current.outcome = final_outcome if not events else "pending"
            for position, event in enumerate(events):
                if position:
                    self.pause(delay)
                if position == len(events) - 1:  # before the last write, as in send_body
                    self.current.outcome = final_outcome
                self.wfile.write(b"%x\r\n%s\r\n" % (len(event), event) if chunked else event)
            if truncated or not chunked:
                self.close_connection = True  # dropping it is the truncation (or the end of the body)
            else:
                self.wfile.write(b"0\r\n\r\n")
        except OSError as exc:
            raise ClientGone from exc
