"""The processes a test session started and did not stop: its children, and whatever carries its mark.

A test's servers, workers and runners are children of the pytest process, or grandchildren that
outlive a killed parent (an RQ work horse, a web process's forked workers) and are then adopted by
init. Every process inherits the environment, so the session puts a mark of its own into it
(``MARK``, one value per pytest process: each ``pytest -n`` worker has its own) and at the end looks
for it in every process on the machine, besides its own children (which a test may have started
with an environment of its own).
"""

from __future__ import annotations

import contextlib
import os
import time
import uuid

import psutil

MARK = "PYTEST_CHATOPS_SESSION"  # not CHATOPS_: the bot warns about unknown names of its own
# One value per worker a test starts: RQ's work horse calls setsid() (a session and process group
# of its own) and outlives a SIGKILLed worker, finishing its job and writing to Redis after the
# test's keys were deleted; only the environment it inherited still says whose it is.
FAMILY = "PYTEST_CHATOPS_FAMILY"

# Only a hang is caught by this: a process that is on its way out (SIGTERM sent, not yet reaped)
# is given this long to go before it counts as left behind.
_GRACE_SECONDS = 15.0


def mark_session() -> str:
    """Put this process's mark into the environment its children inherit."""
    token = f"{os.getpid()}-{uuid.uuid4().hex[:8]}"
    os.environ[MARK] = token
    return token


def _alive(process: psutil.Process) -> bool:
    try:
        return process.is_running() and process.status() != psutil.STATUS_ZOMBIE
    except psutil.Error:
        return False


def _marked(process: psutil.Process, token: str) -> bool:
    try:
        return process.environ().get(MARK) == token
    except psutil.Error:
        return False


def _kept_until_exit(process: psutil.Process) -> bool:
    """multiprocessing's resource tracker: started by the first ``spawn`` (a test's racing
    processes) and meant to live until this process exits, when its pipe closes."""
    try:
        return "multiprocessing.resource_tracker" in " ".join(process.cmdline())
    except psutil.Error:
        return False


def leftover_processes(token: str) -> list[psutil.Process]:
    """The live processes other than this one that are its descendants or carry ``token``."""
    me = psutil.Process()
    found = {p.pid: p for p in me.children(recursive=True)}
    for process in psutil.process_iter():
        if process.pid != me.pid and process.pid not in found and _marked(process, token):
            found[process.pid] = process
    return [p for p in found.values() if _alive(p) and not _kept_until_exit(p)]


def describe(process: psutil.Process) -> str:
    try:
        return f"pid {process.pid}: {' '.join(process.cmdline())[:200]}"
    except psutil.Error:
        return f"pid {process.pid}"


def processes_left_behind(token: str) -> list[str]:
    """The processes still alive ``_GRACE_SECONDS`` after the session's end, described; each is killed."""
    deadline = time.monotonic() + _GRACE_SECONDS
    left = leftover_processes(token)
    while left and time.monotonic() < deadline:
        time.sleep(0.2)
        left = [p for p in left if _alive(p)]
    named = [describe(p) for p in left]
    for process in left:
        with contextlib.suppress(psutil.Error):
            process.kill()
    return named


def family_environment(env: dict[str, str]) -> tuple[dict[str, str], str]:
    """``env`` with a mark of its own, for one process whose descendants ``kill_family`` must find
    (a worker's work horses are in sessions of their own, so ``killpg`` misses them)."""
    tag = uuid.uuid4().hex
    return {**env, FAMILY: tag}, tag


def kill_family(tag: str) -> None:
    """SIGKILL every live process carrying ``tag`` (``family_environment``), whatever its session,
    and wait until they are gone."""
    killed = []
    for process in psutil.process_iter():
        with contextlib.suppress(psutil.Error):
            if process.pid != os.getpid() and process.environ().get(FAMILY) == tag:
                process.kill()
                killed.append(process)
    psutil.wait_procs(killed, timeout=10)
