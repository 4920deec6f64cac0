"""The demo hosts' logs, the live ones written up to now and the rotated ones (``access.log.2.gz``,
``api.log-20250101`` ...) dated the days they were rotated. ``build_logs(log_dir, now, host)``:

* web-03 (nginx, api, a small postgresql, syslog): the api's rotated logs were never compressed,
  they are what fills the disk; the live ``api/api.log`` ends in a retry loop, the story of the
  high-CPU scenario.
* db-01 (the orders database: postgresql, syslog): rotated and compressed as they should be, and
  healthy: the orders API's quick queries, checkpoints, autovacuum ("check db-01's load" finds
  no fault). Its incident, a report query that saturates it, is written into its live log only
  when it starts (``emulator.demo.incident``, the demo's alert button).
"""

from __future__ import annotations

import gzip
import os
import random
import time
from collections.abc import Callable, Sequence
from pathlib import Path

WEB_HOST = "web-03"
DB_HOST = "db-01"
HOSTNAME = WEB_HOST  # the first host: what a host without an ``etc/hostname`` calls itself
DAY = 86400.0
API_PID = 2314
POSTGRES_PID = 1187  # db-01's postgres; web-03's is the 902 of ``emulator.demo.systemctl``
REPORT_PID = 31877  # db-01's backend that runs the long report query
MB = 1024 * 1024

Line = Callable[[random.Random, float], str]

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


def iso_time(at: float) -> str:
    return time.strftime("%Y-%m-%dT%H:%M:%S", time.gmtime(at)) + f".{int(at * 1000) % 1000:03d}Z"


def syslog_time(at: float) -> str:
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
        f'server: {WEB_HOST}, request: "GET {_path(rng)} HTTP/1.1", upstream: "http://127.0.0.1:8000"'
    )


def _api(rng: random.Random, at: float) -> str:
    worker = API_PID + rng.randint(1, 8)
    if rng.random() < 0.03:
        return f"{iso_time(at)} WARN  api[{worker}] slow query orders_by_customer took {rng.randint(800, 2400)}ms"
    status = rng.choices([200, 201, 404], [90, 6, 4])[0]
    return (
        f"{iso_time(at)} INFO  api[{worker}] {rng.choice(['GET', 'GET', 'POST'])} {_path(rng)} {status} "
        f"{rng.randint(3, 180)}ms req={rng.getrandbits(48):012x}"
    )


def _postgres(rng: random.Random, at: float) -> str:
    stamp = postgres_time(at)
    if rng.random() < 0.2:
        return f"{stamp} [{rng.randint(3000, 9000)}] LOG:  checkpoint complete: wrote {rng.randint(50, 900)} buffers"
    return (
        f"{stamp} [{rng.randint(3000, 9000)}] orders@orders LOG:  duration: {rng.uniform(1, 900):.3f} ms  "
        "statement: SELECT * FROM orders WHERE customer_id = $1"
    )


def _orders_postgres(rng: random.Random, at: float) -> str:
    """db-01's postgres on a normal day: the orders API's queries, checkpoints, autovacuum."""
    stamp = postgres_time(at)
    pid = rng.randint(3000, 30000)
    roll = rng.random()
    if roll < 0.1:
        return f"{stamp} [{pid}] LOG:  checkpoint complete: wrote {rng.randint(900, 9000)} buffers"
    if roll < 0.15:
        return (
            f'{stamp} [{pid}] LOG:  automatic vacuum of table "orders.public.order_items": '
            f"index scans: 1, pages: {rng.randint(100, 900)} removed"
        )
    return (
        f"{stamp} [{pid}] orders@orders LOG:  duration: {rng.uniform(1, 400):.3f} ms  "
        "statement: SELECT * FROM orders WHERE customer_id = $1"
    )


def postgres_time(at: float) -> str:
    return time.strftime("%Y-%m-%d %H:%M:%S.000 UTC", time.gmtime(at))


def _syslog_of(hostname: str) -> Line:
    """Syslog lines of ``hostname``."""

    def line(rng: random.Random, at: float) -> str:
        return _syslog(rng, at, hostname)

    return line


def _syslog(rng: random.Random, at: float, hostname: str) -> str:
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
    return f"{syslog_time(at)} {hostname} {text}"


def _retry_loop(start: float, count: int) -> list[str]:
    """The end of the live api log: a job retried with no backoff, which is what burns the CPU."""
    lines = []
    attempt = 3391 - count
    for index in range(count):
        at = start + index * 0.8
        attempt += 1
        worker = API_PID + 1 + index % 8
        lines.append(
            f"{iso_time(at)} ERROR api[{worker}] job 4812 (invoice-export): payments-db connect timeout after 5000ms"
        )
        lines.append(
            f"{iso_time(at + 0.01)} WARN  api[{worker}] job 4812 (invoice-export): retrying now "
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


def fill_line(kind: str, hostname: str) -> Line:
    """The line generator an eval scenario's ``fill`` names (``emulator.eval.fleet.FILL_KINDS``)."""
    kinds: dict[str, Line] = {
        "nginx-access": _access,
        "nginx-error": _nginx_error,
        "api": _api,
        "postgres": _postgres,
        "postgres-busy": _orders_postgres,
        "syslog": _syslog_of(hostname),
    }
    return kinds[kind]


def write_filled(path: Path, kind: str, hostname: str, end: float, size: int, tail: Sequence[str]) -> None:
    """A log of about ``size`` bytes of ``kind``'s lines ending with ``tail``, modified at ``end``."""
    _write(path, fill_line(kind, hostname), random.Random(f"{path.name}/{kind}"), end, size, tail)


def build_logs(log_dir: Path, now: float, host: str = WEB_HOST, seed: int = 3) -> None:
    """The logs of ``host`` (web-03 or db-01) in ``log_dir``."""
    builders = {WEB_HOST: _web_logs, DB_HOST: _db_logs}
    if host not in builders:
        raise ValueError(f"no simulated host {host!r}: the demo has {', '.join(builders)}")
    builders[host](log_dir, now, random.Random(seed))


def _web_logs(log_dir: Path, now: float, rng: random.Random) -> None:
    """web-03: about 60 MB, most of it the api's uncompressed rotated logs."""
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
    _rotations(log_dir, "syslog", _syslog_of(WEB_HOST), rng, now, [200_000, 500_000, *[60_000] * 5])


def _db_logs(log_dir: Path, now: float, rng: random.Random) -> None:
    """db-01: a healthy postgres whose rotations are compressed (nothing here for a cleanup to find)."""
    _rotations(
        log_dir / "postgresql",
        "postgresql-15-main.log",
        _orders_postgres,
        rng,
        now,
        [2 * MB, 4 * MB, *[3 * MB] * 5],
    )
    _rotations(log_dir, "syslog", _syslog_of(DB_HOST), rng, now, [150_000, 300_000, *[50_000] * 5])
