"""run_command: argv only, bounded output, and a timeout that kills the whole process group."""

from __future__ import annotations

import sys
import time
from pathlib import Path

import psutil
import pytest

from tools.errors import ToolCallError
from tools.process import run_command


def _gone(pid: int, within: float = 30.0) -> bool:
    """True once ``pid`` no longer runs (a zombie waiting for its reaper counts as gone)."""
    deadline = time.monotonic() + within
    while time.monotonic() < deadline:
        try:
            if psutil.Process(pid).status() == psutil.STATUS_ZOMBIE:
                return True
        except psutil.NoSuchProcess:
            return True
        time.sleep(0.05)
    return False


def test_a_successful_command_returns_its_output() -> None:
    result = run_command(["echo", "hello", "world"], timeout=5)
    assert result.ok
    assert result.stdout == "hello world\n"
    assert result.output_text() == "hello world"


def test_arguments_are_never_interpreted_by_a_shell(tmp_path: Path) -> None:
    marker = tmp_path / "pwned"
    result = run_command(["echo", f"$(touch {marker}); rm -rf /", "`id`"], timeout=5)
    assert result.stdout == f"$(touch {marker}); rm -rf / `id`\n"
    assert not marker.exists()


def test_a_failed_command_reports_exit_status_and_stderr_tail() -> None:
    script = "import sys\nfor i in range(50): print(f'line {i}', file=sys.stderr)\nsys.exit(3)"
    result = run_command([sys.executable, "-c", script], timeout=5)
    assert not result.ok and result.returncode == 3
    message = result.failure_message()
    assert "failed with exit status 3" in message
    assert "line 49" in message and "line 10" not in message  # only the tail of stderr


def test_a_hanging_command_is_killed_at_its_timeout_with_its_children(tmp_path: Path) -> None:
    pid_file = tmp_path / "child.pid"
    # The shell starts a child that would outlive it, then waits forever.
    script = f"sleep 60 & echo $! > {pid_file}; wait"
    started = time.monotonic()
    result = run_command(["sh", "-c", script], timeout=1.0)
    elapsed = time.monotonic() - started
    assert result.timed_out and not result.ok
    assert elapsed < 30  # not the child's 60 s (a bound for that alone)
    assert "timed out after 1 s" in result.failure_message()
    assert "process group was killed" in result.failure_message()
    child = int(pid_file.read_text())
    assert _gone(child), "the child process survived the timeout"


def test_a_child_holding_the_output_open_counts_against_the_timeout(tmp_path: Path) -> None:
    pid_file = tmp_path / "child.pid"
    # The leader exits at once, but its background child keeps stdout open.
    result = run_command(["sh", "-c", f"sleep 60 & echo $! > {pid_file}"], timeout=1.0)
    assert result.timed_out
    assert _gone(int(pid_file.read_text()))


def test_output_is_kept_bounded_with_head_and_tail() -> None:
    script = "import sys\nsys.stdout.write('A' * 100000 + 'B' * 100000)"
    result = run_command([sys.executable, "-c", script], timeout=10, max_output_bytes=1000)
    assert result.stdout.startswith("A" * 500)
    assert result.stdout.endswith("B" * 500)
    assert "199000 bytes of output not kept" in result.stdout


def test_a_missing_program_is_a_clear_error() -> None:
    with pytest.raises(ToolCallError, match="command not found: no-such-program-xyz"):
        run_command(["no-such-program-xyz"], timeout=5)


def test_the_given_environment_replaces_ours() -> None:
    result = run_command(["env"], timeout=5, env={"PATH": "/usr/bin:/bin", "ONLY_THIS": "1"})
    assert "ONLY_THIS=1" in result.stdout
    assert "HOME=" not in result.stdout
