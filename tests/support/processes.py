"""Stopping the servers the tests start as processes of their own (Prometheus, sshd, Redis)."""

from __future__ import annotations

import subprocess
from typing import Any


def stop_process(process: subprocess.Popen[Any], timeout: float) -> None:
    """SIGTERM (the server flushes and exits), SIGKILL if it takes longer than ``timeout`` seconds."""
    if process.poll() is not None:
        return
    process.terminate()
    try:
        process.wait(timeout=timeout)
    except subprocess.TimeoutExpired:
        process.kill()
        process.wait()
