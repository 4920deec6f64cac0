"""What ``chatops eval run`` prints while scenarios run: a line per finished run, and on a terminal
a progress bar under them.

On a terminal (the stream is a TTY) the bar is the last line, redrawn when a run starts or ends
and every second (the elapsed time): ``[######------] 6/16  5 passed  1 failed  12 s  running:
db-01-quiet #1, web-03-oom #1``. Anywhere else (CI logs, a pipe) there is no bar and no escape
code: one plain line per finished run, in the order they finish, as a log reader wants.
"""

from __future__ import annotations

import shutil
import threading
import time
from typing import TextIO

from emulator.eval.runner import ScenarioOutcome

BAR_WIDTH = 24


def verdict(outcome: ScenarioOutcome) -> str:
    if outcome.replay == "stale":  # the recording no longer answers it: neither passed nor failed
        return "stale"
    return "passed" if outcome.score.passed else "FAILED"


def finished_line(outcome: ScenarioOutcome) -> str:
    return (
        f"{outcome.scenario.name} #{outcome.repeat}: {verdict(outcome)} {outcome.score.scores()} "
        f"({outcome.seconds:.1f} s run, {outcome.total_seconds:.1f} s in all)"
    )


class Progress:
    """Thread-safe: the suite's runs report from their own threads."""

    def __init__(self, total: int, stream: TextIO, *, tty: bool | None = None) -> None:
        self.total = total
        self.stream = stream
        self.tty = stream.isatty() if tty is None else tty
        self.passed = self.failed = self.stale = 0
        self.running: list[str] = []
        self._began = time.monotonic()
        self._lock = threading.Lock()
        self._closed = threading.Event()
        self._ticker: threading.Thread | None = None
        if self.tty:
            self._ticker = threading.Thread(target=self._tick, name="eval-progress", daemon=True)
            self._ticker.start()

    def started(self, name: str, repeat: int) -> None:
        with self._lock:
            self.running.append(f"{name} #{repeat}")
            self._draw()

    def finished(self, outcome: ScenarioOutcome) -> None:
        with self._lock:
            self._forget(outcome.scenario.name, outcome.repeat)
            if outcome.replay == "stale":
                self.stale += 1
            elif outcome.score.passed:
                self.passed += 1
            else:
                self.failed += 1
            self._print(finished_line(outcome))

    def abandoned(self, name: str, repeat: int) -> None:
        """A run that ended without an outcome (the harness's error, said elsewhere)."""
        with self._lock:
            self._forget(name, repeat)
            self._draw()

    def close(self) -> None:
        """Stop redrawing and leave the terminal's line empty for what comes next."""
        self._closed.set()
        if self._ticker is not None:
            self._ticker.join()
        with self._lock:
            if self.tty:
                self.stream.write("\r\x1b[K")
                self.stream.flush()

    def bar(self) -> str:
        done = self.passed + self.failed + self.stale
        filled = BAR_WIDTH * done // self.total if self.total else BAR_WIDTH
        text = f"[{'#' * filled}{'-' * (BAR_WIDTH - filled)}] {done}/{self.total}  "
        text += f"{self.passed} passed  {self.failed} failed  "
        text += f"{self.stale} stale  " if self.stale else ""
        text += f"{time.monotonic() - self._began:.0f} s"
        if self.running:
            text += "  running: " + ", ".join(self.running)
        return text

    def _forget(self, name: str, repeat: int) -> None:
        label = f"{name} #{repeat}"
        if label in self.running:
            self.running.remove(label)

    def _print(self, line: str) -> None:
        if self.tty:
            self.stream.write(f"\r\x1b[K{line}\n")
            self._draw()
        else:
            self.stream.write(line + "\n")
            self.stream.flush()

    def _draw(self) -> None:
        if self.tty and not self._closed.is_set():
            width = shutil.get_terminal_size().columns - 1  # a wrapped bar could not be redrawn
            self.stream.write(f"\r\x1b[K{self.bar()[:width]}")
            self.stream.flush()

    def _tick(self) -> None:
        while not self._closed.wait(1.0):
            with self._lock:
                self._draw()
