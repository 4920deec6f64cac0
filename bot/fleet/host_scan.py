"""The runner's scan of its own host: ``tools.changes``' collectors, built from its settings.

``host_scan`` is what ``chatops runner`` hands its scan thread (``bot.fleet.change_scan``): the
target's inventory ``watch`` paths, dpkg's and apt's logs (``CHATOPS_DPKG_LOG``,
``CHATOPS_APT_HISTORY_LOG``), the unit directories, crontabs and boot id, all read under
``CHATOPS_CHANGES_ROOT`` (``/``, or where a containerised runner mounts the host) and named as
the host names them; service restarts from ``systemctl`` when the service backend is systemd.
Snapshots and the scan's state live in ``CHATOPS_RUNNER_STATE_DIR/changes/{target}``, redacted
with the runner's own redactor before anything is written. A problem a scan meets (an unreadable
file, a cap reached) is logged once, as the scanner tells it once.
"""

from __future__ import annotations

import logging
from collections.abc import Callable, Sequence
from dataclasses import replace
from pathlib import Path

from bot.fleet.change_scan import Scan
from tools.changes.host import HostPaths
from tools.changes.record import Change
from tools.changes.scanner import ChangeScanner
from tools.changes.systemd import SystemdReader

log = logging.getLogger(__name__)


def host_paths(root: Path, dpkg_log: Path, apt_history_log: Path) -> HostPaths:
    """Every path the scan reads, under ``root`` (the logs as the settings name them on the host)."""
    paths = HostPaths.under(root)
    return replace(paths, dpkg_log=paths.inside(dpkg_log), apt_history_log=paths.inside(apt_history_log))


def host_scan(
    target: str,
    *,
    paths: HostPaths,
    watch: Sequence[Path],
    state_dir: Path,
    redact: Callable[[str], str],
    systemd: SystemdReader | None,
) -> Scan:
    """One scan per call: its changes, its new problems logged."""
    scanner = ChangeScanner(
        target,
        state_dir=state_dir / "changes" / target,
        redact=redact,
        paths=paths,
        watch=[paths.inside(path) for path in watch],
        systemd=systemd,
    )

    def scan() -> Sequence[Change]:
        report = scanner.scan()
        for problem in report.problems:
            log.warning("change scan of %s: %s", target, problem)
        return report.changes

    return scan
