"""Watched files and trees: each change a unified diff of redacted snapshots, seen by a scan.

Three kinds of tree are watched the same way: the target's ``watch`` paths (``FILE``), the
systemd unit directories (``UNIT``) and the crontabs (``CRONTAB``). A scan walks each tree
(never following a link; at most ``max_files_per_tree`` files, in name order, and told when
there are more), stats every file and reads only those whose size, mtime or inode changed
(``tools.changes.content``). A tree seen for the first time is a baseline: its files are
snapshotted, none reported as created. Its state is ``watch.json`` (per tree, per file: size,
mtime_ns, inode, type, keyed digest) and one redacted snapshot per text file, in the state dir.
"""

from __future__ import annotations

import difflib
import hashlib
import os
import stat
from collections.abc import Callable, Sequence
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

from tools.changes.content import (
    BINARY,
    HUGE,
    LINK,
    TEXT,
    UNREADABLE,
    Content,
    Limits,
    leads_out,
    read_content,
    shown_path,
)
from tools.changes.record import CRONTAB, FILE, UNIT, Change
from tools.changes.state import StateDir

STATE_FILE = "watch.json"
_PREFIX = {FILE: "", UNIT: "unit file ", CRONTAB: "crontab "}
Entry = list[Any]  # [size, mtime_ns, inode, type, digest]
_TOLD_PER_FILE = ("unreadable", "link", "huge")


@dataclass(frozen=True)
class WatchTree:
    """A file or a directory watched recursively; ``kind`` is the kind of its changes."""

    path: Path
    kind: str = FILE

    @property
    def key(self) -> str:
        return f"{self.kind}:{self.path}"


@dataclass(frozen=True)
class _Saved:
    """The state of the last scan: per tree its files (``None``: not seen yet), and what was told."""

    trees: dict[str, dict[str, Entry] | None]
    told: frozenset[str]


@dataclass
class _Scan:
    """What one scan of the trees found."""

    target: str
    source: str
    now: float
    told_before: set[str]
    changes: list[Change] = field(default_factory=list)
    problems: dict[str, str] = field(default_factory=dict)  # key -> message, told once
    dropped: int = 0


