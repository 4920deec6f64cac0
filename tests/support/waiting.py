"""Polling for what a test waits on: a run's status, a message in the emulator, a file's lines.

Every bound here is for a hang only: a test's verdict never depends on how fast the machine is.
"""

from __future__ import annotations

import time
from collections.abc import Callable
from typing import TypeVar

T = TypeVar("T")


def wait_for(probe: Callable[[], T | None], timeout: float = 30.0, what: str = "condition") -> T:
    """``probe()``'s first truthy value, polled every 50 ms; an ``AssertionError`` naming ``what``
    after ``timeout`` seconds."""
    deadline = time.monotonic() + timeout
    while True:
        value = probe()
        if value:
            return value
        if time.monotonic() > deadline:
            raise AssertionError(f"timed out after {timeout}s waiting for {what}")
        time.sleep(0.05)


def wait_until(predicate: Callable[[], object], timeout: float = 30.0, what: str = "condition") -> None:
    """``wait_for`` for a predicate whose value does not matter."""
    wait_for(lambda: bool(predicate()), timeout, what)


def wait_for_progress(count: Callable[[], int], total: int, stall: float = 120.0, what: str = "work") -> None:
    """Wait until ``count()`` reaches ``total``; fail only when it has not grown for ``stall`` seconds.

    For bulk work (hundreds of runs) whose duration scales with the machine's load: a fixed bound
    would either be huge or fail on a busy machine, while no progress at all is what a hang looks like.
    """
    best, since = -1, time.monotonic()
    while True:
        done = count()
        if done >= total:
            return
        if done > best:
            best, since = done, time.monotonic()
        elif time.monotonic() - since > stall:
            raise AssertionError(f"{what}: stuck at {done} of {total} for {stall}s")
        time.sleep(0.2)
