"""What a simulated host's own machine looks like: its disks, its processes, its load and memory.

The demo's hosts must not show this machine. ``emulator.demo.commands`` answers ``df``,
``uptime``, ``free``, ``ps`` and ``largest-files`` on a host from what this module says, and the
demo's tool catalog (``emulator.demo.catalog``) points ``disk_usage``, ``cpu_load``, ``memory``,
``top_processes`` and ``largest_files`` at those commands, so every number the bot reads about a
demo host is that host's:

* Disks (``MACHINES[host].disks``): each a device, a mount point inside the host, a size and what
  is used on it besides the host's files. The used space of the disk holding ``/var/log`` is that
  plus the bytes of the host's real log files, so a clean-up that deletes logs frees exactly what
  it deleted (web-03's ``/var/log`` is a small volume of its own, nearly full of the api's
  rotated logs; db-01's logs are on its root disk).
* Processes: each belongs to a systemd unit of the host (``emulator.demo.systemctl``) or to the
  system. A unit's processes are listed only while the unit is active, with PIDs from its
  ``MainPID``, so a restart shows new PIDs and a stopped service is gone from ``ps``.
* Load: the host's when its busy unit runs (web-03's api in its retry loop, db-01's postgresql
  under the report query), low otherwise.
"""

from __future__ import annotations

import json
import os
from collections.abc import Mapping, Sequence
from dataclasses import dataclass, field
from pathlib import Path

from emulator.demo.logs import DB_HOST, REPORT_PID, WEB_HOST

KIB = 1024
MIB = 1024 * KIB
GIB = 1024 * MIB


@dataclass(frozen=True)
class Disk:
    """A filesystem of the host: ``base_used`` bytes besides the host's log files."""

    device: str
    mount: str
    size: int
    base_used: int
    kind: str = "ext4"


@dataclass(frozen=True)
class Process:
    """A process; ``unit``'s processes exist while the unit is active, PID ``MainPID + pid_offset``."""

    user: str
    cpu: float
    mem: float
    rss: int
    command: str
    unit: str = ""
    pid_offset: int = 0
    pid: int = 0  # a system process's own PID
    state: str = "S"


@dataclass(frozen=True)
class Machine:
    """One simulated host's hardware and what runs on it."""

    cores: int
    memory: int
    disks: Sequence[Disk]
    processes: Sequence[Process]
    busy_unit: str  # while it is active the host is loaded (``busy_load``), else ``idle_load``
    busy_load: tuple[float, float, float]
    idle_load: tuple[float, float, float] = (0.31, 0.42, 0.38)
    logs_mount: str = "/var/log"  # the disk whose used space includes the log files
    memory_used: float = 0.6
    extra: Mapping[str, str] = field(default_factory=dict)


_SYSTEM = [
    Process("root", 0.0, 0.1, 12 * MIB, "/sbin/init", pid=1),
    Process("root", 0.0, 0.2, 22 * MIB, "/lib/systemd/systemd-journald", pid=312),
    Process("root", 0.0, 0.1, 9 * MIB, "sshd: /usr/sbin/sshd -D [listener] 0 of 10-100 startups", pid=655),
    Process("root", 0.1, 0.3, 41 * MIB, "/usr/bin/node_exporter --collector.systemd", pid=701),
]

MACHINES: Mapping[str, Machine] = {
    WEB_HOST: Machine(
        cores=4,
        memory=8 * GIB,
        disks=[
            Disk("/dev/vda1", "/", 20 * GIB, int(7.4 * GIB)),
            # logrotate stopped compressing the api's logs: they fill this small volume
            Disk("/dev/vdb", "/var/log", 55 * MIB, int(1.5 * MIB)),
        ],
        processes=[
            *_SYSTEM,
            Process("www-data", 0.2, 0.4, 38 * MIB, "nginx: master process /usr/sbin/nginx", "nginx.service"),
            Process("www-data", 1.1, 0.6, 52 * MIB, "nginx: worker process", "nginx.service", 1),
            Process("api", 0.4, 1.9, 160 * MIB, "gunicorn: master [orders-api]", "api.service"),
            *(
                Process(
                    "api", cpu, 4.2, 340 * MIB, "gunicorn: worker [orders-api]", "api.service", n, state="R"
                )
                for n, cpu in enumerate((98.7, 97.9, 97.2, 96.4), start=1)
            ),
            Process(
                "postgres", 0.3, 2.1, 170 * MIB, "/usr/lib/postgresql/15/bin/postgres", "postgresql.service"
            ),
        ],
        busy_unit="api.service",
        busy_load=(7.92, 7.61, 6.83),
    ),
    DB_HOST: Machine(
        cores=8,
        memory=32 * GIB,
        disks=[
            Disk("/dev/vda1", "/", 40 * GIB, int(9.1 * GIB)),
            Disk("/dev/vdb", "/var/lib/postgresql", 500 * GIB, 301 * GIB, "xfs"),
        ],
        logs_mount="/",
        processes=[
            *_SYSTEM,
            Process(
                "postgres", 0.5, 9.6, 3100 * MIB, "/usr/lib/postgresql/15/bin/postgres", "postgresql.service"
            ),
            Process(
                "postgres",
                99.1,
                12.4,
                4000 * MIB,
                "postgres: reporting orders 10.0.4.21(51544) SELECT",
                "postgresql.service",
                pid=REPORT_PID,
                state="R",
            ),
            *(
                Process(
                    "postgres",
                    cpu,
                    1.1,
                    360 * MIB,
                    "postgres: orders orders 10.0.2.17(4412) SELECT waiting",
                    "postgresql.service",
                    n,
                    state="R",
                )
                for n, cpu in enumerate((38.2, 35.9, 33.1, 31.4, 29.8), start=40)
            ),
            Process(
                "pgbouncer",
                4.2,
                0.1,
                18 * MIB,
                "/usr/sbin/pgbouncer /etc/pgbouncer/pgbouncer.ini",
                "pgbouncer.service",
            ),
        ],
        busy_unit="postgresql.service",
        busy_load=(11.64, 10.92, 9.85),
        memory_used=0.83,
    ),
}
"""Each simulated host's machine."""


