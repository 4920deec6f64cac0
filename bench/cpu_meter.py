"""CPU seconds used by a benchmark's processes: a process tree (reaped children included), or Redis."""

from __future__ import annotations

import contextlib
from typing import Any

import psutil


class CpuMeter:
    """CPU seconds used so far by a process tree (reaped children included), or by Redis."""

    def __init__(self, pid: int | None = None, redis_client: Any = None, *, tree: bool = True) -> None:
        self._process = psutil.Process(pid) if pid is not None else None
        self._redis = redis_client
        self._tree = tree

    def read(self) -> float:
        if self._redis is not None:
            info = self._redis.info("cpu")
            return float(info["used_cpu_user"]) + float(info["used_cpu_sys"])
        assert self._process is not None
        if not self._tree:  # this process alone (its children are the servers, metered apart)
            times = self._process.cpu_times()
            return float(times.user + times.system)
        total = 0.0
        for process in [self._process, *self._process.children(recursive=True)]:
            with contextlib.suppress(psutil.Error):
                times = process.cpu_times()
                total += times.user + times.system + times.children_user + times.children_system
        return total
