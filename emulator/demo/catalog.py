"""The demo's tool catalog (``CHATOPS_TOOLS_FILE``): the host-health tools read the simulated host.

The built-in ``disk_usage``, ``cpu_load``, ``memory``, ``top_processes`` and ``largest_files`` read
the machine they run on (psutil, any path): on a demo host's runner that is this machine, whose
disk, processes and load have nothing to do with the story. This catalog overrides them with
commands every demo host has on its ``PATH`` (``emulator.demo.commands``), which describe that
host's own machine (``emulator.demo.system``). The log, clean-up and service tools stay the
built-in ones: they already act on the host's own folder and ``systemctl``. The web process and
the worker load the same file, so the model is offered the schema the runners execute.
"""

from __future__ import annotations

from pathlib import Path
from typing import Any

import yaml

_PATH = {"type": "string", "description": "An absolute path on the host.", "pattern": "^/[^\\x00]*$"}
_LIMIT = {"type": "integer", "minimum": 1, "maximum": 50, "default": 10, "description": "How many to list."}

TOOLS: list[dict[str, Any]] = [
    {
        "name": "disk_usage",
        "description": "Disk space per mounted filesystem (df -h), or of the filesystem holding one path.",
        "params": {"path": {**_PATH, "required": False}},
        "run": ["df", "-h", "{path}"],
    },
    {
        "name": "cpu_load",
        "description": "Load averages, CPUs and uptime (uptime).",
        "run": ["uptime"],
    },
    {
        "name": "memory",
        "description": "Memory and swap use (free -h).",
        "run": ["free", "-h"],
    },
    {
        "name": "top_processes",
        "description": "The processes using the most CPU (pcpu) or memory (pmem), busiest first (ps).",
        "params": {
            "sort_by": {"type": "string", "enum": ["pcpu", "pmem"], "default": "pcpu"},
            "limit": _LIMIT,
        },
        "run": ["ps", "--sort=-{sort_by}", "--lines={limit}"],
    },
    {
        "name": "largest_files",
        "description": "The largest files under a directory of the host.",
        "params": {"path": _PATH, "limit": _LIMIT},
        "run": ["largest-files", "{path}", "{limit}"],
    },
]


_POOL = {"type": "string", "pattern": "^[a-z]+$", "description": "The pool's name (web-03 has web)."}

POOL_TOOLS: list[dict[str, Any]] = [
    {
        "name": "pool_status",
        "description": "A worker pool's state as JSON: its replicas and whether it runs.",
        "category": "read_only",
        "parallel": True,
        "timeout": 15,
        "params": {"pool": _POOL},
        "run": ["pool", "status", "{pool}"],
    },
    {
        "name": "pool_scale",
        "description": "Scale a worker pool to N replicas.",
        "category": "mutating",
        "timeout": 15,
        "params": {"pool": _POOL, "replicas": {"type": "integer", "minimum": 0, "maximum": 50}},
        "run": ["pool", "scale", "{pool}", "{replicas}"],
        "before": {"tool": "pool_status", "args": {"pool": "{args.pool}"}},
        "check": {"tool": "pool_status", "args": {"pool": "{args.pool}"}, "expect": '"state": "running"'},
        "undo": {"tool": "pool_scale", "args": {"pool": "{args.pool}", "replicas": "{before.replicas}"}},
    },
]
"""web-03's simulated worker pool (``emulator.demo.pool``): a change with a before-read, a check and
an undo declared in the catalog (issue 34), so the demo shows an Undo. Only the demo writes them:
``chatops eval`` writes a catalog of its own."""


def write_catalog(path: Path) -> Path:
    """The catalog file: the host-health tools read-only, parallel, overriding the built-in of their
    name; then the pool's tools."""
    tools = [
        {**tool, "category": "read_only", "parallel": True, "timeout": 15, "override": True} for tool in TOOLS
    ]
    path.write_text(
        "# The chatops demo's tools (python -m emulator.demo.main): the host-health tools run each demo\n"
        "# host's own df, uptime, free, ps and largest-files, which describe that simulated host; the\n"
        "# pool tools scale web-03's simulated pool (a change with its check and undo).\n"
        + yaml.safe_dump({"tools": [*tools, *POOL_TOOLS]}, sort_keys=False)
    )
    return path
