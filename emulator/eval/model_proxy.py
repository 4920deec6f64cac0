"""The proxy between the worker and its model that records or replays (``emulator.eval.recording``).

Recording, it forwards each request as it came (same path, same body, same headers: the worker's
own API key goes through, never into a file) to the upstream and stores the exchange under
``requests/SHA256.json``; replaying, it answers from those files with no network, and a body it
does not hold is a miss: ``400 invalid_request_error`` (``replay_miss``), which no client retries,
so the run ends at once. Header values are kept only for an allow-list of harmless headers (the
rest say ``[redacted]``), query parameters named like keys are redacted, and any secret the
harness knows (``secrets``) is replaced in everything written, as a last guard.
"""

from __future__ import annotations

import json
import threading
import urllib.error
import urllib.parse
import urllib.request
from collections.abc import Mapping, Sequence
from dataclasses import dataclass
from http.server import BaseHTTPRequestHandler
from pathlib import Path
from typing import Any

from emulator.eval.recording import (
    REDACTED,
    REQUESTS,
    Mode,
    RecordingError,
    RecordingMeta,
    request_key,
    write_json,
)
from emulator.models.http_base import BackgroundServer

MISS_CODE = "replay_miss"
UPSTREAM_TIMEOUT = 600.0  # seconds: a real model may think for minutes
# Headers whose values say nothing secret; every other value is written as [redacted].
_SHOWN_HEADERS = frozenset(
    {"content-type", "accept", "user-agent", "anthropic-version", "anthropic-beta", "openai-beta"}
)
# Not forwarded: the proxy's own connection, and compression (the answer is stored as text).
_HOP_HEADERS = frozenset(
    {"host", "content-length", "connection", "keep-alive", "transfer-encoding", "accept-encoding"}
)
_SECRET_QUERY = ("key", "token", "secret", "signature", "sig", "password")


@dataclass
class _Exchange:
    status: int
    headers: dict[str, str]
    body: str


class ModelProxy(BackgroundServer):
    """Records (forwarding to ``upstream``) or replays the model requests of one run in ``folder``.

    ``url`` is what the worker's ``LLM_BASE_URL`` becomes: this proxy with the upstream's path
    (``http://127.0.0.1:PORT/v1`` for ``https://api.openai.com/v1``), so every client's own URL
    rules (``/chat/completions``, ``/v1/messages``, Azure's deployments and ``api-version``) work
    unchanged and the path is forwarded as it came."""

    def __init__(
        self,
        mode: Mode,
        folder: Path,
        *,
        upstream: str = "",
        secrets: Sequence[str] = (),
    ) -> None:
        self.mode = mode
        self.folder = folder
        self.secrets = [s for s in secrets if s]
        parsed = urllib.parse.urlsplit(upstream) if upstream else None
        self._upstream_root = f"{parsed.scheme}://{parsed.netloc}" if parsed else ""
        self._base_path = parsed.path.rstrip("/") if parsed else ""
        self._lock = threading.Lock()
        self.keys: list[str] = []  # every request's key, in the order received
        self.misses: list[str] = []  # replaying: keys not in the recording
        self._answers: dict[str, list[_Exchange]] = {}
        self._served: dict[str, int] = {}
        if mode == "replay":
            self._answers = _load_answers(folder)
        else:
            (folder / REQUESTS).mkdir(parents=True, exist_ok=True)
        super().__init__(_ProxyHandler, "127.0.0.1", 0, name=f"model-proxy-{mode}")

    @property
    def url(self) -> str:
        return f"{self.root_url}{self._base_path}"

    @property
    def base_path(self) -> str:
        return self._base_path

    @property
    def requests(self) -> list[str]:
        """The keys of the requests received so far (a model request each), oldest first."""
        with self._lock:
            return list(self.keys)

    # -- answering --------------------------------------------------------------------------------

    def handle(self, method: str, path: str, headers: Mapping[str, str], body: bytes) -> _Exchange:
        key = request_key(body)
        with self._lock:
            self.keys.append(key)
        if self.mode == "replay":
            return self._replayed(key)
        answer = self._forward(method, path, headers, body)
        self._store(key, method, path, headers, body, answer)
        return answer

    def _replayed(self, key: str) -> _Exchange:
        with self._lock:
            answers = self._answers.get(key)
            if not answers:
                self.misses.append(key)
                return _miss(key)
            served = self._served.get(key, 0)
            self._served[key] = served + 1
        return answers[min(served, len(answers) - 1)]  # the same body again: the next answer it got

    def _forward(self, method: str, path: str, headers: Mapping[str, str], body: bytes) -> _Exchange:
        sent = {k: v for k, v in headers.items() if k.lower() not in _HOP_HEADERS}
        request = urllib.request.Request(
            self._upstream_root + path, data=body if method == "POST" else None, headers=sent, method=method
        )
        try:
            with urllib.request.urlopen(request, timeout=UPSTREAM_TIMEOUT) as response:
                return _Exchange(response.status, _kept(response.headers), response.read().decode())
        except urllib.error.HTTPError as error:  # an error answer is an answer: recorded too
            return _Exchange(error.code, _kept(error.headers), error.read().decode())
        except (OSError, ValueError) as error:  # unreachable: the client retries; nothing to record
            message = f"the recording proxy could not reach the model: {error}"
            return _Exchange(502, {"content-type": "application/json"}, json.dumps({"error": message}))

    def _store(
        self, key: str, method: str, path: str, headers: Mapping[str, str], body: bytes, answer: _Exchange
    ) -> None:
        if answer.status == 502 and "recording proxy" in answer.body:
            return
        path_file = self.folder / REQUESTS / f"{key}.json"
        with self._lock:
            entry: dict[str, Any]
            if path_file.exists():
                entry = json.loads(path_file.read_text(encoding="utf-8"))
            else:
                entry = {
                    "key": key,
                    "method": method,
                    "path": redact_query(path),
                    "headers": redact_headers(headers),
                    "body": body.decode(),
                    "answers": [],
                }
            entry["answers"].append(answer.__dict__)
            write_json(path_file, entry, self.secrets)

    # -- after the run ----------------------------------------------------------------------------

    def verify(self) -> None:
        """Recording: each stored body hashes to its key (what a replay looks up)."""
        for path in sorted((self.folder / REQUESTS).glob("*.json")):
            entry = json.loads(path.read_text(encoding="utf-8"))
            if request_key(entry["body"].encode()) != entry["key"]:
                raise RecordingError(
                    f"{path}: its body no longer hashes to its key; a secret in it was redacted?"
                )


