"""``tail_log`` outputs of a captured run turned back into the files they were read from.

``tail_log`` (``tools.builtin.logs``) prints ``PATH (SIZE, modified TIME), last N lines:`` and the
lines. Where that is exactly invertible, the captured scenario gets the file (those lines, its
``{time:`` escaped) instead of a frozen output, so the replay's ``tail_log`` reads the same lines
from the simulated host, and a model run on the scenario may read the file its own way:

* the call has no ``filter`` and the output is complete (no line cut, no early stop, not empty);
* its path is under ``/var/log/`` on the real host, or under ``/hosts/TARGET/var/log/`` (a run
  of this harness, whose hosts live there): the file is that ``/var/log/...`` on the target, and
  the replay's argument becomes ``${TARGET.log_dir}/...``;
* every call on one file read a suffix of the longest one (the file did not change in between).

Only then, for every ``tail_log`` call of the run: the eval's catalog replaces a frozen tool on the
whole fleet, so one call that cannot be inverted freezes them all. The header line is not kept:
the file's size and time and its folder are the simulated host's.
"""

from __future__ import annotations

import posixpath
import re
from collections.abc import Mapping, Sequence
from dataclasses import dataclass
from typing import Any

from emulator.eval.log_lines import check_line

TAIL_LOG = "tail_log"
_HEADING = re.compile(
    r"(?P<path>/[^\n]*) \([^()\n]*, modified \d{4}-\d\d-\d\d \d\d:\d\d UTC\), last (?P<count>\d+) lines:"
)
_MAX_LINE_CHARS = 1000  # tools.builtin.logs cuts longer lines


@dataclass(frozen=True)
class TailCall:
    target: str | None
    arguments: Mapping[str, Any]
    output: str


@dataclass(frozen=True)
class InvertedLogs:
    files: dict[str, dict[str, list[str]]]  # target -> host path -> the file's lines (escaped)
    paths: dict[tuple[str, str], str]  # (target, path as called) -> the path's part under /var/log


def host_log_path(path: str, target: str) -> str | None:
    """The ``/var/log/...`` path on the target that ``path`` was, or ``None``."""
    if posixpath.normpath(path) != path or "\x00" in path:
        return None
    if path.startswith("/var/log/"):
        return path
    marker = f"/hosts/{target}/var/log/"
    return "/var/log/" + path.split(marker, 1)[1] if marker in path else None


def _lines(call: TailCall) -> list[str] | None:
    heading, _, body = call.output.partition("\n")
    found = _HEADING.fullmatch(heading)
    path = call.arguments.get("path")
    if found is None or found["path"] != path or call.arguments.get("filter") or not body:
        return None
    lines = body.split("\n")
    if int(found["count"]) != len(lines) or any(len(line) >= _MAX_LINE_CHARS for line in lines):
        return None
    return lines


def escaped(line: str) -> str:
    """A log line as a scenario writes it: ``{time:`` is literal only as ``{{time:``."""
    return line.replace("{time:", "{{time:")


def invert_tail_logs(calls: Sequence[TailCall]) -> InvertedLogs | None:
    """The files the run's ``tail_log`` calls read, or ``None`` when one of them cannot be inverted."""
    read: dict[tuple[str, str], list[list[str]]] = {}
    paths: dict[tuple[str, str], str] = {}
    whole: dict[tuple[str, str], list[list[str]]] = {}  # reads that got the whole file
    for call in calls:
        path = call.arguments.get("path")
        lines = _lines(call)
        where = host_log_path(path, call.target) if call.target and isinstance(path, str) else None
        if lines is None or where is None or call.target is None or not isinstance(path, str):
            return None
        asked = call.arguments.get("lines", 50)
        paths[(call.target, path)] = where
        read.setdefault((call.target, where), []).append(lines)
        whole.setdefault((call.target, where), []).extend([lines] if len(lines) < asked else [])
    files: dict[str, dict[str, list[str]]] = {}
    for (target, where), seen in read.items():
        longest = max(seen, key=len)
        changed = any(lines != longest for lines in whole.get((target, where), []))
        if changed or any(lines != longest[len(longest) - len(lines) :] for lines in seen):
            return None  # the file changed between two reads: the frozen outputs say it better
        content = [escaped(line) for line in longest]
        try:
            for line in content:
                check_line(line)
        except ValueError:
            return None
        files.setdefault(target, {})[where] = content
    return InvertedLogs(files=files, paths=paths)
