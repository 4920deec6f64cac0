"""Read logs under the configured log directories: list them, and tail one with an optional filter.

Every path goes through ``tools.paths.AllowedDirs``: ``..`` and symlinks leading outside the log
directories are refused, and files are opened with ``O_NOFOLLOW`` on their resolved path.
"""

from __future__ import annotations

import gzip
import os
import stat
from collections import deque
from collections.abc import Callable, Iterator
from datetime import UTC, datetime
from pathlib import Path
from typing import Any

from pydantic import BaseModel, ConfigDict, Field

from agent.tooling import ToolCategory
from tools.base import FunctionTool, ToolContext
from tools.errors import ToolCallError
from tools.paths import AllowedDirs
from tools.patterns import SafePattern, compile_safe
from tools.placement import HOST
from tools.text import human_bytes, shorten, table

_BLOCK = 64 * 1024
_MAX_SCAN_BYTES = 32 * 1024 * 1024  # how far back a filtered tail searches
_MAX_LINE_CHARS = 1000
# A compressed line is read in pieces of at most this many bytes: a gzip bomb without newlines
# must not be decompressed into memory whole. Only a line's first piece is matched and shown.
_MAX_GZIP_LINE_BYTES = 64 * 1024
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
        description="Only lines matching this regular expression (RE2 syntax, case-insensitive).",
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
            placement=HOST,
        ),
        FunctionTool(
            list_logs,
            ListLogsArgs,
            name="list_logs",
            description=f"The log files under {where}, newest first, with size and modification time.",
            category=ToolCategory.READ_ONLY,
            parallel=True,
            timeout=15,
            placement=HOST,
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


def _compile_filter(text: str | None) -> SafePattern | None:
    # RE2: linear in the line whatever the pattern, so the deadline checks between lines hold.
    if not text:
        return None
    try:
        return compile_safe(text, ignore_case=True)
    except ValueError as exc:
        raise ToolCallError(f"filter is not a valid regular expression: {exc}") from None


def _plain_tail(
    handle: Any, size: int, count: int, pattern: SafePattern | None, ctx: ToolContext
) -> tuple[list[str], bool]:
    """The last ``count`` (matching) lines, reading backwards; ``complete`` is False if cut short."""
    found: list[str] = []
    for line, offset in _lines_backward(handle, size, _MAX_SCAN_BYTES, ctx.expired):
        if pattern is None or pattern.search(line):
            found.append(line)
            if len(found) == count:
                return found[::-1], True
        if ctx.expired():
            return found[::-1], False
        if offset < 0:  # the scan limit was reached inside this line
            return found[::-1], False
    return found[::-1], True


def _lines_backward(
    handle: Any, size: int, max_bytes: int, expired: Callable[[], bool]
) -> Iterator[tuple[str, int]]:
    """Lines of a file from the last to the first, with the offset where each starts.

    Reads at most ``max_bytes`` from the end, and stops reading once ``expired()``; the line cut
    by either limit comes last, with offset -1. A long line is kept as a list of blocks until
    its start is found, so a file without newlines costs linear time, not quadratic.
    """
    position = size
    pending: list[bytes] = []  # the blocks of the line being read, the last block first
    at_end = True  # no line yielded yet: a final newline there does not start a line
    while position > 0:
        if size - position >= max_bytes or expired():
            yield _joined(pending), -1
            return
        step = min(_BLOCK, position)
        position -= step
        handle.seek(position)
        block = handle.read(step)
        parts = block.split(b"\n")
        if len(parts) == 1:
            pending.append(block)  # no line starts in this block
            continue
        pending.append(parts[-1])
        lines = [*parts[1:-1], b"".join(reversed(pending))]
        starts = [position + len(parts[0]) + 1]
        for part in parts[1:-1]:
            starts.append(starts[-1] + len(part) + 1)
        pending = [parts[0]]
        if at_end and lines[-1] == b"":
            lines.pop()
            starts.pop()
        at_end = False
        for part, start in zip(reversed(lines), reversed(starts), strict=True):
            yield part.decode("utf-8", errors="replace"), start
    if any(pending):
        yield _joined(pending), 0


def _joined(pending: list[bytes]) -> str:
    return b"".join(reversed(pending)).decode("utf-8", errors="replace")


def _gzip_tail(
    handle: Any, count: int, pattern: SafePattern | None, ctx: ToolContext
) -> tuple[list[str], bool]:
    """Compressed files can only be read forwards: keep a window of the last matching lines."""
    window: deque[str] = deque(maxlen=count)
    with gzip.GzipFile(fileobj=handle) as stream:
        for line in _bounded_lines(stream, ctx.expired):
            if pattern is None or pattern.search(line):
                window.append(line)
            if ctx.expired():
                return list(window), False
    return list(window), not ctx.expired()  # the lines can also stop inside an endless line


def _bounded_lines(stream: Any, expired: Callable[[], bool]) -> Iterator[str]:
    """Lines of a stream, each cut to its first ``_MAX_GZIP_LINE_BYTES`` (the rest is skipped).

    Stops once ``expired()``, also while skipping the rest of one endless line.
    """
    continuing = False  # inside a long line whose first piece was already yielded
    while True:
        raw = stream.readline(_MAX_GZIP_LINE_BYTES)
        if not raw or (continuing and expired()):
            return
        ends = raw.endswith(b"\n")
        if not continuing:
            yield raw.decode("utf-8", errors="replace").rstrip("\n")
        continuing = not ends


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
