"""A Redis Sentinel deployment of a test's own: one master, one replica, three sentinels, on loopback.

Debian's ``redis-server`` and ``redis-sentinel`` (the Makefile's ``sentinel`` prerequisite
installs them). Redis cannot listen on port 0 and report the port, so each process gets a port
found free by binding to it first (``free_port``), and a process that still loses the race (its
log says so) is started again on another one. Every process has its own directory under the
test's ``tmp_path``; the master and the replica keep an AOF with ``appendfsync always``
(``DURABLE``), so a killed server that is started again comes back with its data. ``password``
protects the data servers (``requirepass``/``masterauth``, the sentinels' ``auth-pass``),
``sentinel_password`` the sentinels themselves (``requirepass``, ``sentinel-pass`` between them).

``kill()`` is a crash (SIGKILL); ``start(replica_of=port)`` brings a node back on the same port
and directory as a replica of the current master, as a deployment's start script does after
asking the sentinels (left to the sentinels, a returning old master would serve as a master for
up to ~15 s until they reconfigure it).
"""

from __future__ import annotations

import contextlib
import shutil
import socket
import subprocess
import time
from collections.abc import Iterator, Mapping
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any, cast

import pytest
import redis

from tests.support.processes import stop_process

# As tests.reliability.redis_proc.DURABLE: what docs/OPERATIONS.md requires of the data servers.
DURABLE: Mapping[str, str] = {"appendonly": "yes", "appendfsync": "always", "maxmemory-policy": "noeviction"}

MASTER_NAME = "chatops"
QUORUM = 2
DOWN_AFTER_MS = 1000  # a master silent this long is subjectively down; the quorum makes it objective
FAILOVER_TIMEOUT_MS = 3000
START_SECONDS = 10.0


def sentinel_binary() -> str | None:
    """Debian's ``redis-sentinel`` when installed (with the ``redis-server`` it links to)."""
    found = shutil.which("redis-sentinel")
    return found if found and shutil.which("redis-server") else None


def free_port() -> int:
    with socket.socket(socket.AF_INET, socket.SOCK_STREAM) as probe:
        probe.bind(("127.0.0.1", 0))
        return int(probe.getsockname()[1])


@dataclass
class Node:
    """One ``redis-server`` (``replica_of``: the master's port) or ``redis-sentinel`` (``sentinel``)."""

    directory: Path
    replica_of: int | None = None
    sentinel: bool = False
    monitor: int = 0  # a sentinel: the master's port it starts monitoring
    config: Mapping[str, str] = field(default_factory=dict)
    password: str = ""  # a data server's, or a sentinel's own
    data_password: str = ""  # a sentinel: the data servers'
    port: int = field(default=0, init=False)
    proc: subprocess.Popen[bytes] | None = field(default=None, init=False, repr=False)
    starts: int = field(default=0, init=False)  # attempts
    running_since: int = field(default=0, init=False)  # successful starts

    def client(self, timeout: float = 5.0) -> redis.Redis:
        return redis.Redis(
            "127.0.0.1",
            self.port,
            password=self.password or None,
            socket_timeout=timeout,
            socket_connect_timeout=timeout,
        )

    @property
    def address(self) -> str:
        return f"127.0.0.1:{self.port}"

    def start(self, *, replica_of: int | None = None) -> Node:
        """``replica_of``: come back as a replica of that port (as a node's start script does after
        asking the sentinels for the current master), instead of as it was first started."""
        if replica_of is not None:
            self.replica_of = replica_of
        self.directory.mkdir(parents=True, exist_ok=True)
        for _ in range(5):  # a port found free may be taken before the server binds it
            if not self.running_since:
                self.port = free_port()
            self.starts += 1
            if self._spawn():
                self.running_since += 1
                return self
        raise RuntimeError(
            f"{'redis-sentinel' if self.sentinel else 'redis-server'} did not start in {self.directory}"
        )

    def _spawn(self) -> bool:
        log = (self.directory / f"{self.starts}.log").open("wb")
        if self.sentinel:
            conf = self.directory / "sentinel.conf"
            if not self.running_since:  # it rewrites the file with what it learns: kept across restarts
                conf.write_text(self._sentinel_conf())
            command = [str(sentinel_binary()), str(conf)]
        else:
            settings = {
                "port": str(self.port),
                "bind": "127.0.0.1",
                "dir": str(self.directory),
                "save": "",
                "loglevel": "warning",
                "repl-diskless-sync-delay": "0",  # a returning node syncs at once (default: waits 5 s for company)
                **DURABLE,
                **({"requirepass": self.password, "masterauth": self.password} if self.password else {}),
                **self.config,
            }
            if self.replica_of is not None:
                settings["replicaof"] = f"127.0.0.1 {self.replica_of}"
            command = ["redis-server", *(arg for k, v in settings.items() for arg in (f"--{k}", v))]
        self.proc = subprocess.Popen(command, stdout=log, stderr=subprocess.STDOUT)
        deadline = time.monotonic() + START_SECONDS
        while time.monotonic() < deadline:
            if self.proc.poll() is not None:
                return False  # exited: most likely the port was taken meanwhile
            with contextlib.suppress(redis.RedisError, OSError):
                if self.client(0.5).ping():
                    return True
            time.sleep(0.02)
        self.kill()
        return False

    def _sentinel_conf(self) -> str:
        return "\n".join(
            [
                f"port {self.port}",
                "bind 127.0.0.1",
                f"dir {self.directory}",
                "loglevel notice",
                f"logfile {self.directory / 'sentinel.log'}",
                f"sentinel monitor {MASTER_NAME} 127.0.0.1 {self.monitor} {QUORUM}",
                f"sentinel down-after-milliseconds {MASTER_NAME} {DOWN_AFTER_MS}",
                f"sentinel failover-timeout {MASTER_NAME} {FAILOVER_TIMEOUT_MS}",
                f"sentinel parallel-syncs {MASTER_NAME} 1",
                *([f"sentinel auth-pass {MASTER_NAME} {self.data_password}"] if self.data_password else []),
                *(
                    [f"requirepass {self.password}", f"sentinel sentinel-pass {self.password}"]
                    if self.password
                    else []
                ),
                "",
            ]
        )

    def kill(self) -> None:
        """SIGKILL: nothing is saved beyond what the AOF already has."""
        if self.proc is None:
            return
        self.proc.kill()
        self.proc.wait(timeout=10)
        self.proc = None

    def stop(self) -> None:
        if self.proc is None:
            return
        stop_process(self.proc, 10)
        self.proc = None


