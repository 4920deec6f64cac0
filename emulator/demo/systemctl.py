"""The demo hosts' ``systemctl``: an executable that answers ``show``, ``status``, ``is-active``,
``restart``, ``start`` and ``stop`` from the state in ``root/run/systemd/units.json``, the way
systemctl prints them, and records every restart in ``root/run/systemd/journal.log`` and the
unit's own log. Each host has its own (``write_systemctl(bin_dir, root)``) and its own units
(``UNITS``: web-03's api, nginx and a small postgresql; db-01's busy postgresql and its
pgbouncer). Put its folder first on the host's runner's ``PATH`` and the real ``service_status`` /
``service_restart`` tools (systemd backend) manage these services without touching the machine's
own.
"""

from __future__ import annotations

import fcntl
import json
import os
import random
import stat
import sys
import time
from collections.abc import Sequence
from pathlib import Path

from emulator.demo.logs import API_PID, DB_HOST, HOSTNAME, POSTGRES_PID, WEB_HOST, iso_time, syslog_time
from emulator.demo.system import host_now

UNITS: dict[str, dict[str, dict[str, object]]] = {
    WEB_HOST: {
        "api.service": {
            "Description": "Orders API (gunicorn, 8 workers)",
            "MainPID": API_PID,
            "log": "api/api.log",
        },
        "nginx.service": {
            "Description": "A high performance web server and a reverse proxy server",
            "MainPID": 811,
        },
        "postgresql.service": {"Description": "PostgreSQL RDBMS", "MainPID": 902},
    },
    DB_HOST: {
        "postgresql.service": {
            "Description": "PostgreSQL Cluster 15-main (orders primary)",
            "MainPID": POSTGRES_PID,
            "log": "postgresql/postgresql-15-main.log",
        },
        "pgbouncer.service": {"Description": "connection pooler for PostgreSQL", "MainPID": 1042},
    },
}
"""Each simulated host's services: description, main PID and the unit's own log (under var/log)."""

START_FAILS = "start_fails"
"""A unit's hidden key: how each start of it fails (``{"result": "exit-code", "lines": [...]}``): a
unit whose configuration is broken. Its process starts (systemctl's own answer to a restart, and
the first read after it, still show it running, as a ``Type=simple`` unit's do) and exits at once:
every later read shows it failed, and ``lines`` are in its log."""
_FAILS_AFTER_READS = "fails_after_reads"
_HIDDEN = frozenset({"log", START_FAILS, _FAILS_AFTER_READS})
LOCK_FILE = "units.lock"


def install_units(state_dir: Path, boot: float, host: str = WEB_HOST) -> None:
    """The services of ``host`` (``UNITS``), all running since ``boot``."""
    state_dir.mkdir(parents=True)
    units = {
        unit: {
            "Id": unit,
            "Description": info["Description"],
            "LoadState": "loaded",
            "ActiveState": "active",
            "SubState": "running",
            "MainPID": info["MainPID"],
            "ActiveEnterTimestamp": _systemd_time(boot + 40),
            "NRestarts": 0,
            "Result": "success",
            "log": info.get("log", ""),
        }
        for unit, info in UNITS[host].items()
    }
    _save_units(state_dir, units)


def _systemd_time(at: float) -> str:
    return time.strftime("%a %Y-%m-%d %H:%M:%S UTC", time.gmtime(at))


def write_systemctl(bin_dir: Path, root: Path) -> Path:
    """``bin_dir/systemctl``: this module's ``systemctl_main`` for the host at ``root``."""
    bin_dir.mkdir(parents=True, exist_ok=True)
    script = bin_dir / "systemctl"
    package_root = Path(__file__).resolve().parent.parent
    script.write_text(
        f"#!{sys.executable}\n"
        f"# The chatops demo's simulated systemctl: it manages the services of the simulated host in\n"
        f"# {root} and never touches this machine's own. Written by python -m emulator.demo.main.\n"
        "import sys\n"
        f"sys.path.insert(0, {str(package_root)!r})\n"
        "from emulator.demo.systemctl import systemctl_main\n"
        f"sys.exit(systemctl_main(sys.argv[1:], {str(root)!r}))\n"
    )
    script.chmod(script.stat().st_mode | stat.S_IXUSR | stat.S_IXGRP | stat.S_IXOTH)
    return script