class WatchedFiles:
    def __init__(
        self,
        trees: Sequence[WatchTree],
        store: StateDir,
        redact: Callable[[str], str],
        limits: Limits,
        shown: Callable[[Path | str], str] = str,
    ) -> None:
        self._trees = _distinct(trees)
        self._shown = shown  # a path as the host names it (``HostPaths.shown``)
        self._store = store
        self._redact = redact
        self._limits = limits
        self._cache: tuple[tuple[int, int, int] | None, _Saved] | None = None
        own = os.stat(store.root)
        self._own = (own.st_dev, own.st_ino)  # the state dir, if a watched tree holds it

    def scan(self, target: str, source: str, now: float) -> tuple[list[Change], list[str]]:
        """The changes since the last scan, and the problems not told before."""
        saved, damaged = self._load()
        problems: list[str] = []
        if damaged:
            problems.append(
                "watched files: the saved state was unreadable: a fresh baseline, no changes this scan"
            )
        known = saved.trees if saved is not None else {}
        told_before = set(saved.told) if saved is not None else set()
        scan = _Scan(target, source, now, told_before)
        trees: dict[str, dict[str, Entry] | None] = {}
        dirty = saved is None
        for tree in self._trees:
            files, changed = self._scan_tree(tree, known.get(tree.key), scan)
            trees[tree.key] = files
            dirty = dirty or changed or known.get(tree.key) is None
        dirty = dirty or set(known) != set(trees) or set(scan.problems) != told_before
        if dirty:
            told = sorted(scan.problems)
            saving = {"trees": {key: {"files": files} for key, files in trees.items()}, "told": told}
            self._store.write_json(STATE_FILE, saving)
            self._cache = (self._store.signature(STATE_FILE), _Saved(trees, frozenset(told)))
        problems += [message for key, message in scan.problems.items() if key not in told_before]
        if scan.dropped:
            problems.append(
                f"watched files: {scan.dropped} more changes this scan than the {self._limits.max_changes} kept"
            )
        return scan.changes, problems

    def _load(self) -> tuple[_Saved | None, bool]:
        """The saved state (``None``: a baseline), and whether a saved one was unreadable. What
        this scanner wrote last is kept in memory and used while the file is the one it wrote."""
        lost_key, self._store.fresh_key = self._store.fresh_key, False
        signature = self._store.signature(STATE_FILE)
        if signature is None:
            return None, False
        if not lost_key and self._cache is not None and self._cache[0] == signature:
            return self._cache[1], False
        state = self._store.read_json(STATE_FILE)
        trees = state.get("trees") if state is not None else None
        if lost_key or state is None or not isinstance(trees, dict):
            return None, True
        told = state.get("told")
        return _Saved(
            {
                key: _entries(value.get("files")) if isinstance(value, dict) else None
                for key, value in trees.items()
            },
            frozenset(key for key in told if isinstance(key, str)) if isinstance(told, list) else frozenset(),
        ), False

    def _scan_tree(
        self, tree: WatchTree, old: dict[str, Entry] | None, scan: _Scan
    ) -> tuple[dict[str, Entry], bool]:
        walked, capped = self._walk(tree, scan)
        baseline = old is None
        before: dict[str, Entry] = old or {}
        files: dict[str, Entry] = {}
        changed = False
        for name, (size, mtime, inode, is_link) in walked.items():
            entry = before.get(name)
            if entry is not None and _same_stat(entry, size, mtime, inode, is_link):
                files[name] = entry
                if scan.told_before:  # what was told of it still holds: told, not told again
                    for key in (f"{kind}:{name}" for kind in _TOLD_PER_FILE):
                        if key in scan.told_before:
                            scan.problems[key] = ""
                continue
            changed = True
            path = Path(name)
            try:
                content = read_content(path, self._limits, self._store.digest, self._redact)
            except FileNotFoundError:
                continue  # gone between the walk and the read: the next scan tells
            files[name] = [size, mtime, inode, content.type, content.digest]
            self._tell(tree, path, content, scan)
            if baseline:
                self._keep(tree, name, content)
            else:
                self._compare(tree, name, entry, content, scan)
        for name, entry in before.items():
            if name in files:
                continue
            if capped and os.path.lexists(name):
                continue  # past the cap now, not deleted
            changed = True
            self._report(tree, name, "deleted", self._diff(tree, name, entry, None), scan)
            self._store.remove(_snapshot_name(tree, name))
        return files, changed

    def _walk(self, tree: WatchTree, scan: _Scan) -> tuple[dict[str, tuple[int, int, int, bool]], bool]:
        """Every regular file and link in the tree, by path: (size, mtime_ns, inode, is a link)."""
        found: dict[str, tuple[int, int, int, bool]] = {}
        cap = self._limits.max_files_per_tree
        try:
            top = os.lstat(tree.path)
        except FileNotFoundError:
            return found, False
        except OSError as error:
            scan.problems[f"list:{tree.path}"] = (
                f"{shown_path(self._shown(tree.path))}: cannot read it: {error.strerror}"
            )
            return found, False
        if not stat.S_ISDIR(top.st_mode):
            if stat.S_ISREG(top.st_mode) or stat.S_ISLNK(top.st_mode):
                found[str(tree.path)] = _signature(top)
            return found, False
        stack = [str(tree.path)]
        while stack:
            directory = stack.pop()
            try:
                with os.scandir(directory) as listing:
                    entries = sorted(listing, key=lambda entry: entry.name)
            except OSError as error:
                scan.problems[f"list:{directory}"] = (
                    f"{shown_path(self._shown(directory))}: cannot list it: {error.strerror}"
                )
                continue
            below = []
            for entry in entries:
                try:
                    info = entry.stat(follow_symlinks=False)
                except OSError:
                    continue
                if stat.S_ISDIR(info.st_mode):
                    if (info.st_dev, info.st_ino) != self._own:  # never our own snapshots
                        below.append(entry.path)
                elif stat.S_ISREG(info.st_mode) or stat.S_ISLNK(info.st_mode):
                    if len(found) >= cap:
                        scan.problems[f"cap:{tree.path}"] = (
                            f"{shown_path(self._shown(tree.path))}: more than {cap} files: only the first {cap} are watched"
                        )
                        return found, True
                    found[entry.path] = _signature(info)
            stack += reversed(below)  # the first folder by name is walked next
        return found, False

    def _tell(self, tree: WatchTree, path: Path, content: Content, scan: _Scan) -> None:
        if content.type == UNREADABLE:
            scan.problems[f"unreadable:{path}"] = (
                f"{shown_path(self._shown(path))}: cannot read it ({content.error}): not watched"
            )
        elif content.type == LINK and tree.kind == FILE and leads_out(path, tree.path):
            scan.problems[f"link:{path}"] = (
                f"{shown_path(self._shown(path))}: a symbolic link out of the watched tree: not followed (its target is watched as a name)"
            )
        elif content.type == HUGE:
            scan.problems[f"huge:{path}"] = (
                f"{shown_path(self._shown(path))}: larger than {self._limits.max_text_bytes} bytes: watched by size and digest only"
            )

    def _keep(self, tree: WatchTree, name: str, content: Content) -> None:
        if content.type in (TEXT, LINK):
            self._store.write_bytes(_snapshot_name(tree, name), content.text.encode(), durable=False)
        else:
            self._store.remove(_snapshot_name(tree, name))

    def _compare(
        self, tree: WatchTree, name: str, entry: Entry | None, content: Content, scan: _Scan
    ) -> None:
        if entry is not None and entry[3] == content.type and entry[4] == content.digest:
            return  # touched, same content
        if entry is not None and content.type == UNREADABLE and entry[3] == UNREADABLE:
            return
        verb = "created" if entry is None else "edited"
        diff = self._diff(tree, name, entry, content)
        note = _note(entry, content)
        if entry is not None and content.type == TEXT and entry[3] == TEXT and not diff:
            note = " (only redacted content changed)"
        self._keep(tree, name, content)
        self._report(tree, name, f"{verb}", diff, scan, note)

    def _diff(self, tree: WatchTree, name: str, entry: Entry | None, content: Content | None) -> str:
        old = ""
        if entry is not None and entry[3] in (TEXT, LINK):
            kept = self._store.read_bytes(_snapshot_name(tree, name), self._limits.max_text_bytes * 4)
            old = kept.decode("utf-8", errors="replace") if kept is not None else ""
        if content is not None and content.type not in (TEXT, LINK):
            return ""  # binary, huge, unreadable: the note says what changed
        new = content.text if content is not None else ""
        if old == new:
            return ""
        old_lines, new_lines = old.splitlines(), new.splitlines()
        if max(len(old_lines), len(new_lines)) > self._limits.max_diff_lines:
            return f"[not diffed: more than {self._limits.max_diff_lines} lines]"
        shown = shown_path(self._shown(name))
        before = f"a{shown}" if entry is not None else "/dev/null"
        after = f"b{shown}" if content is not None else "/dev/null"
        return "\n".join(difflib.unified_diff(old_lines, new_lines, before, after, lineterm=""))

    def _report(self, tree: WatchTree, name: str, verb: str, diff: str, scan: _Scan, note: str = "") -> None:
        if len(scan.changes) >= self._limits.max_changes:
            scan.dropped += 1
            return
        what = f"{_PREFIX[tree.kind]}{verb} {shown_path(self._shown(name))}{note}"
        change = Change(scan.target, tree.kind, scan.now, what, diff=diff, source=scan.source, seen=True)
        scan.changes.append(change.bounded())


