"""The web process's supervisor: one listening socket, ``WEB_WORKERS`` forked children serving it.

The parent binds the socket, forks the children (each builds its app after the fork, so no Redis
connection or thread crosses it) and then only supervises: a child that dies is replaced (with a
growing pause if children keep dying young), a child that cannot build its app stops the whole
process (a configuration error does not get better by retrying it), and SIGTERM or SIGINT is
passed on to every child, which stops accepting and finishes its requests under way; a child still
alive ``graceful_timeout`` + 5 s later is killed. Signals reach the loop through a wake-up pipe
(``signal.set_wakeup_fd``), so the parent never polls.
"""

from __future__ import annotations

import asyncio
import contextlib
import dataclasses
import logging
import os
import resource
import select
import signal
import socket
import sys
import time
from collections.abc import Callable
from typing import Any

from bot.web.http_server import HttpServer, Limits
from bot.web.wsgi import WsgiApp

log = logging.getLogger(__name__)

BOOT_FAILED = 3  # a child's exit status when its app could not be built
BACKLOG = 2048  # connections the kernel queues while every child is busy accepting
YOUNG = 5.0  # a child that dies sooner than this after its start counts as a crash loop
STOPS = (signal.SIGTERM, signal.SIGINT)
SPARE_FILES = 128  # open files a web process needs besides its connections

# The pid of the supervisor that forked this process, set in the child right after the fork: read
# later (after the app is built), ``os.getppid()`` may already name init if the supervisor died
# in between, and the orphan would never notice.
_forked_by: int | None = None


def listen(host: str, port: int) -> socket.socket:
    family = socket.AF_INET6 if ":" in host else socket.AF_INET
    sock = socket.socket(family, socket.SOCK_STREAM)
    sock.setsockopt(socket.SOL_SOCKET, socket.SO_REUSEADDR, 1)
    sock.bind((host, port))
    sock.listen(BACKLOG)
    sock.setblocking(False)
    return sock


def inherited(fd: int) -> socket.socket:
    """The TCP socket a supervisor bound and handed down as file descriptor ``fd``, listening
    (systemd socket activation passes fd 3, already listening; the demo and the tests pass one that
    is only bound, so connections are refused, not queued, until this process can serve them).
    A port chosen by one process and bound by another leaves a window in which any connection on the
    machine can take that port as its own; a socket bound by the parent has none. ``ValueError``
    when ``fd`` is not a bound TCP socket (the descriptor is then left as it was)."""
    try:
        sock = socket.socket(fileno=fd)
    except OSError as error:
        raise ValueError(f"file descriptor {fd} is not an open socket ({error.strerror})") from None
    if (
        sock.family not in (socket.AF_INET, socket.AF_INET6)
        or sock.type != socket.SOCK_STREAM
        or sock.getsockname()[1] == 0
    ):
        sock.detach()  # not ours to close
        raise ValueError(f"file descriptor {fd} is a socket, but not a TCP socket bound to a port")
    sock.listen(BACKLOG)
    sock.setblocking(False)
    return sock


