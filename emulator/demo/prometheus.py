"""The demo's Prometheus: a small server answering Prometheus's query API about the simulated hosts,
so the built-in ``prometheus_query`` / ``prometheus_range`` tools (``CHATOPS_PROMETHEUS_URL``) read
their metrics and the bot charts them.

Why a small API of our own rather than Debian's ``prometheus`` where it is installed: a real
Prometheus only knows what it scraped, and the hosts are simulated. It would need an exporter per
host and an hour of scraping (or a backfill with ``promtool``) before a chart of the last hour
shows anything, a second way to run the demo on the machines that have it, and a second story
that could disagree with the hosts' own ``uptime``. The series here are computed, for any moment,
from the same state the hosts' commands read (``emulator.demo.system``: ``load_at``), so the chart
and ``uptime`` tell one story, from the first second, on every machine. What is served is the
real API's shape, checked by the real tools: ``GET`` or form ``POST`` of ``/api/v1/query``
(``query``, ``time``) and ``/api/v1/query_range`` (``query``, ``start``, ``end``, ``step``), answering
``{"status": "success", "data": {"resultType": "vector" | "matrix", "result": [...]}}`` with
samples as ``[unix_seconds, "value"]``, and errors as ``{"status": "error", "errorType":
"bad_data", "error": ...}`` with a 400, as Prometheus does. Queries are series selectors only
(``emulator.demo.promql``); anything else is refused saying so.

The series, per host (``instance="NAME:9100"``, ``job="node"``, as node_exporter's would be):
``up`` (1), ``node_load1``, ``node_load5`` and ``node_load15``, from the host's boot on (no sample
before it). db-01's load is low until its incident starts (``emulator.demo.incident``) and high
from that moment on; web-03's is high while its api runs.
"""

from __future__ import annotations

import json
import time
from collections.abc import Callable, Mapping, Sequence
from dataclasses import dataclass
from http.server import BaseHTTPRequestHandler
from pathlib import Path
from typing import Any
from urllib.parse import parse_qsl, urlsplit

from emulator.demo.promql import BadData, parse_selector, parse_step, parse_time, range_times, sample_value
from emulator.demo.system import HostSystem
from emulator.models.http_base import BackgroundServer

EXPORTER_PORT = 9100
MAX_FORM_BYTES = 64 * 1024
Value = Callable[[float], float]


@dataclass(frozen=True)
class Series:
    """One time series: its labels and its value at any moment from ``since`` on."""

    labels: Mapping[str, str]
    value_at: Value
    since: float


def host_series(root: Path) -> list[Series]:
    """The series of the simulated host at ``root`` (read afresh at every query)."""
    system = HostSystem(root)
    base = {"instance": f"{system.name}:{EXPORTER_PORT}", "job": "node"}
    since = system.boot_time()

    def load(index: int) -> Value:
        return lambda at: system.load_at(at)[index]

    named: list[tuple[str, Value]] = [("up", lambda at: 1.0)]
    named += [(f"node_load{minutes}", load(index)) for index, minutes in enumerate((1, 5, 15))]
    return [Series({"__name__": name, **base}, value, since) for name, value in named]


