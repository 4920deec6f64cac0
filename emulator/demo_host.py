"""The demo's simulated host "web-03": a folder of realistic logs and a ``systemctl`` that pretends.

``build_host(root, bin_dir)`` makes, from scratch:

* ``root/var/log``: nginx, api, postgresql and syslog logs, the live ones written up to now and
  the rotated ones (``access.log.2.gz``, ``api.log-20250101`` ...) dated the days they were
  rotated. The api's rotated logs were never compressed: they are what fills the disk. The live
  ``api/api.log`` ends in a retry loop, the story of the high-CPU scenario.
* ``root/run/systemd/units.json``: the state of the host's services (``api``, ``nginx``,
  ``postgresql``).
* ``bin_dir/systemctl``: an executable that answers ``show``, ``status``, ``is-active``,
  ``restart``, ``start`` and ``stop`` from that state, the way systemctl prints them, and records
  every restart in ``root/run/systemd/journal.log`` and the unit's own log. Put ``bin_dir`` first
  on the worker's ``PATH`` and the real ``service_status`` / ``service_restart`` tools (systemd
  backend) manage these services without touching the machine's own.

The tools that read the demo host are the real ones (``CHATOPS_LOG_DIRS`` points at
``root/var/log``); only the host is simulated.
"""

from __future__ import annotations

import gzip
import json
import os
import random
import shutil
import stat
import sys
import time
from collections.abc import Callable, Sequence
from dataclasses import dataclass
from pathlib import Path

HOSTNAME = "web-03"
DAY = 86400.0
API_PID = 2314
_UNITS = {
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
}

Line = Callable[[random.Random, float], str]


@dataclass(frozen=True)
class DemoHost:
    """Where the simulated host lives: ``log_dir`` for ``CHATOPS_LOG_DIRS``, ``bin_dir`` for ``PATH``."""

    root: Path
    log_dir: Path
    bin_dir: Path

    @property
    def state_dir(self) -> Path:
        return self.root / "run" / "systemd"


# -- log lines ---------------------------------------------------------------------------------

_PATHS = [
    "/v1/orders",
    "/v1/orders/{id}",
    "/v1/cart",
    "/v1/products?page={n}",
    "/healthz",
    "/v1/invoices/{id}",
]
_AGENTS = ['"Mozilla/5.0 (X11; Linux x86_64) Firefox/126.0"', '"okhttp/4.12.0"', '"kube-probe/1.29"']


def _iso(at: float) -> str:
    return time.strftime("%Y-%m-%dT%H:%M:%S", time.gmtime(at)) + f".{int(at * 1000) % 1000:03d}Z"


def _syslog_time(at: float) -> str:
    return time.strftime("%b %d %H:%M:%S", time.gmtime(at))


def _path(rng: random.Random) -> str:
    return rng.choice(_PATHS).format(id=rng.randint(10000, 99999), n=rng.randint(1, 40))


def _access(rng: random.Random, at: float) -> str:
    status = rng.choices([200, 201, 304, 404, 499, 502], [80, 5, 8, 4, 1, 2])[0]
    stamp = time.strftime("%d/%b/%Y:%H:%M:%S +0000", time.gmtime(at))
    method = rng.choices(["GET", "POST"], [85, 15])[0]
    return (
        f'10.0.{rng.randint(0, 7)}.{rng.randint(2, 250)} - - [{stamp}] "{method} {_path(rng)} HTTP/1.1" '
        f'{status} {rng.randint(120, 48000)} "-" {rng.choice(_AGENTS)} rt={rng.uniform(0.001, 0.4):.3f}'
    )


def _nginx_error(rng: random.Random, at: float) -> str:
    stamp = time.strftime("%Y/%m/%d %H:%M:%S", time.gmtime(at))
    return (
        f"{stamp} [error] 811#811: *{rng.randint(100000, 999999)} upstream timed out (110: Connection timed out) "
        f"while reading response header from upstream, client: 10.0.{rng.randint(0, 7)}.{rng.randint(2, 250)}, "
        f'server: {HOSTNAME}, request: "GET {_path(rng)} HTTP/1.1", upstream: "http://127.0.0.1:8000"'
    )


def _api(rng: random.Random, at: float) -> str:
    worker = API_PID + rng.randint(1, 8)
    if rng.random() < 0.03:
        return f"{_iso(at)} WARN  api[{worker}] slow query orders_by_customer took {rng.randint(800, 2400)}ms"
    status = rng.choices([200, 201, 404], [90, 6, 4])[0]
    return (
        f"{_iso(at)} INFO  api[{worker}] {rng.choice(['GET', 'GET', 'POST'])} {_path(rng)} {status} "
        f"{rng.randint(3, 180)}ms req={rng.getrandbits(48):012x}"
    )


