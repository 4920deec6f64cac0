"""db-01's incident, started by the demo's alert button (``emulator.demo.alert``).

db-01 is healthy until then: "check db-01's load" finds nothing wrong, and says so. When the button
is pressed, before its webhook is sent, ``Incident.start``:

* writes ``run/incident.json`` under db-01's root with the moment: from then on the report query
  (backend ``REPORT_PID``) and the orders API's backends waiting behind it are among db-01's
  processes, its load and memory are high (``emulator.demo.system``), and the demo's Prometheus
  series say so from that moment on (``emulator.demo.prometheus``);
* writes the report's statement into postgresql's live log at that moment, then, from a thread of
  its own, the consequences as they happen: the orders API's queries slowing down (every 3 s),
  connections refused once the slots are full (every 5 s), the report's temporary files (every
  minute). A line is written when its time has come, never ahead of it: the log never holds a
  line from the future.

A press while the incident runs changes nothing. Restarting postgresql ends it (a restart ends
every backend), and the writer stops; a later press starts a new one.
"""

from __future__ import annotations

import json
import math
import threading
import time
from collections.abc import Callable
from pathlib import Path

from emulator.demo.logs import REPORT_PID, postgres_time
from emulator.demo.system import INCIDENT_FILE, HostSystem

POSTGRES_LOG = "var/log/postgresql/postgresql-15-main.log"
"""db-01's live postgresql log, under its root."""
REPORT = (
    "SELECT c.region, sum(i.amount) FROM orders o JOIN order_items i USING (order_id) "
    "JOIN customers c USING (customer_id) GROUP BY c.region  -- monthly-revenue report"
)


def statement_line(started: float) -> str:
    """The report query starting: the first line of the incident."""
    return f"{postgres_time(started)} [{REPORT_PID}] reporting@orders LOG:  statement: {REPORT}"


def _slow_query(at: float, number: int) -> str:
    duration = min(2400, 600 + 150 * number) + number % 7 * 13
    return (
        f"{postgres_time(at)} [{3000 + number * 911 % 27000}] orders@orders LOG:  duration: "
        f"{duration}.412 ms  statement: SELECT * FROM orders WHERE customer_id = $1"
    )


def _refused(at: float, number: int) -> str:
    return (
        f"{postgres_time(at)} [{9000 + number % 900}] orders@orders FATAL:  remaining connection slots "
        "are reserved for non-replication superuser connections"
    )


def _temporary_file(at: float, number: int) -> str:
    return (
        f"{postgres_time(at)} [{REPORT_PID}] reporting@orders LOG:  temporary file: path "
        f'"base/pgsql_tmp/pgsql_tmp{REPORT_PID}.{number}", size 1073741824'
    )


# (seconds after the start of the first one, seconds between them, the line)
_EVENTS: tuple[tuple[float, float, Callable[[float, int], str]], ...] = (
    (1.0, 3.0, _slow_query),
    (2.5, 5.0, _refused),
    (15.0, 60.0, _temporary_file),
)


def incident_lines(started: float, since: float, until: float) -> list[str]:
    """The log lines of the incident that started at ``started`` whose time is after ``since`` and
    not after ``until``, in order."""
    found: list[tuple[float, str]] = []
    for offset, period, line in _EVENTS:
        first = max(0, math.floor((since - started - offset) / period) + 1)
        last = math.floor((until - started - offset) / period)
        for number in range(first, last + 1):
            at = started + offset + period * number
            found.append((at, line(at, number)))
    return [text for _, text in sorted(found, key=lambda item: item[0])]


class Incident:
    """db-01's incident: ``start`` it (the alert button), ``stop`` its log writer (the demo stops)."""

    def __init__(self, root: Path, clock: Callable[[], float] = time.time, interval: float = 1.0) -> None:
        self.root = root
        self._clock = clock
        self._interval = interval
        self._lock = threading.Lock()
        self._stopping = threading.Event()
        self._thread: threading.Thread | None = None

    def start(self) -> bool:
        """Start the incident now; ``False`` when it is already running."""
        with self._lock:
            system = HostSystem(self.root)
            if system.busy():
                return False
            started = self._clock()
            (self.root / INCIDENT_FILE).write_text(json.dumps({"started": started}) + "\n")
            self._append([statement_line(started)])
            self._thread = threading.Thread(
                target=self._write, args=(started,), name="demo-incident-log", daemon=True
            )
            self._thread.start()
            return True

    @property
    def writing(self) -> bool:
        """Whether the log writer still runs (it stops when the incident ends)."""
        with self._lock:
            return self._thread is not None and self._thread.is_alive()

    def stop(self) -> None:
        self._stopping.set()
        with self._lock:
            thread = self._thread
        if thread is not None:
            thread.join(timeout=5)

    def _write(self, started: float) -> None:
        written = started
        while not self._stopping.wait(self._interval):
            now = self._clock()
            system = HostSystem(self.root)
            if not system.busy_at(now) or system.incident_started() != started:
                return  # postgresql was restarted: the report is gone, and so are its consequences
            self._append(incident_lines(started, written, now))
            written = now

    def _append(self, lines: list[str]) -> None:
        if lines:
            with open(self.root / POSTGRES_LOG, "a") as log:
                log.writelines(f"{line}\n" for line in lines)