def _note(entry: Entry | None, content: Content) -> str:
    if content.type == HUGE:
        size = f"{entry[0]} -> {content.size}" if entry is not None else str(content.size)
        return f" (large file, {size} bytes; content not kept)"
    if content.type == BINARY:
        size = f"{entry[0]} -> {content.size}" if entry is not None else str(content.size)
        return f" (binary, {size} bytes)"
    if content.type == UNREADABLE:
        return f" (cannot read it: {content.error})"
    return ""


def _entries(saved: object) -> dict[str, Entry] | None:
    """A tree's saved files, each of the right shape (a damaged entry is read as a new file)."""
    if not isinstance(saved, dict):
        return None
    return {
        name: entry
        for name, entry in saved.items()
        if isinstance(entry, list)
        and len(entry) == 5
        and all(isinstance(value, int) and not isinstance(value, bool) for value in entry[:3])
        and all(isinstance(value, str) for value in entry[3:])
    }


def _signature(info: os.stat_result) -> tuple[int, int, int, bool]:
    return info.st_size, info.st_mtime_ns, info.st_ino, stat.S_ISLNK(info.st_mode)


def _same_stat(entry: Entry, size: int, mtime: int, inode: int, is_link: bool) -> bool:
    return (
        len(entry) == 5
        and entry[0] == size
        and entry[1] == mtime
        and entry[2] == inode
        and (entry[3] == LINK) == is_link
    )


def _snapshot_name(tree: WatchTree, name: str) -> str:
    key = hashlib.sha256(f"{tree.key}\x00{name}".encode(errors="surrogateescape")).hexdigest()[:32]
    return f"snapshots/{key[:2]}/{key}"


def _distinct(trees: Sequence[WatchTree]) -> list[WatchTree]:
    """Each tree once: ``/lib/systemd/system`` is ``/usr/lib/systemd/system`` on merged-/usr hosts."""
    seen: set[tuple[str, str]] = set()
    kept = []
    for tree in trees:
        where = (tree.kind, os.path.realpath(tree.path.parent) + "/" + tree.path.name)
        if where not in seen:
            seen.add(where)
            kept.append(tree)
    return kept
