"""``read_yaml_file``: what an operator's YAML file must be before it is parsed, and the lines kept."""

from __future__ import annotations

import os
from pathlib import Path

import pytest

from tools.config_files import UnreadableConfigFile, read_yaml_file


def read(path: Path, max_bytes: int = 4096) -> tuple[object, list[int]]:
    return read_yaml_file(path, max_bytes=max_bytes, items_at=("policy", "rules"))


def test_the_items_lines_are_kept_for_messages(tmp_path: Path) -> None:
    path = tmp_path / "policy.yaml"
    path.write_text("policy:\n  rules:\n    - name: a\n\n    - name: b\n")
    data, lines = read(path)
    assert data == {"policy": {"rules": [{"name": "a"}, {"name": "b"}]}} and lines == [3, 5]


@pytest.mark.parametrize(
    ("content", "problem"),
    [
        (b"\xff\xfe policy", "is not UTF-8 text (byte 0)"),
        (b"policy: [1, 2\n", "invalid YAML at line 2, column 1"),
        (b"[" * 5000, "invalid YAML"),  # nested too deeply, or refused by the parser: never a crash
        (b"x: !!python/object/apply:os.system ['true']\n", "invalid YAML"),  # the safe loader only
    ],
)
def test_a_file_that_does_not_parse_names_the_problem(tmp_path: Path, content: bytes, problem: str) -> None:
    path = tmp_path / "policy.yaml"
    path.write_bytes(content)
    with pytest.raises(UnreadableConfigFile) as raised:
        read(path, max_bytes=1 << 20)
    assert raised.value.problem.startswith(problem)


def test_what_is_not_a_small_regular_file_is_refused_before_reading(tmp_path: Path) -> None:
    fifo = tmp_path / "fifo"
    os.mkfifo(fifo)  # reading it would block the process for ever
    with pytest.raises(UnreadableConfigFile, match="is not a regular file"):
        read(fifo)
    big = tmp_path / "big.yaml"
    big.write_text("# " + "x" * 5000)
    with pytest.raises(UnreadableConfigFile, match="is larger than 4 KiB"):
        read(big)
    with pytest.raises(UnreadableConfigFile, match="cannot read the file"):
        read(tmp_path / "missing.yaml")
