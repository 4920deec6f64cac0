"""``clean_old_logs``: delete old rotated log files, bound to the dry run the approver saw.

The dry run computes a plan (each file with its inode, size and mtime, and its directory's inode)
and stores it under a key made of the arguments. The approved run deletes only the files of that
stored plan, and only those still exactly as planned: a file that grew, was replaced, or whose
directory was swapped is skipped and reported. A new file that matches the criteria after the dry
run is never touched. Without a stored plan (expired, or made on another host) the run refuses.
A plan is used once. A repeated dry run for the same arguments shows the stored plan again,
so an approval resumed later by another worker matches what the approver saw.
"""

from __future__ import annotations

import fnmatch
import hashlib
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
from tools.text import human_bytes, table

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


class PlanStore:
    """Plans on disk (a private directory), so any worker on this host can run an approved plan."""

    def __init__(self, directory: Path, ttl_seconds: float) -> None:
        self.directory = directory
        self.ttl_seconds = ttl_seconds

    def key(self, args: BaseModel, roots: tuple[Path, ...]) -> str:
        canonical = json.dumps([args.model_dump(mode="json"), [str(root) for root in roots]], sort_keys=True)
        return hashlib.sha256(canonical.encode()).hexdigest()[:32]

    def save(self, key: str, plan: Plan) -> None:
        self._ensure_private_dir()
        payload = {"version": _PLAN_VERSION, **asdict(plan)}
        temporary = self.directory / f".{key}.{os.getpid()}.tmp"
        temporary.write_text(json.dumps(payload))
        os.replace(temporary, self._file(key))

    def load(self, key: str) -> Plan | None:
        """The stored plan, or ``None`` when there is none or it has expired."""
        try:
            payload = json.loads(self._file(key).read_text())
        except (OSError, ValueError):
            return None
        if payload.get("version") != _PLAN_VERSION or time.time() - payload["created"] > self.ttl_seconds:
            self.discard(key)
            return None
        files = tuple(PlannedFile(**item) for item in payload["files"])
        return Plan(payload["created"], payload["cutoff"], files, payload["matched"], payload["complete"])

    def discard(self, key: str) -> None:
        self._file(key).unlink(missing_ok=True)

    def _file(self, key: str) -> Path:
        return self.directory / f"clean_old_logs-{key}.json"

    def _ensure_private_dir(self) -> None:
        self.directory.mkdir(mode=0o700, parents=True, exist_ok=True)
        info = self.directory.lstat()
        # Another user's (or a world-writable) directory could feed us a forged plan.
        if not stat.S_ISDIR(info.st_mode) or info.st_uid != os.getuid() or info.st_mode & 0o022:
            raise ToolCallError(f"the tool state directory {self.directory} is not private to this user")


def cleanup_tools(log_dirs: AllowedDirs, store: PlanStore) -> list[FunctionTool[Any]]:
    """``clean_old_logs`` bound to the log directories and the plan store."""

    def plan_key(args: CleanOldLogsArgs) -> str:
        return store.key(args, log_dirs.real_roots())

    def dry_run(args: CleanOldLogsArgs, ctx: ToolContext) -> ToolResult:
        key = plan_key(args)
        plan = store.load(key)
        reused = plan is not None
        if plan is None:
            plan = _make_plan(args, log_dirs, ctx)
            store.save(key, plan)
        return ToolResult(output=_describe_plan(plan, args, reused))

    def clean_old_logs(args: CleanOldLogsArgs, ctx: ToolContext) -> ToolResult:
        key = plan_key(args)
        plan = store.load(key)
        if plan is None:
            minutes = store.ttl_seconds / 60
            return error_result(
                "no dry run is on record for these arguments on this host (plans expire after "
                f"{minutes:.0f} min); nothing was deleted. Call clean_old_logs again so a fresh dry run "
                "is shown for approval."
            )
        store.discard(key)  # used once, before acting: a crash half-way never replays it
        return _execute_plan(plan, log_dirs)

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
        )
    ]


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


def _describe_plan(plan: Plan, args: CleanOldLogsArgs, reused: bool) -> str:
    names = f"named {args.name_glob!r}" if args.name_glob else "with rotated or compressed log names"
    criteria = f"last modified before {format_mtime(plan.cutoff)} ({args.older_than_days} days), {names}"
    if not plan.files:
        return f"Dry run: nothing to delete: no file {criteria}."
    lines = [
        f"Dry run: clean_old_logs would delete {len(plan.files)} files ({human_bytes(plan.total_bytes)}), "
        f"{criteria}:"
    ]
    rows = [[human_bytes(item.size), format_mtime(item.mtime_ns / 1e9), item.path] for item in plan.files]
    lines.append(table(["size", "modified", "path"], rows, right=(0,)))
    if plan.matched > len(plan.files):
        lines.append(
            f"({plan.matched - len(plan.files)} more files match; only the oldest {len(plan.files)})"
        )
    if not plan.complete:
        lines.append("(the search stopped at its time limit; only the files listed)")
    if reused:
        lines.append(f"(this is the dry run made at {format_mtime(plan.created)})")
    lines.append("Approving deletes only these files; any that changes before then is skipped.")
    return "\n".join(lines)


def _execute_plan(plan: Plan, log_dirs: AllowedDirs) -> ToolResult:
    deleted: list[PlannedFile] = []
    skipped: list[str] = []
    failed: list[str] = []
    for item in plan.files:
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