def _postgres(rng: random.Random, at: float) -> str:
    stamp = time.strftime("%Y-%m-%d %H:%M:%S.000 UTC", time.gmtime(at))
    if rng.random() < 0.2:
        return f"{stamp} [{rng.randint(3000, 9000)}] LOG:  checkpoint complete: wrote {rng.randint(50, 900)} buffers"
    return (
        f"{stamp} [{rng.randint(3000, 9000)}] orders@orders LOG:  duration: {rng.uniform(1, 900):.3f} ms  "
        "statement: SELECT * FROM orders WHERE customer_id = $1"
    )


def _syslog(rng: random.Random, at: float) -> str:
    event = rng.choice(
        [
            "CRON[{p}]: (root) CMD (command -v debian-sa1 > /dev/null && debian-sa1 1 1)",
            "systemd[1]: Starting logrotate.service - Rotate log files...",
            "systemd[1]: logrotate.service: Deactivated successfully.",
            "kernel: [UFW BLOCK] IN=eth0 OUT= SRC=185.{a}.{b}.{c} DST=10.0.1.13 PROTO=TCP DPT=22",
            "sshd[{p}]: Accepted publickey for deploy from 10.0.0.{c} port 51422 ssh2",
        ]
    )
    text = event.format(
        p=rng.randint(1000, 60000), a=rng.randint(1, 250), b=rng.randint(1, 250), c=rng.randint(2, 250)
    )
    return f"{_syslog_time(at)} {HOSTNAME} {text}"


def _retry_loop(start: float, count: int) -> list[str]:
    """The end of the live api log: a job retried with no backoff, which is what burns the CPU."""
    lines = []
    attempt = 3391 - count
    for index in range(count):
        at = start + index * 0.8
        attempt += 1
        worker = API_PID + 1 + index % 8
        lines.append(
            f"{_iso(at)} ERROR api[{worker}] job 4812 (invoice-export): payments-db connect timeout after 5000ms"
        )
        lines.append(
            f"{_iso(at + 0.01)} WARN  api[{worker}] job 4812 (invoice-export): retrying now "
            f"(attempt {attempt}, backoff disabled by RETRY_BACKOFF=0)"
        )
    return lines


# -- files -------------------------------------------------------------------------------------


def _write(
    path: Path, make: Line, rng: random.Random, end: float, size: int, tail: Sequence[str] = ()
) -> None:
    """A log of about ``size`` bytes whose last line is written at ``end`` (its mtime).

    A block of a few hundred lines is repeated to reach the size: it keeps building the host fast,
    and nobody reads the middle of a rotated log.
    """
    path.parent.mkdir(parents=True, exist_ok=True)
    block_lines = 400
    span = min(DAY, max(600.0, size / 40))  # seconds the file covers
    start = end - span
    block = "\n".join(make(rng, start + span * i / block_lines) for i in range(block_lines)) + "\n"
    data = block.encode()
    repeats = max(1, size // len(data))
    last = "\n".join([*(make(rng, end - 60 + i) for i in range(20)), *tail]) + "\n"
    opener = gzip.open if path.suffix == ".gz" else open
    with opener(path, "wb") as handle:
        for _ in range(repeats):
            handle.write(data)
        handle.write(last.encode())
    os.utime(path, (end, end))


def _rotations(
    directory: Path,
    name: str,
    make: Line,
    rng: random.Random,
    now: float,
    sizes: Sequence[int],
    dated: bool = False,
    tail: Sequence[str] = (),
) -> None:
    """``name`` (live, ending with ``tail``), then one rotated file a day: ``.1``, ``.2.gz`` ... or
    ``-YYYYMMDD`` when ``dated``."""
    for age, size in enumerate(sizes):
        end = now if age == 0 else now - age * DAY + 0.25 * DAY  # rotated at 06:00 or so
        if age == 0:
            file = name
        elif dated:
            file = f"{name}-{time.strftime('%Y%m%d', time.gmtime(end))}"
        else:
            file = f"{name}.{age}" if age == 1 else f"{name}.{age}.gz"
        _write(directory / file, make, rng, end, size, tail if age == 0 else ())


MB = 1024 * 1024


def build_logs(log_dir: Path, now: float, seed: int = 3) -> None:
    """The logs of web-03: about 60 MB, most of it the api's uncompressed rotated logs."""
    rng = random.Random(seed)
    _rotations(log_dir / "nginx", "access.log", _access, rng, now, [900_000, 3 * MB, *[400_000] * 6])
    _rotations(log_dir / "nginx", "error.log", _nginx_error, rng, now, [60_000, 120_000, 40_000, 40_000])
    # logrotate's "compress" was dropped from the api's config: its rotations stay full size.
    api_sizes = [1_200_000, *[5 * MB] * 9]
    _rotations(
        log_dir / "api", "api.log", _api, rng, now, api_sizes, dated=True, tail=_retry_loop(now - 40, 24)
    )
    _rotations(
        log_dir / "postgresql",
        "postgresql-15-main.log",
        _postgres,
        rng,
        now,
        [300_000, 800_000, *[90_000] * 5],
    )
    _rotations(log_dir, "syslog", _syslog, rng, now, [200_000, 500_000, *[60_000] * 5])


def build_host(root: Path, bin_dir: Path, now: float | None = None) -> DemoHost:
    """A fresh simulated host under ``root`` (anything there before is removed) and its ``systemctl``."""
    now = time.time() if now is None else now
    if root.exists():
        shutil.rmtree(root)
    host = DemoHost(root=root, log_dir=root / "var" / "log", bin_dir=bin_dir)
    build_logs(host.log_dir, now)
    host.state_dir.mkdir(parents=True)
    boot = now - 3 * DAY - 5 * 3600
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
        for unit, info in _UNITS.items()
    }
    _save_units(host.state_dir, units)
    write_systemctl(bin_dir, root)
    return host


