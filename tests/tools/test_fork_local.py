"""``ForkLocal``: one value per process, made on first use, made afresh in a forked child.

The children are forked from this process as ``chatops web`` forks its workers and RQ a work
horse (``os.fork``); each reports through a pipe and leaves at once, without pytest's teardown.
"""

from __future__ import annotations

import json
import os
import select
import signal
import threading
from collections.abc import Callable

from tools.fork_local import ForkLocal

STUCK = b"no answer: the child is stuck"


def in_child(job: Callable[[], bytes]) -> bytes:
    """``job()`` in a child forked from this process; its answer (``STUCK`` if it never comes)."""
    read, write = os.pipe()
    pid = os.fork()
    if pid == 0:
        try:
            os.write(write, job())
        finally:
            os._exit(0)
    os.close(write)
    ready: list[int] = []
    try:
        ready, _, _ = select.select([read], [], [], 30)  # a bound on a failure, not a measurement
        return os.read(read, 4096) if ready else STUCK
    finally:
        if not ready:
            os.kill(pid, signal.SIGKILL)
        os.waitpid(pid, 0)
        os.close(read)


def test_a_forked_child_makes_its_own_value_and_the_parent_keeps_its() -> None:
    local = ForkLocal(lambda: (os.getpid(), object()))
    assert local.peek() is None
    parent = local.get()
    assert local.get() is parent and local.peek() is parent

    def child() -> bytes:
        before = local.peek()
        value = local.get()
        return json.dumps([before is None, value[0] == os.getpid(), local.get() is value]).encode()

    assert json.loads(in_child(child)) == [True, True, True]
    assert local.get() is parent


def test_a_lock_another_thread_held_at_the_fork_does_not_hold_the_child() -> None:
    parent_pid = os.getpid()
    entered, release = threading.Event(), threading.Event()

    def make() -> str:
        if os.getpid() != parent_pid:
            return "the child's"
        entered.set()
        release.wait()  # the parent's value is being made, under the lock, while the child forks
        return "the parent's"

    local = ForkLocal(make)
    maker = threading.Thread(target=local.get)
    maker.start()
    try:
        entered.wait()
        assert in_child(lambda: local.get().encode()) == b"the child's"
    finally:
        release.set()
        maker.join()
    assert local.get() == "the parent's"


def test_threads_of_one_process_share_one_value_made_once() -> None:
    made: list[object] = []
    entered, release = threading.Event(), threading.Event()

    def make() -> object:
        entered.set()
        release.wait()
        made.append(object())
        return made[-1]

    local = ForkLocal(make)
    got: list[object] = []
    threads = [threading.Thread(target=lambda: got.append(local.get())) for _ in range(8)]
    for thread in threads:
        thread.start()
    entered.wait()
    release.set()
    for thread in threads:
        thread.join()
    assert len(made) == 1 and got == made * 8
