"""tail_log and list_logs on real files under a temporary log directory."""

from __future__ import annotations

import gzip
import json
import os
import subprocess
import sys
import time
from pathlib import Path
from typing import Any

import pytest

from tools.base import FunctionTool, ToolContext
from tools.builtin.logs import _plain_tail, log_tools
from tools.paths import AllowedDirs
from tools.patterns import compile_safe


@pytest.fixture
def logs(tmp_path: Path) -> Path:
    root = tmp_path / "log"
    (root / "nginx").mkdir(parents=True)
    lines = [
        f"2025-01-01T00:00:{index % 60:02d} {'ERROR' if index % 10 == 0 else 'INFO'} request {index}"
        for index in range(5000)
    ]
    (root / "nginx" / "access.log").write_text("\n".join(lines) + "\n")
    with gzip.open(root / "nginx" / "access.log.1.gz", "wt") as handle:
        handle.write("old line 1\nold ERROR line 2\nold line 3\n")
    (tmp_path / "outside.txt").write_text("password=hunter2\n")
    return root


def tools_for(root: Path) -> dict[str, FunctionTool[Any]]:
    return {tool.name: tool for tool in log_tools(AllowedDirs([root]))}


def tail(root: Path, **arguments: object) -> tuple[str, bool]:
    result = tools_for(root)["tail_log"].execute(json.dumps(arguments), timeout=10)
    return result.output, result.is_error


def test_tail_shows_the_last_lines_in_order(logs: Path) -> None:
    output, is_error = tail(logs, path="nginx/access.log", lines=3)
    assert not is_error
    heading, *shown = output.splitlines()
    assert heading.startswith(f"{os.path.realpath(logs)}/nginx/access.log (") and heading.endswith(
        "last 3 lines:"
    )
    assert shown == [
        "2025-01-01T00:00:17 INFO request 4997",
        "2025-01-01T00:00:18 INFO request 4998",
        "2025-01-01T00:00:19 INFO request 4999",
    ]


def test_tail_with_a_filter_shows_only_matching_lines(logs: Path) -> None:
    output, _ = tail(logs, path=str(logs / "nginx" / "access.log"), lines=2, filter="error")
    assert output.splitlines()[0].endswith("last 2 lines matching /error/:")
    assert output.splitlines()[1:] == [
        "2025-01-01T00:00:00 ERROR request 4980",
        "2025-01-01T00:00:10 ERROR request 4990",
    ]


def test_tail_with_a_filter_that_matches_nothing_says_so(logs: Path) -> None:
    output, is_error = tail(logs, path="nginx/access.log", filter="segfault")
    assert not is_error and output.endswith("no lines matching /segfault/ in the file.")


def test_tail_reads_rotated_gzip_logs(logs: Path) -> None:
    output, _ = tail(logs, path="nginx/access.log.1.gz", lines=5, filter="ERROR")
    assert output.splitlines()[1:] == ["old ERROR line 2"]


def test_tail_reads_a_file_spanning_many_blocks_and_one_without_final_newline(logs: Path) -> None:
    (logs / "big.log").write_text("".join(f"{index:06d} {'x' * 90}\n" for index in range(20000)) + "last")
    output, _ = tail(logs, path="big.log", lines=3)
    assert [line[:6] for line in output.splitlines()[1:]] == ["019998", "019999", "last"]


@pytest.mark.parametrize("path", ["../outside.txt", "nginx/../../outside.txt"])
def test_tail_refuses_dot_dot(logs: Path, path: str) -> None:
    output, is_error = tail(logs, path=path)
    assert is_error and "'..' is not allowed" in output
    assert "hunter2" not in output


def test_tail_refuses_absolute_paths_and_symlinks_outside(logs: Path) -> None:
    (logs / "sneaky.log").symlink_to(logs.parent / "outside.txt")
    for path in (str(logs.parent / "outside.txt"), "sneaky.log", "/etc/passwd"):
        output, is_error = tail(logs, path=path)
        assert is_error and "outside the log directories" in output, path
        assert "hunter2" not in output


def test_tail_of_a_directory_points_to_list_logs(logs: Path) -> None:
    output, is_error = tail(logs, path="nginx")
    assert is_error and "not a regular file (use list_logs" in output


def test_tail_with_a_bad_regex_is_an_error(logs: Path) -> None:
    output, is_error = tail(logs, path="nginx/access.log", filter="([")
    assert is_error and "filter is not a valid regular expression" in output


