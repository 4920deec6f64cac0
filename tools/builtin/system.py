"""Host health at a glance: disk usage, CPU and load, memory, top processes (psutil)."""

from __future__ import annotations

import os
import time
from typing import Any, Literal

import psutil
from pydantic import BaseModel, ConfigDict, Field

from agent.tooling import ToolCategory
from tools.base import FunctionTool, ToolContext, tool
from tools.errors import ToolCallError
from tools.placement import HOST
from tools.text import human_bytes, human_duration, shorten, table

_ALMOST_FULL_PERCENT = 90.0


class _Args(BaseModel):
    model_config = ConfigDict(extra="forbid")


class DiskUsageArgs(_Args):
    path: str | None = Field(
        default=None, description="Show the filesystem holding this path; default: every mounted disk."
    )


class NoArgs(_Args):
    pass


class CpuArgs(_Args):
    sample_seconds: float = Field(default=1.0, ge=0.1, le=10, description="How long to measure CPU use.")


class TopProcessesArgs(_Args):
    sort_by: Literal["cpu", "memory"] = Field(default="cpu", description="Rank by CPU or by memory.")
    limit: int = Field(default=10, ge=1, le=50, description="How many processes to list.")


@tool(category=ToolCategory.READ_ONLY, parallel=True, timeout=10, placement=HOST)
def disk_usage(args: DiskUsageArgs, ctx: ToolContext) -> str:
    """Disk space and inode use per mounted filesystem, or of the filesystem holding one path."""
    if args.path:
        return _disk_usage_of_path(args.path)
    rows = []
    warnings = []
    seen: set[str] = set()
    for partition in psutil.disk_partitions(all=False):
        if partition.mountpoint in seen or ctx.expired():
            continue
        seen.add(partition.mountpoint)
        try:
            usage = psutil.disk_usage(partition.mountpoint)
        except OSError:
            continue  # unreadable mounts (permissions, stale network mounts) are left out
        rows.append(
            [
                partition.mountpoint,
                partition.device,
                partition.fstype,
                human_bytes(usage.total),
                human_bytes(usage.used),
                human_bytes(usage.free),
                f"{usage.percent:.0f}%",
                _inode_percent(partition.mountpoint),
            ]
        )
        if usage.percent >= _ALMOST_FULL_PERCENT:
            warnings.append(f"Warning: {partition.mountpoint} is {usage.percent:.0f}% full")
    if not rows:
        return "No mounted disks found."
    headers = ["mount", "device", "type", "size", "used", "free", "use%", "inodes%"]
    return "\n".join([table(headers, rows, right=(3, 4, 5, 6, 7)), *warnings])


def _disk_usage_of_path(path: str) -> str:
    if not os.path.exists(path):
        raise ToolCallError(f"no such path: {path}")
    usage = psutil.disk_usage(path)
    mount = _mount_point(path)
    line = (
        f"{path} is on {mount}: {human_bytes(usage.used)} used of {human_bytes(usage.total)} "
        f"({usage.percent:.0f}%), {human_bytes(usage.free)} free; inodes {_inode_percent(path)} used"
    )
    if usage.percent >= _ALMOST_FULL_PERCENT:
        line += f"\nWarning: {mount} is {usage.percent:.0f}% full"
    return line


def _mount_point(path: str) -> str:
    current = os.path.realpath(path)
    while not os.path.ismount(current):
        current = os.path.dirname(current)
    return current


def _inode_percent(path: str) -> str:
    stats = os.statvfs(path)
    if stats.f_files == 0:
        return "-"  # filesystems without a fixed inode table (btrfs, some overlays)
    return f"{100 * (stats.f_files - stats.f_ffree) / stats.f_files:.0f}%"


