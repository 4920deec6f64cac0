"""The Dockerfile as a reviewer reads it (the build itself is `make image`, not part of `make test`),
and the image's healthcheck (deploy/docker/healthcheck.py) against a real HTTP server."""

from __future__ import annotations

import importlib.util
import re
import threading
from collections.abc import Iterator
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer
from pathlib import Path
from types import ModuleType

import pytest

from bot.ops.cli import SUBCOMMANDS

ROOT = Path(__file__).resolve().parents[2]
DOCKERFILE = (ROOT / "Dockerfile").read_text()


def instructions() -> list[tuple[str, str]]:
    """(INSTRUCTION, arguments) with continuation lines joined and comments dropped."""
    text = re.sub(
        r"\\\n", " ", "\n".join(line for line in DOCKERFILE.splitlines() if not line.lstrip().startswith("#"))
    )
    return [(line.split()[0].upper(), line.split(None, 1)[1]) for line in text.splitlines() if line.strip()]


def final_stage() -> list[tuple[str, str]]:
    steps = instructions()
    last_from = max(i for i, (op, _) in enumerate(steps) if op == "FROM")
    return steps[last_from:]


def test_multi_stage_on_a_base_chosen_at_build_time() -> None:
    steps = instructions()
    froms = [args for op, args in steps if op == "FROM"]
    assert froms == ["${BASE_IMAGE} AS build", "${BASE_IMAGE}"]
    assert ("ARG", "BASE_IMAGE=python:3.11-slim-bookworm") in steps[: steps.index(("FROM", froms[0]))]


def test_the_final_stage_runs_chatops_as_a_non_root_user() -> None:
    final = dict(final_stage())
    assert final["USER"] == "10001:10001"
    assert final["ENTRYPOINT"] == '["chatops"]' and final["CMD"] == '["web"]'
    assert "chatops-healthcheck" in final["HEALTHCHECK"]
    assert "web" in SUBCOMMANDS and "worker" in SUBCOMMANDS and "runner" in SUBCOMMANDS


def test_no_build_tools_or_secrets_reach_the_final_image() -> None:
    final = final_stage()
    runs = " ".join(args for op, args in final if op == "RUN")
    assert not re.search(r"\b(gcc|g\+\+|build-essential|make|python3-dev|python3-venv|pip)\b", runs)
    copies = [args for op, args in final if op == "COPY"]
    assert all(
        c.startswith(("--from=build", "--chmod=0755 deploy/docker/healthcheck.py", "manifest.json"))
        for c in copies
    )
    assert "--only-binary=:all:" in DOCKERFILE  # a dependency that would need a compiler fails the build
    # The proxy CA comes as a build secret, mounted for one RUN, never COPYed or put in ENV/ARG.
    assert "--mount=type=secret,id=ca-bundle" in DOCKERFILE
    env_and_args = " ".join(args for op, args in instructions() if op in ("ENV", "ARG"))
    assert not re.search(r"TOKEN|SECRET|PASSWORD|API_KEY|CERT", env_and_args)


def test_the_build_context_leaves_out_local_state() -> None:
    ignore = (ROOT / ".dockerignore").read_text().splitlines()
    assert ignore[0:2] == ["# Build context of the Dockerfile: only what the image installs.", "*"]
    included = {line[1:].rstrip("/") for line in ignore if line.startswith("!")}
    assert not {".env", ".venv", ".git", "tests", ".demo"} & included
    for op, args in instructions():
        if op == "COPY" and not args.startswith("--from"):
            source = args.split()[-2]
            assert source in included or any(source.startswith(i) for i in included), source


@pytest.fixture(scope="module")
def healthcheck() -> ModuleType:
    spec = importlib.util.spec_from_file_location(
        "chatops_healthcheck", ROOT / "deploy/docker/healthcheck.py"
    )
    assert spec is not None and spec.loader is not None
    module = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(module)
    return module


class _Health(BaseHTTPRequestHandler):
    status = 200

    def do_GET(self) -> None:
        self.send_response(self.status if self.path == "/healthz" else 404)
        self.send_header("Content-Length", "0")
        self.end_headers()

    def log_message(self, *args: object) -> None:
        pass


@pytest.fixture
def server() -> Iterator[ThreadingHTTPServer]:
    httpd = ThreadingHTTPServer(("127.0.0.1", 0), _Health)
    thread = threading.Thread(target=httpd.serve_forever, kwargs={"poll_interval": 0.05}, daemon=True)
    thread.start()
    yield httpd
    httpd.shutdown()
    httpd.server_close()


def fake_proc(tmp_path: Path, *argvs: list[str]) -> Path:
    proc = tmp_path / "proc"
    (proc / "self").mkdir(parents=True)  # not a pid: skipped
    for pid, argv in enumerate(argvs, start=1):
        (proc / str(pid)).mkdir()
        (proc / str(pid) / "cmdline").write_bytes(b"\0".join(a.encode() for a in argv) + b"\0")
    return proc


def test_web_is_healthy_on_200_only(
    healthcheck: ModuleType, server: ThreadingHTTPServer, tmp_path: Path
) -> None:
    port = server.server_address[1]
    proc = fake_proc(
        tmp_path, ["/opt/chatops/bin/python3", "/opt/chatops/bin/chatops", "web", "--port", str(port)]
    )
    assert healthcheck.check(proc, {}) == (True, f"GET /healthz on port {port}: 200")
    _Health.status = 503  # Redis down: the web process says so
    try:
        assert healthcheck.check(proc, {}) == (False, f"GET /healthz on port {port}: 503")
    finally:
        _Health.status = 200


def test_web_port_comes_from_the_environment(
    healthcheck: ModuleType, server: ThreadingHTTPServer, tmp_path: Path
) -> None:
    port = server.server_address[1]
    proc = fake_proc(tmp_path, ["/usr/bin/docker-init", "--"], ["/opt/chatops/bin/chatops", "web"])
    assert healthcheck.check(proc, {"PORT": str(port)})[0] is True
    server_gone = fake_proc(
        tmp_path / "other", ["/opt/chatops/bin/chatops", "web", f"--port={port + 1 if port < 65535 else 1}"]
    )
    healthy, said = healthcheck.check(server_gone, {})
    assert not healthy and "GET /healthz" in said


def test_other_commands_and_no_process(healthcheck: ModuleType, tmp_path: Path) -> None:
    worker = fake_proc(tmp_path, ["/opt/chatops/bin/python3", "/opt/chatops/bin/chatops", "worker"])
    assert healthcheck.check(worker, {}) == (True, "chatops worker is running (no HTTP endpoint)")
    # A process that merely mentions chatops in its arguments is not the chatops process.
    impostor = fake_proc(tmp_path / "x", ["/bin/sh", "-c", "sleep 1; chatops web"])
    assert healthcheck.check(impostor, {}) == (False, "no chatops process is running")
