"""The host health tools, run for real on this machine."""

from __future__ import annotations

import json
import re
import subprocess
import sys
import time
import uuid
from collections.abc import Iterator
from pathlib import Path

import psutil
import pytest

from tools.builtin.system import cpu_load, disk_usage, memory, top_processes


def test_disk_usage_lists_the_root_filesystem_with_sizes_and_use() -> None:
    result = disk_usage.execute("{}", timeout=10)
    assert not result.is_error
    lines = result.output.splitlines()
    assert lines[0].split() == ["mount", "device", "type", "size", "used", "free", "use%", "inodes%"]
    root_rows = [line for line in lines[1:] if line.split()[0] == "/"]
    assert root_rows, result.output
    assert re.search(r"\d+\.\d (KiB|MiB|GiB|TiB)", root_rows[0])
    assert re.search(r"\d+%", root_rows[0])


def test_disk_usage_of_a_path_names_its_mount_and_free_space(tmp_path: Path) -> None:
    result = disk_usage.execute(json.dumps({"path": str(tmp_path)}), timeout=10)
    expected_percent = f"({psutil.disk_usage(str(tmp_path)).percent:.0f}%)"
    assert result.output.startswith(f"{tmp_path} is on /")
    assert expected_percent in result.output and "free; inodes" in result.output


def test_disk_usage_of_a_missing_path_is_an_error() -> None:
    result = disk_usage.execute('{"path": "/no/such/dir"}', timeout=10)
    assert result.is_error and result.output == "Error: no such path: /no/such/dir"


def test_cpu_load_reports_busy_percent_load_average_and_uptime() -> None:
    result = cpu_load.execute('{"sample_seconds": 0.2}', timeout=10)
    first, second, third = result.output.splitlines()
    cores = psutil.cpu_count()
    assert re.fullmatch(rf"CPU: \d+% busy over 0\.2 s on {cores} cores \(user \d+%.*steal \d+%\)", first)
    assert second.startswith("Load average (1/5/15 min): ")
    assert third.startswith("Up ")


def test_memory_reports_used_total_and_available() -> None:
    total = psutil.virtual_memory().total
    result = memory.execute("{}", timeout=10)
    mem_line, swap_line = result.output.splitlines()
    assert mem_line.startswith("Memory: ") and "available" in mem_line
    assert f"of {total / 1024**3:.1f} GiB" in mem_line
    assert swap_line.startswith("Swap: ")


@pytest.fixture
def busy_process() -> Iterator[str]:
    """A child spinning the CPU and holding 200 MiB, marked by a unique argument."""
    marker = f"busy-{uuid.uuid4().hex[:8]}"
    # The marker comes first: the command column is cut at 100 characters.
    script = f"# {marker}\nblob = bytearray(200 * 1024 * 1024)\nwhile True:\n    pass"
    child = subprocess.Popen([sys.executable, "-c", script])
    try:
        process = psutil.Process(child.pid)
        deadline = time.monotonic() + 60  # a bound for a hang only
        while process.memory_info().rss < 150 * 1024 * 1024 and time.monotonic() < deadline:
            time.sleep(0.05)
        yield marker
    finally:
        child.kill()
        child.wait()


def test_top_processes_by_cpu_finds_a_spinning_process(busy_process: str) -> None:
    result = top_processes.execute('{"sort_by": "cpu", "limit": 5}', timeout=10)
    lines = result.output.splitlines()
    assert re.fullmatch(r"Top 5 of \d+ processes by cpu:", lines[0])
    assert lines[1].split() == ["pid", "user", "cpu%", "mem%", "rss", "state", "command"]
    assert len(lines) == 7
    assert busy_process in result.output


def test_top_processes_by_memory_finds_a_large_process(busy_process: str) -> None:
    result = top_processes.execute('{"sort_by": "memory", "limit": 10}', timeout=10)
    row = next(line for line in result.output.splitlines() if busy_process in line)
    assert re.search(r"\d+\.\d MiB", row)


def test_top_processes_refuses_an_unknown_ranking() -> None:
    result = top_processes.execute('{"sort_by": "disk"}', timeout=10)
    assert result.is_error and "sort_by: Input should be 'cpu' or 'memory'" in result.output
