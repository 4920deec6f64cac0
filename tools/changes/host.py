"""Where a host keeps its traces of change (``HostPaths``), and its boot (id and time).

Every path the scanner reads is here, defaulting to the real one, so tests, the demo and a
runner with a different layout give their own (``HostPaths.under(root)``: all of them inside a
simulated host root). The boot id changing between two scans is a reboot; its time is the boot
time (``btime`` of ``/proc/stat``) when that is readable.
"""

from __future__ import annotations

from dataclasses import dataclass
from pathlib import Path

UNIT_DIRS = (
    Path("/etc/systemd/system"),
    Path("/run/systemd/system"),
    Path("/lib/systemd/system"),
    Path("/usr/lib/systemd/system"),
)
CRONTABS = (Path("/etc/crontab"), Path("/etc/cron.d"), Path("/var/spool/cron/crontabs"))
_MAX_PROC_BYTES = 64 * 1024


@dataclass(frozen=True)
class HostPaths:
    dpkg_log: Path = Path("/var/log/dpkg.log")
    apt_history_log: Path = Path("/var/log/apt/history.log")
    boot_id: Path = Path("/proc/sys/kernel/random/boot_id")
    proc_stat: Path = Path("/proc/stat")
    unit_dirs: tuple[Path, ...] = UNIT_DIRS
    crontabs: tuple[Path, ...] = CRONTABS
    root: Path = Path("/")  # where the host's / is seen (``/host`` in a container mounting it there)

    def inside(self, path: Path) -> Path:
        """The host's absolute ``path`` as this process reads it (under ``root``)."""
        return self.root / path.relative_to("/") if path.is_absolute() else self.root / path

    def shown(self, path: Path | str) -> str:
        """A path read under ``root`` as the host names it (``/etc/nginx/nginx.conf``), never the
        runner's mount point or a demo's folder; a path outside ``root`` as it is."""
        try:
            relative = Path(path).relative_to(self.root)
        except ValueError:
            return str(path)
        return "/" + str(relative) if str(relative) != "." else "/"

    @classmethod
    def under(cls, root: Path) -> HostPaths:
        """Every default path inside ``root`` (a simulated host)."""
        default = cls()

        def inside(path: Path) -> Path:
            return root / path.relative_to("/")

        return cls(
            dpkg_log=inside(default.dpkg_log),
            apt_history_log=inside(default.apt_history_log),
            boot_id=inside(default.boot_id),
            proc_stat=inside(default.proc_stat),
            unit_dirs=tuple(map(inside, default.unit_dirs)),
            crontabs=tuple(map(inside, default.crontabs)),
            root=root,
        )


def read_boot_id(path: Path) -> str | None:
    """The boot id (a UUID), or ``None`` when it cannot be read."""
    text = _read(path)
    if text is None:
        return None
    boot_id = text.strip()
    return boot_id[:64] if boot_id and boot_id.isprintable() else None


def read_boot_time(path: Path) -> float | None:
    """``btime`` of ``/proc/stat``: when the host booted (Unix seconds), or ``None``."""
    text = _read(path)
    for line in (text or "").splitlines():
        key, _, value = line.partition(" ")
        if key == "btime" and value.strip().isdigit():
            return float(value.strip())
    return None


def _read(path: Path) -> str | None:
    try:
        with open(path, "rb") as handle:
            return handle.read(_MAX_PROC_BYTES).decode("utf-8", errors="replace")
    except OSError:
        return None
