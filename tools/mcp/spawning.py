"""A fork waits while the MCP bridge's loop creates a server process.

``subprocess.Popen``, which asyncio uses to start a stdio server, opens a pipe through which the
child reports a failed ``exec``, and reads it until every copy of its write end is closed. A process
forked by another thread in that window, and that does not ``exec`` (RQ's work horse, a
``multiprocessing`` fork), keeps a copy for its whole life: the ``Popen``, and with it the bridge's
event loop and every MCP session of the process, waits until that child exits. In a worker that
is a restart of a crashed server stalled for as long as the job of the horse forked at that moment
(seen in the suite: a shared server's restart stalled for the 60 s the next horse waited on it).

So ``os.fork`` waits (a ``register_at_fork`` hook) while the loop creates a process: milliseconds.
Only forks wait; threads that start processes themselves (``Popen`` execs at once) are not affected.
"""

from __future__ import annotations

import asyncio
import os
import threading
from typing import Any

# Reentrant: two servers starting at once on the one loop thread both hold it.
_creating = threading.RLock()


class SpawnGuardedLoop(asyncio.SelectorEventLoop):
    """The bridge's event loop: a subprocess is created while no ``os.fork`` can happen."""

    async def _make_subprocess_transport(self, *args: Any, **kwargs: Any) -> Any:
        with _creating:  # until its pipes are connected; no await in it waits on another thread
            return await super()._make_subprocess_transport(*args, **kwargs)  # type: ignore[misc]


def _before_fork() -> None:
    _creating.acquire()


def _after_fork_in_parent() -> None:
    _creating.release()


def _after_fork_in_child() -> None:
    global _creating
    _creating = threading.RLock()  # the child has only the forking thread: a fresh, free lock


os.register_at_fork(
    before=_before_fork, after_in_parent=_after_fork_in_parent, after_in_child=_after_fork_in_child
)


def creating_process() -> threading.RLock:
    """The lock a process creation holds (what a fork waits for)."""
    return _creating
