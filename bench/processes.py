"""The processes a benchmark starts (``chatops web``, ``chatops worker``, the emulator): each in
a process group of its own writing to a log, waited for, and stopped with whatever it forked."""

from __future__ import annotations

import contextlib
import os
import signal
import socket
import subprocess
import sys
import time
import urllib.request
from collections.abc import Callable, Iterator, Sequence
from dataclasses import dataclass
from pathlib import Path
from typing import TypeVar

from bench.common import ROOT, BenchRedis

T = TypeVar("T")
_OPENER = urllib.request.build_opener(urllib.request.ProxyHandler({}))


def free_port() -> int:
    with socket.socket() as sock:
        sock.bind(("127.0.0.1", 0))
        return int(sock.getsockname()[1])


def chatops_command() -> list[str]:
    """``chatops`` of this interpreter's environment (``python -m bot.ops.cli`` works the same)."""
    return [sys.executable, "-m", "bot.ops.cli"]


PROCFILE = ROOT / "Procfile"


def procfile(path: Path = PROCFILE) -> dict[str, str]:
    """The Procfile's process types and their command lines (``web: chatops web`` -> web)."""
    lines = {}
    for line in path.read_text().splitlines():
        name, colon, command = line.partition(":")
        if colon and name.strip() and not name.lstrip().startswith("#"):
            lines[name.strip()] = command.strip()
    return lines


def as_shipped(line: str, env: dict[str, str]) -> tuple[list[str], dict[str, str]]:
    """A Procfile line started as a Procfile runner starts it (honcho: ``sh -c LINE``, in a session
    of its own as ``start_process`` gives every process), with the ``chatops`` of this interpreter's
    environment first on ``PATH``: (command, environment)."""
    path = f"{Path(sys.executable).parent}{os.pathsep}{env.get('PATH', os.environ.get('PATH', ''))}"
    return ["/bin/sh", "-c", line], {**env, "PATH": path}


@dataclass
class Process:
    """A subprocess we started, in its own process group (chatops web and RQ fork children)."""

    name: str
    popen: subprocess.Popen[bytes]
    log: Path

    def stop(self, timeout: float = 20.0) -> None:
        """SIGTERM our process group, then SIGKILL it if it lingers (only ids we started)."""
        if self.popen.poll() is None:
            with contextlib.suppress(ProcessLookupError):
                os.killpg(self.popen.pid, signal.SIGTERM)
            with contextlib.suppress(subprocess.TimeoutExpired):
                self.popen.wait(timeout=timeout)
        with contextlib.suppress(ProcessLookupError):
            os.killpg(self.popen.pid, signal.SIGKILL)  # leftover children (work horses) of our group
        with contextlib.suppress(subprocess.TimeoutExpired):
            self.popen.wait(timeout=5)

    def tail(self, chars: int = 3000) -> str:
        return self.log.read_text(errors="replace")[-chars:] if self.log.exists() else ""


def start_process(
    name: str, command: Sequence[str], env: dict[str, str], log_dir: Path, nice: int = 0
) -> Process:
    log_dir.mkdir(parents=True, exist_ok=True)
    log = log_dir / f"{name}.log"
    full_env = {**os.environ, "PYTHONPATH": str(ROOT), **env}
    if os.environ.get("BENCH_NO_NICE") == "1":
        # The smoke test's quick runs (figures mean nothing): a niced worker beside a busy machine's
        # other work would only make the smoke test wait for CPU it never gets; nor does a worker
        # lower itself (bot/ops/priority.py).
        nice = 0
        full_env["CHATOPS_WORKER_NICE"] = "0"
    full_env.pop("SLACK_APP_TOKEN", None)
    with open(log, "wb") as handle:
        popen = subprocess.Popen(
            list(command),
            cwd=ROOT,
            env=full_env,
            stdout=handle,
            stderr=subprocess.STDOUT,
            start_new_session=True,
            preexec_fn=(lambda: _lower_priority(nice)) if nice else None,
        )
    return Process(name, popen, log)


def _lower_priority(nice: int) -> None:
    """``nice`` this process and, where the kernel groups processes by session for scheduling
    (``sched_autogroup_enabled``: a new session is a new group, and a plain nice value then only
    ranks processes inside their own group), its session's group too: otherwise a niced worker in
    a session of its own gets as much CPU as the web process."""
    os.nice(nice)
    with contextlib.suppress(OSError), open("/proc/self/autogroup", "w") as group:
        group.write(str(nice))


def http_status(url: str, timeout: float = 2.0) -> int | None:
    try:
        with _OPENER.open(url, timeout=timeout) as response:
            return int(response.status)
    except OSError:
        return None


def wait_until(
    probe: Callable[[], T | None],
    timeout: float,
    what: str,
    interval: float = 0.05,
    watch: Sequence[Process] = (),
) -> T:
    """Poll ``probe`` until it answers something true, and return that; fail at once if a
    ``watch``ed process has exited."""
    deadline = time.monotonic() + timeout
    while not (value := probe()):
        for process in watch:
            if process.popen.poll() is not None:
                raise RuntimeError(
                    f"{process.name} exited ({process.popen.returncode}) while waiting for {what}"
                )
        if time.monotonic() > deadline:
            raise TimeoutError(f"timed out after {timeout:.0f}s waiting for {what}")
        time.sleep(interval)
    return value


def wait_for_web(port: int, watch: Sequence[Process]) -> None:
    """Until ``chatops web`` on ``port`` answers ``/healthz`` with 200 (30 s at most)."""
    wait_until(lambda: http_status(f"http://127.0.0.1:{port}/healthz") == 200, 30, "chatops web", watch=watch)


@contextlib.contextmanager
def processes(started: list[Process]) -> Iterator[list[Process]]:
    """Stop every process in ``started`` (in reverse order) when the block ends, printing failed logs."""
    try:
        yield started
    except BaseException:
        for process in started:
            sys.stderr.write(f"--- {process.name} log (tail) ---\n{process.tail()}\n")
        raise
    finally:
        for process in reversed(started):
            process.stop()


# The run limits (``bot.runs.limits``) stay on, as deployed, but high enough never to refuse: a
# benchmark's mentions must all become runs.
NEVER_LIMITED = {
    "CHATOPS_USER_RUNS_PER_WINDOW": "100000000",
    "CHATOPS_CHANNEL_RUNS_PER_WINDOW": "100000000",
    "CHATOPS_CHANNEL_MAX_ACTIVE_RUNS": "100000000",
}


def worker_env(bench: BenchRedis, queue: str, runtime: str, **extra: str) -> dict[str, str]:
    """The environment of ``chatops worker`` / ``chatops web`` processes of a benchmark."""
    return {
        **NEVER_LIMITED,
        "REDIS_URL": bench.url,
        "CHATOPS_REDIS_PREFIX": bench.prefix,
        "CHATOPS_QUEUE": queue,
        "CHATOPS_RUNTIME": runtime,
        "CHATOPS_RETENTION_DAYS": "1",
        **extra,
    }
