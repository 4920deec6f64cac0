"""What one watched file holds, read once, bounded, never followed out of where it is.

A watched path is one of:

* ``text``: UTF-8 without NUL bytes, within ``max_text_bytes``: kept as a snapshot, **redacted
  before it is stored**, and diffed;
* ``binary``: anything else within the cap: only its size and digest are kept;
* ``huge``: over the cap: its size and the digest of its first ``max_hash_bytes`` are kept;
* ``link``: a symbolic link, never followed: its target is the content (a changed target is a
  change), and one that leads out of the watched tree is told;
* ``unreadable``: it cannot be opened (permissions): told once.

Files are opened with ``O_NOFOLLOW | O_NONBLOCK`` and checked to be regular after opening, so a
file swapped for a link or a FIFO between the walk and the read is not followed or waited on.
"""

from __future__ import annotations

import os
import stat
from collections.abc import Callable
from dataclasses import dataclass
from pathlib import Path

TEXT, BINARY, HUGE, LINK, UNREADABLE = "text", "binary", "huge", "link", "unreadable"
_CHUNK = 1024 * 1024


@dataclass(frozen=True)
class Limits:
    """The bounds of watching (per scanner)."""

    max_files_per_tree: int = 10_000
    max_text_bytes: int = 256 * 1024  # a larger file is huge: size and digest only
    max_hash_bytes: int = 16 * 1024 * 1024  # a huge file's digest covers this much of its start
    max_diff_lines: int = 20_000  # a longer text is not diffed (difflib's cost grows with both sides)
    max_changes: int = 500  # per scan; the rest are counted and told


@dataclass(frozen=True)
class Content:
    """One read of a path: its type, a keyed digest, the redacted text (text and link only)."""

    type: str
    digest: str
    size: int
    text: str = ""
    error: str = ""  # why it is unreadable


def read_content(
    path: Path,
    limits: Limits,
    digest: Callable[[bytes], str],
    redact: Callable[[str], str],
) -> Content:
    try:
        info = os.lstat(path)
        if stat.S_ISLNK(info.st_mode):
            target = os.readlink(path)
            shown = redact(f"symlink -> {shown_path(target)}\n")
            return Content(LINK, digest(os.fsencode(target)), len(target), shown)
        fd = os.open(path, os.O_RDONLY | os.O_NOFOLLOW | os.O_NONBLOCK | os.O_CLOEXEC)
    except FileNotFoundError:
        raise
    except OSError as error:
        return Content(UNREADABLE, "", 0, error=error.strerror or type(error).__name__)
    try:
        info = os.fstat(fd)
        if not stat.S_ISREG(info.st_mode):
            return Content(UNREADABLE, "", 0, error="not a regular file")
        if info.st_size > limits.max_text_bytes:
            return Content(HUGE, digest(_read(fd, limits.max_hash_bytes)), info.st_size)
        data = _read(fd, limits.max_text_bytes + 1)
    except OSError as error:
        return Content(UNREADABLE, "", 0, error=error.strerror or type(error).__name__)
    finally:
        os.close(fd)
    if len(data) > limits.max_text_bytes:  # it grew while read
        return Content(HUGE, digest(data[: limits.max_hash_bytes]), len(data))
    if b"\x00" in data:
        return Content(BINARY, digest(data), len(data))
    try:
        text = data.decode("utf-8")
    except UnicodeDecodeError:
        return Content(BINARY, digest(data), len(data))
    return Content(TEXT, digest(data), len(data), redact(text))


def leads_out(path: Path, root: Path) -> bool:
    """Whether the link at ``path`` resolves outside ``root`` (or does not resolve)."""
    try:
        resolved = Path(os.path.realpath(path))
        top = Path(os.path.realpath(root))
    except (OSError, ValueError):
        return True
    return resolved != top and top not in resolved.parents


def _read(fd: int, limit: int) -> bytes:
    parts: list[bytes] = []
    left = limit
    while left > 0:
        part = os.read(fd, min(_CHUNK, left))
        if not part:
            break
        parts.append(part)
        left -= len(part)
    return b"".join(parts)


def shown_path(path: Path | str) -> str:
    """A path as one printable line: control characters and undecodable bytes escaped."""
    return "".join(char if char.isprintable() else repr(char)[1:-1] for char in str(path))