@dataclass
class SentinelGroup:
    """The master, its replica and three sentinels monitoring them as ``MASTER_NAME``."""

    directory: Path
    password: str = ""
    sentinel_password: str = ""
    master: Node = field(init=False)
    replica: Node = field(init=False)
    sentinels: list[Node] = field(default_factory=list, init=False)

    def start(self) -> SentinelGroup:
        self.master = Node(self.directory / "master", password=self.password).start()
        self.replica = Node(
            self.directory / "replica", replica_of=self.master.port, password=self.password
        ).start()
        self.wait_replicas(self.master, 1)
        for n in range(3):
            sentinel = Node(
                self.directory / f"sentinel-{n}",
                sentinel=True,
                monitor=self.master.port,
                password=self.sentinel_password,
                data_password=self.password,
            )
            self.sentinels.append(sentinel.start())
        self.wait_view(self.master.port, replicas=1)
        return self

    @property
    def addresses(self) -> list[str]:
        return [s.address for s in self.sentinels]

    def nodes(self) -> list[Node]:
        return [self.master, self.replica]

    def master_port(self, sentinel: Node) -> int | None:
        with contextlib.suppress(redis.RedisError, OSError):
            client = sentinel.client(1.0)
            reply = client.execute_command("SENTINEL", "GET-MASTER-ADDR-BY-NAME", MASTER_NAME)  # type: ignore[no-untyped-call]
            client.close()
            if reply:
                return int(reply[1])
        return None

    def wait_view(self, port: int, *, replicas: int, timeout: float = 30.0) -> float:
        """Until every sentinel names ``port`` the master, with ``replicas`` replicas up and both
        other sentinels known; the seconds it took."""
        started = time.monotonic()
        while time.monotonic() - started < timeout:
            if all(self._sees(s, port, replicas) for s in self.sentinels):
                return time.monotonic() - started
            time.sleep(0.05)
        raise AssertionError(f"the sentinels do not agree on master {port} with {replicas} replica(s)")

    def _sees(self, sentinel: Node, port: int, replicas: int) -> bool:
        with contextlib.suppress(redis.RedisError, OSError):
            client = sentinel.client(1.0)
            state = cast(dict[str, Any], client.sentinel_master(MASTER_NAME))
            found = client.sentinel_slaves(MASTER_NAME)
            client.close()
            up = [r for r in found if not r.get("is_sdown") and r.get("master-link-status") == "ok"]
            return (
                int(state["port"]) == port and len(up) >= replicas and int(state["num-other-sentinels"]) >= 2
            )
        return False

    def wait_replicas(self, master: Node, count: int, timeout: float = 30.0) -> None:
        """Until ``master`` has ``count`` replicas online and acknowledging writes (0: none).

        "online" on the master's side only means it has sent the initial sync; the replica may
        still be loading it, and a ``WAIT`` then times out on a loaded machine. So it also waits
        until ``WAIT`` itself sees ``count`` replicas acknowledge the master's offset."""
        deadline = time.monotonic() + timeout
        while time.monotonic() < deadline:
            with contextlib.suppress(redis.RedisError, OSError):
                client = master.client(3.0)
                info = client.info("replication")
                online = [
                    v
                    for k, v in info.items()
                    if k.startswith("slave") and isinstance(v, dict) and v.get("state") == "online"
                ]
                if info.get("role") == "master" and self._replicas_ready(client, len(online), count):
                    return
            time.sleep(0.05)
        raise AssertionError(f"{master.address} has no {count} replica(s) online")

    @staticmethod
    def _replicas_ready(client: redis.Redis, online: int, count: int) -> bool:
        if not count:
            return not online
        if online < count:
            return False
        # WAIT counts acknowledgements of this connection's last write, so write on it first.
        pipe = client.pipeline(transaction=False)
        pipe.set("sentinel-group:sync-probe", str(time.time()))
        pipe.wait(count, 1000)
        return int(pipe.execute()[1]) >= count

    def stop(self) -> None:
        for node in [*self.sentinels, self.replica, self.master]:
            with contextlib.suppress(AttributeError):
                node.stop()


def sentinel_group(directory: Path, **credentials: str) -> Iterator[SentinelGroup]:
    """Start a group (skipping the test when ``redis-sentinel`` is not installed), stop it after."""
    if sentinel_binary() is None:
        pytest.skip("redis-sentinel is not installed (`make sentinel` installs Debian's)")
    group = SentinelGroup(directory, **credentials)
    try:
        yield group.start()
    finally:
        group.stop()
