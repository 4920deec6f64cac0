"""A value of this process: made on first use, made afresh in a forked child.

``chatops web`` forks its workers and RQ forks a work horse per job, and what a process made
before the fork does not work in the child: a connection pool would mix two processes' replies on
one socket, a background thread or event loop does not exist there, and a lock that another
thread held at the fork is held forever. ``ForkLocal(factory).get()`` is this process's value:
the first call in a process calls ``factory`` (once, under a lock), and a forked child forgets its
parent's value and lock, so its first call makes its own.
"""

from __future__ import annotations

import os
import threading
import weakref
from collections.abc import Callable
from typing import Any, Generic, TypeVar

T = TypeVar("T")

_all: weakref.WeakSet[ForkLocal[Any]] = weakref.WeakSet()


class ForkLocal(Generic[T]):
    """This process's ``factory()``, made on the first ``get`` in each process."""

    def __init__(self, factory: Callable[[], T]) -> None:
        self._factory = factory
        self._lock = threading.Lock()
        self._made: tuple[T] | None = None
        _all.add(self)

    def get(self) -> T:
        made = self._made
        if made is None:
            with self._lock:
                if self._made is None:
                    self._made = (self._factory(),)
                made = self._made
        return made[0]

    def peek(self) -> T | None:
        """The value if this process made it, without making it (``None``: not made)."""
        made = self._made
        return None if made is None else made[0]

    def _forget(self) -> None:
        self._made = None
        self._lock = threading.Lock()  # never one a thread of the parent held at the fork


def _after_fork_in_child() -> None:
    for local in list(_all):
        local._forget()


os.register_at_fork(after_in_child=_after_fork_in_child)
