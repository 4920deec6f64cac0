"""The string sent to sshd, run here by real shells, and the reading of a channel's output (a fake
channel injected): the pid line is found even when split, forged markers and login noise pass."""

from __future__ import annotations

import json
import queue
import shutil
import sys
import threading
import time
from pathlib import Path

import pytest

from tools.process import run_command
from tools.ssh_command import ChannelOutput, new_marker, remote_command, shell_returncode

ARGV_ECHO = [sys.executable, "-c", "import json, sys; print(json.dumps(sys.argv[1:]))"]
SHELLS = [shell for shell in ("sh", "bash", "dash") if shutil.which(shell)]


class FakeChannel:
    """Hands out scripted stdout/stderr chunks; ``b""`` ends a stream, as paramiko's recv does."""

    def __init__(self) -> None:
        self.status_event = threading.Event()
        self._stdout: queue.Queue[bytes] = queue.Queue()
        self._stderr: queue.Queue[bytes] = queue.Queue()

    def send(self, *chunks: bytes) -> None:
        for chunk in chunks:
            self._stdout.put(chunk)

    def end(self) -> None:
        self._stdout.put(b"")
        self._stderr.put(b"")
        self.status_event.set()

    def recv(self, nbytes: int) -> bytes:
        return self._stdout.get(timeout=10)

    def recv_stderr(self, nbytes: int) -> bytes:
        return self._stderr.get(timeout=10)


def read(channel: FakeChannel, marker: str) -> ChannelOutput:
    output = ChannelOutput(channel, marker.encode(), 1024 * 1024)
    output.start()
    assert output.wait(channel, time.monotonic() + 10)
    return output


@pytest.mark.parametrize("shell", SHELLS)
def test_the_wrapped_command_passes_every_value_as_one_argument(shell: str) -> None:
    marker = new_marker()
    values = ["; touch pwned", "$(id)", "`id`", "a'b\"c", "two\nlines", "*", ""]
    result = run_command([shell, "-c", remote_command([*ARGV_ECHO, *values], "/", marker)], timeout=10)
    pid_line, output = result.stdout.split("\n", 1)
    assert pid_line.startswith(marker) and pid_line[len(marker) :].isdigit()
    assert json.loads(output) == values


@pytest.mark.parametrize("shell", SHELLS)
def test_the_shell_stays_the_parent_so_a_signal_reads_as_one(shell: str) -> None:
    # The last command is not exec'd: the shell survives it and reports 128+N, read as -N.
    result = run_command(
        [shell, "-c", remote_command(["sh", "-c", "kill -TERM $$"], None, new_marker())], timeout=10
    )
    assert result.returncode == 128 + 15
    assert shell_returncode(result.returncode) == -15


def test_a_bad_working_directory_fails_before_the_command_runs(tmp_path: Path) -> None:
    command = remote_command(["touch", str(tmp_path / "ran")], str(tmp_path / "missing"), new_marker())
    result = run_command(["sh", "-c", command], timeout=10)
    assert result.returncode != 0 and "missing" in result.stderr
    assert not (tmp_path / "ran").exists()


@pytest.mark.parametrize(
    ("status", "expected"), [(0, 0), (1, 1), (127, 127), (137, -9), (143, -15), (255, 255)]
)
def test_shell_statuses_map_like_run_command(status: int, expected: int) -> None:
    assert shell_returncode(status) == expected


def test_the_pid_line_is_cut_even_when_split_across_chunks() -> None:
    marker = new_marker()
    channel = FakeChannel()
    channel.send(marker[:5].encode(), marker[5:].encode() + b"12", b"34\nhello\n")
    channel.end()
    output = read(channel, marker)
    assert output.pid(0) == 1234
    assert output.stdout.text() == "hello\n"


def test_login_noise_before_the_pid_line_is_kept_and_a_forged_marker_later_is_output() -> None:
    marker = new_marker()
    channel = FakeChannel()
    channel.send(b"Welcome (from .bashrc)\n", f"{marker}77\n".encode(), f"{marker}99\n".encode())
    channel.end()
    output = read(channel, marker)
    assert output.pid(0) == 77
    assert output.stdout.text() == f"Welcome (from .bashrc)\n{marker}99\n"


def test_without_a_pid_line_the_output_is_kept_whole() -> None:
    channel = FakeChannel()
    channel.send(b"no marker here\n")
    channel.end()
    output = read(channel, new_marker())
    assert output.pid(0) is None
    assert output.stdout.text() == "no marker here\n"


def test_markers_are_unguessable() -> None:
    assert len({new_marker() for _ in range(100)}) == 100
