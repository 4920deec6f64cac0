"""A simulated host root for the change collectors: its paths, a clock, services and a scanner."""

from __future__ import annotations

from collections.abc import Mapping
from dataclasses import dataclass, field
from pathlib import Path

import pytest

from tools.changes.content import Limits
from tools.changes.host import HostPaths
from tools.changes.record import Change
from tools.changes.scanner import ChangeScanner, ScanReport
from tools.changes.systemd import SystemdReader
from tools.safety import Redactor

BOOT = 1_764_000_000.0
NOW = BOOT + 86_400.0


@dataclass
class Host:
    """``root`` holds the host's files (``paths``); ``units`` is what systemctl would show."""

    root: Path
    state_dir: Path
    now: float = NOW
    units: dict[str, dict[str, str]] = field(default_factory=dict)
    watch: list[Path] = field(default_factory=list)
    limits: Limits = field(default_factory=Limits)
    reader: SystemdReader | None = None  # the systemd reader; None: ``units`` as systemctl would show them

    @property
    def paths(self) -> HostPaths:
        return HostPaths.under(self.root)

    def named(self, path: Path | str) -> str:
        """How the host names one of its files (what a change says): ``/etc/...``, not the root's."""
        return self.paths.shown(path)

    def path(self, absolute: str) -> Path:
        """The simulated host's ``absolute`` path."""
        return self.root / absolute.lstrip("/")

    def write(self, absolute: str, text: str | bytes) -> Path:
        path = self.path(absolute)
        path.parent.mkdir(parents=True, exist_ok=True)
        if isinstance(text, bytes):
            path.write_bytes(text)
        else:
            path.write_text(text)
        return path

    def scanner(self) -> ChangeScanner:
        """A scanner as a runner builds it (a new one is a restarted runner: same state dir)."""
        # The runner's redactor: the tool-output filter's, with a configured secret in the environment.
        redactor = Redactor.from_env(["DB_PASSWORD"], {"DB_PASSWORD": "s3cr3t-from-env"})
        return ChangeScanner(
            "web-03",
            state_dir=self.state_dir,
            redact=redactor.redact,
            paths=self.paths,
            watch=self.watch,
            systemd=self.reader or self.read_units,
            clock=lambda: self.now,
            limits=self.limits,
        )

    def read_units(self) -> Mapping[str, Mapping[str, str]]:
        return {unit: dict(props) for unit, props in self.units.items()}

    def boot(self, boot_id: str, at: float) -> None:
        self.write("/proc/sys/kernel/random/boot_id", f"{boot_id}\n")
        self.write("/proc/stat", f"cpu  1 2 3 4\nbtime {int(at)}\nprocesses 42\n")


@pytest.fixture
def host(tmp_path: Path) -> Host:
    simulated = Host(root=tmp_path / "root", state_dir=tmp_path / "state" / "changes" / "web-03")
    simulated.boot("11111111-1111-1111-1111-111111111111", BOOT)
    return simulated


def whats(report: ScanReport) -> list[str]:
    return [change.what for change in report.changes]


def only(report: ScanReport, kind: str) -> Change:
    found = [change for change in report.changes if change.kind == kind]
    assert len(found) == 1, report
    return found[0]
