"""Run a command as an argv list (never through a shell), with a hard timeout.

The command runs in a new session, hence its own process group; at the timeout the whole group
is killed with SIGKILL, so children it started die with it. Output is captured bounded (head and
tail of each stream) so a chatty command cannot exhaust memory.

``CommandRunner`` is the signature catalog tools call a command through: ``run_command`` here,
or ``tools.ssh.SshRunner.run`` for a target reached over SSH; both return the same
``CommandResult`` (and keep output with the same ``BoundedOutput``), so a tool's result reads the
same wherever its command ran.
"""

from __future__ import annotations

import contextlib
import os
import shlex
import signal
import subprocess
import threading
import time
from collections.abc import Mapping, Sequence
from dataclasses import dataclass
from typing import IO, Protocol

from tools.errors import ToolCallError

DEFAULT_MAX_OUTPUT_BYTES = 1024 * 1024
_STDERR_TAIL_LINES = 20
_STDERR_TAIL_CHARS = 2000


@dataclass(frozen=True)
class CommandResult:
    """What a finished (or killed) command left behind."""

    argv: tuple[str, ...]
    returncode: int | None
    """The exit status; negative for a signal; ``None`` when killed at the timeout."""
    stdout: str
    stderr: str
    timed_out: bool
    duration: float
    timeout: float

    @property
    def ok(self) -> bool:
        return not self.timed_out and self.returncode == 0

    @property
    def command_line(self) -> str:
        """The argv quoted for display (it was never given to a shell)."""
        return shlex.join(self.argv)

    def failure_message(self) -> str:
        """Why the command failed, with the tail of its stderr, for an ``Error: ...`` result."""
        if self.timed_out:
            head = (
                f"`{self.command_line}` timed out after {round(self.timeout, 1):g} s; "
                "its process group was killed (the command and its children)"
            )
        elif self.returncode is not None and self.returncode < 0:
            head = f"`{self.command_line}` was killed by {_signal_name(-self.returncode)}"
        else:
            head = f"`{self.command_line}` failed with exit status {self.returncode}"
        tail = stderr_tail(self.stderr)
        if tail:
            return f"{head}\nstderr (last lines):\n{tail}"
        stdout = stderr_tail(self.stdout)
        return f"{head}\noutput (last lines):\n{stdout}" if stdout else head

    def output_text(self) -> str:
        """stdout, followed by stderr when there is any, or ``(no output)``."""
        parts = [self.stdout.rstrip("\n")] if self.stdout.strip() else []
        if self.stderr.strip():
            parts.append(f"stderr:\n{self.stderr.rstrip()}")
        return "\n".join(parts) if parts else "(no output)"


class CommandRunner(Protocol):
    """What runs a catalog tool's argv: ``run_command``, or an ``SshRunner``'s ``run`` for a target."""

    def __call__(
        self,
        argv: Sequence[str],
        *,
        timeout: float,
        env: Mapping[str, str] | None = None,
        cwd: str | None = None,
    ) -> CommandResult: ...


def run_command(
    argv: Sequence[str],
    *,
    timeout: float,
    env: Mapping[str, str] | None = None,
    cwd: str | None = None,
    max_output_bytes: int = DEFAULT_MAX_OUTPUT_BYTES,
) -> CommandResult:
    """Run ``argv`` and wait at most ``timeout`` seconds.

    ``env`` replaces the environment (its ``PATH`` is used to find ``argv[0]``). Raises
    ``ToolCallError`` when the program cannot be started (not found, not executable).
    """
    if not argv:
        raise ToolCallError("empty command")
    started = time.monotonic()
    deadline = started + timeout
    try:
        process = subprocess.Popen(
            list(argv),
            stdin=subprocess.DEVNULL,
            stdout=subprocess.PIPE,
            stderr=subprocess.PIPE,
            env=dict(env) if env is not None else None,
            cwd=cwd,
            start_new_session=True,  # its own process group: the timeout kills children too
            close_fds=True,
        )
    except FileNotFoundError as exc:
        raise ToolCallError(f"command not found: {argv[0]}") from exc
    except PermissionError as exc:
        raise ToolCallError(f"command not executable: {argv[0]}") from exc
    assert process.stdout is not None and process.stderr is not None
    stdout = _Capture(process.stdout, max_output_bytes)
    stderr = _Capture(process.stderr, max_output_bytes)
    timed_out = _wait(process, [stdout, stderr], deadline)
    return CommandResult(
        argv=tuple(argv),
        returncode=None if timed_out else process.returncode,
        stdout=stdout.text(),
        stderr=stderr.text(),
        timed_out=timed_out,
        duration=time.monotonic() - started,
        timeout=timeout,
    )


