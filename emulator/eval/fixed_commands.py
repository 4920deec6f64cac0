"""``scenario-command NAME``: a simulated host's fixed output of a scenario's command.

The injector (``emulator.eval.injector``) writes each target's command outputs under
``COMMANDS_DIR`` in its host folder and a ``scenario-command`` script in its ``bin`` folder that
runs ``command_main``. A runner starts that script for every call of such a tool, so this module
imports nothing but the standard library: importing the injector (the scenario model, the tools
package) took more than a second per call.
"""

from __future__ import annotations

import json
import sys
from collections.abc import Sequence
from pathlib import Path

COMMANDS_DIR = "etc/chatops-eval/commands"


def command_main(argv: Sequence[str], root: str) -> int:
    """The fixed output of this host's command ``argv[0]``, and its exit status."""
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
