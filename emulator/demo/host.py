"""The demo's simulated hosts, web-03 and db-01: a folder of realistic logs and a ``systemctl`` each.

``build_host(root, bin_dir, name=...)`` makes, from scratch:

* ``root/var/log``: the host's logs (``emulator.demo.logs``), the live ones written up to now and
  the rotated ones dated the days they were rotated. web-03 has nginx, api, postgresql and syslog
  logs; the api's rotated logs were never compressed and fill the disk, and the live
  ``api/api.log`` ends in a retry loop (the high-CPU scenario). db-01 has a busy postgresql whose
  live log ends with a long report query and refused connections ("check db-01's load").
* ``root/etc/hostname``: the host's name, which its ``systemctl`` writes into the journal.
* ``root/var/log/dpkg.log`` (and ``.1``), ``root/var/log/apt/history.log`` and the configuration its
  runner watches (web-03's ``etc/nginx``, db-01's ``etc/pgbouncer``): ``emulator.demo.changes``.
* ``root/run/systemd/units.json``: the state of the host's services (web-03: ``api``, ``nginx``,
  ``postgresql``; db-01: ``postgresql``, ``pgbouncer``).
* ``root/run/boot_time``: when the host booted (its ``uptime``).
* ``bin_dir/df``, ``uptime``, ``free``, ``ps``, ``largest-files``: the host's machine, simulated
  (``emulator.demo.commands``, ``emulator.demo.system``): its disks (web-03's ``/var/log`` volume
  filled by its logs, freed by what a clean-up deletes), its processes (from its units' state)
  and its load. The demo's catalog runs them for the host-health tools.
* ``bin_dir/systemctl``: an executable that answers ``show``, ``status``, ``is-active``,
  ``restart``, ``start`` and ``stop`` from that state, the way systemctl prints them, and records
  every restart in ``root/run/systemd/journal.log`` and the unit's own log. Put ``bin_dir`` first
  on the host's runner's ``PATH`` and the real ``service_status`` / ``service_restart`` tools
  (systemd backend) manage these services without touching the machine's own
  (``emulator.demo.systemctl``).

Each host gets its own ``root`` and ``bin_dir``, so the two never share a file or a service. The
log, clean-up and service tools that act on a demo host are the real ones (its runner's
``CHATOPS_LOG_DIRS`` points at ``root/var/log``); the host-health tools run the host's own
commands; nothing a demo host's tools say comes from this machine. ``HOSTS`` holds what the demo's inventory says
about each (its labels) and how long it has been up.
"""

from __future__ import annotations

import shutil
import time
from collections.abc import Mapping
from dataclasses import dataclass
from pathlib import Path

from emulator.demo.changes import write_change_traces
from emulator.demo.commands import write_commands
from emulator.demo.logs import DAY, DB_HOST, WEB_HOST, build_logs
from emulator.demo.pool import install_pools
from emulator.demo.system import write_boot_time
from emulator.demo.systemctl import install_units, write_systemctl


@dataclass(frozen=True)
class HostProfile:
    """What differs between the simulated hosts: the inventory's labels and the uptime."""

    labels: Mapping[str, str]
    uptime: float  # seconds since the host's services started


HOSTS: Mapping[str, HostProfile] = {
    WEB_HOST: HostProfile(labels={"env": "prod", "role": "web"}, uptime=3 * DAY + 5 * 3600),
    DB_HOST: HostProfile(labels={"env": "prod", "role": "db"}, uptime=41 * DAY + 2 * 3600),
}
"""The demo's hosts, in the order the demo starts them."""


@dataclass(frozen=True)
class DemoHost:
    """Where a simulated host lives: ``log_dir`` for ``CHATOPS_LOG_DIRS``, ``bin_dir`` for ``PATH``."""

    root: Path
    log_dir: Path
    bin_dir: Path
    name: str = WEB_HOST

    @property
    def state_dir(self) -> Path:
        return self.root / "run" / "systemd"

    @property
    def labels(self) -> Mapping[str, str]:
        return HOSTS[self.name].labels


def build_host(root: Path, bin_dir: Path, now: float | None = None, name: str = WEB_HOST) -> DemoHost:
    """A fresh simulated host ``name`` under ``root`` (anything there before is removed) and its
    ``systemctl`` in ``bin_dir``; ``ValueError`` for a host the demo does not simulate."""
    if name not in HOSTS:
        raise ValueError(f"no simulated host {name!r}: the demo has {', '.join(HOSTS)}")
    now = time.time() if now is None else now
    if root.exists():
        shutil.rmtree(root)
    host = DemoHost(root=root, log_dir=root / "var" / "log", bin_dir=bin_dir, name=name)
    build_logs(host.log_dir, now, host=name)
    (root / "etc").mkdir(parents=True)
    (root / "etc" / "hostname").write_text(f"{name}\n")
    write_change_traces(root, now, host=name)
    install_units(host.state_dir, boot=now - HOSTS[name].uptime, host=name)
    write_boot_time(root, now - HOSTS[name].uptime - 40)
    write_systemctl(bin_dir, root)
    write_commands(bin_dir, root)
    install_pools(root, name)
    return host
