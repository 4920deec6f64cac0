"""Recorded model runs (``--record DIR`` / ``--replay DIR``): a proxy between the worker and its model.

The worker's ``LLM_BASE_URL`` points at a ``ModelProxy`` (``emulator.eval.model_proxy``) in the
harness's process. This module holds what is written and decided around it: the recording's
format (``RecordingMeta``), the plan of one run (``RecordingPlan``: its folder, its epoch, the
fixed place of its hosts) and the verdict after it (``finish``). Recording, the proxy
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

import contextlib
import fcntl
import hashlib
import json
import shutil
import time
from collections.abc import Mapping, Sequence
from dataclasses import dataclass, field
from datetime import UTC, datetime
from pathlib import Path
from typing import IO, TYPE_CHECKING, Any, Literal

from emulator.eval.errors import EvalError

if TYPE_CHECKING:  # the proxy imports this module
    from emulator.eval.model_proxy import ModelProxy

FORMAT = 1
REDACTED = "[redacted]"
META, REQUESTS = "meta.json", "requests"
WORLD_WAIT = 600.0  # seconds a run waits for another run of the same scenario and repeat to free its world
# Where recorded and replayed runs keep their simulated hosts: the same path on every machine and
# for every --out, because the hosts' paths are in what the worker sends (a scripted agent's
# ${web-03.log_dir}, tail_log's header). One folder per scenario and repeat, locked while used.
WORLD_ROOT = Path("/tmp/chatops-eval-world")
# The worker's model settings a recording keeps, to configure a replay's worker the same way
# (LLM_MAX_TOKENS, the model's name ... are in the body); never the key or the extra headers.
_REPLAYED_SETTINGS = ("LLM_PROVIDER", "LLM_MODEL", "LLM_MAX_TOKENS", "LLM_READ_TIMEOUT", "LLM_API_VERSION")
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
        write_json(folder / META, self.__dict__, secrets)


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
        if not WORLD_ROOT.exists():  # shared like /tmp: each user's runs lock their own folders in it
            WORLD_ROOT.mkdir(parents=True, exist_ok=True)
            with contextlib.suppress(OSError):
                WORLD_ROOT.chmod(0o1777)
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


def write_json(path: Path, data: Any, secrets: Sequence[str]) -> None:
    text = json.dumps(data, indent=1, sort_keys=True, ensure_ascii=False) + "\n"
    for secret in secrets:  # the last guard: a key the worker echoed somewhere is never written
        if secret:
            text = text.replace(secret, REDACTED)
    path.write_text(text, encoding="utf-8")


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
