"""``chatops web --fd N``: the web process listens on a socket bound by whoever started it.

A port chosen by one process and bound by another seconds later (while it imports) can be taken in
between by any connection on the machine; the eval lost a run to "Address already in use" that way
under load. With ``--fd`` the port is held from the moment it is chosen. What is not a bound TCP
socket is refused in one line before anything is served, and the descriptor is left alone.
"""

from __future__ import annotations

import os
import signal
import socket
import subprocess
import sys
from collections.abc import Iterator
from pathlib import Path

import pytest

from bot.web import prefork
from tests.support.slack_http import http
from tests.support.waiting import wait_for

ROOT = Path(__file__).resolve().parents[3]
PREFIX = "chatops: configuration error: "


@pytest.fixture
def listening() -> Iterator[socket.socket]:
    with socket.socket() as sock:
        sock.bind(("127.0.0.1", 0))
        sock.listen(16)
        yield sock


def test_a_bound_socket_is_served_listening_and_a_listening_one_as_it_is(listening: socket.socket) -> None:
    with socket.socket() as bound:
        bound.bind(("127.0.0.1", 0))
        with pytest.raises(ConnectionRefusedError):  # bound only: refused, not queued
            socket.create_connection(bound.getsockname()).close()
        for given in (bound, listening):
            served = prefork.inherited(os.dup(given.fileno()))
            with served:
                assert served.getsockname() == given.getsockname()
                assert served.getsockopt(socket.SOL_SOCKET, socket.SO_ACCEPTCONN)
                assert served.getblocking() is False  # the workers' selectors expect it
                socket.create_connection(given.getsockname()).close()


def test_what_is_not_a_bound_tcp_socket_is_refused_and_left_open() -> None:
    read, write = os.pipe()
    with socket.socket() as unbound, socket.socket(type=socket.SOCK_DGRAM) as datagrams:
        datagrams.bind(("127.0.0.1", 0))
        try:
            with pytest.raises(ValueError, match=f"file descriptor {read} is not an open socket"):
                prefork.inherited(read)
            for sock in (unbound, datagrams):
                with pytest.raises(ValueError, match="a socket, but not a TCP socket bound to a port"):
                    prefork.inherited(sock.fileno())
                assert sock.fileno() >= 0  # still open: not ours to close
                assert not sock.getsockopt(socket.SOL_SOCKET, socket.SO_ACCEPTCONN)
            os.fstat(read)  # the pipe too
        finally:
            os.close(read)
            os.close(write)


def web_env(redis_url: str, key_prefix: str, port: int, **extra: str) -> dict[str, str]:
    keep = {name: value for name, value in os.environ.items() if name in ("PATH", "HOME", "LANG", "TMPDIR")}
    return {
        **keep,
        "PYTHONPATH": str(ROOT),
        "REDIS_URL": redis_url,
        "CHATOPS_REDIS_PREFIX": key_prefix,
        "SLACK_BOT_TOKEN": "xoxb-1",
        "SLACK_SIGNING_SECRET": "s3cret",
        "SLACK_API_URL": f"http://127.0.0.1:{port}/api/",  # never reached: /healthz asks Redis only
        "WEB_HOST": "127.0.0.1",
        "PORT": str(port),
        **extra,
    }


def start_web(env: dict[str, str], cwd: Path, fd: int) -> subprocess.Popen[str]:
    return subprocess.Popen(
        [sys.executable, "-m", "bot.ops.cli", "web", "--fd", str(fd)],
        cwd=cwd,  # no .env there
        env=env,
        pass_fds=(fd,),
        stdout=subprocess.PIPE,
        stderr=subprocess.STDOUT,
        text=True,
        start_new_session=True,  # the web forks its workers into this group
    )


@pytest.mark.slow
def test_the_web_serves_the_inherited_socket_even_when_port_is_taken(
    tmp_path: Path, redis_url: str, key_prefix: str, listening: socket.socket
) -> None:
    """PORT names a port another socket holds: binding it would fail; the inherited one is served."""
    with socket.socket() as taken:
        taken.bind(("127.0.0.1", 0))
        taken.listen(1)
        web = start_web(web_env(redis_url, key_prefix, taken.getsockname()[1]), tmp_path, listening.fileno())
        try:
            url = f"http://127.0.0.1:{listening.getsockname()[1]}/healthz"
            wait_for(
                lambda: _status(url) == 200 or web.poll() is not None, 120, "the web on the inherited socket"
            )
            assert web.poll() is None, web.communicate()[0]
        finally:
            if web.poll() is None:
                os.killpg(web.pid, signal.SIGTERM)
            output = web.communicate(timeout=60)[0]
    assert web.returncode == 0, output
    assert f"listening on 127.0.0.1:{listening.getsockname()[1]}" in output


@pytest.mark.slow
@pytest.mark.parametrize("socket_mode", [False, True])
def test_a_wrong_fd_stops_the_web_in_one_line(
    tmp_path: Path, redis_url: str, key_prefix: str, socket_mode: bool
) -> None:
    read, write = os.pipe()
    try:
        extra = {"SLACK_APP_TOKEN": "xapp-1"} if socket_mode else {}
        web = start_web(web_env(redis_url, key_prefix, 9, **extra), tmp_path, read)
        output = web.communicate(timeout=180)[0]
    finally:
        os.close(read)
        os.close(write)
    assert web.returncode == 2 and "Traceback" not in output, output
    lines = [line for line in output.splitlines() if line.startswith(PREFIX)]
    if socket_mode:
        expected = f"--fd {read} serves Slack's requests over HTTP, but SLACK_APP_TOKEN is set"
    else:
        expected = f"--fd {read}: file descriptor {read} is not an open socket"
    assert len(lines) == 1 and lines[0].startswith(PREFIX + expected), output
    assert "fix: " in lines[0] and "listening" not in output


def _status(url: str) -> int | None:
    try:
        return http(url).status
    except OSError:
        return None
