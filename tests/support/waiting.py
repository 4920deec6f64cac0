"""Polling for what a test waits on: a run's status, a message in the emulator, a file's lines."""

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
