"""The demo hosts' ``df``, ``uptime``, ``free``, ``ps`` and ``largest-files``: what each host's
machine says about itself (``emulator.demo.system``), printed the way the real commands print it;
and ``pool``, web-03's simulated worker pool (``emulator.demo.pool``).

Each host gets them in its ``bin`` folder next to its ``systemctl`` (``write_commands``), first on
its runner's ``PATH``, and the demo's catalog (``emulator.demo.catalog``) runs them for the
``disk_usage``, ``cpu_load``, ``memory``, ``top_processes`` and ``largest_files`` tools. Nothing
here reads this machine: a path outside the host is a path the host does not have.
"""

from __future__ import annotations

import heapq
import os
import stat
import sys
import time
from collections.abc import Callable, Sequence
from pathlib import Path

from emulator.demo.pool import pool_main
from emulator.demo.system import PSEUDO_PATHS, Disk, HostSystem, NoSuchPath, host_now

COMMANDS = ("df", "uptime", "free", "ps", "largest-files", "pool")
_PS_SORT = {"pcpu": lambda row: row[1].cpu, "pmem": lambda row: row[1].mem}


def human(count: float) -> str:
    """``df -h``'s sizes: ``55M``, ``1.5M``, ``20G``."""
    value = float(count)
    for unit in ("B", "K", "M", "G", "T"):
        if value < 1024 or unit == "T":
            if unit == "B":
                return f"{int(value)}"
            return f"{value:.1f}{unit}" if value < 10 else f"{value:.0f}{unit}"
        value /= 1024
    raise AssertionError("unreachable")


