"""``largest_files``: what is filling a disk."""

from __future__ import annotations

import heapq
import os
import stat
from typing import Any

from pydantic import BaseModel, ConfigDict, Field

from agent.tooling import ToolCategory
from tools.base import FunctionTool, ToolContext, tool
from tools.errors import ToolCallError
from tools.placement import HOST
from tools.text import human_bytes, table

_MAX_ENTRIES_SCANNED = 2_000_000


class LargestFilesArgs(BaseModel):
    model_config = ConfigDict(extra="forbid")

    path: str = Field(description="The directory to search (its filesystem only, like du -x).")
    limit: int = Field(default=10, ge=1, le=100, description="How many files to list.")


@tool(category=ToolCategory.READ_ONLY, parallel=True, timeout=60, placement=HOST)
def largest_files(args: LargestFilesArgs, ctx: ToolContext) -> str:
    """The largest files under a directory, staying on its filesystem and not following symlinks."""
    if not os.path.isabs(args.path):
        raise ToolCallError("path must be absolute")
    try:
        root = os.stat(args.path)
    except FileNotFoundError:
        raise ToolCallError(f"no such directory: {args.path}") from None
    if not stat.S_ISDIR(root.st_mode):
        raise ToolCallError(f"{args.path} is not a directory")
    scan = _Scan(root.st_dev, args.limit)
    complete = scan.run(args.path, ctx)
    if not scan.largest:
        return f"No files under {args.path}."
    rows = [[human_bytes(size), path] for size, path in sorted(scan.largest, reverse=True)]
    lines = [
        f"Largest {len(rows)} of {scan.files} files under {args.path} "
        f"({human_bytes(scan.total_bytes)} in all):",
        table(["size", "path"], rows, right=(0,)),
    ]
    if scan.unreadable:
        lines.append(f"({scan.unreadable} directories could not be read)")
    if not complete:
        lines.append("(the search stopped at its time limit; these are the largest found so far)")
    return "\n".join(lines)


class _Scan:
    """An iterative walk keeping the ``limit`` largest regular files in a heap."""

    def __init__(self, device: int, limit: int) -> None:
        self.device = device
        self.limit = limit
        self.largest: list[tuple[int, str]] = []
        self.files = 0
        self.total_bytes = 0
        self.unreadable = 0

    def run(self, top: str, ctx: ToolContext) -> bool:
        """Walk ``top``; False when stopped early by the deadline or the entry cap."""
        stack = [top]
        scanned = 0
        while stack:
            if ctx.expired() or scanned > _MAX_ENTRIES_SCANNED:
                return False
            directory = stack.pop()
            try:
                with os.scandir(directory) as entries:
                    for entry in entries:
                        scanned += 1
                        if scanned % 4096 == 0 and ctx.expired():
                            return False
                        self._visit(entry, stack)
            except OSError:
                self.unreadable += 1
        return True

    def _visit(self, entry: os.DirEntry[str], stack: list[str]) -> None:
        try:
            info = entry.stat(follow_symlinks=False)
        except OSError:
            return
        if info.st_dev != self.device:
            return  # another filesystem mounted below (like du -x): /proc, other disks
        if stat.S_ISDIR(info.st_mode):
            stack.append(entry.path)
        elif stat.S_ISREG(info.st_mode):
            self.files += 1
            self.total_bytes += info.st_size
            item = (info.st_size, entry.path)
            if len(self.largest) < self.limit:
                heapq.heappush(self.largest, item)
            elif item > self.largest[0]:
                heapq.heapreplace(self.largest, item)


def file_tools() -> list[FunctionTool[Any]]:
    return [largest_files]
