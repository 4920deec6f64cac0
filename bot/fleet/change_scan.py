"""The runner's change scan: at start and every ``CHATOPS_CHANGES_SCAN_SECONDS``, what changed on
its host goes into its target's change journal (``bot.changes.journal``).

What a scan looks at is injected (``scan``: the collectors of ``tools.changes``); this thread only
calls it, from a thread of its own like the heartbeat's (a long tool call does not hold it up),
and appends what it returns with the runner's own key: a runner can seal changes of its own
target only, so a change a scan returns for another target is dropped (and logged), never stored
under a name the runner does not hold. A scan that raises, or a journal write that fails, is
logged and the next scan comes at its time: collecting changes is a help, never a reason for the
runner to stop taking jobs.
"""

from __future__ import annotations

import logging
import threading
from collections.abc import Callable, Sequence

from bot.changes.journal import ChangeJournal
from tools.changes.record import Change

log = logging.getLogger(__name__)

Scan = Callable[[], Sequence[Change]]
"""One scan of the host: the changes seen since the last one (the collectors keep their own state)."""


class ChangeScanThread:
    """Calls ``scan`` at ``start`` and every ``interval`` seconds until ``stop``."""

    def __init__(
        self,
        scan: Scan,
        journal: ChangeJournal,
        target: str,
        interval: float,
        on_scanned: Callable[[], None] | None = None,
    ) -> None:
        if interval <= 0:
            raise ValueError("the scan interval must be positive")
        self._scan = scan
        self._journal = journal
        self._target = target
        self._on_scanned = on_scanned  # the runner's heartbeat says when its journal was brought up to date
        self.interval = interval
        self.scans = 0  # scans that completed (whatever they found)
        self.failures = 0  # scans that raised, or whose changes could not be stored
        self.scanned = threading.Event()  # set after every completed scan (tests wait on it)
        self._stopped = threading.Event()
        self._thread = threading.Thread(target=self._run, name="chatops-change-scan", daemon=True)

    def start(self) -> None:
        self._thread.start()  # the first scan at once, in the thread: a slow host never delays the runner

    @property
    def running(self) -> bool:
        return self._thread.is_alive()

    def stop(self, timeout: float | None = None) -> None:
        self._stopped.set()
        if self._thread.is_alive() and self._thread is not threading.current_thread():
            self._thread.join(timeout)

    def _run(self) -> None:
        while True:
            self.scan_once()
            if self._stopped.wait(self.interval):
                return

    def scan_once(self) -> int:
        """One scan and its append; how many changes were new (0 after a failure, which is logged)."""
        try:
            changes = self._own(self._scan())
            added = self._journal.append(changes) if changes else 0
        except Exception:  # a collector's bug or a Redis outage: the runner goes on
            self.failures += 1
            log.exception("the change scan of %s failed", self._target)
            return 0
        self.scans += 1
        if self._on_scanned is not None:
            self._on_scanned()
        self.scanned.set()
        if added:
            log.info("the change scan of %s recorded %d change(s)", self._target, added)
        return added

    def _own(self, changes: Sequence[Change]) -> list[Change]:
        own = [change for change in changes if change.target == self._target]
        if len(own) < len(changes):
            log.warning(
                "the change scan of %s returned %d change(s) of other targets: dropped",
                self._target,
                len(changes) - len(own),
            )
        return own
