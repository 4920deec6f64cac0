"""The worker's CPU priority: below the web process's, whatever starts it.

On one machine a burst of mentions is a race for the CPU between the web process (which must
answer Slack within 3 s, and should within milliseconds) and the workers (which turn the mentions
into runs as fast as the CPU allows). Left equal, the workers win the race by number and the
acknowledgements wait (docs/BENCHMARKS.md, "Mention burst"). So ``chatops worker`` lowers its own
priority when it starts (``CHATOPS_WORKER_NICE``, default ``WORKER_NICE``): every launcher gets it,
the Procfile's as much as systemd's, and so do the work horses RQ forks and the programs they run.

Two things decide who gets the CPU on Linux, and a nice value is only the second:

- **Control groups.** A process in a cgroup of its own with the ``cpu`` controller (a container,
  a Kubernetes pod, a systemd service once any unit sets ``CPUWeight=``) competes with other groups
  by the group's weight; its nice value only ranks it inside its group. The deployment files set
  those weights (docs/DEPLOY.md, "CPU priority").
- **Autogroup** (``/proc/sys/kernel/sched_autogroup_enabled`` = 1, the default of most desktop and
  many server kernels): outside such cgroups the kernel groups processes by session, and groups
  compete at their own nice value (``/proc/<pid>/autogroup``). A worker with a session of its own
  (a Procfile runner such as honcho runs each line as ``sh -c LINE`` in a new session; a terminal)
  must lower its group to be below a web process in another session. The group is lowered only when no other
  process shares it but this one's own ancestors (the shell of a ``sh -c`` line, the terminal's
  shell, which wait), never when a sibling such as a web process started by the same runner is in
  it (``foreman`` keeps all its lines in its own session): there the nice value already ranks the
  worker below it.

Only ever lowered: a worker already started at a lower priority (``nice -n 19 chatops worker``,
systemd's ``Nice=``) keeps it; raising it would need ``CAP_SYS_NICE``.
"""

from __future__ import annotations

import logging
import os
import random
import time
from collections.abc import Iterable
from dataclasses import dataclass
from pathlib import Path
from typing import Final

from bot.settings import MAX_NICE, WORKER_NICE

log = logging.getLogger(__name__)

__all__ = ["MAX_NICE", "WORKER_NICE", "PriorityChange", "lower_priority", "parse_stat"]
PROC: Final = Path("/proc")
AUTOGROUP_RETRY_SECONDS: Final = 5.0


@dataclass(frozen=True)
class PriorityChange:
    """What ``lower_priority`` found and did; ``None``: not there to change (no autogroup)."""

    nice_before: int
    nice_after: int
    group_before: int | None
    group_after: int | None
    group_shared: bool  # the session holds processes other than this one and its ancestors

    def describe(self) -> str:
        text = f"nice {self.nice_after}" + (
            f" (was {self.nice_before})" if self.nice_after != self.nice_before else ""
        )
        if self.group_before is None:
            return text
        if self.group_shared:
            return f"{text}; scheduling group (autogroup, nice {self.group_before}) shared, left alone"
        changed = f" (was {self.group_before})" if self.group_after != self.group_before else ""
        return f"{text}; scheduling group (autogroup) nice {self.group_after}{changed}"


def lower_priority(nice: int, proc: Path = PROC) -> PriorityChange:
    """Lower this process to ``nice`` (0-19) and, where autogroup applies and the session is this
    process's alone, its scheduling group too. Call it before the process starts threads: on Linux
    a nice value belongs to the thread that sets it, and new threads and forks inherit it."""
    if not 0 <= nice <= MAX_NICE:
        raise ValueError(f"a nice value to lower to is 0-{MAX_NICE}, got {nice}")
    before = os.getpriority(os.PRIO_PROCESS, 0)
    after = before
    if before < nice:
        try:
            os.setpriority(os.PRIO_PROCESS, 0, nice)
            after = nice
        except OSError as error:  # a sandbox that forbids it: run, at the priority given
            log.warning("could not lower the worker's priority to nice %d: %s", nice, error)
    group = _autogroup_nice(proc)
    if group is None:
        return PriorityChange(before, after, None, None, False)
    shared = not _session_is_ours(proc)
    group_after = group
    if not shared and group < nice:
        try:
            _set_autogroup(proc, nice)
            group_after = nice
        except OSError as error:
            log.warning("could not lower the worker's scheduling group to nice %d: %s", nice, error)
    return PriorityChange(before, after, group, group_after, shared)


def _set_autogroup(proc: Path, nice: int) -> None:
    """Write the autogroup's nice value. Without ``CAP_SYS_ADMIN`` the kernel takes one such write
    a tenth of a second, machine-wide, and answers ``EAGAIN`` meanwhile: workers started together
    (``chatops-worker@{1..4}``) take turns, a little apart so they do not retry in step."""
    deadline = time.monotonic() + AUTOGROUP_RETRY_SECONDS
    while True:
        descriptor = os.open(proc / "self" / "autogroup", os.O_WRONLY)
        try:
            os.write(descriptor, str(nice).encode())
            return
        except BlockingIOError:  # EAGAIN
            if time.monotonic() > deadline:
                raise
        finally:
            os.close(descriptor)
        time.sleep(0.1 + random.uniform(0, 0.05))


def _autogroup_nice(proc: Path) -> int | None:
    """The nice value of this process's autogroup, or ``None`` when the kernel has none in use."""
    try:
        if (proc / "sys" / "kernel" / "sched_autogroup_enabled").read_text().strip() != "1":
            return None
        # "/autogroup-42 nice 0"
        return int((proc / "self" / "autogroup").read_text().split()[-1])
    except (OSError, ValueError, IndexError):
        return None


def parse_stat(text: str) -> tuple[int, int]:
    """(parent pid, session id) from a ``/proc/<pid>/stat`` line. The command name in parentheses
    is the process's own choice and may hold spaces and parentheses: fields are counted from the
    last ``)``."""
    _, paren, rest = text.rpartition(")")
    fields = rest.split()
    if not paren or len(fields) < 4:
        raise ValueError(f"not a /proc/<pid>/stat line: {text[:80]!r}")
    # after the name: state, ppid, pgrp, session
    return int(fields[1]), int(fields[3])


def _session_is_ours(proc: Path) -> bool:
    """Whether every process in this process's session is this one or one of its ancestors."""
    me = os.getpid()
    session = os.getsid(0)
    parents: dict[int, int] = {}
    members: list[int] = []
    for pid, text in _stats(proc):
        try:
            parent, sid = parse_stat(text)
        except ValueError:
            continue
        parents[pid] = parent
        if sid == session:
            members.append(pid)
    ancestors = set()
    pid = parents.get(me, 0)
    while pid > 0 and pid not in ancestors:  # a cycle cannot happen; a vanished parent ends it
        ancestors.add(pid)
        pid = parents.get(pid, 0)
    return all(pid == me or pid in ancestors for pid in members)


def _stats(proc: Path) -> Iterable[tuple[int, str]]:
    for entry in proc.iterdir():
        if not entry.name.isdigit():
            continue
        try:
            yield int(entry.name), (entry / "stat").read_text(errors="replace")
        except OSError:  # it exited meanwhile, or /proc hides it (hidepid)
            continue
