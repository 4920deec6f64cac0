"""One command on an SSH channel: the string sent to sshd, its output, its exit status.

``tools.ssh.SshRunner`` opens the channel and kills at the timeout; this module is what runs on
the channel. The command sent is::

    printf '%s%s\\n' MARKER "$$"; [cd -- DIR &&] shlex.join(argv); exit $?

* The pid line comes first: ``$$`` is the login shell, which sshd started in a new session,
  hence its own process group; the runner kills that group at the timeout. The marker is random
  per call and printed before the command starts, so the command cannot forge it; it is cut out
  of stdout, and anything a login script printed before it is kept.
* ``shlex.join`` quotes every element for the (POSIX) login shell: a value stays one argument.
* ``; exit $?`` keeps the shell as the command's parent (a shell may ``exec`` a last command, and
  paramiko reads no ``exit-signal``), so an exit status always arrives; a signal reads as 128+N,
  as in any shell, and is reported as ``run_command`` reports it (negative).
"""

from __future__ import annotations

import re
import secrets
import shlex
import signal
import threading
import time
from collections.abc import Callable, Sequence
from typing import Protocol

import paramiko

from tools.process import BoundedOutput

_MAX_PREAMBLE_BYTES = 64 * 1024  # output a login script prints before the pid line (kept)
_MAX_SIGNAL = 64


def new_marker() -> str:
    """A pid-line marker no command can guess."""
    return f"__chatops_pid_{secrets.token_hex(8)}:"


def remote_command(argv: Sequence[str], cwd: str | None, marker: str) -> str:
    """The one string sent to sshd (see the module docstring)."""
    command = shlex.join(argv)
    if cwd is not None:
        command = f"cd -- {shlex.quote(cwd)} && {command}"
    return f"printf '%s%s\\n' {shlex.quote(marker)} \"$$\"; {command}; exit $?"


class Channel(Protocol):
    """What ``ChannelOutput`` uses of a ``paramiko.Channel``."""

    status_event: threading.Event

    def recv(self, nbytes: int) -> bytes: ...

    def recv_stderr(self, nbytes: int) -> bytes: ...


class ChannelOutput:
    """Reads a channel's stdout and stderr in two threads; takes the pid line out of stdout."""

    def __init__(self, channel: Channel, marker: bytes, limit: int) -> None:
        self.stdout = BoundedOutput(limit)
        self.stderr = BoundedOutput(limit)
        self._pid_line = _PidLine(marker)
        self._threads = [
            threading.Thread(target=self._pump, args=(channel.recv, self._keep_stdout, self._end_stdout)),
            threading.Thread(target=self._pump, args=(channel.recv_stderr, self.stderr.keep, None)),
        ]
        for thread in self._threads:
            thread.daemon = True

    def start(self) -> None:
        for thread in self._threads:
            thread.start()

    def wait(self, channel: Channel, deadline: float) -> bool:
        """True when both streams ended and the exit status arrived before the deadline."""
        # A child that outlives the command may hold the streams open; it counts against the timeout.
        for thread in self._threads:
            thread.join(remaining(deadline))
        if any(thread.is_alive() for thread in self._threads):
            return False
        return channel.status_event.wait(remaining(deadline))

    def join(self, timeout: float) -> None:
        for thread in self._threads:
            thread.join(timeout)

    def pid(self, grace: float) -> int | None:
        self._pid_line.seen.wait(grace)
        return self._pid_line.pid

    def _keep_stdout(self, chunk: bytes) -> None:
        self.stdout.keep(self._pid_line.feed(chunk))

    def _end_stdout(self) -> None:
        self.stdout.keep(self._pid_line.flush())

    @staticmethod
    def _pump(
        receive: Callable[[int], bytes], keep: Callable[[bytes], None], end: Callable[[], None] | None
    ) -> None:
        try:
            while chunk := receive(65536):
                keep(chunk)
        except (OSError, EOFError, paramiko.SSHException):
            pass  # the connection broke: keep what we have
        finally:
            if end is not None:
                end()


class _PidLine:
    """Finds the ``<marker><pid>`` line at the start of stdout and cuts it out."""

    def __init__(self, marker: bytes) -> None:
        self._pattern = re.compile(re.escape(marker) + rb"(\d+)\n")
        self._pending = bytearray()
        self._done = False
        self.pid: int | None = None
        self.seen = threading.Event()

    def feed(self, chunk: bytes) -> bytes:
        if self._done:
            return chunk
        self._pending += chunk
        match = self._pattern.search(self._pending)
        if match is not None:
            self.pid = int(match.group(1))
            del self._pending[match.start() : match.end()]
            return self.flush()
        return self.flush() if len(self._pending) > _MAX_PREAMBLE_BYTES else b""

    def flush(self) -> bytes:
        """Everything held back; from now on output passes through."""
        self._done = True
        self.seen.set()
        held, self._pending = bytes(self._pending), bytearray()
        return held


def shell_returncode(status: int) -> int:
    """The shell's status, with 128+N read as signal N (negative), as ``run_command`` reports it."""
    number = status - 128
    if 0 < number <= _MAX_SIGNAL:
        try:
            signal.Signals(number)
        except ValueError:
            return status
        return -number
    return status


def remaining(deadline: float) -> float:
    return max(0.0, deadline - time.monotonic())
