"""Recorded model runs (``--record DIR`` / ``--replay DIR``): a proxy between the worker and its model.

The worker's ``LLM_BASE_URL`` points at a ``ModelProxy`` in the harness's process. Recording, it
forwards each request as it came (same path, same body, same headers: the worker's own API key
goes through, never into a file) to the upstream (the scripted server, or the real provider with
``--agent model``) and stores the exchange under ``DIR/NAME-REPEAT/``, keyed by the SHA-256 of the
request body exactly as chatops sent it::

    meta.json                  what was recorded: scenario, repeat, agent, provider, model, date,
                               the scenario's epoch, the keys in order, the scores
    requests/SHA256.json       the request (method, path, redacted headers, body) and its answers

Replaying, nothing is forwarded (no network): a body whose key is in the recording gets the
recorded answer; one that is not (a prompt, a tool definition or a tool output changed) is a
*miss*: the proxy answers ``400 invalid_request_error`` (``replay_miss``), which no client
retries, so the run ends at once, and the scenario is reported ``stale``, neither passed nor
failed. Keys are never computed on a normalised body: a changed byte is a changed request.

No credential is written: header values are kept only for an allow-list of harmless headers
(the rest say ``[redacted]``), query parameters named like keys are redacted, and any secret the
harness knows (``secrets``) is replaced in everything written, as a last guard.
"""

from __future__ import annotations

import fcntl
import hashlib
import json
import shutil
import threading
import time
import urllib.error
import urllib.parse
import urllib.request
from collections.abc import Mapping, Sequence
from dataclasses import dataclass, field
from datetime import UTC, datetime
from http.server import BaseHTTPRequestHandler
from pathlib import Path
from typing import IO, Any, Literal

from emulator.eval.errors import EvalError
from emulator.models.http_base import BackgroundServer

FORMAT = 1
META, REQUESTS = "meta.json", "requests"
REDACTED = "[redacted]"
MISS_CODE = "replay_miss"
UPSTREAM_TIMEOUT = 600.0  # seconds: a real model may think for minutes
WORLD_WAIT = 600.0  # seconds a run waits for another run of the same scenario and repeat to free its world
# Where recorded and replayed runs keep their simulated hosts: the same path on every machine and
# for every --out, because the hosts' paths are in what the worker sends (a scripted agent's
# ${web-03.log_dir}, tail_log's header). One folder per scenario and repeat, locked while used.
WORLD_ROOT = Path("/tmp/chatops-eval-world")
# The worker's model settings a recording keeps, to configure a replay's worker the same way
# (LLM_MAX_TOKENS, the model's name ... are in the body); never the key or the extra headers.
_REPLAYED_SETTINGS = ("LLM_PROVIDER", "LLM_MODEL", "LLM_MAX_TOKENS", "LLM_READ_TIMEOUT", "LLM_API_VERSION")
# Headers whose values say nothing secret; every other value is written as [redacted].
_SHOWN_HEADERS = frozenset(
    {"content-type", "accept", "user-agent", "anthropic-version", "anthropic-beta", "openai-beta"}
)
# Not forwarded: the proxy's own connection, and compression (the answer is stored as text).
_HOP_HEADERS = frozenset(
    {"host", "content-length", "connection", "keep-alive", "transfer-encoding", "accept-encoding"}
)
_SECRET_QUERY = ("key", "token", "secret", "signature", "sig", "password")

Mode = Literal["record", "replay"]


class RecordingError(EvalError):
    """A recording that cannot be read or written (missing, of another format, unreadable)."""


def request_key(body: bytes) -> str:
    """The key of a request: the SHA-256 of its body, byte for byte as it was sent."""
    return hashlib.sha256(body).hexdigest()


def run_folder(root: Path, name: str, repeat: int) -> Path:
    """Where one scenario's repeat is recorded: ``ROOT/NAME-REPEAT``."""
    return root / f"{name}-{repeat}"


@dataclass
class RecordingMeta:
    """``meta.json``: what a recording holds and how it was made."""

    scenario: str
    repeat: int
    agent: str
    provider: str
    model: str
    recorded: str  # ISO date and time (UTC) of the recording
    epoch: float  # the scenario's start (EvalSession.started_at): a replay injects the same state
    base_path: str  # the upstream URL's path (/v1): a replay's worker gets the same URL rules
    settings: dict[str, str]  # the worker's model settings but its key (_REPLAYED_SETTINGS)
    keys: list[str] = field(default_factory=list)  # every request's key, in the order sent
    scores: dict[str, float] | None = None  # filled in once the run is scored
    format: int = FORMAT

    @classmethod
    def read(cls, folder: Path) -> RecordingMeta:
        path = folder / META
        try:
            data = json.loads(path.read_text(encoding="utf-8"))
        except (OSError, ValueError) as error:
            raise RecordingError(f"no recording in {folder}: cannot read {path.name} ({error})") from error
        if not isinstance(data, dict) or data.get("format") != FORMAT:
            raise RecordingError(f"{path}: not a recording of format {FORMAT}; record it again")
        try:
            return cls(**data)
        except TypeError as error:
            raise RecordingError(f"{path}: {error}; record it again") from error

    def write(self, folder: Path, secrets: Sequence[str] = ()) -> None:
        folder.mkdir(parents=True, exist_ok=True)
        _write_json(folder / META, self.__dict__, secrets)