def _load_units(state_dir: Path) -> dict[str, dict[str, object]]:
    units: dict[str, dict[str, object]] = json.loads((state_dir / "units.json").read_text())
    return units


def _save_units(state_dir: Path, units: dict[str, dict[str, object]]) -> None:
    temporary = state_dir / f".units.{os.getpid()}.tmp"
    temporary.write_text(json.dumps(units, indent=2))
    os.replace(temporary, state_dir / "units.json")


_UNIT_TYPES = (
    "service",
    "socket",
    "target",
    "device",
    "mount",
    "automount",
    "swap",
    "timer",
    "path",
    "slice",
    "scope",
)


def _unit_name(name: str) -> str:
    """``name`` as systemctl mangles it: ``.service`` added unless it ends with a unit type
    (``php8.3-fpm`` is ``php8.3-fpm.service``; ``nginx.socket`` stays)."""
    return name if name.rpartition(".")[2] in _UNIT_TYPES and "." in name else f"{name}.service"


def _not_found(unit: str) -> dict[str, object]:
    return {
        "Id": unit,
        "Description": unit,
        "LoadState": "not-found",
        "ActiveState": "inactive",
        "SubState": "dead",
        "MainPID": 0,
        "ActiveEnterTimestamp": "",
        "NRestarts": 0,
        "Result": "success",
    }


def _hostname(root: Path) -> str:
    try:
        return (root / "etc" / "hostname").read_text().strip() or HOSTNAME
    except OSError:
        return HOSTNAME


def _record(root: Path, unit: str, info: dict[str, object], verb: str, now: float) -> None:
    """A journal line for the action, and systemd's lines in the unit's own log."""
    stamp = syslog_time(now)
    with open(root / "run" / "systemd" / "journal.log", "a") as journal:
        journal.write(
            f"{stamp} {_hostname(root)} systemctl[{os.getpid()}]: {verb} {unit} (simulated by the chatops demo)\n"
        )
    log = str(info.get("log") or "")
    if log:
        lines = {
            "restart": [
                f"Stopping {unit} - {info['Description']}...",
                f"Started {unit} - {info['Description']}.",
            ],
            "stop": [f"Stopping {unit} - {info['Description']}...", f"Stopped {unit}."],
            "start": [f"Started {unit} - {info['Description']}."],
        }[verb]
        with open(root / "var" / "log" / log, "a") as handle:
            handle.writelines(f"{iso_time(now)} INFO  systemd[1]: {line}\n" for line in lines)


def systemctl_main(argv: Sequence[str], root: str) -> int:
    """A small systemctl over ``root/run/systemd/units.json``; prints what systemctl would.

    One invocation at a time per host (``units.lock``): systemd changes a unit's state atomically,
    and a run's read-only tools of one turn run in parallel. Unlocked, two reads of a unit that
    fails after its next read both loaded the count before either saved it, and both saw it
    running: what a run saw depended on the machine's load."""
    lock_path = Path(root) / "run" / "systemd" / LOCK_FILE
    if not lock_path.parent.is_dir():
        return _systemctl(argv, root)
    with open(lock_path, "a") as lock:
        fcntl.flock(lock, fcntl.LOCK_EX)  # released when the file is closed
        return _systemctl(argv, root)


