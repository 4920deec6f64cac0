"""A stdio server's stderr, redacted, into our log instead of the worker's raw stderr.

The SDK hands the server process a file for its stderr. A server that prints its own token (its
``env`` holds secrets from ours) or echoes a request would otherwise write it straight into the
worker's log. ``StderrRelay`` gives the SDK the write end of a pipe and logs each line read from
the other end as ``MCP server NAME (stderr): ...``, with the server's secrets and the built-in
patterns redacted, each line cut to ``MAX_LINE_CHARS``, and at most ``MAX_LINES`` lines per
session (a server that floods stderr cannot flood the log; the rest is counted once).
"""

from __future__ import annotations

import logging
import os
import threading
from collections.abc import Iterable
from typing import TextIO

from tools.safety import Redactor

log = logging.getLogger(__name__)
MAX_LINE_CHARS = 1000
MAX_LINES = 1000
READ_LIMIT_CHARS = 64 * 1024


class StderrRelay:
    """One session's stderr pipe and the thread logging what comes out of it."""

    def __init__(self, server: str, secrets: Iterable[str] = ()) -> None:
        self.server = server
        self._redact = Redactor(secrets=secrets).redact
        read_fd, write_fd = os.pipe()
        self._reader = os.fdopen(read_fd, "r", encoding="utf-8", errors="replace")
        self.writer: TextIO = os.fdopen(write_fd, "w", encoding="utf-8")
        """What the SDK gives the server as its stderr; ``close`` it when the session ends."""
        self._thread = threading.Thread(target=self._relay, name=f"chatops-mcp-stderr-{server}", daemon=True)
        self._thread.start()

    def close(self) -> None:
        """Close our copy of the write end: the relay ends once the server's copy is closed too."""
        self.writer.close()

    def _relay(self) -> None:
        logged = dropped = 0
        with self._reader:
            # Bounded reads: a "line" without an end is taken in pieces, never held whole.
            while chunk := self._reader.readline(READ_LIMIT_CHARS):
                text = chunk.rstrip("\n")
                if not text.strip():
                    continue
                if logged >= MAX_LINES:
                    dropped += 1
                    continue
                logged += 1
                shown = self._redact(text)  # before cutting: a cut must not split a secret
                suffix = " [cut]" if len(shown) > MAX_LINE_CHARS else ""
                log.info("MCP server %s (stderr): %s%s", self.server, shown[:MAX_LINE_CHARS], suffix)
        if dropped:
            log.warning("MCP server %s: %d more stderr lines were not logged", self.server, dropped)
