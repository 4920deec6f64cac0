"""Loop detection hashes what a tool returned, not its decoration (elapsed time, approval note).

Through ``agent.run.Run`` with a scripted model and a real catalog ``run`` tool: a real command
whose running time alternates, so the "`cmd` succeeded in N s" line differs from call to call
while what the command found does not.
"""

from __future__ import annotations

import itertools
import json
import sys
import textwrap
from pathlib import Path
from typing import Any

import pytest

from agent.config import ConfirmRequest, RunConfig
from agent.loop_detection import LOOP_WARNING
from agent.memory import InMemoryMemory
from agent.run import Run
from agent.scripted import ScriptedModel, tool_call
from agent.types import Decision, Message, RunStatus
from tools.catalog import load_catalog

# Every second run sleeps half a second: the decoration alternates between about 0.0 and 0.5 s.
_SCRIPT = textwrap.dedent(
    """
    import pathlib, sys, time
    counter = pathlib.Path(sys.argv[1])
    count = int(counter.read_text() or 0) + 1 if counter.exists() else 1
    counter.write_text(str(count))
    time.sleep(0.5 if count % 2 == 0 else 0.0)
    print("/dev/sda1 97% used")
    """
)


def catalog_tool(tmp_path: Path, category: str) -> Any:
    path = tmp_path / "tools.yaml"
    counter = tmp_path / "count"
    spec = {
        "tools": [
            {
                "name": "disk_check",
                "description": "How full the root disk is.",
                "category": category,
                "run": [sys.executable, "-c", _SCRIPT, str(counter)],
            }
        ]
    }
    path.write_text(json.dumps(spec))  # JSON is YAML
    (tool,) = load_catalog(path, env={"PATH": "/usr/bin:/bin"}).tools
    return tool


@pytest.mark.parametrize("category", ["read_only", "mutating"])
def test_six_identical_calls_with_identical_results_warn_at_3_and_stop_at_6(
    tmp_path: Path, category: str
) -> None:
    tool = catalog_tool(tmp_path, category)
    approvers = itertools.cycle(["U_ALICE", "U_BOB"])  # a different approver does not make it new

    def confirm(request: ConfirmRequest) -> Decision:
        return Decision.approve(next(approvers))

    model = ScriptedModel([tool_call("disk_check") for _ in range(8)] + ["done"])
    memory = InMemoryMemory([Message.user("web-03 is out of disk")])
    config = RunConfig(models=[model], memory=memory, tools=[tool], confirm=confirm)
    result = Run(config).execute()

    shown = [m.content or "" for m in memory.load_messages() if m.role == "tool"]
    assert result.status is RunStatus.LOOP_DETECTED
    assert len(model.requests) == 6  # the sixth identical result stops the run: no seventh request
    assert len(shown) == 6
    assert all(text.endswith("/dev/sda1 97% used") or "approved by" in text for text in shown[:2])
    assert shown[0] != shown[1]  # the decoration really differed: "succeeded in 0.0 s" / "0.5 s"
    assert shown[2:] == [LOOP_WARNING.format(count=count) for count in (3, 4, 5, 6)]
