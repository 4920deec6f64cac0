"""The demo's simulated host "web-03": a folder of realistic logs and a ``systemctl`` that pretends.

``build_host(root, bin_dir)`` makes, from scratch:

* ``root/var/log``: nginx, api, postgresql and syslog logs, the live ones written up to now and
  the rotated ones (``access.log.2.gz``, ``api.log-20250101`` ...) dated the days they were
  rotated. The api's rotated logs were never compressed: they are what fills the disk. The live
  ``api/api.log`` ends in a retry loop, the story of the high-CPU scenario (``emulator.demo_logs``).
* ``root/run/systemd/units.json``: the state of the host's services (``api``, ``nginx``,
  ``postgresql``).
* ``bin_dir/systemctl``: an executable that answers ``show``, ``status``, ``is-active``,
  ``restart``, ``start`` and ``stop`` from that state, the way systemctl prints them, and records
  every restart in ``root/run/systemd/journal.log`` and the unit's own log. Put ``bin_dir`` first
  on the worker's ``PATH`` and the real ``service_status`` / ``service_restart`` tools (systemd
  backend) manage these services without touching the machine's own (``emulator.demo_systemctl``).

The tools that read the demo host are the real ones (``CHATOPS_LOG_DIRS`` points at
``root/var/log``); only the host is simulated.
"""

from __future__ import annotations

import shutil
import time
from dataclasses import dataclass
from pathlib import Path

from emulator.demo_logs import DAY, build_logs
from emulator.demo_systemctl import install_units, write_systemctl


@dataclass(frozen=True)
class DemoHost:
    """Where the simulated host lives: ``log_dir`` for ``CHATOPS_LOG_DIRS``, ``bin_dir`` for ``PATH``."""

    root: Path
    log_dir: Path
    bin_dir: Path

    @property
    def state_dir(self) -> Path:
        return self.root / "run" / "systemd"


def build_host(root: Path, bin_dir: Path, now: float | None = None) -> DemoHost:
    """A fresh simulated host under ``root`` (anything there before is removed) and its ``systemctl``."""
    now = time.time() if now is None else now
    if root.exists():
        shutil.rmtree(root)
    host = DemoHost(root=root, log_dir=root / "var" / "log", bin_dir=bin_dir)
    build_logs(host.log_dir, now)
    install_units(host.state_dir, boot=now - 3 * DAY - 5 * 3600)
    write_systemctl(bin_dir, root)
    return host
