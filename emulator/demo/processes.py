"""The demo's child processes (``chatops runner`` per host, ``chatops web``, ``chatops worker``):
started in process groups of their own writing to a log each, watched, and stopped in order, with
whatever they left behind; and the signals that stop the demo itself (``signals_set``)."""

from __future__ import annotations

import contextlib
import fcntl
import os
import signal
import socket
import subprocess
import sys
import threading
import time
import urllib.error
import urllib.request
from collections.abc import Callable, Iterator, Mapping, Sequence
from dataclasses import dataclass, field
from pathlib import Path
from types import FrameType
from typing import IO, Any

import psutil

STOP_TIMEOUT = 10.0
_OPENER = urllib.request.build_opener(urllib.request.ProxyHandler({}))


@dataclass
class Child:
    """A process the demo started, in its own process group, writing to ``log``."""

    name: str
    process: subprocess.Popen[bytes]
    log: Path
    descendants: list[psutil.Process] = field(default_factory=list)

    def alive(self) -> bool:
        return self.process.poll() is None


def spawn_chatops(
    name: str,
    arguments: Sequence[str],
    env: Mapping[str, str],
    *,
    cwd: Path,
    log: Path,
    banner: str,
    pass_fds: Sequence[int] = (),
) -> Child:
    """``python -m bot.ops.cli ARGUMENTS`` (``chatops NAME``), appending to ``log`` after ``banner``;
    ``pass_fds`` stay open in the child under the same numbers."""
    with open(log, "ab") as handle:
        handle.write(f"\n--- {banner} ---\n".encode())
        handle.flush()
        process = subprocess.Popen(
            [sys.executable, "-m", "bot.ops.cli", *arguments],
            cwd=cwd,  # no .env there: the demo's settings are all in env
            env=dict(env),
            stdin=subprocess.DEVNULL,
            stdout=handle,
            stderr=subprocess.STDOUT,
            start_new_session=True,  # Ctrl-C reaches the demo only, which stops them in order
            pass_fds=tuple(pass_fds),
        )
    return Child(name, process, log)


def first_exited(children: Sequence[Child]) -> tuple[Child, int] | None:
    """The first child that has exited, with its status, if any has."""
    for child in children:
        code = child.process.poll()
        if code is not None:
            return child, code
    return None


def stop_children(children: Sequence[Child], say: Callable[[str], None]) -> None:
    """SIGTERM in reverse order (the worker first: a run that is working finishes its step, RQ's
    warm shutdown), SIGKILL to a group that lingers past ``STOP_TIMEOUT``, then every descendant."""
    for child in children:
        with contextlib.suppress(psutil.Error):
            child.descendants = psutil.Process(child.process.pid).children(recursive=True)
    for child in reversed(children):
        if child.alive():
            child.process.send_signal(signal.SIGTERM)
    deadline = time.monotonic() + STOP_TIMEOUT
    for child in reversed(children):
        try:
            child.process.wait(timeout=max(0.1, deadline - time.monotonic()))
        except subprocess.TimeoutExpired:
            say(f"  chatops {child.name} did not stop within {STOP_TIMEOUT:.0f}s: killing it")
            with contextlib.suppress(ProcessLookupError):
                os.killpg(child.process.pid, signal.SIGKILL)
            child.process.wait()
    for child in children:  # anything a child left behind (a work horse, a web worker process)
        for process in child.descendants:
            with contextlib.suppress(psutil.Error):
                process.kill()


def lock_folder(path: Path) -> IO[str] | None:
    """An exclusive lock on ``path`` holding this process's id, kept while the file stays open;
    None when another process holds it (another demo runs from the same folder)."""
    lock = open(path, "a+")  # noqa: SIM115 - the caller holds it until it stops
    try:
        fcntl.flock(lock, fcntl.LOCK_EX | fcntl.LOCK_NB)
    except OSError:
        lock.close()
        return None
    lock.seek(0)
    lock.truncate()
    lock.write(f"{os.getpid()}\n")
    lock.flush()
    return lock


def tail(path: Path, lines: int) -> str:
    """The last ``lines`` of a log, indented."""
    try:
        text = path.read_text(errors="replace")
    except OSError:
        return "(no log)"
    return "\n".join("    " + line for line in text.splitlines()[-lines:])


def free_port() -> int:
    """A port free now, for a server this process starts itself (another process binding it later
    may find it taken by then: hand that one a ``web_socket()`` instead)."""
    with socket.socket() as sock:
        sock.bind(("127.0.0.1", 0))
        return int(sock.getsockname()[1])


def web_socket() -> socket.socket:
    """A socket bound to a free port of 127.0.0.1, for ``chatops web --fd`` (which listens on it):
    the port is held from the moment it is chosen, so no connection elsewhere on the machine can
    take it while the web process imports (a port chosen here and bound there could be, under
    load), and until the web listens a connection is refused as before, not queued."""
    sock = socket.socket()
    try:
        sock.bind(("127.0.0.1", 0))
    except OSError:
        sock.close()
        raise
    return sock


def http_status(url: str) -> int | None:
    """The status of ``GET url`` (no proxy), None when nothing answers."""
    try:
        with _OPENER.open(url, timeout=2) as response:
            return int(response.status)
    except urllib.error.HTTPError as error:
        return error.code
    except OSError:
        return None


@contextlib.contextmanager
def signals_set(event: threading.Event) -> Iterator[None]:
    """SIGINT / SIGTERM set ``event`` (the demo stops); a second one while stopping is ignored
    (stopping is bounded). The previous handlers are back afterwards."""

    def handle(_signum: int, _frame: FrameType | None) -> None:
        event.set()

    previous: dict[signal.Signals, Callable[[int, FrameType | None], Any] | int | None] = {}
    for signum in (signal.SIGINT, signal.SIGTERM):
        previous[signum] = signal.signal(signum, handle)
    try:
        yield
    finally:
        for signum, handler in previous.items():
            signal.signal(signum, handler if handler is not None else signal.SIG_DFL)