def _systemctl(argv: Sequence[str], root: str) -> int:
    base = Path(root)
    state_dir = base / "run" / "systemd"
    args = [a for a in argv if a not in ("--no-pager", "--no-ask-password", "--quiet", "-q")]
    properties = [p for a in args if a.startswith("--property=") for p in a.split("=", 1)[1].split(",") if p]
    args = [a for a in args if not a.startswith("--property=")]
    if not args:
        print(
            "systemctl (simulated by the chatops demo): show, status, is-active, restart, start, stop, list-units"
        )
        return 0
    if args[0] == "list-units":  # what the runner's change scan asks: every service, one per line
        for name, listed in sorted(_load_units(state_dir).items()):
            print(
                f"{name} loaded {listed['ActiveState']} {listed['SubState']} {listed.get('Description', '')}"
            )
        return 0
    verb, names = args[0], [_unit_name(n) for n in args[1:]]
    if verb not in ("show", "status", "is-active", "restart", "start", "stop"):
        print(f"systemctl (simulated by the chatops demo) does not do {verb!r}", file=sys.stderr)
        return 1
    if not names:
        print(f"Too few arguments: systemctl {verb} needs a unit.", file=sys.stderr)
        return 1
    units = _load_units(state_dir)
    status = 0
    failed_now = [u for u in names if verb in _READS and _exits_now(units.get(u))]
    if failed_now:
        _save_units(state_dir, units)
    for unit in names:
        info = units.get(unit)
        if verb == "show":
            shown = info or _not_found(unit)
            for key in properties or [k for k in shown if k not in _HIDDEN]:
                print(f"{key}={shown.get(key, '')}")
        elif info is None:
            if verb == "is-active":
                print("inactive")
                status = 3
            elif verb == "status":
                print(f"Unit {unit} could not be found.", file=sys.stderr)
                status = 4
            else:
                print(f"Failed to {verb} {unit}: Unit {unit} not found.", file=sys.stderr)
                status = 5
        elif verb == "is-active":
            print(info["ActiveState"])
            status = status or (0 if info["ActiveState"] == "active" else 3)
        elif verb == "status":
            _print_status(unit, info)
            status = status or (0 if info["ActiveState"] == "active" else 3)
        else:
            now = host_now(base)
            running = verb != "stop"
            # A new PID from the moment and the unit: the same on every run of a frozen host.
            pid = random.Random(f"{unit}/{verb}/{now}").randint(3000, 60000)
            info.update(
                ActiveState="active" if running else "inactive",
                SubState="running" if running else "dead",
                MainPID=pid if running else 0,
                ActiveEnterTimestamp=_systemd_time(now) if running else info["ActiveEnterTimestamp"],
            )
            _record(base, unit, info, verb, now)
            if running and info.get(START_FAILS):
                _start_fails(base, unit, info, now)
    if verb in ("restart", "start", "stop"):
        _save_units(state_dir, units)
    return status


_READS = ("show", "status", "is-active")


def _exits_now(info: dict[str, object] | None) -> bool:
    """A unit started with a broken configuration: this read still sees it running (the count
    goes down), or it has exited and is failed from now on. True when ``info`` changed."""
    if info is None or _FAILS_AFTER_READS not in info:
        return False
    left = int(str(info[_FAILS_AFTER_READS]))
    if left > 0:
        info[_FAILS_AFTER_READS] = left - 1
        return True
    failure = info[START_FAILS]
    assert isinstance(failure, dict)
    del info[_FAILS_AFTER_READS]
    info.update(
        ActiveState="failed", SubState="failed", MainPID=0, Result=str(failure.get("result", "exit-code"))
    )
    return True


def _start_fails(root: Path, unit: str, info: dict[str, object], now: float) -> None:
    """The started process exits with its configuration error: its lines in the unit's log and
    systemd's in the journal; reads after the next one show the unit failed (``_exits_now``)."""
    failure = info[START_FAILS]
    assert isinstance(failure, dict)
    info[_FAILS_AFTER_READS] = 1
    result = str(failure.get("result", "exit-code"))
    log = str(info.get("log") or "")
    if log:
        with open(root / "var" / "log" / log, "a") as handle:
            handle.writelines(f"{iso_time(now)} {line}\n" for line in failure.get("lines") or [])
    stamp, host = syslog_time(now), _hostname(root)
    with open(root / "run" / "systemd" / "journal.log", "a") as journal:
        journal.write(
            f"{stamp} {host} systemd[1]: {unit}: Main process exited, code=exited, status=1/FAILURE\n"
        )
        journal.write(f"{stamp} {host} systemd[1]: {unit}: Failed with result '{result}'.\n")


def _print_status(unit: str, info: dict[str, object]) -> None:
    print(f"● {unit} - {info['Description']}")
    print(f"     Loaded: loaded (/etc/systemd/system/{unit}; enabled; preset: enabled)")
    print(f"     Active: {info['ActiveState']} ({info['SubState']}) since {info['ActiveEnterTimestamp']}")
    if info["MainPID"]:
        print(f"   Main PID: {info['MainPID']}")
    print("       Note: simulated by the chatops demo")