def percent_used(used: int, size: int) -> int:
    """``df``'s Use%: rounded up, as df does."""
    return -(-used * 100 // size) if size else 0


def df(system: HostSystem, args: Sequence[str]) -> int:
    paths = [a for a in args if not a.startswith("-")]
    disks: list[Disk] = []
    for path in paths:
        try:
            _, inside = system.locate(path)
        except NoSuchPath as error:
            print(f"df: {error}", file=sys.stderr)
            return 1
        disks.append(system.disk_of(inside))
    print(f"{'Filesystem':<14} {'Type':<5} {'Size':>5} {'Used':>5} {'Avail':>5} {'Use%':>4} Mounted on")
    for disk in disks or list(system.machine.disks):
        used = system.used(disk)
        print(
            f"{disk.device:<14} {disk.kind:<5} {human(disk.size):>5} {human(used):>5} "
            f"{human(disk.size - used):>5} {percent_used(used, disk.size):>3}% {disk.mount}"
        )
    return 0


def uptime(system: HostSystem, _args: Sequence[str]) -> int:
    now = host_now(system.root)
    up = int(now - system.boot_time())
    days, rest = divmod(up, 86400)
    load = ", ".join(f"{value:.2f}" for value in system.load())
    print(
        f" {time.strftime('%H:%M:%S', time.gmtime(now))} up {days} days, {rest // 3600:>2}:{rest % 3600 // 60:02d},"
        f"  1 user,  load average: {load}  ({system.machine.cores} CPUs)"
    )
    return 0


def memory_columns(total: int, used: int) -> tuple[int, int, int, int]:
    """``free``'s used, free, buff/cache and available: the page cache takes 12% of the memory
    while there is room and shrinks as the kernel's does when used memory leaves less (never a
    negative free column)."""
    cache = min(int(total * 0.12), total - used)
    return used, total - used - cache, cache, total - used


def free(system: HostSystem, _args: Sequence[str]) -> int:
    total = system.machine.memory
    columns = memory_columns(total, int(total * system.memory_used()))
    print(f"{'':>6} {'total':>10} {'used':>10} {'free':>10} {'buff/cache':>10} {'available':>10}")
    print(f"{'Mem:':<6} {human(total):>10} " + " ".join(f"{human(value):>10}" for value in columns))
    print(f"{'Swap:':<6} {'0':>10} {'0':>10} {'0':>10}")
    return 0


def ps(system: HostSystem, args: Sequence[str]) -> int:
    """``ps --sort=-pcpu|-pmem [--lines=N]``: the host's processes, busiest first."""
    options = dict(a.split("=", 1) for a in args if a.startswith("--") and "=" in a)
    key = _PS_SORT.get(options.get("--sort", "-pcpu").lstrip("-"))
    if key is None:
        print(f"ps: unknown sort key {options.get('--sort')!r} (pcpu, pmem)", file=sys.stderr)
        return 1
    rows = sorted(system.processes(), key=key, reverse=True)
    lines = int(options.get("--lines", len(rows)))
    print(f"{'PID':>7} {'USER':<9} {'%CPU':>5} {'%MEM':>5} {'RSS':>6} S COMMAND")
    for pid, process in rows[:lines]:
        print(
            f"{pid:>7} {process.user:<9} {process.cpu:>5.1f} {process.mem:>5.1f} "
            f"{human(process.rss):>6} {process.state} {process.command}"
        )
    print(f"({min(lines, len(rows))} of {len(rows)} processes)")
    return 0


def largest_files(system: HostSystem, args: Sequence[str]) -> int:
    """``largest-files PATH [N]``: the N largest files under PATH, on the host only."""
    if not args:
        print("usage: largest-files PATH [N]", file=sys.stderr)
        return 2
    try:
        real, _ = system.locate(args[0])
    except NoSuchPath as error:
        print(f"largest-files: {error}", file=sys.stderr)
        return 1
    limit = int(args[1]) if len(args) > 1 else 10
    shown = os.path.normpath(args[0])  # the path as it was given, without its ".." and "//"
    found = []
    for directory, dirs, names in os.walk(real):  # os.walk does not follow symlinks
        if Path(directory) == system.root:  # like find -xdev: not into the kernel's pseudo files
            dirs[:] = [d for d in dirs if d not in PSEUDO_PATHS]
        for name in names:
            entry = Path(directory) / name
            info = entry.lstat()
            if stat.S_ISREG(info.st_mode):
                found.append((info.st_size, shown.rstrip("/") + str(entry)[len(str(real)) :]))
    total = sum(size for size, _ in found)
    largest = heapq.nlargest(limit, found)
    print(f"Largest {len(largest)} of {len(found)} files under {shown} ({human(total)} in all):")
    for size, path in largest:
        print(f"{human(size):>6}  {path}")
    return 0


_RUN: dict[str, Callable[[HostSystem, Sequence[str]], int]] = {
    "df": df,
    "uptime": uptime,
    "free": free,
    "ps": ps,
    "largest-files": largest_files,
}


def command_main(command: str, argv: Sequence[str], root: str) -> int:
    """Run the demo host's ``command`` for the host at ``root``."""
    if command == "pool":  # web-03's simulated pool (emulator.demo.pool)
        return pool_main(argv, Path(root))
    return _RUN[command](HostSystem(Path(root)), argv)


def write_commands(bin_dir: Path, root: Path) -> list[Path]:
    """``bin_dir/df`` ... ``bin_dir/largest-files`` for the host at ``root``."""
    bin_dir.mkdir(parents=True, exist_ok=True)
    package_root = Path(__file__).resolve().parent.parent
    scripts = []
    for command in COMMANDS:
        script = bin_dir / command
        script.write_text(
            f"#!{sys.executable}\n"
            f"# The chatops demo's {command}: it describes the simulated host in {root}, never this\n"
            "# machine. Written by python -m emulator.demo.main.\n"
            "import sys\n"
            f"sys.path.insert(0, {str(package_root)!r})\n"
            "from emulator.demo.commands import command_main\n"
            f"sys.exit(command_main({command!r}, sys.argv[1:], {str(root)!r}))\n"
        )
        script.chmod(script.stat().st_mode | stat.S_IXUSR | stat.S_IXGRP | stat.S_IXOTH)
        scripts.append(script)
    return scripts
