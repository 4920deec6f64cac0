"""``chatops web`` (and ``chatops worker``) as real subprocesses on 127.0.0.1, for end-to-end tests.

``chatops_processes(emulator, ...)`` starts them with the test's Redis prefix and queue, waits for
``/healthz``, points the emulator's event delivery at the web process and yields a ``Served``;
on exit it sends SIGTERM and records each process's exit status (a graceful stop exits 0).
"""

from __future__ import annotations

import contextlib
import os
import signal
import subprocess
import sys
from collections.abc import Iterator, Sequence
from dataclasses import dataclass, field
from pathlib import Path

from emulator.demo.processes import web_socket
from emulator.slack import SlackEmulator
from tests.support.slack_http import http
from tests.support.slack_workspace import SECRET, TOKEN
from tests.support.waiting import wait_for

ROOT = Path(__file__).resolve().parents[3]
CHATOPS = str(Path(sys.executable).with_name("chatops"))


@dataclass
class Served:
    url: str
    port: int
    env: dict[str, str]
    logs: Path
    pids: dict[str, int] = field(default_factory=dict)
    exit_codes: dict[str, int] = field(default_factory=dict)  # filled in after SIGTERM

    @property
    def events_url(self) -> str:
        return f"{self.url}/slack/events"

    def log(self, name: str) -> str:
        return (self.logs / f"{name}.log").read_text(errors="replace")


def health(url: str) -> int | None:
    try:
        return http(f"{url}/healthz").status
    except OSError:
        return None


@contextlib.contextmanager
def chatops_processes(
    emulator: SlackEmulator,
    redis_url: str,
    key_prefix: str,
    queue_name: str,
    directory: Path,
    names: Sequence[str] = ("web", "worker"),
    **env: str,
) -> Iterator[Served]:
    # The web serves a socket bound here (``chatops web --fd``): a port chosen here and bound by the
    # web process seconds later, while it imports, can be taken meanwhile by any connection made on
    # a busy machine (the eval lost a run to "Address already in use" that way).
    bound = web_socket()
    port = int(bound.getsockname()[1])
    environment = {
        **os.environ,
        "PYTHONPATH": str(ROOT),
        "SLACK_BOT_TOKEN": TOKEN,
        "SLACK_SIGNING_SECRET": SECRET,
        "SLACK_API_URL": emulator.api_url,
        "REDIS_URL": redis_url,
        "CHATOPS_REDIS_PREFIX": key_prefix,
        "CHATOPS_QUEUE": queue_name,
        "CHATOPS_LEASE_TTL_SECONDS": "5",
        "CHATOPS_RUNTIME": "tests.bot.slack.runtimes:slack_runtime",
        "CHATOPS_TEST_DIR": str(directory),
        "PORT": str(port),
        "WEB_HOST": "127.0.0.1",
        **env,
    }
    environment.pop("SLACK_APP_TOKEN", None)
    logs = directory / "logs"
    logs.mkdir(exist_ok=True)
    started: dict[str, subprocess.Popen[bytes]] = {}
    served = Served(f"http://127.0.0.1:{port}", port, environment, logs)
    try:
        with bound:  # the web process has its own copy
            for name in names:
                started[name] = _start(name, environment, directory, logs, bound.fileno())
        served.pids = {name: process.pid for name, process in started.items()}
        wait_for(lambda: health(served.url) == 200, timeout=60, what="chatops web to answer /healthz")
        emulator.set_events_url(served.events_url)
        yield served
    finally:
        for process in started.values():
            if process.poll() is None:
                process.send_signal(signal.SIGTERM)
        for name, process in started.items():
            try:
                served.exit_codes[name] = process.wait(timeout=30)
            except subprocess.TimeoutExpired:
                with contextlib.suppress(ProcessLookupError):
                    os.killpg(process.pid, signal.SIGKILL)
                process.wait()
            # Whatever it forked and left behind (a web worker, a work horse) is still in its group.
            with contextlib.suppress(ProcessLookupError):
                os.killpg(process.pid, signal.SIGKILL)
        for name in started:
            sys.stderr.write(f"--- {name} log ---\n{served.log(name)[-4000:]}\n")


def _start(
    name: str, environment: dict[str, str], directory: Path, logs: Path, fd: int
) -> subprocess.Popen[bytes]:
    """``chatops NAME``; the web process listens on ``fd``, the socket bound by the test."""
    command, inherited = ([CHATOPS, name, "--fd", str(fd)], (fd,)) if name == "web" else ([CHATOPS, name], ())
    with open(logs / f"{name}.log", "wb") as log:
        return subprocess.Popen(
            command,
            cwd=directory,
            env=environment,
            stdout=log,
            stderr=subprocess.STDOUT,
            start_new_session=True,  # its own process group: the web process forks its workers
            pass_fds=inherited,
        )
