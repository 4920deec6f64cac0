"""Fixtures for the tools tests: fake commands on PATH that record their argv, a local HTTP server."""

from __future__ import annotations

import threading
from collections.abc import Iterator
from http.server import ThreadingHTTPServer
from pathlib import Path

import pytest

from tests.support.http_routes import Routes
from tests.tools.fakes import FakeCommands


@pytest.fixture
def fake_commands(tmp_path: Path) -> FakeCommands:
    return FakeCommands(tmp_path / "fakebin")


@pytest.fixture
def http_server() -> Iterator[str]:
    """Base URL of a local server on an ephemeral port (``tests.support.http_routes.Routes``)."""
    server = ThreadingHTTPServer(("127.0.0.1", 0), Routes)
    server.daemon_threads = True
    thread = threading.Thread(target=server.serve_forever, kwargs={"poll_interval": 0.05}, daemon=True)
    thread.start()
    yield f"http://127.0.0.1:{server.server_address[1]}"
    server.shutdown()
    server.server_close()