@tool(category=ToolCategory.READ_ONLY, parallel=True, timeout=15, placement=HOST)
def cpu_load(args: CpuArgs, ctx: ToolContext) -> str:
    """CPU use measured over a short sample, load averages, and uptime."""
    interval = max(0.05, min(args.sample_seconds, ctx.remaining() - 0.5))
    times = psutil.cpu_times_percent(interval=interval)
    cores = psutil.cpu_count(logical=True) or 1
    idle = times.idle + getattr(times, "iowait", 0.0)
    load1, load5, load15 = os.getloadavg()
    lines = [
        f"CPU: {100 - idle:.0f}% busy over {interval:.1f} s on {cores} cores "
        f"(user {times.user:.0f}%, system {times.system:.0f}%, iowait {getattr(times, 'iowait', 0.0):.0f}%, "
        f"steal {getattr(times, 'steal', 0.0):.0f}%)",
        f"Load average (1/5/15 min): {load1:.2f} {load5:.2f} {load15:.2f} ({load1 / cores:.2f} per core)",
        f"Up {human_duration(time.time() - psutil.boot_time())}",
    ]
    return "\n".join(lines)


@tool(category=ToolCategory.READ_ONLY, parallel=True, timeout=10, placement=HOST)
def memory(args: NoArgs, ctx: ToolContext) -> str:
    """Memory and swap use."""
    mem = psutil.virtual_memory()
    swap = psutil.swap_memory()
    cache = getattr(mem, "buffers", 0) + getattr(mem, "cached", 0)
    lines = [
        f"Memory: {human_bytes(mem.used)} used of {human_bytes(mem.total)} ({mem.percent:.0f}%), "
        f"{human_bytes(mem.available)} available, {human_bytes(cache)} buffers/cache",
        f"Swap: {human_bytes(swap.used)} used of {human_bytes(swap.total)} ({swap.percent:.0f}%)"
        if swap.total
        else "Swap: none configured",
    ]
    return "\n".join(lines)


_PROCESS_FIELDS = ["pid", "name", "username", "cmdline", "memory_percent", "memory_info", "status"]


@tool(category=ToolCategory.READ_ONLY, parallel=True, timeout=15, placement=HOST)
def top_processes(args: TopProcessesArgs, ctx: ToolContext) -> str:
    """The processes using the most CPU (sampled over about a second) or memory."""
    processes = list(psutil.process_iter(_PROCESS_FIELDS))
    cpu: dict[int, float] = {}
    if args.sort_by == "cpu":
        for process in processes:
            _cpu_percent(process)  # the first call only starts the measurement
        time.sleep(max(0.05, min(1.0, ctx.remaining() / 2)))
        cpu = {process.pid: _cpu_percent(process) for process in processes}
    else:
        cpu = {process.pid: 0.0 for process in processes}

    def rank(process: psutil.Process) -> float:
        if args.sort_by == "cpu":
            return cpu.get(process.pid, 0.0)
        return float(process.info.get("memory_percent") or 0.0)

    ranked = sorted(processes, key=rank, reverse=True)[: args.limit]
    rows = [_process_row(process, cpu.get(process.pid, 0.0)) for process in ranked]
    headers = ["pid", "user", "cpu%", "mem%", "rss", "state", "command"]
    heading = f"Top {len(rows)} of {len(processes)} processes by {args.sort_by}:"
    return f"{heading}\n{table(headers, rows, right=(0, 2, 3, 4))}"


def _cpu_percent(process: psutil.Process) -> float:
    try:
        return float(process.cpu_percent(interval=None))
    except (psutil.NoSuchProcess, psutil.AccessDenied):
        return 0.0


def _process_row(process: psutil.Process, cpu: float) -> list[str]:
    info = process.info
    # Arguments may hold newlines; one line per process keeps the table readable.
    command = " ".join(" ".join(info.get("cmdline") or []).split()) or f"[{info.get('name') or '?'}]"
    rss = info.get("memory_info")
    return [
        str(info["pid"]),
        shorten(str(info.get("username") or "?"), 12),
        f"{cpu:.1f}",
        f"{float(info.get('memory_percent') or 0.0):.1f}",
        human_bytes(rss.rss) if rss is not None else "?",
        str(info.get("status") or "?"),
        shorten(command, 100),
    ]


def system_tools() -> list[FunctionTool[Any]]:
    """The host health tools."""
    return [disk_usage, cpu_load, memory, top_processes]
