"""Real Prometheus and Alertmanager servers for tests: Debian's binaries on free loopback ports.

``start_prometheus(directory)`` writes a configuration that scrapes Prometheus's own ``/metrics``
every second (plus any ``scrape_targets``), evaluates ``rule_files`` every second and, with
``alertmanager_url``, sends its alerts there; it returns once ``/-/ready`` answers and ``up`` has
a sample, so a query sees real data at once. ``start_alertmanager(directory, config_yaml)`` runs
Alertmanager with exactly that configuration (the webhook end-to-end tests point a receiver at
the bot's web process) and ``--cluster.listen-address=`` so it never gossips; ``post_alerts``
fires alerts through its API as Prometheus would.

For the tools' tests: ``build_tools`` builds them with an egress policy that allows nothing (the
configured URLs are reachable anyway), ``call`` / ``failure`` run one call, and ``HostileServer`` is a
local server whose answer a test writes (one that redirects, echoes headers, streams 100,000
series...).

Neither binary can report a port it chose, so a free one is picked by binding port 0 and closing
the socket, and another is tried when the server loses that race. Storage lives in
``directory``; nothing binds 9090 or 9093. Waits are polls with deadlines, never fixed sleeps.
When a binary is missing the test is skipped and says why (``make observability`` installs
``prometheus`` and ``prometheus-alertmanager`` with apt where it can).
"""

from __future__ import annotations

import json
import os
import socket
import subprocess
import threading
import time
from collections.abc import Callable, Iterable, Mapping, Sequence
from dataclasses import dataclass, field
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer
from pathlib import Path
from typing import Any

import httpx
import pytest
import yaml

from tests.support.processes import stop_process
from tools.base import FunctionTool
from tools.builtin.observability import observability_endpoints, observability_tools
from tools.egress import EgressPolicy

PROMETHEUS = os.environ.get("CHATOPS_PROMETHEUS_BIN", "/usr/bin/prometheus")
ALERTMANAGER = os.environ.get("CHATOPS_ALERTMANAGER_BIN", "/usr/bin/prometheus-alertmanager")
HOST = "127.0.0.1"
_START_ATTEMPTS = 5
_READY_SECONDS = 20.0
_STOP_SECONDS = 10.0


@dataclass
class Server:
    """A running Prometheus or Alertmanager on ``url`` (``http://127.0.0.1:PORT``)."""

    name: str
    port: int
    directory: Path
    process: subprocess.Popen[bytes]
    log_file: Path = field(repr=False)

    @property
    def url(self) -> str:
        return f"http://{HOST}:{self.port}"

    @property
    def address(self) -> str:
        """``127.0.0.1:PORT``, as a scrape target or an Alertmanager target is written."""
        return f"{HOST}:{self.port}"

    def log(self) -> str:
        return self.log_file.read_text(errors="replace")

    def stop(self) -> None:
        """SIGTERM (both flush and exit cleanly), SIGKILL if that takes longer than the deadline."""
        stop_process(self.process, _STOP_SECONDS)

    def __enter__(self) -> Server:
        return self

    def __exit__(self, *exc: object) -> None:
        self.stop()


def binary_missing(path: str) -> str | None:
    """Why a server cannot run here, or ``None``."""
    if os.path.isfile(path) and os.access(path, os.X_OK):
        return None
    return (
        f"{path} is not installed: make observability installs Debian's prometheus and "
        "prometheus-alertmanager with apt where it can; elsewhere install them or set "
        "CHATOPS_PROMETHEUS_BIN / CHATOPS_ALERTMANAGER_BIN"
    )