class NoSuchPath(ValueError):
    """A path that the simulated host does not have."""


class HostSystem:
    """The simulated machine of the host at ``root`` (``root/etc/hostname`` names it)."""

    def __init__(self, root: Path) -> None:
        self.root = root.resolve()
        self.name = (self.root / "etc" / "hostname").read_text().strip()
        self.machine = MACHINES[self.name]

    # -- paths ---------------------------------------------------------------------------------

    def locate(self, path: str) -> tuple[Path, str]:
        """``path`` on this host: its real place under ``root`` and its path inside the host.

        A path under ``root`` (the demo folder's, as the log tools give it) is that; any other
        absolute path is read inside the host (``/var/log`` is ``root/var/log``). A path that
        leaves the host (``..``, a symlink) or does not exist there is ``NoSuchPath``.
        """
        if not path.startswith("/"):
            raise NoSuchPath(f"{path}: not an absolute path")
        given = Path(os.path.normpath(path))
        inside = given.relative_to(self.root) if given.is_relative_to(self.root) else given.relative_to("/")
        real = (self.root / inside).resolve()
        if not real.is_relative_to(self.root) or not real.exists():
            raise NoSuchPath(f"{path}: No such file or directory")
        return real, "/" + str(real.relative_to(self.root)).removeprefix(".")

    # -- disks ---------------------------------------------------------------------------------

    def log_bytes(self) -> int:
        """The bytes of the host's log files (what a clean-up frees)."""
        log_dir = self.root / "var" / "log"
        return sum(entry.stat().st_size for entry in log_dir.rglob("*") if entry.is_file())

    def used(self, disk: Disk) -> int:
        logs = self.log_bytes() if disk.mount == self.machine.logs_mount else 0
        return min(disk.size, disk.base_used + logs)

    def disk_of(self, inside: str) -> Disk:
        """The disk holding the host path ``inside`` (the longest mount point that contains it)."""
        mounts = [
            d for d in self.machine.disks if inside == d.mount or inside.startswith(d.mount.rstrip("/") + "/")
        ]
        return max(mounts, key=lambda disk: len(disk.mount))

    # -- processes, load, memory ---------------------------------------------------------------

    def units(self) -> dict[str, dict[str, object]]:
        units: dict[str, dict[str, object]] = json.loads(
            (self.root / "run" / "systemd" / "units.json").read_text()
        )
        return units

    def processes(self) -> list[tuple[int, Process]]:
        """The processes running now, with their PIDs."""
        units = self.units()
        running = []
        for process in self.machine.processes:
            if not process.unit:
                running.append((process.pid, process))
                continue
            unit = units.get(process.unit)
            if unit is None or unit["ActiveState"] != "active":
                continue
            main = int(str(unit["MainPID"]))
            running.append((process.pid or main + process.pid_offset, process))
        return running

    def busy(self) -> bool:
        unit = self.units().get(self.machine.busy_unit)
        return unit is not None and unit["ActiveState"] == "active"

    def load(self) -> tuple[float, float, float]:
        return self.machine.busy_load if self.busy() else self.machine.idle_load

    def boot_time(self) -> float:
        return float((self.root / "run" / "boot_time").read_text())


def write_boot_time(root: Path, boot: float) -> None:
    """When the host booted (its ``uptime``)."""
    (root / "run").mkdir(parents=True, exist_ok=True)
    (root / "run" / "boot_time").write_text(f"{boot:.0f}\n")
