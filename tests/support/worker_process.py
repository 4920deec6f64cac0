"""``WorkerProcess``: a real ``chatops worker`` subprocess of one test, and how to kill its horses."""

from __future__ import annotations

import contextlib
import os
import signal
import subprocess
from dataclasses import dataclass
from pathlib import Path

ROOT = Path(__file__).resolve().parents[2]


@dataclass
class WorkerProcess:
    """A real ``chatops worker`` subprocess (forking RQ worker, scheduler on) in its own process group."""

    proc: subprocess.Popen[bytes]
    log: Path

    def kill(self) -> None:
        """SIGKILL the worker and its scheduler (the work horse has a process group of its own)."""
        with contextlib.suppress(ProcessLookupError):
            os.killpg(self.proc.pid, signal.SIGKILL)
        self.proc.wait(timeout=10)

    def output(self) -> str:
        return self.log.read_text(errors="replace")


def kill_if_ours(pid: int, marker: str) -> None:
    """SIGKILL ``pid`` only if it is still one of this test's worker processes (pids get reused)."""
    try:
        cmdline = Path(f"/proc/{pid}/cmdline").read_bytes().decode(errors="replace")
    except OSError:
        return
    if marker in cmdline:
        with contextlib.suppress(ProcessLookupError):
            os.kill(pid, signal.SIGKILL)
