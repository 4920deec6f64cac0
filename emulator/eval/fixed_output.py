"""``scenario-command NAME``: the fixed output of a scenario's catalog command on one simulated host.

The fault injector (``emulator.eval.injector``) writes each command's output to
``ROOT/etc/chatops-eval/commands/NAME.json`` and a ``scenario-command`` script on the host's
``PATH`` that calls ``command_main``. This module imports nothing but the standard library: the
script runs once per tool call, and importing the injector (pydantic, the demo) cost seconds a call.
"""

from __future__ import annotations

import json
import sys
from collections.abc import Sequence
from pathlib import Path

COMMANDS_DIR = "etc/chatops-eval/commands"


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
