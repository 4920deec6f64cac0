"""The runner's own record of the grants it spent: once means once, even against a Redis writer.

The execution mark in Redis (``bot.fleet.executions``) stops a retried job from running an approved
call twice, but whoever can write Redis can delete it; a grant is valid for minutes, so deleting
the mark and pushing the same job again would run the call again. The runner therefore spends each
grant on the host first: one file per execution under ``CHATOPS_RUNNER_STATE_DIR``, created with
``O_CREAT | O_EXCL`` (of two jobs for one grant, in one runner process or two on the host, exactly
one creates it) and fsynced, file and directory, before the Redis claim and before the tool runs.
A file is kept until its grant expired (by Redis's clock, the one the grant is checked against)
and pruned a minute after; a grant past its expiry is refused by ``GrantSigner`` anyway. Nothing
in Redis can remove a file here: only someone already holding the host can.
"""

from __future__ import annotations

import contextlib
import hashlib
import json
import os
import time
from pathlib import Path

from bot.errors import BotConfigurationError

_KEEP_AFTER_EXPIRY_SECONDS = 60.0  # past the grant's expiry: clock steps of Redis's host cannot revive it
_UNREADABLE_KEEP_SECONDS = 24 * 3600.0  # a file cut short by a crash: kept a day, by its own mtime
_PRUNE_EVERY_SECONDS = 60.0


class GrantLedger:
    """The grants spent on this host, one file each in ``directory`` (created 0700 if missing)."""

    def __init__(self, directory: Path) -> None:
        self.directory = directory
        try:
            directory.mkdir(mode=0o700, parents=True, exist_ok=True)
        except OSError as error:
            raise BotConfigurationError(
                f"CHATOPS_RUNNER_STATE_DIR: cannot create {directory}: {error.strerror}"
            ) from error
        if not os.access(directory, os.W_OK | os.X_OK):
            raise BotConfigurationError(
                f"CHATOPS_RUNNER_STATE_DIR: {directory} is not writable by this runner"
            )
        self._pruned_at = float("-inf")

    def _path(self, execution_id: str) -> Path:
        return self.directory / hashlib.sha256(execution_id.encode()).hexdigest()

    def spend(self, execution_id: str, expires_at: float, now: float) -> bool:
        """Record the grant of ``execution_id`` as spent: ``True`` the first time on this host,
        ``False`` if it was spent already (the call must not run). Durable when it returns."""
        if now - self._pruned_at >= _PRUNE_EVERY_SECONDS:
            self.prune(now)
        try:
            fd = os.open(self._path(execution_id), os.O_WRONLY | os.O_CREAT | os.O_EXCL, 0o600)
        except FileExistsError:
            return False
        try:
            os.write(fd, json.dumps({"execution": execution_id, "expires_at": expires_at}).encode())
            os.fsync(fd)
        finally:
            os.close(fd)
        self._sync_directory()  # the new name itself survives a power cut
        return True

    def spent(self, execution_id: str) -> bool:
        return self._path(execution_id).exists()

    def prune(self, now: float) -> int:
        """Remove the records of grants expired over a minute ago; how many went."""
        self._pruned_at = now
        removed = 0
        for entry in os.scandir(self.directory):
            if entry.is_file() and self._expired(Path(entry.path), now):
                with contextlib.suppress(FileNotFoundError):
                    os.unlink(entry.path)
                    removed += 1
        return removed

    @staticmethod
    def _expired(path: Path, now: float) -> bool:
        try:
            expires_at = float(json.loads(path.read_text())["expires_at"])
        except (OSError, ValueError, KeyError, TypeError):
            # Being written by another runner process, or cut short by a crash: keep it a day.
            with contextlib.suppress(FileNotFoundError):
                return time.time() - path.stat().st_mtime > _UNREADABLE_KEEP_SECONDS
            return False
        return expires_at + _KEEP_AFTER_EXPIRY_SECONDS < now

    def _sync_directory(self) -> None:
        fd = os.open(self.directory, os.O_RDONLY)
        try:
            os.fsync(fd)
        finally:
            os.close(fd)