def test_list_logs_shows_files_newest_first_with_sizes(logs: Path) -> None:
    os.utime(logs / "nginx" / "access.log.1.gz", (1_600_000_000, 1_600_000_000))
    result = tools_for(logs)["list_logs"].execute("{}", timeout=10)
    lines = result.output.splitlines()
    assert lines[0] == "2 files, newest first:"
    assert lines[1].split() == ["modified", "size", "path"]
    assert lines[2].endswith("nginx/access.log") and "KiB" in lines[2]
    assert lines[3].startswith("2020-09-13 12:26 UTC") and lines[3].endswith("access.log.1.gz")


# -- regex safety: model-supplied filters run on RE2 and inside the tool's deadline ---------------

_CATASTROPHIC_TAIL = """
import json, sys
from pathlib import Path
from tools.builtin.logs import log_tools
from tools.paths import AllowedDirs
root = Path(sys.argv[1])
(tail_log,) = [tool for tool in log_tools(AllowedDirs([root])) if tool.name == "tail_log"]
result = tail_log.execute(json.dumps({"path": "redos.log", "filter": "(.+)+Q"}), timeout=10)
print(json.dumps({"output": result.output, "is_error": result.is_error}))
"""


def test_the_issue_redos_filter_on_a_64_character_line_finishes(logs: Path) -> None:
    """``(.+)+Q`` on 64 characters takes a backtracking engine about 2**64 steps. A separate
    process, so a regression fails this test at its bound instead of pinning the test run."""
    (logs / "redos.log").write_text("a" * 64 + "\n")
    done = subprocess.run(
        [sys.executable, "-c", _CATASTROPHIC_TAIL, str(logs)],
        capture_output=True,
        text=True,
        timeout=30,  # generous: it answers in well under a second; a hang would take ages
        check=True,
        cwd=Path(__file__).resolve().parents[3],
    )
    answer = json.loads(done.stdout)
    assert not answer["is_error"]
    assert answer["output"].endswith("no lines matching /(.+)+Q/ in the file.")


def test_a_filter_matches_like_a_case_insensitive_search(logs: Path) -> None:
    (logs / "mixed.log").write_text("GET /a 200\nPOST /b 500 Internal\nget /c 502\n")
    output, is_error = tail(logs, path="mixed.log", filter=r"(?:get|post) /\w+ 5\d\d")
    assert not is_error
    assert output.splitlines()[1:] == ["POST /b 500 Internal", "get /c 502"]


@pytest.mark.parametrize("pattern", [r"(a)\1", r"error(?=:)", r"(?<!x)y"])
def test_a_filter_needing_backtracking_features_is_refused_with_the_reason(logs: Path, pattern: str) -> None:
    output, is_error = tail(logs, path="nginx/access.log", filter=pattern)
    assert is_error
    assert output.startswith("Error: filter is not a valid regular expression: ")
    assert "RE2" in output and "no backreferences or lookaround" in output


def test_a_scan_stops_at_the_tools_deadline(logs: Path) -> None:
    """The time bound is enforced inside the scan (even inside one long line), so the tool's
    thread ends at its deadline instead of scanning on after the loop stopped waiting."""
    path = logs / "huge.log"
    path.write_bytes(b"x" * (8 * 1024 * 1024) + b"\nlast needle\n")  # an 8 MiB line, no newline
    expired = ToolContext(timeout=1.0, deadline=time.monotonic() - 1.0)
    with path.open("rb") as handle:
        found, complete = _plain_tail(handle, path.stat().st_size, 5, compile_safe("xneedle"), expired)
    assert (found, complete) == ([], False)
    fresh = ToolContext.starting_now(30.0)
    with path.open("rb") as handle:
        found, complete = _plain_tail(handle, path.stat().st_size, 5, compile_safe("needle"), fresh)
    assert (found, complete) == (["last needle"], True)  # with time left, the same scan completes


def test_a_compressed_line_without_newlines_is_read_in_bounded_pieces(logs: Path) -> None:
    with gzip.open(logs / "bomb.log.gz", "wb") as handle:
        handle.write(b"first\n" + b"z" * (4 * 1024 * 1024) + b"\nlast\n")
    output, is_error = tail(logs, path="bomb.log.gz", lines=3)
    assert not is_error
    first, long_line, last = output.splitlines()[1:]
    assert (first, last) == ("first", "last")
    assert long_line == "z" * 997 + "..."
