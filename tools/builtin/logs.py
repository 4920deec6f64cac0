"""Read logs under the configured log directories: list them, and tail one with an optional filter.

Every path goes through ``tools.paths.AllowedDirs``: ``..`` and symlinks leading outside the log
directories are refused, and files are opened with ``O_NOFOLLOW`` on their resolved path.
"""

from __future__ import annotations

import gzip
import os
import re
import stat
from collections import deque
from collections.abc import Iterator
from datetime import UTC, datetime
from pathlib import Path
from typing import Any

from pydantic import BaseModel, ConfigDict, Field

from agent.tooling import ToolCategory
from tools.base import FunctionTool, ToolContext
from tools.errors import ToolCallError
from tools.paths import AllowedDirs
from tools.text import human_bytes, shorten, table

_BLOCK = 64 * 1024
_MAX_SCAN_BYTES = 32 * 1024 * 1024  # how far back a filtered tail searches
_MAX_LINE_CHARS = 1000
_MAX_LISTED = 100
_MAX_DEPTH = 3


class TailLogArgs(BaseModel):
    model_config = ConfigDict(extra="forbid")

    path: str = Field(
        description="A log file under the log directories: absolute, or relative to one of them."
    )
    lines: int = Field(default=50, ge=1, le=1000, description="How many lines to show.")
    filter: str | None = Field(
        default=None,
        max_length=200,
        description="Only lines matching this regular expression (case-insensitive).",
    )


class ListLogsArgs(BaseModel):
    model_config = ConfigDict(extra="forbid")

    path: str | None = Field(
        default=None, description="A directory under the log directories; default: all of them."
    )


def format_mtime(timestamp: float) -> str:
    return datetime.fromtimestamp(timestamp, UTC).strftime("%Y-%m-%d %H:%M UTC")


def log_tools(log_dirs: AllowedDirs) -> list[FunctionTool[Any]]:
    """``tail_log`` and ``list_logs`` bound to the given log directories."""

    def tail_log(args: TailLogArgs, ctx: ToolContext) -> str:
        return _tail(log_dirs.resolve(args.path), args, ctx)

    def list_logs(args: ListLogsArgs, ctx: ToolContext) -> str:
        roots = [log_dirs.resolve(args.path)] if args.path else list(log_dirs.real_roots())
        return _list(roots, log_dirs, ctx)

    where = log_dirs.describe()
    return [
        FunctionTool(
            tail_log,
            TailLogArgs,
            name="tail_log",
            description=f"The last lines of a log file under {where}, optionally only lines matching a regex.",
            category=ToolCategory.READ_ONLY,
            parallel=True,
            timeout=15,
        ),
        FunctionTool(
            list_logs,
            ListLogsArgs,
            name="list_logs",
            description=f"The log files under {where}, newest first, with size and modification time.",
            category=ToolCategory.READ_ONLY,
            parallel=True,
            timeout=15,
        ),
    ]


def _tail(path: Path, args: TailLogArgs, ctx: ToolContext) -> str:
    pattern = _compile_filter(args.filter)
    # O_NOFOLLOW: the resolved path was checked; a symlink swapped in since then is refused.
    fd = os.open(path, os.O_RDONLY | os.O_NOFOLLOW | getattr(os, "O_CLOEXEC", 0))
    info = os.fstat(fd)
    if not stat.S_ISREG(info.st_mode):
        os.close(fd)
        raise ToolCallError(f"{path} is not a regular file (use list_logs for directories)")
    with os.fdopen(fd, "rb") as handle:
        if path.suffix == ".gz":
            lines, complete = _gzip_tail(handle, args.lines, pattern, ctx)
        else:
            lines, complete = _plain_tail(handle, info.st_size, args.lines, pattern, ctx)
    what = f"lines matching /{args.filter}/" if pattern else "lines"
    heading = f"{path} ({human_bytes(info.st_size)}, modified {format_mtime(info.st_mtime)})"
    if not lines:
        scope = "the file" if complete else "the part of the file searched"
        return f"{heading}: no {what} in {scope}."
    note = "" if complete else " (search stopped early: size or time limit)"
    shown = "\n".join(shorten(line, _MAX_LINE_CHARS) for line in lines)
    return f"{heading}, last {len(lines)} {what}{note}:\n{shown}"