def sampled_series(labels: Mapping[str, str], values: Sequence[float], step: float, last: float) -> Series:
    """A series of ``values`` ``step`` seconds apart, the last one at ``last`` and holding after it."""
    since = last - step * (len(values) - 1)

    def value_at(at: float) -> float:
        return values[min(len(values) - 1, max(0, int((at - since) // step)))]

    return Series(labels, value_at, since)


class PrometheusAPI(BackgroundServer):
    """The server, listening on ``host``:``port`` (any free port by default) until ``close()``."""

    def __init__(
        self,
        roots: Sequence[Path],
        host: str = "127.0.0.1",
        port: int = 0,
        fixed: Sequence[Series] = (),
    ) -> None:
        """``roots``: the simulated hosts whose series are computed from their state; ``fixed``:
        series given as they are (an eval scenario's, ``sampled_series``)."""
        self.roots = list(roots)
        self.fixed = list(fixed)
        super().__init__(_Handler, host, port, name="demo-prometheus")

    @property
    def url(self) -> str:
        """The base URL for ``CHATOPS_PROMETHEUS_URL``."""
        return self.root_url

    def series(self) -> list[Series]:
        return [*self.fixed, *(series for root in self.roots for series in host_series(root))]

    def answer(self, path: str, params: Mapping[str, str]) -> tuple[int, dict[str, Any]]:
        """The status and body of a request for ``path`` with ``params``."""
        try:
            if path == "/api/v1/query":
                return 200, _success("vector", self._instant(params))
            if path == "/api/v1/query_range":
                return 200, _success("matrix", self._range(params))
        except BadData as error:
            return 400, {"status": "error", "errorType": "bad_data", "error": str(error)}
        return 404, {"status": "error", "errorType": "not_found", "error": f"no API at {path}"}

    def _instant(self, params: Mapping[str, str]) -> list[dict[str, Any]]:
        selector = parse_selector(_required(params, "query"))
        at = parse_time(params["time"], "time") if params.get("time") else time.time()
        return [
            {"metric": dict(s.labels), "value": [round(at, 3), sample_value(s.value_at(at))]}
            for s in self._matching(selector.matches)
            if at >= s.since
        ]

    def _range(self, params: Mapping[str, str]) -> list[dict[str, Any]]:
        selector = parse_selector(_required(params, "query"))
        start = parse_time(_required(params, "start"), "start")
        end = parse_time(_required(params, "end"), "end")
        times = range_times(start, end, parse_step(_required(params, "step")))
        result = []
        for series in self._matching(selector.matches):
            values = [[round(at, 3), sample_value(series.value_at(at))] for at in times if at >= series.since]
            if values:
                result.append({"metric": dict(series.labels), "values": values})
        return result

    def _matching(self, matches: Callable[[Mapping[str, str]], bool]) -> list[Series]:
        found = [series for series in self.series() if matches(series.labels)]
        return sorted(found, key=lambda series: sorted(series.labels.items()))


def _required(params: Mapping[str, str], name: str) -> str:
    value = params.get(name, "")
    if not value:
        raise BadData(f'invalid parameter "{name}": missing')
    return value


def _success(kind: str, result: list[dict[str, Any]]) -> dict[str, Any]:
    return {"status": "success", "data": {"resultType": kind, "result": result}}


class _Handler(BaseHTTPRequestHandler):
    server_version = "demo-prometheus"

    def do_GET(self) -> None:
        parts = urlsplit(self.path)
        if parts.path in ("/-/ready", "/-/healthy"):
            self._send(200, b"Prometheus (the chatops demo's) is Ready.\n", "text/plain")
            return
        self._answer(parts.path, dict(parse_qsl(parts.query)))

    def do_POST(self) -> None:
        length = int(self.headers.get("Content-Length") or 0)
        if length > MAX_FORM_BYTES:
            self._send(413, b"request too large\n", "text/plain")
            return
        form = self.rfile.read(length).decode(errors="replace")
        parts = urlsplit(self.path)
        self._answer(parts.path, {**dict(parse_qsl(parts.query)), **dict(parse_qsl(form))})

    def _answer(self, path: str, params: Mapping[str, str]) -> None:
        owner: PrometheusAPI = self.server.owner  # type: ignore[attr-defined]
        status, body = owner.answer(path, params)
        self._send(status, json.dumps(body).encode(), "application/json")

    def _send(self, status: int, body: bytes, kind: str) -> None:
        self.send_response(status)
        self.send_header("Content-Type", kind)
        self.send_header("Content-Length", str(len(body)))
        self.end_headers()
        self.wfile.write(body)

    def log_message(self, format: str, *args: Any) -> None:
        """Quiet: the demo's console is for people."""
