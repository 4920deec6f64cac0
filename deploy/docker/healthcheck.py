#!/usr/bin/env python3
"""The image's HEALTHCHECK (installed as ``chatops-healthcheck``; the standard library only).

It finds the container's ``chatops`` process in ``/proc``. For ``chatops web`` it asks
``GET /healthz`` on the port that process listens on (``--port`` on its command line, else
``PORT``, else 3000) and is healthy on 200 only: the web process answers 503 while Redis does not
answer. ``worker`` and ``runner`` serve no HTTP: healthy while their process runs (their
liveness in Kubernetes is the same; a worker that lost Redis reconnects on its own). No chatops
process at all is unhealthy.
"""

from __future__ import annotations

import http.client
import os
import sys
from pathlib import Path

COMMANDS = ("web", "worker", "runner")


def chatops_processes(proc: Path = Path("/proc")) -> list[list[str]]:
    """The argv of every ``chatops`` process, from ``/proc/*/cmdline``."""
    found = []
    for entry in proc.iterdir():
        if not entry.name.isdigit():
            continue
        try:
            argv = [
                arg.decode(errors="replace") for arg in (entry / "cmdline").read_bytes().split(b"\0") if arg
            ]
        except OSError:
            continue
        if any(Path(arg).name == "chatops" for arg in argv[:2]):
            found.append(argv)
    return found


def command_of(argv: list[str]) -> str | None:
    return next((arg for arg in argv if arg in COMMANDS), None)


def web_port(argv: list[str], env: dict[str, str]) -> int:
    for index, arg in enumerate(argv):
        if arg == "--port" and index + 1 < len(argv):
            return int(argv[index + 1])
        if arg.startswith("--port="):
            return int(arg.split("=", 1)[1])
    return int(env.get("PORT") or 3000)


def check(proc: Path = Path("/proc"), env: dict[str, str] | None = None) -> tuple[bool, str]:
    env = dict(os.environ) if env is None else env
    processes = chatops_processes(proc)
    if not processes:
        return False, "no chatops process is running"
    webs = [argv for argv in processes if command_of(argv) == "web"]
    if not webs:
        return True, f"chatops {command_of(processes[0]) or processes[0][-1]} is running (no HTTP endpoint)"
    port = web_port(webs[0], env)
    connection = http.client.HTTPConnection("127.0.0.1", port, timeout=2)
    try:
        connection.request("GET", "/healthz")
        status = connection.getresponse().status
    except OSError as error:
        return False, f"GET /healthz on port {port}: {error}"
    finally:
        connection.close()
    return status == 200, f"GET /healthz on port {port}: {status}"


def main() -> int:
    healthy, said = check()
    print(said)
    return 0 if healthy else 1


if __name__ == "__main__":
    sys.exit(main())