def start_prometheus(
    directory: Path,
    scrape_targets: Sequence[str] = (),
    rule_files: Sequence[Path] = (),
    alertmanager_url: str | None = None,
) -> Server:
    """A running Prometheus scraping itself (job ``prometheus``) and ``scrape_targets``
    (``host:port``, job ``targets``) every second; returns once ``up`` has a sample."""
    _skip_if_missing(PROMETHEUS)
    directory.mkdir(parents=True, exist_ok=True)

    def command(port: int) -> list[str]:
        config = directory / "prometheus.yml"
        config.write_text(_prometheus_config(port, scrape_targets, rule_files, alertmanager_url))
        return [
            PROMETHEUS,
            f"--config.file={config}",
            f"--storage.tsdb.path={directory / 'data'}",
            f"--web.listen-address={HOST}:{port}",
            "--log.level=warn",
        ]

    server = _start("prometheus", directory, command)
    try:
        _wait_for(lambda: _has_samples(server.url, "up"), "Prometheus's first scrape of itself", server)
    except BaseException:
        server.stop()
        raise
    return server


def start_alertmanager(directory: Path, config_yaml: str) -> Server:
    """A running Alertmanager with ``config_yaml`` as its whole configuration, no clustering."""
    _skip_if_missing(ALERTMANAGER)
    directory.mkdir(parents=True, exist_ok=True)
    config = directory / "alertmanager.yml"
    config.write_text(config_yaml)

    def command(port: int) -> list[str]:
        return [
            ALERTMANAGER,
            f"--config.file={config}",
            f"--storage.path={directory / 'data'}",
            f"--web.listen-address={HOST}:{port}",
            "--cluster.listen-address=",
            "--log.level=warn",
        ]

    return _start("alertmanager", directory, command)


NULL_RECEIVER_CONFIG = """\
route:
  receiver: "null"
  group_wait: 1s
receivers:
  - name: "null"
"""
"""An Alertmanager configuration that notifies nobody (for tests of its API only)."""


def post_alerts(am_url: str, alerts: Sequence[Mapping[str, Any]], timeout: float = 5.0) -> None:
    """Fire ``alerts`` (``{"labels": {...}, "annotations": {...}, "startsAt": ...}``) through
    Alertmanager's ``POST /api/v2/alerts``, as Prometheus does; raises on a refusal."""
    response = httpx.post(f"{am_url}/api/v2/alerts", json=list(alerts), timeout=timeout, trust_env=False)
    response.raise_for_status()


# -- the tools, and servers that misbehave ---------------------------------------------------------------

Tools = dict[str, FunctionTool[Any]]


def build_tools(
    prometheus_url: str = "",
    alertmanager_url: str = "",
    *,
    headers: Mapping[str, str] | None = None,
    env: Mapping[str, str] | None = None,
) -> Tools:
    """The observability tools by name, for these URLs (``headers`` sent to both services)."""
    prometheus, alertmanager = observability_endpoints(
        prometheus_url=prometheus_url,
        prometheus_headers=headers or {},
        alertmanager_url=alertmanager_url,
        alertmanager_headers=headers or {},
        env=env or {},
        egress=EgressPolicy(),  # allows nothing: the configured URLs are reachable regardless
    )
    return {tool.definition.name: tool for tool in observability_tools(prometheus, alertmanager)}


def call(tool: FunctionTool[Any], timeout: float = 15, **arguments: Any) -> str:
    """The output of a call that must succeed."""
    result = tool.execute(json.dumps(arguments), timeout=timeout)
    assert not result.is_error, result.output
    return result.output


def failure(tool: FunctionTool[Any], timeout: float = 15, **arguments: Any) -> str:
    """The output of a call that must fail (``Error: ...``)."""
    result = tool.execute(json.dumps(arguments), timeout=timeout)
    assert result.is_error, result.output
    return result.output


class HostileHandler(BaseHTTPRequestHandler):
    """Hands every request to its server's ``answer``."""

    server: _HostileHTTPServer

    def do_GET(self) -> None:
        self.server.owner.requests += 1
        self.server.owner.answer(self)

    do_POST = do_GET

    def reply(self, status: int, body: bytes, location: str | None = None) -> None:
        self.send_response(status)
        self.send_header("Content-Length", str(len(body)))
        if location:
            self.send_header("Location", location)
        self.end_headers()
        self.wfile.write(body)

    def stream(self, status: int, chunks: Iterable[bytes]) -> None:
        """A body without a length, written until the client stops reading."""
        self.send_response(status)
        self.send_header("Content-Type", "application/json")
        self.end_headers()
        try:
            for chunk in chunks:
                self.wfile.write(chunk)
        except (BrokenPipeError, ConnectionResetError):
            pass  # the client stopped reading at its cap
        self.close_connection = True

    def log_message(self, format: str, *args: object) -> None:  # keep test output quiet
        pass


