"""``clean_old_logs``: delete old rotated log files, bound to the dry run the approver saw.

The dry run computes a plan (each file with its inode, size and mtime, and its directory's inode)
and returns it as the result's ``plan``: the loop stores it with that one approval and hands it
back, in the approved call's arguments, to the one execution. The execution deletes only the files
of that plan, and only those still exactly as planned *and* still matching the call's criteria
(under the log directories and the call's path, the name pattern, older than the age): a file that
grew, was replaced, whose directory was swapped, or that a tampered plan slipped in, is skipped and
reported. A new file that matches the criteria after the dry run is never touched. Without a plan
(a call nobody approved with a dry run) or with one older than the plan lifetime, it refuses. A
dry run that finds nothing says so, and nobody is asked to approve it.
"""

from __future__ import annotations

import fnmatch
import json
import os
import re
import stat
import time
from dataclasses import asdict, dataclass
from pathlib import Path
from typing import Any

from pydantic import BaseModel, ConfigDict, Field

from agent.tooling import ToolCategory, ToolResult
from tools.base import FunctionTool, ToolContext, error_result
from tools.builtin.logs import format_mtime, walk_files
from tools.errors import ToolCallError
from tools.paths import AllowedDirs
from tools.placement import HOST
from tools.text import human_bytes, table
from tools.verification import Declared, NoUndo

# Rotated or compressed logs: app.log.1, app.log.2.gz, syslog-20250101, x.old, x.bak, x.xz ...
_ROTATED_NAME = re.compile(
    r"(\.(gz|xz|bz2|zst|lz4|zip|old|bak)|\.\d+(\.(gz|xz|bz2|zst|lz4))?|-\d{8}(\d{2})?(\.(gz|xz|bz2|zst|lz4))?)$"
)
_PLAN_VERSION = 1


class CleanOldLogsArgs(BaseModel):
    model_config = ConfigDict(extra="forbid")

    path: str | None = Field(default=None, description="A directory under the log directories; default: all.")
    older_than_days: int = Field(
        default=7, ge=1, le=3650, description="Only files last modified before this."
    )
    name_glob: str | None = Field(
        default=None,
        max_length=100,
        description="Only files whose name matches this glob, e.g. '*.log.*'. "
        "Default: rotated or compressed logs (*.1, *.gz, *-20250101, *.old ...).",
    )
    max_files: int = Field(default=200, ge=1, le=1000, description="At most this many files (oldest first).")


@dataclass(frozen=True)
class PlannedFile:
    """A file the dry run listed, with what it must still be for the real run to delete it."""

    path: str
    size: int
    mtime_ns: int
    dev: int
    ino: int
    parent_dev: int
    parent_ino: int


@dataclass(frozen=True)
class Plan:
    created: float
    cutoff: float
    files: tuple[PlannedFile, ...]
    matched: int
    complete: bool

    @property
    def total_bytes(self) -> int:
        return sum(item.size for item in self.files)


def cleanup_tools(log_dirs: AllowedDirs, plan_ttl_seconds: float) -> list[FunctionTool[Any]]:
    """``clean_old_logs`` bound to the log directories; plans older than ``plan_ttl_seconds`` are refused."""

    def dry_run(args: CleanOldLogsArgs, ctx: ToolContext) -> ToolResult:
        plan = _make_plan(args, log_dirs, ctx)
        return ToolResult(
            output=_describe_plan(plan, args),
            plan=json.dumps({"version": _PLAN_VERSION, **asdict(plan)}),
            nothing_to_do=not plan.files,
        )

    def clean_old_logs(args: CleanOldLogsArgs, ctx: ToolContext) -> ToolResult:
        plan = _load_plan(ctx.plan)
        if plan is None:
            return error_result(
                "no approved dry run came with this call; nothing was deleted. Call clean_old_logs "
                "again so a fresh dry run is shown for approval."
            )
        if time.time() - plan.created > plan_ttl_seconds:
            return error_result(
                f"the approved dry run is older than {plan_ttl_seconds / 60:.0f} min; nothing was "
                "deleted. Call clean_old_logs again so a fresh dry run is shown for approval."
            )
        return _execute_plan(plan, args, log_dirs)

    return [
        FunctionTool(
            clean_old_logs,
            CleanOldLogsArgs,
            name="clean_old_logs",
            description=(
                f"Delete old rotated log files under {log_dirs.describe()} to free disk space. "
                "Destructive: a dry run lists the files and bytes for the approver first; the approved "
                "run deletes only those files, skipping any that changed since."
            ),
            category=ToolCategory.DESTRUCTIVE,
            timeout=120,
            preview=dry_run,
            command=lambda args: "delete exactly the files the dry run below lists, each only if unchanged",
            placement=HOST,
            verification=Declared(undo=NoUndo("deleted files are gone; nothing keeps a copy of them")),
        )
    ]