def replayed_settings(env: Mapping[str, str]) -> dict[str, str]:
    return {name: env[name] for name in _REPLAYED_SETTINGS if env.get(name)}


@dataclass
class RecordingPlan:
    """How one run of a scenario is recorded or replayed: its ``folder``, its ``world`` (where its
    hosts live) and its ``epoch`` (a replay's is its recording's; ``meta`` is that recording's)."""

    mode: Mode
    folder: Path
    world: Path
    epoch: float
    meta: RecordingMeta | None = None
    _lock: IO[str] | None = None

    @classmethod
    def for_run(
        cls, mode: Mode, root: Path, name: str, repeat: int, epoch: float | None = None
    ) -> RecordingPlan:
        """The plan of one run; recording, at ``epoch`` (default: now). Two recordings at one
        epoch send the same bytes, which is what the tests check of the harness."""
        folder = run_folder(root, name, repeat)
        world = WORLD_ROOT / f"{name}-{repeat}"
        if mode == "record":
            if folder.exists():  # a recording is made whole: no answer of an older one stays
                shutil.rmtree(folder)
            return cls(mode, folder, world, time.time() if epoch is None else epoch)
        meta = RecordingMeta.read(folder)
        if meta.scenario != name or meta.repeat != repeat:
            raise RecordingError(f"{folder} records {meta.scenario} #{meta.repeat}, not {name} #{repeat}")
        return cls(mode, folder, world, meta.epoch, meta)

    def take_world(self) -> None:
        """Lock the world folder (waiting for a run that holds it) and empty it."""
        WORLD_ROOT.mkdir(mode=0o1777, parents=True, exist_ok=True)
        lock = open(WORLD_ROOT / f"{self.world.name}.lock", "a+")  # noqa: SIM115 - held until released
        deadline = time.monotonic() + WORLD_WAIT
        while True:
            try:
                fcntl.flock(lock, fcntl.LOCK_EX | fcntl.LOCK_NB)
                break
            except OSError:
                if time.monotonic() > deadline:
                    lock.close()
                    raise RecordingError(
                        f"{self.world} stayed in use by another run for {WORLD_WAIT:.0f}s"
                    ) from None
                time.sleep(0.2)
        self._lock = lock
        if self.world.exists():
            shutil.rmtree(self.world)
        self.world.mkdir(parents=True)

    def release_world(self, hosts: Path) -> None:
        """Move the hosts into the run's folder (``hosts``: to look at after the run), free the world."""
        if self._lock is None:
            return
        if (self.world / "hosts").exists() and not hosts.exists():
            shutil.move(self.world / "hosts", hosts)
        shutil.rmtree(self.world, ignore_errors=True)
        self._lock.close()
        self._lock = None


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
            _write_json(path_file, entry, self.secrets)

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


def _write_json(path: Path, data: Any, secrets: Sequence[str]) -> None:
    text = json.dumps(data, indent=1, sort_keys=True, ensure_ascii=False) + "\n"
    for secret in secrets:  # the last guard: a key the worker echoed somewhere is never written
        if secret:
            text = text.replace(secret, REDACTED)
    path.write_text(text, encoding="utf-8")


def _load_answers(folder: Path) -> dict[str, list[_Exchange]]:
    RecordingMeta.read(folder)  # a folder that is not a recording fails here, before any process starts
    answers: dict[str, list[_Exchange]] = {}
    for path in sorted((folder / REQUESTS).glob("*.json")):
        try:
            entry = json.loads(path.read_text(encoding="utf-8"))
            answers[str(entry["key"])] = [_Exchange(**answer) for answer in entry["answers"]]
        except (OSError, ValueError, KeyError, TypeError) as error:
            raise RecordingError(f"{path}: not a recorded request ({error}); record it again") from error
    return answers


def finish(
    plan: RecordingPlan,
    proxy: ModelProxy,
    *,
    scenario: str,
    repeat: int,
    agent: str,
    settings: Mapping[str, str],
    scores: dict[str, float],
) -> str:
    """After a scored run: write a recording's ``meta.json`` (``none``), or judge a replay.

    A replay is ``exact`` when every request was in the recording, in the recorded order, and then
    its scores must be the recorded ones: the same answers to the same requests scored otherwise
    is the harness's fault (``RecordingError``). Any miss, or a run that asked less or in another
    order, is ``stale``."""
    if plan.mode == "record":
        proxy.verify()
        meta = RecordingMeta(
            scenario=scenario,
            repeat=repeat,
            agent=agent,
            provider=settings.get("LLM_PROVIDER", "openai"),
            model=settings.get("LLM_MODEL", ""),
            recorded=datetime.now(UTC).isoformat(timespec="seconds"),
            epoch=plan.epoch,
            base_path=proxy.base_path,
            settings=replayed_settings(settings),
            keys=proxy.requests,
            scores=scores,
        )
        meta.write(plan.folder, proxy.secrets)
        return "none"
    assert plan.meta is not None
    if proxy.misses or proxy.requests != plan.meta.keys:
        return "stale"
    if scores != plan.meta.scores:
        raise RecordingError(
            f"{scenario} #{repeat}: every request was answered from {plan.folder}, yet the scores "
            f"{scores} differ from the recorded {plan.meta.scores}: the harness is not deterministic"
        )
    return "exact"