class _HostileHTTPServer(ThreadingHTTPServer):
    owner: HostileServer


class HostileServer:
    """A local server on a free port; ``answer(handler)`` writes each response (default 404)."""

    def __init__(self) -> None:
        self.requests = 0
        self.answer: Callable[[HostileHandler], None] = lambda handler: handler.reply(404, b"")
        self._server = _HostileHTTPServer((HOST, 0), HostileHandler)
        self._server.owner = self
        self._server.daemon_threads = True
        self.url = f"http://{HOST}:{self._server.server_address[1]}"
        thread = threading.Thread(
            target=self._server.serve_forever, kwargs={"poll_interval": 0.05}, daemon=True
        )
        thread.start()

    def close(self) -> None:
        self._server.shutdown()
        self._server.server_close()


# -- internals ---------------------------------------------------------------------------------------


def _skip_if_missing(binary: str) -> None:
    reason = binary_missing(binary)
    if reason is not None:
        pytest.skip(reason)


def _prometheus_config(
    port: int, targets: Sequence[str], rule_files: Sequence[Path], alertmanager_url: str | None
) -> str:
    scrape = [{"job_name": "prometheus", "static_configs": [{"targets": [f"{HOST}:{port}"]}]}]
    if targets:
        scrape.append({"job_name": "targets", "static_configs": [{"targets": list(targets)}]})
    config: dict[str, Any] = {
        "global": {"scrape_interval": "1s", "evaluation_interval": "1s", "scrape_timeout": "1s"},
        "scrape_configs": scrape,
    }
    if rule_files:
        config["rule_files"] = [str(path) for path in rule_files]
    if alertmanager_url:
        address = alertmanager_url.split("://", 1)[-1].rstrip("/")
        config["alerting"] = {"alertmanagers": [{"static_configs": [{"targets": [address]}]}]}
    return yaml.safe_dump(config, sort_keys=False)


def _start(name: str, directory: Path, command: Callable[[int], list[str]]) -> Server:
    last_log = ""
    for _ in range(_START_ATTEMPTS):
        port = _free_port()
        log_file = directory / f"{name}.log"
        with log_file.open("wb") as log:
            process = subprocess.Popen(
                command(port), stdin=subprocess.DEVNULL, stdout=log, stderr=log, start_new_session=True
            )
        server = Server(name, port, directory, process, log_file)
        if _ready(server):
            return server
        server.stop()
        last_log = server.log()
        if "address already in use" not in last_log:
            break  # not the port race: another attempt would fail the same way
    raise AssertionError(f"{name} did not become ready: {last_log.strip()[-1500:] or 'no output'}")


def _ready(server: Server) -> bool:
    """True once ``/-/ready`` answers 200; False if the process exits or the deadline passes."""
    deadline = time.monotonic() + _READY_SECONDS
    while time.monotonic() < deadline and server.process.poll() is None:
        try:
            if httpx.get(f"{server.url}/-/ready", timeout=1.0, trust_env=False).status_code == 200:
                return True
        except httpx.HTTPError:
            pass
        time.sleep(0.05)
    return False


def _has_samples(url: str, query: str) -> bool:
    try:
        response = httpx.get(f"{url}/api/v1/query", params={"query": query}, timeout=2.0, trust_env=False)
        return bool(json.loads(response.text)["data"]["result"])
    except (httpx.HTTPError, ValueError, KeyError, TypeError):
        return False


def _wait_for(probe: Callable[[], bool], what: str, server: Server) -> None:
    deadline = time.monotonic() + _READY_SECONDS
    while not probe():
        if server.process.poll() is not None or time.monotonic() > deadline:
            raise AssertionError(f"timed out waiting for {what}: {server.log().strip()[-1500:]}")
        time.sleep(0.05)


def _free_port() -> int:
    with socket.socket() as probe:
        probe.bind((HOST, 0))
        return int(probe.getsockname()[1])
