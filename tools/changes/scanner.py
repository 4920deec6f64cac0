"""``ChangeScanner``: one scan of a host's traces of change, read-only and bounded.

A runner builds one per target and calls ``scan()`` at start and every
``CHATOPS_CHANGES_SCAN_SECONDS``; it stores ``report.changes`` (each ``Change.bounded()``) and
logs ``report.problems`` (each told once where it is a standing condition). One scan reads:

* the boot id (``REBOOT`` when it changed, at the boot time);
* dpkg's log and apt's history, what is new since the last scan (``tools.changes.logread``,
  rotations and gzip included; ``tools.changes.packages``);
* the watched trees: the target's ``watch`` paths, the systemd unit directories and the
  crontabs (``tools.changes.watch``; secrets redacted before a snapshot is stored);
* the services' start timestamps and states (``tools.changes.systemd``; an injected reader).

The first scan of a fresh state directory is a baseline: it reports the package history of the
logs (and the units that are failed or were restarted after boot), never a "created" for every
watched file. State survives a restart (files in ``state_dir``, written atomically); a state file
that cannot be read is a fresh baseline for its collector, said in ``problems``. A collector that
fails is a problem of that scan, never an exception out of ``scan()``.

A runner builds it from its settings and its inventory entry::

    ChangeScanner(
        target.name,
        state_dir=settings.chatops_runner_state_dir / "changes" / target.name,
        redact=output_filter.redactor.redact,
        paths=HostPaths(dpkg_log=settings.chatops_dpkg_log, apt_history_log=settings.chatops_apt_history_log),
        watch=target.watch,
        systemd=systemctl_reader() if settings.chatops_service_backend == "systemd" else None,
    )

``redact`` is the runner's redactor (``OutputFilter.redactor.redact``: its configured secrets and
patterns), not the whole output filter, which also cuts a text to the tool-output size.
"""

from __future__ import annotations

import time
from collections.abc import Callable, Sequence
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

from tools.changes.content import Limits
from tools.changes.host import HostPaths, read_boot_id, read_boot_time
from tools.changes.logread import line_boundary, read_new
from tools.changes.packages import apt_boundary, package_changes
from tools.changes.record import CRONTAB, FILE, REBOOT, UNIT, Change
from tools.changes.state import StateDir
from tools.changes.systemd import SystemdReader, service_changes
from tools.changes.watch import WatchedFiles, WatchTree

PACKAGES_STATE = "packages.json"
SERVICES_STATE = "services.json"
BOOT_STATE = "boot.json"
MAX_PROBLEM = 300


@dataclass(frozen=True)
class ScanReport:
    changes: list[Change] = field(default_factory=list)
    problems: list[str] = field(default_factory=list)


class ChangeScanner:
    def __init__(
        self,
        target: str,
        *,
        state_dir: Path,
        redact: Callable[[str], str],
        paths: HostPaths | None = None,
        watch: Sequence[Path] = (),
        systemd: SystemdReader | None = None,
        clock: Callable[[], float] = time.time,
        source: str = "runner",
        limits: Limits | None = None,
    ) -> None:
        self.target = target
        self._paths = paths or HostPaths()
        self._store = StateDir(state_dir)
        self._systemd = systemd
        self._clock = clock
        self._source = source
        trees = [WatchTree(path, FILE) for path in watch]
        trees += [WatchTree(path, UNIT) for path in self._paths.unit_dirs]
        trees += [WatchTree(path, CRONTAB) for path in self._paths.crontabs]
        self._failing: dict[str, str] = {}  # collector -> how it failed at the last scan
        self._watched = WatchedFiles(trees, self._store, redact, limits or Limits(), self._paths.shown)

    def scan(self) -> ScanReport:
        """What changed since the last scan (the baseline's history on the first)."""
        now = self._clock()
        changes: list[Change] = []
        problems: list[str] = []
        boot = read_boot_time(self._paths.proc_stat)
        steps: list[tuple[str, Callable[[], tuple[list[Change], list[str]]]]] = [
            ("reboots", lambda: self._reboots(now, boot)),
            ("packages", self._packages),
            ("watched files", lambda: self._watched.scan(self.target, self._source, now)),
            ("services", lambda: self._services(now, boot)),
        ]
        for name, step in steps:
            try:
                found, told = step()
            except Exception as error:  # a collector's bug or a host's surprise: told, never raised
                failure = _bounded(f"{name}: not scanned: {type(error).__name__}: {error}")
                if self._failing.get(name) != failure:  # told once while it fails the same way
                    problems.append(failure)
                self._failing[name] = failure
                continue
            self._failing.pop(name, None)
            changes += found
            problems += (_bounded(problem) for problem in told)
        return ScanReport(sorted(changes, key=lambda change: change.at), problems)

    def _reboots(self, now: float, boot: float | None) -> tuple[list[Change], list[str]]:
        boot_id = read_boot_id(self._paths.boot_id)
        if boot_id is None:
            return [], []
        saved = self._store.read_json(BOOT_STATE) or {}
        before = saved.get("boot_id")
        if before == boot_id:
            return [], []
        self._store.write_json(BOOT_STATE, {"boot_id": boot_id})
        if not isinstance(before, str):
            return [], []  # the baseline: no previous boot to compare with
        at, seen = (boot, False) if boot is not None and boot <= now else (now, True)
        change = Change(
            self.target, REBOOT, at, f"rebooted (boot id {boot_id})", source=self._source, seen=seen
        )
        return [change.bounded()], []

    def _packages(self) -> tuple[list[Change], list[str]]:
        saved = self._store.read_json(PACKAGES_STATE)
        problems = (
            []
            if saved is not None or not self._store.root.joinpath(PACKAGES_STATE).exists()
            else ["packages: the saved state was unreadable: the logs are read again from their start"]
        )
        cursors: dict[str, Any] = saved or {}
        dpkg = read_new(self._paths.dpkg_log, _cursor(cursors.get("dpkg")), line_boundary)
        apt = read_new(self._paths.apt_history_log, _cursor(cursors.get("apt")), apt_boundary)
        changes = package_changes(dpkg.text, apt.text, self.target, self._source)
        fresh = {"dpkg": dpkg.cursor, "apt": apt.cursor}
        if fresh != saved:
            self._store.write_json(PACKAGES_STATE, fresh)
        return changes, [*problems, *dpkg.problems, *apt.problems]

    def _services(self, now: float, boot: float | None) -> tuple[list[Change], list[str]]:
        if self._systemd is None:
            return [], []
        units = self._systemd()
        saved = self._store.read_json(SERVICES_STATE)
        before = saved.get("units") if saved is not None else None
        previous = (
            before if isinstance(before, dict) and all(isinstance(v, dict) for v in before.values()) else None
        )
        changes, kept = service_changes(
            units, previous, target=self.target, source=self._source, now=now, boot=boot
        )
        if kept != previous:
            self._store.write_json(SERVICES_STATE, {"units": kept})
        return changes, []


def _cursor(value: object) -> dict[str, Any] | None:
    return value if isinstance(value, dict) else None


def _bounded(problem: str) -> str:
    line = " ".join(problem.split())
    return line if len(line) <= MAX_PROBLEM else line[: MAX_PROBLEM - 3] + "..."
