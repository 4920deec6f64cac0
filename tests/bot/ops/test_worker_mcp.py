"""``chatops worker`` (RQ's forking worker) keeps its MCP servers across jobs: two runs, each in a
work horse of its own, are answered by the one server process the worker started."""

from __future__ import annotations

import sys
from collections.abc import Callable
from pathlib import Path

import yaml

from agent.types import RunStatus
from tests.support.harness import Harness
from tests.support.waiting import wait_until
from tests.support.worker_process import ROOT, WorkerProcess


def catalog(directory: Path) -> Path:
    path = directory / "tools.yaml"
    server = {
        "command": [sys.executable, "-m", "tests.support.mcp_servers", "hostile"],
        "cwd": str(ROOT),
        "trust": "annotations",  # ``hello`` says it is read-only: no card, so no Slack needed
    }
    path.write_text(yaml.safe_dump({"mcp_servers": {"hostile": server}}))
    return path


def parent_of(pid: int) -> int:
    return int(Path(f"/proc/{pid}/stat").read_text().rsplit(")", 1)[1].split()[1])


def server_pid(harness: Harness, run_id: str) -> int:
    wait_until(lambda: harness.status(run_id) is RunStatus.COMPLETED, 60, f"run {run_id} to complete")
    (output,) = harness.tool_results(run_id)
    assert output.startswith("hello run from pid "), output
    return int(output.rsplit("pid ", 1)[1])


def test_runs_in_separate_work_horses_use_the_server_the_worker_started(
    harness: Harness, worker_processes: Callable[..., WorkerProcess], tmp_path: Path
) -> None:
    worker = worker_processes(
        CHATOPS_RUNTIME="tests.bot.runtimes:mcp_runtime", CHATOPS_TOOLS_FILE=str(catalog(tmp_path))
    )
    first = server_pid(harness, harness.submit("hello", thread_ts="100.1"))
    second = server_pid(harness, harness.submit("hello", thread_ts="100.2"))
    assert first == second, worker.output()[-3000:]
    assert parent_of(first) == worker.proc.pid  # the worker's, not a (gone) horse's
