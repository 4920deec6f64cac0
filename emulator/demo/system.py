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
* Load: the host's when it is busy, low otherwise, with a little noise that is the same for the
  same moment (``load_at``: ``uptime`` now, and the demo's Prometheus for any moment of the past,
  ``emulator.demo.prometheus``). web-03 is busy while its api runs (its retry loop). db-01 is
  healthy until its incident starts (``emulator.demo.incident``, the demo's alert button): from
  then on the report query is among its processes and loads it, until postgresql is restarted
  (a restart ends every backend, the report's too).
"""

from __future__ import annotations

import calendar
import json
import os
import time
import uuid
import zlib
from collections.abc import Mapping, Sequence
from dataclasses import asdict, dataclass, field
from pathlib import Path
from typing import Literal

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


Phase = Literal["always", "healthy", "incident"]
INCIDENT_FILE = "run/incident.json"
"""Under a host's root: when its incident started (``emulator.demo.incident`` writes it)."""
_NOISE = (0.06, 0.03, 0.015)  # how much load1, load5 and load15 wander around their level
_NOISE_SECONDS = 15  # the noise changes every so many seconds (a node_exporter scrape interval)


@dataclass(frozen=True)
class Process:
    """A process; ``unit``'s processes exist while the unit is active, PID ``MainPID + pid_offset``;
    ``phase``: whether it runs always, only while the host is healthy, or only during its incident."""

    user: str
    cpu: float
    mem: float
    rss: int
    command: str
    unit: str = ""
    pid_offset: int = 0
    pid: int = 0  # a system process's own PID
    state: str = "S"
    phase: Phase = "always"


@dataclass(frozen=True)
class Machine:
    """One simulated host's hardware and what runs on it."""

    cores: int
    memory: int
    disks: Sequence[Disk]
    processes: Sequence[Process]
    busy_unit: str  # while it is active (and the incident runs, if one is needed) the host is busy
    busy_load: tuple[float, float, float]
    idle_load: tuple[float, float, float] = (0.31, 0.42, 0.38)
    busy_needs_incident: bool = False  # db-01: busy only during its incident
    logs_mount: str = "/var/log"  # the disk whose used space includes the log files
    memory_used: float = 0.6
    busy_memory_used: float | None = None  # when busy, if it differs
    extra: Mapping[str, str] = field(default_factory=dict)
    noise: bool = True  # the load wanders around its level (an eval scenario's load is exact)
    files_on_every_disk: bool = False  # a disk counts every host file on it, not only the logs


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
                phase="incident",
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
                    phase="incident",
                )
                for n, cpu in enumerate((38.2, 35.9, 33.1, 31.4, 29.8), start=40)
            ),
            *(
                Process(
                    "postgres",
                    cpu,
                    0.9,
                    290 * MIB,
                    f"postgres: orders orders 10.0.2.17({port}) idle",
                    "postgresql.service",
                    n,
                    phase="healthy",
                )
                for n, cpu, port in ((40, 1.8, 4412), (41, 1.2, 4418), (42, 0.7, 4425))
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
        idle_load=(0.58, 0.64, 0.61),
        busy_needs_incident=True,
        memory_used=0.61,
        busy_memory_used=0.83,
    ),
}
"""Each simulated host's machine, unless its folder holds its own (``MACHINE_FILE``)."""

MACHINE_FILE = "etc/machine.json"
"""Under a host's root: its machine, written by whoever built the host (the eval's fault injector);
without it the host is one of the demo's ``MACHINES`` by its name."""
HARNESS_PATHS = ("run", "proc", "etc/hostname", MACHINE_FILE, "etc/chatops-eval", "var/lib/chatops-runner")
"""Under a host's root: the simulation's own files, on no disk of the host."""
PSEUDO_PATHS = ("proc",)
"""Under a host's root: a kernel's pseudo file system (the boot id a runner's change scan reads),
which the host's ``df`` and ``largest-files`` do not show."""


def write_machine(root: Path, machine: Machine) -> Path:
    """``root/etc/machine.json``: ``machine``, which ``HostSystem`` then reads instead of ``MACHINES``."""
    path = root / MACHINE_FILE
    path.parent.mkdir(parents=True, exist_ok=True)
    path.write_text(json.dumps(asdict(machine), indent=2))
    return path


def read_machine(root: Path, name: str) -> Machine:
    """The machine of the host at ``root``: its own file, else the demo's ``MACHINES[name]``."""
    path = root / MACHINE_FILE
    if not path.exists():
        return MACHINES[name]
    data = json.loads(path.read_text())
    return Machine(
        **{
            **data,
            "disks": [Disk(**disk) for disk in data["disks"]],
            "processes": [Process(**process) for process in data["processes"]],
            "busy_load": tuple(data["busy_load"]),
            "idle_load": tuple(data["idle_load"]),
        }
    )


class NoSuchPath(ValueError):
    """A path that the simulated host does not have."""