class Supervisor:
    """``Supervisor(workers, child, graceful_timeout).run()``: ``child()`` runs in each forked child
    and returns its exit status."""

    def __init__(self, workers: int, child: Callable[[], int], graceful_timeout: float) -> None:
        self.workers = workers
        self.child = child
        self.graceful_timeout = graceful_timeout
        self._children: dict[int, float] = {}  # pid -> when it started
        self._pid = os.getpid()
        self._young_deaths = 0

    def run(self) -> int:
        wake_read, wake_write = os.pipe()
        os.set_blocking(wake_read, False)
        os.set_blocking(wake_write, False)
        previous = {sig: signal.signal(sig, _noted) for sig in (*STOPS, signal.SIGCHLD)}
        signal.set_wakeup_fd(wake_write)
        try:
            for _ in range(self.workers):
                self._spawn(wake_read, wake_write)
            status = self._supervise(wake_read, wake_write)
        finally:
            if os.getpid() == self._pid:  # a child leaves through sys.exit, never through here
                signal.set_wakeup_fd(-1)
                for sig, handler in previous.items():
                    signal.signal(sig, handler)
                os.close(wake_read)
                os.close(wake_write)
        return status

    def _supervise(self, wake_read: int, wake_write: int) -> int:
        stopping_since: float | None = None
        status = 0
        while True:
            timeout = None if stopping_since is None else 1.0
            with contextlib.suppress(InterruptedError):
                select.select([wake_read], [], [], timeout)
            signals = _drain(wake_read)
            if stopping_since is None and any(sig in signals for sig in STOPS):
                log.info("stopping: letting %d web worker(s) finish their requests", len(self._children))
                stopping_since = time.monotonic()
                self._signal_all(signal.SIGTERM)
            for pid, code in _reaped():
                started = self._children.pop(pid, time.monotonic())
                if stopping_since is not None:
                    continue
                if code == BOOT_FAILED:
                    log.error("a web worker could not build the app: stopping")
                    status, stopping_since = 1, time.monotonic()
                    self._signal_all(signal.SIGTERM)
                    continue
                self._young_deaths = self._young_deaths + 1 if time.monotonic() - started < YOUNG else 0
                pause = min(0.1 * 2**self._young_deaths, 10.0) if self._young_deaths else 0.0
                log.error("web worker %d exited with %s; starting another in %.1f s", pid, code, pause)
                time.sleep(pause)
                self._spawn(wake_read, wake_write)
            if stopping_since is not None:
                if not self._children:
                    return status
                if time.monotonic() - stopping_since > self.graceful_timeout + 5:
                    log.error("killing %d web worker(s) still running", len(self._children))
                    self._signal_all(signal.SIGKILL)

    def _spawn(self, wake_read: int, wake_write: int) -> None:
        pid = os.fork()
        if pid:
            self._children[pid] = time.monotonic()
            return
        # The child: the parent's wake-up pipe and handlers are not its own.
        global _forked_by
        _forked_by = self._pid
        signal.set_wakeup_fd(-1)
        os.close(wake_read)
        os.close(wake_write)
        for sig in (*STOPS, signal.SIGCHLD):
            signal.signal(sig, signal.SIG_DFL)
        try:
            code = self.child()
        except BaseException:
            log.exception("a web worker failed")
            code = 1
        # Leave through the interpreter's normal exit (thread pools finish, logs flush), unwinding
        # the parent's frames above without running their cleanup (``run`` checks the pid).
        sys.exit(code)

    def _signal_all(self, sig: int) -> None:
        for pid in list(self._children):
            with contextlib.suppress(ProcessLookupError):
                os.kill(pid, sig)


def _noted(signum: int, frame: object) -> None:
    """The signal number reaches the loop through the wake-up pipe; nothing to do here."""


def _drain(fd: int) -> set[int]:
    seen: set[int] = set()
    with contextlib.suppress(BlockingIOError):
        while chunk := os.read(fd, 512):
            seen.update(chunk)
    return seen


def _reaped() -> list[tuple[int, int]]:
    """``(pid, exit status or -signal)`` of every child that has ended, without waiting."""
    ended: list[tuple[int, int]] = []
    while True:
        try:
            pid, status = os.waitpid(-1, os.WNOHANG)
        except ChildProcessError:
            return ended
        if pid == 0:
            return ended
        ended.append((pid, os.waitstatus_to_exitcode(status)))


def run_worker(sock: Any, app: WsgiApp, limits: Limits, threads: int, *, multiprocess: bool) -> int:
    """Serve ``app`` on ``sock`` in this process until SIGTERM or SIGINT; returns the exit status."""
    limits = within_open_files(limits)

    async def main() -> None:
        stopping = asyncio.Event()
        loop = asyncio.get_running_loop()
        for sig in (signal.SIGTERM, signal.SIGINT):
            loop.add_signal_handler(sig, stopping.set)
        orphaned = asyncio.create_task(_stop_when_orphaned(stopping))
        await HttpServer(app, limits, threads, multiprocess=multiprocess).serve(sock, stopping)
        orphaned.cancel()

    asyncio.run(main())
    return 0


async def _stop_when_orphaned(stopping: asyncio.Event) -> None:
    """A forked worker whose supervisor died (killed with SIGKILL, say) stops rather than keep the port."""
    parent = _forked_by if _forked_by is not None else os.getppid()
    while not stopping.is_set():
        if os.getppid() != parent:
            log.warning("the web supervisor is gone: stopping")
            stopping.set()
            return
        await asyncio.sleep(1.0)


def within_open_files(limits: Limits) -> Limits:
    """Raise the soft limit on open files to fit ``max_connections`` (plus Redis, Slack and log
    files); where the hard limit does not allow it, serve fewer connections and say so."""
    needed = limits.max_connections + SPARE_FILES
    soft, hard = resource.getrlimit(resource.RLIMIT_NOFILE)
    if soft != resource.RLIM_INFINITY and soft < needed:
        target = needed if hard == resource.RLIM_INFINITY else min(needed, hard)
        with contextlib.suppress(ValueError, OSError):
            resource.setrlimit(resource.RLIMIT_NOFILE, (target, hard))
            soft = target
    if soft != resource.RLIM_INFINITY and soft < needed:
        fitting = max(soft - SPARE_FILES, 16)
        log.warning(
            "open files are limited to %d: serving at most %d connections instead of WEB_MAX_CONNECTIONS=%d",
            soft,
            fitting,
            limits.max_connections,
        )
        return dataclasses.replace(limits, max_connections=fitting)
    return limits
