"""One HTTP port for everything: the Web API, the page, its live updates, response URLs and control.

==========================  ==============================================================
``/api/<method>``           Slack Web API (``WebClient(base_url=emulator.api_url)``)
``/``, ``/static/<file>``   the web page
``/stream``                 server-sent events: a notice per change
``/actions/<...>``          ``response_url`` targets handed out with interactions
``/upload/v1/<token>``      upload URLs from ``files.getUploadURLExternal`` (POST the bytes)
``/files/<id>/<name>``      a shared file's ``url_private`` (its bytes, as a download)
``/control/...``            the control API (see ``control.py``)
==========================  ==============================================================
"""

from __future__ import annotations

import json
import queue
import threading
import urllib.parse
from http import HTTPStatus
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer
from pathlib import Path
from types import TracebackType
from typing import Any

from emulator.slack import methods_files
from emulator.slack.config import WorkspaceConfig
from emulator.slack.control import Control
from emulator.slack.core import Core
from emulator.slack.hub import Hub

STATIC = Path(__file__).parent / "static"
CONTENT_TYPES = {".html": "text/html; charset=utf-8", ".js": "text/javascript", ".css": "text/css"}
KEEPALIVE_SECONDS = 15.0


class _Server(ThreadingHTTPServer):
    daemon_threads = True  # an open event stream must not keep the process alive
    request_queue_size = 128  # socketserver's 5 resets connections when many clients post at once
    core: Core
    control: Control
    hub: Hub


class _Handler(BaseHTTPRequestHandler):
    server: _Server
    server_version = "SlackEmulator/1.0"

    def log_message(self, format: str, *args: Any) -> None:
        return None  # quiet: tests read the recorded calls instead

    def do_GET(self) -> None:
        self._route("GET")

    def do_POST(self) -> None:
        self._route("POST")

    def do_DELETE(self) -> None:
        self._route("DELETE")

    def _route(self, verb: str) -> None:
        url = urllib.parse.urlsplit(self.path)
        path = url.path
        raw = self._body()
        if path.startswith("/api/"):
            self._api(verb, path[len("/api/") :], url.query, raw)
        elif path.startswith("/control/"):
            self._control(verb, path, url.query, raw)
        elif path.startswith("/actions/") and verb == "POST":
            self._response_url(path, raw)
        elif path.startswith("/upload/v1/") and verb == "POST":
            self._upload(path[len("/upload/v1/") :], raw)
        elif path.startswith("/files/") and verb == "GET":
            self._file(path[len("/files/") :].split("/", 1)[0])
        elif path == "/stream" and verb == "GET":
            self._stream()
        elif verb == "GET" and (path == "/" or path.startswith("/static/")):
            self._static("index.html" if path == "/" else path[len("/static/") :])
        else:
            self._json(HTTPStatus.NOT_FOUND, {"ok": False, "error": "not_found"})

    def _body(self) -> bytes:
        length = int(self.headers.get("Content-Length") or 0)
        return self.rfile.read(length) if length > 0 else b""

    def _json(self, status: int, body: Any, headers: dict[str, str] | None = None) -> None:
        data = json.dumps(body).encode()
        self.send_response(status)
        self.send_header("Content-Type", "application/json; charset=utf-8")
        self.send_header("Content-Length", str(len(data)))
        for key, value in (headers or {}).items():
            self.send_header(key, value)
        try:
            self.end_headers()
            self.wfile.write(data)
        except (BrokenPipeError, ConnectionResetError):
            pass  # the client gave up waiting (a "slow" fault outlasting its timeout)

    def _api(self, verb: str, method: str, query: str, raw: bytes) -> None:
        headers = {k.lower(): v for k, v in self.headers.items()}
        result = self.server.core.api(method, verb, headers, query, raw)
        self._json(result.status, result.body, result.headers)

    def _control(self, verb: str, path: str, query: str, raw: bytes) -> None:
        try:
            body = json.loads(raw) if raw.strip() else {}
        except ValueError:
            self._json(HTTPStatus.BAD_REQUEST, {"ok": False, "error": "invalid_json"})
            return
        status, answer = self.server.control.handle(verb, path, query, body if isinstance(body, dict) else {})
        self._json(status, answer)

    def _response_url(self, path: str, raw: bytes) -> None:
        try:
            body = json.loads(raw) if raw.strip() else {}
        except ValueError:
            self._json(HTTPStatus.BAD_REQUEST, {"ok": False, "error": "invalid_payload"})
            return
        token = path.rstrip("/").rsplit("/", 1)[-1]
        status, answer = self.server.core.respond(token, body if isinstance(body, dict) else {})
        self._json(status, answer)

    def _upload(self, token: str, raw: bytes) -> None:
        """Step 2 of an upload (``emulator.slack.methods_files``): the file's bytes, as the body."""
        status, text = methods_files.receive_upload(self.server.core.ws, token, raw)
        self._bytes(status, text.encode(), "text/plain; charset=utf-8")

    def _file(self, file_id: str) -> None:
        """A shared file's ``url_private``: its bytes, as a download (never rendered as a page); a
        PNG as ``image/png`` (what its bytes are: ``methods_files.png_size``), so the page's
        ``<img>`` shows it, anything else as text."""
        found = methods_files.file_content(self.server.core.ws, file_id)
        if found is None:
            self._json(HTTPStatus.NOT_FOUND, {"ok": False, "error": "file_not_found"})
            return
        data, mimetype = found
        content_type = "image/png" if mimetype == "image/png" else "text/plain; charset=utf-8"
        self._bytes(HTTPStatus.OK, data, content_type, attachment=True)

    def _bytes(self, status: int, data: bytes, content_type: str, *, attachment: bool = False) -> None:
        self.send_response(status)
        self.send_header("Content-Type", content_type)
        self.send_header("Content-Length", str(len(data)))
        self.send_header("X-Content-Type-Options", "nosniff")
        if attachment:
            self.send_header("Content-Disposition", "attachment")
        self.end_headers()
        self.wfile.write(data)

    def _static(self, name: str) -> None:
        file = STATIC / name
        # Only files directly in static/: no "..", no subdirectories.
        if "/" in name or name.startswith(".") or not file.is_file():
            self._json(HTTPStatus.NOT_FOUND, {"ok": False, "error": "not_found"})
            return
        data = file.read_bytes()
        self.send_response(HTTPStatus.OK)
        self.send_header("Content-Type", CONTENT_TYPES.get(file.suffix, "application/octet-stream"))
        self.send_header("Content-Length", str(len(data)))
        self.send_header("Cache-Control", "no-store")
        self.end_headers()
        self.wfile.write(data)

    def _stream(self) -> None:
        """Server-sent events: ``event: <type>`` + JSON ``data`` per change, comments as keep-alives."""
        hub = self.server.hub
        notices = hub.subscribe()
        self.send_response(HTTPStatus.OK)
        self.send_header("Content-Type", "text/event-stream")
        self.send_header("Cache-Control", "no-store")
        self.end_headers()
        try:
            self.wfile.write(b"retry: 1000\nevent: hello\ndata: {}\n\n")
            self.wfile.flush()
            while True:
                try:
                    notice = notices.get(timeout=KEEPALIVE_SECONDS)
                except queue.Empty:
                    self.wfile.write(b": keep-alive\n\n")
                    self.wfile.flush()
                    continue
                if notice is None:
                    return
                self.wfile.write(f"event: {notice['type']}\ndata: {json.dumps(notice)}\n\n".encode())
                self.wfile.flush()
        except (BrokenPipeError, ConnectionResetError, TimeoutError):
            return
        finally:
            hub.unsubscribe(notices)


