"""``scenario-command NAME`` and ``scenario-frozen TOOL NAME=VALUE...``: a scenario's fixed command
outputs and a captured run's frozen tool outputs on one simulated host.

The fault injector (``emulator.eval.injector``) writes each command's output to
``ROOT/etc/chatops-eval/commands/NAME.json`` and a ``scenario-command`` script on the host's
``PATH`` that calls ``command_main`` (a captured run's outputs: ``FROZEN_DIR``, ``frozen_main``). This module imports nothing but the standard library: the
script runs once per tool call, and importing the injector (pydantic, the demo) cost seconds a call.
"""

from __future__ import annotations

import fcntl
import json
import sys
from collections.abc import Sequence
from pathlib import Path

COMMANDS_DIR = "etc/chatops-eval/commands"
FROZEN_DIR = "etc/chatops-eval/frozen"


def command_main(argv: Sequence[str], root: str) -> int:
    """Print the command ``argv[0]``'s output on the host at ``root``; its exit status."""
    if len(argv) != 1:
        print("usage: scenario-command NAME", file=sys.stderr)
        return 2
    path = Path(root) / COMMANDS_DIR / f"{argv[0]}.json"
    if "/" in argv[0] or not path.exists():
        print(f"{argv[0]}: not available on this host", file=sys.stderr)
        return 127
    answer = json.loads(path.read_text())
    print(answer["output"])
    return int(answer["exit_status"])


def frozen_main(argv: Sequence[str], root: str) -> int:
    """``scenario-frozen TOOL NAME=VALUE...``: the output frozen for this call of ``TOOL``: the
    n-th call with the same arguments prints the n-th output frozen for them, then the last again
    (a captured run may read the same thing before and after a change)."""
    if not argv or "/" in argv[0]:
        print("usage: scenario-frozen TOOL NAME=VALUE...", file=sys.stderr)
        return 2
    path = Path(root) / FROZEN_DIR / f"{argv[0]}.json"
    if not path.exists():
        print(f"{argv[0]}: no output was frozen for this tool on this host", file=sys.stderr)
        return 127
    given = dict(item.split("=", 1) for item in argv[1:] if "=" in item)
    # read-only calls run in parallel: one call at a time reads and counts what was served
    with open(path, "r+") as handle:
        fcntl.flock(handle, fcntl.LOCK_EX)
        frozen = json.load(handle)
        matching = [i for i, call in enumerate(frozen["calls"]) if call["arguments"] == given]
        if not matching:
            print(f"{argv[0]}: no output was frozen for the arguments {given}", file=sys.stderr)
            return 127
        served = sum(1 for i in frozen["served"] if i in matching)
        index = matching[min(served, len(matching) - 1)]
        frozen["served"].append(index)
        handle.seek(0)
        handle.truncate()
        json.dump(frozen, handle)
    sys.stdout.write(frozen["calls"][index]["output"] + "\n")
    return 0