def _load_plan(raw: str | None) -> Plan | None:
    if not raw:
        return None
    try:
        payload = json.loads(raw)
        if payload.get("version") != _PLAN_VERSION:
            return None
        files = tuple(PlannedFile(**item) for item in payload["files"])
        return Plan(
            float(payload["created"]),
            float(payload["cutoff"]),
            files,
            int(payload["matched"]),
            bool(payload["complete"]),
        )
    except (ValueError, TypeError, KeyError, AttributeError):
        return None


def _make_plan(args: CleanOldLogsArgs, log_dirs: AllowedDirs, ctx: ToolContext) -> Plan:
    roots = [log_dirs.resolve(args.path)] if args.path else list(log_dirs.real_roots())
    now = time.time()
    cutoff = now - args.older_than_days * 86400
    candidates: dict[str, PlannedFile] = {}
    complete = True
    parents: dict[str, os.stat_result] = {}
    for root in roots:
        if not root.is_dir():
            raise ToolCallError(f"{root} is not a directory")
        for path, info in walk_files(root):
            if ctx.expired():
                complete = False
                break
            if info.st_mtime >= cutoff or not _name_matches(os.path.basename(path), args.name_glob):
                continue
            parent = os.path.dirname(path)
            if parent not in parents:
                parents[parent] = os.stat(parent)
            candidates[path] = PlannedFile(
                path=path,
                size=info.st_size,
                mtime_ns=info.st_mtime_ns,
                dev=info.st_dev,
                ino=info.st_ino,
                parent_dev=parents[parent].st_dev,
                parent_ino=parents[parent].st_ino,
            )
    oldest_first = sorted(candidates.values(), key=lambda item: (item.mtime_ns, item.path))
    return Plan(now, cutoff, tuple(oldest_first[: args.max_files]), len(oldest_first), complete)


def _name_matches(name: str, glob: str | None) -> bool:
    if glob:
        return fnmatch.fnmatchcase(name, glob)
    return bool(_ROTATED_NAME.search(name))


def shown_name(name: str) -> str:
    """A file name as one inert line of text: as it is when plain, else a Python-style quoted escape.

    File names are chosen by whoever can write to the log directories. Raw, a newline in one would
    start a line of its own in the dry run ("NOTE: preview only"), a backtick run would end the
    card's code block, and bidi or zero-width characters would make it read as another name. Any
    such name is shown quoted with escapes (``'app\\nNOTE.log'``); a backslash or a leading quote
    forces the quoted form too, so an escape shown is never mistaken for characters a name really has.
    """
    if name.isprintable() and "\\" not in name and "`" not in name and not name.startswith(("'", '"')):
        return name
    return _quoted(name)


def _quoted(text: str) -> str:
    """``repr(text)`` (every non-printable escaped) with backticks escaped as well."""
    return repr(text).replace("`", "\\x60")


