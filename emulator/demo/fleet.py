"""The demo's fleet: two simulated hosts, the inventory that names them, and a runner for each.

The demo runs the bot the way a fleet deployment does. ``build_hosts`` makes web-03 and db-01
(``emulator.demo.host``), each in a folder of its own under ``DIR/hosts`` with its ``systemctl``
in ``DIR/bin/NAME``; ``write_inventory`` names both as ``via: runner`` targets with their labels
(``env=prod``, ``role=web`` / ``role=db``). Each host gets its own ``chatops runner --target
NAME`` process whose environment (``emulator.demo.env.runner_env``) points the real tools at that
host alone; the web process and the worker get the inventory and the shared
``CHATOPS_RUNNER_SECRET`` but no host, so every host tool call goes through the runner of the
target it names and can only touch that host. ``RunnerBeats`` tells when each runner serves its
queue (its first heartbeat), ``target_queues`` names those queues (removed with the session).

``scenario_variables`` gives the scripted model each host's folders by name (``${web-03.log_dir}``,
``${db-01.host_root}``; ``emulator.models.scenario``), with the plain ``${log_dir}`` / ``${host_root}``
of the first host that older scenario files use.
"""

from __future__ import annotations

import os
import time
from collections.abc import Sequence
from pathlib import Path

import redis
import yaml
from rq import Queue, Worker

from bot.fleet.heartbeats import Heartbeats
from bot.fleet.runner_acl import target_queue_name
from bot.keys import Keys
from emulator.demo.changes import WATCHED
from emulator.demo.host import HOSTS, DemoHost, build_host


def build_hosts(directory: Path, now: float | None = None) -> list[DemoHost]:
    """Every simulated host (``HOSTS``), fresh: ``directory/hosts/NAME`` and ``directory/bin/NAME``.

    ``ValueError`` for a folder whose path holds a character that separates entries of ``PATH``
    or ``CHATOPS_LOG_DIRS`` (``:``, ``,``): a runner would then look for ``systemctl`` somewhere
    else, the machine's own, or be allowed a log directory that is not its host's.
    """
    unsafe = sorted({os.pathsep, ","} & set(str(directory)))
    if unsafe:
        raise ValueError(
            f"the demo's folder {str(directory)!r} holds {' and '.join(map(repr, unsafe))}, which would "
            "split its hosts' PATH or CHATOPS_LOG_DIRS: choose another with --dir"
        )
    now = time.time() if now is None else now
    return [build_host(directory / "hosts" / name, directory / "bin" / name, now, name) for name in HOSTS]


def write_inventory(path: Path, hosts: Sequence[DemoHost]) -> Path:
    """The inventory (``CHATOPS_INVENTORY_FILE``): each host a runner target with its labels and the
    configuration its runner watches (``emulator.demo.changes.WATCHED``, paths on the host)."""
    targets = [
        {
            "name": host.name,
            "via": "runner",
            "labels": dict(host.labels),
            "watch": list(WATCHED.get(host.name, ())),
        }
        for host in hosts
    ]
    path.write_text(
        "# The chatops demo's inventory (python -m emulator.demo.main): each simulated host has a runner.\n"
        + yaml.safe_dump({"targets": targets}, sort_keys=False)
    )
    return path


def scenario_variables(hosts: Sequence[DemoHost]) -> dict[str, str]:
    """``NAME.log_dir`` and ``NAME.host_root`` of each host; ``log_dir`` / ``host_root``: the first's."""
    variables = {"log_dir": str(hosts[0].log_dir), "host_root": str(hosts[0].root)}
    for host in hosts:
        variables[f"{host.name}.log_dir"] = str(host.log_dir)
        variables[f"{host.name}.host_root"] = str(host.root)
    return variables


def target_queues(queue: str, hosts: Sequence[DemoHost]) -> list[str]:
    """The RQ queues of the hosts' runners (the worker dispatches each call to its target's)."""
    return [target_queue_name(queue, host.name) for host in hosts]


class RunnerBeats:
    """Whether each host's runner is up: its heartbeat written (it serves its queue from then) and
    its first change scan in its journal (an alert's first message lists the changes before it,
    the same whichever comes first); and whether a worker serves the runs' queue (RQ registers a
    worker with its queues when it starts taking jobs)."""

    def __init__(self, redis_url: str, prefix: str) -> None:
        self._client = redis.Redis.from_url(redis_url, socket_timeout=5)
        self._heartbeats = Heartbeats(self._client, Keys(prefix), interval=1.0)

    def waiting_for(self, names: Sequence[str]) -> list[str]:
        """The names whose runner has not been seen yet, or has not finished its first scan."""
        beats = {name: self._heartbeats.get(name) for name in names}
        return [name for name, beat in beats.items() if beat is None or beat.scanned_at is None]

    def workers_on(self, queue: str) -> int:
        """How many RQ workers are registered for ``queue``."""
        return int(Worker.count(connection=self._client, queue=Queue(queue, connection=self._client)))

    def close(self) -> None:
        self._client.close()
