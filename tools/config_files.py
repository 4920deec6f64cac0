"""Reading an operator's YAML file (the alert routes, the access policy): refused before parsing
when it is not a small regular UTF-8 file, parsed with PyYAML's safe loader, and the line of each
item of its main list kept for messages (``rules[2] (line 14)``).

Each caller turns an ``UnreadableConfigFile`` into its own error (``AlertConfigError``,
``PolicyConfigError``) naming the file, so the operator reads one line that says what to fix.
"""

from __future__ import annotations

import stat
from collections.abc import Sequence
from pathlib import Path
from typing import Any

import yaml


class UnreadableConfigFile(Exception):
    """The file cannot be read or parsed; ``problem`` is the sentence for the operator.

    Internal to the readers (each raises its package's own configuration error from it)."""

    def __init__(self, problem: str) -> None:
        super().__init__(problem)
        self.problem = problem


def read_yaml_file(path: Path, *, max_bytes: int, items_at: Sequence[str]) -> tuple[Any, list[int]]:
    """The file's YAML value (``None`` when empty) and the line of each item of the list found
    under the keys ``items_at`` (``("alerts", "routes")``)."""
    try:
        info = path.stat()
        if not stat.S_ISREG(info.st_mode):  # a directory, a FIFO or a device (would block or never end)
            raise UnreadableConfigFile("is not a regular file")
        if info.st_size > max_bytes:
            raise UnreadableConfigFile(f"is larger than {max_bytes // 1024} KiB")
        text = path.read_bytes().decode("utf-8")
    except OSError as exc:
        raise UnreadableConfigFile(f"cannot read the file: {exc.strerror or exc}") from exc
    except UnicodeDecodeError as exc:
        raise UnreadableConfigFile(f"is not UTF-8 text (byte {exc.start})") from exc
    loader = yaml.SafeLoader(text)
    try:
        node = loader.get_single_node()
        return (loader.construct_document(node) if node is not None else None), item_lines(node, items_at)
    except yaml.YAMLError as exc:
        raise UnreadableConfigFile(yaml_problem(exc)) from exc
    except RecursionError:
        raise UnreadableConfigFile("invalid YAML: nested too deeply") from None
    finally:
        loader.dispose()


def yaml_problem(exc: yaml.YAMLError) -> str:
    """Where and what: ``invalid YAML at line 3, column 5: ...`` (and where an unclosed bracket opened)."""
    mark = getattr(exc, "problem_mark", None)
    problem = getattr(exc, "problem", None) or str(exc)
    if mark is None:
        return f"invalid YAML: {problem}"
    context = getattr(exc, "context_mark", None)
    opened = f" (in what opens at line {context.line + 1})" if context and context.line != mark.line else ""
    return f"invalid YAML at line {mark.line + 1}, column {mark.column + 1}: {problem}{opened}"


def item_lines(node: yaml.Node | None, keys: Sequence[str]) -> list[int]:
    """The (1-based) line of each item of the sequence under ``keys``; ``[]`` where there is none."""
    for key in keys:
        if not isinstance(node, yaml.MappingNode):
            return []
        node = next((value for name, value in node.value if name.value == key), None)
    if not isinstance(node, yaml.SequenceNode):
        return []
    return [item.start_mark.line + 1 for item in node.value]
