"""The scanner's files in its state directory: written atomically, read defensively.

Everything the scanner remembers between scans (and across a restart of its process) lives in
one directory given by the runner (``CHATOPS_RUNNER_STATE_DIR``, one folder per target): a JSON
file per collector, the watched files' redacted snapshots, and a random key that makes the
content digests useless to anyone who reads the directory without it. Each file is written to a
temporary name, fsynced and renamed over the old one, so a crash leaves the old or the new
version, never half of one. A file that is missing, unreadable or not the JSON object it should
be reads as ``None``: the collector starts a fresh baseline, it never crashes.
"""

from __future__ import annotations

import contextlib
import hashlib
import hmac
import json
import os
import secrets
from pathlib import Path
from typing import Any

MAX_STATE_BYTES = 64 * 1024 * 1024  # a state file larger than this is not ours: a fresh baseline
KEY_FILE = "digest.key"


class StateDir:
    """Atomic JSON files and opaque blobs under ``root`` (created 0700 when missing)."""

    def __init__(self, root: Path) -> None:
        self.root = root
        root.mkdir(mode=0o700, parents=True, exist_ok=True)
        self.fresh_key = False  # a new key: every digest kept before it means nothing now
        self._key = self._load_key()

    def read_json(self, name: str) -> dict[str, Any] | None:
        """The object in ``name``, or ``None`` when it is missing or not a readable JSON object."""
        data = self.read_bytes(name, MAX_STATE_BYTES)
        if data is None:
            return None
        try:
            value = json.loads(data)
        except ValueError:
            return None
        return value if isinstance(value, dict) else None

    def write_json(self, name: str, value: dict[str, Any]) -> None:
        self.write_bytes(name, json.dumps(value, separators=(",", ":"), sort_keys=True).encode())

    def read_bytes(self, name: str, limit: int) -> bytes | None:
        try:
            with open(self.root / name, "rb") as handle:
                data = handle.read(limit + 1)
        except OSError:
            return None
        return data if len(data) <= limit else None

    def write_bytes(self, name: str, data: bytes, durable: bool = True) -> None:
        """``name`` holds ``data`` in full, or keeps what it held (temporary file, rename; fsynced
        first when ``durable``: a snapshot lost in a power cut only makes one diff longer)."""
        path = self.root / name
        self._make_dirs(path.parent)
        temporary = path.with_name(f".{path.name}.{os.getpid()}.tmp")
        fd = os.open(temporary, os.O_WRONLY | os.O_CREAT | os.O_TRUNC, 0o600)
        try:
            with os.fdopen(fd, "wb") as handle:
                handle.write(data)
                handle.flush()
                if durable:
                    os.fsync(handle.fileno())
            os.replace(temporary, path)
        except BaseException:
            with contextlib.suppress(OSError):
                temporary.unlink()
            raise

    def _make_dirs(self, directory: Path) -> None:
        """``directory`` (under the root) and each folder above it, private (0700)."""
        if directory == self.root or directory.is_dir():
            return
        self._make_dirs(directory.parent)
        directory.mkdir(mode=0o700, exist_ok=True)

    def signature(self, name: str) -> tuple[int, int, int] | None:
        """(inode, size, mtime_ns) of ``name``: each atomic write makes a new one; ``None``: missing."""
        try:
            info = os.stat(self.root / name)
        except OSError:
            return None
        return info.st_ino, info.st_size, info.st_mtime_ns

    def remove(self, name: str) -> None:
        with contextlib.suppress(OSError):
            (self.root / name).unlink()

    def digest(self, data: bytes) -> str:
        """A keyed digest of content: equal content, equal digest; without the key it tells
        nothing about a low-entropy secret in the file (no dictionary attack on the state)."""
        return hmac.new(self._key, data, hashlib.sha256).hexdigest()[:32]

    def _load_key(self) -> bytes:
        key = self.read_bytes(KEY_FILE, 64)
        if key is not None and len(key) == 32:
            return key
        key = secrets.token_bytes(32)
        self.write_bytes(KEY_FILE, key)
        self.fresh_key = True
        return key