class HostSystem:
    """The simulated machine of the host at ``root`` (``root/etc/hostname`` names it)."""

    def __init__(self, root: Path) -> None:
        self.root = root.resolve()
        self.name = (self.root / "etc" / "hostname").read_text().strip()
        self.machine = read_machine(self.root, self.name)

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
        parts = real.relative_to(self.root).parts
        if parts and parts[0] in PSEUDO_PATHS:  # the kernel's pseudo files: on no disk of the host
            raise NoSuchPath(f"{path}: No such file or directory")
        return real, "/" + "/".join(parts)

    # -- disks ---------------------------------------------------------------------------------

    def log_bytes(self) -> int:
        """The bytes of the host's log files (what a clean-up frees)."""
        log_dir = self.root / "var" / "log"
        return sum(entry.stat().st_size for entry in log_dir.rglob("*") if entry.is_file())

    def used(self, disk: Disk) -> int:
        if self.machine.files_on_every_disk:
            return min(disk.size, disk.base_used + self.file_bytes_on(disk))
        logs = self.log_bytes() if disk.mount == self.machine.logs_mount else 0
        return min(disk.size, disk.base_used + logs)

    def file_bytes_on(self, disk: Disk) -> int:
        """The bytes of the host's own files (not the simulation's) on ``disk``."""
        total = 0
        for entry in self.root.rglob("*"):
            inside = str(entry.relative_to(self.root))
            if any(inside == skip or inside.startswith(skip + "/") for skip in HARNESS_PATHS):
                continue
            if entry.is_file() and not entry.is_symlink() and self.disk_of("/" + inside) == disk:
                total += entry.stat().st_size
        return total

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
        phase = "incident" if self.busy() and self.machine.busy_needs_incident else "healthy"
        running = []
        for process in self.machine.processes:
            if process.phase not in ("always", phase):
                continue
            if not process.unit:
                running.append((process.pid, process))
                continue
            unit = units.get(process.unit)
            if unit is None or unit["ActiveState"] != "active":
                continue
            main = int(str(unit["MainPID"]))
            running.append((process.pid or main + process.pid_offset, process))
        return running

    def incident_started(self) -> float | None:
        """When the host's incident started (``None``: it has not)."""
        try:
            return float(json.loads((self.root / INCIDENT_FILE).read_text())["started"])
        except (OSError, ValueError, KeyError, TypeError):
            return None

    def busy_at(self, at: float) -> bool:
        """Whether the host was busy at ``at``: its busy unit runs, and (db-01) its incident had
        started and the unit was not restarted since (a restart ends the incident)."""
        unit = self.units().get(self.machine.busy_unit)
        if unit is None or unit["ActiveState"] != "active":
            return False
        if not self.machine.busy_needs_incident:
            return True
        started = self.incident_started()
        if started is None or at < started:
            return False
        restarted = _systemd_seconds(str(unit.get("ActiveEnterTimestamp") or ""))
        return restarted is None or restarted < int(started) or at < restarted

    def busy(self) -> bool:
        return self.busy_at(host_now(self.root))

    def load(self) -> tuple[float, float, float]:
        return self.load_at(host_now(self.root))

    def load_at(self, at: float) -> tuple[float, float, float]:
        """The load averages at ``at``: the level of the moment, and its noise."""
        level = self.machine.busy_load if self.busy_at(at) else self.machine.idle_load
        if not self.machine.noise:
            return level
        bucket = int(at // _NOISE_SECONDS)
        one, five, fifteen = (
            round(value * (1 + amount * _noise(f"{self.name}/{index}/{bucket}")), 2)
            for index, (value, amount) in enumerate(zip(level, _NOISE, strict=True))
        )
        return one, five, fifteen

    def memory_used(self) -> float:
        """The share of memory in use now."""
        busy = self.machine.busy_memory_used
        return busy if busy is not None and self.busy() else self.machine.memory_used

    def boot_time(self) -> float:
        return float((self.root / "run" / "boot_time").read_text())


def _noise(key: str) -> float:
    """A number in [-1, 1], always the same for ``key``."""
    return zlib.crc32(key.encode()) / 0xFFFFFFFF * 2 - 1


def _systemd_seconds(stamp: str) -> int | None:
    """``Mon 2025-05-05 10:00:00 UTC`` (systemd's timestamps, ``emulator.demo.systemctl``) as seconds."""
    try:
        return calendar.timegm(time.strptime(stamp, "%a %Y-%m-%d %H:%M:%S UTC"))
    except ValueError:
        return None


def host_now(root: Path) -> float:
    """The host's clock: ``run/clock`` when a harness froze it there, else this machine's.

    ``chatops eval`` freezes its hosts at the scenario's moment (``emulator.eval.injector``), so
    ``uptime``, the load and a restart's timestamps read the same on every run of a scenario and a
    recorded model run replays byte for byte (docs/EVAL.md); the demo's hosts keep real time."""
    try:
        return float((root / "run" / "clock").read_text())
    except (OSError, ValueError):
        return time.time()


def write_clock(root: Path, at: float) -> None:
    """Freeze the host's clock at ``at`` (``host_now``)."""
    (root / "run").mkdir(parents=True, exist_ok=True)
    (root / "run" / "clock").write_text(f"{at!r}\n")


def write_boot_time(root: Path, boot: float) -> None:
    """When the host booted (its ``uptime``)."""
    (root / "run").mkdir(parents=True, exist_ok=True)
    (root / "run" / "boot_time").write_text(f"{boot:.0f}\n")
    # Where a runner's change scan reads the boot (its id, and btime): a reboot is a new id.
    random_dir = root / "proc" / "sys" / "kernel" / "random"
    random_dir.mkdir(parents=True, exist_ok=True)
    (random_dir / "boot_id").write_text(f"{uuid.UUID(int=int(boot))}\n")
    (root / "proc" / "stat").write_text(f"btime {boot:.0f}\n")