class SlackEmulator:
    """The emulator in this process, on its own thread: ``with SlackEmulator(cfg) as slack: ...``.

    ``url`` is the page, ``api_url`` the Web API base for ``WebClient(base_url=...)``.
    """

    def __init__(
        self, config: WorkspaceConfig | None = None, *, host: str = "127.0.0.1", port: int = 0
    ) -> None:
        self.config = config or WorkspaceConfig()
        self._host, self._port = host, port
        self._server: _Server | None = None
        self._thread: threading.Thread | None = None
        self.hub = Hub()
        self.core = Core(self.config, self.hub)

    @property
    def url(self) -> str:
        """``http://host:port`` once started."""
        if self._server is None:
            raise RuntimeError("the emulator is not started")
        host, port = self._server.server_address[:2]
        return f"http://{host!s}:{port}"

    @property
    def api_url(self) -> str:
        """The Web API base URL, with the trailing slash slack_sdk expects."""
        return f"{self.url}/api/"

    def start(self) -> SlackEmulator:
        """Bind and serve in a background thread."""
        if self._server is not None:
            return self
        server = _Server((self._host, self._port), _Handler)
        server.core, server.control, server.hub = self.core, Control(self.core), self.hub
        self._server = server
        self.core.base_url = self.url
        # A short poll interval keeps close() (and so every test using the emulator) quick.
        self._thread = threading.Thread(
            target=server.serve_forever, kwargs={"poll_interval": 0.05}, name="slack-emulator", daemon=True
        )
        self._thread.start()
        return self

    def serve_forever(self) -> None:
        """Serve in the calling thread (the standalone command)."""
        self.start()
        if self._thread is not None:
            self._thread.join()

    def set_events_url(self, events_url: str | None, interactivity_url: str | None = None) -> None:
        """Point delivery at the bot (known only once the bot is up)."""
        with self.core.ws.lock:
            self.config.events_url = events_url
            self.config.interactivity_url = interactivity_url

    def close(self) -> None:
        """Stop serving, end event streams and pending retries."""
        self.core.deliverer.close()
        self.hub.close()
        if self._server is not None:
            self._server.shutdown()
            self._server.server_close()
            self._server = None
        if self._thread is not None:
            self._thread.join(timeout=5)
            self._thread = None

    def __enter__(self) -> SlackEmulator:
        return self.start()

    def __exit__(
        self, exc_type: type[BaseException] | None, exc: BaseException | None, tb: TracebackType | None
    ) -> None:
        self.close()
