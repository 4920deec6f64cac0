"""largest_files on a real directory tree."""

from __future__ import annotations

import json
from pathlib import Path

from tools.builtin.files import largest_files


def test_largest_files_lists_the_biggest_first_with_a_total(tmp_path: Path) -> None:
    (tmp_path / "a" / "b").mkdir(parents=True)
    (tmp_path / "a" / "b" / "huge.bin").write_bytes(b"x" * 3 * 1024 * 1024)
    (tmp_path / "a" / "medium.log").write_bytes(b"x" * 200 * 1024)
    (tmp_path / "small.txt").write_bytes(b"x" * 10)
    (tmp_path / "link-to-huge").symlink_to(tmp_path / "a" / "b" / "huge.bin")
    result = largest_files.execute(json.dumps({"path": str(tmp_path), "limit": 2}), timeout=10)
    assert not result.is_error
    assert result.output.splitlines() == [
        f"Largest 2 of 3 files under {tmp_path} (3.2 MiB in all):",
        "     size  path",
        f"  3.0 MiB  {tmp_path}/a/b/huge.bin",
        f"200.0 KiB  {tmp_path}/a/medium.log",
    ]


def test_largest_files_refuses_relative_and_missing_paths(tmp_path: Path) -> None:
    relative = largest_files.execute('{"path": "var/log"}', timeout=10)
    assert relative.is_error and relative.output == "Error: path must be absolute"
    missing = largest_files.execute(json.dumps({"path": str(tmp_path / "nope")}), timeout=10)
    assert missing.output == f"Error: no such directory: {tmp_path / 'nope'}"


def test_largest_files_says_when_a_directory_is_empty(tmp_path: Path) -> None:
    result = largest_files.execute(json.dumps({"path": str(tmp_path)}), timeout=10)
    assert result.output == f"No files under {tmp_path}."
