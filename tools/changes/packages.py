"""Package changes from dpkg's log and apt's history.

dpkg's log has one line per action on one package, at its second::

    2026-12-03 10:01:02 upgrade nginx:amd64 1.24.0-1 1.24.0-2

apt's history has one stanza per transaction, with who asked (``Requested-By``) and the command::

    Start-Date: 2026-12-03  10:01:00
    Commandline: apt-get install nginx
    Requested-By: alice (1000)
    Upgrade: nginx:amd64 (1.24.0-1, 1.24.0-2), libssl3:amd64 (3.0.2-1, 3.0.2-2)
    End-Date: 2026-12-03  10:01:05

A transaction is one change (its first actions in ``what``, every action in ``diff``, ``who``
from ``Requested-By``); the dpkg lines of a package that a transaction read in the same scan
covers are not repeated. Times are the host's local time, as both logs write them. Lines that
do not parse are skipped: a hostile or damaged log yields fewer changes, never an error.
"""

from __future__ import annotations

import re
from dataclasses import dataclass
from datetime import datetime

from tools.changes.record import PACKAGE, Change

_DPKG_LINE = re.compile(
    r"(\d{4}-\d\d-\d\d \d\d:\d\d:\d\d) (install|upgrade|remove|purge) (\S{1,200}) (\S{1,200}) (\S{1,200})"
)
_APT_PACKAGE = re.compile(r"([^\s,()]{1,200}) \(([^()\n]{0,400})\)")
_APT_ACTIONS = ("Install", "Reinstall", "Upgrade", "Downgrade", "Remove", "Purge")
_SHOWN_ACTIONS = 3
_NONE = "<none>"


@dataclass(frozen=True)
class _Covered:
    """Packages an apt transaction acted on, and when: its dpkg lines are not repeated."""

    names: frozenset[str]
    start: float
    end: float


def package_changes(dpkg_text: str, apt_text: str, target: str, source: str) -> list[Change]:
    """The changes in newly read dpkg and apt text, oldest first."""
    read = (_apt_stanza(stanza, target, source) for stanza in _stanzas(apt_text))
    transactions = [found for found in read if found is not None]
    covered = [cover for _, cover in transactions]
    changes = [change.bounded() for change, _ in transactions]
    for line in dpkg_text.splitlines():
        found = _dpkg_line(line)
        if found is None:
            continue
        at, action, name, old, new = found
        if any(name in cover.names and cover.start - 1 <= at <= cover.end + 1 for cover in covered):
            continue
        changes.append(
            Change(target, PACKAGE, at, _describe(action, name, old, new), source=source).bounded()
        )
    return sorted(changes, key=lambda change: change.at)


def apt_boundary(chunk: bytes) -> int:
    """The end of the last complete stanza (its ``End-Date:`` line) in ``chunk``; 0: none yet."""
    start = chunk.rfind(b"\nEnd-Date:")
    start = start + 1 if start >= 0 else (0 if chunk.startswith(b"End-Date:") else -1)
    if start < 0:
        return 0
    end = chunk.find(b"\n", start)
    return end + 1 if end >= 0 else 0


def _dpkg_line(line: str) -> tuple[float, str, str, str, str] | None:
    match = _DPKG_LINE.fullmatch(line.strip())
    if match is None:
        return None
    at = _local_time(match[1], "%Y-%m-%d %H:%M:%S")
    if at is None:
        return None
    return at, match[2], _bare(match[3]), match[4], match[5]


def _stanzas(text: str) -> list[list[str]]:
    stanzas: list[list[str]] = [[]]
    for line in text.splitlines():
        if line.strip():
            stanzas[-1].append(line)
        elif stanzas[-1]:
            stanzas.append([])
    return [stanza for stanza in stanzas if stanza]


def _apt_stanza(lines: list[str], target: str, source: str) -> tuple[Change, _Covered] | None:
    fields: dict[str, str] = {}
    for line in lines:
        key, sep, value = line.partition(": ")
        if sep:
            fields.setdefault(key.strip(), value.strip())
    start = _local_time(" ".join(fields.get("Start-Date", "").split()), "%Y-%m-%d %H:%M:%S")
    if start is None:
        return None
    end = _local_time(" ".join(fields.get("End-Date", "").split()), "%Y-%m-%d %H:%M:%S") or start
    actions: list[str] = []
    names: set[str] = set()
    for action in _APT_ACTIONS:
        for name, versions in _APT_PACKAGE.findall(fields.get(action, "")):
            names.add(_bare(name))
            actions.append(_apt_action(action.lower(), _bare(name), versions))
    if not actions:
        return None
    shown = ", ".join(actions[:_SHOWN_ACTIONS])
    more = f" and {len(actions) - _SHOWN_ACTIONS} more" if len(actions) > _SHOWN_ACTIONS else ""
    command = fields.get("Commandline", "")
    what = f"{shown}{more}" + (f" ({command})" if command else "")
    diff = "\n".join([f"Commandline: {command}"] * bool(command) + actions)
    who = fields.get("Requested-By", "").rsplit(" (", 1)[0]
    change = Change(target, PACKAGE, start, what, who=who, diff=diff, source=source)
    return change, _Covered(frozenset(names), start, end)


def _apt_action(action: str, name: str, versions: str) -> str:
    """``upgrade nginx 1.24.0-1 -> 1.24.0-2``; apt's ``automatic`` marker dropped."""
    parts = [part.strip() for part in versions.split(",") if part.strip() and part.strip() != "automatic"]
    if action in ("upgrade", "downgrade") and len(parts) >= 2:
        return f"{action} {name} {parts[0]} -> {parts[1]}"
    return f"{action} {name} {parts[0]}" if parts else f"{action} {name}"


def _describe(action: str, name: str, old: str, new: str) -> str:
    if action == "upgrade":
        return f"upgrade {name} {old} -> {new}"
    if action == "install":
        return f"install {name} {new}" if old == _NONE else f"install {name} {old} -> {new}"
    return f"{action} {name} {old}"


def _bare(name: str) -> str:
    """``nginx`` of ``nginx:amd64``."""
    return name.split(":", 1)[0] or name


def _local_time(text: str, layout: str) -> float | None:
    try:
        at = datetime.strptime(text, layout).timestamp()  # naive: the host's local time
    except (ValueError, OverflowError, OSError):
        return None
    return at if at >= 0 else None
