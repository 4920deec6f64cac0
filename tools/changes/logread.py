"""Read what is new in a rotated log since the last scan (dpkg's log, apt's history).

A cursor remembers the file (inode), how far it was read (offset) and its first bytes (head).
The next read starts there; when the file was rotated (a new inode at the path, or the file is
shorter than the offset), the rest of the old file is read from ``NAME.1`` or ``NAME.1.gz`` (the
one whose head matches; logrotate may have compressed it already), then the new file from its
start. The first read of all (no cursor) reads the history: the rotated files, oldest first, then
the current one, within ``BASELINE_BYTES``, newest kept when over it. Each read is bounded
(``SCAN_BYTES``); what it could not take is read by the next one. Only complete records are
consumed (``boundary``): a line dpkg is still writing, an apt stanza without its ``End-Date``.
"""

from __future__ import annotations

import gzip
import os
from collections.abc import Callable
from dataclasses import dataclass
from pathlib import Path
from typing import Any

HEAD_BYTES = 128
MAX_ROTATED = 12  # NAME.1 ... NAME.12(.gz): a year of monthly rotations, or twelve weekly ones
BASELINE_BYTES = 16 * 1024 * 1024
SCAN_BYTES = 8 * 1024 * 1024
MAX_RECORD_BYTES = 1024 * 1024  # an unfinished record longer than this is taken as it is

Boundary = Callable[[bytes], int]
"""How many bytes of a chunk are complete records (0: none yet)."""


def line_boundary(chunk: bytes) -> int:
    return chunk.rfind(b"\n") + 1


@dataclass(frozen=True)
class LogRead:
    """The text read (complete records, oldest first), the new cursor, and what went wrong."""

    text: str
    cursor: dict[str, Any] | None
    problems: tuple[str, ...] = ()


def read_new(path: Path, cursor: dict[str, Any] | None, boundary: Boundary = line_boundary) -> LogRead:
    """What ``path`` gained since ``cursor`` (``None``: its whole history, rotated files too)."""
    try:
        info = os.stat(path)
    except FileNotFoundError:
        return LogRead("", cursor)
    except OSError as error:
        return LogRead("", cursor, (f"{path}: cannot read it: {error.strerror}",))
    try:
        if not _valid(cursor):
            return _history(path, info, boundary)
        assert cursor is not None
        offset, head = int(cursor["offset"]), str(cursor["head"])
        if info.st_ino == cursor["inode"] and info.st_size >= offset and _head(path)[: len(head)] == head:
            data = _read_from(path, offset, SCAN_BYTES)
            used = _complete(data, boundary, info.st_size - offset > len(data))
            return LogRead(_text(data[:used]), _cursor(path, info.st_ino, offset + used))
        return _rotated(path, info, offset, head, boundary)
    except (OSError, EOFError, gzip.BadGzipFile) as error:
        return LogRead("", cursor, (f"{path}: cannot read it: {error}",))


def _valid(cursor: dict[str, Any] | None) -> bool:
    return (
        isinstance(cursor, dict)
        and isinstance(cursor.get("inode"), int)
        and isinstance(cursor.get("offset"), int)
        and cursor["offset"] >= 0
        and isinstance(cursor.get("head"), str)
    )


def _rotated(path: Path, info: os.stat_result, offset: int, head: str, boundary: Boundary) -> LogRead:
    """The rest of the rotated-away file (when found), then the new file from its start."""
    parts: list[bytes] = []
    problems: tuple[str, ...] = ()
    old = next((p for p in _rotations(path)[:1] if _head(p)[: len(head)] == head), None)
    if old is None:
        problems = (
            f"{path}: rotated, and the old file was not found: entries since the last scan may be missed",
        )
    else:
        parts.append(_read_from(old, offset, SCAN_BYTES))
    budget = SCAN_BYTES - sum(map(len, parts))
    data = _read_from(path, 0, budget) if budget > 0 else b""
    used = _complete(data, boundary, info.st_size > len(data))
    parts.append(data[:used])
    return LogRead("".join(map(_text, parts)), _cursor(path, info.st_ino, used), problems)


def _history(path: Path, info: os.stat_result, boundary: Boundary) -> LogRead:
    """The rotated files and the current one, oldest first, within ``BASELINE_BYTES`` (newest kept)."""
    current = _read_from(path, 0, BASELINE_BYTES)
    used = _complete(current, boundary, info.st_size > len(current))
    texts = [current[:used]]
    budget = BASELINE_BYTES - len(current)
    problems: tuple[str, ...] = ()
    for rotated in _rotations(path):
        if budget <= 0:
            problems = (f"{path}: history longer than {BASELINE_BYTES} bytes: only the newest read",)
            break
        data = _read_from(rotated, 0, budget)
        budget -= len(data)
        texts.insert(0, data if data.endswith(b"\n") or not data else data + b"\n")
    return LogRead("".join(map(_text, texts)), _cursor(path, info.st_ino, used), problems)


def _rotations(path: Path) -> list[Path]:
    """``NAME.1`` (or ``NAME.1.gz``), ``NAME.2.gz``...: the rotated files that exist, newest first."""
    found = []
    for number in range(1, MAX_ROTATED + 1):
        for candidate in (
            path.with_name(f"{path.name}.{number}"),
            path.with_name(f"{path.name}.{number}.gz"),
        ):
            if candidate.is_file():
                found.append(candidate)
                break
    return found


def _read_from(path: Path, offset: int, limit: int) -> bytes:
    if limit <= 0:
        return b""
    if path.name.endswith(".gz"):
        with gzip.open(path, "rb") as handle:
            skipped = 0
            while skipped < offset:  # the decompressed stream is the old file: skip what was read
                step = handle.read(min(offset - skipped, 1024 * 1024))
                if not step:
                    return b""
                skipped += len(step)
            return handle.read(limit)
    with open(path, "rb") as handle:
        handle.seek(offset)
        return handle.read(limit)


def _head(path: Path) -> str:
    try:
        data = _read_from(path, 0, HEAD_BYTES)
    except (OSError, EOFError, gzip.BadGzipFile):
        return ""
    return data.hex()


def _cursor(path: Path, inode: int, offset: int) -> dict[str, Any]:
    head = _head(path)[: 2 * min(offset, HEAD_BYTES)]
    return {"inode": inode, "offset": offset, "head": head}


def _complete(data: bytes, boundary: Boundary, more: bool) -> int:
    """The bytes of ``data`` to consume: its complete records; an over-long unfinished one whole."""
    used = boundary(data)
    if used == 0 and (len(data) > MAX_RECORD_BYTES or more):
        used = line_boundary(data)
    return used


def _text(data: bytes) -> str:
    return data.decode("utf-8", errors="replace")