class _ProxyHandler(BaseHTTPRequestHandler):
    protocol_version = "HTTP/1.1"
    timeout = 30
    server: Any

    def log_message(self, format: str, *args: Any) -> None:
        """Quiet: the recording is the log."""

    def do_POST(self) -> None:
        self._serve(self.rfile.read(int(self.headers.get("Content-Length") or 0)))

    def do_GET(self) -> None:
        self._serve(b"")

    def _serve(self, body: bytes) -> None:
        proxy: ModelProxy = self.server.owner
        headers = {name.lower(): value for name, value in self.headers.items()}
        answer = proxy.handle(self.command, self.path, headers, body)
        data = answer.body.encode()
        try:
            self.send_response(answer.status)
            for name, value in answer.headers.items():
                self.send_header(name, value)
            self.send_header("Content-Length", str(len(data)))
            self.end_headers()
            self.wfile.write(data)
        except OSError:
            self.close_connection = True


def _miss(key: str) -> _Exchange:
    """What a replay answers a request it does not hold: a client error no client retries."""
    message = (
        f"chatops eval replay: request {key[:12]} is not in the recording (a prompt, a tool "
        "definition or a tool output changed); the scenario is stale: record it again"
    )
    error = {"type": "invalid_request_error", "code": MISS_CODE, "message": message}
    return _Exchange(400, {"content-type": "application/json"}, json.dumps({"type": "error", "error": error}))


def _kept(headers: Any) -> dict[str, str]:
    """The answer's headers a replay sends again: its content type (the body is sent whole)."""
    return {"content-type": headers.get("Content-Type") or "application/json"}


def redact_headers(headers: Mapping[str, str]) -> dict[str, str]:
    """Header values of the allow-list kept, every other one ``[redacted]`` (keys, tokens, cookies)."""
    return {
        name.lower(): value if name.lower() in _SHOWN_HEADERS else REDACTED
        for name, value in sorted(headers.items())
        if name.lower() not in _HOP_HEADERS
    }


def redact_query(path: str) -> str:
    """``path`` with the values of query parameters named like credentials ``[redacted]``."""
    parts = urllib.parse.urlsplit(path)
    if not parts.query:
        return path
    pairs = urllib.parse.parse_qsl(parts.query, keep_blank_values=True)
    kept = [(k, REDACTED if any(word in k.lower() for word in _SECRET_QUERY) else v) for k, v in pairs]
    return urllib.parse.urlunsplit(parts._replace(query=urllib.parse.urlencode(kept, safe="[]")))


def _load_answers(folder: Path) -> dict[str, list[_Exchange]]:
    RecordingMeta.read(folder)  # a folder that is not a recording fails here, before any process starts
    answers: dict[str, list[_Exchange]] = {}
    for path in sorted((folder / REQUESTS).glob("*.json")):
        try:
            entry = json.loads(path.read_text(encoding="utf-8"))
            key = str(entry["key"])
            exchanges = [_Exchange(**answer) for answer in entry["answers"]]
            body = str(entry["body"]).encode()
        except (OSError, ValueError, KeyError, TypeError) as error:
            raise RecordingError(f"{path}: not a recorded request ({error}); record it again") from error
        # An edited file would answer a request it never saw: a recording is recorded, not written.
        if request_key(body) != key:
            raise RecordingError(f"{path}: its body does not hash to its key {key[:12]}; record it again")
        answers[key] = exchanges
    return answers