def _describe_plan(plan: Plan, args: CleanOldLogsArgs) -> str:
    names = f"named {_quoted(args.name_glob)}" if args.name_glob else "with rotated or compressed log names"
    criteria = f"last modified before {format_mtime(plan.cutoff)} ({args.older_than_days} days), {names}"
    if not plan.files:
        return f"Dry run: nothing to delete: no file {criteria}."
    lines = [
        f"Dry run: clean_old_logs would delete {len(plan.files)} files ({human_bytes(plan.total_bytes)}), "
        f"{criteria}:"
    ]
    rows = [
        [human_bytes(item.size), format_mtime(item.mtime_ns / 1e9), shown_name(item.path)]
        for item in plan.files
    ]
    lines.append(table(["size", "modified", "path"], rows, right=(0,)))
    if plan.matched > len(plan.files):
        lines.append(
            f"({plan.matched - len(plan.files)} more files match; only the oldest {len(plan.files)})"
        )
    if not plan.complete:
        lines.append("(the search stopped at its time limit; only the files listed)")
    lines.append("Approving deletes only these files; any that changes before then is skipped.")
    return "\n".join(lines)


def _execute_plan(plan: Plan, args: CleanOldLogsArgs, log_dirs: AllowedDirs) -> ToolResult:
    deleted: list[PlannedFile] = []
    skipped: list[str] = []
    failed: list[str] = []
    roots = [log_dirs.resolve(args.path)] if args.path else list(log_dirs.real_roots())
    cutoff = time.time() - args.older_than_days * 86400
    for item in plan.files[: args.max_files]:
        outside = _outside_criteria(item, args, roots, cutoff)
        if outside is not None:
            skipped.append(f"{item.path} ({outside})")
            continue
        try:
            reason = _delete_if_unchanged(item, log_dirs)
        except OSError as exc:
            failed.append(f"{item.path}: {exc.strerror or exc}")
            continue
        if reason is None:
            deleted.append(item)
        else:
            skipped.append(f"{item.path} ({reason})")
    freed = human_bytes(sum(item.size for item in deleted))
    lines = [f"Deleted {len(deleted)} of {len(plan.files)} planned files, freeing {freed}."]
    if skipped:
        lines.append(f"Skipped {len(skipped)}, changed since the dry run:")
        lines.extend(f"  {entry}" for entry in skipped)
    if failed:
        lines.append(f"Failed {len(failed)}:")
        lines.extend(f"  {entry}" for entry in failed)
    return ToolResult(output="\n".join(lines), is_error=bool(failed) and not deleted)


def _outside_criteria(
    item: PlannedFile, args: CleanOldLogsArgs, roots: list[Path], cutoff: float
) -> str | None:
    """Why a planned file no longer fits the approved call's own criteria (``None``: it does).

    The plan comes back through Redis: whatever it lists, only files the call itself would have
    chosen can be deleted.
    """
    path = Path(item.path)
    if not any(path.is_relative_to(root) for root in roots):
        return "not under the approved path"
    if not _name_matches(path.name, args.name_glob):
        return "its name does not match"
    if item.mtime_ns / 1e9 >= cutoff:
        return f"not older than {args.older_than_days} days"
    return None


def _delete_if_unchanged(item: PlannedFile, log_dirs: AllowedDirs) -> str | None:
    """Delete the planned file if it is exactly as planned; else the reason it was skipped.

    The directory is opened and checked by inode, and the file is looked up and unlinked relative
    to that open directory, so swapping a path component for a symlink cannot redirect the delete.
    """
    parent, name = os.path.split(item.path)
    try:
        directory = os.open(parent, os.O_RDONLY | os.O_DIRECTORY | os.O_NOFOLLOW)
    except FileNotFoundError:
        return "its directory is gone"
    except OSError:
        return "its directory is no longer a plain directory"
    try:
        held = os.fstat(directory)
        if (held.st_dev, held.st_ino) != (item.parent_dev, item.parent_ino):
            return "its directory was replaced"
        if not log_dirs.contains(Path(os.path.realpath(parent))):
            return "it is no longer under the log directories"
        try:
            info = os.stat(name, dir_fd=directory, follow_symlinks=False)
        except FileNotFoundError:
            return "already gone"
        if not stat.S_ISREG(info.st_mode):
            return "no longer a regular file"
        if (info.st_dev, info.st_ino) != (item.dev, item.ino):
            return "replaced by another file"
        if info.st_size != item.size or info.st_mtime_ns != item.mtime_ns:
            return "modified"
        os.unlink(name, dir_fd=directory)
        return None
    finally:
        os.close(directory)
