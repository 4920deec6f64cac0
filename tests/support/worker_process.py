"""``WorkerProcess``: a real ``chatops worker`` subprocess of one test, and how to kill its horses."""

from __future__ import annotations

import contextlib
import os
import signal
import subprocess
from dataclasses import dataclass
from pathlib import Path

from tests.support.leftover_processes import kill_family

ROOT = Path(__file__).resolve().parents[2]


@dataclass
class WorkerProcess:
    """A real ``chatops worker`` subprocess (forking RQ worker, scheduler on) in its own process group."""

    proc: subprocess.Popen[bytes]
    log: Path
    family: str  # its environment's mark (``family_environment``): its work horses carry it too

    def kill(self) -> None:
        """SIGKILL the worker, its scheduler and its work horses (which have sessions of their own):
        the machine is gone."""
        with contextlib.suppress(ProcessLookupError):
            os.killpg(self.proc.pid, signal.SIGKILL)
        kill_family(self.family)
        self.proc.wait(timeout=10)

    def output(self) -> str:
        return self.log.read_text(errors="replace")
