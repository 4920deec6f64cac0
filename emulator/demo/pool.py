"""web-03's simulated worker pool: the ``pool`` command the demo's ``pool_status`` and
``pool_scale`` catalog tools run (``emulator.demo.catalog``), to show an approved change's undo.

A pool's state is one file of the simulated host, ``var/lib/pool/NAME.json``
(``{"pool": "web", "replicas": 3, "state": "running"}``); nothing of this machine is read or
changed. ``pool status NAME`` prints it as JSON (``replicas`` for an undo's ``{before.replicas}``);
``pool scale NAME N`` writes the new count atomically, then prints the state.
"""

from __future__ import annotations

import json
import os
import sys
from collections.abc import Sequence
from pathlib import Path

POOLS: dict[str, dict[str, int]] = {"web-03": {"web": 3}}
"""The pools each simulated host has, and their replicas when the demo starts."""
MAX_REPLICAS = 50


def pool_file(root: Path, pool: str) -> Path:
    return root / "var" / "lib" / "pool" / f"{pool}.json"


def install_pools(root: Path, host: str) -> None:
    """The host's pools (``POOLS``), each running with its starting count."""
    for pool, replicas in POOLS.get(host, {}).items():
        _save(root, pool, replicas)


def _save(root: Path, pool: str, replicas: int) -> None:
    path = pool_file(root, pool)
    path.parent.mkdir(parents=True, exist_ok=True)
    temporary = path.with_name(f".{pool}.{os.getpid()}.tmp")
    temporary.write_text(json.dumps({"pool": pool, "replicas": replicas, "state": "running"}) + "\n")
    os.replace(temporary, path)


def pool_main(argv: Sequence[str], root: Path) -> int:
    """``pool status NAME`` / ``pool scale NAME N`` on the host at ``root``."""
    if len(argv) < 2 or argv[0] not in ("status", "scale") or (argv[0] == "scale") != (len(argv) == 3):
        print(
            "usage: pool status NAME | pool scale NAME REPLICAS (simulated by the chatops demo)",
            file=sys.stderr,
        )
        return 2
    pool = argv[1]
    path = pool_file(root, pool)
    if not pool.isalnum() or not path.exists():
        print(f"pool: no pool named {pool!r} on this host", file=sys.stderr)
        return 1
    if argv[0] == "scale":
        if not argv[2].isdigit() or int(argv[2]) > MAX_REPLICAS:
            print(f"pool: replicas must be 0 to {MAX_REPLICAS}, not {argv[2]!r}", file=sys.stderr)
            return 2
        _save(root, pool, int(argv[2]))
    print(path.read_text().strip())
    return 0