def _wait(process: subprocess.Popen[bytes], captures: list[_Capture], deadline: float) -> bool:
    """Wait for exit and for both pipes to close; kill the group at the deadline. True if killed."""
    timed_out = False
    try:
        process.wait(timeout=max(0.0, deadline - time.monotonic()))
    except subprocess.TimeoutExpired:
        timed_out = True
        _kill_group(process)
    for capture in captures:
        # A child that outlives the leader may hold the pipe open; it counts against the timeout.
        capture.join(max(0.0, deadline - time.monotonic()))
        if capture.alive:
            timed_out = True
            _kill_group(process)
            capture.join(2.0)
    process.wait()
    return timed_out


def _kill_group(process: subprocess.Popen[bytes]) -> None:
    with contextlib.suppress(ProcessLookupError, PermissionError):  # the group is already gone
        os.killpg(process.pid, signal.SIGKILL)
    with contextlib.suppress(subprocess.TimeoutExpired):  # SIGKILL cannot be ignored; be safe anyway
        process.wait(timeout=5)


class BoundedOutput:
    """One output stream, keeping its first and last ``limit / 2`` bytes (and how many were dropped)."""

    def __init__(self, limit: int = DEFAULT_MAX_OUTPUT_BYTES) -> None:
        self._head_limit = limit // 2
        self._tail_limit = limit - self._head_limit
        self._head = bytearray()
        self._tail = bytearray()
        self._dropped = 0

    def keep(self, chunk: bytes) -> None:
        room = self._head_limit - len(self._head)
        if room > 0:
            self._head += chunk[:room]
            chunk = chunk[room:]
        self._tail += chunk
        excess = len(self._tail) - self._tail_limit
        if excess > 0:
            del self._tail[:excess]
            self._dropped += excess

    def text(self) -> str:
        head = self._head.decode("utf-8", errors="replace")
        tail = self._tail.decode("utf-8", errors="replace")
        if self._dropped:
            return f"{head}\n[... {self._dropped} bytes of output not kept ...]\n{tail}"
        return head + tail


class _Capture:
    """Reads one pipe in a thread into a ``BoundedOutput``."""

    def __init__(self, stream: IO[bytes], limit: int) -> None:
        self._stream = stream
        self._output = BoundedOutput(limit)
        self._thread = threading.Thread(target=self._read, daemon=True)
        self._thread.start()

    @property
    def alive(self) -> bool:
        return self._thread.is_alive()

    def join(self, timeout: float) -> None:
        self._thread.join(timeout)

    def text(self) -> str:
        return self._output.text()

    def _read(self) -> None:
        try:
            while chunk := os.read(self._stream.fileno(), 65536):
                self._output.keep(chunk)
        except OSError:
            pass  # the pipe broke: keep what we have
        finally:
            self._stream.close()


def stderr_tail(text: str, lines: int = _STDERR_TAIL_LINES, chars: int = _STDERR_TAIL_CHARS) -> str:
    """The last few lines of a stream, for failure messages."""
    kept = "\n".join(text.rstrip().splitlines()[-lines:])
    return kept[-chars:]


def _signal_name(number: int) -> str:
    try:
        return signal.Signals(number).name
    except ValueError:
        return f"signal {number}"