def _compile_filter(text: str | None) -> re.Pattern[str] | None:
    if not text:
        return None
    try:
        return re.compile(text, re.IGNORECASE)
    except re.error as exc:
        raise ToolCallError(f"filter is not a valid regular expression: {exc}") from exc


def _plain_tail(
    handle: Any, size: int, count: int, pattern: re.Pattern[str] | None, ctx: ToolContext
) -> tuple[list[str], bool]:
    """The last ``count`` (matching) lines, reading backwards; ``complete`` is False if cut short."""
    found: list[str] = []
    for line, offset in _lines_backward(handle, size, _MAX_SCAN_BYTES):
        if pattern is None or pattern.search(line):
            found.append(line)
            if len(found) == count:
                return found[::-1], True
        if ctx.expired():
            return found[::-1], False
        if offset < 0:  # the scan limit was reached inside this line
            return found[::-1], False
    return found[::-1], True


def _lines_backward(handle: Any, size: int, max_bytes: int) -> Iterator[tuple[str, int]]:
    """Lines of a file from the last to the first, with the offset where each starts.

    Reads at most ``max_bytes`` from the end; the line cut by that limit comes last, with
    offset -1.
    """
    position = size
    remainder = b""
    first_block = True
    while position > 0:
        if size - position >= max_bytes:
            yield remainder.decode("utf-8", errors="replace"), -1
            return
        step = min(_BLOCK, position)
        position -= step
        handle.seek(position)
        chunk = handle.read(step) + remainder
        parts = chunk.split(b"\n")
        remainder = parts[0]
        lines = parts[1:]
        if first_block and lines and lines[-1] == b"":
            lines = lines[:-1]  # the file's final newline does not start a line
        first_block = False
        offset = position + len(chunk)
        for part in reversed(lines):
            offset -= len(part) + 1
            yield part.decode("utf-8", errors="replace"), offset
    if remainder:
        yield remainder.decode("utf-8", errors="replace"), 0


def _gzip_tail(
    handle: Any, count: int, pattern: re.Pattern[str] | None, ctx: ToolContext
) -> tuple[list[str], bool]:
    """Compressed files can only be read forwards: keep a window of the last matching lines."""
    window: deque[str] = deque(maxlen=count)
    with gzip.GzipFile(fileobj=handle) as stream:
        for raw in stream:
            line = raw.decode("utf-8", errors="replace").rstrip("\n")
            if pattern is None or pattern.search(line):
                window.append(line)
            if ctx.expired():
                return list(window), False
    return list(window), True


def _list(roots: list[Path], log_dirs: AllowedDirs, ctx: ToolContext) -> str:
    entries: list[tuple[float, int, str]] = []
    for root in roots:
        if not root.is_dir():
            raise ToolCallError(f"{root} is not a directory")
        for path, info in walk_files(root, max_depth=_MAX_DEPTH):
            if ctx.expired():
                break
            if log_dirs.contains(Path(os.path.realpath(path))):
                entries.append((info.st_mtime, info.st_size, path))
    if not entries:
        return f"No files under {', '.join(map(str, roots))}."
    entries.sort(reverse=True)
    rows = [[format_mtime(mtime), human_bytes(size), path] for mtime, size, path in entries[:_MAX_LISTED]]
    more = f"\n... and {len(entries) - _MAX_LISTED} more" if len(entries) > _MAX_LISTED else ""
    return (
        f"{len(entries)} files, newest first:\n{table(['modified', 'size', 'path'], rows, right=(1,))}{more}"
    )


def walk_files(root: Path, max_depth: int | None = None) -> Iterator[tuple[str, os.stat_result]]:
    """Regular files under ``root`` (not following symlinks), with their ``lstat``; unreadable dirs skipped."""
    stack: list[tuple[str, int]] = [(str(root), 0)]
    while stack:
        directory, depth = stack.pop()
        try:
            entries = list(os.scandir(directory))
        except OSError:
            continue
        for entry in entries:
            try:
                info = entry.stat(follow_symlinks=False)
            except OSError:
                continue
            if stat.S_ISDIR(info.st_mode):
                if max_depth is None or depth + 1 < max_depth:
                    stack.append((entry.path, depth + 1))
            elif stat.S_ISREG(info.st_mode):
                yield entry.path, info
