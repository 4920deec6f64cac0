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


def write_catalog(path: Path) -> Path:
    """The catalog file: each tool read-only, parallel, overriding the built-in of its name."""
    tools = [
        {**tool, "category": "read_only", "parallel": True, "timeout": 15, "override": True} for tool in TOOLS
    ]
    path.write_text(
        "# The chatops demo's tools (python -m emulator.demo.main): the host-health tools run each demo\n"
        "# host's own df, uptime, free, ps and largest-files, which describe that simulated host.\n"
        + yaml.safe_dump({"tools": tools}, sort_keys=False)
    )
    return path