def _systemd_time(at: float) -> str:
    return time.strftime("%a %Y-%m-%d %H:%M:%S UTC", time.gmtime(at))


# -- systemctl -----------------------------------------------------------------------------------


def write_systemctl(bin_dir: Path, root: Path) -> Path:
    """``bin_dir/systemctl``: this module's ``systemctl_main`` for the host at ``root``."""
    bin_dir.mkdir(parents=True, exist_ok=True)
    script = bin_dir / "systemctl"
    package_root = Path(__file__).resolve().parent.parent
    script.write_text(
        f"#!{sys.executable}\n"
        f"# The chatops demo's simulated systemctl: it manages the services of the simulated host in\n"
        f"# {root} and never touches this machine's own. Written by python -m emulator.demo.\n"
        "import sys\n"
        f"sys.path.insert(0, {str(package_root)!r})\n"
        "from emulator.demo_host import systemctl_main\n"
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


def _unit_name(name: str) -> str:
    return name if "." in name else f"{name}.service"


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


def _record(root: Path, unit: str, info: dict[str, object], verb: str, now: float) -> None:
    """A journal line for the action, and systemd's lines in the unit's own log."""
    stamp = _syslog_time(now)
    with open(root / "run" / "systemd" / "journal.log", "a") as journal:
        journal.write(
            f"{stamp} {HOSTNAME} systemctl[{os.getpid()}]: {verb} {unit} (simulated by the chatops demo)\n"
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
            handle.writelines(f"{_iso(now)} INFO  systemd[1]: {line}\n" for line in lines)


def systemctl_main(argv: Sequence[str], root: str) -> int:
    """A small systemctl over ``root/run/systemd/units.json``; prints what systemctl would."""
    base = Path(root)
    state_dir = base / "run" / "systemd"
    args = [a for a in argv if a not in ("--no-pager", "--no-ask-password", "--quiet", "-q")]
    properties = [p for a in args if a.startswith("--property=") for p in a.split("=", 1)[1].split(",") if p]
    args = [a for a in args if not a.startswith("--property=")]
    if not args:
        print("systemctl (simulated by the chatops demo): show, status, is-active, restart, start, stop")
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
    for unit in names:
        info = units.get(unit)
        if verb == "show":
            shown = info or _not_found(unit)
            for key in properties or [k for k in shown if k != "log"]:
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
            now = time.time()
            running = verb != "stop"
            info.update(
                ActiveState="active" if running else "inactive",
                SubState="running" if running else "dead",
                MainPID=random.randint(3000, 60000) if running else 0,
                ActiveEnterTimestamp=_systemd_time(now) if running else info["ActiveEnterTimestamp"],
            )
            _record(base, unit, info, verb, now)
    if verb in ("restart", "start", "stop"):
        _save_units(state_dir, units)
    return status


def _print_status(unit: str, info: dict[str, object]) -> None:
    print(f"● {unit} - {info['Description']}")
    print(f"     Loaded: loaded (/etc/systemd/system/{unit}; enabled; preset: enabled)")
    print(f"     Active: {info['ActiveState']} ({info['SubState']}) since {info['ActiveEnterTimestamp']}")
    if info["MainPID"]:
        print(f"   Main PID: {info['MainPID']}")
    print("       Note: simulated by the chatops demo")
