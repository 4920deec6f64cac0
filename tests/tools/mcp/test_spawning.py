"""A fork waits while the MCP bridge's loop creates a server process (``tools.mcp.spawning``).

Without it, a child forked (without ``exec``) while ``Popen`` waits on its exec-status pipe keeps a
copy of the pipe, and the bridge's loop, every MCP session of the process with it, waits until that
child exits: a worker's shared server restarted while RQ forked a horse stalled for the 60 s the
horse waited on it (tests/tools/mcp/test_sharing.py, seen once under two busy loops).
"""

from __future__ import annotations

import asyncio
import os
import threading
from collections.abc import Iterator

import pytest

from tools.mcp.bridge import Bridge
from tools.mcp.spawning import creating_process

SPAWNS = 40
CHILDREN = 400  # at most (about 180 while 40 processes are created on an idle 2-core machine)


@pytest.fixture
def bridge() -> Iterator[Bridge]:
    made = Bridge(name="test-spawning")
    yield made
    made.close()


class LingeringForks:
    """A thread forking children that live (holding whatever they inherited) until ``release``."""

    def __init__(self) -> None:
        self._read, self._write = os.pipe()
        self.pids: list[int] = []
        self.stop = threading.Event()
        self.thread = threading.Thread(target=self._fork_until_stopped, daemon=True)

    def _fork_until_stopped(self) -> None:
        while not self.stop.is_set() and len(self.pids) < CHILDREN:
            pid = os.fork()
            if pid == 0:  # the child: wait until released, as a work horse lives through its job
                os.close(self._write)
                os.read(self._read, 1)
                os._exit(0)
            self.pids.append(pid)

    def release(self) -> None:
        self.stop.set()
        self.thread.join()
        os.close(self._write)  # every child reads EOF and exits
        os.close(self._read)
        for pid in self.pids:
            os.waitpid(pid, 0)


def test_a_fork_waits_until_the_process_being_created_is_created() -> None:
    about_to_fork, forked = threading.Event(), threading.Event()
    pids: list[int] = []

    def fork() -> None:
        about_to_fork.set()
        pid = os.fork()
        if pid == 0:
            os._exit(0)
        pids.append(pid)
        forked.set()

    thread = threading.Thread(target=fork)
    with creating_process():
        thread.start()
        assert about_to_fork.wait(60)
        assert not forked.wait(0.5)  # the creation is under way: the fork waits
    assert forked.wait(60)
    thread.join()
    os.waitpid(pids[0], 0)


def test_processes_are_created_while_children_forked_meanwhile_live_on(bridge: Bridge) -> None:
    """Children forked all along (each living until the end) never hold a creation up."""

    async def create() -> int:
        process = await asyncio.create_subprocess_exec("true")
        return await process.wait()

    forks = LingeringForks()
    forks.thread.start()
    try:
        for _ in range(SPAWNS):
            assert bridge.run(create(), timeout=60) == 0  # a stalled creation ends in TimeoutError
    finally:
        forks.release()
    assert forks.pids  # forks did happen meanwhile
